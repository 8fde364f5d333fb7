"""Training data from the archive: `export(archive, fmt, out, ...)` writes sft, dpo or reward rows.

Every row carries the prompt exactly as the LLM proposer renders it for the row's shape and GPU
(`agent.llm.prompt.build_prompt`, archive-only retrieval, a draw seeded by the shape), as `system` and `user`,
and the answer in the proposer's answer format: the kernel, scrubbed as prompts show kernels, in one ```cuda
block (the reply parser takes the last such block).

- sft: per shape and GPU, the best ranked kernel (offline speedup at least `min_speedup`) as `completion`.
- dpo: per shape and GPU, up to `pairs` rows: the best kernel as `chosen`, a slower correct kernel (at least
  `DPO_MARGIN` slower) or a kernel that failed there for a defect as `rejected`, alternately (a pair whose
  answers read the same once scrubbed is dropped).
- reward: per shape and GPU, up to `per_shape` kernels with the reward their evaluation earned
  (`finetune.reward`): the best first, then failures and slower kernels alternately.
- The kernels a row answers with are hidden from its own prompt (the prompt is rendered from the archive as if
  they were not in it), so no answer leaks into its question.
- Rows are deduplicated by a hash of their content (`id`); shapes are split into train and validation by a
  hash of the shape alone, so no shape appears in both (every GPU's rows of a shape go the same way).
- `--out DIR/NAME.jsonl` writes `NAME.train.jsonl`, `NAME.val.jsonl`, and the dataset card `NAME.card.json`
  and `NAME.card.md` (counts, shapes, GPUs, speedup distribution, data hash) beside it.
"""

from __future__ import annotations

import hashlib
import json
import random
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hgemm.core.errors import BadInput
from hgemm.core.paths import write_text_atomic
from hgemm.core.record import NOT_DEFECTS, utc_now
from hgemm.core.shape import Shape

FORMATS = ("sft", "dpo", "reward")
DPO_MARGIN = 0.03  # a rejected correct kernel is at least this much slower than the chosen one
VAL_FRACTION = 0.15


@dataclass
class Options:
    fmt: str = "sft"
    min_speedup: float | None = None
    gpu: str | None = None
    val_fraction: float = VAL_FRACTION
    exemplars: int = 4
    failures: int = 4
    pairs: int = 2  # dpo rows per shape and GPU
    per_shape: int = 6  # reward rows per shape and GPU


class _Hidden:
    """A read-only view of an archive without some kernels: what a prompt would have shown had they not
    been found yet. Only the reads the prompt builder makes are filtered; everything else is delegated."""

    def __init__(self, archive: Any, hidden: Iterable[str]):
        self._archive = archive
        self._hidden = set(hidden)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._archive, name)

    def attempts(self, shape: Shape, gpu: str | None = None, limit: int | None = None) -> list[dict]:
        rows = self._archive.attempts(shape, gpu=gpu, limit=None)
        rows = [r for r in rows if r["kernel"] not in self._hidden]
        return rows if limit is None else rows[:limit]

    def leaderboard(self, gpu: str | None = None, mode: str = "offline", top: int | None = None,
                    shape: Shape | None = None) -> list[dict]:  # fmt: skip
        extra = len(self._hidden)
        rows = self._archive.leaderboard(gpu=gpu, mode=mode, top=(top or 1) + extra, shape=shape)
        out, per = [], {}
        for r in rows:
            key = (r["M"], r["N"], r["K"], r["gpu"])
            if r["kernel"] in self._hidden or per.get(key, 0) >= (top or 1):
                continue
            per[key] = per.get(key, 0) + 1
            out.append(r)
        return out

    def best(self, shape: Shape, gpu: str | None = None, mode: str = "offline") -> dict | None:
        rows = self.leaderboard(gpu=gpu, mode=mode, top=1, shape=shape)
        return rows[0] if rows else None

    def records_by_id(self, ids: Iterable[int]) -> dict[int, dict]:
        found = self._archive.records_by_id(ids)
        return {i: r for i, r in found.items() if r["kernel"] not in self._hidden}

    def eval_record(self, record_id: int) -> Any:
        record = self._archive.eval_record(record_id)
        return None if record is None or record.kernel_hash in self._hidden else record


def gpu_info(name: str | None) -> Any:
    """The GpuInfo a prompt for `name`'s records describes (as `hgemm prompt` builds it)."""
    from hgemm.agent.config import gpu_preset, preset_for_name

    return gpu_preset(preset_for_name(name or ""), name)


