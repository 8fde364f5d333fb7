"""Export an archive (jsonl, csv) and merge another one in (its .db file or a jsonl export).

Invariants:
- jsonl is the lossless exchange format: a header line, then kernels (with parents), runs, records (full
  `EvalRecord` JSON, with the uid of their run), LLM calls. Importing it, or the .db it came from, into any
  archive any number of times adds each kernel, record, run and LLM call at most once (content hash, record
  fingerprint, run/call uid).
- csv is for spreadsheets: one row per evaluation row (record x mode), no sources; it is not importable.
- A jsonl path ending in `.xz` or `.gz` is written and read compressed (an archive small enough to commit);
  import recognises the compression by the file's magic bytes.
- Importing a .db opens it read-only; the other file is never written.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import lzma
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hgemm.archive import db as _db
from hgemm.archive import rows, schema
from hgemm.archive.errors import ArchiveCorrupt, ArchiveError

from hgemm.core.errors import BadInput
from hgemm.core.record import BASELINES, EvalRecord, normalize_source, normalized_hash
from hgemm.core.shape import Shape

FORMAT = "hgemm-archive"


def _lines(conn) -> Iterator[dict[str, Any]]:
    yield {"type": FORMAT, "schema": schema.current_version(conn)}
    parents: dict[str, list[str]] = {}
    for child, parent in conn.execute("SELECT child, parent FROM kernel_parents ORDER BY child, parent"):
        parents.setdefault(child, []).append(parent)
    for r in conn.execute("SELECT * FROM kernels ORDER BY created, hash"):
        d = rows.to_dict(r)
        d["parents"] = parents.get(d["hash"], [])
        yield {"type": "kernel", **d}
    run_uid = {}
    for r in conn.execute("SELECT * FROM runs ORDER BY id"):
        d = rows.to_dict(r)
        run_uid[d.pop("id")] = d["uid"]
        yield {"type": "run", **d}
    for r in conn.execute("SELECT record, run_id FROM records ORDER BY id"):
        yield {"type": "record", "run": run_uid.get(r["run_id"]), "record": json.loads(r["record"])}
    for r in conn.execute("SELECT * FROM llm_calls ORDER BY id"):
        d = rows.to_dict(r)
        d.pop("id")
        d["run"] = run_uid.get(d.pop("run_id"))
        yield {"type": "llm_call", **d}


XZ_MAGIC = b"\xfd7zXZ\x00"
GZIP_MAGIC = b"\x1f\x8b"


# Compression level of exports: the fastest of each format. A sweep exports on SIGTERM, and a time limit grants a
# few seconds before SIGKILL: the seed archive's 100 MB of jsonl took 19 s through xz's default preset (2.1 MB)
# and 1.3 s through preset 1 (2.9 MB); gzip 5.6 s at level 9, 1.2 s at level 1. Reading needs no level.
XZ_PRESET = 1
GZIP_LEVEL = 1


def _open_text(path: Path | str, mode: str, compression: str | None):
    """A text file, through lzma or gzip when `compression` is "xz" or "gz" (written at the fastest level)."""
    writing = "w" in mode
    if compression == "xz":
        level = {"preset": XZ_PRESET} if writing else {}
        return lzma.open(path, mode + "t", encoding="utf-8", newline="", **level)
    if compression == "gz":
        level = {"compresslevel": GZIP_LEVEL} if writing else {}
        return gzip.open(path, mode + "t", encoding="utf-8", newline="", **level)
    return open(path, mode, newline="", encoding="utf-8")


@contextmanager
def _open_out(path: Path | str | None):
    if path is None or str(path) == "-":
        yield sys.stdout
    else:
        suffix = Path(path).suffix
        with _open_text(path, "w", {".xz": "xz", ".gz": "gz"}.get(suffix)) as f:
            yield f


CSV_COLUMNS = [
    "record_id", "kernel", "family", "proposer", "M", "N", "K", "gpu", "cc", "driver", "stage", "mode", "ranked",
    "correct", "failure_kind", "median_us", "p10_us", "p90_us", "samples", "best_baseline", "best_baseline_us",
    "speedup_best", *[f"{b}_us" for b in BASELINES], *[f"speedup_{b}" for b in BASELINES], "floor_us",
    "floor_fraction", "tflops", "registers", "shared_bytes", "spill_stores", "spill_loads", "max_rel_err",
    "created",
]  # fmt: skip


def export(archive, path: Path | str | None, fmt: str) -> int:
    if fmt not in ("jsonl", "csv"):
        raise ArchiveError(f"unknown export format {fmt!r}; use jsonl or csv")
    n = 0
    with _open_out(path) as out:
        if fmt == "jsonl":
            for line in _lines(archive.conn):
                out.write(json.dumps(line, sort_keys=True) + "\n")
                n += 1
        else:
            w = csv.DictWriter(out, fieldnames=CSV_COLUMNS, extrasaction="ignore")
            w.writeheader()
            sql = (
                "SELECT e.*, k.family, k.proposer FROM evaluations e JOIN kernels k ON k.hash = e.kernel "
                "ORDER BY e.id"
            )
            for r in archive.conn.execute(sql):
                w.writerow(dict(r))
                n += 1
    return n


def _read_jsonl(path: Path, compression: str | None = None) -> Iterator[dict[str, Any]]:
    """The lines of a jsonl export; a cut-off or damaged compressed file raises `ArchiveCorrupt` (the
    import's transaction then rolls back: nothing of it is kept)."""
    try:
        yield from _jsonl_lines(path, compression)
    except (EOFError, lzma.LZMAError, gzip.BadGzipFile, zlib.error, UnicodeDecodeError) as e:
        what = "truncated" if isinstance(e, EOFError) else f"damaged ({e})"
        raise ArchiveCorrupt(f"{path} is {what}; nothing was imported from it") from e


def _jsonl_lines(path: Path, compression: str | None) -> Iterator[dict[str, Any]]:
    with _open_text(path, "r", compression) as f:
        first = True
        for number, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except json.JSONDecodeError as e:
                raise ArchiveError(f"{path}:{number}: not JSON ({e.msg})") from e
            if first:
                if line.get("type") != FORMAT:
                    raise ArchiveError(f"{path} is not an hgemm archive export (no header line)")
                if int(line.get("schema", 0)) > len(schema.MIGRATIONS):
                    raise ArchiveError(f"{path} comes from a newer hgemm (schema {line['schema']}); upgrade")
                first = False
            yield line


def _read_db(path: Path) -> Iterator[dict[str, Any]]:
    conn = _db.connect(path, readonly=True)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"kernels", "records", "_migrations"} <= tables:
            raise ArchiveError(f"{path} is an SQLite database but not an hgemm archive")
        schema.check_not_newer(conn, str(path))
        yield from _lines(conn)
    finally:
        conn.close()


