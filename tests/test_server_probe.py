"""hgemm.bench.server_probe: finds each reported kernel's family and parameters in an archive export, and refuses
bad input before it touches a GPU."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hgemm.bench import server_probe

from hgemm.core.shape import Shape

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results"
REPORT = RESULTS / "grid100-r10-H100-2026-11-24.json"  # the latest grid100 report and its seed archive
ARCHIVE = RESULTS / "archive-grid100-r10-H100-2026-11-24.jsonl.xz"


def test_kernel_params_come_from_the_export():
    rows = {(r["M"], r["N"], r["K"]): r for r in json.loads(REPORT.read_text())["rows"]}
    wanted = {rows[(512, 8192, 512)]["kernel"], rows[(64, 64, 64)]["kernel"]}
    found = server_probe.kernel_params(ARCHIVE, wanted)
    assert set(found) == wanted
    family, params = found[rows[(512, 8192, 512)]["kernel"]]
    assert family == rows[(512, 8192, 512)]["family"] == "wgmma"
    from hgemm.evaluator.kernels import get_family

    fam = get_family(family)
    assert fam.check(params, Shape(512, 8192, 512)) is None


@pytest.mark.parametrize(
    "args, message",
    [
        (["--shapes", "512x8192x512", "--variants", "dirty,lukewarm"], "--variants"),
        (["--shapes", "512x8192"], "--shapes"),
        (["--shapes", "512xbigx512"], "--shapes"),
        (["--shapes", "512x8192x512", "--also", "{bm: 64}"], "--also"),
        (["--shapes", "100x100x100"], "no kernel in the report"),
        (["--shapes", "512x8192x512", "--define", "HG_L2_PREFETCH"], "--define"),
        (["--shapes", "512x8192x512", "--define", "STAGES=4"], "--define"),
    ],
)
def test_bad_input_is_refused_with_a_reason(args, message, capsys):
    with pytest.raises(SystemExit) as exc:
        server_probe.main([str(REPORT), str(ARCHIVE), *args])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_the_floor_kernels_build_under_the_contract_for_both_targets():
    from hgemm.evaluator.compile import compile_sources

    source = server_probe.FLOOR_SOURCE.read_text()  # package data, as the tool reads it
    built = compile_sources([f"#define HG_FLOOR {i}\n{source}" for i in (0, 1)], archs=("sm_90a", "sm_80"))
    assert all(b.ok for b in built), [b.message for b in built]  # the static check of host code passed too
    assert built[0].kernel_hash != built[1].kernel_hash
