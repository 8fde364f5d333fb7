"""Docs that can't drift: every command has help text and appears in the README."""

from __future__ import annotations

from pathlib import Path

import typer.main
from hgemm.agent.cli import app

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def _commands(group, prefix=()):
    for name, cmd in group.commands.items():
        yield (*prefix, name), cmd
        if hasattr(cmd, "commands"):
            yield from _commands(cmd, (*prefix, name))


def test_every_command_has_help_and_is_in_the_readme():
    root = typer.main.get_command(app)
    seen = list(_commands(root))
    assert len(seen) >= 20
    for path, cmd in seen:
        assert (cmd.help or "").strip(), f"hgemm {' '.join(path)} has no help text"
        if len(path) == 1:
            assert f"hgemm {path[0]}" in README, f"hgemm {path[0]} is not in the README"
        else:
            assert path[-1] in README and f"hgemm {path[0]}" in README, f"hgemm {' '.join(path)} is not in the README"


def test_readme_has_exactly_two_setup_commands_and_ci_runs_the_test_one():
    setup = README.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    blocks = [b.strip() for b in setup.split("```")[1::2]]
    assert blocks == ["make run", "make test"]
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
    assert "make test" in ci
