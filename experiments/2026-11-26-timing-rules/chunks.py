"""Second probe: the baselines sampled in chunks, as the judge samples them beside a candidate (three chunks
per mode, new input values before every sample), with different work between chunks, variants interleaved.

    python chunks.py OUT_DIR [SHAPES] [ROUNDS]

Between chunks: none; inputs (the judge's input check, as under the rules); idle (the host sleeps as long as
the input check took); sync (a device synchronize only).
"""

from __future__ import annotations

# ruff: noqa: B023  (the closures run inside the loop that binds them)
import json
import random
import statistics
import sys
import time
from pathlib import Path

import torch
from hgemm.evaluator import timing
from hgemm.evaluator.judge import ROUNDS, Judge
from hgemm.evaluator.local import _compile_shim
from hgemm.evaluator.runner import Buffers, StreamDevice, derive

VARIANTS = ["none", "inputs", "idle", "sync"]


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    shapes = (sys.argv[2] if len(sys.argv) > 2 else "128x128x128,1024x1024x1024").split(",")
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    empty, shim = _compile_shim("empty.cu"), _compile_shim("runner.cu", trusted=True)
    j = Judge()
    for text in shapes:
        M, N, K = map(int, text.split("x"))
        j.prepare(M, N, K, empty, shim)
        p = j.problem
        s = p.stream.cuda_stream
        buf = Buffers(p.arena.base, p.layout)
        doc = {"shape": text, "slots": p.slots, "rows": []}
        took = [0.005]
        for mode in ("offline", "server"):
            slots = p.slots if mode == "offline" else 1
            n = slots * M * K
            graphs = j.baselines.graphs(slots)

            def between(v: str, seed: int, b_seed: int) -> None:
                if v == "inputs":
                    t = time.perf_counter()
                    p.check_inputs(seed, slots, b_seed)
                    took.append(time.perf_counter() - t)
                elif v == "idle":
                    time.sleep(statistics.median(took))
                elif v == "sync":
                    torch.cuda.synchronize()

            for r in range(rounds):
                for v in random.sample(VARIANTS, len(VARIANTS)):
                    b_seed = j.rng.getrandbits(63)
                    p.start_timing(b_seed, slots)
                    seeds = [j.rng.getrandbits(63) for _ in range(16 if mode == "offline" else 31)]
                    size = -(-len(seeds) // ROUNDS)
                    got: dict[str, list[float]] = {}
                    for first in range(0, len(seeds), size):
                        chunk = seeds[first : first + size]
                        dev = StreamDevice(j.rt, s, j.shim, {b: g.replay for b, g in graphs.items()}, p.flush_ptr,
                                           p.flush_bytes, lambda seed: j.shim.fill(buf["A"], n, derive(seed, 1), 1.0, s))
                        with torch.cuda.stream(p.stream):
                            if mode == "offline":
                                raw = timing.offline_samples(dev, list(graphs), chunk, {b: slots for b in graphs})
                            else:
                                raw = timing.server_samples(dev, list(graphs), chunk, random.Random(r), require=False)
                        dev.close()
                        for b, us in raw.items():
                            got.setdefault(b, []).extend(us)
                        between(v, chunk[-1], b_seed)
                    for b, us in got.items():
                        doc["rows"].append({"mode": mode, "variant": v, "round": r, "baseline": b,
                                            "median_us": statistics.median(us[1:])})
        (out / f"chunks-{text}.json").write_text(json.dumps(doc, indent=1) + "\n")
        print(f"\n{text} (slots {p.slots}): median over rounds and baselines, us per launch; ratio to none")
        for mode in ("offline", "server"):
            med = {v: statistics.median(x["median_us"] for x in doc["rows"] if x["mode"] == mode and x["variant"] == v)
                   for v in VARIANTS}
            print(f"  {mode:8s} " + "  ".join(f"{v} {med[v]:.3f} ({med[v] / med['none']:.3f})" for v in VARIANTS))
    j.close()


if __name__ == "__main__":
    main()
