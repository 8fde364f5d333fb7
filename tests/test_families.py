"""Our own kernel families (mma_ms, mma_splitk, small): parameter spaces, constraint checks,
default parameters, self-contained rendering, and real nvcc builds for sm_90a and sm_80."""

from __future__ import annotations

import random
import re
import shutil

import pytest
from hgemm.evaluator.kernels import FAMILIES, all_families, get_family
from hgemm.evaluator.kernels.inline import inline_includes

from hgemm.core.record import GpuInfo
from hgemm.core.shape import MAX_ELEMENTS, Shape

OURS = ("mma_ms", "mma_splitk", "small")
SHAPES = [
    (64, 64, 64),
    (200, 136, 264),
    (512, 128, 8192),
    (1024, 1024, 1024),
    (4096, 4096, 4096),
    (256, 256, 512),
]
A100 = GpuInfo(
    name="A100", cc="8.0", driver="x", sm_count=108, l2_bytes=40 << 20, smem_per_block_optin=163 * 1024
)

BIG = {"BM": 128, "BN": 128, "BK": 32, "WARPS_M": 2, "WARPS_N": 2, "STAGES": 4, "RASTER": 8}
SMALL = {"BM": 32, "BN": 32, "WARPS_M": 1, "WARPS_N": 2, "WARPS_K": 2}


def test_registry_holds_our_families():
    assert set(OURS) <= set(FAMILIES)
    assert [f.name for f in all_families()] == list(FAMILIES)
    for name in OURS:
        assert get_family(name).name == name
    with pytest.raises(KeyError, match="unknown kernel family 'nope'"):
        get_family("nope")


@pytest.mark.parametrize("name", OURS)
def test_space_is_well_formed(name):
    fam = get_family(name)
    assert fam.space and fam.description
    for key, values in fam.space.items():
        assert key.isupper() and values, key
        assert all(isinstance(v, int) and v >= 0 for v in values), key
        assert list(values) == sorted(set(values)), key


@pytest.mark.parametrize("name", OURS)
def test_check_rejects_unknown_missing_and_out_of_space(name):
    fam = get_family(name)
    square, ragged = Shape(1024, 1024, 1024), Shape(1024, 1024, 1020)
    good = fam.default_params(square)
    assert fam.check(good, square) is None
    assert "unknown parameter" in fam.check({**good, "BOGUS": 1}, square)
    first = next(iter(good))
    missing = {k: v for k, v in good.items() if k != first}
    assert "missing parameters" in fam.check(missing, square)
    assert "not in" in fam.check({**good, "BM": 48}, square)
    assert "KVEC must be the widest load" in fam.check(good, ragged)  # K % 8 != 0: narrower loads
    narrow = fam.default_params(ragged)
    assert narrow["KVEC"] == 2 and fam.check(narrow, ragged) is None


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"BM": 32, "WARPS_M": 4}, "must be a multiple of 16x16"),
        ({"BM": 256, "BN": 256, "WARPS_M": 1, "WARPS_N": 1}, "accumulators per thread"),
        ({"BM": 256, "BN": 256, "WARPS_M": 4, "WARPS_N": 4}, "registers per thread"),
        ({"BK": 64}, "registers per thread"),  # 64x64 warp tile: BK=64 spills
        ({"BM": 256, "BN": 64, "BK": 64, "WARPS_M": 4, "WARPS_N": 2, "STAGES": 6}, "shared memory"),
    ],
)
def test_mma_check_reasons(change, reason):
    assert reason in get_family("mma_ms").check({**BIG, **change}, Shape(4096, 4096, 4096))


def test_shared_memory_limit_follows_the_gpu():
    fam = get_family("mma_ms")
    p = {**BIG, "BM": 256, "BN": 64, "WARPS_M": 4, "BK": 64, "STAGES": 5}  # 200 KiB of pipeline
    assert fam.check(p, Shape(4096, 4096, 4096)) is None  # Hopper's 227 KB by default
    assert "exceeds 166912 B" in fam.check(p, Shape(4096, 4096, 4096), A100)


