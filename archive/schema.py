"""The archive's schema as ordered, named migrations.

Invariants:
- `MIGRATIONS` only ever grows at the end; a released migration is never edited or reordered.
- Each applied migration is recorded in `_migrations` (name, time) and `PRAGMA user_version` equals the
  number applied, both inside the migration's own transaction.
- A database whose `user_version` exceeds `len(MIGRATIONS)`, or that records a migration name this
  version does not know, is refused with `ArchiveTooNew` before anything is written.

Layout: `kernels` (one row per content hash), `kernel_parents` (lineage edges), `records` (one row per
`EvalRecord`, full JSON kept), `evaluations` (one row per record and timed mode, denormalised for ranked
queries), `runs`, `llm_calls` (with the prompt and reply when the caller keeps them), `finetunes` (one row per
fine-tune of the local proposer model).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import sqlite_utils
from hgemm.archive.errors import ArchiveTooNew

from hgemm.core.record import BASELINES

Migration = tuple[str, Callable[[sqlite_utils.Database], None]]


def _initial(db: sqlite_utils.Database) -> None:
    db["kernels"].create(
        {
            "hash": str,
            "source": str,
            "family": str,
            "params": str,  # JSON object or NULL
            "proposer": str,
            "note": str,
            "created": str,
        },
        pk="hash",
        not_null={"source", "proposer", "created"},
    )
    db["kernel_parents"].create({"child": str, "parent": str}, pk=("child", "parent"))
    db["kernel_parents"].create_index(["parent"])
    db["runs"].create(
        {
            "id": int,
            "uid": str,
            "command": str,
            "config": str,  # JSON
            "status": str,
            "started": str,
            "ended": str,
        },
        pk="id",
    )
    db["runs"].create_index(["uid"], unique=True)
    db["records"].create(
        {
            "id": int,
            "fingerprint": str,  # sha256 of the record JSON: re-adding a record is a no-op
            "kernel": str,
            "M": int,
            "N": int,
            "K": int,
            "gpu": str,
            "cc": str,
            "driver": str,
            "stage": str,
            "correct": int,
            "failure_kind": str,
            "failure_message": str,
            "run_id": int,
            "record": str,  # full EvalRecord JSON
            "created": str,
        },
        pk="id",
        not_null={"fingerprint", "kernel", "M", "N", "K", "record"},
    )
    db["records"].create_index(["fingerprint"], unique=True)
    db["records"].create_index(["M", "N", "K", "gpu"])
    db["records"].create_index(["kernel"])
    columns: dict[str, type] = {
        "id": int,
        "record_id": int,
        "kernel": str,
        "M": int,
        "N": int,
        "K": int,
        "gpu": str,
        "cc": str,
        "driver": str,
        "stage": str,
        "mode": str,
        "ranked": int,  # 1 when full stage, correct, no failure and timed: the rows rankings use
        "correct": int,
        "failure_kind": str,
        "failure_message": str,
        "median_us": float,
        "p10_us": float,
        "p90_us": float,
        "samples": int,  # timed launches behind median_us
        "best_baseline": str,
        "best_baseline_us": float,
        "speedup_best": float,
        "floor_us": float,
        "floor_fraction": float,
        "tflops": float,
    }
    for b in BASELINES:
        columns[f"{b}_us"] = float
        columns[f"speedup_{b}"] = float
    columns.update(
        {
            "baselines": str,  # JSON: every baseline's Stats, including any not in BASELINES
            "registers": int,
            "shared_bytes": int,
            "spill_stores": int,
            "spill_loads": int,
            "resources": str,  # JSON
            "max_rel_err": float,
            "ncu": str,  # JSON
            "created": str,
        }
    )
    db["evaluations"].create(columns, pk="id", not_null={"record_id", "kernel", "M", "N", "K", "mode"})
    db["evaluations"].create_index(["mode", "ranked", "M", "N", "K", "gpu", "speedup_best"])
    db["evaluations"].create_index(["record_id"])
    db["evaluations"].create_index(["kernel", "mode", "ranked", "speedup_best"])
    db["llm_calls"].create(
        {
            "id": int,
            "uid": str,
            "run_id": int,
            "model": str,
            "prompt_tokens": int,
            "completion_tokens": int,
            "cost_usd": float,
            "latency_s": float,
            "outcome": str,
            "kernel_hash": str,
            "created": str,
        },
        pk="id",
    )
    db["llm_calls"].create_index(["uid"], unique=True)
    db["llm_calls"].create_index(["run_id"])


def _ranked_order_index(db: sqlite_utils.Database) -> None:
    """Index the ranked rows in exactly the ranking order (speedup down, then median time, then id) per
    (mode, shape, GPU), so the best row of a shape is the first index entry: no sort, no table scan."""
    db.execute('DROP INDEX IF EXISTS "idx_evaluations_mode_ranked_M_N_K_gpu_speedup_best"')
    db.execute(
        'CREATE INDEX "idx_evaluations_ranking" ON "evaluations" '
        '("mode", "ranked", "M", "N", "K", "gpu", "speedup_best" DESC, "median_us", "id")'
    )


def _unrank_disqualified(db: sqlite_utils.Database) -> None:
    """Rows of a kernel that also failed (for a reason other than an unsupported shape) on the same shape
    and GPU stop being ranked there: what the store now enforces on every insert, applied to older data."""
    from hgemm.archive.rows import DISQUALIFYING

    # The store asks "has this kernel failed on this shape and GPU?" before it ranks a new row.
    db["records"].create_index(
        ["kernel", "M", "N", "K", "gpu", "failure_kind"], index_name="idx_records_kernel_shape"
    )
    marks = ",".join("?" * len(DISQUALIFYING))
    db.execute(
        f"""UPDATE evaluations SET ranked = 0 WHERE ranked = 1 AND EXISTS (
            SELECT 1 FROM records r WHERE r.kernel = evaluations.kernel AND r.M = evaluations.M
            AND r.N = evaluations.N AND r.K = evaluations.K AND r.gpu IS evaluations.gpu
            AND r.failure_kind IN ({marks}))""",
        DISQUALIFYING,
    )


def _finetunes(db: sqlite_utils.Database) -> None:
    """One row per fine-tune of the local proposer model: its data, base model, method, adapter, the metrics of
    the new and the current adapter on held-out shapes, and whether it was adopted."""
    db["finetunes"].create(
        {
            "id": int,
            "data_hash": str,  # sha256 of the exported training data
            "base_model": str,
            "method": str,  # sft or dpo
            "adapter": str,  # directory of the new adapter
            "previous": str,  # the adapter it was compared with (NULL: the base model alone)
            "bests": str,  # JSON: the archive's best kernel per shape and GPU when the data was exported
            "metrics": str,  # JSON: train figures and both adapters' held-out metrics
            "status": str,  # running, adopted, kept (the previous adapter stayed), failed
            "started": str,
            "ended": str,
        },
        pk="id",
        not_null={"base_model", "method", "status", "started"},
    )


def _browse(db: sqlite_utils.Database) -> None:
    """What the web view reads without a scan: records by run with their GPU-worker seconds (a column
    computed from the record's JSON, kept in the index), LLM calls by kernel, kernels by family, and room
    for the prompt and reply behind an LLM call."""
    db.execute(
        "ALTER TABLE records ADD COLUMN eval_seconds REAL "
        "GENERATED ALWAYS AS (json_extract(record, '$.eval_seconds')) VIRTUAL"
    )
    db.execute('CREATE INDEX "idx_records_run" ON "records" ("run_id", "eval_seconds")')
    db.execute("ALTER TABLE llm_calls ADD COLUMN prompt TEXT")
    db.execute("ALTER TABLE llm_calls ADD COLUMN reply TEXT")
    db["llm_calls"].create_index(["kernel_hash"], index_name="idx_llm_calls_kernel")
    db["kernels"].create_index(["family"], index_name="idx_kernels_family")


MIGRATIONS: list[Migration] = [
    ("001_initial", _initial),
    ("002_ranking_index", _ranked_order_index),
    ("003_unrank_disqualified", _unrank_disqualified),
    ("004_finetunes", _finetunes),
    ("005_browse", _browse),
]


def current_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def applied_names(conn: sqlite3.Connection) -> list[str]:
    exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='_migrations'").fetchone()
    if not exists:
        return []
    return [row[0] for row in conn.execute("SELECT name FROM _migrations ORDER BY rowid")]


def check_not_newer(conn: sqlite3.Connection, where: str) -> None:
    """Raise `ArchiveTooNew` when the database's schema is ahead of this code's migrations."""
    version = current_version(conn)
    known = {name for name, _ in MIGRATIONS}
    unknown = [n for n in applied_names(conn) if n not in known]
    if version > len(MIGRATIONS) or unknown:
        extra = f" (unknown migrations: {', '.join(unknown)})" if unknown else ""
        raise ArchiveTooNew(
            f"{where} has schema version {version}{extra}; this hgemm knows up to {len(MIGRATIONS)}: "
            "upgrade hgemm to open it"
        )


def pending(conn: sqlite3.Connection) -> list[Migration]:
    return MIGRATIONS[current_version(conn) :]


def apply(conn: sqlite3.Connection, migration: Migration, now: str) -> None:
    """Apply one migration inside the caller's open write transaction."""
    name, step = migration
    db = sqlite_utils.Database(conn, recursive_triggers=False, execute_plugins=False)
    if not db["_migrations"].exists():
        db["_migrations"].create({"name": str, "applied": str}, pk="name")
    step(db)
    conn.execute("INSERT INTO _migrations (name, applied) VALUES (?, ?)", (name, now))
    index = [n for n, _ in MIGRATIONS].index(name) + 1
    conn.execute(f"PRAGMA user_version = {index}")
