"""Any shape on a real GPU: each family's kernels are correct on shapes no tile divides, through the real
evaluator (its check of every element against a float64 reference, outputs poisoned before each call).

wgmma takes any M, N and K: partial tiles in every dimension, in each of its store paths (TMA store, register
stores, split-K partials, DSMEM reduction, stream-K); K not a multiple of 8 through `pad_rows`, N not a multiple
of 8 through register stores. mma_ms, mma_splitk and small take any K
through KVEC (mma_ms and mma_splitk with narrow loads or staged, realigned blocks); gemv any N and K for M <= 4.
Run: `pytest -m gpu tests/test_any_shape_gpu.py -s` (prints a table).
"""

from __future__ import annotations

import pytest

from hgemm.core.shape import Shape

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

# (M, N, K): M = 1 and a prime; N not a multiple of 16 or 64; K with a partial last k-block.
WGMMA_SHAPES = [
    Shape(*s) for s in [(1, 256, 512), (77, 520, 1000), (1000, 1032, 2056), (513, 264, 136), (2053, 8, 8)]
]
WGMMA_VARIANTS = {
    "tma-store": {},
    "register-store": {"epilogue": 0},
    "split-k": {"epilogue": 0, "split_k": 2},
    "split-dsmem": {"epilogue": 0, "split_k": 2, "split_dsmem": 1, "persistent": 0},
    "stream-k": {"stream_k": 1, "persistent": 1},
    "cluster-2": {"cluster_m": 2, "bm": 128, "consumers": 2},
    "cluster-4": {"cluster_m": 4, "bm": 64, "bn": 64, "consumers": 1},
    "cluster-4-pingpong": {"cluster_m": 4, "bm": 128, "bn": 96, "consumers": 2, "pingpong": 1, "epi_panels": 2},
    "pingpong": {"pingpong": 1, "consumers": 2, "bm": 128},
}
# K odd, K even but not a multiple of 8, K < 8, one element; K % 8 from 1 to 7 (each row of A and Bt then starts
# at its own offset into a 16-byte block, which the realigning loads undo).
NARROW_SHAPES = [
    Shape(*s)
    for s in [(1, 1, 1), (17, 33, 65), (513, 257, 129), (300, 500, 70), (64, 72, 6), (2000, 3000, 4093),
              (257, 100, 1002), (129, 130, 4099), (200, 264, 700), (96, 96, 1031)]  # fmt: skip
]


def _run(cases: list[tuple[str, str, dict, Shape]]) -> list[dict]:
    from hgemm.evaluator.compile import compile_sources
    from hgemm.evaluator.kernels import get_family
    from hgemm.evaluator.local import LocalEvaluator

    compile_sources(sorted({get_family(f).render(p) for _, f, p, _ in cases}))  # in parallel, into the cache
    rows = []
    with LocalEvaluator(baselines=False) as ev:
        gpu = ev.gpu_info()
        for label, fam_name, params, shape in cases:
            fam = get_family(fam_name)
            why = fam.check(params, shape, gpu)
            assert why is None, (label, shape, why)
            rec = ev.evaluate([fam.render(params)], shape, stage="full", modes=("offline",))[0]
            rows.append({"family": fam_name, "variant": label, "shape": str(shape),
                         "ok": rec.ok, "kind": rec.failure_kind, "message": (rec.failure_message or "")[:200],
                         "max_rel_err": rec.max_rel_err, "us": rec.median_us("offline")})  # fmt: skip
    for r in rows:
        print(f"{'ok ' if r['ok'] else 'BAD'} {r['family']:<10} {r['variant']:<15} {r['shape']:<16} "
              f"{r['us'] or 0:9.2f} us  {r['kind'] or ''} {r['message']}")  # fmt: skip
    return rows


def test_wgmma_is_correct_on_ragged_shapes():
    import torch

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("wgmma kernels need a compute capability 9.x GPU")
    from hgemm.evaluator.kernels import get_family

    fam = get_family("wgmma")
    cases = []
    for i, shape in enumerate(WGMMA_SHAPES):
        base = fam.default_params(shape)
        assert base is not None, shape
        for j, (label, change) in enumerate(WGMMA_VARIANTS.items()):
            # the producer's loop in one thread or in its whole warp, alternating from shape to shape
            params = fam.repair({**base, **change, "warp_producer": (i + j) % 2})
            if fam.check(params, shape) is None:
                cases.append((label, "wgmma", params, shape))
    assert {c[0] for c in cases} == set(WGMMA_VARIANTS)  # every store path ran on some ragged shape
    assert {c[2]["warp_producer"] for c in cases} == {0, 1}
    bad = [r for r in _run(cases) if not r["ok"]]
    assert not bad, bad


