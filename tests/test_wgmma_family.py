"""The Hopper "wgmma" family without a GPU: parameter checks, defaults, rendering, and real nvcc builds.

The compile tests build two configurations for sm_90a and sm_80 (about 3 s each) and read ptxas'
report (no spills) and, where cuobjdump is available, the sm_90a SASS (HGMMA, TMA, setmaxnreg).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hgemm.evaluator.kernels import rules, wgmma_family
from hgemm.evaluator.kernels.wgmma_family import (
    FAMILIES,
    HOPPER_SMEM_OPTIN,
    SPACE,
    c_panel,
    inline_includes,
    shared_bytes,
)
from hgemm.evaluator.static_check import check_source
from nvcc_build import build_without_spills, entry_report

from hgemm.core.record import GpuInfo
from hgemm.core.shape import Shape

FAMILY = FAMILIES["wgmma"]
H100 = GpuInfo(name="NVIDIA H100 80GB HBM3", cc="9.0", driver="x", sm_count=132, l2_bytes=50 << 20,
               smem_per_block_optin=HOPPER_SMEM_OPTIN)  # fmt: skip
A100 = GpuInfo(
    name="NVIDIA A100", cc="8.0", driver="x", sm_count=108, l2_bytes=40 << 20, smem_per_block_optin=166912
)
B200 = GpuInfo(
    name="NVIDIA B200", cc="10.0", driver="x", sm_count=148, l2_bytes=126 << 20, smem_per_block_optin=232448
)
SHAPES = [(1024, 1024, 1024), (4096, 4096, 4096), (8192, 8192, 4096), (512, 4096, 4096), (16384, 4096, 256)]
BIG = {
    "bm": 128,
    "bn": 256,
    "stages": 3,
    "consumers": 2,
    "group_m": 8,
    "persistent": 1,
    "epilogue": 1,
    "cluster_m": 1,
    "pingpong": 0,
}


def test_family_is_registered_for_hopper_only():
    assert FAMILY.name == "wgmma" and FAMILY.min_cc == 9.0
    assert set(FAMILY.space) == set(SPACE)


@pytest.mark.parametrize("shape", SHAPES)
def test_default_params_are_valid_for_standard_shapes(shape):
    params = FAMILY.default_params(Shape(*shape), H100)
    assert params is not None
    assert FAMILY.check(params, Shape(*shape), H100) is None
    assert shared_bytes(params) <= HOPPER_SMEM_OPTIN


def test_default_params_take_any_shape_whose_copies_fit_the_workspace():
    for shape in ((1000, 1000, 1000), (1, 4096, 4096), (77, 5120, 5120), (4095, 4104, 1000), (1000, 1001, 1000),
                  (1000, 1000, 1001), (3000, 5000, 700), (2047, 2047, 2047), (4096, 4096, 4095), (1, 1, 1)):  # fmt: skip
        params = FAMILY.default_params(Shape(*shape), H100)
        assert params is not None and FAMILY.check(params, Shape(*shape), H100) is None, shape
        # TMA's one rule, rows of A, Bt and C 16-byte aligned: K not a multiple of 8 pads A's and Bt's rows first,
        # N not a multiple of 8 stores C from the registers, unsplit
        assert params["pad_rows"] == (1 if shape[2] % 8 else 0), shape
        if shape[1] % 8:
            assert params["epilogue"] == 0 and params["split_k"] == 1, shape
    # 8191^3: the padded rows of A and Bt (256 MiB) do not fit the 64 MiB workspace; C goes in 2048 x 2048 blocks,
    # whose rows of A and Bt do, and the tile is chosen for the block (128x256: 128 tiles, one wave)
    assert rules.pad_block(Shape(8191, 8191, 8191)) == (2048, 2048)
    assert rules.pad_block(Shape(3000, 5000, 700)) == (3000, 5000)  # the copies of the whole fit
    assert rules.pad_block(Shape(64, 16384, 16383)) == (64, 1792)  # a short side whole, the other what room is left
    assert rules.pad_block(Shape(20000, 1000, 4099)) == (7168, 1000)
    big = FAMILY.default_params(Shape(8191, 8191, 8191), H100)
    assert (big["bm"], big["bn"], big["cluster_m"], big["pad_rows"], big["split_k"]) == (128, 256, 2, 1, 1)


@pytest.mark.parametrize(
    ("change", "shape", "needle"),
    [({"pad_rows": 0}, (3000, 5000, 700), "K must be a multiple of 8"),
     ({"pad_rows": 1}, (3000, 5000, 704), "pad_rows is for K not a multiple of 8"),
     ({"pad_rows": 1, "epilogue": 0, "split_k": 2}, (512, 8192, 8191), "no room for split-K partials"),
     ({"pad_rows": 1, "epilogue": 0, "split_k": 3}, (2048, 2048, 4095), "and the split-K partials exceed"),
     ({"pad_rows": 1, "stream_k": 1}, (3000, 5000, 700), "stream_k=0"),
     ({"epilogue": 1}, (4095, 4097, 1000), "N must be a multiple of 8 for the TMA store"),
     ({"epilogue": 0, "split_k": 2}, (4095, 4097, 1000), "split-K's sum")],
)  # fmt: skip
def test_rows_tma_cannot_take_have_their_rules(change, shape, needle):
    params = FAMILY.repair({**BIG, **change})
    reason = FAMILY.check({**params, **change}, Shape(*shape), H100)
    assert reason is not None and needle in reason, reason
    # beyond the shapes hgemm takes (K <= 65536), not even 256 padded rows of A and of Bt would fit
    assert "K too long" in rules.shape_violation({**wgmma_family.OPTIONAL, **BIG, "pad_rows": 1}, (256, 256, 70001))
    # the workspace holds the copies (A's rows, then Bt's, K rounded up to 8) and after them the split-K partials
    assert rules.shape_violation({**wgmma_family.OPTIONAL, **BIG, "pad_rows": 1, "epilogue": 0, "split_k": 2},
                                 Shape(2048, 2048, 2047)) is None  # fmt: skip


def test_pad_rows_is_searched_absent_means_off_and_the_model_counts_the_copy():
    from hgemm.agent.model import predict_us

    assert SPACE["pad_rows"] == (0, 1) and wgmma_family.OPTIONAL["pad_rows"] == 0
    assert "#define HG_PAD_ROWS 0" in FAMILY.render(BIG)
    assert FAMILY.repair({**BIG, "pad_rows": 1, "stream_k": 1})["pad_rows"] == 0  # stream-K keeps the workspace
    params = FAMILY.default_params(Shape(3000, 5000, 700), H100)
    # the copy reads and writes A and Bt once more (H100: 45.1 us against 37.0 us at K = 704 without it)
    padded, aligned = predict_us(FAMILY, params, Shape(3000, 5000, 700), H100), predict_us(
        FAMILY, {**params, "pad_rows": 0}, Shape(3000, 5000, 704), H100)
    assert 5 < padded - aligned < 12


def test_default_prefers_enough_tiles_for_small_m():
    # 512 x 4096 with 128x256 tiles is 64 tiles for 132 SMs: the default must pick a narrower tile.
    params = FAMILY.default_params(Shape(512, 4096, 4096), H100)
    assert (512 // params["bm"]) * (4096 // params["bn"]) >= 128


@pytest.mark.parametrize(
    ("change", "shape", "needle"),
    [
        ({}, (1000, 4100, 4096), "N must be a multiple of 8"),
        ({}, (4096, 4096, 4001), "K must be a multiple of 8"),
        ({"epilogue": 0, "split_k": 4, "persistent": 0}, (4096, 4096, 192), "fewer k-blocks than split_k"),
        ({"stages": 4}, (4096, 4096, 4096), "shared memory"),
        ({"bm": 256}, (4096, 4096, 4096), "accumulator registers"),
        ({"bm": 256, "consumers": 1}, (4096, 4096, 4096), "must be 64 or 128"),
        ({"pingpong": 1, "consumers": 1}, (4096, 4096, 4096), "ping-pong needs two consumer warpgroups"),
        ({"pingpong": 1}, (4096, 4096, 4096), "too many accumulator registers"),
        ({"stages": 9}, (4096, 4096, 4096), "stages=9 not in"),
        ({"warp_tile": 2}, (4096, 4096, 4096), "unknown parameter warp_tile"),
    ],
)
def test_check_rejects_with_a_reason(change, shape, needle):
    reason = FAMILY.check({**BIG, **change}, Shape(*shape), H100)
    assert reason is not None and needle in reason


def test_check_rejects_missing_parameter():
    params = dict(BIG)
    del params["group_m"]
    assert "missing parameters ['group_m']" in FAMILY.check(params, Shape(4096, 4096, 4096), H100)


@pytest.mark.parametrize("gpu", [A100, B200])
def test_check_rejects_non_hopper_gpus(gpu):
    reason = FAMILY.check(BIG, Shape(4096, 4096, 4096), gpu)
    assert reason is not None and ("compute capability" in reason or "shared memory" in reason)


def test_shared_bytes_counts_ring_epilogue_and_barriers():
    ring = 3 * (128 * 64 * 2 + 256 * 64 * 2)
    assert shared_bytes(BIG) == ring + 128 * 256 * 2 + (2 * 3 + 2) * 8 + 1024
    assert shared_bytes({**BIG, "epilogue": 0}) == ring + (2 * 3 + 2) * 8 + 1024
    # Ping-pong: each consumer stages a whole 128 x 128 tile.
    pp = {**BIG, "bn": 128, "stages": 4, "pingpong": 1}
    assert shared_bytes(pp) == 4 * (2 * 128 * 64 * 2) + 2 * 128 * 128 * 2 + (2 * 4 + 2) * 8 + 1024


def test_render_is_self_contained_and_passes_static_check():
    source = FAMILY.render(BIG)
    assert not re.search(r'#\s*include\s+"', source), "a local include was left in the rendered source"
    assert "#pragma once" not in source
    for key, value in BIG.items():
        assert f"#define HG_{key.upper()} {value}\n" in source
    assert 'extern "C" int hgemm_run(' in source and 'extern "C" int hgemm_supports(' in source
    assert "wgmma.mma_async" in source and "cp.async.bulk.tensor" in source
    assert check_source(source) == []


def test_inline_includes_inlines_each_file_once():
    text = inline_includes('#include "wgmma_ptx.cuh"\n#include "wgmma_ptx.cuh"\nint x;\n')
    assert text.count("begin wgmma_ptx.cuh") == 1 and text.count("wgmma_m64n256k16(float* d") == 1


def _cuobjdump() -> str | None:
    found = shutil.which("cuobjdump")
    if found:
        return found
    candidate = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidate = candidate / "site-packages" / "nvidia" / "cu13" / "bin" / "cuobjdump"
    return str(candidate) if candidate.exists() else None


COMPILE_CASES = {
    # The most code: persistent, TMA-store epilogue, 2x1 cluster with multicast, 128x128 tiles.
    "cluster_tma_epilogue": {**BIG, "bn": 128, "stages": 6, "cluster_m": 2},
    # The other paths: direct-store epilogue, one consumer, not persistent, 64-wide tiles.
    "one_consumer_direct": {**BIG, "bn": 64, "stages": 4, "consumers": 1, "persistent": 0, "epilogue": 0},
    # Ping-pong consumers, each with a whole 128x128 tile (two m64 blocks) and its own staging tile.
    "pingpong": {**BIG, "bn": 128, "stages": 4, "pingpong": 1},
    # Split-K summed in the cluster's distributed shared memory: one CTA per (tile, slice).
    "split_dsmem": {**BIG, "bn": 128, "stages": 6, "epilogue": 0, "persistent": 0, "split_k": 4, "split_dsmem": 1},
    # Three consumers of 64 rows each (192x128 tiles, 512 threads) with a 2x1 cluster.
    "three_consumers": {**BIG, "bm": 192, "bn": 128, "stages": 4, "consumers": 3, "cluster_m": 2},
}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("case", sorted(COMPILE_CASES))
def test_compiles_for_sm90a_and_sm80(case, tmp_path):
    params = COMPILE_CASES[case]
    assert FAMILY.check(params, Shape(4096, 4096, 4096), H100) is None
    log = build_without_spills(FAMILY.render(params), tmp_path)
    so = tmp_path / "k.so"
    assert "for 'sm_90a'" in log and "for 'sm_80'" in log
    sm90 = entry_report(log, "hgemm_wgmma_kernel")  # the GEMM's own (the copy and reduction kernels beside it)
    regs = int(re.search(r"Used (\d+) registers", sm90).group(1))
    assert regs <= min(255, 65536 // (128 * (params["consumers"] + 1)))  # one CTA of them fits an SM

    tool = _cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump not found: built and ptxas-checked, SASS not inspected")
    env_path = str(Path(tool).parent) + ":" + __import__("os").environ.get("PATH", "")
    sass = subprocess.run([tool, "--dump-sass", "--gpu-architecture", "sm_90a", str(so)], capture_output=True,
                          text=True, env={"PATH": env_path}, timeout=120)  # fmt: skip
    assert sass.returncode == 0, sass.stderr
    text = sass.stdout
    wgmma_n = params["bn"]
    assert f"HGMMA.64x{wgmma_n}x16.F32" in text
    assert "UTMALDG.2D" in text
    if params["cluster_m"] == 2:
        assert "UTMALDG.2D.MULTICAST" in text
    if params["epilogue"]:
        assert "UTMASTG.2D" in text
        assert "STSM" in text  # the staging tile is written with stmatrix
    if params.get("split_dsmem"):
        assert "UCGABAR_ARV" in text and "UTMASTG" not in text  # cluster barrier, plain stores to C
    if params["consumers"] > 1:
        assert "USETMAXREG.DEALLOC" in text and "USETMAXREG.TRY_ALLOC" in text


@pytest.mark.parametrize("shape", [(12288, 12288, 256), (16384, 2048, 256)])
def test_short_k_many_tiles_defaults_to_pingpong(shape):
    p = FAMILIES["wgmma"].default_params(Shape(*shape))
    assert (p["bm"], p["bn"], p["pingpong"], p["split_k"]) == (128, 128, 1, 1)
    assert FAMILIES["wgmma"].check(p, Shape(*shape)) is None


@pytest.mark.parametrize(
    ("shape", "tile"),
    [
        ((1000, 4608, 3584), (128, 160, 1)),  # 232 tiles of 128x160 in two waves, 128x192 would need 2 of 192
        ((1000, 14336, 4096), (128, 224, 0)),  # four waves of 128x224 where 128x192 needs five (K of 64 boxes)
        ((1000, 3584, 14336), (128, 224, 0)),  # one wave of 128x224 (128 tiles) rather than of 128x256 (112)
        ((1000, 3584, 2048), (128, 256, 0)),  # K of 32 boxes: no 128x224; 112 tiles, clusters of four (below)
        ((4096, 1408, 2048), (128, 192, 1)),
        ((12288, 4096, 512), (128, 192, 1)),  # as before: 128x192 where it needs no more columns of waves
        ((4096, 4096, 4096), (128, 256, 0)),
    ],
)
def test_paired_128_row_tiles_default_to_a_cluster(shape, tile):
    """An even count of 128-row tiles: each pair a 2x1 cluster (four in one cluster where they make one nearly whole
    wave of clusters of four), whichever of 128x192, 128x256, 128x224 (K of 64 boxes or more), 128x160 and 128x128
    takes the least estimated time (H100, experiments/2026-11-27-m1000-tiles, -widths)."""
    p = FAMILY.default_params(Shape(*shape), H100)
    tiles = -(-shape[0] // 128) * -(-shape[1] // tile[1])
    assert (p["bm"], p["bn"], p["pingpong"]) == tile and p["cluster_m"] == (4 if 108 <= tiles <= 120 else 2)
    assert p["epi_panels"] == 2 and FAMILY.check(p, Shape(*shape), H100) is None


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        ((1000, 1408, 2048), (128, 96, 1, 4)),  # 120 tiles of 128x96: one whole wave of 30 clusters of four
        ((1000, 4608, 3584), (128, 160, 1, 2)),  # 232 tiles: two waves, the pairs stay
        ((12288, 256, 4096), (128, 256, 0, 2)),  # 96 tiles fill 80% of the four-clusters' slots: pairs
        ((1100, 1408, 2048), (128, 128, 0, 1)),  # nine tile rows: no pairs, no fours
    ],
)
def test_one_nearly_whole_wave_of_paired_tiles_takes_clusters_of_four(shape, expected):
    """A 132-SM part holds 30 clusters of four (120 CTAs); paired 128-row tiles in a multiple of four tile rows that
    fill 90-100% of those slots share each Bt tile four ways (H200, experiments/2026-11-28-cluster4)."""
    p = FAMILY.default_params(Shape(*shape), H100)
    assert (p["bm"], p["bn"], p["pingpong"], p["cluster_m"]) == expected
    assert FAMILY.check(p, Shape(*shape), H100) is None


@pytest.mark.parametrize(
    ("shape", "clustered"),
    [
        ((77, 5120, 5120), True),  # 80 tiles, K of 80 boxes
        ((65, 4200, 4100), True),  # 66 tiles (half the SMs), the fewest rows
        ((96, 7168, 2048), False),  # K of 32 boxes: slower in server mode
        ((77, 8192, 4096), False),  # 128 tiles: more than 30 clusters of four
        ((77, 4096, 4096), False),  # 64 tiles: fewer than half the SMs
        ((97, 5120, 5120), False),  # 97 rows: a 128-wide transposed tile wastes as much as two 64-row tiles
        ((64, 5120, 5120), False),  # one whole 64-row tile
    ],
)
def test_c_of_65_to_96_rows_takes_the_transposed_product_in_clusters_of_four(shape, clustered):
    p = FAMILY.default_params(Shape(*shape), H100)
    got = (p["bm"], p["bn"], p.get("swap_ab", 0), p["cluster_m"], p["split_k"], p["epilogue"])
    if clustered:
        assert got == (64, 96, 1, 4, 1, 0)
    else:
        assert got[3] != 4
    assert FAMILY.check(p, Shape(*shape), H100) is None


@pytest.mark.parametrize("shape", [(640, 8192, 4096), (1100, 4608, 3584)])
def test_an_odd_count_of_128_row_tiles_stays_unclustered(shape):
    p = FAMILY.default_params(Shape(*shape), H100)
    assert p["cluster_m"] == 1 and FAMILY.check(p, Shape(*shape), H100) is None


@pytest.mark.parametrize("shape", [(8192, 256, 4096), (16384, 128, 2048), (2048, 1024, 512), (1024, 2048, 256)])
def test_a_paired_128x128_pick_stays_unclustered_where_c_is_narrow_or_k_short(shape):
    """C at most 256 wide or K at most 512: the cluster lost to the unclustered 128x128 tile there (H100)."""
    p = FAMILY.default_params(Shape(*shape), H100)
    assert (p["bm"], p["bn"], p["cluster_m"], p["epi_panels"]) == (128, 128, 1, 0)
    assert FAMILY.check(p, Shape(*shape), H100) is None


@pytest.mark.parametrize("shape", [(2048, 1024, 1024), (256, 8192, 2048), (12288, 512, 2048)])
def test_a_paired_128x128_pick_is_clustered_where_c_is_wide_and_k_long(shape):
    p = FAMILY.default_params(Shape(*shape), H100)
    assert (p["bm"], p["bn"], p["cluster_m"], p["pingpong"], p["epi_panels"]) == (128, 128, 2, 1, 2)


def test_no_paired_tile_wider_than_c():
    p = FAMILY.default_params(Shape(12288, 64, 2048), H100)
    assert p["bn"] <= 64


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"split_k": 16}, "2 <= split_k <= 8"),
        ({"persistent": 1}, "persistent=0, cluster_m=1, pingpong=0"),
        ({"cluster_m": 2}, "persistent=0, cluster_m=1, pingpong=0"),
    ],
)
def test_split_dsmem_rules(change, needle):
    ok = {**BIG, "bn": 128, "stages": 6, "epilogue": 0, "persistent": 0, "split_k": 4, "split_dsmem": 1}
    assert FAMILY.check(ok, Shape(2048, 256, 4096), H100) is None
    reason = FAMILY.check({**ok, **change}, Shape(2048, 256, 4096), H100)
    assert reason is not None and needle in reason


def test_split_dsmem_needs_no_workspace_and_parks_the_partial_in_the_ring():
    # 4096 x 4096 x 8192 with 8 slices in the workspace would need 512 MiB; the cluster version none,
    # but its 128 x (128 + 8) fp32 partial is larger than a 2-stage ring, so the buffer grows.
    p = {**BIG, "bn": 128, "stages": 2, "epilogue": 0, "persistent": 0, "split_k": 8, "split_dsmem": 1}
    ring = 2 * (128 * 64 * 2 + 128 * 64 * 2)
    assert shared_bytes(p) == 128 * 136 * 4 + (2 * 2 + 2) * 8 + 1024
    assert 128 * 136 * 4 > ring
    assert FAMILY.check(p, Shape(4096, 4096, 8192), H100) is None
    assert "workspace" in FAMILY.check({**p, "split_dsmem": 0}, Shape(4096, 4096, 8192), H100)


def test_render_leaves_out_split_dsmem_when_off():
    with_key = FAMILY.render({**BIG, "split_k": 1, "split_dsmem": 0})
    assert with_key == FAMILY.render({**BIG, "split_k": 1})
    assert with_key.count("#define HG_SPLIT_DSMEM") == 1  # only the template's own fallback
    on = FAMILY.render({**BIG, "epilogue": 0, "persistent": 0, "split_k": 2, "split_dsmem": 1})
    assert "#define HG_SPLIT_DSMEM 1\n" in on


@pytest.mark.parametrize(
    ("params", "expect"),
    [
        # A split summed in DSMEM: one CTA per unit, no TMA-staged C.
        ({**BIG, "bn": 128, "stages": 6, "split_k": 4, "split_dsmem": 1},
         {"persistent": 0, "epilogue": 0, "cluster_m": 1}),
        # No split: split_dsmem means nothing and is reset.
        ({**BIG, "split_dsmem": 1}, {"split_dsmem": 0}),
        # Widening the tile of a 6-stage 128x128 config: the ring shrinks to what fits.
        ({**BIG, "bn": 256, "stages": 6}, {"stages": 3}),
        # Archived before split_k / split_dsmem existed.
        ({k: v for k, v in BIG.items()}, {"split_k": 1, "split_dsmem": 0}),
    ],
)  # fmt: skip
def test_repair_makes_one_parameter_moves_valid(params, expect):
    fixed = FAMILY.repair(params)
    for key, value in expect.items():
        assert fixed[key] == value
    assert FAMILY.check(fixed, Shape(4096, 4096, 4096), H100) is None


def test_narrow_tall_shape_with_long_k_defaults_to_a_dsmem_split():
    # 4096 x 64 x 8192: 64x64 tiles, 2 slices summed in DSMEM (the H200 rule: 2048x256x4096 0.79 -> 0.94x).
    p = FAMILY.default_params(Shape(4096, 64, 8192), H100)
    assert (p["bm"], p["bn"], p["split_k"], p["split_dsmem"], p["persistent"], p.get("swap_ab", 0)) == (64, 64, 2, 1, 0, 0)
    # Deep splits stay in the workspace (8 slices of 1024 x 128 x 16384).
    q = FAMILY.default_params(Shape(1024, 128, 16384), H100)
    assert q["split_k"] == 8 and q["split_dsmem"] == 0


@pytest.mark.parametrize(
    ("shape", "expect"),
    [
        # H100, experiments/2026-11-26-swap-ab: each is the fastest of the 61 configurations measured there
        ((2048, 512, 4096), (128, 64, 1)),  # 0.87x; the former default 0.73x
        ((2048, 256, 8192), (128, 64, 2)),  # long slices: two consumers, 0.88x against 64x64 unsplit 0.83x
        ((2048, 256, 4096), (64, 64, 1)),  # 0.86x; 128x64 split 2 0.84x
        ((1024, 512, 4096), (64, 64, 1)),  # 0.79x; the former default 0.67x
    ],
)
def test_tall_few_tile_shapes_default_to_the_transposed_product(shape, expect):
    p = FAMILY.default_params(Shape(*shape), H100)
    assert FAMILY.check(p, Shape(*shape), H100) is None
    assert (p["swap_ab"], p["cluster_m"], p["epilogue"]) == (1, 2, 0)
    assert (p["bm"], p["bn"], p["split_k"]) == expect


@pytest.mark.parametrize(
    ("shape", "expect"),
    [
        # H100, experiments/2026-11-26-square: each is the fastest of the 113 configurations measured there
        ((512, 2048, 4096), (128, 64, 2)),  # 1.07x; the former default (128x128 split 2 in DSMEM) 0.79x
        ((256, 4096, 4096), (128, 64, 2)),  # 1.13x; the former default 0.80x
        ((1024, 1024, 4096), (64, 128, 1)),  # 0.83x; the former default 0.73x
        ((128, 8192, 4096), (64, 128, 1)),  # 0.98x; one row of 128-row tiles: 64 rows
    ],
)
def test_wide_outputs_one_wave_of_8192_element_tiles_cover_go_unsplit(shape, expect):
    p = FAMILY.default_params(Shape(*shape), H100)
    assert FAMILY.check(p, Shape(*shape), H100) is None
    assert (p["bm"], p["bn"], p["consumers"]) == expect
    assert (p["cluster_m"], p["epilogue"], p["split_k"], p.get("swap_ab", 0)) == (2, 1, 1, 0)


@pytest.mark.parametrize(
    ("shape", "expect"),
    [
        # H100, experiments/2026-11-26-small-tiles: each is the fastest of the configurations measured there
        ((128, 2048, 2048), (64, 64, 2, 2, 0)),  # 0.85x; the former 64x128 DSMEM split 0.68x
        ((512, 1024, 4096), (64, 64, 2, 1, 0)),  # unsplit before a split with as many CTAs
        ((512, 512, 12288), (64, 128, 2, 4, 0)),  # long slices: the wider tile, 0.89x against 0.76x
        ((64, 4096, 8192), (64, 128, 1, 4, 0)),  # one row of tiles, beyond the one-row rule's K: 4 slices
    ],
)
def test_few_tile_shapes_take_narrow_tiles_with_deep_rings(shape, expect):
    p = FAMILY.default_params(Shape(*shape), H100)
    assert FAMILY.check(p, Shape(*shape), H100) is None
    assert (p["bm"], p["bn"], p["cluster_m"], p["split_k"], p["split_dsmem"]) == expect
    tiles = -(-shape[0] // p["bm"]) * -(-shape[1] // p["bn"])
    assert tiles * p["split_k"] <= 132
    deeper = FAMILY.repair({**p, "stages": 16})  # the deepest ring that fits
    assert p["stages"] == deeper["stages"] and p["stages"] * p["stage_k"] >= 8 * 64  # at least 512 of K in flight


@pytest.mark.parametrize(
    ("shape", "expect"),
    [
        # H200, experiments/2026-11-27-one-row: the fastest of four layouts, or within 2% of it
        ((64, 4096, 2048), (32, 1, 1)),  # 5.72 us; the former default (64x64, 2 slices in DSMEM) 6.29
        ((64, 4096, 4096), (32, 1, 1)),  # 9.18 us, the 64x64 DSMEM split 9.01
        ((64, 2048, 1024), (32, 1, 1)),  # 3.83 us, split in two 4.03 (8 k-blocks a slice)
        ((64, 2048, 4096), (32, 2, 0)),  # 6.40 us, unsplit 8.30
        ((64, 1024, 2048), (32, 2, 0)),  # 4.69 us, unsplit 4.84
        ((64, 8192, 2048), (64, 1, 1)),  # 7.45 us, 64x32 in two waves 9.14
    ],
)
def test_one_row_of_tiles_takes_64x32_tiles_with_128_deep_stages(shape, expect):
    p = FAMILY.default_params(Shape(*shape), H100)
    assert FAMILY.check(p, Shape(*shape), H100) is None
    assert (p["bn"], p["split_k"], p["persistent"]) == expect
    assert (p["bm"], p["cluster_m"], p["warp_producer"], p["stage_k"]) == (64, 1, 1, 128)
    assert p["split_dsmem"] == int(p["split_k"] > 1)
    assert p["stages"] == FAMILY.repair({**p, "stages": 16})["stages"], "the deepest ring that fits"


@pytest.mark.parametrize("shape", [(128, 4096, 2048), (64, 512, 2048), (64, 16384, 2048), (64, 4096, 256),
                                   (64, 4096, 8192), (16, 4608, 3584)])  # fmt: skip
def test_the_one_row_rule_keeps_to_the_range_it_was_measured_in(shape):
    M, N, K = shape
    assert FAMILY._one_row(M, N, -(-K // 64), 132) is None


WIDE = {**BIG, "bn": 192, "stages": 4}  # 128x192 tiles, two consumers: 96 accumulators per thread


def test_bn_192_takes_n_it_does_not_divide_with_every_store_path():
    """The last 192-column tile of N = 4096 is a third full: TMA zero-fills the loads past N; C panels past N
    are clipped by TMA or, on the register, split-K and stream-K paths, predicated column by column."""
    tall = Shape(12288, 4096, 512)
    assert FAMILY.check(WIDE, tall, H100) is None
    assert FAMILY.check({**WIDE, "cluster_m": 2}, tall, H100) is None
    pingpong_64 = {**WIDE, "bm": 64, "consumers": 2, "pingpong": 1, "stages": 5}
    assert FAMILY.check(pingpong_64, Shape(4096, 4096, 512), H100) is None
    assert FAMILY.check({**WIDE, "epi_panels": 2}, tall, H100) is None
    for other in ({"epilogue": 0}, {"epilogue": 0, "split_k": 2}, {"stream_k": 1}):
        assert FAMILY.check({**WIDE, **other}, Shape(1024, 4096, 512), H100) is None, other
    assert FAMILY.check(WIDE, Shape(12288, 4096 + 32, 512), H100) is None  # half the last C panel is stored
    assert "N must be a multiple of 8" in FAMILY.check(WIDE, Shape(12288, 4096 + 4, 512), H100)
    assert FAMILY.check({**BIG, "stages": 4, "bn": 128, "epilogue": 0}, tall, H100) is None
    # A ping-pong consumer holds its whole tile: 128 x 192 is 192 accumulators per thread (the most), 128 x 256
    # would be 256; a cooperative consumer keeps at most 128.
    assert FAMILY.check({**WIDE, "pingpong": 1, "epi_panels": 2}, tall, H100) is None
    assert "too many accumulator" in FAMILY.check({**BIG, "pingpong": 1, "epi_panels": 2}, tall, H100)
    assert "too many accumulator" in FAMILY.check({**BIG, "consumers": 1}, tall, H100)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize(
    "extra",
    [{}, {"cluster_m": 2}, {"bm": 64, "pingpong": 1, "stages": 5}, {"pingpong": 1, "epi_panels": 2},
     {"pingpong": 1, "epi_panels": 2, "cluster_m": 2}],
)  # fmt: skip
def test_bn_192_builds_without_spills(extra, tmp_path):
    params = FAMILY.repair({**WIDE, **extra})
    assert FAMILY.check(params, Shape(4096, 4096, 4096), H100) is None
    build_without_spills(FAMILY.render(params), tmp_path)


def test_the_bench_sweep_offers_192_column_tiles_where_n_is_not_a_multiple():
    from hgemm.bench import check_wgmma

    rows = check_wgmma.configs_for((12288, 4096, 512), sweep=True)
    wide = [(name, reason) for name, p, reason in rows if p and p["bn"] == 192]
    assert wide and any(reason is None for _, reason in wide)


NARROW = {**BIG, "bn": 160, "stages": 5, "epi_panels": 2}  # 128x160 tiles: C in 32-column panels


def test_bn_160_stages_c_in_32_column_panels_and_fits_a_5_deep_ring():
    """160 columns are not whole 64-column panels, so C goes out in 32-column TMA boxes (64-byte swizzle):
    the two-panel ring takes 2 x 128 rows x 32 columns per consumer, which leaves room for 5 stages of
    128x64 A and 160x64 Bt (the tile and depth of the autotuned cuBLASLt kernel, experiments/NOTES.md)."""
    pp = {**NARROW, "pingpong": 1, "cluster_m": 2}
    assert c_panel({**BIG, "bn": 160}) == 32 and c_panel({**BIG, "bn": 192}) == 64
    ring = 5 * (128 * 64 * 2 + 160 * 64 * 2)
    assert shared_bytes(pp) == ring + 2 * 128 * 2 * 32 * 2 + (2 * 5 + 2) * 8 + 1024
    assert FAMILY.repair(pp)["stages"] == 5
    for shape in ((12288, 4096, 512), (16384, 16384, 1024), (4096, 320, 1024)):
        assert FAMILY.check(pp, Shape(*shape), H100) is None, shape
    stored = {**pp, "epi_panels": 0, "epilogue": 0}  # predicated stores
    assert FAMILY.check(stored, Shape(12288, 4096, 512), H100) is None


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize(
    "extra", [{"pingpong": 1, "cluster_m": 2}, {"cluster_m": 2}, {"pingpong": 1, "epi_panels": 0, "stages": 4}]
)
def test_bn_160_builds_without_spills(extra, tmp_path):
    params = FAMILY.repair({**NARROW, **extra})
    assert FAMILY.check(params, Shape(12288, 4096, 512), H100) is None
    build_without_spills(FAMILY.render(params), tmp_path)


SLIM = {**BIG, "bm": 64, "bn": 32, "consumers": 1, "stages": 16, "cluster_m": 2, "epi_panels": 0}  # 64x32 tiles


def test_bn_32_tiles_fit_a_16_deep_ring_and_store_c_in_one_32_column_panel():
    """64x32 tiles with a 16-deep ring and a 2x1 cluster (the tile, depth and cluster of cuBLASLt's kernel for
    128x2048x1024, experiments/NOTES.md): 12 KiB per stage, C in one 32-column TMA box per tile."""
    assert c_panel({**BIG, "bn": 32}) == 32
    assert shared_bytes(SLIM) == 16 * (64 * 64 * 2 + 32 * 64 * 2) + 64 * 32 * 2 + (2 * 16 + 2) * 8 + 1024
    assert FAMILY.repair(SLIM)["stages"] == 16
    for shape in ((128, 2048, 1024), (1024, 128, 1024), (1024, 128, 16384)):
        assert FAMILY.check(SLIM, Shape(*shape), H100) is None, shape
    # M = 64 with a 2x1 cluster: the pair's second CTA lies wholly past M (zero fill in, nothing stored)
    short = Shape(64, 2048, 1024)
    assert FAMILY.check(SLIM, short, H100) is None
    assert FAMILY.check({**SLIM, "epilogue": 0}, short, H100) is None  # register stores predicated at M


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize(
    "extra",
    [{}, {"cluster_m": 1, "epi_panels": 2}, {"epilogue": 0, "split_k": 4, "split_dsmem": 1, "persistent": 0,
                                            "cluster_m": 1, "stages": 8}],
)
def test_bn_32_builds_without_spills(extra, tmp_path):
    params = FAMILY.repair({**SLIM, **extra})
    assert FAMILY.check(params, Shape(1024, 128, 1024), H100) is None
    build_without_spills(FAMILY.render(params), tmp_path)


def test_structure_leaves_out_the_tuning_parameters():
    fam = FAMILIES["wgmma"]
    p = fam.default_params(Shape(4096, 4096, 4096))
    tuned = {**p, "group_m": 16 if p["group_m"] != 16 else 8, "stages": 3 if p["stages"] != 3 else 4}
    assert fam.structure(tuned) == fam.structure(p)
    assert fam.structure({**p, "bn": 128 if p["bn"] != 128 else 256}) != fam.structure(p)
    assert not {k for k, _ in fam.structure(p)} & set(fam.tuning)


THREE = {**BIG, "bm": 192, "bn": 128, "stages": 4, "consumers": 3}  # 192x128 tiles, three consumers of 64 rows


def test_bm_192_is_three_consumers_with_at_most_96_accumulators():
    """192-row tiles split into three 64-row consumer warpgroups (512 threads; setmaxnreg gives each consumer
    160 registers, so at most 64 x 192 accumulators); 12288 x 256 x 16384 then has 128 tiles for 132 SMs."""
    tall = Shape(12288, 256, 16384)
    assert FAMILY.check(THREE, tall, H100) is None
    assert FAMILY.check({**THREE, "bn": 192, "stages": 3}, Shape(12288, 4096, 512), H100) is None
    assert "must be 64 or 128" in FAMILY.check({**THREE, "consumers": 2}, tall, H100)
    assert "too many accumulator" in FAMILY.check({**THREE, "bn": 256, "stages": 3}, tall, H100)
    assert "consumers <= 2" in FAMILY.check({**THREE, "stream_k": 1}, tall, H100)
    dsmem = {**THREE, "epilogue": 0, "persistent": 0, "split_k": 2, "split_dsmem": 1}
    assert "consumers <= 2" in FAMILY.check(dsmem, tall, H100)
    # One-parameter moves into and out of 192-row tiles take the consumer count along.
    assert FAMILY.repair({**BIG, "bn": 128, "stages": 4, "bm": 192})["consumers"] == 3
    wide = FAMILY.repair({**BIG, "stages": 4, "bm": 192})  # from 128x256: the area-keeping 192x128
    assert (wide["bn"], wide["consumers"]) == (128, 3) and FAMILY.check(wide, tall, H100) is None
    assert FAMILY.repair({**THREE, "bm": 128})["consumers"] == 2
    assert FAMILY.repair({**THREE, "bm": 64})["consumers"] == 1
    assert FAMILY.repair({**BIG, "bm": 192, "bn": 128, "stages": 4, "pingpong": 1})["pingpong"] == 0


def test_m_need_not_be_a_multiple_of_the_tile_on_any_store_path():
    """The last tile row reads TMA's zero fill past M; its rows past M are clipped by TMA or predicated on the
    register, split-K and stream-K paths, so any M is taken (also for a cluster's pair of tiles)."""
    assert FAMILY.check(THREE, Shape(8192, 256, 1024), H100) is None  # 43 tile rows, the last a third full
    assert FAMILY.check({**BIG, "cluster_m": 2}, Shape(128 * 3, 4096, 4096), H100) is None
    assert FAMILY.check(THREE, Shape(8192 + 33, 256, 1024), H100) is None
    for other in ({"epilogue": 0}, {"epilogue": 0, "split_k": 2}):
        assert FAMILY.check({**THREE, **other}, Shape(8192 + 1, 256, 1024), H100) is None, other


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("extra", [{}, {"bn": 192, "stages": 3, "cluster_m": 2}, {"bn": 64, "stages": 6}])
def test_bm_192_builds_without_spills(extra, tmp_path):
    params = FAMILY.repair({**THREE, **extra})
    assert FAMILY.check(params, Shape(12288, 4096, 4096), H100) is None
    build_without_spills(FAMILY.render(params), tmp_path)


# HG_SWAP_AB: the transposed product Ct = Bt A^T, built but not yet measured, so outside the searched space.
SWAP = {**BIG, "bn": 128, "stages": 6, "epilogue": 0, "cluster_m": 2, "swap_ab": 1}


def test_swap_ab_is_searched_and_absent_means_unswapped():
    assert SPACE["swap_ab"] == (0, 1)
    assert FAMILY.check(SWAP, Shape(2048, 512, 4096), H100) is None
    # absent means 0: configurations archived before it render as they did with it
    assert FAMILY.render({**BIG, "swap_ab": 0}) == FAMILY.render(BIG)


@pytest.mark.parametrize(
    "change",
    [{"epilogue": 1}, {"split_k": 2, "split_dsmem": 1, "persistent": 0, "cluster_m": 1}, {"stream_k": 1},
     {"pingpong": 1}],  # fmt: skip
)
def test_swap_ab_stores_from_registers_or_the_workspace(change):
    reason = FAMILY.check({**SWAP, **change}, Shape(2048, 512, 4096), H100)
    assert reason is not None and "swap_ab stores C transposed" in reason
    repaired = FAMILY.repair({**SWAP, **change})
    assert repaired["swap_ab"] == 1 and FAMILY.check(repaired, Shape(2048, 512, 4096), H100) is None


def test_the_model_sees_a_swapped_kernel_as_the_transposed_shape():
    from hgemm.agent.model import predict

    plain = {**SWAP, "swap_ab": 0}
    assert predict(FAMILY, SWAP, Shape(2048, 512, 4096), H100) == predict(FAMILY, plain, Shape(512, 2048, 4096), H100)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize(
    "extra",
    [{}, {"bm": 64, "bn": 64, "consumers": 1, "stages": 14}, {"split_k": 4, "bm": 128, "bn": 128, "stages": 7},
     {"bm": 64, "bn": 32, "consumers": 1, "cluster_m": 1, "stages": 16}],  # fmt: skip
)
def test_swap_ab_builds_without_spills(extra, tmp_path):
    params = FAMILY.repair({**SWAP, **extra})
    assert FAMILY.check(params, Shape(77, 5120, 5120), H100) is None
    build_without_spills(FAMILY.render(params), tmp_path)


# HG_WARP_PRODUCER: the producer's k-loop in its whole first warp, one elected lane issuing.
def test_warp_producer_is_searched_and_absent_means_one_thread():
    assert SPACE["warp_producer"] == (0, 1)
    assert "warp_producer" in FAMILY.tuning  # a local move, not a new structure
    assert FAMILY.render({**BIG, "warp_producer": 0}) == FAMILY.render(BIG)
    warp = FAMILY.render({**BIG, "warp_producer": 1})
    assert warp != FAMILY.render(BIG) and "#define HG_WARP_PRODUCER 1" in warp
    assert FAMILY.check({**BIG, "warp_producer": 1}, Shape(4096, 4096, 4096), H100) is None
    assert "warp_producer=2 not in (0, 1)" in FAMILY.check({**BIG, "warp_producer": 2}, Shape(4096, 4096, 4096), H100)


@pytest.mark.parametrize(
    ("shape", "producer"),
    [((64, 4096, 4096), 1), ((128, 1024, 1024), 1), ((1024, 1024, 1024), 0), ((512, 512, 4096), 0),
     ((4096, 4096, 4096), 0)],
)  # fmt: skip
def test_defaults_run_the_producer_in_a_warp_without_a_cluster(shape, producer):
    params = FAMILY.default_params(Shape(*shape), H100)
    assert params["warp_producer"] == producer
    assert params["warp_producer"] == int(params["cluster_m"] == 1)


def test_default_tuning_sets_the_producer_as_the_defaults_do():
    one, two = {**BIG, "cluster_m": 1}, {**BIG, "cluster_m": 2}
    assert FAMILY.default_tuning(one)["warp_producer"] == 1
    assert FAMILY.default_tuning({**two, "warp_producer": 1})["warp_producer"] == 0
    # only_absent: a configuration that names its producer keeps it; one archived before the parameter existed
    # (absent: the one-thread loop) gains the warp where the defaults take it, and is left as it is elsewhere
    assert FAMILY.default_tuning({**one, "warp_producer": 0}, only_absent=True) == {**one, "warp_producer": 0}
    old_one = {k: v for k, v in one.items() if k != "warp_producer"}
    old_two = {k: v for k, v in two.items() if k != "warp_producer"}
    assert FAMILY.default_tuning(old_one, only_absent=True) == {**old_one, "warp_producer": 1}
    assert FAMILY.default_tuning(old_two, only_absent=True) == old_two
    from hgemm.evaluator.kernels import get_family

    assert get_family("small").default_tuning({"BM": 32}) == {"BM": 32}  # a family without such parameters changes nothing


_DSMEM_64 = {"split_k": 2, "split_dsmem": 1, "persistent": 0, "epilogue": 0, "bm": 64, "bn": 64, "consumers": 1}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize(
    ("tuning", "extra"),
    [({"warp_producer": 1}, {"bm": 64, "bn": 32, "consumers": 1, "stages": 16}),
     ({"warp_producer": 1}, {"cluster_m": 2}), ({"warp_producer": 1}, _DSMEM_64),
     # HG_STAGE_K 128: two TMA boxes per operand behind one barrier
     ({"stage_k": 128}, {"bm": 64, "bn": 32, "consumers": 1, "stages": 8, "warp_producer": 1}),
     ({"stage_k": 128}, {"cluster_m": 2, "bn": 128, "stages": 4}),
     ({"stage_k": 128}, {"bm": 128, "bn": 64, "consumers": 2, "pingpong": 1, "stages": 4}),
     ({"stage_k": 128}, _DSMEM_64),
     ({"stage_k": 128}, {"bm": 64, "bn": 32, "consumers": 1, "stages": 8, "epilogue": 0, "cluster_m": 2, "swap_ab": 1}),
     # HG_PAD_ROWS: the copy kernel, and the GEMM waiting for it
     ({"pad_rows": 1}, {"cluster_m": 2, "bn": 192, "pingpong": 1, "epi_panels": 2, "stages": 4})],
)  # fmt: skip
def test_tuning_parameters_build_without_spills(tuning, extra, tmp_path):
    params = FAMILY.repair({**BIG, **extra, **tuning})
    assert FAMILY.check(params, Shape(1024, 1024, 4096 - 4 * params["pad_rows"]), H100) is None
    build_without_spills(FAMILY.render(params), tmp_path)


# HG_STAGE_K: 128 of K per ring stage, two TMA boxes per operand behind one barrier.
def test_stage_k_is_searched_and_absent_means_one_box_per_stage():
    assert SPACE["stage_k"] == (64, 128)
    assert "stage_k" in FAMILY.tuning
    assert FAMILY.render({**BIG, "stage_k": 64}) == FAMILY.render(BIG)
    deep = FAMILY.render({**BIG, "stage_k": 128})
    assert "#define HG_STAGE_K 128" in deep
    assert "stage_k=256 not in (64, 128)" in FAMILY.check({**BIG, "stage_k": 256}, Shape(4096, 4096, 4096), H100)
    # the same ring bytes hold half the stages: repair keeps the deepest ring that fits
    narrow = {**BIG, "bm": 64, "bn": 32, "consumers": 1, "cluster_m": 1, "epi_panels": 0, "stages": 16}
    assert FAMILY.check(FAMILY.repair(narrow), Shape(64, 4096, 4096), H100) is None
    deep_ring = FAMILY.repair({**narrow, "stage_k": 128})
    assert deep_ring["stages"] == 8 and FAMILY.check(deep_ring, Shape(64, 4096, 4096), H100) is None


@pytest.mark.parametrize(
    ("shape", "stage_k"),
    [((64, 4096, 2048), 128), ((64, 1024, 16384), 128), ((512, 512, 4096), 64), ((1024, 1024, 1024), 64),
     ((4096, 4096, 4096), 64), ((64, 4096, 256), 64)],
)  # fmt: skip
def test_defaults_take_deep_stages_for_narrow_tiles_without_a_cluster(shape, stage_k):
    params = FAMILY.default_params(Shape(*shape), H100)
    assert params["stage_k"] == stage_k
    narrow = params["cluster_m"] == 1 and params["bn"] <= 64
    assert params["stage_k"] == (128 if narrow and shape[2] >= 8 * 64 else 64)  # short K: the zero fill would dominate
    assert FAMILY.check(params, Shape(*shape), H100) is None


@pytest.mark.parametrize(
    ("shape", "tile", "stage_k"),
    [((128, 4096, 4096), (64, 64), 128), ((256, 2048, 8192), (64, 64), 128), ((128, 1408, 2048), (64, 64), 128),
     ((128, 4096, 11008), (64, 64), 64),  # K of more than 128 boxes
     ((512, 1024, 4096), (64, 64), 64),  # more than 256 rows
     ((128, 6144, 4096), (64, 128), 64)],  # wider than 80
)  # fmt: skip
def test_defaults_take_deep_stages_for_the_clusters_narrow_tiles_on_short_outputs(shape, tile, stage_k):
    params = FAMILY.default_params(Shape(*shape), H100)
    assert (params["bm"], params["bn"], params["cluster_m"]) == (*tile, 2)
    assert params["stage_k"] == stage_k
    assert FAMILY.check(params, Shape(*shape), H100) is None
    assert FAMILY.default_tuning({**params, "stage_k": 64}, shape=Shape(*shape))["stage_k"] == stage_k
    assert FAMILY.default_tuning({**params, "stage_k": 128})["stage_k"] == 64  # no shape: one box per stage


@pytest.mark.parametrize(
    ("shape", "tile", "cluster"),
    [((1024, 1024, 1024), (64, 128), 2), ((128, 8192, 1024), (64, 128), 2), ((512, 1024, 1024), (64, 64), 2),
     ((128, 1024, 1024), (64, 64), 1),  # a quarter wave
     ((1024, 1024, 512), (64, 128), 1),  # K of fewer than 16 boxes
     ((8192, 128, 1024), (64, 128), 1)],  # taller than wide
)  # fmt: skip
def test_defaults_pair_64_row_tiles_that_make_one_wave(shape, tile, cluster):
    params = FAMILY.default_params(Shape(*shape), H100)
    assert (params["bm"], params["bn"], params["cluster_m"]) == (*tile, cluster)
    assert params["split_k"] == 1 and params["warp_producer"] == int(cluster == 1)
    assert FAMILY.check(params, Shape(*shape), H100) is None


def test_default_tuning_sets_both_parameters_a_configuration_predates():
    narrow = {**BIG, "bm": 64, "bn": 64, "consumers": 1, "cluster_m": 1, "epi_panels": 0, "stages": 14}
    old = {k: v for k, v in narrow.items() if k not in ("warp_producer", "stage_k")}
    assert FAMILY.default_tuning(old, only_absent=True) == {**old, "warp_producer": 1, "stage_k": 128}
    named = {**old, "stage_k": 64}
    assert FAMILY.default_tuning(named, only_absent=True) == {**named, "warp_producer": 1}  # it names its stage
    assert FAMILY.default_tuning({**narrow, "cluster_m": 2, "stage_k": 128})["stage_k"] == 64
    # for a shape of fewer than 8 k-blocks the defaults keep one box per stage: nothing to add to a predating one
    assert FAMILY.default_tuning(old, only_absent=True, shape=Shape(64, 4096, 448)) == {**old, "warp_producer": 1}
    assert FAMILY.default_tuning(old, only_absent=True, shape=Shape(64, 4096, 512))["stage_k"] == 128
    assert FAMILY.default_tuning({**narrow, "stage_k": 128}, shape=Shape(64, 4096, 256))["stage_k"] == 64


@pytest.mark.parametrize(
    ("shape", "bn", "split"),
    [
        ((16, 1408, 2048), 16, 4),  # 22 column tiles: four slices of 8 k-blocks
        ((16, 4608, 3584), 16, 1),  # 72 tiles: two slices would take 144 CTAs
        ((16, 2048, 1408), 16, 2),  # 32 tiles, 22 k-blocks: two slices of 11
        ((16, 4096, 14336), 16, 2),
        ((7, 14336, 4096), 16, 1),
        ((33, 11008, 4096), 48, 1),
        ((48, 64, 64), 48, 1),
    ],
)
def test_outputs_of_at_most_48_rows_default_to_the_narrow_transposed_product(shape, bn, split):
    p = FAMILY.default_params(Shape(*shape), H100)
    assert (p["bm"], p["bn"], p["swap_ab"], p["split_k"], p["epilogue"]) == (64, bn, 1, split, 0)
    assert FAMILY.check(p, Shape(*shape), H100) is None


@pytest.mark.parametrize("shape", [(64, 4096, 4096), (4, 4096, 4096), (1, 6144, 4096)])
def test_outputs_of_49_rows_or_more_or_of_4_or_fewer_keep_the_other_rules(shape):
    """49 rows or more: the one-row rule; 4 or fewer: the gemv family's shapes, where the narrow transposed product
    was not measured."""
    p = FAMILY.default_params(Shape(*shape), H100)
    assert p.get("swap_ab", 0) == 0 and p["bn"] in (32, 64, 128)


@pytest.mark.parametrize(
    ("shape", "split"),
    [((1024, 1024, 16384), 2), ((512, 1024, 16384), 4), ((1024, 1024, 8192), 2), ((512, 2048, 12288), 2)],
)
def test_few_tiles_and_a_long_k_default_to_split_128x128_pairs(shape, split):
    p = FAMILY.default_params(Shape(*shape), H100)
    assert (p["bm"], p["bn"], p["pingpong"], p["cluster_m"], p["split_k"]) == (128, 128, 1, 2, split)
    assert FAMILY.check(p, Shape(*shape), H100) is None


@pytest.mark.parametrize("shape", [(256, 256, 16384), (1024, 1024, 4096), (384, 1024, 16384)])
def test_long_k_split_needs_half_the_sms_64_k_blocks_a_slice_and_pairs(shape):
    """16 CTAs at most (256x256), 32 k-blocks a slice (K = 4096), an odd count of tile rows (384)."""
    p = FAMILY.default_params(Shape(*shape), H100)
    assert not ((p["bm"], p["bn"], p["pingpong"]) == (128, 128, 1) and p["split_k"] > 1 and p["cluster_m"] == 2)


@pytest.mark.parametrize("bn", range(16, 257, 16))
def test_any_width_that_is_a_multiple_of_16_is_valid(bn):
    p = FAMILY.repair({**FAMILY.default_params(Shape(4096, 4096, 4096), H100), "bn": bn, "bm": 128,
                       "consumers": 2, "pingpong": 0})  # fmt: skip
    assert FAMILY.check(p, Shape(4096, 4096, 4096), H100) is None
    assert p["epilogue"] == (1 if bn % 32 == 0 else 0)  # C panels of 32 or 64 columns


@pytest.mark.parametrize("bn", [8, 24, 264])
def test_widths_off_the_16_grid_are_refused(bn):
    assert rules.violation({**wgmma_family.OPTIONAL, **FAMILY.default_params(Shape(4096, 4096, 4096), H100),
                            "bn": bn}, "wgmma")  # fmt: skip


def test_the_tma_store_needs_widths_in_32_column_panels():
    p = {**wgmma_family.OPTIONAL, **FAMILY.default_params(Shape(4096, 4096, 4096), H100), "bn": 144}
    assert "32" in rules.violation({**p, "epilogue": 1, "epi_panels": 0}, "wgmma")
    assert rules.violation({**p, "epilogue": 0, "epi_panels": 0}, "wgmma") is None


def test_two_cooperative_consumers_hold_up_to_192_accumulators():
    base = {**wgmma_family.OPTIONAL, **FAMILY.default_params(Shape(4096, 4096, 4096), H100), "epilogue": 0,
            "epi_panels": 0, "bm": 256, "consumers": 2, "pingpong": 0}  # fmt: skip
    assert rules.violation({**base, "bn": 192}, "wgmma") is None
    assert "accumulator" in rules.violation({**base, "bn": 208}, "wgmma")


def test_the_defaults_four_cluster_slots_are_the_models():
    """The defaults' count of CTAs in clusters of four that fit at once is the model's GPC layout of a 132-SM part."""
    from hgemm.core.gpc import resident_clusters

    assert wgmma_family.four_cluster_slots(132) == 4 * resident_clusters(4, 1, 132) == 120
