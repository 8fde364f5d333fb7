"""The sandbox (evaluator/sandbox.py, evaluator/jail.py) on this machine: what a sandboxed process can and
cannot do, its limits, and that compiles stay bounded. Skips, with the reason, only where this host cannot
make namespaces or load seccomp."""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path

import pytest
from hgemm.evaluator import compile_cache, sandbox
from hgemm.evaluator.compile import compile_source

TESTS = str(Path(__file__).parent)


@pytest.fixture
def folder(hgemm_home):
    return sandbox.private_folder("test-")


def need_namespaces():
    if not sandbox.report().namespaces:
        pytest.skip(f"this host makes no namespaces: {sandbox.report().describe()}")


def test_a_compile_writes_only_its_folder_and_sees_no_secrets(folder, tmp_path, monkeypatch):
    need_namespaces()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    outside = tmp_path / "outside"
    code, out = sandbox.run(["sh", "-c", f'echo in > "$HOME/in"; echo out > {outside}; echo "key=$OPENAI_API_KEY";'
                             'echo "home=$HOME tmp=$TMPDIR"'], "compile", folder, 30)
    assert code == 0, out
    assert (folder / "in").read_text() == "in\n"
    assert not outside.exists() and "Read-only file system" in out
    assert "key=\n" in out or out.count("key=") == 1 and "sk-secret" not in out
    assert f"home={folder} tmp={folder}" in out


def test_no_network_and_no_other_processes(folder):
    need_namespaces()
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    threading.Thread(target=lambda: server.accept(), daemon=True).start()
    probe = (f"import socket; s = socket.socket(); s.settimeout(3)\n"
             f"try:\n    s.connect(('127.0.0.1', {port})); print('connected')\n"
             f"except OSError as e:\n    print('refused', e.errno)\n"
             "import os; print('pids', sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))")
    code, out = sandbox.run(["python3", "-c", probe], "compile", folder, 30)
    server.close()
    assert code == 0, out
    assert "refused" in out and "connected" not in out
    pids = json.loads(out.split("pids", 1)[1].strip().replace("'", '"'))
    assert max(pids) < 100  # only the sandbox's own processes: a fresh PID namespace
    assert os.getpid() not in pids or os.getpid() < 100


def test_limits_are_set(folder):
    code, out = sandbox.run(["sh", "-c", "ulimit -f; ulimit -t; ulimit -v; ulimit -c"], "compile", folder, 30)
    assert code == 0, out
    lim = sandbox.PROFILES["compile"]
    assert out.split() == [str(lim.file_bytes // 512), str(lim.cpu_s), str(lim.address_bytes // 1024), "0"]


def test_a_runner_may_make_threads_and_nothing_else(folder, tmp_path, monkeypatch):
    need_namespaces()
    if not sandbox.report().seccomp:
        pytest.skip(f"this host loads no seccomp filter: {sandbox.report().describe()}")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    path = os.pathsep.join(p for p in (TESTS, os.environ.get("PYTHONPATH", "")) if p)
    proc = sandbox.popen(["-m", "sandbox_probe", str(tmp_path / "outside")], "runner", folder,
                         {"PYTHONPATH": path}, stdout=-1, stderr=-1, text=True)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    got = json.loads(out.strip().splitlines()[-1])
    assert got["thread"] == "allowed" and got["unix_socket"] == "allowed" and got["write_home"] == "allowed"
    for forbidden in ("exec", "fork", "inet_socket", "write_outside"):
        assert got[forbidden].startswith("refused"), (forbidden, got)
    assert got["secret"] == ""


def test_a_compile_bomb_is_stopped_and_leaves_nothing(hgemm_home):
    bomb = "".join(f"#define L{i + 1}(x) L{i}(x) L{i}(x)\n" for i in range(40)).replace("L0(x)", "x")
    source = ('#include <cuda_fp16.h>\n#include <cuda_runtime.h>\n' + "#define L0(x) x\n" + bomb +
              'extern "C" int hgemm_run(const __half*, const __half*, const __half*, __half*, int, int, int, void*,'
              " size_t, cudaStream_t) { int v = 0; L40(v += 1;) return v; }\n")
    result = compile_source(source, archs=("sm_80",), timeout_s=8)
    assert not result.ok and result.failure_kind in ("timeout", "compile_error"), result.message
    assert not list((hgemm_home / "cache").glob("tmp-*"))  # the build folder went with it
    assert not list((hgemm_home / "sandbox").glob("*")) if (hgemm_home / "sandbox").exists() else True


def test_the_cache_keeps_under_its_cap_evicting_the_least_recently_used(tmp_path):
    root = tmp_path / "cache"
    for i in range(6):
        entry = root / f"{i:02x}" / f"{i:02x}key"
        entry.mkdir(parents=True)
        (entry / "kernel.so").write_bytes(b"x" * 1000)
        (entry / "meta.json").write_text("{}")
        os.utime(entry / "meta.json", (1000 + i, 1000 + i))
    compile_cache.touch(root / "01" / "01key")  # used now: protected, and newest
    removed = compile_cache.evict(root, cap=3200, now=10_000_000)
    assert [p.name for p in removed] == ["00key", "02key", "03key"]
    assert sum(size for _, size, _ in compile_cache.entries(root)) <= 3200
    assert (root / "01" / "01key").exists()
    assert compile_cache.evict(root, cap=0, now=10_000_000 + 10) == [root / "04" / "04key", root / "05" / "05key"]