def test_splitk_checks_workspace_and_k_tiles():
    fam = get_family("mma_splitk")
    p = {**BIG, "SPLIT_K": 4}
    assert fam.check(p, Shape(1024, 1024, 4096)) is None
    assert "workspace" in fam.check(p, Shape(4096, 4096, 4096))
    assert "more K splits than K tiles" in fam.check(p, Shape(256, 256, 64))
    assert "not in" in fam.check({**p, "SPLIT_K": 1}, Shape(1024, 1024, 4096))


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"BM": 16, "WARPS_M": 2}, "16..64 rows"),
        ({"BM": 128, "WARPS_M": 1}, "16..64 rows"),
        ({"BM": 128, "BN": 128, "WARPS_M": 4, "WARPS_N": 4, "WARPS_K": 8}, "threads per block"),
        ({"BM": 128, "BN": 128, "WARPS_M": 4, "WARPS_N": 2, "WARPS_K": 4}, "registers per thread"),
    ],
)
def test_small_check_reasons(change, reason):
    assert reason in get_family("small").check({**SMALL, **change}, Shape(256, 256, 512))


@pytest.mark.parametrize("name", OURS)
@pytest.mark.parametrize("shape", SHAPES)
def test_default_params_are_valid(name, shape):
    fam = get_family(name)
    params = fam.default_params(Shape(*shape))
    reason = fam.check(params, Shape(*shape))
    if name == "mma_splitk" and shape == (4096, 4096, 4096):
        assert "workspace" in reason  # split-K partials of a 4096^2 output cannot fit 64 MiB
    else:
        assert reason is None, reason


