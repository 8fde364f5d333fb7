"""The agent loop with the LLM proposer on a GPU: compile rate, correct rate and best speedup per turn.

Usage:
    python -m hgemm.bench.llm_turns --out DIR [--shape M N K ...] [--budget-evals N] [--budget-minutes T]
        [--local-model DIR [--local-adapter DIR]] [--seed-archive FILE] [--warmup N] [--no-ncu]

- The model: `--local-model DIR` runs a Hugging Face model from that directory in-process (nothing is
  downloaded); without it, the scripted model `hgemm.testing.scripted_model.ParamTweaker` answers through the
  loopback OpenAI-compatible replay server: it edits one `#define` of the parent per answer (SEARCH/REPLACE),
  undoes a failed change in its repair turns, and knows nothing about GPUs. The report names the model used.
- Per shape: `--warmup` template candidates first (so the shape has a parent on this GPU), then the loop
  with only the LLM proposer (new prompts, repair turns, improvement turns; NCU on finalists when `ncu` is on
  PATH). `--seed-archive` imports an exported archive first (for retrieval from other shapes).
- Writes DIR/llm-turns-<gpu>-<date>.md, .json and .png: GPU name, driver, date, model; one row per LLM
  request (shape, request number, kind and depth of the turn, outcome, candidates, compiled, correct, best
  speedup so far), cumulative rates per request, and totals per turn depth.
- Archive and index live under $HGEMM_HOME like any search (point it elsewhere to keep them apart).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from pathlib import Path
from typing import Any

from hgemm.agent.llm import LLMProposer
from hgemm.agent.loop import Budget, optimize

from hgemm.core.shape import Shape

DEFAULT_SHAPES = [(4096, 4096, 4096), (1024, 128, 1024), (3000, 5000, 700)]


def _first_records(results: list) -> dict[str, Any]:
    """Each kernel's first record of the run (its quick stage) and its best correct offline speedup."""
    first: dict[str, Any] = {}
    best: dict[str, float] = {}
    for cand, rec in results:
        first.setdefault(cand.hash, rec)
        speedup = rec.speedup_best("offline") if rec.ok else None
        if speedup and speedup > best.get(cand.hash, 0.0):
            best[cand.hash] = speedup
    return {"first": first, "best": best}


def request_rows(shape: tuple[int, int, int], log: list[dict], results: list) -> list[dict[str, Any]]:
    """One row per LLM request with what its candidates did, and the running rates."""
    seen = _first_records(results)
    rows: list[dict[str, Any]] = []
    proposed = compiled = correct = 0
    best_so_far: float | None = None
    for entry in log:
        records = [seen["first"].get(h) for h in entry["candidates"]]
        evaluated = [r for r in records if r is not None]
        n_compiled = sum(bool(r.compiled) for r in evaluated)
        n_correct = sum(bool(r.ok) for r in evaluated)
        speedups = [seen["best"][h] for h in entry["candidates"] if h in seen["best"]]
        proposed += len(evaluated)
        compiled += n_compiled
        correct += n_correct
        if speedups:
            best_so_far = max([best_so_far or 0.0, *speedups])
        rows.append({
            "shape": list(shape), "request": entry["request"], "model": entry["model"], "kind": entry["kind"],
            "turn": entry["turn"], "outcome": entry["outcome"], "candidates": len(entry["candidates"]),
            "evaluated": len(evaluated), "compiled": n_compiled, "correct": n_correct,
            "best_speedup": max(speedups) if speedups else None,
            "compile_rate_so_far": compiled / proposed if proposed else None,
            "correct_rate_so_far": correct / proposed if proposed else None,
            "best_speedup_so_far": best_so_far,
        })  # fmt: skip
    return rows


