"""One source of truth for each family's rules (evaluator/kernels/*_rules.cuh): the search reads them through a
host build of the headers, the kernel includes the same header. Every declared space walks through the compiled
rules; a sample of it is compiled with nvcc, which must accept exactly what the rules accept."""

from __future__ import annotations

import itertools
import random
import shutil
import subprocess

import pytest
from hgemm.evaluator.kernels import get_family, rules
from hgemm.evaluator.kernels.gemv_family import GEMV_SPACE
from hgemm.evaluator.kernels.mma_family import MMA_SPACE, SPLIT_K_VALUES
from hgemm.evaluator.kernels.small_family import SMALL_SPACE
from hgemm.evaluator.kernels.wgmma_family import OPTIONAL, SPACE

from hgemm.core.record import GpuInfo
from hgemm.core.shape import Shape

FAMILY = get_family("wgmma")
H100 = GpuInfo("NVIDIA H100 80GB HBM3", "9.0", "x", 132, 50 << 20, 232448)


def _points(seed: int, count: int, accepted: bool) -> list[dict]:
    rng = random.Random(seed)
    found = []
    while len(found) < count:
        p = {k: rng.choice(v) for k, v in SPACE.items()}
        if (rules.violation(p) is None) == accepted:
            found.append(p)
    return found


def test_the_whole_declared_space_walks_through_the_compiled_rules():
    points, accepted, broken = rules.walk(SPACE)
    expected = 1
    for values in SPACE.values():
        expected *= len(values)
    assert points == expected and 0 < accepted < points
    assert broken == 0  # every accepted point keeps what the formulas promise


def test_check_says_what_the_rules_say():
    for p in _points(1, 300, True) + _points(2, 300, False):
        reason = FAMILY.check(p, Shape(12288, 12288, 4096), H100)
        why = rules.violation(p)
        if why is not None:
            assert reason == f"wgmma: {why}"
        else:  # structurally valid: only the shape or the GPU's shared memory may refuse it
            assert reason is None or "tile" in reason or "shared memory" in reason


def test_resource_formulas_come_from_the_header():
    p = {**OPTIONAL, **FAMILY.default_params(Shape(4096, 4096, 4096), H100)}
    assert rules.smem_bytes(p) == FAMILY.smem_bytes(p) and rules.box_k() == 64
    # a 128-deep stage holds two boxes per operand: the ring's bytes double, the k-blocks halve
    deep = {**p, "stage_k": 128}
    assert rules.smem_bytes(deep) - rules.smem_bytes(p) == p["stages"] * (p["bm"] + p["bn"]) * 64 * 2
    assert rules.shape_violation({**deep, "split_k": 2, "epilogue": 0}, Shape(1024, 1024, 256)) is None
    assert "fewer k-blocks than split_k" in rules.shape_violation({**deep, "split_k": 3, "epilogue": 0},
                                                                  Shape(1024, 1024, 256))  # fmt: skip
    assert "STAGE_K must be 64 or 128" in rules.violation({**p, "stage_k": 32})
    assert rules.wg_rows({**p, "pingpong": 1, "bn": 192}) == p["bm"] and rules.c_panel({**p, "bn": 160}) == 32
    assert rules.shape_violation(p, Shape(4096, 4096, 4000)) is None  # partial last k-block: TMA zero-fills it
    assert "K must be a multiple of 8" in rules.shape_violation(p, Shape(4096, 4096, 4001))
    assert "N must be a multiple of 8" in rules.shape_violation(p, Shape(4096, 4100, 4096))
    assert rules.shape_violation(p, Shape(1, 4096, 4096)) is None
    assert rules.shape_violation(p, Shape(77, 5120, 5120)) is None


needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")


