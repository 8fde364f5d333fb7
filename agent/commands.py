"""`hgemm optimize` and `hgemm prompt`: argument parsing and wiring, no search logic.

- `optimize` wires the proposers, the GPU evaluator, the archive and the index into `agent.loop.optimize`,
  then prints the best kernel's speedup over every baseline in both modes (`--out` writes it).
- `prompt` prints the prompt the LLM proposer would send now, from the archive alone (no GPU needed).
- Settings come from `hgemm.toml` (`agent.config`); options override them.
- Heavy modules (evaluator, archive, index, LLM backends) are imported inside the commands.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import typer
from hgemm.agent.config import Config, gpu_preset, load_config, preset_for_name
from hgemm.agent.loop import validate_objective
from hgemm.agent.stores import ArchiveStore

from hgemm.core.errors import BadInput
from hgemm.core.shape import Shape

PROPOSERS = ("template", "llm", "llm+template")


def open_evaluator() -> Any:
    """The GPU evaluator (NoGpu when there is none). Orchestration tests replace this function."""
    from hgemm.evaluator.local import LocalEvaluator

    return LocalEvaluator()


def make_backend(config: Config, model: str | None = None) -> Any:
    """The backend of `model` (default: llm.model), or the local model when one is configured."""
    llm = config.llm
    if llm.local_model:
        from hgemm.agent.llm import tokens
        from hgemm.agent.llm.local import LocalBackend

        backend = LocalBackend(
            llm.local_model,
            adapter_dir=llm.local_adapter or None,
            temperature=llm.temperature,
            max_tokens=llm.max_tokens,
        )
        tokens.use(tokens.TokenCounter.from_hf(backend.tokenizer, Path(llm.local_model).name))
        return backend
    from hgemm.agent.llm import OpenAIBackend

    return OpenAIBackend(
        model or llm.model,
        base_url=llm.base_url or None,
        api_key_env=llm.api_key_env,
        temperature=llm.temperature,
        max_tokens=llm.max_tokens,
        timeout_s=llm.timeout_s,
        retries=llm.retries,
        backoff_s=llm.backoff_s,
    )


def make_proposers(kind: str, config: Config) -> list[Any]:
    """The proposers `--proposer kind` names, LLM first (its latency is what the template hides)."""
    if kind not in PROPOSERS:
        raise BadInput(f"--proposer must be one of {', '.join(PROPOSERS)}, not {kind!r}")
    proposers: list[Any] = []
    if kind.startswith("llm"):
        from hgemm.agent.llm import LLMProposer

        llm = config.llm
        for model in llm.models or [llm.model]:
            if not llm.local_model and llm.price(model) is None:
                if config.budget.llm_usd is not None and not llm.base_url:
                    raise BadInput(
                        f"no price known for model {model!r}: add it under [llm.prices] in hgemm.toml"
                    )
        if llm.near_duplicates not in ("code", "layout", "off"):
            raise BadInput(f"llm.near_duplicates must be code, layout or off, not {llm.near_duplicates!r}")
        models = [] if llm.local_model else [m for m in llm.models if m] or []
        backends = [make_backend(config, model) for model in models] if models else [make_backend(config)]
        proposers.append(
            LLMProposer(
                backends,
                prices=llm.price,
                samples=llm.samples,
                exemplars=llm.exemplars,
                failures=llm.failures,
                seed=config.search.seed,
                prompt_tokens=llm.prompt_tokens or None,
                repair_turns=llm.repair_turns,
                improve_turns=llm.improve_turns,
                near_duplicates=llm.near_duplicates,
            )
        )
    if kind.endswith("template"):
        from hgemm.agent.template import TemplateProposer

        search = config.search
        proposers.append(TemplateProposer(seed=search.seed, refresh=search.refresh, refresh_within=search.refresh_within))
    return proposers


def _apply_options(config: Config, **options: Any) -> Config:
    """Command-line options (those given) override the config file."""
    targets = {
        "llm_model": ("llm", "model"),
        "llm_base_url": ("llm", "base_url"),
        "local_model": ("llm", "local_model"),
        "local_adapter": ("llm", "local_adapter"),
        "samples": ("llm", "samples"),
        "temperature": ("llm", "temperature"),
        "budget_evals": ("budget", "evals"),
        "budget_minutes": ("budget", "minutes"),
        "max_llm_usd": ("budget", "llm_usd"),
        "max_llm_tokens": ("budget", "llm_tokens"),
        "batch": ("search", "batch"),
        "finalists": ("search", "finalists"),
        "seed": ("search", "seed"),
        "quick_server": ("search", "quick_server"),
        "confirm": ("search", "confirm"),
        "confirm_reps": ("search", "confirm_reps"),
    }
    for option, value in options.items():
        if value is not None:
            section, key = targets[option]
            setattr(getattr(config, section), key, value)
    if "," in config.llm.model:  # --llm-model a,b: several models, chosen by a bandit
        config.llm.models = [m.strip() for m in config.llm.model.split(",") if m.strip()]
        config.llm.model = config.llm.models[0] if config.llm.models else ""
    return config


def model_yield(result: Any) -> dict[str, dict[str, Any]]:
    """Per LLM model: its calls, tokens and cost, the kernels it proposed that were evaluated, how many were
    correct, and its best offline speedup over the best baseline."""
    out: dict[str, dict[str, Any]] = {}
    for model, usage in result.llm.per_model.items():
        out[model] = {**usage, "cost_usd": round(usage["cost_usd"], 6)}
        out[model].update(kernels=0, correct=0, best_speedup=None)
    seen: set[tuple[str, str]] = set()
    for cand, rec in result.results:
        if not cand.proposer.startswith("llm:"):
            continue
        row = out.setdefault(cand.proposer[4:], {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                                  "cost_usd": 0.0, "kernels": 0, "correct": 0, "best_speedup": None})  # fmt: skip
        if (cand.hash, "k") not in seen:
            seen.add((cand.hash, "k"))
            row["kernels"] += 1
        if rec.ok and (cand.hash, "ok") not in seen:
            seen.add((cand.hash, "ok"))
            row["correct"] += 1
        speedup = rec.speedup_best("offline") if rec.ok else None
        if speedup and (row["best_speedup"] is None or speedup > row["best_speedup"]):
            row["best_speedup"] = round(speedup, 4)
    return out


def measured_text(result: Any) -> str:
    """How the reported figures were measured."""
    if result.confirmation:
        return "confirmed: " + result.confirmation["how"]
    return "unconfirmed: the best of the search's own measurements"


def summary(result: Any) -> dict[str, Any]:
    """The run's outcome as JSON-ready data."""
    rec = result.best_record
    return {
        "shape": [result.M, result.N, result.K],
        "stop_reason": result.stop_reason,
        "run_id": result.run_id,
        "seconds": round(result.seconds, 2),
        "evals": result.evals,
        "confirm_evals": result.confirm_evals,
        "measured": measured_text(result),
        "confirmation": result.confirmation,
        "quick": result.quick,
        "full": result.full,
        "correct": result.correct,
        "failed": result.failed,
        "proposed": result.proposed,
        "duplicates": result.duplicates,
        "llm": {
            "calls": result.llm.calls,
            "prompt_tokens": result.llm.prompt_tokens,
            "completion_tokens": result.llm.completion_tokens,
            "cost_usd": round(result.llm.cost_usd, 6),
            "outcomes": result.llm.outcomes,
            "models": model_yield(result),
        },
        "best": None
        if rec is None
        else {
            "kernel_hash": result.best.hash,
            "proposer": result.best.proposer,
            "family": result.best.family,
            "parents": result.best.parents,
            "median_us": {m: r.candidate.median_us for m, r in rec.modes.items() if r.candidate},
            "speedup": {m: r.speedup for m, r in rec.modes.items()},
            "speedup_best": {m: r.speedup_best for m, r in rec.modes.items()},
        },
    }


