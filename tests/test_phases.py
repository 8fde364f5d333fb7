"""Every evaluation record says where its time went (`phases`): kept in the archive, absent from records made
before it (which keep their JSON and fingerprints), and filled by the evaluator from what the judge reports.
The GPU worker is replaced by a scripted stand-in here; the real path runs on a GPU (bench/eval_cost.py)."""

from __future__ import annotations

import hashlib
import time

from hgemm.archive import Archive, rows
from hgemm.evaluator import compile as compile_mod
from hgemm.evaluator.compile import CompileResult
from hgemm.evaluator.local import LocalEvaluator
from hgemm.evaluator.phases import OUTSIDE, Phases

from hgemm.core.record import EvalRecord, GpuInfo
from hgemm.core.shape import Shape

FACTS = {"peak_tflops": 760.0, "bandwidth_gbs": 4300.0, "launch_us": 0.7}
STATS = {"median_us": 20.0, "p10_us": 19.0, "p90_us": 21.0, "n": 15}
CHECK_PHASES = {"runner_wait": 0.002, "open": 0.03, "references": 0.01, "calls": 0.02, "verify": 0.01,
                "runner_boot": 0.2, "runner_cuda": 0.15}  # fmt: skip
TIME_PHASES = {**CHECK_PHASES, "retire_wait": 0.001, "spare_wait": 0.05, "time_candidate": 0.1,
               "time_baselines": 0.2, "witnesses": 0.01}  # fmt: skip


def test_phases_add_up_repeats_and_round():
    ph = Phases()
    with ph.timed("calls"):
        time.sleep(0.01)
    ph.add("calls", 0.5)
    ph.add("open", 0.123456789)
    assert 0.51 <= ph["calls"] < 0.6
    assert ph.rounded()["open"] == 0.1235
    assert "compile" in OUTSIDE and "calls" not in OUTSIDE


def test_a_record_keeps_its_phases_through_the_archive(tmp_path):
    rec = EvalRecord("a" * 16, 64, 64, 64, phases={"compile": 1.5, "calls": 0.02})
    again = EvalRecord.from_dict(rec.to_dict())
    assert again.phases == {"compile": 1.5, "calls": 0.02}
    assert rows.record_dict(rec) == rec.to_dict()
    with Archive(tmp_path / "a.db") as a:
        h = a.add_kernel("extern \"C\" int hgemm_run() { return 0; }\n", family=None, params=None,
                         proposer="test")  # fmt: skip
        rec.kernel_hash = h
        a.add_evaluation(h, rec)
        (row,) = a.execute("SELECT id FROM records")
        assert a.eval_record(row[0]).phases == {"compile": 1.5, "calls": 0.02}


def test_a_record_from_before_phases_loads_and_keeps_its_json_and_fingerprint():
    old = EvalRecord("b" * 16, 8, 8, 8).to_dict()
    assert "phases" not in old  # none recorded: the JSON is what it was before the field existed
    rec = EvalRecord.from_dict(old)
    assert rec.phases == {}
    assert rows.record_json(rec) == rows.dumps(old)
    assert rows.fingerprint(rec) == hashlib.sha256(rows.dumps(old).encode()).hexdigest()


class ScriptedWorker:
    """Replies as the judge does: phases so far with the check, all of them with the timing."""

    alive = True

    def __init__(self):
        self.ops = []

    def request(self, op, timeout_s, **args):
        self.ops.append(op)
        if op == "check":
            return {"failure": None, "max_rel_err": 1e-3, "ref_rel_err": 1e-3, "phases": dict(CHECK_PHASES)}
        if op == "time":
            return {m: {"candidate": STATS, "torch_nn": STATS} for m in args["modes"]} | {
                "phases": dict(TIME_PHASES)
            }
        return None


def evaluator_without_gpu() -> LocalEvaluator:
    ev = object.__new__(LocalEvaluator)
    ev.worker = ScriptedWorker()
    ev._info = GpuInfo(name="NVIDIA H100", cc="9.0", driver="580", sm_count=132, l2_bytes=50 << 20,
                       smem_per_block_optin=232448)  # fmt: skip
    ev._shape = Shape(256, 256, 256)
    ev.prepared = {"facts": FACTS, "missing": {}}
    return ev


def test_an_evaluation_records_compile_judge_and_teardown_phases(monkeypatch):
    def compiled(sources, **kw):
        return [CompileResult("c" * 16, True, "/nowhere/kernel.so", "", seconds=0.75) for _ in sources]

    monkeypatch.setattr(compile_mod, "compile_sources", compiled)
    ev = evaluator_without_gpu()
    (rec,) = ev.evaluate(["// a kernel"], (256, 256, 256), stage="quick", modes=("offline",))
    assert ev.worker.ops == ["check", "time", "forget"]
    assert rec.ok and set(rec.modes) == {"offline"}  # the phases are not taken for a mode
    assert rec.phases["compile"] == 0.75
    assert {k: rec.phases[k] for k in TIME_PHASES} == TIME_PHASES
    assert "teardown" in rec.phases and "prepare" not in rec.phases  # the shape was prepared already


def test_a_failed_compile_still_says_how_long_it_took(monkeypatch):
    def refused(sources, **kw):
        return [CompileResult("d" * 16, False, None, "", seconds=0.01, failure_kind="static_check",
                              message="no") for _ in sources]  # fmt: skip

    monkeypatch.setattr(compile_mod, "compile_sources", refused)
    ev = evaluator_without_gpu()
    (rec,) = ev.evaluate(["// a kernel"], (256, 256, 256), stage="quick", modes=("offline",))
    assert rec.failure_kind == "static_check" and rec.phases == {"compile": 0.01}
    assert ev.worker.ops == []
