"""End to end in a real browser: streamlit run app.py on a free loopback port against a
temporary database; Playwright drives Debian's chromium to launch a tiny sweep of both
frameworks from the Run page, wait for it, and find the chart on Compare; to open /compare as
a fresh server's very first request and find app.py's router there (not Streamlit's legacy
pages-directory runner); and to rewrite the browser's own rerun messages on the websocket (a
crafted client) to check that a value the page does not offer gets its message and launches
nothing. Screenshots are saved under test-artifacts/."""

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys

import pytest

from store.db import open_db
from tests.conftest import ROOT

pytestmark = pytest.mark.slow
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
QUERY = ("model=mobilenet_v3_small&framework=torch,tensorflow&batch=1&threads=1"
         "&image_size=64&min_time=0.2&min_iters=10&warmup=2&rounds=2&max_rounds=2")
# Two rounds and no more: a paired interval on Compare, at a fixed cost. Dispersion no longer
# makes a run invalid, so every run of a working sweep is ok.


def framework_libraries(pid: int) -> list[str]:
    """Shared objects of torch, TensorFlow or ONNX Runtime mapped into a process."""
    with open(f"/proc/{pid}/maps") as f:
        paths = {line.split()[-1] for line in f if "/" in line}
    return sorted(p for p in paths if re.search(
        r"libtorch|libc10|libtensorflow|_pywrap_tensorflow|onnxruntime", p))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    port = free_port()
    db = tmp_path / "e2e.duckdb"
    env = {**os.environ, "BENCH_DB": str(db), "PYTHONPATH": str(ROOT),
           "BENCH_DATA_DIR": str(tmp_path / "datasets")}  # generated image sets
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true",
         "--browser.gatherUsageStats", "false"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    try:
        for line in proc.stdout:  # blocks until the server says where it listens
            if f"127.0.0.1:{port}" in line:
                break
        else:
            pytest.fail("streamlit exited before listening")
        yield f"http://127.0.0.1:{port}", db
        # After the pages were driven: the dashboard process never loaded a framework.
        assert framework_libraries(proc.pid) == []
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def browser_page(name: str, **page_options):
    """A page in Debian's chromium, quiet (no background networking on this closed
    network). On a failure it leaves evidence for whoever reads the CI log: a screenshot
    (test-artifacts/e2e-failure-NAME.png) and the end of the page's text."""
    from playwright.sync_api import sync_playwright

    assert os.path.exists(CHROMIUM), "the test command installs Debian's chromium"
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000}, **page_options)
        try:
            yield page
        except BaseException:
            page.screenshot(path=str(ARTIFACTS / f"e2e-failure-{name}.png"), full_page=True)
            print(page.inner_text("body")[-3000:])
            raise
        finally:
            browser.close()


def test_launch_a_sweep_in_the_browser_and_find_the_compare_chart(server):
    base, db = server
    with browser_page("sweep") as page:
        _drive(page, base, db)
    with open_db(db) as con:
        rows = con.execute("SELECT framework, status, image_size FROM runs "
                           "ORDER BY framework").fetchall()
    assert [(f, size) for f, _, size in rows] == [("tensorflow", 64)] * 2 + [("torch", 64)] * 2
    assert [s for _, s, _ in rows] == ["ok"] * 4


def test_a_fresh_servers_first_request_for_compare_draws_the_router(server):
    """The first request a fresh server ever gets is a deep link to /compare: it goes
    through app.py's st.navigation (the titled menu, the database caption, the guide
    switch), not through Streamlit's legacy pages-directory runner and its file-name menu."""
    from playwright.sync_api import expect

    base, db = server
    with browser_page("fresh-deep-link") as page:
        page.goto(f"{base}/compare")
        nav = page.get_by_test_id("stSidebarNav")
        expect(nav.get_by_text("Compare", exact=True)).to_be_visible(timeout=60_000)
        expect(nav.get_by_text("Data loading", exact=True)).to_be_visible()
        expect(nav.get_by_text("compare", exact=True)).to_have_count(0)
        expect(page.get_by_test_id("stSidebar").get_by_text(f"Database: {db}")) \
            .to_be_visible()
        expect(page.get_by_text("Guide to this page")).to_be_visible()
        expect(page.get_by_test_id("stException")).to_have_count(0)


