"""The reward one evaluation earns a kernel, in the spirit of CUDA-L2: the speed ratio over the best cuBLAS
baseline, gated on correctness and on the evaluator's integrity checks, penalised for numeric error and length.

- A failure that says nothing against the kernel (unsupported shape, disturbed timing) earns no reward (None):
  such a record is left out of reward data.
- A kernel refused for reaching outside its job or for cheating the protocol (`INTEGRITY`) earns -1.
- Any other failure (bad source, compile, load or launch error, crash, timeout, not capturable, incorrect)
  earns 0.
- A correct kernel with an offline time earns speedup × (1 - error penalty - length penalty): the error
  penalty grows with log2 of its error over cuBLAS's own error on the same inputs, up to `ERROR_PENALTY` at
  4× and beyond; the length penalty grows linearly from `LENGTH_FREE` characters to `ERROR_PENALTY` at twice
  that. A correct record without an offline time earns None.
"""

from __future__ import annotations

import math

from hgemm.core.record import NOT_DEFECTS, EvalRecord

# Failures that mean the kernel broke the contract or tried to fool the measurement, not merely failed.
INTEGRITY = (
    "static_check",
    "object_audit",
    "unwritten_output",
    "out_of_bounds",
    "input_modified",
    "stale_result",
    "incomplete_on_event",
    "early_read",
    "sanitizer",
    "suspicious_speed",
)
ERROR_PENALTY = 0.1  # the most the numeric-error penalty takes off (at 4x cuBLAS's error and beyond)
LENGTH_PENALTY = 0.05  # the most the length penalty takes off
LENGTH_FREE = 20_000  # characters of source that cost nothing


def error_penalty(max_rel_err: float | None, ref_rel_err: float | None) -> float:
    if not max_rel_err or not ref_rel_err or max_rel_err <= ref_rel_err:
        return 0.0
    return ERROR_PENALTY * min(1.0, math.log2(max_rel_err / ref_rel_err) / 2.0)


def length_penalty(chars: int) -> float:
    return LENGTH_PENALTY * min(1.0, max(0.0, chars / LENGTH_FREE - 1.0))


def reward(record: EvalRecord, source_chars: int) -> float | None:
    """The reward of one record (see the module docstring); None when the record says nothing."""
    if record.failure_kind in NOT_DEFECTS:
        return None
    if record.failure_kind in INTEGRITY:
        return -1.0
    if not record.ok:
        return 0.0
    speedup = record.speedup_best("offline")
    if speedup is None or not math.isfinite(speedup) or speedup <= 0:
        return None
    keep = 1.0 - error_penalty(record.max_rel_err, record.ref_rel_err) - length_penalty(source_chars)
    return round(speedup * keep, 4)
