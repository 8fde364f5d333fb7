"""Turning an `EvalRecord` into archive rows, and archive rows back into plain dicts.

Invariants: one `records` row per record (full JSON kept, so `EvalRecord.from_dict` rebuilds it exactly);
one `evaluations` row per timed mode of that record; a record with no timed mode (most failures) has no
`evaluations` rows. `ranked` is 1 only for full-stage, correct, failure-free rows with a candidate time, of a
kernel with no disqualifying failure on the same shape and GPU (the store enforces the second half).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from typing import Any

from hgemm.core.record import BASELINES, FAILURE_KINDS, NOT_DEFECTS, EvalRecord

JSON_COLUMNS = ("params", "config", "baselines", "resources", "ncu", "record")
# Failures that make a kernel untrustworthy on a shape and GPU however often it passed there (a race, a
# flaky write, a sanitizer report, a hang): every one but those that say nothing against the kernel.
DISQUALIFYING = tuple(kind for kind in FAILURE_KINDS if kind not in NOT_DEFECTS)


def dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, separators=(",", ":"))


def _plain(value: Any) -> Any:
    """What `dataclasses.asdict` makes of a record's field value, without its generic deep copies."""
    if type(value) in _ATOMS:
        return value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    fields = _FIELDS.get(type(value))
    if fields is None:
        if not dataclasses.is_dataclass(value) or isinstance(value, type):
            return copy.deepcopy(value)
        fields = _FIELDS.setdefault(type(value), tuple(f.name for f in dataclasses.fields(value)))
    return {name: _plain(getattr(value, name)) for name in fields}


_FIELDS: dict[type, tuple[str, ...]] = {}
_ATOMS = frozenset({str, int, float, bool, type(None)})


def record_dict(record: EvalRecord) -> dict[str, Any]:
    """`record.to_dict()`, equal to it in every case, but faster: the insert path's hot spot."""
    d = _plain(record)
    if not d["phases"]:
        del d["phases"]
    return d


def record_json(record: EvalRecord) -> str:
    """The record's canonical JSON: stored in `records.record`, hashed for the fingerprint."""
    return dumps(record_dict(record))


def fingerprint(record: EvalRecord, text: str | None = None) -> str:
    """sha256 of the canonical JSON (`text` when the caller has it already)."""
    return hashlib.sha256((text if text is not None else record_json(record)).encode()).hexdigest()


def record_row(record: EvalRecord, run_id: int | None) -> dict[str, Any]:
    text = record_json(record)
    return {
        "fingerprint": fingerprint(record, text),
        "kernel": record.kernel_hash,
        "M": record.M,
        "N": record.N,
        "K": record.K,
        "gpu": record.gpu,
        "cc": record.cc,
        "driver": record.driver,
        "stage": record.stage,
        "correct": None if record.correct is None else int(bool(record.correct)),
        "failure_kind": record.failure_kind,
        "failure_message": record.failure_message,
        "run_id": run_id,
        "record": text,
        "created": record.created,
    }


RANKED_STAGES = ("full", "confirmed")  # a search's full evaluations, and a confirmation's median repetition


def evaluation_rows(record: EvalRecord, record_id: int) -> list[dict[str, Any]]:
    res = record.resources
    rows = []
    for mode, m in sorted(record.modes.items()):
        c = m.candidate
        row: dict[str, Any] = {
            "record_id": record_id,
            "kernel": record.kernel_hash,
            "M": record.M,
            "N": record.N,
            "K": record.K,
            "gpu": record.gpu,
            "cc": record.cc,
            "driver": record.driver,
            "stage": record.stage,
            "mode": mode,
            "ranked": int(
                record.stage in RANKED_STAGES and record.ok and c is not None and m.speedup_best is not None
            ),
            "correct": None if record.correct is None else int(bool(record.correct)),
            "failure_kind": record.failure_kind,
            "failure_message": record.failure_message,
            "median_us": c.median_us if c else None,
            "p10_us": c.p10_us if c else None,
            "p90_us": c.p90_us if c else None,
            "samples": c.n if c else None,
            "best_baseline": m.best_baseline,
            "best_baseline_us": m.baselines[m.best_baseline].median_us
            if m.best_baseline in m.baselines
            else None,
            "speedup_best": m.speedup_best,
            "floor_us": m.floor_us,
            "floor_fraction": m.floor_fraction,
            "tflops": m.tflops,
            "baselines": dumps({b: vars(s) for b, s in m.baselines.items()}),
            "registers": res.registers if res else None,
            "shared_bytes": res.shared_bytes if res else None,
            "spill_stores": res.spill_stores if res else None,
            "spill_loads": res.spill_loads if res else None,
            "resources": dumps(vars(res)) if res else None,
            "max_rel_err": record.max_rel_err,
            "ncu": dumps(record.ncu),
            "created": record.created,
        }
        for b in BASELINES:
            row[f"{b}_us"] = m.baselines[b].median_us if b in m.baselines else None
            row[f"speedup_{b}"] = m.speedup.get(b)
        rows.append(row)
    return rows


def to_dict(row: Any) -> dict[str, Any]:
    """A `sqlite3.Row` as a dict, JSON columns decoded."""
    d = dict(row)
    for key in JSON_COLUMNS:
        if isinstance(d.get(key), str):
            d[key] = json.loads(d[key])
    return d


def insert_sql(table: str, row: dict[str, Any], verb: str = "INSERT") -> tuple[str, list[Any]]:
    cols = list(row)
    sql = f"{verb} INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    return sql, [row[c] for c in cols]
