"""`hgemm finetune export|run|cycle|list`: argument parsing and wiring only (see the sibling modules)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from hgemm.core.errors import BadInput

app = typer.Typer(help="Fine-tune data from the archive and LoRA fine-tunes of the local proposer model.",
                  no_args_is_help=True)  # fmt: skip


def _archive(path: Path | None):
    from hgemm.archive import Archive

    if path is not None and not path.is_file():
        raise BadInput(f"archive {path} does not exist")
    return Archive(path)


@app.command("export")
def export_command(
    out: Path = typer.Option(
        ..., "--out", help="NAME.jsonl: writes NAME.train.jsonl, NAME.val.jsonl and NAME.card.{json,md}"
    ),
    fmt: str = typer.Option("sft", "--format", help="sft, dpo or reward"),
    min_speedup: float | None = typer.Option(
        None,
        "--min-speedup",
        help="only shapes whose best kernel is at least this fast (offline, vs best baseline)",
    ),
    gpu: str | None = typer.Option(None, "--gpu", help="only this GPU's records (as the archive names it)"),
    val_fraction: float = typer.Option(
        0.15, "--val-fraction", help="share of shapes held out for validation"
    ),
    exemplars: int = typer.Option(4, help="scored kernels each prompt shows"),
    pairs: int = typer.Option(2, help="dpo: rows per shape and GPU"),
    per_shape: int = typer.Option(6, "--per-shape", help="reward: rows per shape and GPU"),
    archive: Path | None = typer.Option(None, "--archive", help="archive .db file (default: $HGEMM_HOME's)"),
    quiet: bool = typer.Option(False, help="no progress display"),
) -> None:
    """Write training data from the archive's kernels, split by shape, with a dataset card."""
    from hgemm.agent.finetune import data

    opts = data.Options(fmt=fmt, min_speedup=min_speedup, gpu=gpu, val_fraction=val_fraction, exemplars=exemplars,
                        pairs=pairs, per_shape=per_shape)  # fmt: skip
    if exemplars < 0 or pairs < 1 or per_shape < 1:
        raise BadInput("--exemplars must be 0 or more, --pairs and --per-shape 1 or more")
    with _archive(archive) as arc:
        card = data.export(arc, out, opts, progress=not quiet)
    where = data.paths(out)
    typer.echo(f"{card['train']['rows']} train rows ({len(card['train']['shapes'])} shapes), "
               f"{card['val']['rows']} validation rows ({len(card['val']['shapes'])} shapes); data hash {card['data_hash']}")  # fmt: skip
    typer.echo("wrote " + ", ".join(str(p) for p in where.values()))


@app.command("run")
def run_command(
    base_model: Path = typer.Option(
        ..., "--base-model", help="a Hugging Face model directory (nothing is downloaded)"
    ),
    data: Path = typer.Option(..., "--data", help="an export's NAME.jsonl"),
    out: Path = typer.Option(
        ..., "--out", help="directory for the LoRA adapter (what --local-adapter loads)"
    ),
    method: str = typer.Option("sft", "--method", help="sft or dpo"),
    lora_r: int = typer.Option(16, "--lora-r", help="LoRA rank"),
    lora_alpha: int | None = typer.Option(None, "--lora-alpha", help="LoRA alpha (default 2 x rank)"),
    steps: int = typer.Option(200, help="optimizer steps"),
    batch: int = typer.Option(4, help="rows per step"),
    learning_rate: float = typer.Option(2e-4, "--learning-rate"),
    max_length: int | None = typer.Option(
        None, "--max-length", help="tokens per row (default: the model's context)"
    ),
    beta: float = typer.Option(0.1, help="dpo: strength of the preference"),
    seed: int = typer.Option(0),
    cpu: bool = typer.Option(False, help="train on the CPU even where a GPU is present"),
    quiet: bool = typer.Option(False, help="no progress display"),
) -> None:
    """Fine-tune a local base model with LoRA (TRL + PEFT) on exported data."""
    from hgemm.agent.finetune import train

    figures = train.run(base_model, data, method, out, lora_r=lora_r, lora_alpha=lora_alpha, steps=steps,
                        batch=batch, learning_rate=learning_rate, max_length=max_length, beta=beta, seed=seed,
                        device="cpu" if cpu else None, progress=not quiet)  # fmt: skip
    typer.echo(f"{figures['method']}: {figures['steps']} steps in {figures['seconds']} s, train loss "
               f"{figures['train_loss']}, validation loss {figures['eval_loss']}; adapter in {out}")  # fmt: skip


@app.command("cycle")
def cycle_command(
    base_model: Path = typer.Option(..., "--base-model", help="a Hugging Face model directory"),
    method: str = typer.Option("sft", "--method", help="sft or dpo"),
    steps: int = typer.Option(200, help="optimizer steps"),
    lora_r: int = typer.Option(16, "--lora-r", help="LoRA rank"),
    max_length: int | None = typer.Option(
        None, "--max-length", help="tokens per row (default: the model's context)"
    ),
    held_out: int = typer.Option(8, "--held-out", help="validation shapes the adapters are measured on"),
    max_new_tokens: int = typer.Option(4096, "--max-new-tokens", help="tokens each held-out answer may take"),
    evaluator: str = typer.Option("hgemm.agent.commands:open_evaluator", hidden=True),
    min_new_bests: int = typer.Option(
        0, "--min-new-bests", help="do nothing unless this many new archive bests wait"
    ),
    archive: Path | None = typer.Option(None, "--archive", help="archive .db file (default: $HGEMM_HOME's)"),
    cpu: bool = typer.Option(False, help="train and generate on the CPU"),
    quiet: bool = typer.Option(False, help="no progress display"),
) -> None:
    """Export, fine-tune, compare with the current adapter on held-out shapes, adopt only if better."""
    from hgemm.agent.finetune import periodic

    factory = periodic.load_factory(evaluator)
    with _archive(archive) as arc, factory() as ev:
        row = periodic.cycle(arc, base_model, ev, method=method, steps=steps, lora_r=lora_r, max_length=max_length,
                             held_out_shapes=held_out, max_new_tokens=max_new_tokens, min_new_bests=min_new_bests,
                             device="cpu" if cpu else None, progress=not quiet)  # fmt: skip
    if row is None:
        typer.echo("another fine-tune cycle is running, or too few new bests wait; nothing done")
        return
    m = row["metrics"]
    typer.echo(
        f"fine-tune {row['id']}: {row['status']}; new {_brief(m['new'])}, current {_brief(m['current'])}"
    )


def _brief(m: dict) -> str:
    return f"compile {m['compile_rate']:.2f} correct {m['correct_rate']:.2f} speedup {m['speedup']:.3f}"


@app.command("list")
def list_command(
    archive: Path | None = typer.Option(None, "--archive", help="archive .db file (default: $HGEMM_HOME's)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """The archive's fine-tunes, oldest first."""
    from hgemm.agent.finetune import periodic

    with _archive(archive) as arc:
        rows = periodic.finetunes(arc)
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
        return
    for r in rows:
        m = r["metrics"] or {}
        tail = f"new {_brief(m['new'])}, current {_brief(m['current'])}" if "new" in m else m.get("error", "")
        typer.echo(f"{r['id']} {r['started']} {r['method']} {r['status']} data {r['data_hash']} {tail}")


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="finetune")
