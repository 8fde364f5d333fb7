"""The LLM proposer: prompts built from the archive, a chat backend (OpenAI-compatible or local), replies parsed
into candidates. `client` holds the proposer and the OpenAI-compatible backend; `local` a Hugging Face model;
`prompt` and `sources` what the model is shown, `scrub` and `feedback` the safe forms of candidates' sources and
failures that it is shown them in; `replies` how its answer becomes a kernel."""

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
