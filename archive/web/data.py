"""The web view's reads: one function per page, each taking a read-only connection and returning plain dicts.

Invariants:
- Every value from a request reaches SQL as a bound parameter; column names in ORDER BY come from a fixed
  list, never from the request.
- The connection is opened read-only (`mode=ro` and `PRAGMA query_only`): nothing here can change the archive.
- Each page reads a bounded number of rows (limits below), whatever the archive's size; ranked reads follow
  the ranking index (`idx_evaluations_ranking`).
"""

from __future__ import annotations

import difflib
import sqlite3
from pathlib import Path
from typing import Any

from hgemm.archive import db as _db
from hgemm.archive import queries, schema
from hgemm.archive.errors import ArchiveError
from hgemm.archive.rows import to_dict

from hgemm.core.record import MODES
from hgemm.core.shape import Shape

RANKED_LIMIT = 200  # ranked rows on a shape page
FAILURE_LIMIT = 100  # failed attempts on a shape page
KERNEL_ROWS_LIMIT = 200  # records on a kernel page
LINEAGE_LIMIT = 120  # kernels in a lineage tree (each side)
RUNS_LIMIT = 200  # runs on the runs page
LEADERBOARD_LIMIT = 2000

SORTS = {  # leaderboard sort key -> row field
    "shape": ("M", "N", "K"),
    "M": ("M",),
    "N": ("N",),
    "K": ("K",),
    "gpu": ("gpu",),
    "family": ("family",),
    "speedup": ("speedup_best",),
    "median": ("median_us",),
    "floor": ("floor_fraction",),
    "rows": ("ranked_rows",),
}


def open_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection to an archive that exists and whose schema this hgemm has applied."""
    path = Path(path)
    if not path.is_file():
        raise ArchiveError(f"no archive at {path}")
    conn = _db.connect(path, readonly=True)
    conn.execute("PRAGMA query_only = 1")
    schema.check_not_newer(conn, str(path))
    if schema.pending(conn):
        conn.close()
        raise ArchiveError(f"{path} needs a schema upgrade first: run any `hgemm archive` command on it")
    return conn


def _mode(mode: str | None) -> str:
    if mode is None or mode == "":
        return "offline"
    if mode not in MODES:
        raise ArchiveError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    return mode


def _clean_gpu(gpu: str | None) -> str | None:
    return gpu or None


# ----- overview ------------------------------------------------------------------------------------------


def shape_bests(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Per (GPU, mode, shape): the best ranked speedup and how many ranked rows stand behind it."""
    marks = ", ".join("?" * len(MODES))
    sql = (
        "SELECT gpu, mode, M, N, K, max(speedup_best) AS speedup, median_us, best_baseline, kernel, "
        "count(*) AS rows FROM evaluations "
        f"WHERE mode IN ({marks}) AND ranked = 1 GROUP BY mode, M, N, K, gpu"
    )
    return [dict(r) for r in conn.execute(sql, MODES)]


