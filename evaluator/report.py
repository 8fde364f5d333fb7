"""Rich tables for evaluation records and baseline benches."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from hgemm.core.record import EvalRecord


def _us(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def print_bench(table: dict, console: Console | None = None) -> None:
    console = console or Console()
    M, N, K = table["M"], table["N"], table["K"]
    t = Table(title=f"{M}x{N}x{K} on {table['gpu']} (driver {table['driver']})")
    for col in ("mode", "contender", "median us", "p10 us", "p90 us", "TFLOP/s"):
        t.add_column(col, justify="right" if "us" in col or "TFLOP" in col else "left")
    flops = 2.0 * M * N * K
    for mode, m in table["modes"].items():
        for name, s in sorted(m["baselines"].items(), key=lambda kv: kv[1]["median_us"]):
            t.add_row(mode, name, _us(s["median_us"]), _us(s["p10_us"]), _us(s["p90_us"]),
                      f"{flops / (s['median_us'] * 1e-6) / 1e12:.1f}")
        t.add_row(mode, "[dim]floor[/dim]", _us(m["floor_us"]), "", "", "")
    console.print(t)
    for name, why in table.get("missing", {}).items():
        console.print(f"[yellow]{name} missing:[/yellow] {why}")


def print_record(rec: EvalRecord, console: Console | None = None) -> None:
    console = console or Console()
    status = "[green]correct[/green]" if rec.ok else f"[red]{rec.failure_kind}[/red]"
    console.print(f"kernel {rec.kernel_hash}  {rec.M}x{rec.N}x{rec.K}  {rec.gpu}  {status}")
    if rec.failure_message:
        console.print(rec.failure_message, markup=False)
    if rec.resources:
        r = rec.resources
        console.print(f"{r.arch}: {r.registers} registers, {r.shared_bytes} B static smem, "
                      f"{r.spill_stores or 0}/{r.spill_loads or 0} spill stores/loads, compile {_us(r.compile_seconds)} s")
    if rec.max_rel_err is not None:
        console.print(f"max relative error {rec.max_rel_err:.3g} (cuBLAS {rec.ref_rel_err or 0:.3g})")
    for mode, m in rec.modes.items():
        t = Table(title=f"{mode}: floor {m.floor_us:.2f} us, candidate at {100 * (m.floor_fraction or 0):.0f}% of floor")
        for col in ("contender", "median us", "p10 us", "p90 us", "speedup"):
            t.add_column(col)
        if m.candidate:
            t.add_row("candidate", _us(m.candidate.median_us), _us(m.candidate.p10_us), _us(m.candidate.p90_us), "")
        for b, s in m.baselines.items():
            t.add_row(b, _us(s.median_us), _us(s.p10_us), _us(s.p90_us), f"{m.speedup.get(b, 0):.3f}x")
        console.print(t)
        if m.speedup_best:
            console.print(f"speedup vs best baseline ({m.best_baseline}): {m.speedup_best:.3f}x")
    if rec.ncu:
        console.print("NCU: " + ", ".join(f"{k}={v}" for k, v in rec.ncu.items()))
