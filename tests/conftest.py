"""Shared fixtures: a fresh state root per test, the test kernels built once per session into one
compile cache (the slow part, shared by the compile, audit and `hgemm check` tests), and the `gpu`
marker's skip rule."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def hgemm_home(tmp_path, monkeypatch):
    home = tmp_path / "hgemm-home"
    monkeypatch.setenv("HGEMM_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def compile_home(tmp_path_factory) -> Path:
    """The state root of the session's shared compile cache."""
    return tmp_path_factory.mktemp("compile-home")


@pytest.fixture(scope="session")
def compiled(compile_home) -> dict:
    """Every test kernel that may be built, built once for sm_90a and sm_80 with the checks skipped (the
    refused ones must build too, but the cheats refused as compile errors); the cache keeps each audit verdict
    for the checked calls that follow."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    from adversarial.catalog import adversarial, honest
    from hgemm.evaluator.compile import compile_sources

    kernels = [k for k in adversarial() + honest() if k.builds]
    before = os.environ.get("HGEMM_HOME")
    os.environ["HGEMM_HOME"] = str(compile_home)
    try:
        results = compile_sources([k.source for k in kernels], archs=("sm_90a", "sm_80"), check=False)
    finally:
        if before is None:
            del os.environ["HGEMM_HOME"]
        else:
            os.environ["HGEMM_HOME"] = before
    return {k.name: r for k, r in zip(kernels, results)}


def _gpu_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU on this machine"
    if shutil.which("nvcc") is None:
        return "nvcc is not on PATH"
    return None


def pytest_collection_modifyitems(config, items):
    reason = None
    checked = False
    for item in items:
        if "gpu" in item.keywords:
            if not checked:
                reason, checked = _gpu_reason(), True
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"gpu test: {reason}"))