def test_wgmma_deep_stages_are_correct_on_ragged_shapes():
    """HG_STAGE_K 128 (two TMA boxes per operand behind one barrier) in every store path, on the same shapes: K of
    8 and 136 leave a stage's second box, or most of it, to TMA's zero fill; 1000 a partial last stage."""
    import torch

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("wgmma kernels need a compute capability 9.x GPU")
    from hgemm.evaluator.kernels import get_family

    fam = get_family("wgmma")
    variants = {**WGMMA_VARIANTS, "64x32": {"bm": 64, "bn": 32, "consumers": 1, "stages": 8},
                "swap-64x32": {"swap_ab": 1, "bm": 64, "bn": 32, "consumers": 1, "stages": 8, "epilogue": 0,
                               "pingpong": 0, "stream_k": 0}}  # fmt: skip
    cases = []
    for i, shape in enumerate(WGMMA_SHAPES):
        base = fam.default_params(shape)
        for j, (label, change) in enumerate(variants.items()):
            params = fam.repair({**base, **change, "stage_k": 128, "warp_producer": (i + j) % 2})
            if fam.check(params, shape) is None:
                cases.append((label, "wgmma", params, shape))
    assert {c[0] for c in cases} == set(variants)  # every store path ran with deep stages on some ragged shape
    assert {c[2]["stage_k"] for c in cases} == {128}
    bad = [r for r in _run(cases) if not r["ok"]]
    assert not bad, bad


def test_wgmma_swap_ab_is_correct_on_ragged_shapes():
    """HG_SWAP_AB (Ct = Bt A^T, C stored transposed) on the same shapes, through registers and the workspace,
    with and without the cluster that then multicasts A."""
    import torch

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("wgmma kernels need a compute capability 9.x GPU")
    from hgemm.evaluator.kernels import get_family

    fam = get_family("wgmma")
    variants = {
        "swap": {"swap_ab": 1},
        "swap-split-k": {"swap_ab": 1, "split_k": 2},
        "swap-cluster-2": {"swap_ab": 1, "cluster_m": 2, "bm": 128, "consumers": 2},
        "swap-cluster-4": {"swap_ab": 1, "cluster_m": 4, "bm": 64, "bn": 32, "consumers": 1, "stages": 8},
        "swap-64x32": {"swap_ab": 1, "bm": 64, "bn": 32, "consumers": 1, "stages": 16},
    }
    cases = []
    for shape in WGMMA_SHAPES:
        base = fam.default_params(shape)
        for label, change in variants.items():
            params = fam.repair({**base, **change, "pingpong": 0, "stream_k": 0})
            if fam.check(params, shape) is None:
                cases.append((label, "wgmma", params, shape))
    assert {c[0] for c in cases} == set(variants)
    bad = [r for r in _run(cases) if not r["ok"]]
    assert not bad, bad


# K % 8 from 1 to 7 (pad_rows), N odd or not a multiple of 8, M = 1, and K below one box.
PAD_SHAPES = [Shape(*s) for s in [(17, 33, 65), (513, 257, 129), (300, 500, 70), (64, 72, 6), (1, 1, 1),
                                  (257, 104, 1002), (129, 136, 4099), (200, 264, 700), (1000, 1001, 1000), (77, 1003, 2050)]]  # fmt: skip
PAD_VARIANTS = {
    "default": {},
    "tma-store": {"epilogue": 1, "bn": 64},
    "register-store": {"epilogue": 0},
    "split-k": {"epilogue": 0, "split_k": 2},
    "split-dsmem": {"epilogue": 0, "split_k": 2, "split_dsmem": 1, "persistent": 0},
    "cluster-2": {"cluster_m": 2, "bm": 128, "consumers": 2},
    "cluster-4": {"cluster_m": 4, "bm": 64, "bn": 64, "consumers": 1},
    "pingpong": {"pingpong": 1, "consumers": 2, "bm": 128},
    "swap": {"swap_ab": 1},
    "deep-stage": {"stage_k": 128, "warp_producer": 1},
}


