"""On a GPU: every adversarial kernel fails with the kind its EXPECT line names, every honest
kernel passes, through the real `LocalEvaluator`.

Run: `pytest -m gpu tests/test_gpu_adversarial.py -s` (prints a table). With HGEMM_REPORT_DIR
set, a JSON report (kernel, expected, got, message) is written there as well.

Alternatives in an EXPECT line are kinds that are both right for that cheat: work on a side
stream is `incomplete_on_event` when run directly and `not_capturable` if the capture check
sees it first.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from adversarial.catalog import adversarial, honest

from hgemm.core.shape import Shape

pytestmark = pytest.mark.gpu

ADVERSARIAL_SHAPE = (200, 136, 264)  # no dimension a multiple of 16, 32 or 256; K >= 256
HONEST_SHAPES = [(256, 256, 512), (200, 136, 264)]


def _report(name: str, rows: list[dict]) -> None:
    width = max(len(r["kernel"]) for r in rows)
    print(f"\n{name}")
    for r in rows:
        mark = "ok " if r["pass"] else "BAD"
        print(f"  {mark} {r['kernel']:<{width}}  expected {r['expected']:<36} got {r['got']}")
    out = os.environ.get("HGEMM_REPORT_DIR")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / f"{name}.json").write_text(json.dumps(rows, indent=1))


def test_adversarial_kernels_fail_as_expected():
    from hgemm.evaluator.local import LocalEvaluator

    kernels = [k for k in adversarial() if k.expect != ("no_gain",)]
    assert len(kernels) >= 14
    M, N, K = ADVERSARIAL_SHAPE
    with LocalEvaluator() as ev:
        records = ev.evaluate([k.source for k in kernels], Shape(M, N, K), stage="full", modes=("offline",))
    assert len(records) == len(kernels)
    rows = []
    for kernel, rec in zip(kernels, records):
        rows.append(
            {
                "kernel": kernel.name,
                "cheat": kernel.summary,
                "expected": "|".join(kernel.expect),
                "got": str(rec.failure_kind),
                "message": (rec.failure_message or "")[:300],
                "pass": rec.failure_kind in kernel.expect and not rec.correct,
            }
        )
    _report(f"adversarial-{M}x{N}x{K}", rows)
    wrong = [
        f"{r['kernel']}: expected {r['expected']}, got {r['got']} ({r['message']})"
        for r in rows
        if not r["pass"]
    ]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("shape", HONEST_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_honest_kernels_pass(shape):
    from hgemm.evaluator.local import LocalEvaluator

    kernels = honest()
    assert len(kernels) >= 3
    M, N, K = shape
    with LocalEvaluator() as ev:
        records = ev.evaluate([k.source for k in kernels], Shape(M, N, K), stage="full", modes=("offline",))
    rows = [
        {
            "kernel": k.name,
            "expected": "correct",
            "got": "correct" if rec.ok else str(rec.failure_kind),
            "message": (rec.failure_message or "")[:300],
            "max_rel_err": rec.max_rel_err,
            "ref_rel_err": rec.ref_rel_err,
            "pass": bool(rec.correct) and rec.failure_kind is None,
        }
        for k, rec in zip(kernels, records)
    ]
    _report(f"honest-{M}x{N}x{K}", rows)
    wrong = [f"{r['kernel']}: {r['got']} ({r['message']})" for r in rows if not r["pass"]]
    assert not wrong, "\n".join(wrong)
    for rec in records:  # a correct record carries its timing and the resources of its build
        assert rec.compiled and rec.resources is not None and rec.resources.registers
        assert rec.median_us("offline") and rec.median_us("offline") > 0


def test_neutralised_cheats_gain_nothing():
    """Cheats that only pay when a timed call can reuse an earlier result are accepted (they compute) and are
    timed no faster than their honest twin: inputs change and outputs are poisoned before every sample."""
    from hgemm.evaluator.local import LocalEvaluator

    kernels = [k for k in adversarial() if k.expect == ("no_gain",)]
    assert len(kernels) >= 2
    twins = {k.name: k for k in honest()}
    M, N, K = ADVERSARIAL_SHAPE
    sources = [k.source for k in kernels] + [twins[k.twin].source for k in kernels]
    with LocalEvaluator() as ev:
        records = ev.evaluate(sources, Shape(M, N, K), stage="full", modes=("offline", "server"))
    cheats, honest_twins = records[: len(kernels)], records[len(kernels) :]
    rows = []
    for kernel, rec, twin in zip(kernels, cheats, honest_twins):
        ratio = {m: (twin.median_us(m) / rec.median_us(m)) if rec.ok and twin.ok else None
                 for m in ("offline", "server")}
        rows.append({"kernel": kernel.name, "cheat": kernel.summary, "expected": f"no faster than {kernel.twin}",
                     "got": "correct" if rec.ok else str(rec.failure_kind), "speedup_over_twin": ratio,
                     "message": (rec.failure_message or "")[:300],
                     "pass": rec.ok and twin.ok and all(r is not None and r <= 1.05 for r in ratio.values())})
    _report(f"neutralised-{M}x{N}x{K}", rows)
    wrong = [f"{r['kernel']}: {r['got']} {r['speedup_over_twin']} ({r['message']})" for r in rows if not r["pass"]]
    assert not wrong, "\n".join(wrong)
