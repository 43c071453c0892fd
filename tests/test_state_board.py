"""The History page's board of a group's benchmark states, through AppTest on a real DuckDB
file seeded by the real store functions (seeds/states.py): worst first, the filters and the
evidence from the link, a mark made, shown and withdrawn, and a viewer who gets no form and
whose crafted submit writes nothing."""

import pytest
from streamlit.testing.v1 import AppTest

from engine.analysis.states import ACKNOWLEDGED, REGRESSION
from seeds.states import GROUP, seed_group
from store.db import open_db
from store.states import group_marks
from tests.conftest import ROOT, seed_once

APP = str(ROOT / "app.py")
WORST = "resnet18 64px b1 t1 · torch (eager)"


@pytest.fixture
def group_db(db_path):
    seed_once(seed_group, db_path)
    return db_path


def history(db_path, monkeypatch, query=None, **env):
    monkeypatch.setenv("BENCH_DB", str(db_path))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(query or {})
    at.run()
    at.switch_page("views/history.py")
    at.query_params.update(query or {})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def board(at):
    return at.dataframe[0].value


def test_the_board_shows_every_configuration_worst_first_with_the_policy_and_evidence(
        group_db, monkeypatch):
    at = history(group_db, monkeypatch)
    assert at.selectbox(key="state_group").value == GROUP
    b = board(at)
    assert list(b.state) == ["regression", "missing", "no change"]
    assert list(b.configuration) == [WORST, "resnet18 64px b1 t1 · tensorflow (tf_function)",
                                     "mobilenet_v3_small 64px b1 t1 · torch (eager)"]
    assert list(b.since) == ["sweep-07", "sweep-07", "sweep-03"]
    captions = [c.value for c in at.caption]
    assert any(c.startswith("8 sweeps, newest sweep-07. Policy: Each sweep is judged by the "
                            "regression gate against the configuration's last 7 baseline")
               for c in captions)
    assert "1 regression · 1 missing · 1 no change · showing 3 of 3, worst first" in captions
    # the worst row's evidence: its two points, each against the six sweeps before the change
    assert at.selectbox(key="state_evidence").value == WORST
    points = at.dataframe[1].value
    assert list(points.sweep) == ["sweep-06", "sweep-07"]
    assert [round(r, 2) for r in points.ratio] == [1.31, 1.29]
    assert set(points["baseline sweeps"]) == {
        "sweep-00, sweep-01, sweep-02, sweep-03, sweep-04, sweep-05"}
    assert [b.label for b in at.button] == ["Save mark"]  # no mark yet: nothing to withdraw


def test_the_filters_and_the_evidence_come_from_the_link_and_go_back_to_it(group_db,
                                                                          monkeypatch):
    at = history(group_db, monkeypatch, {"group": GROUP, "state": "no change,missing",
                                         "framework": "torch"})
    assert list(board(at).state) == ["no change"]
    assert at.query_params["state"] == "no change,missing"
    assert at.query_params["evidence"] == "mobilenet_v3_small 64px b1 t1 · torch (eager)"
    at = history(group_db, monkeypatch, {"group": GROUP, "state": "exploded"})
    assert [w.value for w in at.warning] == [
        "link: state='exploded' is not allowed; allowed: one of regression, missing, "
        "suspicious, not comparable, recovered, improvement, insufficient data, no change "
        "\\(and 1 more\\); ignored"]
    assert len(board(at)) == 3
    # a filter that drops the configuration whose evidence is open: the first one left
    at.multiselect(key="state_filter_state").set_value(["missing"]).run()
    assert not at.exception, [e.value for e in at.exception]
    assert list(board(at).state) == ["missing"]
    assert at.selectbox(key="state_evidence").value == (
        "resnet18 64px b1 t1 · tensorflow (tf_function)")
    assert at.query_params["state"] == "missing"


def test_an_acknowledgement_is_stored_shown_and_withdrawn(group_db, monkeypatch):
    at = history(group_db, monkeypatch)
    at.radio(key="mark_action").set_value("acknowledge")
    at.text_input(key="mark_who").input("ana@example.com")
    at.text_area(key="mark_why").input("the new allocator; accepted")
    at.button[0].click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    with open_db(group_db) as con:
        (mark,) = group_marks(con, GROUP)
    assert (mark.kind, mark.who, mark.why, mark.state, mark.sweep_id) == (
        ACKNOWLEDGED, "ana@example.com", "the new allocator; accepted", REGRESSION,
        "sweep-07")
    b = board(at)
    # acknowledged: still a regression, now after what nobody has looked at
    assert list(b.state) == ["missing", "no change", "regression"]
    assert b.mark.iloc[2].startswith("acknowledged by ana@example.com on ")
    assert b.mark.iloc[2].endswith(": the new allocator; accepted")
    at.text_input(key="withdraw_who").input("ana@example.com")
    at.button[1].click().run()
    with open_db(group_db) as con:
        assert group_marks(con, GROUP) == []
    assert list(board(at).state) == ["regression", "missing", "no change"]


def test_an_empty_reason_is_named_not_stored(group_db, monkeypatch):
    at = history(group_db, monkeypatch)
    at.text_input(key="mark_who").input("ana")
    at.button[0].click().run()
    assert not at.exception
    assert [e.value for e in at.error] == ["why: empty; allowed: 1..500 characters of text"]
    with open_db(group_db) as con:
        assert group_marks(con, GROUP) == []


