"""GPU demonstration of the agent loop: LLM proposals replayed from a loopback server, real evaluation.

For each of two shapes, runs `hgemm optimize`'s loop on this machine's GPU twice: `--proposer llm` against a
loopback OpenAI-compatible server that replays scripted replies, then `--proposer llm+template`.

Usage: python -m hgemm.bench.agent_gpu_demo [--out bench/results/agent_gpu_demo.json] [--no-ncu]

- The scripted replies hold real kernels (our own families, rendered with parameters the family accepts for
  the shape and GPU), one deliberately broken kernel and one reply with no code; no network, no API key.
- Checks that the attempts landed in the archive with their lineage, that the index returns them for a
  neighbouring shape, and that the prompt for that neighbour shows them as exemplars with NCU metrics.
- Writes to the archive and index under $HGEMM_HOME like any search (point it elsewhere to keep them apart);
  prints a short table, writes JSON to --out, exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

from hgemm.agent.commands import summary
from hgemm.agent.llm import LLMProposer, OpenAIBackend
from hgemm.agent.llm.prompt import build_prompt
from hgemm.agent.loop import Budget, optimize
from hgemm.agent.proposer import ProposalContext

from hgemm.core.shape import Shape
from hgemm.testing.replay_server import ReplayServer, Step, reply

SHAPES = [(2048, 2048, 2048), (4096, 4096, 4096)]
NEIGHBOUR = (3072, 3072, 3072)


def scripted_kernels(gpu, shape, count=4):
    """Rendered family kernels with parameters the family accepts for this shape and GPU."""
    from hgemm.evaluator.kernels import all_families

    rng = random.Random(shape.M * 7 + shape.N * 3 + shape.K)
    found = []
    for family in all_families():
        if float(gpu.cc) < family.min_cc:
            continue
        keys = sorted(family.space)
        for _ in range(400):
            params = {k: rng.choice(family.space[k]) for k in keys}
            if family.check(params, shape, gpu) is None:
                found.append(family.render(params))
                break
    rng.shuffle(found)
    return found[:count]


def script(kernels):
    steps = [reply(f"Variant with a different tile and pipeline.\n```cuda\n{k}```") for k in kernels]
    broken = kernels[0].replace("hgemm_run(", "hgemm_run_missing(", 1) if kernels else "int x;"
    steps.insert(1, reply(f"```cuda\n{broken}```"))  # a compile/bad-source failure, archived as such
    steps.insert(2, reply("I would try a larger tile, but here is no code."))
    return steps


def run_one(kind, shape, evaluator, archive, retriever, ncu):
    kernels = scripted_kernels(evaluator.gpu_info(), shape)
    with ReplayServer(script(kernels), then=Step(texts=["No further ideas."])) as server:
        backend = OpenAIBackend(
            "replay-demo", base_url=server.base_url, timeout_s=30, retries=2, backoff_s=0.1
        )
        proposers = [LLMProposer(backend, prices=lambda m: (1.0, 4.0))]
        if kind == "llm+template":
            from hgemm.agent.template import TemplateProposer

            proposers.append(TemplateProposer(seed=0))
        result = optimize(
            shape,
            proposers=proposers,
            evaluator=evaluator,
            archive=archive,
            retriever=retriever,
            budget=Budget(evals=24, minutes=8),
            progress=True,
            finalists=2,
            batch=4,
            patience=2,
            ncu=ncu,
            command=f"agent_gpu_demo {kind}",
        )
    s = summary(result)
    s["proposer_kind"] = kind
    s["replayed_kernels"] = len(kernels)
    with_parents = [c.hash for c, _ in result.results if c.parents]
    s["lineage_edges"] = sum(len(archive.kernel(h)["parents"]) for h in set(with_parents))
    return s


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m hgemm.bench.agent_gpu_demo", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/agent_gpu_demo.json"))
    parser.add_argument("--no-ncu", action="store_true", help="skip Nsight Compute at the full stage")
    args = parser.parse_args()

    from hgemm.archive import Archive
    from hgemm.evaluator.local import LocalEvaluator
    from hgemm.index import Retriever

    started = time.time()
    runs = []
    with LocalEvaluator() as evaluator, Archive() as archive:
        gpu = evaluator.gpu_info()
        retriever = Retriever(archive, gpu_sm_count=gpu.sm_count)
        for shape in SHAPES:
            for kind in ("llm", "llm+template"):
                runs.append(run_one(kind, Shape(*shape), evaluator, archive, retriever, ncu=not args.no_ncu))
        retriever.sync()
        hits = retriever.similar_shapes(Shape(*NEIGHBOUR), gpu.name, 4)
        ctx = ProposalContext(Shape(*NEIGHBOUR), gpu, archive=archive, retriever=retriever)
        prompt = build_prompt(ctx, random.Random(0), exemplars=3)
    found_shapes = sorted({(h["M"], h["N"], h["K"]) for h in hits})
    checks = {
        "archived_with_lineage": any(r["lineage_edges"] > 0 for r in runs),
        "index_returns_neighbours": all(
            tuple(s) in found_shapes
            for s in SHAPES
            if any(r["best"] and tuple(r["shape"]) == s for r in runs)
        ),
        "prompt_has_exemplars": len(prompt.exemplar_hashes) > 0 or prompt.parent_hash is not None,
        "prompt_has_ncu": any(
            line.startswith("Nsight Compute: ") and "no metrics were collected" not in line
            for line in prompt.user.splitlines()
        ),
    }
    print(
        f"{'shape':>16} {'proposer':>13} {'evals':>5} {'full':>4} {'llm calls':>9} {'best us':>9} {'x cuBLAS':>8} {'stop':>9}"
    )
    for r in runs:
        best = r["best"] or {}
        us = best.get("median_us", {}).get("offline")
        sp = best.get("speedup_best", {}).get("offline")
        print(
            f"{'x'.join(map(str, r['shape'])):>16} {r['proposer_kind']:>13} {r['evals']:>5} {r['full']:>4} "
            f"{r['llm']['calls']:>9} {us if us is None else round(us, 2)!s:>9} {sp if sp is None else round(sp, 3)!s:>8} {r['stop_reason']:>9}"
        )
    print("neighbour", "x".join(map(str, NEIGHBOUR)), "index hits:", found_shapes)
    print("checks:", checks)
    result = {
        "gpu": gpu.name,
        "runs": runs,
        "neighbour": list(NEIGHBOUR),
        "index_hits": [list(s) for s in found_shapes],
        "prompt": {
            "parent": prompt.parent_hash,
            "exemplars": prompt.exemplar_hashes,
            "chars": len(prompt.user),
        },
        "checks": checks,
        "seconds": round(time.time() - started, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print("wrote", args.out)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