def render(
    archive: Any, shape: Shape, gpu: str | None, hidden: Iterable[str], opts: Options
) -> tuple[str, str]:
    """(system, user) as the LLM proposer renders them for `shape` on `gpu`, `hidden` kernels left out."""
    from hgemm.agent.llm.prompt import build_prompt
    from hgemm.agent.proposer import ProposalContext

    ctx = ProposalContext(shape, gpu_info(gpu), archive=_Hidden(archive, hidden), retriever=None)
    seed = int(hashlib.sha256(f"{shape.M}x{shape.N}x{shape.K}".encode()).hexdigest()[:8], 16)
    prompt = build_prompt(ctx, random.Random(seed), exemplars=opts.exemplars, failures=opts.failures)
    return prompt.system, prompt.user


def answer(source: str) -> str:
    """A kernel in the proposer's answer format: scrubbed as prompts show kernels, in one ```cuda block."""
    from hgemm.agent.llm.scrub import prompt_source

    return "```cuda\n" + prompt_source(source).rstrip("\n") + "\n```\n"


def shapes_and_gpus(archive: Any, gpu: str | None) -> list[tuple[Shape, str | None]]:
    sql = "SELECT DISTINCT M, N, K, gpu FROM evaluations WHERE mode = 'offline' AND ranked = 1"
    params: list[Any] = []
    if gpu:
        sql += " AND gpu = ?"
        params.append(gpu)
    return [
        (Shape(r["M"], r["N"], r["K"]), r["gpu"])
        for r in archive.execute(sql + " ORDER BY M, N, K, gpu", params)
    ]


def _failed(archive: Any, shape: Shape, gpu: str | None) -> list[dict]:
    """Kernels that failed on this shape and GPU for a defect, one row each (newest failure), newest first."""
    marks = ",".join("?" * len(NOT_DEFECTS))
    rows = archive.execute(
        f"SELECT r.id AS record_id, r.kernel, r.failure_kind, k.source FROM records r JOIN kernels k "
        f"ON k.hash = r.kernel WHERE r.M = ? AND r.N = ? AND r.K = ? AND r.gpu IS ? AND r.failure_kind IS NOT NULL "
        f"AND r.failure_kind NOT IN ({marks}) ORDER BY r.id DESC",
        (*shape, gpu, *NOT_DEFECTS),
    )
    seen: dict[str, dict] = {}
    for r in rows:
        seen.setdefault(r["kernel"], dict(r))
    return list(seen.values())


def _base(shape: Shape, gpu: str | None, system: str, user: str) -> dict[str, Any]:
    return {"M": shape.M, "N": shape.N, "K": shape.K, "gpu": gpu, "system": system, "user": user}


def sft_rows(archive: Any, shape: Shape, gpu: str | None, opts: Options) -> list[dict]:
    best = archive.best(shape, gpu=gpu, mode="offline")
    if best is None or (opts.min_speedup is not None and (best["speedup_best"] or 0) < opts.min_speedup):
        return []
    system, user = render(archive, shape, gpu, [best["kernel"]], opts)
    row = _base(shape, gpu, system, user)
    row.update(completion=answer(best["source"]), kernel=best["kernel"], speedup=best["speedup_best"])
    return [row]


def dpo_rows(archive: Any, shape: Shape, gpu: str | None, opts: Options) -> list[dict]:
    board = archive.leaderboard(gpu=gpu, mode="offline", top=64, shape=shape)
    board = [r for r in board if r["gpu"] == gpu]
    if not board:
        return []
    best = board[0]
    if opts.min_speedup is not None and (best["speedup_best"] or 0) < opts.min_speedup:
        return []
    slower = [r for r in board[1:] if r["speedup_best"] <= best["speedup_best"] * (1 - DPO_MARGIN)]
    slower = slower[::-1]  # slowest first: the clearest contrast
    failed = [r for r in _failed(archive, shape, gpu) if r["kernel"] != best["kernel"]]
    rejected: list[tuple[dict, str, float | None]] = []
    for i in range(max(len(slower), len(failed))):
        for pool, why in ((failed, "failed"), (slower, "slower")):
            if i < len(pool) and len(rejected) < opts.pairs:
                r = pool[i]
                rejected.append((r, r.get("failure_kind") or why, r.get("speedup_best")))
    if not rejected:
        return []
    system, user = render(archive, shape, gpu, [best["kernel"]], opts)
    sources = _sources(archive, [best["kernel"]] + [r["kernel"] for r, _, _ in rejected])
    out = []
    for r, why, speedup in rejected:
        if answer(sources[r["kernel"]]) == answer(sources[best["kernel"]]):
            continue  # the same code as shown (they differ in comments only): no preference to learn
        row = _base(shape, gpu, system, user)
        row.update(
            chosen=answer(sources[best["kernel"]]),
            rejected=answer(sources[r["kernel"]]),
            kernel=best["kernel"],
            speedup=best["speedup_best"],
            rejected_kernel=r["kernel"],
            rejected_why=why,
            rejected_speedup=speedup,
        )
        out.append(row)
    return out


