"""hgemm.bench is an installed package: its tools import like any module, run as `python -m hgemm.bench.NAME`,
and find their data files as package resources; bench/results keeps one archive export, the seed."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from importlib import resources
from pathlib import Path

import hgemm.bench
import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOLS = sorted(m.name for m in pkgutil.iter_modules(hgemm.bench.__path__))


def test_the_maintained_tools_are_in_the_package():
    assert {"confirm_report", "check_wgmma", "cluster_probe", "fit_wgmma_factors", "grid100", "lt_kernels",
            "server_probe"} <= set(TOOLS)  # fmt: skip


@pytest.mark.parametrize("name", TOOLS)
def test_a_tool_imports_without_a_gpu_and_says_how_it_runs(name):
    module = importlib.import_module(f"hgemm.bench.{name}")
    assert f"python -m hgemm.bench.{name}" in (module.__doc__ or ""), f"{name}: usage does not name the module"
    assert callable(module.main)
    assert "sys.path" not in inspect.getsource(module), f"{name} edits sys.path"


@pytest.mark.parametrize("name", ["grid100.txt", "cluster_probe.cu", "floor_kernels.cu"])
def test_data_files_are_package_resources(name):
    assert resources.files("hgemm.bench").joinpath(name).read_text().strip()


def test_results_keep_one_archive_export_the_seed_the_readme_names():
    exports = sorted(p.name for p in (ROOT / "bench" / "results").glob("*.jsonl*"))
    assert len(exports) == 1, exports
    assert exports[0] in (ROOT / "README.md").read_text()
