"""`Archive`: every kernel, every evaluation, lineage, runs and LLM calls, in one SQLite file.

Invariants:
- A kernel's id is `kernel_hash(source)`; its stored source is the normalised one. Adding it again is a
  no-op apart from merging new parent edges.
- A record is stored once (keyed by a fingerprint of its JSON); adding it again returns the same row ids.
- Rankings (`best`, `leaderboard`, `history`) use only full-stage or confirmed, correct, failure-free timed
  rows (a confirmed kernel's own full-stage rows stop ranking on its shape), ranked
  by speedup over the best baseline measured in the same process (then by median time).
- All writes go through `Writer.transaction()` (see `archive.db`); reads never block on writers (WAL).
"""

from __future__ import annotations

import datetime as _dt
import re
import sqlite3
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hgemm.archive import db as _db
from hgemm.archive import queries, rows, schema
from hgemm.archive.errors import ArchiveError

from hgemm.core.paths import state_dir
from hgemm.core.record import MODES, EvalRecord, kernel_hash, normalize_source
from hgemm.core.shape import Shape

HEX = re.compile(r"^[0-9a-f]{1,64}$")


def default_path() -> Path:
    return state_dir("archive") / "hgemm.archive.db"


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ArchiveError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    return mode


def _unrank_if_disqualified(conn, h: str, record: EvalRecord, gpu: str | None, ranked_new: bool) -> None:
    """A kernel with any disqualifying failure on this shape and GPU has no ranked rows there, whichever
    record came first: a disqualifying failure unranks the kernel's rows; a new ranked row is unranked
    when such a failure is already on file."""
    shape = (h, record.M, record.N, record.K, gpu)
    if record.failure_kind not in rows.DISQUALIFYING:
        if not ranked_new:
            return
        marks = ",".join("?" * len(rows.DISQUALIFYING))
        failed = conn.execute(
            f"SELECT 1 FROM records WHERE kernel = ? AND M = ? AND N = ? AND K = ? AND gpu IS ? "
            f"AND failure_kind IN ({marks}) LIMIT 1",
            (*shape, *rows.DISQUALIFYING),
        ).fetchone()
        if not failed:
            return
    conn.execute(
        "UPDATE evaluations SET ranked = 0 WHERE kernel = ? AND M = ? AND N = ? AND K = ? AND gpu IS ? "
        "AND ranked = 1",
        shape,
    )