def _sources(archive: Any, hashes: list[str]) -> dict[str, str]:
    if not hashes:
        return {}
    marks = ",".join("?" * len(hashes))
    return {
        r["hash"]: r["source"]
        for r in archive.execute(f"SELECT hash, source FROM kernels WHERE hash IN ({marks})", hashes)
    }


def reward_rows(archive: Any, shape: Shape, gpu: str | None, opts: Options) -> list[dict]:
    from hgemm.agent.finetune.reward import reward

    board = [r for r in archive.leaderboard(gpu=gpu, mode="offline", top=64, shape=shape) if r["gpu"] == gpu]
    failed = [r for r in _failed(archive, shape, gpu) if r["kernel"] not in {b["kernel"] for b in board}]
    picks: list[int] = []  # record ids, best first, then failures and slower kernels alternately
    if board:
        picks.append(board[0]["record_id"])
    slower = board[1:][::-1]
    for i in range(max(len(slower), len(failed))):
        for pool in (failed, slower):
            if i < len(pool) and len(picks) < opts.per_shape:
                picks.append(pool[i]["record_id"])
    sources = _sources(archive, [r["kernel"] for r in board + failed])
    out = []
    for rid in picks[: opts.per_shape]:
        record = archive.eval_record(rid)
        if record is None:
            continue
        source = sources[record.kernel_hash]
        value = reward(record, len(source))
        if value is None:
            continue
        system, user = render(archive, shape, gpu, [record.kernel_hash], opts)
        row = _base(shape, gpu, system, user)
        row.update(
            completion=answer(source),
            reward=value,
            kernel=record.kernel_hash,
            correct=record.ok,
            failure_kind=record.failure_kind,
            speedup=record.speedup_best("offline") if record.ok else None,
        )
        out.append(row)
    return out


BUILDERS = {"sft": sft_rows, "dpo": dpo_rows, "reward": reward_rows}
CONTENT = {"sft": ("completion",), "dpo": ("chosen", "rejected"), "reward": ("completion", "reward")}


def content_hash(row: dict[str, Any], fmt: str) -> str:
    """A row's identity: its prompt and answer(s), not where they came from."""
    keys = ("system", "user", *CONTENT[fmt])
    return hashlib.sha256(json.dumps([row[k] for k in keys]).encode()).hexdigest()[:16]


def shape_key(row: dict[str, Any]) -> str:
    return f"{row['M']}x{row['N']}x{row['K']}"


def split_by_shape(rows: list[dict], val_fraction: float) -> tuple[list[dict], list[dict]]:
    """Train and validation rows: a shape goes wholly one way, by a hash of the shape alone. With two shapes
    or more, each side gets at least one (the shape whose hash is lowest goes to validation)."""
    if not 0 <= val_fraction < 1:
        raise BadInput(f"--val-fraction must be in [0, 1), not {val_fraction}")

    def draw(shape: str) -> float:
        return int(hashlib.sha256(shape.encode()).hexdigest()[:12], 16) / float(1 << 48)

    shapes = sorted({shape_key(r) for r in rows}, key=draw)
    val = {s for s in shapes if draw(s) < val_fraction}
    if len(shapes) >= 2 and val_fraction > 0:
        if not val:
            val = {shapes[0]}
        if val == set(shapes):
            val.discard(shapes[-1])
    return [r for r in rows if shape_key(r) not in val], [r for r in rows if shape_key(r) in val]


def build(archive: Any, opts: Options, progress: bool = False) -> list[dict]:
    """Every row of `opts.fmt` from the archive, deduplicated by content hash (first kept), shape by shape."""
    if opts.fmt not in FORMATS:
        raise BadInput(f"--format must be one of {', '.join(FORMATS)}, not {opts.fmt!r}")
    if opts.min_speedup is not None and opts.min_speedup <= 0:
        raise BadInput("--min-speedup must be positive")
    targets = shapes_and_gpus(archive, opts.gpu)
    rows: list[dict] = []
    seen: set[str] = set()
    from rich.progress import Progress

    with Progress(disable=not progress, transient=True) as bar:
        task = bar.add_task(f"export {opts.fmt}", total=len(targets))
        for shape, gpu in targets:
            for row in BUILDERS[opts.fmt](archive, shape, gpu, opts):
                row["id"] = content_hash(row, opts.fmt)
                if row["id"] not in seen:
                    seen.add(row["id"])
                    rows.append(row)
            bar.advance(task)
    return rows


def paths(out: Path) -> dict[str, Path]:
    """Where an export to `out` (NAME.jsonl) writes its parts."""
    stem = out.name[: -len(".jsonl")] if out.name.endswith(".jsonl") else out.name
    return {
        part: out.with_name(f"{stem}.{part}") for part in ("train.jsonl", "val.jsonl", "card.json", "card.md")
    }


