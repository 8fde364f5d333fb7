"""A browsable synthetic archive: attempts grouped into runs, LLM calls with their prompt and reply texts,
and one kernel whose text tries to break out of the page (it must show as text).

Invariants: deterministic for a seed (apart from creation times); nothing here is a measurement. Used by
the web view's tests and its render benchmark; takes an open `hgemm.archive.Archive` (not imported here:
test support sits below the archive).
"""

from __future__ import annotations

import random
from typing import Any

from hgemm.testing.synthetic import attempts

HOSTILE = (
    "// </pre></div><script>document.title='owned'</script><img src=x onerror=alert(1)>\n"
    '__global__ void k(){ /* "quotes" & <angle> */ }\n'
)
PROMPT = "Write a faster HGEMM kernel for {M}x{N}x{K}. <b>not bold</b>"
REPLY = "Here is a kernel:\n```cuda\n{source}```"


def fill(archive: Any, n: int, *, seed: int = 0, per_run: int = 500, kernels: int = 2000) -> dict[str, int]:
    """Add `n` synthetic attempts in runs of `per_run`; returns counts of what was added."""
    rng = random.Random(seed + 1)
    added = {"records": 0, "runs": 0, "llm_calls": 0}
    batch: list = []
    run_id = None

    def flush() -> None:
        if batch:
            archive.add_evaluations(batch, run_id=run_id)
            batch.clear()

    with archive.writer.transaction():
        for i, a in enumerate(attempts(n, seed=seed, kernels=kernels)):
            if i % per_run == 0:
                flush()
                if run_id is not None:
                    archive.end_run(run_id)
                M, N, K = a.record.M, a.record.N, a.record.K
                budget = {"budget_evals": per_run, "budget_minutes": rng.choice([10, 30, 60])}
                run_id = archive.start_run("optimize", {"M": M, "N": N, "K": K, **budget})
                added["runs"] += 1
            h = archive.add_kernel(
                a.source, family=a.family, params=a.params, parents=a.parents, proposer=a.proposer
            )
            a.record.eval_seconds = rng.uniform(0.3, 0.9)
            batch.append((h, a.record))
            if a.proposer.startswith("llm:") and rng.random() < 0.2:
                r = a.record
                archive.add_llm_call(
                    run_id, a.proposer[4:], rng.randint(2000, 9000), rng.randint(500, 3000),
                    rng.uniform(0.001, 0.05), rng.uniform(2, 30), "kernel", kernel_hash=h,
                    prompt=PROMPT.format(M=r.M, N=r.N, K=r.K), reply=REPLY.format(source=a.source),
                )  # fmt: skip
                added["llm_calls"] += 1
            added["records"] += 1
            if len(batch) >= 500:
                flush()
        flush()
        if run_id is not None:
            archive.end_run(run_id)
    return added


def add_hostile(archive: Any, parent: str | None = None) -> str:
    """A kernel whose source holds markup and script; returns its hash."""
    return archive.add_kernel(HOSTILE, family="hostile", parents=[parent] if parent else [], proposer="llm:x")
