"""The LLM proposer: prompts built from the archive, a chat backend (OpenAI-compatible or local), replies parsed
into candidates. `client` holds the proposer and the OpenAI-compatible backend; `local` a Hugging Face model;
`prompt`, `sources`, `variants` and `compact` what the model is shown, `tokens` how it is counted against the
budget; `scrub` and `feedback` the safe forms of candidates' sources and failures that it is shown them in;
`replies` and `edits` how its answer becomes a kernel; `novelty` which answers are not worth compiling;
`bandit` which of several models to ask."""

from hgemm.agent.llm.client import (
    ChatBackend,
    Completion,
    LLMCall,
    LLMError,
    LLMProposer,
    MissingKey,
    OpenAIBackend,
    Unreachable,
    cost_usd,
)

__all__ = [
    "ChatBackend",
    "Completion",
    "LLMCall",
    "LLMError",
    "LLMProposer",
    "MissingKey",
    "OpenAIBackend",
    "Unreachable",
    "cost_usd",
]
