"""The evaluation-cost benchmark (bench/eval_cost.py) on a scripted evaluator and compiler: what it runs,
the medians it reports and the files it writes (the real run needs a GPU)."""

from __future__ import annotations

import json

from hgemm.bench import eval_cost
from hgemm.evaluator.compile import CompileResult
from hgemm.evaluator.phases import OUTSIDE
from test_phases import TIME_PHASES

from hgemm.core.record import EvalRecord, GpuInfo


class PhasedEvaluator:
    """Stands in for LocalEvaluator in the benchmark: records with phases, the first on a shape prepared."""

    def __init__(self):
        self.shapes = set()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def gpu_info(self):
        return GpuInfo(name="NVIDIA H100 80GB HBM3", cc="9.0", driver="580.1", sm_count=132, l2_bytes=50 << 20,
                       smem_per_block_optin=232448)  # fmt: skip

    def evaluate(self, sources, shape, *, stage, modes):
        if "family small" in sources[0] and tuple(shape) == (256, 4096, 1024) and stage == "full":
            return [
                EvalRecord("e" * 16, *shape, stage=stage, eval_seconds=0.01).fail("unsupported_shape", "no")
            ]
        rec = EvalRecord("e" * 16, *shape, stage=stage, correct=True, eval_seconds=0.5)
        rec.phases = {"compile": 0.01, **TIME_PHASES, "teardown": 0.001}
        if tuple(shape) not in self.shapes:
            self.shapes.add(tuple(shape))
            rec.phases["prepare"] = 2.0
        return [rec]


def stand_in(monkeypatch) -> None:
    """Every source compiles (3 s, 2.5 of them nvcc's) and PhasedEvaluator evaluates."""

    def compiled(sources):
        return [CompileResult("f" * 16, True, "/x.so", "", seconds=3.0, compile_seconds=2.5) for _ in sources]

    monkeypatch.setattr(eval_cost, "compile_sources", compiled)
    monkeypatch.setattr(eval_cost, "LocalEvaluator", PhasedEvaluator)


def test_the_cost_benchmark_reports_medians_per_stage_and_shape(tmp_path, monkeypatch):
    stand_in(monkeypatch)
    eval_cost.main(["--out", str(tmp_path), "--shapes", "128x128x128,256x4096x1024", "--repeats", "2",
                    "--families", "mma_ms,small"])  # fmt: skip
    (md,) = tmp_path.glob("eval-cost-H100-*.md")
    doc = json.loads(md.with_suffix(".json").read_text())
    assert doc["gpu"] == "NVIDIA H100 80GB HBM3" and doc["driver"] == "580.1" and doc["date"] in md.name
    assert doc["calls"] == doc["planned"] == 2 * 2 * 2 * 2 and doc["failed"] == 2
    assert doc["not_accepted"] == ["small 256x4096x1024 full: unsupported_shape"]  # left out of the medians
    full = doc["summary"]["full"]
    assert full["eval_seconds"] == 0.5 and full["spare_wait"] == 0.05 and "prepare" not in full
    assert full["other"] == max(0.0, 0.5 - sum(v for k, v in TIME_PHASES.items() if k not in OUTSIDE) - 0.001)
    assert [r["phases"]["prepare"] for r in doc["first_calls"]] == [2.0, 2.0]
    assert doc["cold_compile"]["small"] == {"seconds": 3.0, "nvcc_seconds": 2.5, "sources": 2}
    text = md.read_text()
    assert "| **GPU worker** | 0.5000 | 0.5000 |" in text and "| 256x4096x1024 |" in text
    assert "- not accepted: small 256x4096x1024 full: unsupported_shape" in text
    assert text.index("runner_wait") < text.index("time_baselines") < text.index("worker, in no phase")


def test_a_family_whose_default_does_not_take_a_shape_is_left_out_there(tmp_path, monkeypatch):
    """gemv takes M <= 4 only: on a larger shape the benchmark times the other families and plans no call for it."""

    stand_in(monkeypatch)
    eval_cost.main(["--out", str(tmp_path), "--shapes", "1x4096x4096,128x128x128", "--repeats", "1",
                    "--stages", "quick", "--families", "gemv,small"])  # fmt: skip
    doc = json.loads(next(tmp_path.glob("eval-cost-H100-*.json")).read_text())
    assert doc["calls"] == doc["planned"] == 3  # gemv and small at M = 1, small alone at M = 128
    assert sorted((r["family"], r["shape"]) for r in doc["rows"]) == [
        ("gemv", "1x4096x4096"), ("small", "128x128x128"), ("small", "1x4096x4096")]
    assert [r["family"] for r in doc["first_calls"]] == ["gemv", "small"]
