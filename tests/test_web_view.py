"""The web view's pages over a filled archive, through Starlette's test client (the browser tests drive the
same pages in Chromium): content, escaping of hostile kernel text, parameterised filters, read-only."""

from __future__ import annotations

import hashlib

import pytest
from hgemm.archive.web.app import create_app
from starlette.testclient import TestClient
from web_fixtures import build


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    return build(tmp_path_factory.mktemp("web") / "web.db")


@pytest.fixture(scope="module")
def client(archive):
    return TestClient(create_app(archive["path"]))


def test_overview_has_plots_and_share_won(client):
    r = client.get("/")
    assert r.status_code == 200
    assert "NVIDIA H100" in r.text
    assert r.text.count("<svg") >= 2 * 3 + 3  # heatmaps per K and mode, sorted bars, FLOPs scatter
    assert "offline, K = 2048" in r.text and "speedup per configuration" in r.text
    assert "speedup against FLOPs" in r.text and "share won" in r.text
    assert "script-src" not in r.headers["content-security-policy"]
    assert "default-src 'none'" in r.headers["content-security-policy"]


def test_leaderboard_sorts_and_filters(client):
    rows = client.get("/leaderboard?sort=speedup&desc=1").text
    speeds = [
        float(x.split("x<")[0]) for x in rows.split('<td class="num sp-')[1:] for x in [x.split(">", 1)[1]]
    ]
    assert len(speeds) > 10 and speeds == sorted(speeds, reverse=True)
    only = client.get("/leaderboard?K=2048&family=wgmma_tma&min_speedup=1.0").text
    shapes = [c.split("<")[0] for c in only.split('class="shape-link" href="')[1:]]
    assert shapes and all(s.split('">')[1].endswith("x2048") for s in shapes)
    assert "simt_tiled</td>" not in only
    injected = client.get("/leaderboard", params={"family": "x' OR 1=1 --"})
    assert injected.status_code == 200 and 'class="shape-link"' not in injected.text
    bad = client.get("/leaderboard?M=abc")
    assert bad.status_code == 400 and "M must be a number" in bad.text


def test_shape_page(client, archive):
    r = client.get("/shape/1024x1024x2048")
    assert r.status_code == 200
    for part in ('id="best"', 'id="baselines"', 'id="ranked"', 'id="failures"', 'id="ncu"', "sm_throughput_pct",
                 "lt_autotuned", "physical floor", "ranked speedup over time"):  # fmt: skip
        assert part in r.text, part
    assert archive["hostile"] in r.text  # the hostile kernel is the best on this shape (4 µs against 10)
    assert client.get("/shape/1024x1024x2048?mode=server").status_code == 200
    assert client.get("/shape/3x3x3").status_code == 404
    assert client.get("/shape/nonsense").status_code == 404
    assert client.get("/shape/1024x1024x2048?mode=fast").status_code == 400


def test_kernel_page_escapes_hostile_text(client, archive):
    h = archive["hostile"]
    r = client.get(f"/kernel/{h}")
    assert r.status_code == 200
    assert "<script>" not in r.text and "<img src=x" not in r.text and "<b>" not in r.text
    assert "&lt;script&gt;" in r.text or "&lt;/span&gt;" in r.text or "script" in r.text
    assert "make it &lt;fast&gt;" in r.text  # the prompt, escaped
    assert f"/diff/{archive['parent']}/{h}" in r.text
    assert 'id="ancestors"' in r.text and archive["parent"][:12] in r.text
    raw = client.get(f"/kernel/{h}/source.cu")
    assert raw.text.startswith("// </pre></div><script>")
    assert raw.headers["content-type"].startswith("text/plain")
    assert "attachment" in raw.headers["content-disposition"]
    assert client.get(f"/kernel/{h[:10]}").status_code == 200  # a prefix works
    assert client.get("/kernel/zzzz").status_code == 404


def test_diff_page(client, archive):
    r = client.get(f"/diff/{archive['parent']}/{archive['hostile']}")
    assert r.status_code == 200 and 'id="diff"' in r.text
    assert '<span class="add">+// &lt;/pre&gt;&lt;/div&gt;&lt;script&gt;' in r.text


def test_runs_page(client, archive):
    r = client.get("/runs")
    assert r.status_code == 200
    assert r.text.count("<td>optimize</td>") == archive["runs"]
    assert "budget_evals=300" in r.text and "3.0 min</td>" in r.text  # 300 records of 0.3-0.9 s
    assert '<td class="num">$0.' in r.text


def test_view_cannot_change_the_archive(client, archive):
    before = hashlib.sha256(archive["path"].read_bytes()).hexdigest()
    for url in ("/", "/leaderboard", "/runs", f"/kernel/{archive['hostile']}"):
        assert client.post(url).status_code == 405
        assert client.delete(url).status_code == 405
    for url in (
        "/",
        "/leaderboard?sort=speedup",
        "/runs",
        "/shape/1024x1024x2048",
        f"/kernel/{archive['hostile']}",
    ):
        assert client.get(url).status_code == 200
    assert hashlib.sha256(archive["path"].read_bytes()).hexdigest() == before
    from hgemm.archive.web.data import open_readonly

    conn = open_readonly(archive["path"])
    with pytest.raises(Exception, match="readonly|query_only|read-only"):
        conn.execute("DELETE FROM kernels")
    conn.close()


def test_missing_archive_is_a_clear_page(tmp_path):
    c = TestClient(create_app(tmp_path / "none.db"))
    r = c.get("/")
    assert r.status_code == 400 and "no archive at" in r.text
