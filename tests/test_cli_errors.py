"""Bad input gets one clear line on stderr and exit code 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

HONEST = "tests/honest"


def hgemm(*args: str, env_home) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hgemm.agent.cli", *args], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "HGEMM_HOME": str(env_home)})


def one_line_error(out: subprocess.CompletedProcess, needle: str) -> None:
    assert out.returncode == 2, out
    assert "Traceback" not in out.stderr
    lines = [ln for ln in out.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, out.stderr
    assert needle in lines[0]


@pytest.mark.parametrize(
    "shape, needle",
    [(("0", "64", "64"), "M must be positive"), (("64", "64", "70000"), "larger than"),
     (("65536", "65536", "64"), "elements")],
)
def test_bad_shapes(shape, needle, hgemm_home):
    one_line_error(hgemm("bench", *shape, env_home=hgemm_home), needle)


def test_missing_kernel_file(tmp_path, hgemm_home):
    one_line_error(hgemm("eval", str(tmp_path / "nope.cu"), "64", "64", "64", env_home=hgemm_home), "no such file")


def test_non_utf8_kernel_file(tmp_path, hgemm_home):
    bad = tmp_path / "latin1.cu"
    bad.write_bytes(b"// caf\xe9\nextern \"C\" int hgemm_run();\n")
    one_line_error(hgemm("eval", str(bad), "64", "64", "64", env_home=hgemm_home), "not UTF-8")


def test_bad_mode(tmp_path, hgemm_home):
    one_line_error(hgemm("bench", "64", "64", "64", "--mode", "fast", env_home=hgemm_home), "--mode")


def test_no_gpu_is_one_line():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    import tempfile

    with tempfile.TemporaryDirectory() as home:
        one_line_error(hgemm("bench", "64", "64", "64", env_home=home), "no CUDA GPU")
