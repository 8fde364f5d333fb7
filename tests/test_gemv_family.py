"""The gemv family (M <= 4 on the CUDA cores): which shapes it takes and why not, its defaults, a self-contained
source, real nvcc builds of its heaviest points without spills, the analytic model's view of it, and the
template search proposing it first on decode shapes only."""

from __future__ import annotations

import itertools
import re
import shutil

import pytest
from hgemm.agent.model import GEMV_HBM_SHARE, KERNEL_LAUNCH_US, gpu_peaks, predict
from hgemm.agent.proposer import ProposalContext
from hgemm.agent.template import TemplateProposer
from hgemm.evaluator.kernels import FAMILIES, get_family, rules

from hgemm.core.record import GpuInfo
from hgemm.core.shape import Shape

H100 = GpuInfo("NVIDIA H100 80GB HBM3", "9.0", "x", 132, 50 << 20, 232448)
FAM = get_family("gemv")


def test_it_is_registered_and_declares_its_space():
    assert FAMILIES["gemv"] is FAM and FAM.min_cc == 8.0
    assert set(FAM.space) == set(rules.ORDERS["gemv"]) and FAM.tuning == ("UNROLL",)
    for values in FAM.space.values():
        assert list(values) == sorted(set(values)) and all(isinstance(v, int) and v > 0 for v in values)


@pytest.mark.parametrize(
    "shape",
    [(1, 1, 1), (1, 4096, 14336), (2, 33, 65), (3, 1000, 6), (4, 257, 4093), (1, 65536, 8), (4, 7, 65536)],
)
def test_defaults_take_every_shape_up_to_four_rows(shape):
    s = Shape(*shape)
    params = FAM.default_params(s, H100)
    assert FAM.check(params, s, H100) is None
    assert params["MAXM"] == min(v for v in (1, 2, 4) if v >= s.M)
    assert params["KVEC"] == (8 if s.K % 8 == 0 else 2 if s.K % 2 == 0 else 1)
    if s.M == 1:
        assert params["ROWS"] == 2 and params["KSPLIT"] == (1 if s.K >= 12288 else 2)
        # four chunks in flight, or the most the registers allow with narrow loads
        assert params["UNROLL"] == 4 or rules.violation({**params, "UNROLL": 2 * params["UNROLL"]}, "gemv")
        assert params["UNROLL"] == 4 or s.K % 8
    else:  # from two rows of A: four rows of Bt per warp share A's loads, one chunk in flight
        assert (params["ROWS"], params["KSPLIT"], params["UNROLL"]) == (4, 2, 1)


def test_from_five_rows_it_offers_nothing_and_says_why():
    s = Shape(5, 4096, 4096)
    assert FAM.default_params(s, H100) is None
    one = FAM.default_params(Shape(1, 4096, 4096))
    assert "M <= 4" in FAM.check({**one, "MAXM": 4}, s)


@pytest.mark.parametrize(
    ("change", "shape", "reason"),
    [
        ({"MAXM": 2}, (1, 64, 64), "MAXM must be the smallest of 1, 2, 4 that holds M"),
        ({"MAXM": 1}, (2, 64, 64), "MAXM must be the smallest"),
        ({"KVEC": 8}, (1, 64, 66), "KVEC must be the widest load K allows"),
        ({"KVEC": 2}, (1, 64, 64), "KVEC must be the widest load K allows"),
        ({"MAXM": 4, "ROWS": 8, "UNROLL": 8}, (4, 64, 64), "too many registers"),
        ({"WARPS": 16, "ROWS": 8, "UNROLL": 4}, (1, 64, 64), "too many registers per thread for the block's threads"),
        ({"UNROLL": 3}, (1, 64, 64), "UNROLL=3 not in"),
    ],
)
def test_check_reasons(change, shape, reason):
    s = Shape(*shape)
    base = FAM.default_params(s)
    assert base is not None and FAM.check(base, s) is None
    assert reason in FAM.check({**base, **change}, s)


def test_the_whole_space_walks_through_its_rules():
    points, accepted, broken = rules.walk(FAM.space, "gemv")
    assert points == 3 * 4 * 3 * 3 * 4 * 3 and 0 < accepted < points and broken == 0