def test_a_viewer_sees_the_marks_gets_no_form_and_a_crafted_submit_writes_nothing(
        group_db, monkeypatch):
    writer = history(group_db, monkeypatch)
    writer.radio(key="mark_action").set_value("ignore")
    writer.text_input(key="mark_who").input("eve")
    writer.text_area(key="mark_why").input("crafted")
    states = writer._tree.get_widget_states()
    (button,) = [w for w in states.widgets if w.id == writer.button[0].id]
    button.trigger_value = True
    monkeypatch.setenv("BENCH_VIEWER", "1")
    viewer = writer._run(states)  # the writer's own submit, sent by a viewer's session
    assert not viewer.exception
    assert [b.label for b in viewer.button] == []
    assert any(c.value.startswith("Marks are made by whoever may launch; this session "
                                  "reads them. viewer mode: this dashboard is read-only")
               for c in viewer.caption)
    with open_db(group_db) as con:
        assert group_marks(con, GROUP) == []


def test_a_mark_made_or_withdrawn_changes_the_data_version_the_pages_cache_on(group_db):
    """The board's reads are cached on store.queries.data_version: a mark that left it
    unchanged would stay unseen by every session until the next stored run."""
    from dashboard.access import Access
    from store.queries import data_version
    from engine.analysis.states import StatePolicy
    from store.states import add_mark, group_states, withdraw_mark

    writer = Access(viewer=False, remote=False, auth_configured=False, email=None,
                    admin=False)
    with open_db(group_db) as con:
        key = group_states(con, GROUP, StatePolicy())[0].key
        before = data_version(con)
        m = add_mark(con, writer, group=GROUP, kind="ignored", who="ana", why="flaky box",
                     config_key=key)
        marked = data_version(con)
        withdraw_mark(con, writer, m.mark_id, who="ana")
        assert len({before, marked, data_version(con)}) == 3


def test_the_report_can_include_the_groups_board_worst_first_with_the_policy(group_db,
                                                                            capsys, tmp_path):
    import html as html_lib

    from engine.cli import main
    from engine.core.errors import UserError
    from engine.present.report import build_report

    with open_db(group_db) as con:
        md = build_report(con, "sweep-07", "md", group=GROUP).decode()
        page = build_report(con, "sweep-07", "html", group=GROUP).decode()
        plain = build_report(con, "sweep-07", "md").decode()
        with pytest.raises(UserError) as err:
            build_report(con, "sweep-07", "md", group="weekly")
    assert err.value.field == "group"
    assert str(err.value) == "group: 'weekly' has no sweeps; allowed: one of nightly cpu"
    assert "Benchmark states" not in plain
    head = md.index("**Benchmark states: nightly cpu** (Each sweep is judged by the "
                    "regression gate against the configuration's last 7 baseline sweeps")
    rows = [line for line in md[head:].splitlines() if line.startswith("| ")][1:4]
    assert [r.split(" | ")[0] for r in rows] == ["| regression", "| missing", "| no change"]
    assert rows[0].split(" | ")[1:5] == [WORST, "sweep-07", "1.287x", "1.262-1.313"]
    assert "3 configurations as of sweep sweep-07, the newest of 8 in group nightly cpu" in md
    assert "<h2>Benchmark states: nightly cpu</h2>" in page
    assert html_lib.escape(WORST) in page
    out = tmp_path / "r.md"
    assert main(["report", "sweep-07", "--group", GROUP, "--out", str(out),
                 "--db", str(group_db)]) == 0
    assert out.read_text() == md
    assert main(["report", "sweep-07", "--group", "weekly", "--db", str(group_db)]) == 2
    assert capsys.readouterr().err == ("error: group: 'weekly' has no sweeps; allowed: one "
                                       "of nightly cpu\n")


def test_compares_report_offers_the_groups_board(group_db, monkeypatch):
    from engine.present.report import build_report

    monkeypatch.setenv("BENCH_DB", str(group_db))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/compare.py")
    at.run()
    assert at.selectbox(key="report_group").options == ["no group", GROUP]
    at.radio(key="report_format").set_value("md")
    at.selectbox(key="report_group").set_value(GROUP)
    at.button(key="prepare_report").click().run()
    assert not at.exception
    sweep_id, fmt, doc, group = at.session_state["report"]
    with open_db(group_db) as con:
        assert doc == build_report(con, sweep_id, "md", group=GROUP)
    assert (fmt, group) == ("md", GROUP) and b"**Benchmark states: nightly cpu**" in doc


@pytest.mark.parametrize("kind, key, value, field", [
    ("selectbox", "state_group", dict(string_value="../../etc/passwd"), "group"),
    ("multiselect", "state_filter_state", dict(string_array_value=["exploded"]), "state"),
    ("multiselect", "state_filter_model", dict(string_array_value=["vgg"]), "model"),
    ("selectbox", "state_evidence", dict(string_value="9," * 5000), "evidence"),
    ("selectbox", "report_group", dict(string_value="weekly"), "group"),
])
def test_a_board_value_the_page_did_not_offer_gets_its_message(kind, key, value, field,
                                                               group_db, monkeypatch):
    from tests.test_crafted import crafted

    name = "views/compare.py" if key == "report_group" else "views/history.py"
    monkeypatch.setenv("BENCH_DB", str(group_db))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page(name)
    at.run()
    crafted(at, kind, key, **value)
    assert not at.exception, [e.value for e in at.exception]
    (msg,) = [e.value for e in at.error]
    assert msg.startswith(f"{field}: ") and " is not offered; allowed: " in msg, msg
    at.run()  # the next honest message draws the page again
    assert not at.exception and not at.error
