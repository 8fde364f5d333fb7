"""`hgemm serve`, `hgemm report`, `--json` on the archive and index read commands, `--source` alone on
stdout, and the rough edges a new user hit (each one line on stderr and exit 2)."""

from __future__ import annotations

import csv
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from hgemm.archive import Archive
from web_fixtures import build

from hgemm.core.shape import Shape


def hgemm(*args: str, home, timeout: int = 120, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "HGEMM_HOME": str(home), "HGEMM_EMBEDDER": "none"}
    return subprocess.run([sys.executable, "-m", "hgemm.agent.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, **kw)  # fmt: skip


def one_line_error(out: subprocess.CompletedProcess, needle: str) -> None:
    assert out.returncode == 2, out
    assert "Traceback" not in out.stderr and "Aborted" not in out.stderr
    lines = [ln for ln in out.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], out.stderr


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    home = tmp_path_factory.mktemp("cli-home")
    (home / "archive").mkdir()
    return {"home": home, **build(home / "archive" / "hgemm.archive.db", n=400)}


def test_best_source_is_only_the_source(filled, tmp_path):
    with Archive(filled["path"]) as a:
        best = a.best(Shape(1024, 1024, 2048))
    out = hgemm("archive", "best", "1024", "1024", "2048", "--source", home=filled["home"])
    assert out.returncode == 0, out.stderr
    assert out.stdout == best["source"]  # `> k.cu` writes exactly the kernel
    assert "best 1024x1024x2048" in out.stderr  # the table went to stderr
    shown = hgemm("archive", "show", best["kernel"][:10], "--source", home=filled["home"])
    assert shown.returncode == 0 and shown.stdout == best["source"]


@pytest.mark.parametrize(
    "args, check",
    [
        (["list", "--top", "2"], lambda v: isinstance(v, list) and len(v) > 10 and v[0]["rank"] == 1),
        (["best", "1024", "1024", "2048"], lambda v: v["speedup_best"] > 1 and "source" in v),
        (["history", "1024", "1024", "2048"], lambda v: v and v[-1]["speedup_best"] >= v[0]["speedup_best"]),
        (["attempts", "1024", "1024", "2048", "--limit", "3"], lambda v: len(v["attempts"]) == 3),
        (["stats"], lambda v: v["records"] == 401 and v["runs"] == 2),
    ],
)
def test_archive_read_commands_print_json(filled, args, check):
    out = hgemm("archive", *args, "--json", home=filled["home"])
    assert out.returncode == 0, out.stderr
    assert check(json.loads(out.stdout))


def test_kernel_commands_print_json(filled):
    h, p = filled["hostile"], filled["parent"]
    show = json.loads(hgemm("archive", "show", h, "--json", home=filled["home"]).stdout)
    assert show["hash"] == h and show["parents"] == [p] and show["evaluations"][0]["M"] == 1024
    lin = json.loads(hgemm("archive", "lineage", h, "--json", home=filled["home"]).stdout)
    assert lin["kernel"]["hash"] == h and lin["ancestors"][0]["hash"] == p
    diff = json.loads(hgemm("archive", "diff", p, h, "--json", home=filled["home"]).stdout)
    assert diff["old"] == p and "+// </pre>" in diff["diff"]
    none = hgemm("archive", "best", "3", "3", "3", "--json", home=filled["home"])
    assert none.returncode == 1 and json.loads(none.stdout) is None


def test_index_read_commands_print_json(filled):
    assert hgemm("index", "rebuild", home=filled["home"]).returncode == 0
    q = json.loads(hgemm("index", "query", "1000", "1000", "2000", "--json", home=filled["home"]).stdout)
    assert q["shapes"] and q["shapes"][0]["M"] == 1024 and q["attempts"]
    s = json.loads(hgemm("index", "search", "crash illegal memory", "--json", home=filled["home"]).stdout)
    assert s and any(r["failure_kind"] == "crash" for r in s)


def test_report_writes_page_plots_and_csv(filled, tmp_path):
    out = hgemm("report", "--out", str(tmp_path / "rep"), home=filled["home"])
    assert out.returncode == 0, out.stderr
    rep = tmp_path / "rep"
    html = (rep / "index.html").read_text()
    assert "<style>" in html and 'href="/' not in html and "best.csv" in html
    assert "<script" not in html.replace("&lt;script", "")
    pngs = sorted(p.name for p in (rep / "plots").glob("*.png"))
    assert pngs == ["nvidia-h100-offline.png", "nvidia-h100-server.png"]
    assert all((rep / "plots" / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    svgs = list((rep / "plots").glob("*.svg"))
    assert len(svgs) >= 2 * 3 + 2 + 1 and all(p.read_text().startswith("<svg") for p in svgs)
    rows = list(csv.DictReader((rep / "best.csv").open()))
    with Archive(filled["path"]) as a:
        assert len(rows) == len(a.leaderboard(mode="offline")) + len(a.leaderboard(mode="server"))
    assert {r["mode"] for r in rows} == {"offline", "server"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_answers_on_loopback_and_refuses_a_busy_port(filled):
    port = _free_port()
    env = {**os.environ, "HGEMM_HOME": str(filled["home"])}
    proc = subprocess.Popen([sys.executable, "-m", "hgemm.agent.cli", "serve", "--port", str(port)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline, page = time.monotonic() + 60, None
        while page is None and time.monotonic() < deadline:
            try:
                page = (
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/leaderboard", timeout=5).read().decode()
                )
            except OSError:
                assert proc.poll() is None, proc.stderr.read()
                time.sleep(0.2)
        assert page and 'id="leaderboard"' in page
        one_line_error(hgemm("serve", "--port", str(port), home=filled["home"]), "cannot listen on 127.0.0.1")
    finally:
        proc.terminate()
        proc.wait(20)
    assert "read-only at http://127.0.0.1:" in proc.stderr.read()


def test_serve_and_report_refuse_a_missing_archive(tmp_path):
    one_line_error(hgemm("serve", "--db", str(tmp_path / "no.db"), home=tmp_path), "no archive at")
    one_line_error(hgemm("report", "--out", str(tmp_path / "r"), "--db", str(tmp_path / "no.db"), home=tmp_path),
                   "no archive at")  # fmt: skip


def test_unusable_state_root_is_one_line(tmp_path):
    afile = tmp_path / "a-file"
    afile.write_text("not a folder")
    one_line_error(hgemm("archive", "list", home=afile), "it is a file, not a folder")
    one_line_error(hgemm("archive", "list", home=afile / "below"), "cannot use")


def test_truncated_compressed_import_is_one_line_and_imports_nothing(filled, tmp_path):
    full = tmp_path / "full.jsonl.xz"
    assert hgemm("archive", "export", "--out", str(full), home=filled["home"]).returncode == 0
    cut = tmp_path / "cut.jsonl.xz"
    cut.write_bytes(full.read_bytes()[: full.stat().st_size // 2])
    home = tmp_path / "fresh"
    one_line_error(hgemm("archive", "import", str(cut), home=home), "is truncated; nothing was imported")
    damaged = tmp_path / "damaged.jsonl.xz"
    damaged.write_bytes(full.read_bytes()[:12] + b"\x00" * 4000)
    one_line_error(hgemm("archive", "import", str(damaged), home=home), "is damaged")
    stats = json.loads(hgemm("archive", "stats", "--json", home=home).stdout)
    assert stats["kernels"] == 0 and stats["records"] == 0


def test_negative_exemplars_is_one_line(tmp_path):
    one_line_error(
        hgemm("prompt", "64", "64", "64", "--exemplars", "-3", home=tmp_path), "--exemplars must be 0"
    )


def test_render_benchmark_writes_its_report(tmp_path):
    out = subprocess.run([sys.executable, "-m", "hgemm.bench.web_bench", "--evaluations", "1500", "--reps", "2",
                          "--out-dir", str(tmp_path)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "HGEMM_HOME": str(tmp_path / "home")})  # fmt: skip
    assert out.returncode == 0, out.stderr
    (js,) = tmp_path.glob("web-render-*.json")
    report = json.loads(js.read_text())
    assert report["archive"]["evaluation_rows"] >= 1500 and report["machine"]["cpu"]
    assert set(report["pages"]) >= {"overview", "leaderboard", "shape", "kernel", "parent diff", "runs"}
    assert all(p["requests"] == 2 and p["p95_ms"] > 0 for p in report["pages"].values())
    assert (
        js.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
        and "| overview |" in js.with_suffix(".md").read_text()
    )