def test_render_is_self_contained():
    params = FAM.default_params(Shape(3, 1000, 70))
    src = FAM.render(params)
    assert not re.search(r'#\s*include\s*"', src) and "#pragma once" not in src
    for key, value in params.items():
        assert f"#define HG_{key} {value}\n" in src
    assert src.count("begin gemv_rules.cuh") == 1 and src.count("begin mma_common.cuh") == 1
    assert 'extern "C" int hgemm_run(' in src and 'extern "C" int hgemm_supports(' in src
    assert "fmaf(" in src and "mma.sync" not in src.split("begin gemv_rules.cuh")[1]  # CUDA cores, fp32 sums


def _heaviest() -> list[dict]:
    """Of the points the rules accept, the one with the largest register estimate for each KVEC and WARPS."""
    points = [dict(zip(FAM.space, v)) for v in itertools.product(*FAM.space.values())]
    ok = [p for p in points if rules.violation(p, "gemv") is None]
    out = []
    for kvec, warps in itertools.product((1, 2, 8), (4, 16)):
        group = [p for p in ok if p["KVEC"] == kvec and p["WARPS"] == warps]
        out.append(max(group, key=lambda p: (rules.register_estimate(p, "gemv"), sorted(p.items()))))
    return out


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.slow
def test_its_heaviest_points_build_for_hopper_and_ampere_without_spills():
    from hgemm.evaluator.compile import compile_sources

    heaviest = _heaviest()
    results = compile_sources([FAM.render(p) for p in heaviest], archs=("sm_90a", "sm_80"), jobs=2, use_cache=False)
    for params, res in zip(heaviest, results, strict=True):
        assert res.ok, (params, res.failure_kind, res.message)
        assert {k.arch for k in res.kernels} >= {"sm_90a", "sm_80"}
        for k in res.kernels:
            assert not k.spill_stores and not k.spill_loads, (params, k)


def test_the_model_reads_b_once_at_the_measured_share_of_the_hbm_rate():
    s = Shape(1, 4096, 14336)
    pred = predict(FAM, FAM.default_params(s), s, H100)
    floor = 4096 * 14336 * 2 / (gpu_peaks(H100).hbm_bps * GEMV_HBM_SHARE) * 1e6
    assert pred.dram_us == pytest.approx(floor, rel=0.01)
    assert floor + KERNEL_LAUNCH_US <= pred.us < 1.1 * floor + KERNEL_LAUNCH_US
    # four rows of A with the same kernel shape: the same bytes of B, four times the FMAs, but B's loads and
    # conversions once (1 + 8 + 8 + 9/4 instructions per 8 values and row of Bt against 1 + 8 + 32 + 9)
    four = Shape(4, 4096, 14336)
    p4 = FAM.default_params(four)
    ratio = predict(FAM, p4, four, H100).compute_us / predict(FAM, {**p4, "MAXM": 1}, s, H100).compute_us
    assert ratio == pytest.approx((1 + 8 + 32 + 9) / (1 + 8 + 8 + 9 / 4))


def test_the_model_puts_it_ahead_of_the_tensor_core_defaults_at_one_row():
    """Measured on an H100 (experiments/2026-11-27-small-m-gemv): at M = 1 the probe of this kernel beat the best
    library on every shape while wgmma's and small's kernels did not."""
    for shape in [(1, 4096, 14336), (1, 1408, 2048), (1, 6144, 4096)]:
        s = Shape(*shape)
        mine = predict(FAM, FAM.default_params(s), s, H100).us
        for name in ("wgmma", "small"):
            other = FAMILIES[name]
            assert mine < predict(other, other.default_params(s, H100), s, H100).us, (shape, name)


def test_the_search_proposes_it_early_on_decode_shapes_and_never_from_five_rows():
    for shape in [(1, 4096, 14336), (1, 4608, 3584), (2, 100, 77), (4, 4096, 4096)]:
        cands = TemplateProposer(seed=0).propose(ProposalContext(Shape(*shape), H100), 8)
        families = [c.family for c in cands]
        assert "gemv" in families[:4], (shape, families)
        if shape[0] == 1 and shape[1] * shape[2] >= 1 << 24:  # decode with B of tens of MB: first (as measured)
            assert families[0] == "gemv", (shape, families)
        assert all(FAMILIES[c.family].check(c.params, Shape(*shape), H100) is None for c in cands)
    cands = TemplateProposer(seed=0).propose(ProposalContext(Shape(16, 4096, 4096), H100), 8)
    assert cands and "gemv" not in {c.family for c in cands}