def test_wgmma_is_correct_on_any_k_and_n():
    """K not a multiple of 8 through `pad_rows` (A and Bt copied into the workspace with 16-byte rows, the GEMM
    launched as the copy's programmatic dependent), N not a multiple of 8 or odd through register stores, in the
    store paths each allows."""
    import torch

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("wgmma kernels need a compute capability 9.x GPU")
    from hgemm.evaluator.kernels import get_family

    fam = get_family("wgmma")
    cases = []
    for shape in PAD_SHAPES:
        base = fam.default_params(shape)
        assert base is not None, shape
        for label, change in PAD_VARIANTS.items():
            params = fam.repair({**base, **change})
            if fam.check(params, shape) is None and params not in [c[2] for c in cases if c[3] == shape]:
                cases.append((label, "wgmma", params, shape))
    assert {c[0] for c in cases} == set(PAD_VARIANTS)
    assert {c[2]["pad_rows"] for c in cases} == {0, 1}
    assert any(c[3].N % 2 for c in cases if c[2]["pad_rows"]) and any(c[3].N % 2 for c in cases if not c[2]["pad_rows"])
    bad = [r for r in _run(cases) if not r["ok"]]
    assert not bad, bad


# Copies of all of A and Bt beyond the 64 MiB workspace: C in blocks. 3000x6000: A whole, Bt in 5120 + 880 rows;
# 5000x5001: A in 3840 + 1160 rows, Bt in 4096 + 905, N odd.
BLOCKED_SHAPES = [Shape(3000, 6000, 4099), Shape(5000, 5001, 4099)]
BLOCKED_VARIANTS = {
    "default": {},
    "tma-store": {"epilogue": 1, "epi_panels": 2},
    "register-store": {"epilogue": 0, "cluster_m": 1},
    "split-dsmem": {"epilogue": 0, "split_k": 2, "split_dsmem": 1, "persistent": 0, "bn": 128},
    "swap": {"swap_ab": 1, "cluster_m": 2},
}


def test_wgmma_pads_block_by_block_where_the_copies_exceed_the_workspace():
    import torch

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("wgmma kernels need a compute capability 9.x GPU")
    from hgemm.evaluator.kernels import get_family, rules

    fam = get_family("wgmma")
    cases = []
    for shape in BLOCKED_SHAPES:
        assert rules.pad_block(shape) < (shape.M, shape.N), shape  # computed block by block
        base = fam.default_params(shape)
        for label, change in BLOCKED_VARIANTS.items():
            params = fam.repair({**base, **change})
            if fam.check(params, shape) is None:
                cases.append((label, "wgmma", params, shape))
    assert {c[0] for c in cases} == set(BLOCKED_VARIANTS)
    bad = [r for r in _run(cases) if not r["ok"]]
    assert not bad, bad


def test_narrow_loads_are_correct_on_any_k():
    from hgemm.evaluator.kernels import get_family

    cases = []
    for shape in NARROW_SHAPES:
        for name in ("mma_ms", "mma_splitk", "small"):
            params = get_family(name).default_params(shape)
            for realign in (0, 1) if "REALIGN" in params else (None,):
                p = params if realign is None else {**params, "REALIGN": realign}
                if get_family(name).check(p, shape) is None:
                    cases.append((f"KVEC {p['KVEC']}" + ("" if realign is None else f" realign {realign}"), name, p, shape))
    assert {c[1] for c in cases} == {"mma_ms", "mma_splitk", "small"}
    assert {c[0] for c in cases} == {"KVEC 1", "KVEC 2"} | {f"KVEC {v} realign {r}" for v in (1, 2) for r in (0, 1)}
    bad = [r for r in _run(cases) if not r["ok"]]
    assert not bad, bad


# M = 1 to 4: each MAXM; N = 1 and N not a multiple of ROWS; K below one 256-wide chunk, between chunks, odd,
# even but not a multiple of 8, and long enough for one K range per warp group.
GEMV_SHAPES = [Shape(*s) for s in [(1, 1, 1), (1, 4097, 8), (2, 33, 65), (3, 1000, 6), (4, 257, 4093), (1, 999, 12296)]]
GEMV_VARIANTS = {
    "default": {},
    "k-split-4": {"KSPLIT": 4, "WARPS": 16, "ROWS": 1, "UNROLL": 2},
    "rows-8": {"ROWS": 8, "UNROLL": 1, "WARPS": 4, "KSPLIT": 2},
    "unroll-8": {"ROWS": 1, "UNROLL": 8, "KSPLIT": 1},
}


def test_gemv_is_correct_on_any_small_m():
    from hgemm.evaluator.kernels import get_family

    fam = get_family("gemv")
    cases = []
    for shape in GEMV_SHAPES:
        base = fam.default_params(shape)
        for label, change in GEMV_VARIANTS.items():
            params = {**base, **change}
            if fam.check(params, shape) is None:
                cases.append((label, "gemv", params, shape))
    assert {c[0] for c in cases} == set(GEMV_VARIANTS)
    assert {c[2]["MAXM"] for c in cases} == {1, 2, 4} and {c[2]["KVEC"] for c in cases} == {1, 2, 8}
    bad = [r for r in _run(cases) if not r["ok"]]
    assert not bad, bad
