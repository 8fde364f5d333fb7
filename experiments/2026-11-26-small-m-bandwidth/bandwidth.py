"""How close the small-M shapes of a sweep report come to the HBM floor in server mode, ours and the best
baseline's: bytes moved (A, B and C once each) over nominal HBM bandwidth, against the server time less a fixed
per-call cost (the faster server time of the report's 1x1x1 row).

    python bandwidth.py REPORT.json [--bandwidth 3.35e12] > table.md"""

import argparse
import json
import statistics


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("--bandwidth", type=float, default=3.35e12, help="bytes/s (H100 SXM nominal: 3.35e12)")
    args = ap.parse_args()
    rows = json.load(open(args.report))["rows"]
    tiny = next(r for r in rows if (r["M"], r["N"], r["K"]) == (1, 1, 1))
    fixed = min(tiny["server_us"], tiny["server_us"] * tiny["server_speedup_best"])
    small_m = [r for r in rows if r["M"] <= 256 and r["N"] >= 4 * r["M"] and r.get("server_us")]
    print(
        f"Fixed cost of a server-mode call (1x1x1): {fixed:.2f} us. HBM at {args.bandwidth / 1e12:.2f} TB/s.\n"
    )
    print("| M | N | K | MB moved | HBM floor us | best baseline us | ours us | baseline % of HBM | ours % |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    big_b, big_o = [], []
    for r in sorted(small_m, key=lambda r: (r["M"], r["N"], r["K"])):
        M, N, K = r["M"], r["N"], r["K"]
        moved = 2 * (M * K + K * N + M * N)
        floor = moved / args.bandwidth * 1e6
        ours = r["server_us"]
        base = ours * r["server_speedup_best"]  # speedup = baseline time / ours
        eb, eo = floor / (base - fixed), floor / (ours - fixed)
        if moved > 20e6:
            big_b.append(eb)
            big_o.append(eo)
        print(f"| {M} | {N} | {K} | {moved / 1e6:.1f} | {floor:.1f} | {base:.1f} | {ours:.1f} | {100 * eb:.0f}% | "
              f"{100 * eo:.0f}% |")  # fmt: skip
    print(f"\nMedian over the {len(big_b)} shapes moving more than 20 MB: best baseline "
          f"{100 * statistics.median(big_b):.0f}% of HBM, ours {100 * statistics.median(big_o):.0f}%.")  # fmt: skip


if __name__ == "__main__":
    main()
