"""Fine-tunes of the local proposer: data exported from an archive the tests fill through the stand-in evaluator
(formats, hidden answers, dedupe, split by shape), two-step SFT and DPO runs of a tiny GPT-2 built here from a
config with a byte-level tokenizer trained here (nothing is downloaded), the adapter loading in the local
proposer, and the periodic cycle: its trigger starts it in a separate process, and it keeps the better adapter."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hgemm.agent.finetune import compare, data, periodic, reward, train
from hgemm.agent.proposer import Candidate
from hgemm.archive import Archive
from standin import STANDIN_GPU, StandinEvaluator

from hgemm.core.record import EvalRecord, ModeResult, Stats
from hgemm.core.shape import Shape

TESTS = Path(__file__).parent
SHAPES = [Shape(256, 256, 256), Shape(512, 256, 128), Shape(128, 512, 256), Shape(384, 128, 512),
          Shape(640, 256, 256), Shape(256, 768, 128)]  # fmt: skip
BODY = (
    "#include <cuda_fp16.h>\n#include <cuda_runtime.h>\n"
    'extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,\n'
    "                         void* ws, size_t ws_bytes, cudaStream_t stream) { return 0; }\n"
)


def kernel(speed: float, tag: str = "", variant: str = "") -> str:
    """A kernel the stand-in times at `speed` x its base time; `variant` changes its code (prompts show kernels
    without comments, so kernels that differ in comments only read the same)."""
    code = f"#define HG_VARIANT_{variant} 1\n" if variant else ""
    return f"// STANDIN_SPEED {speed:.2f} {tag}\n" + code + BODY


def fill(archive: Archive, shapes=SHAPES, gpu=STANDIN_GPU) -> None:
    """Per shape: three correct kernels (fast, middle, slow) and one incorrect one, evaluated in full."""
    ev = StandinEvaluator(gpu)
    for s in shapes:
        tag = f"{s.M}x{s.N}x{s.K}"
        sources = [
            kernel(0.7, tag),
            kernel(0.9, tag, "MID"),
            kernel(1.2, tag, "SLOW"),
            "// STANDIN_WRONG\n" + kernel(0.5, tag, "WRONG"),
        ]
        for src, rec in zip(sources, ev.evaluate(sources, s, stage="full")):
            archive.record(Candidate(src, proposer="template"), rec)


@pytest.fixture
def arc(tmp_path):
    with Archive(tmp_path / "a.db") as a:
        fill(a)
        yield a


def tiny_model(path: Path, n_positions: int = 320) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    texts = [
        data.answer(BODY),
        "M=256, N=256, K=256 Write the kernel in one ```cuda block. Times: offline us",
    ]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<pad>", "<eos>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # fmt: skip
    tok.train_from_iterator(texts * 8, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>")
    fast.save_pretrained(path)
    config = GPT2Config(vocab_size=fast.vocab_size, n_positions=n_positions, n_embd=64, n_layer=2, n_head=2,
                        pad_token_id=fast.pad_token_id, eos_token_id=fast.eos_token_id,
                        bos_token_id=fast.eos_token_id)  # fmt: skip
    import torch

    torch.manual_seed(0)
    GPT2LMHeadModel(config).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_model(tmp_path_factory.mktemp("tiny-gpt2"))


# -- export


def test_sft_export_answers_with_each_shapes_best_kernel_hidden_from_its_prompt(arc, tmp_path):
    card = data.export(arc, tmp_path / "sft.jsonl", data.Options(fmt="sft"))
    parts = data.paths(tmp_path / "sft.jsonl")
    train_rows, val_rows = data.read(parts["train.jsonl"]), data.read(parts["val.jsonl"])
    rows = train_rows + val_rows
    assert len(rows) == len(SHAPES) and card["train"]["rows"] + card["val"]["rows"] == len(SHAPES)
    for row in rows:
        best = arc.best(Shape(row["M"], row["N"], row["K"]))
        assert row["kernel"] == best["kernel"] and row["speedup"] == pytest.approx(best["speedup_best"])
        assert row["completion"] == data.answer(best["source"]) and row["completion"].startswith("```cuda\n")
        assert (
            "hgemm_run" in row["completion"] and "STANDIN" not in row["completion"]
        )  # scrubbed as prompts are
        assert best["kernel"] not in row["user"]  # the answer is not in its own prompt
    # the prompt is the one the proposer renders from an archive that never held the answer kernel
    row = rows[0]
    with Archive(tmp_path / "without.db") as other:
        fill(other)
        other.execute("SELECT 1")  # same content...
    with Archive(tmp_path / "without.db") as other:
        with other.writer.transaction() as conn:  # ...less the answer kernel
            conn.execute("DELETE FROM evaluations WHERE kernel = ?", (row["kernel"],))
            conn.execute("DELETE FROM records WHERE kernel = ?", (row["kernel"],))
        system, user = data.render(other, Shape(row["M"], row["N"], row["K"]), row["gpu"], (), data.Options())
    assert (system, user) == (row["system"], row["user"])
    assert "Improve this kernel" in user


def test_split_is_by_shape_and_the_card_describes_it(arc, tmp_path):
    card = data.export(arc, tmp_path / "d.jsonl", data.Options(fmt="dpo", val_fraction=0.3))
    parts = data.paths(tmp_path / "d.jsonl")
    train_rows, val_rows = data.read(parts["train.jsonl"]), data.read(parts["val.jsonl"])
    train_shapes = {data.shape_key(r) for r in train_rows}
    val_shapes = {data.shape_key(r) for r in val_rows}
    assert train_shapes and val_shapes and not train_shapes & val_shapes
    assert train_shapes | val_shapes == {f"{s.M}x{s.N}x{s.K}" for s in SHAPES}
    assert sorted(val_shapes) == card["val"]["shapes"] and card["train"]["gpus"] == {
        STANDIN_GPU.name: len(train_rows)
    }
    assert card["speedup"]["n"] == len(train_rows) + len(val_rows) and card["speedup"]["min"] > 1.0
    assert json.loads(parts["card.json"].read_text())["data_hash"] == card["data_hash"]
    md = parts["card.md"].read_text()
    assert "| val |" in md and card["data_hash"] in md
    # the split depends on the shape alone: the same shapes split the same way in any archive
    again = data.split_by_shape([dict(r) for r in reversed(train_rows + val_rows)], 0.3)
    assert {data.shape_key(r) for r in again[1]} == val_shapes


def test_dpo_prefers_the_fastest_over_slower_and_failed_kernels(arc, tmp_path):
    rows = data.build(arc, data.Options(fmt="dpo", pairs=3))
    assert len(rows) == 3 * len(SHAPES)
    for row in rows:
        assert row["chosen"] != row["rejected"] or row["kernel"] != row["rejected_kernel"]
        assert row["rejected_why"] in ("incorrect", "slower")
        if row["rejected_why"] == "slower":
            assert row["rejected_speedup"] < row["speedup"]
    assert {r["rejected_why"] for r in rows} == {"incorrect", "slower"}


def test_reward_rows_gate_on_correctness_and_integrity(arc):
    rows = data.build(arc, data.Options(fmt="reward"))
    assert len(rows) == 4 * len(SHAPES)
    for row in rows:
        if row["correct"]:
            assert row["reward"] == pytest.approx(row["speedup"], rel=1e-3)
        else:
            assert row["failure_kind"] == "incorrect" and row["reward"] == 0.0
    record = EvalRecord("0" * 16, 256, 256, 256).fail("early_read", "read early")
    assert reward.reward(record, 100) == -1.0
    assert reward.reward(EvalRecord("0" * 16, 1, 1, 1).fail("unsupported_shape", "no"), 100) is None
    ok = EvalRecord("0" * 16, 256, 256, 256, correct=True, max_rel_err=4e-3, ref_rel_err=1e-3)
    ok.modes["offline"] = ModeResult(
        "offline", Stats(10, 9, 11, 5), {"torch_nn": Stats(12, 11, 13, 5)}, 1.0
    ).finish(ok.shape)
    assert reward.reward(ok, 100) == pytest.approx(1.2 * 0.9)  # 4x cuBLAS's error: the full error penalty
    assert reward.reward(ok, 40_000) == pytest.approx(1.2 * 0.85)  # and twice the free length


def test_min_speedup_gpu_filter_and_dedupe(tmp_path):
    with Archive(tmp_path / "a.db") as a:
        # two GPUs whose names a prompt does not show and that measured the same: identical rows, kept once
        for name in ("lab;gpu-a", "lab;gpu-b"):
            fill(a, SHAPES[:3], gpu=type(STANDIN_GPU)(**{**vars(STANDIN_GPU), "name": name}))
        rows = data.build(a, data.Options(fmt="sft"))
        assert len(rows) == 3 and len({r["id"] for r in rows}) == 3
        assert {r["gpu"] for r in rows} == {"lab;gpu-a"}  # the first kept
        assert len(data.build(a, data.Options(fmt="sft", gpu="lab;gpu-b"))) == 3
        assert data.build(a, data.Options(fmt="sft", min_speedup=10.0)) == []


def test_export_command_and_its_errors(arc, tmp_path):
    from hgemm.agent.cli import app
    from typer.testing import CliRunner

    runner = CliRunner()
    out = tmp_path / "x.jsonl"
    done = runner.invoke(
        app,
        [
            "finetune",
            "export",
            "--format",
            "reward",
            "--archive",
            str(arc.path),
            "--out",
            str(out),
            "--quiet",
        ],
    )
    assert done.exit_code == 0, done.output
    assert "train rows" in done.output and data.paths(out)["train.jsonl"].is_file()
    bad = runner.invoke(
        app, ["finetune", "export", "--format", "ppo", "--archive", str(arc.path), "--out", str(out)]
    )
    assert bad.exit_code != 0 and "--format must be one of" in str(bad.exception)


# -- fine-tunes


def _lora_b_norm(adapter: Path) -> float:
    from safetensors.torch import load_file

    weights = load_file(str(adapter / "adapter_model.safetensors"))
    return sum(float(w.abs().sum()) for k, w in weights.items() if "lora_B" in k)


@pytest.mark.parametrize("method", ["sft", "dpo"])
def test_two_step_fine_tune_writes_an_adapter_the_local_proposer_loads(arc, tiny, tmp_path, method):
    from hgemm.agent.llm.local import LocalBackend

    data.export(arc, tmp_path / f"{method}.jsonl", data.Options(fmt=method))
    out = tmp_path / "adapter"
    figures = train.run(tiny, tmp_path / f"{method}.jsonl", method, out, steps=2, batch=2, lora_r=4,
                        learning_rate=1e-2, device="cpu", progress=False)  # fmt: skip
    assert figures["steps"] == 2 and figures["train_loss"] is not None and figures["eval_loss"] is not None
    assert json.loads((out / "finetune.json").read_text())["data_hash"] == figures["data_hash"]
    assert _lora_b_norm(out) > 0  # LoRA's B starts at zero: the steps moved it
    backend = LocalBackend(tiny, adapter_dir=out, temperature=1.0, max_tokens=8, device="cpu")
    assert backend.model.endswith("+adapter")
    done = backend.complete("system", "Write the kernel", 1)
    assert done.completion_tokens > 0 and len(done.texts) == 1


def test_prompt_text_is_what_the_local_proposer_feeds(tiny):
    from hgemm.agent.llm.local import LocalBackend

    backend = LocalBackend(tiny, max_tokens=8, device="cpu")
    ids = backend._prompt_ids("sys", "M=256 kernel")[0].tolist()
    assert backend.tokenizer(train.prompt_text(backend.tokenizer, "sys", "M=256 kernel"))["input_ids"] == ids


def test_run_refuses_mismatched_data_and_missing_model(arc, tiny, tmp_path):
    from hgemm.core.errors import BadInput

    data.export(arc, tmp_path / "r.jsonl", data.Options(fmt="reward"))
    with pytest.raises(BadInput, match="export with --format dpo"):
        train.run(tiny, tmp_path / "r.jsonl", "dpo", tmp_path / "o", steps=1, device="cpu", progress=False)
    with pytest.raises(BadInput, match="does not exist"):
        train.run(
            tmp_path / "nothing", tmp_path / "r.jsonl", "sft", tmp_path / "o", device="cpu", progress=False
        )
    with pytest.raises(BadInput, match="no data file"):
        train.run(tiny, tmp_path / "missing.jsonl", "sft", tmp_path / "o", device="cpu", progress=False)


# -- the periodic cycle


def test_cycle_records_both_adapters_metrics_and_switches_only_to_a_better_one(arc, tiny):
    ev = StandinEvaluator()
    first = periodic.cycle(arc, tiny, ev, steps=2, lora_r=4, max_new_tokens=16, device="cpu")
    new, current = first["metrics"]["new"], first["metrics"]["current"]
    assert new["shapes"] == current["shapes"] >= 1 and first["previous"] is None and first["data_hash"]
    assert first["status"] == ("adopted" if compare.better(new, current) else "kept")
    assert periodic.current_link().exists() == (first["status"] == "adopted")
    assert periodic.new_bests(arc) == 0
    fill(arc, [Shape(1024, 256, 128)])  # one new best
    assert periodic.new_bests(arc) == 1
    # pretend the first was adopted: the next cycle is measured against it, on the same greedy prompts
    with arc.writer.transaction() as conn:
        conn.execute("UPDATE finetunes SET status = 'adopted' WHERE id = ?", (first["id"],))
    second = periodic.cycle(arc, tiny, ev, steps=2, lora_r=4, max_new_tokens=16, device="cpu")
    assert second["previous"] == first["adapter"]
    assert second["metrics"]["current"]["per_shape"][0]["reply"] == new["per_shape"][0]["reply"]
    assert second["status"] == (
        "adopted" if compare.better(second["metrics"]["new"], second["metrics"]["current"]) else "kept"
    )
    assert [r["id"] for r in periodic.finetunes(arc)] == [first["id"], second["id"]]


def test_a_better_adapter_is_adopted_and_a_worse_one_kept(arc, tiny, monkeypatch):
    """Training, data, evaluation and the switch are real; the models' replies are scripted (a tiny random
    model's answers say nothing either way): the chosen adapter answers with a fast kernel, every other
    model with prose. Cycle 1: the new adapter answers well and is adopted; cycle 2: the new one does not,
    and the first stays current, which the local proposer then loads."""
    from hgemm.agent.llm import local
    from hgemm.agent.llm.client import Completion

    real_backend = local.LocalBackend
    chosen = {"adapter": None}  # None: any adapter answers well, the base model alone does not

    class Scripted:
        def __init__(self, base_model, adapter_dir=None, **_):
            want = chosen["adapter"]
            self.good = adapter_dir is not None and (want is None or Path(adapter_dir).resolve() == want)

        def complete(self, system, user, n, history=()):
            text = "```cuda\n" + kernel(0.5, "tuned", "TUNED") + "```" if self.good else "I cannot help."
            return Completion([text] * n, ["stop"] * n, prompt_tokens=10, completion_tokens=10, latency_s=0.0)

    monkeypatch.setattr(local, "LocalBackend", Scripted)
    ev = StandinEvaluator()
    run = dict(steps=2, lora_r=4, max_new_tokens=16, device="cpu")

    first = periodic.cycle(arc, tiny, ev, **run)
    assert first["status"] == "adopted" and first["previous"] is None
    assert first["metrics"]["new"]["correct_rate"] == 1.0 and first["metrics"]["current"]["correct_rate"] == 0.0
    assert periodic.current_link().resolve() == Path(first["adapter"]).resolve()
    assert periodic.adopted(arc)["id"] == first["id"]

    fill(arc, [Shape(1024, 256, 128)])  # a new best, so a second cycle has new data
    chosen["adapter"] = Path(first["adapter"]).resolve()
    second = periodic.cycle(arc, tiny, ev, **run)
    assert second["status"] == "kept" and second["previous"] == first["adapter"]
    assert second["metrics"]["current"]["correct_rate"] == 1.0 and second["metrics"]["new"]["correct_rate"] == 0.0
    assert periodic.current_link().resolve() == Path(first["adapter"]).resolve()
    assert periodic.adopted(arc)["id"] == first["id"]
    backend = real_backend(tiny, adapter_dir=periodic.current_link(), max_tokens=4, device="cpu")
    assert backend.model.endswith("+current") and backend.complete("s", "u", 1).completion_tokens > 0


def test_better_is_correct_rate_then_speedup_then_compile_rate():
    def m(compile_rate, correct_rate, speedup):
        return {"compile_rate": compile_rate, "correct_rate": correct_rate, "speedup": speedup}

    assert compare.better(m(0.5, 0.5, 0.9), m(1.0, 0.4, 1.2))
    assert compare.better(m(0.5, 0.5, 1.0), m(1.0, 0.5, 0.9))
    assert compare.better(m(0.6, 0.5, 1.0), m(0.5, 0.5, 1.0))
    assert not compare.better(m(0.5, 0.5, 1.0), m(0.5, 0.5, 1.0))  # a tie keeps the current adapter


def test_trigger_starts_a_cycle_in_a_separate_process_after_n_new_bests(
    tiny, hgemm_home, monkeypatch, tmp_path
):
    from hgemm.agent import commands
    from hgemm.agent.cli import app
    from typer.testing import CliRunner

    monkeypatch.setattr(commands, "open_evaluator", StandinEvaluator)
    monkeypatch.setattr(periodic, "DEFAULT_EVALUATOR", "standin:StandinEvaluator")  # the child's evaluator
    monkeypatch.setattr(
        periodic, "CYCLE_OPTIONS", ["--steps", "2", "--lora-r", "4", "--max-new-tokens", "16", "--cpu"]
    )
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hgemm.toml").write_text(f'[llm]\nlocal_model = "{tiny}"\n')
    grid = tmp_path / "grid.txt"
    grid.write_text("256 256 256\n512 256 128\n128 512 256\n")
    started: list = []
    check = periodic.Trigger.check
    monkeypatch.setattr(
        periodic.Trigger, "check", lambda self, a: started.append(check(self, a)) or started[-1]
    )
    runner = CliRunner()
    done = runner.invoke(app, ["sweep", "--grid", str(grid), "--budget-evals", "4", "--confirm", "0",
                               "--finetune-every", "2", "--out", str(tmp_path / "report")])  # fmt: skip
    assert done.exit_code == 0, done.output
    procs = [p for p in started if p is not None]
    assert started[0] is None and len(procs) == 1  # one best is not enough; two start a cycle; a third waits
    assert procs[0].wait(timeout=300) == 0, (hgemm_home / "finetune").glob("cycle-*.log")
    with Archive() as a:
        (row,) = periodic.finetunes(a)
        assert row["status"] in ("adopted", "kept") and row["data_hash"] and row["base_model"] == str(tiny)
        assert row["metrics"]["train"]["steps"] == 2 and row["metrics"]["new"]["shapes"] >= 1
        # The count restarts at the cycle's export, which saw at least the two bests that started it; the
        # third shape's best may land before or after that export (the cycle runs beside the sweep).
        exported = row["bests"]
        assert len(exported) >= 2 and set(exported) <= set(periodic.bests(a))
        assert periodic.new_bests(a) == 3 - len(exported)
    bad = runner.invoke(app, ["optimize", "256", "256", "256", "--finetune-every", "0"])
    assert bad.exit_code != 0 and "--finetune-every must be 1 or more" in str(bad.exception)