def attempted_shapes(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every (shape, GPU) with at least one record, ranked or not, and its record count."""
    sql = "SELECT M, N, K, gpu, count(*) AS records FROM records GROUP BY M, N, K, gpu"
    return [dict(r) for r in conn.execute(sql)]


def overview(conn: sqlite3.Connection) -> dict[str, Any]:
    """Per GPU and mode: the best speedup of every shape, and the share of shapes won (speedup > 1)."""
    bests = shape_bests(conn)
    attempted = attempted_shapes(conn)
    gpus = sorted({r["gpu"] or "" for r in attempted} | {r["gpu"] or "" for r in bests})
    out = []
    for gpu in gpus:
        tried = [r for r in attempted if (r["gpu"] or "") == gpu]
        per_mode = {}
        for mode in MODES:
            rows = sorted(
                (r for r in bests if (r["gpu"] or "") == gpu and r["mode"] == mode),
                key=lambda r: (r["M"], r["N"], r["K"]),
            )
            won = sum(1 for r in rows if r["speedup"] > 1.0)
            per_mode[mode] = {
                "rows": rows,
                "ranked_shapes": len(rows),
                "won": won,
                "share_won": won / len(tried) if tried else 0.0,
            }
        out.append(
            {
                "gpu": gpu,
                "shapes": len(tried),
                "records": sum(r["records"] for r in tried),
                "modes": per_mode,
            }
        )
    return {"gpus": out, "stats": counts(conn)}


def counts(conn: sqlite3.Connection) -> dict[str, Any]:
    one = lambda sql: conn.execute(sql).fetchone()[0]  # noqa: E731
    return {
        "kernels": one("SELECT count(*) FROM kernels"),
        "records": one("SELECT count(*) FROM records"),
        "evaluations": one("SELECT count(*) FROM evaluations"),
        "runs": one("SELECT count(*) FROM runs"),
        "llm_calls": one("SELECT count(*) FROM llm_calls"),
    }


# ----- leaderboard ---------------------------------------------------------------------------------------


def families(conn: sqlite3.Connection) -> list[str]:
    return [
        r[0] for r in conn.execute("SELECT DISTINCT family FROM kernels WHERE family IS NOT NULL ORDER BY 1")
    ]


def gpus(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT DISTINCT gpu FROM records WHERE gpu IS NOT NULL ORDER BY 1")]


def leaderboard(
    conn: sqlite3.Connection,
    *,
    mode: str | None = "offline",
    M: int | None = None,
    N: int | None = None,
    K: int | None = None,
    gpu: str | None = None,
    family: str | None = None,
    min_speedup: float | None = None,
    max_speedup: float | None = None,
    sort: str = "shape",
    desc: bool = False,
) -> list[dict[str, Any]]:
    """The best kernel of every (shape, GPU) (of one family when `family` is given), filtered and sorted."""
    mode = _mode(mode)
    where, params = ["e.mode = ?", "e.ranked = 1"], [mode]
    for col, value in (("M", M), ("N", N), ("K", K), ("gpu", _clean_gpu(gpu))):
        if value is not None:
            where.append(f"e.{col} = ?")
            params.append(value)
    source = "evaluations e"
    # with a family: its kernels first (CROSS JOIN fixes the order), then each one's rows by the kernel index
    if family:
        source = "kernels fk CROSS JOIN evaluations e ON e.kernel = fk.hash"
        where.append("fk.family = ?")
        params.append(family)
    having, hp = [], []
    if min_speedup is not None:
        having.append("speedup_best >= ?")
        hp.append(min_speedup)
    if max_speedup is not None:
        having.append("speedup_best <= ?")
        hp.append(max_speedup)
    # per group the id of the row holding max(speedup_best) (SQLite's documented bare-column rule); without a
    # family filter every column read here is in the ranking index, so no table row is touched until the join
    sql = f"""
        SELECT e.id, e.M, e.N, e.K, e.gpu, e.mode, e.kernel, b.speedup_best, e.median_us, e.best_baseline,
               e.best_baseline_us, e.floor_fraction, e.tflops, b.ranked_rows, k.family, k.proposer
        FROM (
            SELECT e.id AS id, max(e.speedup_best) AS speedup_best, count(*) AS ranked_rows
            FROM {source} WHERE {" AND ".join(where)}
            GROUP BY e.M, e.N, e.K, e.gpu {"HAVING " + " AND ".join(having) if having else ""}
        ) b JOIN evaluations e ON e.id = b.id JOIN kernels k ON k.hash = e.kernel LIMIT {LEADERBOARD_LIMIT}
    """
    rows = [dict(r) for r in conn.execute(sql, params + hp)]
    keys = SORTS.get(sort, SORTS["shape"])
    rows.sort(
        key=lambda r: tuple((r[k] is None, r[k] if r[k] is not None else 0) for k in keys), reverse=desc
    )
    return rows


# ----- shape ---------------------------------------------------------------------------------------------


def shape_page(conn: sqlite3.Connection, shape: Shape, gpu: str | None, mode: str | None) -> dict:
    mode, gpu = _mode(mode), _clean_gpu(gpu)
    g, gp = ("AND e.gpu = ?", [gpu]) if gpu else ("", [])
    ranked_sql = (
        "SELECT e.id, e.record_id, e.kernel, e.gpu, e.stage, e.median_us, e.p10_us, e.p90_us, e.speedup_best, "
        "e.best_baseline, e.floor_fraction, e.tflops, e.registers, e.created, k.family, k.proposer "
        "FROM evaluations e JOIN kernels k ON k.hash = e.kernel "
        f"WHERE e.mode = ? AND e.ranked = 1 AND e.M = ? AND e.N = ? AND e.K = ? {g} "
        f"ORDER BY {queries.ORDER} LIMIT ?"
    )
    ranked = [dict(r) for r in conn.execute(ranked_sql, [mode, *shape, *gp, RANKED_LIMIT])]
    n_ranked = conn.execute(
        f"SELECT count(*) FROM evaluations e WHERE e.mode = ? AND e.ranked = 1 AND e.M = ? AND e.N = ? AND e.K = ? {g}",
        [mode, *shape, *gp],
    ).fetchone()[0]
    rg, rgp = ("AND r.gpu = ?", [gpu]) if gpu else ("", [])
    failed = [
        dict(r)
        for r in conn.execute(
            "SELECT r.id, r.kernel, r.gpu, r.stage, r.failure_kind, r.failure_message, r.created, k.family, "
            "k.proposer FROM records r JOIN kernels k ON k.hash = r.kernel "
            f"WHERE r.M = ? AND r.N = ? AND r.K = ? {rg} AND r.failure_kind IS NOT NULL "
            "ORDER BY r.id DESC LIMIT ?",
            [*shape, *rgp, FAILURE_LIMIT],
        )
    ]
    n_records = conn.execute(
        f"SELECT count(*) FROM records r WHERE r.M = ? AND r.N = ? AND r.K = ? {rg}", [*shape, *rgp]
    ).fetchone()[0]
    best = None
    if ranked:
        row = conn.execute("SELECT * FROM evaluations WHERE id = ?", (ranked[0]["id"],)).fetchone()
        best = to_dict(row)
    ncu = [
        to_dict(r)
        for r in conn.execute(
            "SELECT e.record_id, e.kernel, e.gpu, e.speedup_best, e.ncu FROM evaluations e "
            f"WHERE e.mode = ? AND e.ranked IN (0, 1) AND e.M = ? AND e.N = ? AND e.K = ? {g} "
            "AND e.ncu IS NOT NULL ORDER BY e.speedup_best DESC LIMIT 20",
            [mode, *shape, *gp],
        )
    ]
    progress = [
        dict(r)
        for r in conn.execute(
            "SELECT e.created, e.speedup_best FROM evaluations e "
            f"WHERE e.mode = ? AND e.ranked = 1 AND e.M = ? AND e.N = ? AND e.K = ? {g} ORDER BY e.created, e.id",
            [mode, *shape, *gp],
        )
    ]
    return {
        "M": shape.M,
        "N": shape.N,
        "K": shape.K,
        "gpu": gpu,
        "mode": mode,
        "best": best,
        "ranked": ranked,
        "n_ranked": n_ranked,
        "failed": failed,
        "failure_counts": queries.failures(conn, shape, gpu),
        "n_records": n_records,
        "ncu": ncu,
        "progress": progress,
        "gpus": [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT gpu FROM records WHERE M = ? AND N = ? AND K = ? ORDER BY 1", tuple(shape)
            )
        ],
    }


# ----- kernel --------------------------------------------------------------------------------------------


def resolve(conn: sqlite3.Connection, hash_or_prefix: str) -> str | None:
    prefix = hash_or_prefix.strip().lower()
    if not prefix or any(c not in "0123456789abcdef" for c in prefix) or len(prefix) > 64:
        return None
    found = [
        r[0]
        for r in conn.execute(
            "SELECT hash FROM kernels WHERE hash >= ? AND hash < ? LIMIT 2", (prefix, prefix + "g")
        )
    ]
    return found[0] if len(found) == 1 else None


def kernel_row(conn: sqlite3.Connection, h: str) -> dict[str, Any] | None:
    row = conn.execute("SELECT * FROM kernels WHERE hash = ?", (h,)).fetchone()
    return to_dict(row) if row else None


def _edges(conn: sqlite3.Connection, col: str, other: str, hashes: list[str]) -> list[tuple[str, str]]:
    out = []
    for i in range(0, len(hashes), 500):
        chunk = hashes[i : i + 500]
        sql = f"SELECT {col}, {other} FROM kernel_parents WHERE {col} IN ({', '.join('?' * len(chunk))})"
        out.extend((a, b) for a, b in conn.execute(sql, chunk))
    return out


def _tree(conn: sqlite3.Connection, root: str, col: str, other: str) -> tuple[dict, int]:
    """Breadth-first from `root` along parent edges (`col` -> `other`), each kernel once, at most
    LINEAGE_LIMIT kernels: a nested {hash, facts, children} tree and whether it was cut."""
    seen = {root}
    nodes: dict[str, dict] = {root: {"hash": root, "children": []}}
    frontier, cut = [root], 0
    while frontier:
        nxt = []
        for a, b in sorted(_edges(conn, col, other, frontier)):
            if b in seen:
                continue
            if len(seen) > LINEAGE_LIMIT:
                cut += 1
                continue
            seen.add(b)
            nodes[b] = {"hash": b, "children": []}
            nodes[a]["children"].append(nodes[b])
            nxt.append(b)
        frontier = nxt
    facts = queries._kernel_facts(conn, list(seen))
    for h, node in nodes.items():
        family, proposer, created, best = facts.get(h, (None, None, None, None))
        node.update(family=family, proposer=proposer, best_offline=best, known=h in facts)
    return nodes[root], cut


def kernel_page(conn: sqlite3.Connection, h: str) -> dict[str, Any] | None:
    k = kernel_row(conn, h)
    if k is None:
        return None
    k["parents"] = [r[0] for r in conn.execute("SELECT parent FROM kernel_parents WHERE child = ?", (h,))]
    k["known_parents"] = [p for p in k["parents"] if kernel_row(conn, p) is not None]
    records = [
        dict(r)
        for r in conn.execute(
            f"SELECT {queries.ATTEMPT_COLS}, {queries.MODE_COLS} FROM records r JOIN kernels k ON k.hash = r.kernel "
            "WHERE r.kernel = ? ORDER BY r.id DESC LIMIT ?",
            (h, KERNEL_ROWS_LIMIT),
        )
    ]
    n_records = conn.execute("SELECT count(*) FROM records WHERE kernel = ?", (h,)).fetchone()[0]
    res = conn.execute(
        "SELECT resources, registers, shared_bytes, spill_stores, spill_loads FROM evaluations "
        "WHERE kernel = ? AND resources IS NOT NULL ORDER BY id DESC LIMIT 1",
        (h,),
    ).fetchone()
    ancestors, cut_up = _tree(conn, h, "child", "parent")
    descendants, cut_down = _tree(conn, h, "parent", "child")
    calls = [
        dict(r)
        for r in conn.execute(
            "SELECT id, run_id, model, prompt_tokens, completion_tokens, cost_usd, latency_s, outcome, prompt, "
            "reply, created FROM llm_calls WHERE kernel_hash = ? ORDER BY id",
            (h,),
        )
    ]
    return {
        "kernel": k,
        "records": records,
        "n_records": n_records,
        "resources": to_dict(res) if res else None,
        "ancestors": ancestors,
        "descendants": descendants,
        "lineage_cut": cut_up + cut_down,
        "llm_calls": calls,
    }


def diff_lines(old: str, new: str, old_name: str, new_name: str) -> list[tuple[str, str]]:
    """A unified diff as (kind, text) lines; kind is one of add, del, hunk, head, same."""
    out = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), old_name, new_name, lineterm=""):
        if line.startswith(("+++", "---")):
            kind = "head"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "same"
        out.append((kind, line))
    return out


# ----- runs ----------------------------------------------------------------------------------------------


def runs_page(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """The newest runs with their records, GPU-worker seconds, LLM calls, tokens and cost."""
    runs = [to_dict(r) for r in conn.execute("SELECT * FROM runs ORDER BY id DESC LIMIT ?", (RUNS_LIMIT,))]
    for run in runs:
        n, gpu_s = conn.execute(
            "SELECT count(*), sum(eval_seconds) FROM records WHERE run_id = ?", (run["id"],)
        ).fetchone()
        run["records"], run["gpu_seconds"] = n, gpu_s
        run["llm"] = dict(
            conn.execute(
                "SELECT count(*) AS calls, coalesce(sum(prompt_tokens), 0) AS prompt_tokens, "
                "coalesce(sum(completion_tokens), 0) AS completion_tokens, coalesce(sum(cost_usd), 0) AS cost_usd "
                "FROM llm_calls WHERE run_id = ?",
                (run["id"],),
            ).fetchone()
        )
        config = run.get("config") or {}
        run["budget"] = {k: v for k, v in config.items() if "budget" in k} if isinstance(config, dict) else {}
    return runs
