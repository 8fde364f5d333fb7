"""The local Hugging Face backend on a tiny randomly initialised GPT-2 built in the test (no download):
it loads from a directory, samples, counts tokens, and its garbage output is classified, not fatal."""

from __future__ import annotations

import pytest
from hgemm.agent.llm import LLMError, LLMProposer
from hgemm.agent.proposer import ProposalContext
from standin import STANDIN_GPU

from hgemm.core.shape import Shape


def _tiny_model_dir(path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    words = "kernel tile warp shared memory fp16 fp32 accumulate ``` cuda hgemm_run return int void".split()
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(
        [" ".join(words)] * 4, trainers.WordLevelTrainer(special_tokens=["[UNK]", "[PAD]", "[EOS]"])
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", eos_token="[EOS]"
    )
    fast.save_pretrained(path)
    config = GPT2Config(
        vocab_size=fast.vocab_size,
        n_positions=128,
        n_embd=32,
        n_layer=2,
        n_head=2,
        pad_token_id=fast.pad_token_id,
    )
    GPT2LMHeadModel(config).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return _tiny_model_dir(tmp_path_factory.mktemp("tiny-gpt2"))


def test_local_backend_samples_and_counts_tokens(tiny_dir):
    from hgemm.agent.llm.local import LocalBackend

    backend = LocalBackend(tiny_dir, temperature=1.0, max_tokens=16, device="cpu")
    assert backend.model == f"local:{tiny_dir.name}"
    done = backend.complete("system words " * 50, "kernel tile warp " * 100, n=2)
    assert len(done.texts) == 2
    assert 0 < done.prompt_tokens <= 128 - 16  # a long prompt keeps its end within the context
    assert 0 < done.completion_tokens <= 32
    assert done.latency_s > 0


def test_garbage_from_local_model_is_recorded_not_fatal(tiny_dir):
    from hgemm.agent.llm.local import LocalBackend

    backend = LocalBackend(tiny_dir, temperature=1.0, max_tokens=12, device="cpu")
    proposer = LLMProposer(backend, samples=2, seed=0)
    ctx = ProposalContext(Shape(256, 256, 256), STANDIN_GPU)
    generation = proposer.generate(proposer.prepare(ctx), 2)
    assert generation.candidates == []
    (call,) = generation.calls
    assert call.outcome == "no_code"
    assert call.model == backend.model and call.cost_usd == 0.0
    assert call.prompt_tokens > 0 and call.completion_tokens > 0


def test_missing_directory_and_adapter_are_clear_errors(tmp_path, tiny_dir):
    from hgemm.agent.llm.local import LocalBackend

    with pytest.raises(LLMError, match="does not exist"):
        LocalBackend(tmp_path / "nowhere")
    with pytest.raises(LLMError, match="adapter"):
        LocalBackend(tiny_dir, adapter_dir=tmp_path / "no-adapter", device="cpu")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(LLMError, match="cannot load"):
        LocalBackend(empty, device="cpu")


def test_a_local_model_continues_a_conversation_counts_with_its_own_tokenizer_and_drives_the_gpu_report(
    tiny_dir,
):
    from hgemm.agent.llm import tokens
    from hgemm.agent.llm.local import LocalBackend
    from hgemm.bench import llm_turns
    from standin import StandinEvaluator

    backend = LocalBackend(tiny_dir, temperature=1.0, max_tokens=8, device="cpu")
    history = [("user", "kernel tile"), ("assistant", "warp shared memory")]
    done = backend.complete("system", "fp16 fp32", 1, history=history)
    assert (
        len(done.texts) == 1 and done.prompt_tokens > backend.complete("system", "fp16 fp32", 1).prompt_tokens
    )
    counter = tokens.TokenCounter.from_hf(backend.tokenizer, tiny_dir.name)
    assert counter.name == f"hf:{tiny_dir.name}" and counter.count("kernel tile warp") == 3
    report = llm_turns.run([(256, 256, 256)], lambda: LLMProposer(backend, seed=0), StandinEvaluator(),
                           budget_evals=6, budget_minutes=1.0, warmup=2)  # fmt: skip
    rows = report["requests"]
    assert rows and all(r["model"] == backend.model for r in rows)
    assert {r["outcome"] for r in rows} <= {"no_code", "kernel", "edit_failed", "static_check", "duplicate"}