def print_result(result: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    llm = result.llm
    console.print(
        f"{result.M}x{result.N}x{result.K}: stopped on {result.stop_reason} after {result.evals} evaluations "
        f"({result.quick} quick, {result.full} full, {result.failed} failed) in {result.seconds:.0f} s"
    )
    if llm.calls:
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(llm.outcomes.items()))
        console.print(
            f"LLM: {llm.calls} calls, {llm.prompt_tokens} + {llm.completion_tokens} tokens, "
            f"${llm.cost_usd:.4f} ({outcomes})"
        )
        for model, row in model_yield(result).items():
            best = f"{row['best_speedup']:.3f}x" if row["best_speedup"] else "none"
            console.print(
                f"  {model}: {row['calls']} calls, {row['prompt_tokens']} + {row['completion_tokens']} tokens, "
                f"${row['cost_usd']:.4f}; {row['kernels']} kernels, {row['correct']} correct, best {best}"
            )
    if result.best is None:
        console.print("No candidate passed the full stage.")
        return
    rec = result.best_record
    console.print(
        f"Best kernel {result.best.hash} from {result.best.proposer}"
        + (f" ({result.best.family})" if result.best.family else "")
    )
    console.print(f"Figures {measured_text(result)}.")
    table = Table("baseline", *[f"{m} us" for m in rec.modes], *[f"{m} speedup" for m in rec.modes])
    names = sorted({b for r in rec.modes.values() for b in r.baselines})
    cand = ["kernel"] + [f"{r.candidate.median_us:.2f}" for r in rec.modes.values()] + ["" for _ in rec.modes]
    table.add_row(*cand)
    for b in names:
        times = [f"{r.baselines[b].median_us:.2f}" if b in r.baselines else "" for r in rec.modes.values()]
        speed = [f"{r.speedup[b]:.3f}x" if b in r.speedup else "" for r in rec.modes.values()]
        table.add_row(b, *times, *speed)
    console.print(table)