def by_turn(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Totals per turn depth: 0 is a new prompt, 1 the first follow-up of a lineage, and so on."""
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        t = out.setdefault(str(row["turn"]), {"requests": 0, "evaluated": 0, "compiled": 0, "correct": 0,
                                              "best_speedup": None, "kinds": {}})  # fmt: skip
        t["requests"] += 1
        t["evaluated"] += row["evaluated"]
        t["compiled"] += row["compiled"]
        t["correct"] += row["correct"]
        t["kinds"][row["kind"]] = t["kinds"].get(row["kind"], 0) + 1
        if row["best_speedup"] and (t["best_speedup"] is None or row["best_speedup"] > t["best_speedup"]):
            t["best_speedup"] = row["best_speedup"]
    for t in out.values():
        t["compile_rate"] = t["compiled"] / t["evaluated"] if t["evaluated"] else None
        t["correct_rate"] = t["correct"] / t["evaluated"] if t["evaluated"] else None
    return out


def run(shapes, make_proposer, evaluator, *, archive=None, retriever=None, budget_evals=40, budget_minutes=10.0,
        warmup=4, ncu=False, progress=False) -> dict[str, Any]:  # fmt: skip
    """The loop on each shape; `make_proposer()` gives a fresh LLMProposer per shape."""
    from hgemm.agent.template import TemplateProposer

    rows: list[dict[str, Any]] = []
    shapes_out = []
    for shape in shapes:
        if warmup:
            optimize(Shape(*shape), proposers=[TemplateProposer(seed=0)], evaluator=evaluator, archive=archive,
                     retriever=retriever, budget=Budget(evals=warmup), progress=progress, confirm=0,
                     command="llm-turns-warmup")  # fmt: skip
        proposer: LLMProposer = make_proposer()
        result = optimize(Shape(*shape), proposers=[proposer], evaluator=evaluator, archive=archive,
                          retriever=retriever, budget=Budget(evals=budget_evals, minutes=budget_minutes),
                          progress=progress, ncu=ncu, confirm=0, command="llm-turns")  # fmt: skip
        shape_rows = request_rows(shape, proposer.log, result.results)
        rows.extend(shape_rows)
        best = result.best_record.speedup_best("offline") if result.best_record else None
        shapes_out.append({
            "shape": list(shape), "stop_reason": result.stop_reason, "evals": result.evals,
            "requests": len(proposer.log), "llm_outcomes": result.llm.outcomes,
            "prompt_tokens": result.llm.prompt_tokens, "completion_tokens": result.llm.completion_tokens,
            "best_offline_speedup": best, "best_proposer": result.best.proposer if result.best else None,
            "by_turn": by_turn(shape_rows),
        })  # fmt: skip
    return {"shapes": shapes_out, "requests": rows, "by_turn": by_turn(rows)}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}x"


def write_report(out: Path, report: dict[str, Any]) -> dict[str, Path]:
    """md + JSON + PNG named after the GPU and the date."""
    out.mkdir(parents=True, exist_ok=True)
    gpu = re.sub(r"[^A-Za-z0-9]+", "-", report["gpu"]["name"]).strip("-") or "gpu"
    stem = out / f"llm-turns-{gpu}-{report['date']}"
    paths = {
        "json": stem.with_suffix(".json"),
        "md": stem.with_suffix(".md"),
        "png": stem.with_suffix(".png"),
    }
    paths["json"].write_text(json.dumps(report, indent=1) + "\n")
    lines = [
        f"# The LLM proposer's cycle on {report['gpu']['name']}",
        "",
        f"Date {report['date']}, driver {report['gpu']['driver']}, model **{report['model']}**.",
        "",
        report["model_note"],
        "",
        "## Per turn depth (0: new prompt; 1, 2: follow-ups of one lineage)",
        "",
        "| turn | requests | kinds | evaluated | compile rate | correct rate | best speedup |",
        "|---|---|---|---|---|---|---|",
    ]
    for turn, t in sorted(report["by_turn"].items(), key=lambda kv: int(kv[0])):
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(t["kinds"].items()))
        lines.append(f"| {turn} | {t['requests']} | {kinds} | {t['evaluated']} | {_pct(t['compile_rate'])} | "
                     f"{_pct(t['correct_rate'])} | {_x(t['best_speedup'])} |")  # fmt: skip
    lines += ["", "## Per shape", "", "| shape | requests | evals | stop | best offline speedup | by |",
              "|---|---|---|---|---|---|"]  # fmt: skip
    for s in report["shapes"]:
        lines.append(f"| {'x'.join(map(str, s['shape']))} | {s['requests']} | {s['evals']} | {s['stop_reason']} | "
                     f"{_x(s['best_offline_speedup'])} | {s['best_proposer'] or '-'} |")  # fmt: skip
    lines += ["", "## Per request", "", "| shape | # | kind | turn | outcome | compiled | correct | best so far |",
              "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in report["requests"]:
        lines.append(f"| {'x'.join(map(str, r['shape']))} | {r['request']} | {r['kind']} | {r['turn']} | "
                     f"{r['outcome']} | {r['compiled']}/{r['evaluated']} | {r['correct']}/{r['evaluated']} | "
                     f"{_x(r['best_speedup_so_far'])} |")  # fmt: skip
    lines += [
        "",
        "Speedups are offline medians over the best cuBLAS baseline. Per request and per turn: the best record of"
        " the kernels it produced, of either stage (a quick-stage time has fewer samples, and a kernel the budget"
        " did not promote has only that); per shape: the search's winner at the full stage.",
        "",
        f"Command: `{report['command']}`",
        "",
    ]
    paths["md"].write_text("\n".join(lines))
    _plot(paths["png"], report)
    return paths


def _plot(path: Path, report: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    titles = ("compile rate so far", "correct rate so far", "best speedup so far (x best cuBLAS)")
    keys = ("compile_rate_so_far", "correct_rate_so_far", "best_speedup_so_far")
    for s in report["shapes"]:
        rows = [r for r in report["requests"] if r["shape"] == s["shape"]]
        for ax, key in zip(axes, keys, strict=True):
            points = [(r["request"], r[key]) for r in rows if r[key] is not None]
            if points:
                ax.plot(*zip(*points, strict=True), marker="o", ms=3, label="x".join(map(str, s["shape"])))
    for ax, title in zip(axes, titles, strict=True):
        ax.set_title(title)
        ax.set_xlabel("LLM request")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{report['model']} on {report['gpu']['name']} ({report['date']})")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hgemm.bench.llm_turns", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--shape", type=int, nargs=3, action="append", metavar=("M", "N", "K"))
    ap.add_argument("--budget-evals", type=int, default=40)
    ap.add_argument("--budget-minutes", type=float, default=10.0)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--local-model", type=Path)
    ap.add_argument("--local-adapter", type=Path)
    ap.add_argument("--seed-archive", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-ncu", action="store_true")
    args = ap.parse_args(argv)
    import shutil

    from hgemm.agent.commands import open_evaluator
    from hgemm.archive import Archive
    from hgemm.index import Retriever

    shapes = [tuple(s) for s in args.shape] if args.shape else DEFAULT_SHAPES
    with open_evaluator() as evaluator, Archive() as archive:
        if args.seed_archive:
            archive.import_file(args.seed_archive)
        gpu = evaluator.gpu_info()
        retriever = Retriever(archive, gpu_sm_count=gpu.sm_count)
        if args.local_model:
            from hgemm.agent.llm import tokens
            from hgemm.agent.llm.local import LocalBackend

            backend = LocalBackend(args.local_model, adapter_dir=args.local_adapter)
            tokens.use(tokens.TokenCounter.from_hf(backend.tokenizer, args.local_model.name))
            model, note = backend.model, f"A local Hugging Face model loaded from {args.local_model.name}."
            report = run(shapes, lambda: LLMProposer(backend, seed=args.seed), evaluator, archive=archive,
                         retriever=retriever, budget_evals=args.budget_evals, budget_minutes=args.budget_minutes,
                         warmup=args.warmup, ncu=not args.no_ncu and shutil.which("ncu") is not None)  # fmt: skip
        else:
            report, model, note = _scripted(args, shapes, evaluator, archive, retriever)
    report.update(
        gpu={"name": gpu.name, "driver": gpu.driver, "cc": gpu.cc, "sm_count": gpu.sm_count},
        date=dt.date.today().isoformat(), model=model, model_note=note,
        command="python -m hgemm.bench.llm_turns "
        + " ".join(Path(a).name if Path(a).is_absolute() else a for a in (argv if argv is not None else sys.argv[1:])),
    )  # fmt: skip
    for kind, path in write_report(args.out, report).items():
        print(f"wrote {kind}: {path}")
    return 0


SCRIPTED_NOTE = (
    "Not a language model: the scripted model (`hgemm.testing.scripted_model.ParamTweaker`) answered through the "
    "loopback OpenAI-compatible replay server, changing one `#define` setting of the parent per answer as a "
    "SEARCH/REPLACE edit and undoing a failed change in its repair turns. It shows the proposer's cycle "
    "(prompt, edit, evaluation, feedback, follow-up) on real kernels and a real GPU, not a model's skill."
)


def _scripted(args, shapes, evaluator, archive, retriever):
    from hgemm.agent.llm import OpenAIBackend

    from hgemm.testing.replay_server import ReplayServer, Step
    from hgemm.testing.scripted_model import ParamTweaker

    tweaker = ParamTweaker(seed=args.seed)
    with ReplayServer([], then=Step(respond=tweaker)) as server:

        def make() -> LLMProposer:
            backend = OpenAIBackend(tweaker.name, base_url=server.base_url, timeout_s=60.0, retries=1)
            return LLMProposer(backend, seed=args.seed, near_duplicates="code")

        import shutil

        report = run(shapes, make, evaluator, archive=archive, retriever=retriever, budget_evals=args.budget_evals,
                     budget_minutes=args.budget_minutes, warmup=args.warmup,
                     ncu=not args.no_ncu and shutil.which("ncu") is not None)  # fmt: skip
    return report, tweaker.name, SCRIPTED_NOTE


if __name__ == "__main__":
    sys.exit(main())
