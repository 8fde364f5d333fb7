"""One fine-tune of a small, randomly initialised model on data exported from a GPU-filled archive, with the
proposer's held-out metrics before and after.

Usage: python -m hgemm.bench.finetune_run --archive bench/results/archive-grid100-r10-H100-2026-11-24.jsonl.xz
       --out DIR [--method sft] [--steps 300] [--held-out 6] [--max-new-tokens 3072]

- The archive file is imported into a fresh archive under DIR/work (the state root is DIR/work for the run).
- Data: `hgemm finetune export` of the chosen format (default sft), split by shape; the card is kept in DIR.
- Model: no pretrained weights can be had, so the model is randomly initialised from a public architecture,
  SmolLM-135M's Llama configuration (576 wide, 30 layers, 9 heads, 3 key-value heads, 1536 MLP), with a
  byte-level BPE tokenizer trained on the exported training rows; the report says so.
- Before and after: `finetune.compare.held_out` on the validation shapes (at most --held-out), greedy, the first
  candidate evaluated at the full stage by the GPU evaluator; compile rate, correct rate, mean speedup.
- Writes DIR/finetune-<GPU>-<date>.json and .md (GPU name, driver, date, data size, steps, time, losses,
  before/after metrics) and a loss plot; `bench/results/` keeps the latest such report.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import time
from pathlib import Path
from typing import Any

SMOLLM_135M = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                   num_key_value_heads=3, rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True)  # fmt: skip


def build_base(rows: list[dict], path: Path, vocab: int, context: int) -> dict[str, Any]:
    """A randomly initialised Llama of SmolLM-135M's shape with a tokenizer trained on `rows`; its facts."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    def texts():
        for r in rows:
            yield r["system"] + "\n\n" + r["user"]
            for key in ("completion", "chosen", "rejected"):
                if key in r:
                    yield r[key]

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<pad>", "<eos>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # fmt: skip
    tok.train_from_iterator(texts(), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>")
    fast.save_pretrained(path)
    config = LlamaConfig(vocab_size=fast.vocab_size, max_position_embeddings=context, pad_token_id=fast.pad_token_id,
                         bos_token_id=fast.eos_token_id, eos_token_id=fast.eos_token_id, **SMOLLM_135M)  # fmt: skip
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.save_pretrained(path)
    answers = sorted(len(fast(r["completion"])["input_ids"]) for r in rows if "completion" in r)
    return {"architecture": "SmolLM-135M (Llama) configuration, randomly initialised", "parameters":
            sum(p.numel() for p in model.parameters()), "vocab": fast.vocab_size, "context": context,
            "answer_tokens_median": answers[len(answers) // 2] if answers else None, **SMOLLM_135M}  # fmt: skip


def outcomes(metrics: dict[str, Any]) -> str:
    counts: dict[str, int] = {}
    for e in metrics["per_shape"]:
        counts[e["reply"]] = counts.get(e["reply"], 0) + 1
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"


def markdown(report: dict[str, Any]) -> str:
    def row(name: str, m: dict) -> str:
        return f"| {name} | {m['shapes']} | {m['compile_rate']:.2f} | {m['correct_rate']:.2f} | {m['speedup']:.3f} |"

    t, c = report["train"], report["card"]
    return "\n".join(
        [
            f"# Fine-tune of a randomly initialised small model ({report['gpu']['name']}, {report['date']})",
            "",
            f"GPU {report['gpu']['name']}, driver {report['gpu']['driver']}. Archive `{report['archive']}`.",
            f"Model: {report['model']['architecture']} ({report['model']['parameters'] / 1e6:.0f} M parameters, "
            f"tokenizer trained on the export, vocabulary {report['model']['vocab']}). No pretrained weights were used.",
            f"Data ({t['method']}): {c['train']['rows']} train rows on {len(c['train']['shapes'])} shapes, "
            f"{c['val']['rows']} validation rows on {len(c['val']['shapes'])} shapes; data hash `{c['data_hash']}`.",
            f"Training: LoRA r={t['lora_r']}, {t['steps']} steps of {t['batch']} rows, max length {t['max_length']}, "
            f"{t['seconds']:.0f} s; train loss {t['train_loss']}, validation loss {t['eval_loss']}.",
            "",
            "Held-out shapes, first candidate (greedy), evaluated at the full stage:",
            "",
            "| model | shapes | compile rate | correct rate | mean speedup |",
            "|---|---|---|---|---|",
            row("before (random init)", report["before"]),
            row("after (LoRA)", report["after"]),
            "",
            f"Replies (first candidate per shape): before {outcomes(report['before'])}; after "
            f"{outcomes(report['after'])}. At most {report['options']['max_new_tokens']} new tokens per reply"
            + (f"; the training answers' median is {n} tokens" if (n := report["model"].get("answer_tokens_median"))
               else "") + ".",
            "",
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--archive", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--method", default="sft", choices=("sft", "dpo"))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--lora-r", type=int, default=16)
    ap.add_argument("--learning-rate", type=float, default=1e-3)
    ap.add_argument("--max-length", type=int, default=4096)
    ap.add_argument("--exemplars", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--held-out", type=int, default=6)
    ap.add_argument("--max-new-tokens", type=int, default=3072)
    args = ap.parse_args()
    if not args.archive.is_file():
        raise SystemExit(f"finetune_run: archive {args.archive} does not exist")
    out = args.out.resolve()
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    os.environ["HGEMM_HOME"] = str(work)  # before anything reads the state root

    from hgemm.agent.commands import open_evaluator
    from hgemm.agent.finetune import compare, data, train
    from hgemm.agent.llm.local import LocalBackend
    from hgemm.archive import Archive

    from hgemm.core.shape import Shape

    started = time.perf_counter()
    with Archive(work / "archive.db") as archive, open_evaluator() as evaluator:
        gpu = evaluator.gpu_info()
        archive.import_file(args.archive)
        opts = data.Options(fmt=args.method, exemplars=args.exemplars)
        card = data.export(archive, out / f"{args.method}.jsonl", opts, progress=True)
        rows = data.read(data.paths(out / f"{args.method}.jsonl")["train.jsonl"])
        base = work / "base-model"
        model = build_base(rows, base, args.vocab, args.max_length + args.max_new_tokens)
        shapes = [Shape(*map(int, s.split("x"))) for s in card["val"]["shapes"][: args.held_out]]
        gen = dict(temperature=0.0, max_tokens=args.max_new_tokens)
        before = compare.held_out(LocalBackend(base, **gen), shapes, evaluator, archive, progress=True)
        figures = train.run(base, out / f"{args.method}.jsonl", args.method, out / "adapter", lora_r=args.lora_r,
                            steps=args.steps, batch=args.batch, learning_rate=args.learning_rate,
                            max_length=args.max_length)  # fmt: skip
        after = compare.held_out(LocalBackend(base, adapter_dir=out / "adapter", **gen), shapes, evaluator, archive,
                                 progress=True)  # fmt: skip
    date = dt.date.today().isoformat()
    report = {"date": date, "gpu": {"name": gpu.name, "driver": gpu.driver, "cc": gpu.cc}, "archive": args.archive.name,
              "model": model, "card": card, "train": figures, "before": before, "after": after,
              "seconds": round(time.perf_counter() - started, 1),
              "options": {k: v.name if isinstance(v, Path) else v for k, v in vars(args).items()}}  # fmt: skip
    for key in ("base_model", "data"):  # paths inside the output folder, relative to it
        figures[key] = os.path.relpath(figures[key], out)
    name = f"finetune-{re.sub(r'[^A-Za-z0-9]+', '-', gpu.name).strip('-')}-{date}"
    (out / f"{name}.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / f"{name}.md").write_text(markdown(report))
    if figures["losses"]:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot(range(1, len(figures["losses"]) + 1), figures["losses"])
        ax.set_xlabel(f"logging step (every {max(1, figures['steps'] // 20)} optimizer steps)")
        ax.set_ylabel("training loss")
        ax.set_title(f"LoRA {args.method}, {gpu.name}")
        fig.tight_layout()
        fig.savefig(out / f"{name}.png", dpi=120)
    print(f"wrote {out / (name + '.md')}, .json")


if __name__ == "__main__":
    main()
