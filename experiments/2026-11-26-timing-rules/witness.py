"""Fourth probe (runs witness-r1 .. r3, README): does the witness after every sample, which only the candidate gets, slow the
candidate's next offline sample on tiny shapes? Everything in one process: the judge's buffers and baselines,
and an honest family kernel (trusted here) loaded beside them, so the process boundary plays no part.

    python witness.py OUT_DIR [SHAPES] [ROUNDS] [FAMILY]

Variants, each applied to the kernel and to the baselines alike: none (the graph on inputs given once), refresh
(new values into A before every sample), witness (the witness kernels on the sample's outputs after it),
both (what the rules do to a candidate), same (the same values written into A before every sample). Prints median time per launch over rounds, ratio to none.
"""

from __future__ import annotations

import ctypes
import json
import random
import statistics
import sys
from pathlib import Path

import torch
from hgemm.evaluator import timing
from hgemm.evaluator.compile import compile_sources
from hgemm.evaluator.judge import WITNESS_SAMPLES, Judge
from hgemm.evaluator.kernels import get_family
from hgemm.evaluator.local import _compile_shim
from hgemm.evaluator.runner import WORKSPACE_BYTES, Buffers, StreamDevice, derive, refresh, witnesses

from hgemm.core.shape import Shape

# ruff: noqa: B023  (the closures run inside the loop that binds them)

VARIANTS = {"none": (False, False), "refresh": (True, False), "witness": (False, True), "both": (True, True),
            "same": ("same", False)}


def kernel_graph(j: Judge, lib_path: str, slots: int):
    """The family kernel's graph of one launch per slot, captured on the problem's stream; its replay."""
    p = j.problem
    s = p.stream.cuda_stream
    b = Buffers(p.arena.base, p.layout)
    run = ctypes.CDLL(lib_path, mode=ctypes.RTLD_LOCAL).hgemm_run
    vp, ci = ctypes.c_void_p, ctypes.c_int
    run.restype, run.argtypes = ci, [vp, vp, vp, vp, ci, ci, ci, vp, ctypes.c_size_t, vp]

    def call(slot: int) -> None:
        rc = run(b["A"] + 2 * slot * p.M * p.K, b["B"], b["Bt"], b[f"C{slot}"], p.M, p.N, p.K, b["W"],
                 WORKSPACE_BYTES, s)  # fmt: skip
        assert rc == 0, rc

    call(0)  # eager first: the kernel sets its attributes outside the capture
    j.rt.stream_sync(s)
    j.rt.begin_capture(s)
    for slot in range(slots):
        call(slot)
    exe = j.rt.instantiate(j.rt.end_capture(s))
    return lambda: j.rt.graph_launch(exe, s)


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    shapes = (sys.argv[2] if len(sys.argv) > 2 else "128x128x128,512x512x512,1024x1024x1024").split(",")
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    family = get_family(sys.argv[4] if len(sys.argv) > 4 else "small")
    empty, shim = _compile_shim("empty.cu"), _compile_shim("runner.cu", trusted=True)
    j = Judge()
    for text in shapes:
        shape = Shape.of(text)
        (built,) = compile_sources([family.render(family.default_params(shape))])
        j.prepare(shape.M, shape.N, shape.K, empty, shim)
        p = j.problem
        s = p.stream.cuda_stream
        buf = Buffers(p.arena.base, p.layout)
        doc = {"shape": text, "family": family.name, "slots": p.slots, "rows": []}
        for mode in ("offline", "server"):
            slots = p.slots if mode == "offline" else 1
            replays = {"kernel": kernel_graph(j, built.lib_path, slots),
                       **{b: g.replay for b, g in j.baselines.graphs(slots).items()}}  # fmt: skip
            p.start_timing(j.rng.getrandbits(63), slots)
            refresh(j.shim, buf, p.M, p.K, slots, 1, s)
            for r in range(rounds):
                for v in random.sample(list(VARIANTS), len(VARIANTS)):
                    new, witness = VARIANTS[v]
                    on_refresh = ((lambda seed: refresh(j.shim, buf, p.M, p.K, slots, seed, s)) if new is True
                                  else (lambda _seed: refresh(j.shim, buf, p.M, p.K, slots, 12345, s)) if new
                                  else None)  # fmt: skip
                    on_after = ((lambda _n, i, seed: witnesses(j.rt, j.shim, buf, p.M, p.N, slots,
                                                               i % WITNESS_SAMPLES, seed, s))
                                if witness else None)  # fmt: skip
                    dev = StreamDevice(j.rt, s, j.shim, replays, p.flush_ptr, p.flush_bytes, on_refresh, on_after)
                    seeds = [derive(j.rng.getrandbits(62), 9) for _ in range(16 if mode == "offline" else 31)]
                    with torch.cuda.stream(p.stream):
                        if mode == "offline":
                            raw = timing.offline_samples(dev, list(replays), seeds, {n: slots for n in replays})
                        else:
                            raw = timing.server_samples(dev, list(replays), seeds, random.Random(r), require=False)
                    dev.close()
                    for who, us in raw.items():
                        doc["rows"].append({"mode": mode, "variant": v, "round": r, "who": who,
                                            "median_us": statistics.median(us[1:])})
        (out / f"witness-{text}.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")
        print(f"\n{text} ({family.name}, slots {p.slots}): median over rounds, us per launch; ratio to none; "
              f"samples dropped so far {timing.dropped_samples}")
        for mode in ("offline", "server"):
            for who in ("kernel", "baselines"):
                sel = [x for x in doc["rows"] if x["mode"] == mode and (x["who"] == "kernel") == (who == "kernel")]
                med = {v: statistics.median(x["median_us"] for x in sel if x["variant"] == v) for v in VARIANTS}
                print(f"  {mode:8s} {who:9s} " + "  ".join(f"{v} {t:.3f} ({t / med['none']:.3f})" for v, t in med.items()))
    j.close()


if __name__ == "__main__":
    main()
