"""The fine-tune benchmark's report says what the replies were and the cap they had."""

from __future__ import annotations

from hgemm.bench import finetune_run


def _metrics(replies):
    return {"shapes": len(replies), "compile_rate": 0.0, "correct_rate": 0.0, "speedup": 0.0,
            "per_shape": [{"reply": r} for r in replies]}  # fmt: skip


def test_report_says_what_the_replies_were_and_their_cap():
    report = {
        "date": "2026-11-25", "gpu": {"name": "GPU X", "driver": "1"}, "archive": "a.jsonl.xz",
        "model": {"architecture": "tiny", "parameters": 2e6, "vocab": 300, "answer_tokens_median": 9000},
        "card": {"train": {"rows": 4, "shapes": ["64x64x64"]}, "val": {"rows": 2, "shapes": ["128x64x64"]},
                 "data_hash": "ab"},
        "train": {"method": "sft", "lora_r": 4, "steps": 2, "batch": 1, "max_length": 64, "seconds": 1.0,
                  "train_loss": 3.0, "eval_loss": 2.0},
        "before": _metrics(["no_code", "no_code"]), "after": _metrics(["kernel", "no_code"]),
        "options": {"max_new_tokens": 768},
    }  # fmt: skip
    text = finetune_run.markdown(report)
    assert "before no_code 2; after kernel 1, no_code 1" in text
    assert "At most 768 new tokens per reply; the training answers' median is 9000 tokens." in text


def test_outcomes_of_no_shapes():
    assert finetune_run.outcomes(_metrics([])) == "none"