def read_export(path: Path | str) -> Iterator[dict[str, Any]]:
    """The lines of an archive (a .db file, or a jsonl export, plain, .xz or .gz), as exported: the header,
    then kernels, runs, records and LLM calls. What `import_file` merges, and what analysis scripts read."""
    path = Path(path)
    if not path.is_file():
        raise ArchiveError(f"{path}: no such file")
    with open(path, "rb") as f:
        head = f.read(16)
    if head == _db.SQLITE_HEADER:
        return _read_db(path)
    if head.lstrip()[:1] == b"{":
        return _read_jsonl(path)
    if head.startswith(XZ_MAGIC):
        return _read_jsonl(path, "xz")
    if head.startswith(GZIP_MAGIC):
        return _read_jsonl(path, "gz")
    raise ArchiveCorrupt(f"{path} is neither an hgemm archive database nor a jsonl export")


def import_file(archive, path: Path) -> dict[str, int]:
    return _merge(archive, read_export(path))


def _merge(archive, lines: Iterator[dict[str, Any]]) -> dict[str, int]:
    counts = {"kernels": 0, "records": 0, "runs": 0, "llm_calls": 0, "skipped": 0}
    run_ids: dict[str, int] = {}
    with archive.writer.transaction() as conn:
        for line in lines:
            kind = line.get("type")
            if kind == FORMAT:
                continue
            if kind == "kernel":
                source = normalize_source(line["source"])
                if normalized_hash(source) != line["hash"]:
                    raise ArchiveError(f"kernel {line['hash']}: source does not match its hash")
                known = conn.execute("SELECT 1 FROM kernels WHERE hash = ?", (line["hash"],)).fetchone()
                archive._insert_kernel(
                    conn, line["hash"], source, line.get("family"),
                    line.get("params"), line.get("proposer") or "import", line.get("note") or "",
                    line.get("created"), line.get("parents") or [],
                )  # fmt: skip
                counts["kernels" if not known else "skipped"] += 1
            elif kind == "run":
                run_ids[line["uid"]] = _merge_run(conn, line, counts)
            elif kind == "record":
                record = EvalRecord.from_dict(line["record"])
                try:
                    Shape(record.M, record.N, record.K)
                except BadInput as e:
                    raise ArchiveError(f"record of kernel {record.kernel_hash}: {e}") from None
                fp = rows.fingerprint(record)
                if conn.execute("SELECT 1 FROM records WHERE fingerprint = ?", (fp,)).fetchone():
                    counts["skipped"] += 1
                    continue
                archive._insert_record(conn, record.kernel_hash, record, run_ids.get(line.get("run") or ""))
                counts["records"] += 1
            elif kind == "llm_call":
                if conn.execute("SELECT 1 FROM llm_calls WHERE uid = ?", (line["uid"],)).fetchone():
                    counts["skipped"] += 1
                    continue
                row = {k: v for k, v in line.items() if k not in ("type", "run")}
                row["run_id"] = run_ids.get(line.get("run") or "")
                conn.execute(*rows.insert_sql("llm_calls", row))
                counts["llm_calls"] += 1
            else:
                raise ArchiveError(f"unknown line type {kind!r} in import")
    return counts


def _merge_run(conn, line: dict[str, Any], counts: dict[str, int]) -> int:
    old = conn.execute("SELECT id FROM runs WHERE uid = ?", (line["uid"],)).fetchone()
    if old:
        counts["skipped"] += 1
        return old[0]
    row = {k: line.get(k) for k in ("uid", "command", "status", "started", "ended")}
    row["config"] = rows.dumps(line.get("config"))
    counts["runs"] += 1
    return conn.execute(*rows.insert_sql("runs", row)).lastrowid


def dump_string(archive) -> str:
    """The jsonl export as a string (small archives, tests)."""
    buf = io.StringIO()
    for line in _lines(archive.conn):
        buf.write(json.dumps(line, sort_keys=True) + "\n")
    return buf.getvalue()
