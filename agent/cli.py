"""The `hgemm` command: a thin Typer shell over the library.

- Each room registers its own commands: the evaluator (`bench`, `eval`, `check`), the archive
  (`hgemm archive ...`), the index (`hgemm index ...`) and the agent (`optimize`, `prompt`, `sweep`).
- Commands parse arguments and call library functions; a `HgemmError` becomes one line on stderr and exit
  code 2.
"""

from __future__ import annotations

import sys

import typer

from hgemm.core.errors import HgemmError

app = typer.Typer(
    name="hgemm",
    help="Search for half-precision GEMM kernels faster than cuBLAS; keep and rank every attempt.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register() -> None:
    from importlib import import_module

    for module in ("hgemm.evaluator.cli", "hgemm.agent.commands", "hgemm.agent.sweep", "hgemm.archive.cli", "hgemm.index.cli",
                   "hgemm.agent.finetune.cli", "hgemm.archive.web.cli"):
        import_module(module).register(app)


_register()


def main() -> None:
    try:
        app()
    except HgemmError as e:
        print(f"hgemm: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
