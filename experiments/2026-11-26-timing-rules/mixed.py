"""Third probe: which side of the rules moves the baselines' times. A real candidate (the wgmma family's
default) runs in its runner beside the judge; each variant samples like the judge's `time` (three chunks per
mode, candidate chunk then baselines chunk), with the rules' work switched on or off per side.

    python mixed.py OUT_DIR [SHAPES] [ROUNDS]

Variants: rules (runner: new inputs and witnesses; judge: new inputs before the baselines' samples), bare
(neither), runner (the runner's only), judge (the judge's only), alone (no candidate samples at all, the
baselines with new inputs), inputs (rules, with the judge's input check between chunks); judge_rules and
judge_bare: the judge's own `_time_mode` under the protocols "rules" and "bare" (checks included); sync,
guard, regen, equal, sleep: rules with one part of the input check (or a 5 ms sleep) between chunks; warm:
the input check, then one untimed replay of each baseline's graph; regen_equal: the input check's
regeneration and comparisons, without its synchronize and guard check; after: the input check after the
baselines' chunk instead of before it.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from pathlib import Path

import torch
from hgemm.evaluator.compile import compile_sources
from hgemm.evaluator.judge import ROUNDS, Judge
from hgemm.evaluator.kernels import get_family
from hgemm.evaluator.local import _compile_shim
from hgemm.evaluator.runner import Buffers, refresh

from hgemm.core.shape import Shape

ALL = {"rules": (True, True), "bare": (False, False), "runner": (True, False), "judge": (False, True),
            "alone": (None, True), "inputs": (True, True), "judge_rules": "rules", "judge_bare": "bare",
            "sync": (True, True), "guard": (True, True), "regen": (True, True), "equal": (True, True),
            "sleep": (True, True), "warm": (True, True), "regen_equal": (True, True), "after": (True, True)}  # fmt: skip
VARIANTS = {v: ALL[v] for v in (sys.argv[4].split(",") if len(sys.argv) > 4 else ALL)}
BETWEEN = ("inputs", "sync", "guard", "regen", "equal", "sleep", "warm", "regen_equal")


def between(v: str, j: Judge, p, slots: int, seed: int, b_seed: int) -> None:
    """What runs between the candidate's chunk and the baselines' chunk in variant `v`."""
    if v in ("inputs", "warm"):
        p.check_inputs(seed, slots, b_seed)
    if v == "warm":
        for g in j.baselines.graphs(slots).values():
            g.replay()
        torch.cuda.synchronize()
    elif v == "sync":
        torch.cuda.synchronize()
    elif v == "guard":
        p.arena.broken_guard()
    elif v == "regen":
        p._regenerate(seed, slots, b_seed)
    elif v == "equal":
        ring = p.a_ring[:slots].reshape(slots * p.M, p.K).view(torch.int16)
        torch.equal(ring, ring.clone())
        torch.equal(p.bt.view(torch.int16), p.b.t().contiguous().view(torch.int16))
    elif v == "regen_equal":
        a, b = p._regenerate(seed, slots, b_seed)
        ring = p.a_ring[:slots].reshape(slots * p.M, p.K)
        for now, given in ((ring, a), (p.b, b), (p.bt, b.t())):
            torch.equal(now.view(torch.int16), given.contiguous().view(torch.int16))
    elif v == "sleep":
        time.sleep(0.005)


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    shapes = (sys.argv[2] if len(sys.argv) > 2 else "128x128x128,1024x1024x1024").split(",")
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    empty, shim = _compile_shim("empty.cu"), _compile_shim("runner.cu", trusted=True)
    j = Judge()
    for text in shapes:
        shape = Shape.of(text)
        fam = get_family("wgmma")
        (built,) = compile_sources([fam.render(fam.default_params(shape))])
        j.prepare(shape.M, shape.N, shape.K, empty, shim)
        p = j.problem
        checked = j.check("c", built.lib_path, "full")
        assert checked["failure"] is None, checked
        runner = j.runners["c"]
        doc = {"shape": text, "slots": p.slots, "rows": []}
        for mode in ("offline", "server"):
            slots = p.slots if mode == "offline" else 1
            name = "check" if slots == 1 else f"{mode}-graph"
            if name not in runner.graphs:
                runner.request("capture", 60.0, name=name, slots=list(range(slots)))
                runner.graphs.add(name)
            for r in range(rounds):
                for v in random.sample(list(VARIANTS), len(VARIANTS)):
                    if isinstance(VARIANTS[v], str):  # the judge's own sampling, checks included
                        stats = j._time_mode(runner, mode, "full", VARIANTS[v])
                        for who, st in stats.items():
                            doc["rows"].append({"mode": mode, "variant": v, "round": r, "who": who,
                                                "median_us": st["median_us"]})
                        continue
                    in_runner, in_judge = VARIANTS[v]
                    j._quiet(runner.phases)
                    seeds = [j.rng.getrandbits(63) for _ in range(16 if mode == "offline" else 31)]
                    b_seed = j.rng.getrandbits(63)
                    p.start_timing(b_seed, slots)
                    refresh(j.shim, Buffers(p.arena.base, p.layout), p.M, p.K, slots, seeds[0], p.stream.cuda_stream)
                    size = -(-len(seeds) // ROUNDS)
                    cand: list[float] = []
                    base: dict[str, list[float]] = {}
                    for first in range(0, len(seeds), size):
                        chunk = seeds[first : first + size]
                        if in_runner is not None:
                            reply = runner.request("time", 120.0, name=name, mode=mode, seeds=chunk, first=first,
                                                   rng_seed=j.rng.getrandbits(32), rules=in_runner)
                            cand += reply["us"]
                        if v in BETWEEN:
                            between(v, j, p, slots, chunk[-1], b_seed)
                        for b, us in j._time_baselines(mode, slots, chunk, in_judge).items():
                            base.setdefault(b, []).extend(us)
                        if v == "after":  # the input check after the baselines' chunk
                            p.check_inputs(chunk[-1], slots, b_seed)
                    if cand:
                        doc["rows"].append({"mode": mode, "variant": v, "round": r, "who": "candidate",
                                            "median_us": statistics.median(cand[1:])})
                    for b, us in base.items():
                        doc["rows"].append({"mode": mode, "variant": v, "round": r, "who": b,
                                            "median_us": statistics.median(us[1:])})
        j.forget("c")
        (out / f"mixed-{text}.json").write_text(json.dumps(doc, indent=1) + "\n")
        print(f"\n{text} (slots {p.slots}): median over rounds, us per launch; ratio to bare")
        for mode in ("offline", "server"):
            for who in ("candidate", "baselines"):
                sel = [x for x in doc["rows"] if x["mode"] == mode and (x["who"] == "candidate") == (who == "candidate")]
                med = {v: statistics.median(x["median_us"] for x in sel if x["variant"] == v)
                       for v in VARIANTS if any(x["variant"] == v for x in sel)}
                print(f"  {mode:8s} {who:10s} " + "  ".join(f"{v} {t:.3f} ({t / med['bare']:.3f})" for v, t in med.items()))
    j.close()


if __name__ == "__main__":
    main()
