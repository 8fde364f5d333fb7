"""What did the search try? `hgemm optimize M N K` on an empty archive (HGEMM_HOME given), then every evaluation
of the shape: the configuration, the stage, and offline | server median and speedup against the best baseline.

Usage (one GPU): python search_trace.py OUT_DIR M N K
"""

from __future__ import annotations

import glob
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

KEYS = ("bm", "bn", "consumers", "pingpong", "stages", "split_k", "split_dsmem", "stream_k", "cluster_m", "swap_ab",
        "persistent", "epilogue", "group_m")  # fmt: skip


def main() -> None:
    out, (M, N, K) = Path(sys.argv[1]), (int(x) for x in sys.argv[2:5])
    home = os.environ["HGEMM_HOME"]
    cli = [sys.executable, "-c", "from hgemm.agent.cli import main; main()"]
    done = subprocess.run([*cli, "optimize", str(M), str(N), str(K), "--quiet", "--json", str(out / "opt.json")],
                          capture_output=True, text=True)  # fmt: skip
    print(done.stdout[-3000:], done.stderr[-3000:])
    (db,) = glob.glob(f"{home}/**/*.db", recursive=True)[:1] or [None]
    con = sqlite3.connect(db)
    rows = con.execute(
        "SELECT e.kernel, e.stage, e.mode, e.median_us, e.speedup_best, k.family, k.params FROM evaluations e "
        "JOIN kernels k ON k.hash = e.kernel WHERE e.M=? AND e.N=? AND e.K=? ORDER BY e.id", (M, N, K)
    ).fetchall()  # fmt: skip
    table = []
    for kernel, stage, mode, us, speed, family, params in rows:
        p = json.loads(params or "{}")
        table.append({"kernel": kernel[:12], "stage": stage, "mode": mode, "us": us, "speedup": speed,
                      "family": family, **{k: p.get(k) for k in KEYS}})  # fmt: skip
    (out / f"trace-{M}x{N}x{K}.json").write_text(json.dumps(table, indent=1))
    for r in table:
        cfg = " ".join(f"{k}={r[k]}" for k in KEYS if r.get(k) is not None)
        us = f"{r['us']:.2f}" if r["us"] else "-"
        sp = f"{r['speedup']:.3f}" if r["speedup"] else "-"
        print(f"{r['stage']:6s} {r['mode']:8s} {us:>8s} {sp:>6s} {r['family']:7s} {cfg}")


if __name__ == "__main__":
    main()
