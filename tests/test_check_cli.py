"""`hgemm check`: every test kernel refused before a GPU is needed is refused by the command, for
the kind its EXPECT line names; the honest kernels are accepted; exit codes are 0 (accepted),
1 (refused, with the reasons) and 2 (bad input: one line on stderr, no traceback). The kernels
come from the session's shared compile cache, so the command judges them without rebuilding."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from adversarial.catalog import adversarial, honest
from hgemm.agent.cli import app
from typer.testing import CliRunner

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
CPU_STAGE = [k for k in adversarial() if k.cpu_stage]


def check(path: Path) -> tuple[int, dict]:
    out = CliRunner().invoke(app, ["check", str(path), "--json"], catch_exceptions=False)
    return out.exit_code, json.loads(out.stdout)


def hgemm(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hgemm.agent.cli", *args], capture_output=True, text=True,
                          timeout=600, env={**os.environ, **(env or {})})  # fmt: skip


def test_the_cpu_stage_catalogue_covers_every_class():
    kinds = {k.expect for k in CPU_STAGE}
    assert {("static_check",), ("object_audit",)} <= kinds
    assert len([k for k in CPU_STAGE if k.expect == ("object_audit",)]) >= 6


@needs_nvcc
@pytest.mark.parametrize("kernel", CPU_STAGE, ids=lambda k: k.name)
def test_check_refuses_each_cpu_stage_adversarial_kernel(kernel, compiled, compile_home, monkeypatch):
    monkeypatch.setenv("HGEMM_HOME", str(compile_home))
    code, verdict = check(kernel.path)
    assert code == 1, verdict
    assert verdict["accepted"] is False and verdict["failure_kind"] in kernel.expect, (
        kernel.summary,
        verdict,
    )
    stage = "compile" if verdict["failure_kind"] == "compile_error" else verdict["failure_kind"]
    assert verdict["stage"] == stage and verdict["reasons"], verdict
    if kernel.expect == ("object_audit",):
        assert verdict["resources"]["object_bytes"] > 0  # measured, even when too big to read further


@needs_nvcc
@pytest.mark.parametrize("kernel", honest(), ids=lambda k: k.name)
def test_check_accepts_the_honest_kernels(kernel, compiled, compile_home, monkeypatch):
    monkeypatch.setenv("HGEMM_HOME", str(compile_home))
    code, verdict = check(kernel.path)
    assert code == 0 and verdict["accepted"] and verdict["reasons"] == [], verdict
    assert verdict["stage"] == "object_audit" and verdict["failure_kind"] is None
    res = verdict["resources"]
    assert set(res["per_arch"]) == {"sm_90a", "sm_80"} and res["per_arch"]["sm_80"]["registers"] > 0
    assert (
        res["library_bytes"] > res["object_bytes"] > 0 and res["device_static_bytes"] < 1024
    )  # CuTe: 11 bytes
    assert "cudaGetLastError" in res["imports"]
    assert verdict["sandbox"]  # what this host's sandbox provides, in words


@needs_nvcc
def test_exit_codes_and_text_output(compiled, compile_home, tmp_path):
    env = {"HGEMM_HOME": str(compile_home)}
    accepted = hgemm("check", str(honest()[0].path), env=env)
    assert accepted.returncode == 0 and "accepted" in accepted.stdout, accepted
    hoard = next(k for k in adversarial() if k.name == "device_hoard")
    refused = hgemm("check", str(hoard.path), env=env)
    assert refused.returncode == 1 and "refused at object_audit" in refused.stdout, refused
    assert "__device__" in refused.stdout and "Traceback" not in refused.stderr


def one_line_error(out: subprocess.CompletedProcess, needle: str) -> None:
    assert out.returncode == 2, out
    assert "Traceback" not in out.stderr
    lines = [ln for ln in out.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], out.stderr


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    one_line_error(hgemm("check", str(tmp_path / "nope.cu")), "no such file")
    latin1 = tmp_path / "latin1.cu"
    latin1.write_bytes(b'// caf\xe9\nextern "C" int hgemm_run();\n')
    one_line_error(hgemm("check", str(latin1)), "not UTF-8")
    no_nvcc = {"PATH": str(tmp_path), "CUDA_HOME": "", "CUDA_PATH": "", "HGEMM_HOME": str(tmp_path / "home")}
    one_line_error(hgemm("check", str(honest()[0].path), env=no_nvcc), "nvcc")
