"""How well a local model (base, or base plus an adapter) proposes on held-out shapes.

- `held_out(backend, shapes, evaluator, archive)`: for each shape, the prompt the LLM proposer renders now
  (archive-only retrieval, a draw seeded by the shape, so two models see identical prompts), one sample, the
  reply parsed as the proposer parses it, and the first candidate evaluated at the full stage. Metrics:
  compile rate, correct rate, and the mean offline speedup of the first candidate over the best cuBLAS
  baseline (a candidate that fails counts 0). Candidates are not archived.
- `better(new, old)`: the new metrics win on correct rate, then speedup, then compile rate (strictly).
"""

from __future__ import annotations

from typing import Any

from hgemm.core.shape import Shape


def held_out(
    backend: Any, shapes: list[Shape], evaluator: Any, archive: Any, progress: bool = False
) -> dict[str, Any]:
    from hgemm.agent.finetune.data import Options, render
    from hgemm.agent.llm.replies import parse_reply
    from rich.progress import Progress

    gpu = evaluator.gpu_info().name
    per_shape = []
    with Progress(disable=not progress, transient=True) as bar:
        task = bar.add_task("held-out shapes", total=len(shapes))
        for shape in shapes:
            system, user = render(archive, shape, gpu, (), Options())
            done = backend.complete(system, user, 1)
            reply = parse_reply(done.texts[0] if done.texts else None)
            entry: dict[str, Any] = {"shape": [shape.M, shape.N, shape.K], "reply": reply.outcome,
                                     "compiled": False, "correct": False, "speedup": 0.0,
                                     "completion_tokens": done.completion_tokens}  # fmt: skip
            if reply.outcome == "kernel" and reply.source:
                record = evaluator.evaluate([reply.source], shape, stage="full")[0]
                entry["compiled"] = bool(record.compiled)
                entry["correct"] = record.ok
                entry["failure_kind"] = record.failure_kind
                entry["speedup"] = round(record.speedup_best("offline") or 0.0, 4) if record.ok else 0.0
            per_shape.append(entry)
            bar.advance(task)
    n = max(1, len(per_shape))
    return {
        "shapes": len(per_shape),
        "compile_rate": round(sum(e["compiled"] for e in per_shape) / n, 4),
        "correct_rate": round(sum(e["correct"] for e in per_shape) / n, 4),
        "speedup": round(sum(e["speedup"] for e in per_shape) / n, 4),
        "per_shape": per_shape,
    }


def key(metrics: dict[str, Any]) -> tuple[float, float, float]:
    return (metrics["correct_rate"], metrics["speedup"], metrics["compile_rate"])


def better(new: dict[str, Any], old: dict[str, Any]) -> bool:
    return key(new) > key(old)
