"""The board of benchmark states in a real browser: `streamlit run app.py` on a real DuckDB
file seeded through the real store functions (seeds/states.py), Debian's chromium through
Playwright. A session on this machine sees the states worst first, filters them, opens a
configuration's evidence and acknowledges its regression; then a viewer-mode server on the
same file shows that mark to a second session, offers no form, and links the group's Atom
feed, which the server serves as a plain address a reader can subscribe to."""

import secrets
import urllib.request
from urllib.parse import quote
from xml.etree import ElementTree as ET

import pytest

from engine.alerts.update import write_feed
from engine.analysis.states import StatePolicy
from engine.core.paths import FEEDS_DIR
from engine.present.feed import ATOM_NS, feed_name
from seeds.states import seed_group
from store.db import open_db
from store.states import group_marks
from tests.test_e2e_browser import ARTIFACTS, browser_page
from tests.test_e2e_sharing import dashboard, no_exception

pytestmark = pytest.mark.slow
WORST = "resnet18 64px b1 t1 · torch (eager)"


def column(page, col: int, rows: int) -> list[str]:
    """The text of one column of the page's first data grid (glide-data-grid draws on a
    canvas and keeps each cell's text in an accessible table inside it)."""
    grid = page.get_by_test_id("stDataFrame").first
    return [grid.locator(f"[id='glide-cell-{col}-{r}']").text_content() for r in range(rows)]


@pytest.fixture
def group(db_path):
    """A seeded group with a name no real one has, and its feed where the server serves it
    (static/feeds/, as `watch` writes it), removed afterwards."""
    name = f"e2e {secrets.token_hex(4)}"
    seed_group(db_path, name)
    out = FEEDS_DIR / feed_name(name)
    yield name, out
    out.unlink(missing_ok=True)


def test_the_board_a_mark_shared_with_a_viewer_and_the_feed(db_path, tmp_path, group):
    from playwright.sync_api import expect

    name, feed = group
    with dashboard(db_path, tmp_path) as (port, _), browser_page("states") as page:
        base = f"http://127.0.0.1:{port}"
        page.goto(f"{base}/history?group={quote(name)}")
        expect(page.get_by_role("heading", name="Benchmark states")).to_be_visible(
            timeout=60_000)
        expect(page.get_by_text("1 regression · 1 missing · 1 no change · showing 3 of 3, "
                                "worst first")).to_be_visible(timeout=60_000)
        assert column(page, 0, 3) == ["regression", "missing", "no change"]
        assert column(page, 1, 3)[0] == WORST
        expect(page.get_by_text("Policy: Each sweep is judged by the regression gate")
               ).to_be_visible()
        # No `watch` has written this group's feed yet: the board says so.
        expect(page.get_by_text("No feed for this group yet")).to_be_visible()
        # The evidence of the worst: its two points against the six sweeps before them.
        evidence = page.get_by_role("link", name="Open the newest point's comparison")
        assert "baseline=sweep-00%2Csweep-01%2Csweep-02%2Csweep-03%2Csweep-04%2Csweep-05" \
               "&candidate=sweep-07" in evidence.get_attribute("href")
        assert column(page, 0, 1) == ["regression"]
        # Filter by state in the browser: one row left, and the address says so.
        page.get_by_test_id("stMultiSelect").filter(has_text="States").click()
        page.get_by_role("option", name="missing").click()
        page.keyboard.press("Escape")
        expect(page.get_by_text("showing 1 of 3, worst first", exact=False)).to_be_visible(
            timeout=30_000)
        page.wait_for_function("() => location.search.includes('state=missing')",
                               timeout=30_000)
        # Back to every state; acknowledge the regression.
        page.goto(f"{base}/history?group={quote(name)}")
        expect(page.get_by_text("showing 3 of 3")).to_be_visible(timeout=60_000)
        page.get_by_label("Who").first.fill("ana@example.com")
        page.get_by_label("Why").fill("the new allocator; accepted")
        page.get_by_role("button", name="Save mark").click()
        expect(page.get_by_text("acknowledged by ana@example.com: the new allocator; "
                                "accepted", exact=False).first).to_be_visible(timeout=60_000)
        no_exception(page)
        page.screenshot(path=str(ARTIFACTS / "e2e-states-board.png"), full_page=True)
    with open_db(db_path) as con:
        (mark,) = group_marks(con, name)
    assert (mark.kind, mark.who, mark.state, mark.sweep_id) == (
        "acknowledged", "ana@example.com", "regression", "sweep-07")

    write_feed(db_path, name, StatePolicy(), "http://dash.example", feed, mark.at)
    with dashboard(db_path, tmp_path, BENCH_VIEWER="1") as (port, _), \
            browser_page("states-viewer") as page:
        base = f"http://127.0.0.1:{port}"
        page.goto(f"{base}/history?group={quote(name)}")
        expect(page.get_by_text("showing 3 of 3")).to_be_visible(timeout=60_000)
        # acknowledged: after what nobody has looked at, and its mark shown to everyone
        assert column(page, 0, 3) == ["missing", "no change", "regression"]
        expect(page.get_by_text("Marks are made by whoever may launch; this session reads "
                                "them.", exact=False)).to_be_visible()
        expect(page.get_by_role("button", name="Save mark")).to_have_count(0)
        expect(page.get_by_role("button", name="Withdraw mark")).to_have_count(0)
        page.get_by_text("Evidence of").wait_for()
        link = page.get_by_role("link", name="Atom feed of this group's alerts")
        href = link.get_attribute("href")
        assert href == f"{base}/app/static/feeds/{feed_name(name)}"
        no_exception(page)
        with urllib.request.urlopen(href, timeout=30) as r:
            assert r.status == 200
            assert r.headers["Content-Type"].split(";")[0] in ("application/xml", "text/xml")
            root = ET.fromstring(r.read())
    a = f"{{{ATOM_NS}}}"
    assert root.tag == f"{a}feed"
    assert root.find(f"{a}title").text == f"Benchmark states: {name}"
    assert sorted(e.find(f"{a}title").text for e in root.findall(f"{a}entry")) == [
        "missing: resnet18 64px b1 t1 · tensorflow (tf_function)", f"regression: {WORST}"]
