"""Which shapes a sweep covers and in what order (`hgemm sweep --grid`, `--shard`, `--limit`).

- `--grid full` is the 1,000 configurations M, N, K ∈ `FULL_SIZES`, generated; `--grid grid100` the committed
  100-shape grid of `hgemm.bench`; anything else is a shapes file, one `M N K` per line (`read_grid`).
- `--shard I/N` keeps every N-th shape of the grid starting at the I-th (0-based), before ordering.
- `schedule` orders the shapes still to search: in waves of growing grid distance from the shapes the archive
  already holds (a shape's neighbours come before it, so retrieval finds them), the longest expected search
  first within a wave (a long search started last would keep the other GPUs idle at the end).
- `shape_class` and `flop_decade` are the report's groupings.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

from hgemm.core.errors import BadInput
from hgemm.core.shape import Shape

FULL_SIZES = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 12288, 16384)
GRID100 = Path(str(resources.files("hgemm.bench").joinpath("grid100.txt")))  # package data of hgemm.bench
SHAPE_CLASSES = ("square", "small-M", "K-heavy", "odd", "other")


def full_grid() -> list[Shape]:
    """The 1,000 configurations of the full grid, in (M, N, K) order."""
    return [Shape(M, N, K) for M in FULL_SIZES for N in FULL_SIZES for K in FULL_SIZES]


def read_grid(path: Path | str) -> list[Shape]:
    """Shapes from a grid file: one `M N K` per line; `#` comments and blank lines ignored. A line that is not
    a valid shape is refused with its line number."""
    shapes = []
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"cannot read grid file {path}: {e}") from None
    for n, line in enumerate(text.splitlines(), 1):
        body = line.split("#", 1)[0].strip()
        if not body:
            continue
        parts = body.split()
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise BadInput(f"{path}:{n}: expected 'M N K', got {line.strip()!r}")
        try:
            shapes.append(Shape(int(parts[0]), int(parts[1]), int(parts[2])))
        except BadInput as e:
            raise BadInput(f"{path}:{n}: {e}") from None
    return shapes


def resolve_grid(spec: str) -> tuple[list[Shape], str]:
    """The shapes `--grid` names and the report's default name: `full`, `grid100` or a shapes file."""
    if spec == "full":
        return full_grid(), "full"
    path = GRID100 if spec == "grid100" else Path(spec)
    if not path.is_file():
        raise BadInput(f"grid file {path} does not exist (or use --grid full)")
    shapes = read_grid(path)
    if not shapes:
        raise BadInput(f"grid file {path} holds no shapes")
    duplicates = len(shapes) - len(set(shapes))
    if duplicates:
        raise BadInput(f"grid file {path} names {duplicates} shape(s) twice")
    return shapes, path.stem


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """`I/N` (0 <= I < N) as a pair; None for no sharding."""
    if not text:
        return None
    try:
        i, n = (int(p) for p in text.split("/"))
    except ValueError:
        raise BadInput(f"--shard is I/N, such as 0/2, not {text!r}") from None
    if n < 1 or not 0 <= i < n:
        raise BadInput(f"--shard {text}: need 0 <= I < N")
    return i, n


def shard(shapes: list[Shape], part: tuple[int, int] | None) -> list[Shape]:
    return shapes if part is None else shapes[part[0] :: part[1]]


def flop_decade(shape: Iterable[int]) -> int:
    M, N, K = shape
    return int(math.floor(math.log10(2 * M * N * K)))


def shape_class(shape: Iterable[int]) -> str:
    """The first that applies: square (M = N = K); small-M (M <= 256 and N >= 4M: skinny activations);
    K-heavy (K >= 4 max(M, N)); odd (a dimension that is not a power of two); other."""
    M, N, K = shape
    if M == N == K:
        return "square"
    if M <= 256 and N >= 4 * M:
        return "small-M"
    if K >= 4 * max(M, N):
        return "K-heavy"
    if any(d & (d - 1) for d in (M, N, K)):
        return "odd"
    return "other"


def expected_cost(shape: Iterable[int]) -> float:
    """A search's expected GPU time, up to a constant: launch-bound below ~1e9 FLOPs, then growing with them."""
    M, N, K = shape
    return math.log10(2 * M * N * K + 1e9)


def steps(shapes: Iterable[Shape]) -> dict[int, int]:
    """Each size the shapes use -> its rank among them: one grid step is one rank."""
    return {v: i for i, v in enumerate(sorted({d for s in shapes for d in s}))}


def distance(a: Iterable[int], b: Iterable[int], rank: dict[int, int]) -> int:
    """Grid steps between two shapes (rank differences of each dimension, summed)."""
    return sum(abs(rank[x] - rank[y]) for x, y in zip(a, b, strict=True))


def schedule(pending: list[Shape], done: Iterable[Shape] = ()) -> list[Shape]:
    """The order to search `pending` in: waves by grid steps to the nearest shape already done (or, with none
    done, to the smallest pending shape), so that every shape has a neighbour done or in an earlier wave; the
    longest expected search first within a wave."""
    done = list(done)
    anchors = done or ([min(pending, key=lambda s: (s.M * s.N * s.K, s))] if pending else [])
    rank = steps(list(pending) + anchors)
    waves = {s: min(distance(s, a, rank) for a in anchors) for s in pending}
    return sorted(pending, key=lambda s: (waves[s], -expected_cost(s), s))
