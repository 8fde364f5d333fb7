"""bench/cluster_probe.py builds its probe kernels with nvcc (sm_90a) and exports the launcher it calls."""

from __future__ import annotations

import shutil

import pytest
from bench_script import load_bench


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_probe_kernels_build_and_export_the_launcher(tmp_path):
    lib = load_bench("cluster_probe").build(tmp_path)
    assert lib.probe_launch.argtypes is not None and len(lib.probe_launch.argtypes) == 5
    assert (tmp_path / "cluster_probe.so").stat().st_size > 0


def test_every_variant_has_a_name():
    module = load_bench("cluster_probe")
    assert sorted(module.VARIANTS) == list(range(6))
    assert all(module.VARIANTS.values())
