"""The layout's rules, read from the sources: one installed namespace, a core that imports no room,
test support the product never imports, and imports between rooms that only run downhill."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from hgemm.core.errors import BadInput
from hgemm.core.shape import MAX_DIM, Shape

ROOT = Path(__file__).resolve().parents[1]
ROOMS = {"core": ROOT / "hgemm" / "core", "testing": ROOT / "hgemm" / "testing", "evaluator": ROOT / "evaluator",
         "archive": ROOT / "archive", "index": ROOT / "index", "agent": ROOT / "agent", "prompts": ROOT / "prompts",
         "bench": ROOT / "bench"}
# Which rooms each room may import (besides itself). The product (all but testing) never imports testing.
ALLOWED = {
    "core": set(),
    "evaluator": {"core"},
    "archive": {"core"},
    "index": {"core", "archive"},
    "prompts": {"core"},
    "agent": {"core", "evaluator", "archive", "index", "prompts"},
    "bench": {"core", "evaluator", "archive", "index", "agent", "testing"},
    "testing": {"core", "evaluator"},
}


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "hgemm" and len(parts) > 1 and parts[1] in ROOMS:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("room", sorted(ROOMS))
def test_rooms_import_only_downhill(room):
    wrong = {}
    for path in sorted(ROOMS[room].rglob("*.py")):
        bad = _imports(path) - ALLOWED[room] - {room}
        if bad:
            wrong[str(path.relative_to(ROOT))] = sorted(bad)
    assert not wrong, f"{room} may import only {sorted(ALLOWED[room])}: {wrong}"


def test_the_wheel_holds_one_top_level_package():
    text = (ROOT / "pyproject.toml").read_text()
    packages = text.split("packages = [", 1)[1].split("]", 1)[0]
    names = [n.strip().strip('"') for n in packages.replace("\n", " ").split(",") if n.strip()]
    assert names and all(n == "hgemm" or n.startswith("hgemm.") for n in names), names


def test_a_shape_is_validated_once_and_behaves_like_a_triple():
    s = Shape(1024, 512, 64)
    M, N, K = s
    assert (M, N, K) == (1024, 512, 64) and str(s) == "1024x512x64" and s.flops == 2 * 1024 * 512 * 64
    assert Shape.of("1024x512x64") == s == Shape.of((1024, 512, 64)) == Shape.of("1024 512 64")
    assert hash(s) == hash(Shape(1024, 512, 64)) and sorted([Shape(2, 1, 1), s, Shape(1, 9, 9)])[0] == Shape(1, 9, 9)
    with pytest.raises(AttributeError):
        s.M = 5  # frozen
    for bad, words in [((0, 1, 1), "M must be positive"), ((1, MAX_DIM + 1, 1), "larger than"),
                       ((1.5, 1, 1), "must be an integer"), ((True, 1, 1), "must be an integer"),
                       ((65536, 65536, 1), "elements")]:
        with pytest.raises(BadInput, match=words):
            Shape(*bad)
    with pytest.raises(BadInput, match="three integers"):
        Shape.of("12x34")
