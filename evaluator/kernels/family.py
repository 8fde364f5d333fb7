"""A kernel family: one `.cu` template, a declared parameter space, and its constraints.

`render(params)` returns a self-contained source (the parameter `#define`s, then the
template body with any shared `.cuh` inlined) that implements the kernel contract.
`check(params, shape, gpu)` returns None when the parameters are valid for the shape
and GPU, else a one-line reason (shared memory, registers, divisibility, ...).
`repair(params)` applies the companion changes a one-parameter move needs (e.g. a mode that
requires another switch off), so neighbour moves in a search land on valid configurations.
`tuning` names the parameters that tune a configuration without changing its structure (tile,
warp roles, cluster, K split): a search treats configurations that differ only in them as near
neighbours, whose times differ little (`structure(params)` is the rest).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from hgemm.core.record import GpuInfo
from hgemm.core.shape import Shape

Params = dict[str, Any]


def kernel_file(name: str) -> str:
    """Text of a `.cu`/`.cuh` file shipped in evaluator/kernels."""
    return resources.files("hgemm.evaluator.kernels").joinpath(name).read_text()


@dataclass
class Family:
    name: str
    template: str  # file name in evaluator/kernels
    space: dict[str, tuple] = field(default_factory=dict)  # parameter -> allowed values
    description: str = ""
    min_cc: float = 8.0  # lowest compute capability it runs on
    tuning: tuple[str, ...] = ()  # parameters that leave the structure as it is (raster order, ring depth, ...)

    def structure(self, params: Params) -> tuple:
        """The parameters that make the configuration's structure: all but `tuning`, sorted."""
        return tuple(sorted((k, v) for k, v in params.items() if k not in self.tuning))

    def check(self, params: Params, shape: Shape, gpu: GpuInfo | None = None) -> str | None:
        for key, value in params.items():
            if key not in self.space:
                return f"{self.name}: unknown parameter {key}"
            if value not in self.space[key]:
                return f"{self.name}: {key}={value} not in {self.space[key]}"
        missing = set(self.space) - set(params)
        if missing:
            return f"{self.name}: missing parameters {sorted(missing)}"
        if gpu is not None and float(gpu.cc) < self.min_cc:
            return f"{self.name}: needs compute capability {self.min_cc}, GPU has {gpu.cc}"
        return None

    def repair(self, params: Params) -> Params:
        """`params` with the companion changes a single-parameter move implies (a new copy); the base
        family has none. A search calls it on every candidate before `check`."""
        return dict(params)

    def fit(self, params: Params, shape: Shape) -> Params:
        """`params` (a new copy) with the changes `shape` itself requires, for a configuration found on another
        shape (retrieved from the archive); the base family has none."""
        return dict(params)

    def default_tuning(self, params: Params, only_absent: bool = False, shape: Shape | None = None) -> Params:
        """`params` (a new copy) with the tuning parameters whose default follows the structure set as
        `default_params` sets them (for `shape`, where given); with `only_absent`, only those `params` does not
        name (a configuration archived before the parameter existed). The base family has none."""
        return dict(params)

    def render(self, params: Params) -> str:
        defines = "".join(f"#define HG_{k.upper()} {int(v) if isinstance(v, bool) else v}\n" for k, v in sorted(params.items()))
        header = f"// hgemm family {self.name}: " + ", ".join(f"{k}={v}" for k, v in sorted(params.items())) + "\n"
        return header + defines + kernel_file(self.template)