def _drive(page, base, db):
    from playwright.sync_api import expect

    page.goto(f"{base}/?{QUERY}")
    expect(page.get_by_text("2 configurations × 2 rounds = 4 runs")).to_be_visible(
        timeout=60_000)
    page.screenshot(path=str(ARTIFACTS / "e2e-1-run-page.png"), full_page=True)
    page.get_by_role("button", name="Launch").click()
    expect(page.get_by_text("Sweep job 1 starts now.")).to_be_visible(timeout=30_000)
    expect(page.get_by_text(re.compile(r"Job 1: done"))).to_be_visible(timeout=300_000)
    page.screenshot(path=str(ARTIFACTS / "e2e-2-sweep-done.png"), full_page=True)

    page.goto(f"{base}/compare")
    expect(page.locator(".js-plotly-plot").first).to_be_visible(timeout=60_000)
    expect(page.get_by_text("Comparison table")).to_be_visible()
    # the noise pairing leaves and the machine's drift, where the noise floor used to be
    expect(page.get_by_text("measurement noise (what pairing leaves)")).to_be_visible()
    expect(page.get_by_text("machine drift between rounds")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "e2e-3-compare.png"), full_page=True)
    page.goto(f"{base}/cost")
    expect(page.get_by_text("Cost per 1 M inferences — mobilenet_v3_small")).to_be_visible(
        timeout=60_000)
    expect(page.locator(".js-plotly-plot").first).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "e2e-cost.png"), full_page=True)
    page.goto(f"{base}/results")
    expect(page.get_by_text("4 runs · click a column header to sort")).to_be_visible(
        timeout=60_000)
    expect(page.get_by_role("button", name=re.compile("Prepare download"))).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "e2e-4-results.png"), full_page=True)
    with open_db(db) as con:
        run_id = con.execute("SELECT run_id FROM runs WHERE framework = 'torch' "
                             "ORDER BY status = 'ok' DESC").fetchall()[0][0]
    page.goto(f"{base}/results?run={run_id}")
    expect(page.get_by_text(f"Link to this run: ?run={run_id}")).to_be_visible(timeout=60_000)
    expect(page.locator(".js-plotly-plot")).to_have_count(2, timeout=60_000)
    page.screenshot(path=str(ARTIFACTS / "e2e-5-run-detail.png"), full_page=True)


def test_training_dataload_and_profile_views_in_the_browser(server):
    """Stored training, data-loading and profiled runs, seen as a user sees them: the
    charts drawn, the table filled, the Chrome trace downloaded."""
    import gzip
    import json

    from playwright.sync_api import expect

    from seeds.records import seed_workloads

    base, db = server
    seed_workloads(db)
    with browser_page("workloads", accept_downloads=True) as page:
        page.goto(f"{base}/training")
        expect(page.locator(".js-plotly-plot")).to_have_count(6, timeout=60_000)
        expect(page.get_by_text("10.0 points")).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "e2e-6-training.png"), full_page=True)
        page.goto(f"{base}/dataload")
        expect(page.locator(".js-plotly-plot")).to_have_count(1, timeout=60_000)
        expect(page.get_by_text("png: rows batch size by workers and threads")).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "e2e-7-dataload.png"), full_page=True)
        page.goto(f"{base}/results?run=t-torch")
        expect(page.locator(".js-plotly-plot")).to_have_count(3, timeout=60_000)
        button = page.get_by_role("button", name=re.compile("Chrome trace"))
        expect(button).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "e2e-8-profile.png"), full_page=True)
        with page.expect_download() as info:
            button.click()
        download = info.value
        name, data = download.suggested_filename, open(download.path(), "rb").read()
    assert name == "trace-t-torch.json.gz"
    assert json.loads(gzip.decompress(data))["traceEvents"][0]["name"] == "aten::conv"


def test_launch_data_loading_from_the_run_page_and_see_its_table(server):
    """The dashboard's own data-loading form: a small PNG set (32 images of 128 px), two
    decoders by two normalisations at batch 8, run for real and shown. Batches of a few
    milliseconds, not fractions of one: with the browser and server sharing two cores, a
    0.3 ms batch of 32 px images came out with an IQR/median of 30-48 % in every run."""
    from playwright.sync_api import expect

    base, db = server
    with browser_page("dataload") as page:
        page.goto(base)
        page.get_by_text("Measure data loading (decoders, normalisation, pipelines)").click()
        form = page.get_by_test_id("stExpander").filter(has_text="Measure data loading")
        for label, value in (("Batch sizes", "8"), ("Images", "32"),
                             ("Image size [px]", "128")):
            box = form.get_by_label(label, exact=True)
            box.fill(value)
            box.press("Enter")
        expect(form.get_by_text("4 data-loading runs of 4 implementation(s)")).to_be_visible(
            timeout=30_000)
        page.get_by_role("button", name="Start data loading").click()
        expect(page.get_by_text(re.compile(r"Job 1: done"))).to_be_visible(timeout=300_000)
        page.screenshot(path=str(ARTIFACTS / "e2e-9-dataload-launched.png"), full_page=True)
        with open_db(db) as con:
            rows = con.execute("SELECT runtime, batch_size, status FROM runs "
                               "WHERE kind = 'dataload' ORDER BY runtime").fetchall()
        page.goto(f"{base}/dataload")
        expect(page.locator(".js-plotly-plot")).to_have_count(1, timeout=60_000)
        expect(page.get_by_text("png: rows batch size by workers and threads")).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "e2e-10-dataload-page.png"), full_page=True)
    assert [(r, b) for r, b, _ in rows] == [
        ("loop:opencv+numpy", 8), ("loop:opencv+torch", 8), ("loop:pillow+numpy", 8),
        ("loop:pillow+torch", 8)]
    assert [s for _, _, s in rows] == ["ok"] * 4, rows  # noisy, perhaps, but never dropped


