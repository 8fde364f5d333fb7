"""Shared fixtures: a fresh state root per test, and the `gpu` marker's skip rule."""

from __future__ import annotations

import shutil

import pytest


@pytest.fixture(autouse=True)
def hgemm_home(tmp_path, monkeypatch):
    home = tmp_path / "hgemm-home"
    monkeypatch.setenv("HGEMM_HOME", str(home))
    return home


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
