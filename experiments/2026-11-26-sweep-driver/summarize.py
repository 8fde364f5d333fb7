"""The table in NOTES.md, from the runs in `results/` (`measure.py --out results/CODE-dDELAY-rN.json`).

    python summarize.py [results]

Per code version and delay: how many repeats, the median search-phase wall of 1 and 2 slots, the median and range
of their ratio (the 2-slot throughput over the 1-slot one), and the median CPU seconds of the driver process in the
search phase."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "results"
    groups: dict[tuple[str, float], list[dict]] = {}
    for path in sorted(folder.glob("*-d*-r*.json")):
        data = json.loads(path.read_text())
        runs = {r["slots"]: r for r in data["runs"]}
        if 1 in runs and 2 in runs:
            groups.setdefault((path.name.split("-")[0], data["delay_s"]), []).append(runs)
    print("| code | delay s | repeats | 1 slot: search s | 2 slots: search s | 2/1 throughput (range) "
          "| driver CPU s, 1 / 2 slots |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for (code, delay), reps in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        one = [r[1]["search_wall_s"] for r in reps]
        two = [r[2]["search_wall_s"] for r in reps]
        ratios = [a / b for a, b in zip(one, two)]
        cpu1 = statistics.median(r[1]["search_driver_cpu_s"] for r in reps)
        cpu2 = statistics.median(r[2]["search_driver_cpu_s"] for r in reps)
        print(
            f"| {code} | {delay:g} | {len(reps)} | {statistics.median(one):.1f} | {statistics.median(two):.1f} "
            f"| {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) | {cpu1:.1f} / {cpu2:.1f} |"
        )


if __name__ == "__main__":
    main()