def crafting(replace: dict):
    """A websocket route that rewrites the browser's rerun messages on their way to the
    server while replace["armed"]: each widget whose id ends with -KEY gets the values in
    replace["values"][KEY] (a multiselect's list), as a client sending its own BackMsg
    would. replace["sent"] counts the rewritten messages."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    def route(ws):
        server = ws.connect_to_server()  # the server's messages reach the page untouched

        def up(message):
            if replace["armed"] and isinstance(message, bytes):
                msg = BackMsg()
                msg.ParseFromString(message)
                if msg.WhichOneof("type") == "rerun_script":
                    for w in msg.rerun_script.widget_states.widgets:
                        for key, values in replace["values"].items():
                            if w.id.endswith(f"-{key}"):
                                w.string_array_value.data[:] = values
                                replace["sent"] += 1
                    message = msg.SerializeToString()
            server.send(message)

        ws.on_message(up)

    return route


def test_a_crafted_websocket_message_gets_the_page_message_and_launches_nothing(server):
    """Launch pressed in the browser while its rerun message names a framework the page
    does not offer (Streamlit would drop it silently and queue the rest): the page names
    the field and what is allowed, no exception, no job, no row."""
    from playwright.sync_api import expect

    base, db = server
    replace = {"armed": False, "sent": 0, "values": {"frameworks": ["torch", "jax"]}}
    with browser_page("crafted") as page:
        page.route_web_socket(re.compile(r"/_stcore/stream"), crafting(replace))
        page.goto(f"{base}/?{QUERY}")
        expect(page.get_by_text("2 configurations × 2 rounds = 4 runs")).to_be_visible(
            timeout=60_000)
        replace["armed"] = True
        page.get_by_role("button", name="Launch").click()
        expect(page.get_by_text("framework: 'jax' is not offered; allowed: one of torch, "
                                "tensorflow")).to_be_visible(timeout=30_000)
        replace["armed"] = False
        assert replace["sent"] >= 1
        page.screenshot(path=str(ARTIFACTS / "e2e-crafted.png"), full_page=True)
        expect(page.get_by_test_id("stException")).to_have_count(0)
        expect(page.get_by_text(re.compile(r"Sweep job \d"))).to_have_count(0)
    with open_db(db) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 0


def test_a_crafted_model_name_on_compare_gets_the_page_message(server):
    """A read page: a model the page does not offer, sent with the browser's next rerun,
    is named with what is allowed; the next honest message draws the page again."""
    from playwright.sync_api import expect

    from seeds.records import seed_sweep

    base, db = server
    seed_sweep(db)
    replace = {"armed": False, "sent": 0, "values": {"models": ["../../etc/passwd"]}}
    with browser_page("crafted-compare") as page:
        page.route_web_socket(re.compile(r"/_stcore/stream"), crafting(replace))
        page.goto(f"{base}/compare")
        expect(page.get_by_text("Comparison table")).to_be_visible(timeout=60_000)
        replace["armed"] = True
        page.get_by_text("violin", exact=True).click()  # any change sends a rerun
        expect(page.get_by_text("models: '../../etc/passwd' is not offered; allowed: one "
                                "of mobilenet")).to_be_visible(timeout=30_000)
        replace["armed"] = False
        assert replace["sent"] >= 1
        expect(page.get_by_test_id("stException")).to_have_count(0)
        page.reload()
        expect(page.get_by_text("Comparison table")).to_be_visible(timeout=60_000)
        expect(page.get_by_text("is not offered")).to_have_count(0)


DEPLOY_QUERY = ("model=identity&threads=1&scenario=single-stream&bound_ms=5&duration=custom"
                "&min_duration_s=0.3&min_queries=50")


@pytest.mark.alone  # a LoadGen bound or a contention verdict: measured time
def test_launch_a_serving_test_from_the_deploy_page_and_see_it_valid(server):
    """The Deploy page (issue 27 part 5): a short SingleStream LoadGen test of the selftest
    identity model, opened from a link, launched, followed and read back VALID with its
    chart and logs."""
    from playwright.sync_api import expect

    base, db = server
    with browser_page("deploy") as page:
        page.goto(f"{base}/deploy?{DEPLOY_QUERY}")
        expect(page.get_by_text("LoadGen SingleStream test of identity")).to_be_visible(
            timeout=60_000)
        page.get_by_role("button", name="Launch test").click()
        expect(page.get_by_text("Serving test job 1 starts now.")).to_be_visible(
            timeout=30_000)
        expect(page.get_by_text(re.compile(r"Job 1: done"))).to_be_visible(timeout=300_000)
        expect(page.get_by_text("LoadGen: VALID - every rule of the test is satisfied.")
               ).to_be_visible(timeout=60_000)
        expect(page.locator(".js-plotly-plot")).to_have_count(1, timeout=60_000)
        expect(page.get_by_role("button", name=re.compile("Download the summary log"))
               ).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "e2e-deploy.png"), full_page=True)
    with open_db(db) as con:
        rows = con.execute("SELECT r.status, s.result, r.extra->>'scenario' FROM runs r "
                           "JOIN serving_results s USING (run_id)").fetchall()
    assert rows == [("ok", "VALID", "single-stream")]
