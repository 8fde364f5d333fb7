"""Why the baselines' times move under the timing rules: the baselines sampled in the judge with different
work between samples, variants interleaved round by round.

    python probe.py OUT_DIR [SHAPES] [ROUNDS]

Variants (what runs before each sample, outside the timed window):
  bare   nothing;                         new    new values into the A ring (what the rules do);
  same   the same values into the A ring; other  new values into another buffer of the ring's size;
  spin   a kernel that touches no memory; newsync new values into the A ring, then the host waits for it.
Writes probe-<shape>.json per shape and prints a table of median time per launch over bare.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
from pathlib import Path

import torch
from hgemm.evaluator import timing
from hgemm.evaluator.judge import Judge
from hgemm.evaluator.local import _compile_shim
from hgemm.evaluator.runner import Buffers, StreamDevice, derive

VARIANTS = ["bare", "new", "same", "other", "spin", "newsync"]


def actions(j: Judge, a: int, other: int, n: int, s: int) -> dict:
    fill = j.shim.fill
    return {
        "bare": None,
        "new": lambda seed: fill(a, n, derive(seed, 1), 1.0, s),
        "same": lambda seed: fill(a, n, derive(1, 1), 1.0, s),
        "other": lambda seed: fill(other, n, derive(seed, 1), 1.0, s),
        "spin": lambda seed: j.shim.spin(2000, s),
        "newsync": lambda seed: (fill(a, n, derive(seed, 1), 1.0, s), j.rt.stream_sync(s)),
    }


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    shapes = (sys.argv[2] if len(sys.argv) > 2 else "128x128x128,1024x1024x1024,256x4096x1024").split(",")
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
        for mode in ("offline", "server"):
            slots = p.slots if mode == "offline" else 1
            n = slots * M * K
            other = torch.empty(n, dtype=torch.float16, device="cuda")
            graphs = j.baselines.graphs(slots)
            p.start_timing(j.rng.getrandbits(63), slots)
            j.shim.fill(buf["A"], n, derive(1, 1), 1.0, s)
            acts = actions(j, buf["A"], other.data_ptr(), n, s)
            for r in range(rounds):
                for v in random.sample(VARIANTS, len(VARIANTS)):
                    dev = StreamDevice(j.rt, s, j.shim, {b: g.replay for b, g in graphs.items()}, p.flush_ptr,
                                       p.flush_bytes, acts[v])
                    seeds = [j.rng.getrandbits(63) for _ in range(16 if mode == "offline" else 31)]
                    with torch.cuda.stream(p.stream):
                        if mode == "offline":
                            raw = timing.offline_samples(dev, list(graphs), seeds, {b: slots for b in graphs})
                        else:
                            raw = timing.server_samples(dev, list(graphs), seeds, random.Random(r), require=False)
                    dev.close()
                    for b, us in raw.items():
                        doc["rows"].append({"mode": mode, "variant": v, "round": r, "baseline": b,
                                            "median_us": statistics.median(us[1:])})
            del other
        (out / f"probe-{text}.json").write_text(json.dumps(doc, indent=1) + "\n")
        print(f"\n{text} (slots {p.slots}): median over rounds and baselines, us per launch; ratio to bare")
        for mode in ("offline", "server"):
            med = {v: statistics.median(x["median_us"] for x in doc["rows"] if x["mode"] == mode and x["variant"] == v)
                   for v in VARIANTS}
            print(f"  {mode:8s} " + "  ".join(f"{v} {med[v]:.3f} ({med[v] / med['bare']:.3f})" for v in VARIANTS))
    j.close()


if __name__ == "__main__":
    main()