class Archive:
    """The ranked archive of every attempt. `Archive()` opens (or creates) the default file."""

    def __init__(self, path: Path | None = None, *, readonly: bool = False):
        """`readonly`: reads only, of an archive another connection keeps (a sweep's search processes read
        what their driver writes); any write raises."""
        self.path = Path(path) if path is not None else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = _db.connect(self.path, readonly=readonly)
        schema.check_not_newer(self.conn, str(self.path))
        self.writer = _db.Writer(self.conn, self.path)
        if not readonly:
            _db.configure(self.conn)
            self._migrate()

    # ----- lifecycle -----------------------------------------------------------------------------------

    def _migrate(self) -> None:
        if not schema.pending(self.conn):
            return
        with self.writer.transaction() as conn:
            schema.check_not_newer(conn, str(self.path))  # another process may have migrated meanwhile
            for migration in schema.pending(conn):
                schema.apply(conn, migration, _now())

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        return schema.current_version(self.conn)

    def check(self) -> str:
        """SQLite's full integrity check: "ok" or the first problems found."""
        found = [r[0] for r in self.conn.execute("PRAGMA integrity_check(10)")]
        return "ok" if found == ["ok"] else "; ".join(found)

    # ----- kernels -------------------------------------------------------------------------------------

    def add_kernel(
        self,
        source: str,
        *,
        family: str | None = None,
        params: dict[str, Any] | None = None,
        parents: Iterable[str] = (),
        proposer: str = "import",
        note: str = "",
        created: str | None = None,
    ) -> str:
        """Store a kernel (idempotent) and its parent edges; return its hash."""
        if not isinstance(source, str) or not source.strip():
            raise ArchiveError("a kernel needs a non-empty source")
        parents = list(parents)
        for p in parents:
            if not HEX.match(p):
                raise ArchiveError(f"parent {p!r} is not a kernel hash")
        h = kernel_hash(source)
        with self.writer.transaction() as conn:
            self._insert_kernel(
                conn, h, normalize_source(source), family, params, proposer, note, created, parents
            )
        return h

    def _insert_kernel(self, conn, h, source, family, params, proposer, note, created, parents) -> None:
        row = {
            "hash": h,
            "source": source,
            "family": family,
            "params": rows.dumps(params),
            "proposer": proposer,
            "note": note or "",
            "created": created or _now(),
        }
        conn.execute(*rows.insert_sql("kernels", row, "INSERT OR IGNORE"))
        conn.executemany(
            "INSERT OR IGNORE INTO kernel_parents (child, parent) VALUES (?, ?)",
            [(h, p) for p in parents if p != h],
        )

    def resolve(self, hash_or_prefix: str) -> str | None:
        """The full hash a prefix names; None if none; `ArchiveError` if several."""
        prefix = hash_or_prefix.strip().lower()
        if not prefix or not HEX.match(prefix):
            raise ArchiveError(f"{hash_or_prefix!r} is not a kernel hash or prefix")
        found = [
            r[0]
            for r in self.conn.execute(
                "SELECT hash FROM kernels WHERE hash >= ? AND hash < ? LIMIT 6", (prefix, prefix + "g")
            )
        ]
        if len(found) > 1:
            raise ArchiveError(f"prefix {prefix} is ambiguous: {', '.join(found[:5])}")
        return found[0] if found else None

    def kernel(self, hash_or_prefix: str) -> dict[str, Any] | None:
        """A kernel's row (params decoded) with its parents, children and evaluation count."""
        h = self.resolve(hash_or_prefix)
        if h is None:
            return None
        d = rows.to_dict(self.conn.execute("SELECT * FROM kernels WHERE hash = ?", (h,)).fetchone())
        d["parents"] = [
            r[0] for r in self.conn.execute("SELECT parent FROM kernel_parents WHERE child = ?", (h,))
        ]
        d["children"] = [
            r[0] for r in self.conn.execute("SELECT child FROM kernel_parents WHERE parent = ?", (h,))
        ]
        d["attempts"] = self.conn.execute("SELECT count(*) FROM records WHERE kernel = ?", (h,)).fetchone()[0]
        return d

    def require_kernel(self, hash_or_prefix: str) -> dict[str, Any]:
        k = self.kernel(hash_or_prefix)
        if k is None:
            raise ArchiveError(f"no kernel {hash_or_prefix} in {self.path}")
        return k

    # ----- evaluations ---------------------------------------------------------------------------------

    def add_evaluation(self, kernel_hash: str, record: EvalRecord, *, run_id: int | None = None) -> list[int]:
        """Store a record: one `evaluations` row per timed mode. Returns those rows' ids (idempotent)."""
        return self.add_evaluations([(kernel_hash, record)], run_id=run_id)[0]

    def add_evaluations(
        self, items: Iterable[tuple[str, EvalRecord]], *, run_id: int | None = None
    ) -> list[list[int]]:
        """Store many records in one transaction; for each, the ids of its `evaluations` rows."""
        out = []
        with self.writer.transaction() as conn:
            for h, record in items:
                out.append(self._insert_record(conn, h, record, run_id)[1])
        return out

    def _insert_record(self, conn, h: str, record: EvalRecord, run_id: int | None) -> tuple[int, list[int]]:
        if not record.kernel_hash:
            record.kernel_hash = h
        if record.kernel_hash != h:
            raise ArchiveError(f"record is for kernel {record.kernel_hash}, not {h}")
        if conn.execute("SELECT 1 FROM kernels WHERE hash = ?", (h,)).fetchone() is None:
            raise ArchiveError(f"no kernel {h} in the archive; add_kernel first")
        row = rows.record_row(record, run_id)
        old = conn.execute("SELECT id FROM records WHERE fingerprint = ?", (row["fingerprint"],)).fetchone()
        if old:
            rid = old[0]
            return rid, [
                r[0]
                for r in conn.execute("SELECT id FROM evaluations WHERE record_id = ? ORDER BY id", (rid,))
            ]
        rid = conn.execute(*rows.insert_sql("records", row)).lastrowid
        evals = rows.evaluation_rows(record, rid)
        ids = [conn.execute(*rows.insert_sql("evaluations", e)).lastrowid for e in evals]
        _unrank_if_disqualified(conn, h, record, row["gpu"], any(e["ranked"] for e in evals))
        return rid, ids

    def record(self, candidate: Any, record: EvalRecord, *, run_id: int | None = None) -> list[int]:
        """Store a `Candidate` (as a kernel) and its `EvalRecord` together, in one transaction."""
        with self.writer.transaction():
            h = self.add_kernel(
                candidate.source,
                family=candidate.family,
                params=candidate.params,
                parents=candidate.parents,
                proposer=candidate.proposer,
                note=getattr(candidate, "note", ""),
            )
            return self.add_evaluation(h, record, run_id=run_id)

    def unrank_search_rows(self, kernel: str, shape: Shape, gpu: str | None) -> int:
        """A confirmed kernel ranks by its confirmation: its search-time (full-stage) rows on this shape and
        GPU stop ranking. Returns how many rows changed."""
        with self.writer.transaction() as conn:
            cur = conn.execute(
                "UPDATE evaluations SET ranked = 0 WHERE kernel = ? AND M = ? AND N = ? AND K = ? AND gpu IS ? "
                "AND ranked = 1 AND stage = 'full'",
                (kernel, *shape, gpu),
            )
            return cur.rowcount

    def eval_record(self, record_id: int) -> EvalRecord | None:
        row = self.conn.execute("SELECT record FROM records WHERE id = ?", (record_id,)).fetchone()
        return EvalRecord.from_dict(rows.to_dict(row)["record"]) if row else None

    # ----- ranked queries ------------------------------------------------------------------------------

    def best(self, shape: Shape, gpu: str | None = None, mode: str = "offline") -> dict[str, Any] | None:
        found = queries.best(self.conn, shape, gpu, _check_mode(mode), limit=1)
        return found[0] if found else None

    def leaderboard(
        self,
        gpu: str | None = None,
        mode: str = "offline",
        top: int | None = None,
        shape: Shape | None = None,
    ) -> list[dict[str, Any]]:
        """Per (shape, GPU), the `top` fastest distinct kernels (default 1), ordered by shape then rank."""
        return queries.leaderboard(self.conn, gpu, _check_mode(mode), top or 1, shape)

    def lineage(self, hash_or_prefix: str) -> dict[str, Any]:
        """The kernel, its ancestors and descendants (with depth and best offline speedup)."""
        h = self.require_kernel(hash_or_prefix)["hash"]
        return queries.lineage(self.conn, h)

    def history(self, shape: Shape, gpu: str | None = None, mode: str = "offline") -> list[dict[str, Any]]:
        """The improvements on a shape in time order: each row beat every ranked row before it."""
        return queries.history(self.conn, shape, gpu, _check_mode(mode))

    def attempts(
        self, shape: Shape, gpu: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Every record on a shape, newest first, failures included."""
        return queries.attempts(self.conn, shape, gpu, limit)

    def failures(self, shape: Shape, gpu: str | None = None) -> dict[str, int]:
        """Failure counts by kind on a shape."""
        return queries.failures(self.conn, shape, gpu)

    def records_by_id(self, ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        """`records` rows (with kernel family/params/proposer) by id, for the index."""
        return queries.records_by_id(self.conn, list(ids))

    def stats(self) -> dict[str, Any]:
        s = queries.stats(self.conn)
        s["path"] = str(self.path)
        s["schema_version"] = self.schema_version
        s["size_bytes"] = self.path.stat().st_size if self.path.exists() else 0
        return s

    # ----- runs and LLM calls --------------------------------------------------------------------------

    def start_run(self, command: str, config: dict[str, Any] | None = None) -> int:
        row = {
            "uid": uuid.uuid4().hex,
            "command": command,
            "config": rows.dumps(config or {}),
            "status": "running",
            "started": _now(),
            "ended": None,
        }
        with self.writer.transaction() as conn:
            return conn.execute(*rows.insert_sql("runs", row)).lastrowid

    def end_run(self, run_id: int, status: str = "done") -> None:
        with self.writer.transaction() as conn:
            cur = conn.execute("UPDATE runs SET status = ?, ended = ? WHERE id = ?", (status, _now(), run_id))
            if cur.rowcount == 0:
                raise ArchiveError(f"no run {run_id}")

    def run(self, run_id: int) -> dict[str, Any] | None:
        row = self.conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return rows.to_dict(row) if row else None

    def add_llm_call(
        self,
        run_id: int | None,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        cost_usd: float,
        latency_s: float,
        outcome: str,
        kernel_hash: str | None = None,
        prompt: str | None = None,
        reply: str | None = None,
    ) -> int:
        """One LLM call of a run; `prompt` and `reply` (the texts, when the caller keeps them) are shown
        beside the kernel the reply produced."""
        row = {
            "uid": uuid.uuid4().hex,
            "run_id": run_id,
            "model": model,
            "prompt_tokens": int(prompt_tokens),
            "completion_tokens": int(completion_tokens),
            "cost_usd": float(cost_usd),
            "latency_s": float(latency_s),
            "outcome": outcome,
            "kernel_hash": kernel_hash,
            "prompt": prompt,
            "reply": reply,
            "created": _now(),
        }
        with self.writer.transaction() as conn:
            return conn.execute(*rows.insert_sql("llm_calls", row)).lastrowid

    def llm_usage(self, run_id: int | None = None) -> dict[str, Any]:
        """Calls, tokens, cost and latency of a run (all runs when None), in total and per model."""
        return queries.llm_usage(self.conn, run_id)

    # ----- moving archives between machines ------------------------------------------------------------

    def export(self, path: Path | str | None, fmt: str = "jsonl") -> int:
        """Write the archive as jsonl (everything, re-importable) or csv (one row per evaluation row).
        `path` None or "-" writes to stdout. Returns the number of lines/rows written."""
        from hgemm.archive import transfer

        return transfer.export(self, path, fmt)

    def import_file(self, path: Path | str) -> dict[str, int]:
        """Merge another archive (its .db file or a jsonl export): idempotent by content hash and fingerprint."""
        from hgemm.archive import transfer

        return transfer.import_file(self, Path(path))

    def max_record_id(self) -> int:
        return self.conn.execute("SELECT coalesce(max(id), 0) FROM records").fetchone()[0]

    def record_count(self) -> int:
        return self.conn.execute("SELECT count(*) FROM records").fetchone()[0]

    def execute(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        """Read-only SQL for tools and tests."""
        return self.conn.execute(sql, tuple(params)).fetchall()
