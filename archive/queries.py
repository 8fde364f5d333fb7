"""The archive's read queries: ranked bests, leaderboard, lineage, history, attempts, stats, LLM usage.

Invariants: ranked queries read only `evaluations.ranked = 1` rows (full stage, correct, no failure,
timed) of one mode; ties on speedup go to the lower median time, then the older row. Every function takes
a connection and returns plain dicts (JSON columns decoded).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from hgemm.archive.rows import to_dict

from hgemm.core.shape import Shape

ORDER = "e.speedup_best DESC, e.median_us ASC, e.id ASC"
KERNEL_COLS = "k.family, k.params, k.proposer, k.source"


def _gpu_clause(gpu: str | None, alias: str = "e") -> tuple[str, list[Any]]:
    return (f" AND {alias}.gpu = ?", [gpu]) if gpu else ("", [])


def _ranked_gpus(conn: sqlite3.Connection, shape: Shape, mode: str) -> list[str | None]:
    """The GPUs with ranked rows of a shape: a skip-scan of the ranking index, one probe per GPU."""
    base = "SELECT gpu FROM evaluations WHERE mode = ? AND ranked = 1 AND M = ? AND N = ? AND K = ?"
    out: list[str | None] = []
    if conn.execute(base + " AND gpu IS NULL LIMIT 1", (mode, *shape)).fetchone():
        out.append(None)
    row = conn.execute(base + " AND gpu IS NOT NULL ORDER BY gpu LIMIT 1", (mode, *shape)).fetchone()
    while row is not None:
        out.append(row[0])
        row = conn.execute(base + " AND gpu > ? ORDER BY gpu LIMIT 1", (mode, *shape, row[0])).fetchone()
    return out


def best(
    conn: sqlite3.Connection, shape: Shape, gpu: str | None, mode: str, limit: int = 1
) -> list[dict[str, Any]]:
    """The `limit` best ranked rows of a shape. Per GPU the ranking index yields them in order (no sort);
    across GPUs (gpu None) the per-GPU leaders are merged."""
    sql = (
        f"SELECT e.*, {KERNEL_COLS} FROM evaluations e JOIN kernels k ON k.hash = e.kernel "
        f"WHERE e.mode = ? AND e.ranked = 1 AND e.M = ? AND e.N = ? AND e.K = ? AND e.gpu IS ? "
        f"ORDER BY {ORDER} LIMIT ?"
    )
    gpus = [gpu] if gpu else _ranked_gpus(conn, shape, mode)
    found = [r for g in gpus for r in conn.execute(sql, [mode, *shape, g, limit])]
    if len(gpus) > 1:
        found.sort(key=lambda r: (-r["speedup_best"], r["median_us"], r["id"]))
    return [to_dict(r) for r in found[:limit]]


def leaderboard(
    conn: sqlite3.Connection, gpu: str | None, mode: str, top: int, shape: Shape | None
) -> list[dict[str, Any]]:
    g, gp = _gpu_clause(gpu)
    s, sp = ("", [])
    if shape:
        s, sp = " AND e.M = ? AND e.N = ? AND e.K = ?", list(shape)
    # per (shape, GPU, kernel) its best row (SQLite takes the bare column from the max() row), then rank
    sql = f"""
        WITH per_kernel AS (
            SELECT e.id AS id, max(e.speedup_best) AS sb FROM evaluations e
            WHERE e.mode = ? AND e.ranked = 1{g}{s} GROUP BY e.M, e.N, e.K, e.gpu, e.kernel
        ), ranked AS (
            SELECT e.id, ROW_NUMBER() OVER (PARTITION BY e.M, e.N, e.K, e.gpu ORDER BY {ORDER}) AS rank,
                   COUNT(*) OVER (PARTITION BY e.M, e.N, e.K, e.gpu) AS kernels
            FROM per_kernel p JOIN evaluations e ON e.id = p.id
        )
        SELECT e.*, r.rank, r.kernels, k.family, k.params, k.proposer
        FROM ranked r JOIN evaluations e ON e.id = r.id JOIN kernels k ON k.hash = e.kernel
        WHERE r.rank <= ? ORDER BY e.M, e.N, e.K, e.gpu, r.rank
    """
    out = []
    for r in conn.execute(sql, [mode, *gp, *sp, top]):
        d = to_dict(r)
        d.pop("rk", None)
        out.append(d)
    return out


def _best_offline(conn: sqlite3.Connection, h: str) -> float | None:
    row = conn.execute(
        "SELECT max(speedup_best) FROM evaluations WHERE kernel = ? AND mode = 'offline' AND ranked = 1", (h,)
    ).fetchone()
    return row[0] if row else None


def _kernel_facts(conn: sqlite3.Connection, hashes: list[str]) -> dict[str, tuple]:
    """family, proposer, created, best offline speedup of each archived kernel among `hashes`."""
    out: dict[str, tuple] = {}
    for i in range(0, len(hashes), 500):
        chunk = hashes[i : i + 500]
        marks = ", ".join("?" * len(chunk))
        best = dict(
            conn.execute(
                f"SELECT kernel, max(speedup_best) FROM evaluations WHERE kernel IN ({marks}) "
                "AND mode = 'offline' AND ranked = 1 GROUP BY kernel",
                chunk,
            ).fetchall()
        )
        for h, fam, prop, created in conn.execute(
            f"SELECT hash, family, proposer, created FROM kernels WHERE hash IN ({marks})", chunk
        ):
            out[h] = (fam, prop, created, best.get(h))
    return out


def lineage(conn: sqlite3.Connection, h: str, max_depth: int = 64) -> dict[str, Any]:
    def walk(start_col: str, next_col: str) -> list[dict[str, Any]]:
        depth_of: dict[str, int] = {}
        frontier = {h}
        for depth in range(1, max_depth + 1):  # breadth first: each kernel once, at its smallest depth
            nxt: set[str] = set()
            front = sorted(frontier)
            for i in range(0, len(front), 500):
                chunk = front[i : i + 500]
                sql = f"SELECT {next_col} FROM kernel_parents WHERE {start_col} IN ({', '.join('?' * len(chunk))})"
                nxt.update(r[0] for r in conn.execute(sql, chunk))
            frontier = {x for x in nxt if x not in depth_of and x != h}
            if not frontier:
                break
            for x in frontier:
                depth_of[x] = depth
        facts = _kernel_facts(conn, list(depth_of))
        out = []
        for x, depth in depth_of.items():
            family, proposer, created, best_offline = facts.get(x, (None, None, None, None))
            out.append({"hash": x, "depth": depth, "family": family, "proposer": proposer, "created": created,
                        "known": x in facts, "best_offline": best_offline})  # fmt: skip
        out.sort(key=lambda d: (d["depth"], d["created"] or "", d["hash"]))
        return out

    k = conn.execute("SELECT hash, family, proposer, created FROM kernels WHERE hash = ?", (h,)).fetchone()
    me = dict(k)
    me["best_offline"] = _best_offline(conn, h)
    return {"kernel": me, "ancestors": walk("child", "parent"), "descendants": walk("parent", "child")}


def history(conn: sqlite3.Connection, shape: Shape, gpu: str | None, mode: str) -> list[dict[str, Any]]:
    g, gp = _gpu_clause(gpu)
    sql = (
        f"SELECT e.*, k.family, k.proposer FROM evaluations e JOIN kernels k ON k.hash = e.kernel "
        f"WHERE e.mode = ? AND e.ranked = 1 AND e.M = ? AND e.N = ? AND e.K = ?{g} ORDER BY e.created, e.id"
    )
    out: list[dict[str, Any]] = []
    best_so_far: float | None = None
    for r in conn.execute(sql, [mode, *shape, *gp]):
        d = to_dict(r)
        if best_so_far is None or d["speedup_best"] > best_so_far:
            d["previous_best"] = best_so_far
            best_so_far = d["speedup_best"]
            out.append(d)
    return out


ATTEMPT_COLS = (
    "r.id, r.kernel, r.M, r.N, r.K, r.gpu, r.cc, r.stage, r.correct, r.failure_kind, r.failure_message, "
    "r.run_id, r.created, k.family, k.params, k.proposer"
)
MODE_COLS = (
    "(SELECT speedup_best FROM evaluations x WHERE x.record_id = r.id AND x.mode = 'offline') AS offline_speedup, "
    "(SELECT median_us FROM evaluations x WHERE x.record_id = r.id AND x.mode = 'offline') AS offline_us, "
    "(SELECT speedup_best FROM evaluations x WHERE x.record_id = r.id AND x.mode = 'server') AS server_speedup"
)


def attempts(
    conn: sqlite3.Connection, shape: Shape, gpu: str | None, limit: int | None
) -> list[dict[str, Any]]:
    g, gp = _gpu_clause(gpu, "r")
    sql = (
        f"SELECT {ATTEMPT_COLS}, {MODE_COLS} FROM records r JOIN kernels k ON k.hash = r.kernel "
        f"WHERE r.M = ? AND r.N = ? AND r.K = ?{g} ORDER BY r.created DESC, r.id DESC LIMIT ?"
    )
    return [to_dict(r) for r in conn.execute(sql, [*shape, *gp, -1 if limit is None else limit])]


def failures(conn: sqlite3.Connection, shape: Shape, gpu: str | None) -> dict[str, int]:
    g, gp = _gpu_clause(gpu, "r")
    sql = (
        f"SELECT r.failure_kind, count(*) FROM records r WHERE r.M = ? AND r.N = ? AND r.K = ?{g} "
        "AND r.failure_kind IS NOT NULL GROUP BY r.failure_kind ORDER BY count(*) DESC"
    )
    return {kind: n for kind, n in conn.execute(sql, [*shape, *gp])}


def records_by_id(conn: sqlite3.Connection, ids: list[int]) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        sql = (
            f"SELECT {ATTEMPT_COLS}, {MODE_COLS}, k.source, json_extract(r.record, '$.ncu') AS ncu "
            "FROM records r JOIN kernels k ON k.hash = r.kernel "
            f"WHERE r.id IN ({', '.join('?' * len(chunk))})"
        )
        for r in conn.execute(sql, chunk):
            d = to_dict(r)
            out[d["id"]] = d
    return out


def stats(conn: sqlite3.Connection) -> dict[str, Any]:
    one = lambda sql: conn.execute(sql).fetchone()[0]  # noqa: E731
    return {
        "kernels": one("SELECT count(*) FROM kernels"),
        "records": one("SELECT count(*) FROM records"),
        "evaluation_rows": one("SELECT count(*) FROM evaluations"),
        "ranked_rows": one("SELECT count(*) FROM evaluations WHERE ranked = 1"),
        "shapes": one("SELECT count(*) FROM (SELECT DISTINCT M, N, K FROM records)"),
        "gpus": [r[0] for r in conn.execute("SELECT DISTINCT gpu FROM records ORDER BY gpu")],
        "by_proposer": {
            p: n for p, n in conn.execute("SELECT proposer, count(*) FROM kernels GROUP BY proposer")
        },
        "failures": {
            f: n
            for f, n in conn.execute(
                "SELECT failure_kind, count(*) FROM records WHERE failure_kind IS NOT NULL "
                "GROUP BY failure_kind ORDER BY count(*) DESC"
            )
        },
        "runs": one("SELECT count(*) FROM runs"),
        "llm_calls": one("SELECT count(*) FROM llm_calls"),
        "llm_cost_usd": one("SELECT coalesce(sum(cost_usd), 0) FROM llm_calls"),
    }


def llm_usage(conn: sqlite3.Connection, run_id: int | None) -> dict[str, Any]:
    where, params = ("WHERE run_id = ?", [run_id]) if run_id is not None else ("", [])
    agg = (
        "count(*) AS calls, coalesce(sum(prompt_tokens), 0) AS prompt_tokens, "
        "coalesce(sum(completion_tokens), 0) AS completion_tokens, coalesce(sum(cost_usd), 0.0) AS cost_usd, "
        "coalesce(sum(latency_s), 0.0) AS latency_s"
    )
    total = dict(conn.execute(f"SELECT {agg} FROM llm_calls {where}", params).fetchone())
    total["by_model"] = {
        r["model"]: dict(r)
        for r in conn.execute(f"SELECT model, {agg} FROM llm_calls {where} GROUP BY model", params)
    }
    total["by_outcome"] = {
        o: n
        for o, n in conn.execute(f"SELECT outcome, count(*) FROM llm_calls {where} GROUP BY outcome", params)
    }
    return total