def optimize_command(
    M: int = typer.Argument(..., help="rows of A and C"),
    N: int = typer.Argument(..., help="columns of B and C"),
    K: int = typer.Argument(..., help="columns of A, rows of B"),
    proposer: str = typer.Option("template", help="template, llm or llm+template"),
    llm_model: str | None = typer.Option(
        None,
        help="model name (default from hgemm.toml); several, comma-separated, are chosen by a bandit on "
        "improvement per dollar",
    ),
    llm_base_url: str | None = typer.Option(
        None, help="an OpenAI-compatible server, e.g. http://localhost:8000/v1"
    ),
    local_model: str | None = typer.Option(None, help="a Hugging Face model directory to run locally"),
    local_adapter: str | None = typer.Option(None, help="a LoRA adapter directory for --local-model"),
    samples: int | None = typer.Option(None, help="LLM completions per prompt"),
    temperature: float | None = typer.Option(None, help="LLM sampling temperature"),
    budget_evals: int | None = typer.Option(None, help="stop after this many evaluations"),
    budget_minutes: float | None = typer.Option(None, help="stop after this many minutes"),
    max_llm_usd: float | None = typer.Option(None, help="stop when LLM calls have cost this much"),
    max_llm_tokens: int | None = typer.Option(None, help="stop when LLM calls have used this many tokens"),
    batch: int | None = typer.Option(None, help="candidates per quick-stage round"),
    finalists: int | None = typer.Option(None, help="quick-stage winners per round re-evaluated in full"),
    seed: int | None = typer.Option(None, help="random seed for proposers"),
    quick_server: bool | None = typer.Option(
        None, "--quick-server/--no-quick-server", help="time server mode at the quick stage too; promote by the objective"
    ),
    confirm: int | None = typer.Option(
        None, help="after the search, measure this many best kernels again and crown the winner by those figures "
        "(0: unconfirmed figures; not counted in --budget-evals)"),
    confirm_reps: int | None = typer.Option(None, help="fresh evaluations of each kernel --confirm measures"),
    out: Path | None = typer.Option(None, help="write the best kernel to this .cu file"),
    json_out: Path | None = typer.Option(None, "--json", help="write a JSON summary of the run to this file"),
    ncu: bool | None = typer.Option(
        None, "--ncu/--no-ncu", help="Nsight Compute metrics for every finalist (default: when ncu is on PATH)"
    ),
    sanitize: bool = typer.Option(False, help="run compute-sanitizer on the winner (the next fastest if it fails)"),
    objective: str = typer.Option(
        "both", help="pick the winner by: both (geomean of offline and server speedups), offline, server"
    ),
    config_file: Path | None = typer.Option(None, "--config", help="hgemm.toml to read"),
    quiet: bool = typer.Option(False, help="no progress display"),
    finetune_every: int | None = typer.Option(
        None, "--finetune-every", help="fine-tune --local-model in a separate process after every N new archive bests"
    ),
) -> None:
    """Search for an HGEMM kernel faster than cuBLAS on M×N×K; every attempt goes to the archive."""
    shape = Shape(M, N, K)  # validated here, once
    validate_objective(objective)
    config = _apply_options(
        load_config(config_file),
        llm_model=llm_model,
        llm_base_url=llm_base_url,
        local_model=local_model,
        local_adapter=local_adapter,
        samples=samples,
        temperature=temperature,
        budget_evals=budget_evals,
        budget_minutes=budget_minutes,
        max_llm_usd=max_llm_usd,
        max_llm_tokens=max_llm_tokens,
        batch=batch,
        finalists=finalists,
        seed=seed,
        quick_server=quick_server,
        confirm=confirm,
        confirm_reps=confirm_reps,
    )
    if config.search.confirm < 0 or config.search.confirm_reps < 1:
        raise BadInput("--confirm must be 0 or more and --confirm-reps 1 or more")
    if out is not None and out.exists() and out.is_dir():
        raise BadInput(f"--out {out} is a directory")
    from hgemm.agent.finetune.periodic import check_after, trigger_for

    trigger = trigger_for(finetune_every, config.llm.local_model)
    proposers = make_proposers(proposer, config)
    if ncu is None:
        ncu = shutil.which("ncu") is not None
    result = run_optimize(
        shape, proposers, config, proposer_kind=proposer, ncu=ncu, sanitize=sanitize, progress=not quiet,
        objective=objective,
    )
    check_after(trigger)
    print_result(result)
    if out is not None and result.best is not None:
        out.write_text(result.best.source)
        typer.echo(f"wrote {out}")
    if json_out is not None:
        json_out.write_text(json.dumps(summary(result), indent=1) + "\n")


