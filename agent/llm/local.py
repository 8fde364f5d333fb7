"""A local Hugging Face causal language model as an LLM backend, with an optional LoRA adapter.

- `LocalBackend(model_dir, adapter_dir=None)` loads from a directory only (nothing is downloaded), onto the
  GPU when one is present.
- The prompt uses the tokenizer's chat template when it has one, else system and user text are joined; a
  prompt longer than the model's context keeps its end.
- A missing directory, a model that does not load, or an adapter without peft installed raises `LLMError`
  (one line, exit 2).
- Thread-safe: one generation at a time per backend.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from hgemm.agent.llm.client import Completion, LLMError


class LocalBackend:
    def __init__(
        self,
        model_dir: str | Path,
        *,
        adapter_dir: str | Path | None = None,
        temperature: float = 0.7,
        max_tokens: int = 4096,
        device: str | None = None,
    ):
        model_dir = Path(model_dir)
        if not model_dir.is_dir():
            raise LLMError(f"local model directory {model_dir} does not exist")
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
            dtype = torch.bfloat16 if self.device == "cuda" else torch.float32
            model = AutoModelForCausalLM.from_pretrained(str(model_dir), local_files_only=True, dtype=dtype)
        except (OSError, ValueError) as e:
            raise LLMError(f"cannot load a model from {model_dir}: {str(e).splitlines()[0]}") from e
        if adapter_dir:
            model = _with_adapter(model, Path(adapter_dir))
        self.net = model.to(self.device).eval()
        self.model = "local:" + model_dir.name + (f"+{Path(adapter_dir).name}" if adapter_dir else "")
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._lock = threading.Lock()

    def _context_length(self) -> int:
        config = self.net.config
        for key in ("max_position_embeddings", "n_positions", "seq_length"):
            value = getattr(config, key, None)
            if isinstance(value, int) and value > 0:
                return value
        return 4096

    def _prompt_ids(self, system: str, user: str, history: Any = ()) -> Any:
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            earlier = [{"role": role, "content": text} for role, text in history]
            messages = [{"role": "system", "content": system}, *earlier, {"role": "user", "content": user}]
            ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
            if not hasattr(ids, "shape"):  # some versions return a BatchEncoding
                ids = ids["input_ids"]
        else:
            turns = "".join(text + "\n\n" for _, text in history)
            ids = tok(system + "\n\n" + turns + user + "\n\n", return_tensors="pt")["input_ids"]
        room = max(1, self._context_length() - self.max_tokens)
        return ids[:, -room:]

    def complete(self, system: str, user: str, n: int, history: Any = ()) -> Completion:
        """n replies to `user` after `system` and earlier turns ((role, text) pairs) in `history`."""
        import torch

        with self._lock:
            start = time.perf_counter()
            ids = self._prompt_ids(system, user, history).to(self.device)
            room = max(1, self._context_length() - ids.shape[1])
            pad = self.tokenizer.pad_token_id
            if pad is None:
                pad = self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else 0
            with torch.no_grad():
                out = self.net.generate(
                    input_ids=ids,
                    attention_mask=torch.ones_like(ids),
                    do_sample=self.temperature > 0,
                    temperature=self.temperature if self.temperature > 0 else None,
                    max_new_tokens=min(self.max_tokens, room),
                    num_return_sequences=n,
                    pad_token_id=pad,
                )
            new = out[:, ids.shape[1] :]
            texts = [self.tokenizer.decode(row, skip_special_tokens=True) for row in new]
            completion_tokens = int(sum(int((row != pad).sum()) for row in new))
            return Completion(
                texts=texts,
                finish_reasons=["stop"] * len(texts),
                prompt_tokens=int(ids.shape[1]),
                completion_tokens=completion_tokens,
                latency_s=time.perf_counter() - start,
            )


def _with_adapter(model: Any, adapter_dir: Path) -> Any:
    if not adapter_dir.is_dir():
        raise LLMError(f"LoRA adapter directory {adapter_dir} does not exist")
    try:
        from peft import PeftModel
    except ImportError as e:
        raise LLMError("a LoRA adapter needs peft: pip install 'hgemm[local]'") from e
    return PeftModel.from_pretrained(model, str(adapter_dir))