def _quantiles(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    values = sorted(values)
    cut = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else [values[0]] * 3
    return {"min": round(values[0], 4), "p25": round(cut[0], 4), "median": round(cut[1], 4),
            "p75": round(cut[2], 4), "max": round(values[-1], 4), "n": len(values)}  # fmt: skip


def card(fmt: str, train: list[dict], val: list[dict], data_hash: str, opts: Options) -> dict[str, Any]:
    def side(rows: list[dict]) -> dict[str, Any]:
        gpus: dict[str, int] = {}
        for r in rows:
            gpus[str(r["gpu"])] = gpus.get(str(r["gpu"]), 0) + 1
        return {"rows": len(rows), "shapes": sorted({shape_key(r) for r in rows}), "gpus": gpus}

    rows = train + val
    out = {
        "format": fmt,
        "created": utc_now(),
        "data_hash": data_hash,
        "options": {
            "min_speedup": opts.min_speedup,
            "gpu": opts.gpu,
            "val_fraction": opts.val_fraction,
            "exemplars": opts.exemplars,
            "failures": opts.failures,
        },  # fmt: skip
        "train": side(train),
        "val": side(val),
        "speedup": _quantiles([r["speedup"] for r in rows if isinstance(r.get("speedup"), (int, float))]),
        "prompt_chars": _quantiles([float(len(r["system"]) + len(r["user"])) for r in rows]),
    }
    if fmt == "reward":
        out["reward"] = _quantiles([float(r["reward"]) for r in rows])
    if fmt == "dpo":
        why: dict[str, int] = {}
        for r in rows:
            why[r["rejected_why"]] = why.get(r["rejected_why"], 0) + 1
        out["rejected"] = why
    return out


def card_markdown(c: dict[str, Any]) -> str:
    def dist(d: dict[str, float] | None) -> str:
        if not d:
            return "none"
        return f"{d['min']} / {d['p25']} / {d['median']} / {d['p75']} / {d['max']} (n={d['n']})"

    lines = [
        f"# Fine-tune data: {c['format']}",
        "",
        f"Exported {c['created']} from the hgemm archive; data hash `{c['data_hash']}`.",
        "",
        "| split | rows | shapes | GPUs (rows) |",
        "|---|---|---|---|",
    ]
    for name in ("train", "val"):
        s = c[name]
        gpus = ", ".join(f"{g} ({n})" for g, n in sorted(s["gpus"].items())) or "none"
        lines.append(f"| {name} | {s['rows']} | {len(s['shapes'])} | {gpus} |")
    lines += [
        "",
        f"Speedup of the answer kernel over the best cuBLAS baseline, offline (min / p25 / median / p75 / max): "
        f"{dist(c['speedup'])}.",
        f"Prompt characters: {dist(c['prompt_chars'])}.",
    ]
    if "reward" in c:
        lines.append(f"Reward: {dist(c['reward'])}.")
    if "rejected" in c:
        lines.append(
            "Rejected answers: " + ", ".join(f"{k} {v}" for k, v in sorted(c["rejected"].items())) + "."
        )
    lines += ["", f"Validation shapes: {', '.join(c['val']['shapes']) or 'none'}.", ""]
    return "\n".join(lines)


def write(rows: list[dict], out: Path, opts: Options) -> dict[str, Any]:
    """Split, write both splits (each atomically) and the card; returns the card."""
    if out.exists() and out.is_dir():
        raise BadInput(f"--out {out} is a directory; give a file name ending in .jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)
    train, val = split_by_shape(rows, opts.val_fraction)
    where = paths(out)
    digest = hashlib.sha256()
    for part, chunk in (("train.jsonl", train), ("val.jsonl", val)):
        text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in chunk)
        digest.update(text.encode())
        write_text_atomic(where[part], text)
    c = card(opts.fmt, train, val, digest.hexdigest()[:16], opts)
    write_text_atomic(where["card.json"], json.dumps(c, indent=1) + "\n")
    write_text_atomic(where["card.md"], card_markdown(c))
    return c


def export(archive: Any, out: Path, opts: Options, progress: bool = False) -> dict[str, Any]:
    rows = build(archive, opts, progress=progress)
    if not rows:
        raise BadInput(f"the archive holds no {opts.fmt} data for these options (no ranked kernel qualifies)")
    return write(rows, out, opts)


def read(path: Path) -> list[dict]:
    """Rows of one split file."""
    if not path.is_file():
        raise BadInput(f"no data file {path}")
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except json.JSONDecodeError as e:
        raise BadInput(f"{path} is not jsonl: {e}") from e