@needs_nvcc
def test_nvcc_accepts_exactly_what_the_rules_accept(tmp_path):
    """The kernel's static_assert is the header's `violation`: a sample of accepted and refused points of the
    declared space, compiled (host pass and an sm_80 pass, which evaluate it the same way sm_90a does)."""
    cases = [(p, True) for p in _points(3, 4, True)] + [(p, False) for p in _points(4, 4, False)]
    for n, (params, ok) in enumerate(cases):
        src = tmp_path / f"k{n}.cu"
        src.write_text(FAMILY.render(params))
        done = subprocess.run(["nvcc", "-std=c++17", "--expt-relaxed-constexpr", "-gencode=arch=compute_80,code=sm_80",
                               "-c", str(src), "-o", str(tmp_path / f"k{n}.o")], capture_output=True, text=True,
                              timeout=300)  # fmt: skip
        assert (done.returncode == 0) == ok, (params, rules.violation(params), done.stdout[-800:], done.stderr[-800:])
        if not ok:
            assert "break a rule of wgmma_rules.cuh" in done.stdout + done.stderr


def test_the_template_states_no_rule_of_its_own():
    from hgemm.evaluator.kernels.family import kernel_file

    template = kernel_file("wgmma_ws.cu")
    asserts = [line for line in template.splitlines() if "static_assert" in line]
    assert asserts == ['static_assert(wgmma_rules::violation(P) == nullptr, "these parameters break a rule of '
                       'wgmma_rules.cuh");']
    for switch in ("HG_SK_WAVE", "HG_FULL_CLUSTER_SYNC", "HG_B_MULTICAST", "HG_PDL"):
        assert switch not in template  # experiment switches live in experiments, not in the product
    assert all(f"#ifndef HG_{k.upper()}" not in template for k in SPACE)  # defaults live in the family only
    assert set(itertools.chain(SPACE)) == set(rules.ORDERS["wgmma"])


OTHER_SPACES = {
    "mma": ("mma", {**MMA_SPACE, "SPLIT_K": (1, *SPLIT_K_VALUES)}),
    "small": ("small", SMALL_SPACE),
    "gemv": ("gemv", GEMV_SPACE),
}


@pytest.mark.parametrize("name", sorted(OTHER_SPACES))
def test_the_other_families_walk_their_spaces_too(name):
    fam, space = OTHER_SPACES[name]
    points, accepted, broken = rules.walk(space, fam)
    expected = 1
    for values in space.values():
        expected *= len(values)
    assert points == expected and 0 < accepted < points and broken == 0


def _family_points(name: str, seed: int, count: int, accepted: bool) -> list[dict]:
    fam, space = OTHER_SPACES[name]
    rng = random.Random(seed)
    found = []
    while len(found) < count:
        p = {k: rng.choice(v) for k, v in space.items()}
        if (rules.violation(p, fam) is None) == accepted:
            found.append(p)
    return found


@pytest.mark.parametrize("name", sorted(OTHER_SPACES))
def test_the_other_families_check_what_their_rules_say(name):
    fam, _ = OTHER_SPACES[name]
    for p in _family_points(name, 5, 200, False):
        why = rules.violation(p, fam)
        split = p.get("SPLIT_K", 1) > 1
        family = get_family(name if name in ("small", "gemv") else "mma_splitk" if split else "mma_ms")
        if name == "mma" and not split:
            p = {k: v for k, v in p.items() if k != "SPLIT_K"}
        reason = family.check(p, Shape(4096, 4096, 4096), H100)
        assert reason is not None and why in reason


@needs_nvcc
@pytest.mark.parametrize("name", sorted(OTHER_SPACES))
def test_nvcc_accepts_exactly_what_the_other_rules_accept(name, tmp_path):
    fam, _ = OTHER_SPACES[name]
    family = get_family("mma_splitk" if name == "mma" else name)  # mma_splitk renders SPLIT_K=1 as well
    cases = [(p, True) for p in _family_points(name, 6, 2, True)] + [(p, False) for p in _family_points(name, 7, 2, False)]
    for n, (params, ok) in enumerate(cases):
        src = tmp_path / f"k{n}.cu"
        src.write_text(family.render(params))
        done = subprocess.run(["nvcc", "-std=c++17", "--expt-relaxed-constexpr", "-gencode=arch=compute_80,code=sm_80",
                               "-c", str(src), "-o", str(tmp_path / f"k{n}.o")], capture_output=True, text=True,
                              timeout=300)  # fmt: skip
        assert (done.returncode == 0) == ok, (params, rules.violation(params, fam), done.stderr[-800:])
        if not ok:
            assert f"break a rule of {fam}_rules.cuh" in done.stdout + done.stderr
