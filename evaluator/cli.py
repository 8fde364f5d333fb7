"""`hgemm bench` (the four baselines and the floor), `hgemm eval` (one typed evaluation record) and
`hgemm check` (every stage that needs no GPU: static check, compile, object audit)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import typer

from hgemm.core.errors import BadInput
from hgemm.core.shape import Shape

MODE_HELP = "offline (CUDA graph, warm L2), server (L2 flushed, random gaps) or both"


def _modes(mode: str) -> tuple[str, ...]:
    if mode == "both":
        return ("offline", "server")
    if mode in ("offline", "server"):
        return (mode,)
    raise BadInput(f"--mode must be offline, server or both, not {mode!r}")


def read_kernel(path: Path) -> str:
    if not path.exists():
        raise BadInput(f"{path}: no such file")
    if not path.is_file():
        raise BadInput(f"{path}: not a file")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    if not text.strip():
        raise BadInput(f"{path}: empty file")
    return text


def bench(
    M: int = typer.Argument(..., help="rows of A and C"),
    N: int = typer.Argument(..., help="columns of B and C"),
    K: int = typer.Argument(..., help="columns of A, rows of B"),
    mode: str = typer.Option("both", help=MODE_HELP),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table"),
    fresh: bool = typer.Option(False, "--fresh", help="time again instead of reading this GPU's cached figures"),
) -> None:
    """Time the four cuBLAS baselines and show the physical floor for one shape."""
    shape = Shape(M, N, K)
    modes = _modes(mode)
    from hgemm.evaluator.local import LocalEvaluator

    with LocalEvaluator() as ev:
        table = ev.baseline_table(shape, modes, fresh=fresh)
    if as_json:
        print(json.dumps(table, indent=1))
        return
    from hgemm.evaluator.report import print_bench

    print_bench(table)


def eval_kernel(
    kernel: Path = typer.Argument(..., help="the candidate .cu file"),
    M: int = typer.Argument(...),
    N: int = typer.Argument(...),
    K: int = typer.Argument(...),
    mode: str = typer.Option("both", help=MODE_HELP),
    ncu: bool = typer.Option(False, "--ncu", help="collect Nsight Compute metrics"),
    sanitize: bool = typer.Option(False, "--sanitize", help="run compute-sanitizer memcheck and racecheck"),
    as_json: bool = typer.Option(False, "--json", help="print the record as JSON"),
) -> None:
    """Compile, check and time one candidate kernel against the baselines."""
    shape = Shape(M, N, K)
    source = read_kernel(kernel)
    modes = _modes(mode)
    from hgemm.evaluator.local import LocalEvaluator

    with LocalEvaluator() as ev:
        (record,) = ev.evaluate([source], shape, stage="full", modes=modes, ncu=ncu, sanitize=sanitize)
    if as_json:
        print(json.dumps(record.to_dict(), indent=1))
    else:
        from hgemm.evaluator.report import print_record

        print_record(record)
    raise typer.Exit(0 if record.ok else 1)


def check_verdict(result) -> dict:
    """What `hgemm check --json` prints for one `CompileResult` (and what this host's sandbox provides)."""
    from hgemm.evaluator import sandbox

    stage = {"bad_source": "static_check", "static_check": "static_check", "object_audit": "object_audit"}
    if result.ok:
        reasons = []
    elif result.failure_kind == "object_audit":
        reasons = list(result.audit_reasons)
    elif result.failure_kind == "static_check":
        reasons = result.log.splitlines()
    else:  # bad source, compiler error (its first error line; the log has the rest), timeout
        reasons = [result.message or result.failure_kind or "refused"]
    return {
        "accepted": bool(result.ok),
        "stage": "object_audit" if result.ok else stage.get(result.failure_kind, "compile"),
        "failure_kind": result.failure_kind,
        "reasons": reasons,
        "resources": {
            "per_arch": {arch: dataclasses.asdict(r) for arch, r in result.resources.items()},
            **result.audit,
        },
        "sandbox": sandbox.report().describe(),
    }


def check_kernel(
    kernel: Path = typer.Argument(..., help="the candidate .cu file"),
    as_json: bool = typer.Option(False, "--json", help="print the verdict as JSON"),
) -> None:
    """Judge a candidate without a GPU: static check, compile and object audit (exit 0 accepted, 1 refused)."""
    source = read_kernel(kernel)
    from hgemm.evaluator.compile import compile_source

    result = compile_source(source)
    verdict = check_verdict(result)
    if as_json:
        print(json.dumps(verdict, indent=1))
    elif verdict["accepted"]:
        res = verdict["resources"]
        print(
            f"{kernel}: accepted ({res.get('library_bytes', 0)} byte library, "
            f"{res.get('device_static_bytes', 0)} bytes of static device memory)"
        )
    else:
        print(f"{kernel}: refused at {verdict['stage']} ({verdict['failure_kind']})")
        for reason in verdict["reasons"]:
            print(f"  {reason}")
        if verdict["stage"] == "compile" and result.log:
            print(result.log.rstrip())
    raise typer.Exit(0 if verdict["accepted"] else 1)


def register(app: typer.Typer) -> None:
    app.command("bench")(bench)
    app.command("eval")(eval_kernel)
    app.command("check")(check_kernel)
