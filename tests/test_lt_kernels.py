"""hgemm.bench.lt_kernels reads the kernels cuBLASLt launched from Nsight Compute's raw CSV."""

from hgemm.bench import lt_kernels

NCU_STDOUT = """==PROF== Connected to process 4242 (/usr/bin/python3)
{"lt_algorithms": 8, "autotuned_index": 5}
==PROF== Disconnected from process 4242
"ID","Process ID","Kernel Name","gpu__time_duration.sum","launch__cluster_dim_x","launch__cluster_dim_y","launch__grid_size"
"","","","nsecond","","",""
"0","4242","nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT","87,008","2","1","132"
"1","4242","nvjet_sm90_hsh_128x160_64x5_2x1_v_bz_NNT","71,072","2","1","132"
"""


def test_parse_keeps_kernel_rows_in_launch_order_and_reads_thousands_separators():
    info, kernels = lt_kernels.parse(NCU_STDOUT)
    assert info == {"lt_algorithms": 8, "autotuned_index": 5}
    assert [k["kernel"][:30] for k in kernels] == ["nvjet_sm90_hsh_256x128_64x4_1x", "nvjet_sm90_hsh_128x160_64x5_2x"]
    assert [k["ncu_us"] for k in kernels] == [87.008, 71.072]
    assert kernels[1]["cluster"] == "2x1" and kernels[1]["grid"] == "132"


def test_parse_of_output_without_a_table_finds_no_kernels():
    assert lt_kernels.parse("==PROF== ERROR: profiling is not supported\n") == ({}, [])
