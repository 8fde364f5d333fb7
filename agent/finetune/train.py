"""Fine-tunes of a local base model with TRL and PEFT (LoRA): `run(base_model, data, method, out, ...)`.

- `data` is an export's NAME.jsonl (its NAME.train.jsonl and NAME.val.jsonl are read); sft needs sft rows,
  dpo needs dpo rows.
- The prompt is the text the local proposer feeds the model (`prompt_text`: the tokenizer's chat template
  when it has one, else system and user joined), cut from its start so that prompt and answer fit
  `max_length` tokens (the local proposer also keeps a long prompt's end).
- The base model loads from its directory only (nothing is downloaded); the adapter and `finetune.json`
  (method, base model, data hash, steps, losses, seconds) are written to `out`, which `--local-adapter` loads.
- A missing library is one line naming the extra to install (`pip install 'hgemm[finetune]'`).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from hgemm.core.errors import BadInput, HgemmError

METHODS = ("sft", "dpo")


class FinetuneError(HgemmError):
    """A fine-tune that could not run (missing library, unloadable model)."""


def prompt_text(tokenizer: Any, system: str, user: str) -> str:
    """The prompt as the local proposer renders it for this tokenizer (see `agent.llm.local`)."""
    if getattr(tokenizer, "chat_template", None):
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return system + "\n\n" + user + "\n\n"


def fit(tokenizer: Any, prompt: str, answers: list[str], max_length: int) -> str:
    """The prompt cut from its start so that it and the longest answer fit max_length tokens (at least a
    quarter of max_length stays for the prompt; an answer longer than the rest is cut by the trainer)."""
    longest = max(len(tokenizer(a, add_special_tokens=False)["input_ids"]) for a in answers)
    room = max(max_length // 4, max_length - longest - 2)
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    return prompt if len(ids) <= room else tokenizer.decode(ids[-room:])


def _imports() -> Any:
    try:
        import datasets
        import peft
        import trl
    except ImportError as e:
        raise FinetuneError(
            f"fine-tuning needs trl, peft and datasets: pip install 'hgemm[finetune]' ({e.name} is missing)"
        ) from e
    return datasets, peft, trl


def load_base(base_model: Path, device: str | None = None) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not Path(base_model).is_dir():
        raise BadInput(f"base model directory {base_model} does not exist")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(base_model), local_files_only=True)
        dtype = (
            torch.bfloat16
            if (device or ("cuda" if torch.cuda.is_available() else "cpu")) == "cuda"
            else torch.float32
        )
        model = AutoModelForCausalLM.from_pretrained(str(base_model), local_files_only=True, dtype=dtype)
    except (OSError, ValueError) as e:
        raise FinetuneError(f"cannot load a model from {base_model}: {str(e).splitlines()[0]}") from e
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def context_length(model: Any) -> int:
    for key in ("max_position_embeddings", "n_positions", "seq_length"):
        value = getattr(model.config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return 4096


def examples(rows: list[dict], method: str, tokenizer: Any, max_length: int) -> list[dict[str, str]]:
    """TRL's prompt-completion (sft) or preference (dpo) rows from exported rows."""
    need = ("completion",) if method == "sft" else ("chosen", "rejected")
    out = []
    for row in rows:
        if not all(isinstance(row.get(k), str) for k in ("system", "user", *need)):
            raise BadInput(f"a {method} fine-tune needs rows with system, user and {' and '.join(need)}: "
                           f"export with --format {method}")  # fmt: skip
        answers = [row[k] for k in need]
        prompt = fit(tokenizer, prompt_text(tokenizer, row["system"], row["user"]), answers, max_length)
        out.append({"prompt": prompt, **{k: row[k] for k in need}})
    return out


def run(
    base_model: Path,
    data: Path,
    method: str,
    out: Path,
    *,
    lora_r: int = 16,
    lora_alpha: int | None = None,
    lora_dropout: float = 0.05,
    steps: int = 200,
    batch: int = 4,
    learning_rate: float = 2e-4,
    max_length: int | None = None,
    beta: float = 0.1,
    seed: int = 0,
    device: str | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Fine-tune `base_model` on `data` with LoRA; write the adapter and finetune.json to `out`; return the
    figures written."""
    from hgemm.agent.finetune import data as ftdata

    if method not in METHODS:
        raise BadInput(f"--method must be one of {', '.join(METHODS)}, not {method!r}")
    if lora_r < 1 or steps < 1 or batch < 1 or learning_rate <= 0:
        raise BadInput("--lora-r, --steps and --batch must be 1 or more and --learning-rate positive")
    parts = ftdata.paths(Path(data))
    train_rows = ftdata.read(parts["train.jsonl"])
    val_rows = ftdata.read(parts["val.jsonl"]) if parts["val.jsonl"].is_file() else []
    if not train_rows:
        raise BadInput(f"{parts['train.jsonl']} holds no rows")
    datasets, peft, trl = _imports()
    import torch

    use_cpu = device == "cpu" or not torch.cuda.is_available()
    model, tokenizer = load_base(Path(base_model), "cpu" if use_cpu else "cuda")
    length = min(max_length or context_length(model), context_length(model))
    train_set = datasets.Dataset.from_list(examples(train_rows, method, tokenizer, length))
    val_set = datasets.Dataset.from_list(examples(val_rows, method, tokenizer, length)) if val_rows else None
    lora = peft.LoraConfig(
        r=lora_r,
        lora_alpha=lora_alpha or 2 * lora_r,
        lora_dropout=lora_dropout,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
    )
    common = dict(
        output_dir=str(Path(out) / "trainer"), max_steps=steps, per_device_train_batch_size=batch,
        per_device_eval_batch_size=batch, learning_rate=learning_rate, logging_steps=max(1, steps // 20),
        save_strategy="no", report_to=[], max_length=length, seed=seed, use_cpu=use_cpu,
        bf16=not use_cpu, disable_tqdm=not progress,
    )  # fmt: skip
    if method == "sft":
        args = trl.SFTConfig(**common, completion_only_loss=True)
        trainer_cls = trl.SFTTrainer
    else:
        args = trl.DPOConfig(**common, beta=beta)
        trainer_cls = trl.DPOTrainer
    trainer = trainer_cls(
        model=model,
        args=args,
        train_dataset=train_set,
        eval_dataset=val_set,
        processing_class=tokenizer,
        peft_config=lora,
    )
    start = time.perf_counter()
    result = trainer.train()
    seconds = time.perf_counter() - start
    eval_loss = None
    if val_set is not None:
        eval_loss = trainer.evaluate().get("eval_loss")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    trainer.model.save_pretrained(str(out))
    card_path = parts["card.json"]
    data_hash = json.loads(card_path.read_text()).get("data_hash") if card_path.is_file() else None
    figures = {
        "method": method,
        "base_model": str(base_model),
        "data": str(data),
        "data_hash": data_hash,
        "train_rows": len(train_rows),
        "val_rows": len(val_rows),
        "steps": int(trainer.state.global_step),
        "batch": batch,
        "max_length": length,
        "lora_r": lora_r,
        "learning_rate": learning_rate,
        "train_loss": _num(result.training_loss),
        "eval_loss": _num(eval_loss),
        "losses": [_num(h["loss"]) for h in trainer.state.log_history if "loss" in h],
        "seconds": round(seconds, 2),
        "device": "cpu" if use_cpu else torch.cuda.get_device_name(0),
    }
    (out / "finetune.json").write_text(json.dumps(figures, indent=1) + "\n")
    return figures


def _num(x: Any) -> float | None:
    return round(float(x), 5) if isinstance(x, (int, float)) and math.isfinite(x) else None
