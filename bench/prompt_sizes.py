"""Prompt sizes before and after the compact prompt, from the archive the project ships (no GPU needed).

Usage: python -m hgemm.bench.prompt_sizes [--out bench/results] [--archive FILE] [--budget TOKENS]

For each shape (4096^3, 1024x128x1024, 7x14336x4096, 3000x5000x700), with the shipped grid100 archive imported
into a private archive (no index: neighbours by log-distance), it renders the proposer's prompt as it is now
(`render_prompt`, default budget) and, for the same parent and variants, the layout of 0.11.0: parent and
variants as complete sources (comments stripped), no cap. Sizes are characters and tokens, counted with the
tokenizer the prompts are budgeted with (named in the report). Writes prompt-sizes.md and prompt-sizes.json.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

from hgemm.agent.config import gpu_preset
from hgemm.agent.llm import tokens
from hgemm.agent.llm.prompt import DEFAULT_BUDGET, render_copies, render_prompt
from hgemm.agent.proposer import ProposalContext

from hgemm.core.shape import Shape

SHAPES = [(4096, 4096, 4096), (1024, 128, 1024), (7, 14336, 4096), (3000, 5000, 700)]
SEED = Path(__file__).resolve().parent / "results" / "archive-grid100-r10-H100-2026-11-24.jsonl.xz"
VARIANTS = 3  # the configuration's default (llm.exemplars)


def measure(archive, budget: int) -> list[dict]:
    counter = tokens.counter()
    gpu = gpu_preset("h100-sxm")
    rows = []
    for shape in SHAPES:
        ctx = ProposalContext(Shape(*shape), gpu, archive=archive)
        after = render_prompt(ctx, budget_tokens=budget, rng=random.Random(0), variants=VARIANTS)
        before_user = render_copies(ctx, after.parent_hash, after.exemplar_hashes)
        before_tokens = counter.count(after.system) + counter.count(before_user)
        rows.append({
            "shape": list(shape), "parent": after.parent_hash, "variants": len(after.exemplar_hashes),
            "variants_left_out": after.left_out, "helpers_folded": after.folded,
            "before_chars": len(after.system) + len(before_user), "before_tokens": before_tokens,
            "after_chars": len(after.system) + len(after.user), "after_tokens": after.tokens,
            "within_budget": after.tokens <= budget,
        })  # fmt: skip
    return rows


def write(out: Path, rows: list[dict], budget: int, tokenizer: str) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    data = {"tokenizer": tokenizer, "budget_tokens": budget, "archive": SEED.name, "gpu_preset": "h100-sxm",
            "variants": VARIANTS, "rows": rows}  # fmt: skip
    j = out / "prompt-sizes.json"
    j.write_text(json.dumps(data, indent=1) + "\n")
    lines = [
        "# Prompt sizes before and after the compact prompt",
        "",
        f"Archive: `{SEED.name}` imported (no index); GPU preset h100-sxm; {VARIANTS} variants asked for; budget "
        f"{budget} tokens. Tokens counted with `{tokenizer}`"
        + (
            " (the index's WordPiece tokenizer: tiktoken's encodings were not cached on the measuring machine; "
            "WordPiece splits code punctuation finely, so OpenAI encodings would count fewer)."
            if "minilm" in tokenizer
            else "."
        ),
        "",
        "Before: the same parent and variants as complete sources, comments stripped, no cap (the 0.11.0 layout). "
        "After: the parent once with its own preprocessor branches only (helper bodies folded when it would not "
        "fit), variants as their setting changes or a diff against it, filled in priority order within the budget.",
        "",
        "| shape | before chars | before tokens | after chars | after tokens | ratio | variants shown (left out) | helpers folded |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = r["before_tokens"] / r["after_tokens"] if r["after_tokens"] else float("nan")
        lines.append(
            f"| {'x'.join(map(str, r['shape']))} | {r['before_chars']:,} | {r['before_tokens']:,} | "
            f"{r['after_chars']:,} | {r['after_tokens']:,} | {ratio:.1f}x | {r['variants']} ({r['variants_left_out']}) | "
            f"{r['helpers_folded']} |"
        )
    lines += ["", "Command: `python -m hgemm.bench.prompt_sizes --out bench/results`", ""]
    md = out / "prompt-sizes.md"
    md.write_text("\n".join(lines))
    return md, j


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m hgemm.bench.prompt_sizes", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--out", type=Path, default=Path("bench/results"))
    ap.add_argument("--archive", type=Path, default=SEED)
    ap.add_argument("--budget", type=int, default=DEFAULT_BUDGET)
    args = ap.parse_args(argv)
    from hgemm.archive import Archive

    with tempfile.TemporaryDirectory() as tmp, Archive(Path(tmp) / "archive.db") as archive:
        archive.import_file(args.archive)
        rows = measure(archive, args.budget)
    for path in write(args.out, rows, args.budget, tokens.counter().name):
        print(f"wrote {path}")
    return 0 if all(r["within_budget"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