def run_optimize(
    shape: Shape,
    proposers: list[Any],
    config: Config,
    *,
    proposer_kind: str = "",
    ncu: bool = False,
    sanitize: bool = False,
    progress: bool = True,
    objective: str = "both",
) -> Any:
    """Open evaluator, archive and index, and run the loop."""
    from hgemm.agent.loop import Budget, optimize
    from hgemm.archive import Archive
    from hgemm.index import Retriever

    b = config.budget
    budget = Budget(evals=b.evals, minutes=b.minutes, llm_usd=b.llm_usd, llm_tokens=b.llm_tokens)
    recorded = {
        "proposer": proposer_kind,
        "model": config.llm.local_model or config.llm.model if proposer_kind.startswith("llm") else None,
        "budget": vars(b),
        "search": vars(config.search),
    }
    with open_evaluator() as evaluator, Archive() as archive:
        retriever = Retriever(archive, gpu_sm_count=evaluator.gpu_info().sm_count)
        return optimize(
            shape,
            proposers=proposers,
            evaluator=evaluator,
            archive=archive,
            retriever=retriever,
            budget=budget,
            progress=progress,
            finalists=config.search.finalists,
            batch=config.search.batch,
            patience=config.search.patience,
            ncu=ncu,
            sanitize=sanitize,
            objective=objective,
            config=recorded,
            quick_server=config.search.quick_server,
            confirm=config.search.confirm,
            confirm_reps=config.search.confirm_reps,
        )


def prompt_command(
    M: int = typer.Argument(..., help="rows of A and C"),
    N: int = typer.Argument(..., help="columns of B and C"),
    K: int = typer.Argument(..., help="columns of A, rows of B"),
    gpu: str | None = typer.Option(
        None, help="GPU preset when the archive has no record: h100-sxm, h100-pcie, h200, a100"
    ),
    seed: int = typer.Option(0, help="random seed for the parent and exemplar draw"),
    exemplars: int | None = typer.Option(None, help="scored variants to show"),
    budget: int | None = typer.Option(
        None, help="token budget of the prompt (default from hgemm.toml; 0: none)"
    ),
    system: bool = typer.Option(True, help="print the system prompt too"),
    config_file: Path | None = typer.Option(None, "--config", help="hgemm.toml to read"),
) -> None:
    """Print the prompt the LLM proposer would send now for M×N×K (no GPU needed)."""
    shape = Shape(M, N, K)
    if exemplars is not None and exemplars < 0:
        raise BadInput(f"--exemplars must be 0 or more, got {exemplars}")
    config = load_config(config_file)
    from hgemm.agent.llm.prompt import render_prompt
    from hgemm.agent.proposer import ProposalContext
    from hgemm.archive import Archive
    from hgemm.index import Retriever

    with Archive() as archive:
        name = _latest_gpu_name(archive, shape)
        info = gpu_preset(gpu or preset_for_name(name or ""), name if not gpu else None)
        retriever = Retriever(archive, gpu_sm_count=info.sm_count)
        ctx = ProposalContext(shape, info, archive=archive, retriever=retriever)
        prompt = render_prompt(
            ctx,
            budget_tokens=(budget if budget is not None else config.llm.prompt_tokens) or None,
            rng=random.Random(seed),
            variants=exemplars or config.llm.exemplars,
            failures=config.llm.failures,
        )
    if system:
        typer.echo("=== system ===\n" + prompt.system + "\n=== user ===")
    typer.echo(prompt.user)
    cap = f"budget {prompt.budget}" if prompt.budget else "no budget"
    over = " - OVER BUDGET: the parent alone does not fit" if prompt.over_budget else ""
    typer.echo(
        f"=== {prompt.tokens} tokens ({prompt.tokenizer}; {cap}; {len(prompt.exemplar_hashes)} variants shown, "
        f"{prompt.left_out} left out){over} ===",
        err=True,
    )


def _latest_gpu_name(archive: ArchiveStore, shape: Shape) -> str | None:
    """The GPU of the newest record on this shape, else of the newest record at all."""
    rows = archive.attempts(shape, limit=1)
    if rows:
        return rows[0]["gpu"]
    rows = archive.execute("SELECT gpu FROM records ORDER BY id DESC LIMIT 1")
    return rows[0]["gpu"] if rows else None


def register(app: typer.Typer) -> None:
    app.command("optimize")(optimize_command)
    app.command("prompt")(prompt_command)
