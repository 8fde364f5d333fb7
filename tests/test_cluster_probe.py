"""hgemm.bench.cluster_probe builds its probe kernels with nvcc (sm_90a) and exports the launcher it calls."""

from __future__ import annotations

import shutil

import pytest
from hgemm.bench import cluster_probe


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_probe_kernels_build_and_export_the_launcher(tmp_path):
    lib = cluster_probe.build(tmp_path)
    assert lib.probe_launch.argtypes is not None and len(lib.probe_launch.argtypes) == 5
    assert (tmp_path / "cluster_probe.so").stat().st_size > 0


def test_every_variant_has_a_name():
    assert sorted(cluster_probe.VARIANTS) == list(range(6))
    assert all(cluster_probe.VARIANTS.values())
