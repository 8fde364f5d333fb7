"""Typed evaluation records: what the evaluator returns and the archive stores.

Every field is JSON-serialisable through `to_dict`/`from_dict`. Times are microseconds.
A record is either a failure (`failure_kind` set, `correct` False or None) or a success
with per-mode timings of the candidate and of every baseline, measured in one process.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hgemm.core.shape import Shape

MODES = ("offline", "server")
BASELINES = ("torch_nn", "torch_tn", "lt_heuristic", "lt_autotuned")

# Failure kinds, in pipeline order. Each names the step that refused the candidate.
FAILURE_KINDS = (
    "bad_source",  # not UTF-8, empty, missing hgemm_run
    "static_check",  # host code reaching outside its job
    "compile_error",  # nvcc failed (log kept verbatim)
    "object_audit",  # what nvcc built reaches outside its job (imports, load-time code, sizes, expanded source)
    "load_error",  # dlopen / symbol lookup failed in the worker
    "unsupported_shape",  # hgemm_supports said no (not a defect)
    "launch_error",  # hgemm_run returned a CUDA error
    "crash",  # the worker died (abort, illegal address, segfault)
    "timeout",  # a step ran past its time limit; the worker was replaced
    "not_capturable",  # the call could not be captured in a CUDA graph on the given stream
    "unwritten_output",  # C still holds the NaN poison somewhere
    "out_of_bounds",  # a guard band around a buffer changed
    "input_modified",  # A, B or Bt changed
    "incorrect",  # error above the bound calibrated on cuBLAS
    "stale_result",  # a re-run on new values at the same pointers returned old values
    "incomplete_on_event",  # the result was not complete when an event after the call completed
    "early_read",  # read inputs before the kernel ahead of it on the stream had written them
    "sanitizer",  # compute-sanitizer reported an error
    "suspicious_speed",  # faster than the physical floor
    "timing_disturbed",  # correct, but the host fell behind the GPU in most timed samples: no honest time
)
NOT_DEFECTS = ("unsupported_shape", "timing_disturbed")  # failures that say nothing against the kernel
FAILURE_MESSAGE_CHARS = 4000  # a failure message is cut to this (crash logs and sanitizer output are unbounded)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")


def _escaped(m: re.Match[str]) -> str:
    code = ord(m.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def bounded_message(message: str) -> str:
    """A failure message as records keep it: control and bidi characters escaped (a terminal showing it
    obeys none), cut to FAILURE_MESSAGE_CHARS with the number of characters left out."""
    text = _CONTROL.sub(_escaped, str(message))
    if len(text) > FAILURE_MESSAGE_CHARS:
        cut = FAILURE_MESSAGE_CHARS - 40
        text = f"{text[:cut]} ... [{len(text) - cut} more characters]"
    return text


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def normalize_source(source: str) -> str:
    """Line endings to LF, trailing whitespace dropped, runs of blank lines collapsed."""
    text = source.replace("\r\n", "\n").replace("\r", "\n")
    lines = [line.rstrip() for line in text.split("\n")]
    text = "\n".join(lines).strip("\n")
    return re.sub(r"\n{3,}", "\n\n", text) + "\n"


def kernel_hash(source: str) -> str:
    """Content hash of the normalised source (16 hex digits): a kernel's identity everywhere."""
    return normalized_hash(normalize_source(source))


def normalized_hash(normalized: str) -> str:
    """`kernel_hash` of a source already normalised (`normalize_source` is idempotent): one pass, not two."""
    return hashlib.sha256(normalized.encode()).hexdigest()[:16]


@dataclass
class GpuInfo:
    name: str
    cc: str  # "9.0"
    driver: str
    sm_count: int
    l2_bytes: int
    smem_per_block_optin: int
    memory_bytes: int = 0

    @property
    def arch(self) -> str:
        return "sm_" + self.cc.replace(".", "")


@dataclass
class Resources:
    """ptxas report for the candidate's heaviest kernel on one architecture."""

    arch: str = ""
    registers: int | None = None
    shared_bytes: int | None = None
    stack_bytes: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    compile_seconds: float | None = None


@dataclass
class Stats:
    median_us: float
    p10_us: float
    p90_us: float
    n: int

    def tflops(self, shape: Shape) -> float:
        return shape.flops / (self.median_us * 1e-6) / 1e12


@dataclass
class ModeResult:
    mode: str
    candidate: Stats | None
    baselines: dict[str, Stats]
    floor_us: float
    best_baseline: str | None = None
    speedup: dict[str, float] = field(default_factory=dict)  # baseline time / candidate time
    speedup_best: float | None = None
    floor_fraction: float | None = None  # floor / candidate time (1.0 = at the floor)
    tflops: float | None = None

    def finish(self, shape: Shape) -> ModeResult:
        """Fill the derived fields from the raw times."""
        if self.baselines:
            self.best_baseline = min(self.baselines, key=lambda b: self.baselines[b].median_us)
        if self.candidate:
            c = self.candidate.median_us
            self.speedup = {b: s.median_us / c for b, s in self.baselines.items()}
            if self.best_baseline:
                self.speedup_best = self.baselines[self.best_baseline].median_us / c
            self.floor_fraction = self.floor_us / c
            self.tflops = self.candidate.tflops(shape)
        return self


@dataclass
class EvalRecord:
    kernel_hash: str
    M: int
    N: int
    K: int
    gpu: str = ""
    cc: str = ""
    driver: str = ""
    stage: str = "full"  # "quick" (cheap offline timing, basic checks) or "full"
    compiled: bool = False
    correct: bool | None = None
    failure_kind: str | None = None
    failure_message: str | None = None
    max_rel_err: float | None = None  # candidate's worst relative error over the draws
    ref_rel_err: float | None = None  # cuBLAS's error on the same draws
    resources: Resources | None = None
    modes: dict[str, ModeResult] = field(default_factory=dict)
    ncu: dict[str, Any] | None = None
    eval_seconds: float | None = None  # GPU-worker wall time for this record
    phases: dict[str, float] = field(default_factory=dict)  # seconds per phase (evaluator/phases.py)
    created: str = field(default_factory=utc_now)

    @property
    def shape(self) -> Shape:
        return Shape(self.M, self.N, self.K)

    @property
    def ok(self) -> bool:
        return bool(self.correct) and self.failure_kind is None

    def speedup_best(self, mode: str) -> float | None:
        m = self.modes.get(mode)
        return m.speedup_best if m else None

    def median_us(self, mode: str) -> float | None:
        m = self.modes.get(mode)
        return m.candidate.median_us if m and m.candidate else None

    def fail(self, kind: str, message: str) -> EvalRecord:
        """Mark the record failed; the message is kept as `bounded_message` leaves it."""
        assert kind in FAILURE_KINDS, kind
        self.failure_kind, self.failure_message = kind, bounded_message(message)
        if kind not in NOT_DEFECTS:
            self.correct = False
        return self

    def to_dict(self) -> dict[str, Any]:
        """Every field; `phases` only when recorded, so a record from before it serialises as it did."""
        d = dataclasses.asdict(self)
        if not d["phases"]:
            del d["phases"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EvalRecord:
        d = dict(d)
        if d.get("resources"):
            d["resources"] = Resources(**d["resources"])
        modes = {}
        for name, m in (d.get("modes") or {}).items():
            m = dict(m)
            m["candidate"] = Stats(**m["candidate"]) if m.get("candidate") else None
            m["baselines"] = {b: Stats(**s) for b, s in (m.get("baselines") or {}).items()}
            modes[name] = ModeResult(**m)
        d["modes"] = modes
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})