def test_default_tiles_follow_the_shape():
    ms = get_family("mma_ms")
    big = ms.default_params(Shape(4096, 4096, 4096))
    assert big["BM"] * big["BN"] >= 128 * 128
    assert ms.default_params(Shape(64, 64, 64))["BM"] <= 32
    sk = get_family("mma_splitk").default_params(Shape(512, 128, 8192))
    assert (512 // sk["BM"]) * (128 // sk["BN"]) * sk["SPLIT_K"] >= 100  # about a wave of CTAs
    sm = get_family("small").default_params(Shape(256, 256, 512))
    assert sm["WARPS_K"] > 1  # long K relative to the tile: spread over warps
    for m in (1, 7, 16):  # no taller than M needs (H100: 64-row tiles ran at 0.41-0.98x of 16-row ones' speed at M = 16)
        decode = get_family("small").default_params(Shape(m, 6144, 4096))
        assert decode["BM"] == 16 and decode["WARPS_K"] == 8, decode
    assert get_family("small").default_params(Shape(33, 6144, 4096))["BM"] <= 48


@pytest.mark.parametrize("name", OURS)
def test_render_is_self_contained(name):
    fam = get_family(name)
    params = fam.default_params(Shape(200, 136, 264))
    src = fam.render(params)
    assert not re.search(r'#\s*include\s*"', src)
    assert "#pragma once" not in src
    for key, value in params.items():
        assert f"#define HG_{key} {value}\n" in src
    assert 'extern "C" int hgemm_run(' in src and 'extern "C" int hgemm_supports(' in src
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in src
    assert src.count("begin mma_common.cuh") == 1


def test_inline_includes_leaves_system_headers_and_inlines_once():
    text = '#include <cuda_fp16.h>\n#include "mma_common.cuh"\n#include "mma_common.cuh"\n'
    out = inline_includes(text)
    assert out.startswith("#include <cuda_fp16.h>\n")
    assert out.count("hg_mma16816(") == 1
    assert "mma_common.cuh already inlined" in out


# -------------------------------------------------------------------------------- real nvcc builds

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")

BUILDS = [
    ("mma_ms", Shape(4096, 4096, 4096)),
    ("mma_splitk", Shape(512, 128, 8192)),
    ("small", Shape(256, 256, 512)),
]


@needs_nvcc
@pytest.mark.slow
def test_defaults_build_for_hopper_and_ampere_without_spills():
    from hgemm.evaluator.compile import compile_sources

    sources = [get_family(name).render(get_family(name).default_params(shape)) for name, shape in BUILDS]
    results = compile_sources(sources, archs=("sm_90a", "sm_80"), jobs=2)
    for (name, _), res in zip(BUILDS, results, strict=True):
        assert res.ok, f"{name}: {res.failure_kind}: {res.message}\n{res.log[-2000:]}"
        archs = {k.arch for k in res.kernels}
        assert {"sm_90a", "sm_80"} <= archs, archs
        for k in res.kernels:
            assert k.registers is not None and k.registers <= 255, (name, k)
            assert not k.spill_stores and not k.spill_loads, (name, k)
        main = max(res.kernels, key=lambda k: k.registers or 0)
        if name == "mma_ms":
            assert main.registers > 128  # a 64x64 warp tile keeps 128 fp32 accumulators in registers


def test_every_shape_has_a_family_that_takes_it():
    """Any valid shape (1 <= M, N, K <= 65536, every operand below MAX_ELEMENTS): some family's default
    configuration passes its own check, and the shapes TMA can take (N, K multiples of 8) get a wgmma
    configuration; bench/shapes-real.txt included."""
    from importlib import resources

    from hgemm.core.record import GpuInfo

    h100 = GpuInfo("NVIDIA H100 80GB HBM3", "9.0", "x", 132, 50 << 20, 232448)
    rng = random.Random(7)
    dims = [(1, 1, 1), (32767, 32767, 65536), (1, 65536, 7), (65536, 1, 32767)]
    dims += [tuple(rng.choice([rng.randint(1, 64), rng.randint(1, 65536)]) for _ in range(3)) for _ in range(60)]
    shapes = [Shape(M, N, K) for M, N, K in dims if max(M * K, K * N, M * N) < MAX_ELEMENTS]
    text = resources.files("hgemm.bench").joinpath("shapes-real.txt").read_text()
    real = [Shape.of(line) for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert len(real) >= 60
    for shape in shapes + real:
        taken = []
        for fam in all_families():
            params = fam.default_params(shape, h100)
            if params is not None and fam.check(params, shape, h100) is None:
                taken.append(fam.name)
        assert taken, shape
        if shape.N % 8 == 0 and shape.K % 8 == 0:
            assert "wgmma" in taken, shape


@pytest.mark.parametrize("name", ["mma_ms", "mma_splitk"])
def test_realigned_loads_are_for_rows_that_are_not_16_byte_aligned(name):
    fam = get_family(name)
    small_odd, even, aligned = Shape(511, 513, 2047), Shape(300, 500, 700), Shape(1024, 1024, 1024)
    assert fam.default_params(small_odd)["REALIGN"] == 0  # K odd but fewer than eight warps: two-byte loads
    assert fam.default_params(even)["REALIGN"] == 0  # K even: four-byte loads were faster
    good = fam.default_params(aligned)
    assert good["REALIGN"] == 0
    assert "REALIGN is for rows that are not 16-byte aligned" in fam.check({**good, "REALIGN": 1}, aligned)
    assert fam.repair({**good, "REALIGN": 1}) == good
    assert fam.check({**fam.default_params(even), "REALIGN": 1}, even) is None
    # configurations archived before REALIGN existed render as they did
    before = {k: v for k, v in good.items() if k != "REALIGN"}
    assert fam.render(before) == fam.render(good) and "HG_REALIGN" not in fam.render(good).split("#ifndef")[0]


@pytest.mark.parametrize("shape", [(8191, 8191, 8191), (2047, 2047, 2047), (4096, 4096, 4095)])
def test_k_odd_defaults_to_staged_blocks_in_eight_warp_tiles(shape):
    fam = get_family("mma_ms")
    p = fam.default_params(Shape(*shape))
    assert (p["BM"], p["BN"], p["WARPS_M"] * p["WARPS_N"], p["KVEC"], p["REALIGN"]) == (256, 128, 8, 1, 1)
    assert fam.check(p, Shape(*shape)) is None and "#define HG_REALIGN 1" in fam.render(p)
