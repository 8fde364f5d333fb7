"""Split-K, cluster-arrive and tile-choice rules of the "wgmma" family, checked without a GPU.

Parameter checks and defaults are pure Python; one real nvcc build (sm_90a + sm_80, ~3 s) covers the
split-K template path (main kernel + reduction, no spills).
"""

from __future__ import annotations

import shutil

import pytest
from hgemm.evaluator.kernels.family import kernel_file
from hgemm.evaluator.kernels.wgmma_family import FAMILIES, HOPPER_SMEM_OPTIN, shared_bytes
from hgemm.evaluator.static_check import check_source
from nvcc_build import build_without_spills, entry_report

from hgemm.core.record import GpuInfo
from hgemm.core.shape import Shape

FAMILY = FAMILIES["wgmma"]
H200 = GpuInfo(name="NVIDIA H200", cc="9.0", driver="x", sm_count=132, l2_bytes=60 << 20,
               smem_per_block_optin=HOPPER_SMEM_OPTIN)  # fmt: skip
SPLIT = {
    "bm": 64,
    "bn": 128,
    "stages": 8,
    "consumers": 1,
    "group_m": 8,
    "persistent": 1,
    "epilogue": 0,
    "cluster_m": 1,
    "pingpong": 0,
    "split_k": 8,
}


def test_split_k_config_is_valid_for_a_skinny_k_heavy_shape():
    assert FAMILY.check(SPLIT, Shape(1024, 128, 16384), H200) is None


@pytest.mark.parametrize(
    ("change", "shape", "needle"),
    [
        ({"epilogue": 1}, (1024, 128, 16384), "epilogue=0"),
        ({"split_k": 16}, (1024, 128, 512), "split_k 16: fewer k-blocks than split_k"),
        ({"split_k": 64, "bm": 128, "consumers": 2, "stages": 6}, (4096, 4096, 8192), "exceed the 64 MiB workspace"),
        ({"split_k": 5}, (1024, 128, 16384), "split_k=5 not in"),
    ],
)
def test_split_k_rejections(change, shape, needle):
    reason = FAMILY.check({**SPLIT, **change}, Shape(*shape), H200)
    assert reason is not None and needle in reason


def test_params_without_split_k_still_check_and_render():
    """A configuration archived before split_k existed takes split_k=1 (OPTIONAL), in check and in render."""
    old = {k: v for k, v in SPLIT.items() if k != "split_k"} | {"epilogue": 1, "stages": 6}
    assert FAMILY.check(old, Shape(1024, 1024, 1024), H200) is None
    source = FAMILY.render(old)
    assert source.count("#define HG_SPLIT_K") == 1 and "#define HG_SPLIT_K 1\n" in source
    assert source == FAMILY.render({**old, "split_k": 1})


def test_split_k_needs_no_c_staging_memory():
    with_epi = {**SPLIT, "split_k": 1, "epilogue": 1}
    assert shared_bytes(SPLIT) == 8 * (64 * 64 * 2 + 128 * 64 * 2) + (2 * 8 + 2) * 8 + 1024
    assert shared_bytes(with_epi) == shared_bytes(SPLIT) + 64 * 128 * 2


@pytest.mark.parametrize(
    ("shape", "expect"),
    [
        ((64, 64, 12288), {"bm": 64, "bn": 64, "consumers": 1, "split_k": 16, "epilogue": 0}),
        ((1024, 128, 16384), {"bm": 64, "bn": 128, "split_k": 8}),
        ((12288, 4096, 512), {"bm": 128, "bn": 192, "cluster_m": 2, "pingpong": 1, "epi_panels": 2, "split_k": 1}),
        # 128x192 would need 6 waves (1152 columns' worth) against 4 of 128x256 (1024)
        ((4096, 4096, 4096), {"bm": 128, "bn": 256, "cluster_m": 2, "pingpong": 0, "epi_panels": 2, "stages": 4}),
        ((1024, 1024, 1024), {"bm": 64, "bn": 128, "consumers": 1, "split_k": 1}),
        ((128, 12288, 256), {"bm": 128, "bn": 128, "consumers": 2, "split_k": 1}),
        ((12288, 256, 16384), {"bm": 128, "bn": 256, "cluster_m": 2, "pingpong": 0}),
    ],
)
def test_default_params_follow_the_measured_classes(shape, expect):
    params = FAMILY.default_params(Shape(*shape), H200)
    assert params is not None and FAMILY.check(params, Shape(*shape), H200) is None
    assert {k: params[k] for k in expect} == expect


def test_split_default_leaves_no_more_units_than_sms():
    for shape in [(64, 64, 12288), (1024, 128, 16384), (128, 1024, 12288), (64, 256, 12288)]:
        p = FAMILY.default_params(Shape(*shape), H200)
        units = (shape[0] // p["bm"]) * (shape[1] // p["bn"]) * p["split_k"]
        assert p["split_k"] > 1 and units <= 132 and shape[2] // 64 // p["split_k"] >= 12


def test_cluster_arrive_has_no_cluster_scope_release():
    # A `.release.cluster` remote arrive on every k-block made 2x1 clusters 1.5-2.5x slower (H200).
    ptx = kernel_file("wgmma_ptx.cuh")
    body = ptx.split("void mbar_arrive_cluster")[1].split("}\n")[0]
    assert "mbarrier.arrive.shared::cluster.b64" in body and ".release.cluster" not in body


def test_split_render_has_reduction_and_passes_static_check():
    source = FAMILY.render(SPLIT)
    assert "#define HG_SPLIT_K 8\n" in source
    assert "hgemm_wgmma_reduce" in source and "griddepcontrol.wait" in source
    assert check_source(source) == []


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_split_k_compiles_for_sm90a_and_sm80_without_spills(tmp_path):
    log = build_without_spills(FAMILY.render(SPLIT), tmp_path)
    assert entry_report(log, "hgemm_wgmma_reduce") and entry_report(log, "hgemm_wgmma_kernel")  # both for sm_90a
