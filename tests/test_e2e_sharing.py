"""Sharing, in a real browser: the viewer-mode server (no Run page, no write control, a
deep link to /run stops, nothing written), and the dashboard inside a real JupyterLab
through jupyter-server-proxy at /proxy/PORT/ (pages, links, live progress, downloads)."""

import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
import urllib.request

import pandas as pd
import pytest

from store.db import open_db
from tests.conftest import ROOT
from seeds.records import seed_sweep
from tests.test_e2e_browser import ARTIFACTS, browser_page, framework_libraries, free_port

pytestmark = pytest.mark.slow


@contextlib.contextmanager
def dashboard(db, tmp_path, **env):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true",
         "--browser.gatherUsageStats", "false"],
        cwd=ROOT, env={**os.environ, "BENCH_DB": str(db), "PYTHONPATH": str(ROOT),
                       "BENCH_DATA_DIR": str(tmp_path / "datasets"), **env},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        for line in proc.stdout:
            if f"127.0.0.1:{port}" in line:
                break
        else:
            pytest.fail("streamlit exited before listening")
        yield port, proc
        assert framework_libraries(proc.pid) == []
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def no_exception(page):
    from playwright.sync_api import expect
    expect(page.locator("[data-testid=stException]")).to_have_count(0)


def test_the_viewer_shows_every_page_and_no_write_control(db_path, tmp_path):
    from playwright.sync_api import expect

    seed_sweep(db_path)
    with open_db(db_path) as con:
        before = con.execute("SELECT count(*) FROM runs").fetchone()[0]
    with dashboard(db_path, tmp_path, BENCH_VIEWER="1") as (port, _), \
            browser_page("viewer") as page:
        base = f"http://127.0.0.1:{port}"
        # A fresh server's first deep link goes through app.py's router too (the page files
        # sit in views/, not in a legacy pages/ directory): viewer mode has no Run page, so
        # /run is not found and the main page, Results, is drawn instead.
        page.goto(f"{base}/run?model=resnet18&framework=torch&batch=1&rounds=1")
        expect(page.get_by_text("Page not found")).to_be_visible(timeout=60_000)
        expect(page.get_by_role("heading", name="Results")).to_be_visible(timeout=60_000)
        expect(page.get_by_text("Viewer mode: read-only")).to_be_visible()
        expect(page.get_by_role("button", name="Launch")).to_have_count(0)
        page.goto(base)
        expect(page.get_by_role("heading", name="Results")).to_be_visible(timeout=60_000)
        expect(page.get_by_text("Viewer mode: read-only")).to_be_visible()
        nav = page.get_by_test_id("stSidebarNav")
        assert "Run" not in nav.inner_text().split("\n")
        # Each page's last element: once it is drawn, the script has run to its end, so
        # an absent button is absent, not yet to come.
        link = "Link to this view"
        for name, heading, last in (
                ("results", "Results", link), ("compare", "Compare frameworks", link),
                ("cost", "Cost of inference", link),
                ("system", "System", "Machines seen in the stored runs"),
                ("training", "Training", "No training runs stored yet"),
                ("dataload", "Data loading", "No data-loading runs stored yet")):
            page.goto(f"{base}/{name}")
            expect(page.get_by_role("heading", name=heading)).to_be_visible(timeout=60_000)
            expect(page.get_by_text(last).first).to_be_visible(timeout=60_000)
            no_exception(page)
            for label in ("Launch", "Cancel", "Start search", "Start training"):
                expect(page.get_by_role("button", name=label)).to_have_count(0)
            expect(page.locator("input[type=file]")).to_have_count(0)  # no upload anywhere
        page.goto(f"{base}/run")  # after app.py ran: an address outside the navigation
        expect(page.get_by_text(link).first).to_be_visible(timeout=60_000)  # Results, drawn
        expect(page.get_by_role("button", name="Launch")).to_have_count(0)
        page.screenshot(path=str(ARTIFACTS / "e2e-viewer.png"), full_page=True)
    with open_db(db_path) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == before


@contextlib.contextmanager
def jupyterlab(tmp_path):
    port, token = free_port(), secrets.token_hex(16)
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
         "--ip=127.0.0.1", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={tmp_path}", "--allow-root"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True, env={**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"),
                                     "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg")})
    try:
        for line in proc.stdout:
            if "is running at" in line or f":{port}/lab" in line:
                break
        else:
            pytest.fail("jupyter lab exited before listening")
        yield port, token
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_the_dashboard_inside_jupyterlab_through_jupyter_server_proxy(db_path, tmp_path):
    from playwright.sync_api import expect

    seed_sweep(db_path)
    with dashboard(db_path, tmp_path) as (port, _), jupyterlab(tmp_path) as (jport, token), \
            browser_page("notebook-proxy", accept_downloads=True) as page:
        base = f"http://127.0.0.1:{jport}/proxy/{port}"
        # Without Jupyter's token the proxy hands out Jupyter's sign-in, not the dashboard.
        with urllib.request.urlopen(f"{base}/", timeout=30) as r:
            assert "/login" in r.url and "Streamlit" not in r.read().decode()
        page.goto(f"{base}/?token={token}")  # Jupyter's sign-in, then its cookie
        expect(page.get_by_role("heading", name="Run a benchmark sweep")).to_be_visible(
            timeout=60_000)
        # A link, live progress and the result, all under the path prefix.
        page.goto(f"{base}/?model=mobilenet_v3_small&framework=torch&batch=1&threads=1"
                  "&image_size=64&min_time=0.2&min_iters=10&warmup=2&rounds=1&max_rounds=1")
        expect(page.get_by_text("1 configuration × 1 round = 1 run")).to_be_visible(
            timeout=60_000)
        page.get_by_role("button", name="Launch").click()
        expect(page.get_by_text(re.compile(r"Job 1: done"))).to_be_visible(timeout=300_000)
        page.goto(f"{base}/compare?sweep=sweep-seeded&batch=8&band=IQR")
        expect(page.get_by_role("heading", name="Compare frameworks")).to_be_visible(
            timeout=60_000)
        expect(page.locator(".js-plotly-plot").first).to_be_visible(timeout=60_000)
        assert page.url.startswith(f"{base}/compare?sweep=sweep-seeded&")
        assert "&batch=8&band=IQR" in page.url  # the page wrote its selection back
        no_exception(page)
        page.goto(f"{base}/results?model=mobilenet_v3_small&framework=torch")
        expect(page.get_by_text(re.compile(r"\d+ runs · click a column header"))).to_be_visible(
            timeout=60_000)
        page.get_by_role("button", name=re.compile("Prepare download")).click()
        button = page.get_by_role("button", name="CSV", exact=True)
        expect(button).to_be_visible(timeout=60_000)
        with page.expect_download() as info:
            button.click()
        table = pd.read_csv(info.value.path())
        page.screenshot(path=str(ARTIFACTS / "e2e-notebook-proxy.png"), full_page=True)
        no_exception(page)
    with open_db(db_path) as con:
        torch_mobilenet = con.execute(
            "SELECT count(*) FROM runs WHERE model = 'mobilenet_v3_small' AND "
            "framework = 'torch'").fetchone()[0]
    assert len(table) == torch_mobilenet and torch_mobilenet >= 5  # the seeded ones + ours
    assert set(table.model) == {"mobilenet_v3_small"} and set(table.framework) == {"torch"}
