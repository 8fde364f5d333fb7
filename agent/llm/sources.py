"""Prompt material from outside this run: the archive and the index.

- `from_store(ctx, limit)` returns (source, EvalRecord) pairs, oldest first: every attempt on ctx's shape and
  GPU (failures included), the best kernels of the nearest shapes (found by the retriever, else by
  log-distance over M, N, K), and with a retriever the attempts the index finds near this shape.
- Read-only; safe to call with neither store (returns nothing).
"""

from __future__ import annotations

import math

from hgemm.agent.proposer import ProposalContext
from hgemm.agent.stores import ArchiveStore

from hgemm.core.record import EvalRecord
from hgemm.core.shape import Shape

NEIGHBOUR_SHAPES = 6  # shapes consulted besides ctx's own
PER_SHAPE = 3  # best kernels taken from each neighbouring shape


def shape_distance(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    return math.sqrt(sum(math.log2(x / y) ** 2 for x, y in zip(a, b, strict=True)))


def _records(archive: ArchiveStore, record_ids: list[int]) -> list[tuple[str, EvalRecord]]:
    rows = archive.records_by_id(record_ids)
    out = []
    for rid in record_ids:
        row, record = rows.get(rid), archive.eval_record(rid)
        if row is not None and record is not None:
            out.append((row["source"], record))
    return out


def _neighbours_from_archive(ctx: ProposalContext) -> list[int]:
    shape = (ctx.M, ctx.N, ctx.K)
    board = ctx.archive.leaderboard(gpu=ctx.gpu.name, top=PER_SHAPE)
    shapes = sorted(
        {(r["M"], r["N"], r["K"]) for r in board} - {shape}, key=lambda s: shape_distance(s, shape)
    )
    near = set(shapes[:NEIGHBOUR_SHAPES])
    return [r["record_id"] for r in board if (r["M"], r["N"], r["K"]) in near]


def _neighbours_from_index(ctx: ProposalContext, limit: int) -> list[int]:
    """Record ids of the best kernels on the nearest shapes and of attempts near this shape (with NCU)."""
    ids = []
    for hit in ctx.retriever.similar_shapes(ctx.shape, ctx.gpu.name, NEIGHBOUR_SHAPES + 1):
        best = ctx.archive.best(Shape(hit["M"], hit["N"], hit["K"]), gpu=ctx.gpu.name, mode="offline")
        if best is not None:
            ids.append(int(best["record_id"]))
    ids.extend(int(row["id"]) for row in ctx.retriever.history(ctx.shape, ctx.gpu.name, limit))
    return ids


def from_store(ctx: ProposalContext, limit: int = 32) -> list[tuple[str, EvalRecord]]:
    if ctx.archive is None:
        return []
    own = [r["id"] for r in ctx.archive.attempts(ctx.shape, gpu=ctx.gpu.name, limit=limit)][::-1]
    if ctx.retriever is not None:
        near = _neighbours_from_index(ctx, limit)
    else:
        near = _neighbours_from_archive(ctx)
    ids = list(dict.fromkeys(near + own))
    pairs = _records(ctx.archive, ids)
    pairs.sort(key=lambda p: p[1].created)
    return pairs
