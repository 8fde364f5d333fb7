"""The web view in a real headless Chromium (Debian's `chromium` and `chromium-driver`, driven by Selenium;
nothing is downloaded): every page loads and shows its content, a reader clicks leaderboard -> shape ->
kernel -> parent diff, hostile kernel text stays text, and each page is photographed.

Skips with a reason only when no Chromium or chromedriver is installed. `HGEMM_SCREENSHOTS=DIR` also
writes the screenshots there (the README's come from this test).
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest
from web_fixtures import build

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="no Chromium/chromedriver installed (Debian: apt-get install chromium chromium-driver)",
)
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage")  # fmt: skip


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    import uvicorn
    from hgemm.archive.web.app import create_app

    archive = build(tmp_path_factory.mktemp("browse") / "browse.db")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(
        uvicorn.Config(create_app(archive["path"]), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    yield {"url": f"http://127.0.0.1:{port}", **archive}
    srv.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    opts.add_argument("--window-size=1400,1000")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=opts, service=Service(executable_path=DRIVER))
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


@pytest.fixture
def shots(tmp_path):
    extra = os.environ.get("HGEMM_SCREENSHOTS")

    def take(driver, name: str) -> Path:
        path = tmp_path / f"{name}.png"
        assert driver.save_screenshot(str(path))
        assert path.stat().st_size > 10_000  # a rendered page, not a blank one
        if extra:
            Path(extra).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(extra) / path.name)
        return path

    return take


def _css(driver, selector: str):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def test_every_page_loads(server, browser, shots):
    b, url = browser, server["url"]
    b.get(url + "/")
    assert b.title.startswith("Overview")
    assert len(_css(b, "figure svg")) >= 9
    assert "share won" in b.page_source and "NVIDIA H100" in _css(b, "h2")[0].text
    shots(b, "overview")
    b.get(url + "/leaderboard")
    assert len(_css(b, "#leaderboard tbody tr")) >= 20
    b.get(url + "/runs")
    assert len(_css(b, "#runs tr")) == server["runs"] + 1
    shots(b, "runs")
    b.get(url + "/shape/1024x1024x2048?mode=server")
    assert _css(b, "#ranked tr") and _css(b, "#best")
    b.get(url + f"/kernel/{server['parent']}")
    assert _css(b, ".source pre") and _css(b, "#descendants li")
    severe = [e for e in b.get_log("browser") if e["level"] == "SEVERE" and "favicon" not in e["message"]]
    assert not severe, severe


def test_sort_and_filter_the_leaderboard(server, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    b = browser
    b.get(server["url"] + "/leaderboard")
    b.find_element(By.LINK_TEXT, "speedup").click()  # first click on speedup: fastest first
    WebDriverWait(b, 10).until(lambda d: "sort=speedup" in d.current_url)
    speeds = [float(td.text.rstrip("x")) for td in _css(b, "#leaderboard tbody td:nth-child(6)")]
    assert len(speeds) > 10 and speeds == sorted(speeds, reverse=True)
    b.find_element(By.NAME, "K").send_keys("512")
    Select(b.find_element(By.NAME, "family")).select_by_visible_text("wgmma_tma")
    b.find_element(By.ID, "filter").click()
    WebDriverWait(b, 10).until(lambda d: "K=512" in d.current_url and _css(d, "a.shape-link"))  # the new page
    shapes = [a.text for a in _css(b, "a.shape-link")]
    assert shapes and all(s.endswith("x512") for s in shapes)
    assert {td.text for td in _css(b, "#leaderboard tbody td:nth-child(4)")} == {"wgmma_tma"}
    speeds = [float(td.text.rstrip("x")) for td in _css(b, "#leaderboard tbody td:nth-child(6)")]
    assert speeds == sorted(speeds, reverse=True)  # the sort survives the filter


def test_click_through_to_a_parent_diff(server, browser, shots):
    from selenium.webdriver.common.by import By

    b = browser
    b.get(server["url"] + "/leaderboard?K=2048&sort=speedup&desc=1")
    row = next(a for a in _css(b, "a.shape-link") if a.text == "1024x1024x2048")
    row.click()
    assert "1024×1024×2048" in b.find_element(By.TAG_NAME, "h1").text
    shots(b, "shape")
    b.find_element(By.CSS_SELECTOR, "#best a.kernel-link").click()
    assert b.current_url.endswith("/kernel/" + server["hostile"])
    # the hostile source is shown as text: no script ran, no element was injected
    assert b.title.startswith("kernel") and b.title != "owned"
    assert not _css(b, ".source script") and not _css(b, ".source img")
    assert "<script>document.title='owned'</script>" in b.find_element(By.CSS_SELECTOR, ".source").text
    assert "make it <fast>" in b.find_element(By.CSS_SELECTOR, "section.llm").get_attribute("textContent")
    shots(b, "kernel")
    b.find_element(By.CSS_SELECTOR, "a.parent-diff").click()
    assert "/diff/" + server["parent"] in b.current_url
    added = [s.text for s in _css(b, "#diff span.add")]
    assert any("<script>document.title='owned'</script>" in t for t in added)
    assert _css(b, "#diff span.del")
    shots(b, "diff")
    b.find_element(By.LINK_TEXT, server["parent"][:12]).click()
    assert b.current_url.endswith("/kernel/" + server["parent"])
