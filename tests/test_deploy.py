"""The Deploy page (issue 27 part 5) through AppTest: stored serving tests seeded through the
store (tests/serving_seed.py: a VALID SingleStream and an INVALID Server test), what the page
shows of them, its launch through a fake job queue, its refusals, viewer mode, its link and
its report; and the pure builders it draws with."""

import pytest

from engine.scenarios.serving.loadgen import parse_summary
from engine.present.serving_text import (failed_rule_reasons, latency_distribution,
                                         serve_plan)
from engine.run.jobs.serve_request import ServeRequest
from tests.serving_seed import SERVER_INVALID, seed_serving
from tests.test_pages import FakeManager, page

DEPLOY = "views/deploy.py"


@pytest.fixture
def fake(monkeypatch):
    manager = FakeManager()
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: manager)
    return manager


def test_an_empty_database_says_how_to_run_a_test_and_offers_the_form(db_path, monkeypatch):
    at = page(DEPLOY, db_path, monkeypatch)
    assert any(i.value.startswith("No serving tests stored yet.") for i in at.info)
    assert at.button(key="sv_launch").disabled is False
    assert at.radio(key="sv_scenario").options == ["SingleStream", "MultiStream", "Server",
                                                   "Offline"]
    assert not at.get("plotly_chart") and not at.error


def test_a_valid_test_shows_its_verdict_figures_chart_and_logs(db_path, monkeypatch):
    seed_serving(db_path)
    at = page(DEPLOY, db_path, monkeypatch, {"run": "serve-single"})
    assert at.selectbox(key="sv_run").value == "serve-single"
    assert [s.value for s in at.success] == [
        "LoadGen: **VALID** - every rule of the test is satisfied."]
    assert [(m.label, m.value) for m in at.metric] == [
        ("QPS", "480.5"), ("p90 latency", "2.10 ms"), ("early-stopping p90", "2.20 ms"),
        ("queries", "400")]
    assert "within the 5 ms bound" in at.metric[1].help
    assert any(c.value.startswith("Asked for: scenario SingleStream, max batch 1, bound 5 ms")
               for c in at.caption)
    chart = at.get("plotly_chart")
    assert len(chart) == 1 and "400 queries" in chart[0].proto.spec
    assert any("Result is : VALID" in c.value for c in at.code)  # the summary log shown
    downloads = at.get("download_button")
    assert [d.proto.label.split(" (")[0] for d in downloads] == [
        "Download the summary log", "Download the detail log"]
    assert at.dataframe[1].value.latency.tolist() == [
        "p50", "p90", "p99", "min", "mean", "max"]


def test_an_invalid_test_names_each_failed_rule_with_its_reason(db_path, monkeypatch):
    seed_serving(db_path)
    at = page(DEPLOY, db_path, monkeypatch)  # the newest test: the Server one
    assert at.selectbox(key="sv_run").value == "serve-server"
    (verdict,) = [e.value for e in at.error]
    assert verdict.startswith("LoadGen: **INVALID** - the figures below cannot be claimed.")
    assert ("- **Performance constraints** not satisfied: the p99 latency (604.16 ms) is over "
            "the bound (15.00 ms): the system cannot answer 1000 QPS within it.") in verdict
    assert ("- **Min duration** not satisfied: the test ran shorter than its minimum "
            "duration (10 s).") in verdict
    assert "- **Early stopping** not satisfied: too few queries" in verdict
    assert "- LoadGen recommends: Reduce target QPS to improve latency." in verdict
    assert [(m.label, m.value) for m in at.metric] == [
        ("samples/s", "450.2"), ("p99 latency", "604.16 ms"), ("queries", "300")]
    table = at.dataframe[0].value
    assert table.loadgen.tolist() == ["INVALID", "VALID"]


def test_viewer_mode_shows_results_and_never_a_launch(db_path, monkeypatch):
    seed_serving(db_path)
    monkeypatch.setenv("BENCH_VIEWER", "1")
    at = page(DEPLOY, db_path, monkeypatch, {"run": "serve-single"})
    assert not [b for b in at.button if b.key == "sv_launch"]
    assert [s.value for s in at.success][0].startswith("LoadGen: **VALID**")
    assert len(at.get("download_button")) == 2
    assert "sv_scenario" not in [r.key for r in at.radio]


def test_launch_submits_one_serve_request_with_the_chosen_fields(db_path, monkeypatch, fake):
    at = page(DEPLOY, db_path, monkeypatch)
    at.selectbox(key="sv_model").set_value("identity").run()
    assert at.selectbox(key="sv_runtime").options == ["selftest/python"]
    at.selectbox(key="sv_threads").set_value(1)
    at.radio(key="sv_scenario").set_value("server").run()
    at.number_input(key="sv_bound").set_value(15.0)
    at.number_input(key="sv_qps").set_value(50.0)
    at.number_input(key="sv_max_batch").set_value(4)
    at.number_input(key="sv_max_wait").set_value(1.0)
    at.radio(key="sv_duration").set_value("custom").run()
    at.number_input(key="sv_min_duration").set_value(0.5)
    at.number_input(key="sv_min_queries").set_value(20).run()
    assert not at.error, [e.value for e in at.error]
    assert at.info[0].value.startswith("**LoadGen Server test** of identity (selftest, python)"
                                       ", 1 thread(s); Poisson arrivals at 50 QPS, p99 bound "
                                       "15 ms, batches of at most 4 waiting at most 1 ms; at "
                                       "least 0.5 s and 20 queries")
    at.button(key="sv_launch").click().run()
    (req,) = fake.submitted
    assert isinstance(req, ServeRequest)
    assert (req.scenarios, req.model, req.framework, req.runtime, req.threads, req.max_batch,
            req.target_qps, req.bound_ms, req.max_wait_ms, req.min_duration_s,
            req.min_query_count, req.official) == (
        ("server",), "identity", "selftest", "python", 1, 4, 50.0, 15.0, 1.0, 0.5, 20, False)
    assert at.success[0].value == "Serving test job 1 starts now."


def test_the_official_preset_asks_for_600_s(db_path, monkeypatch, fake):
    at = page(DEPLOY, db_path, monkeypatch)
    at.radio(key="sv_duration").set_value("official").run()
    assert "at least 600 s (MLPerf's official minimum)" in at.info[0].value
    at.button(key="sv_launch").click().run()
    (req,) = fake.submitted
    assert (req.official, req.duration_s(), req.scenarios) == (True, 600.0, ("single-stream",))


@pytest.mark.parametrize("scenario, key, value, message", [
    ("server", "sv_bound", 0.0, "bound_ms: 0 is not allowed; allowed: number 0.001..600000"),
    ("single-stream", "sv_bound", -5.0,
     "bound_ms: -5 is not allowed; allowed: number 0.001..600000"),
    ("server", "sv_qps", 0.0, "target_qps: 0 is not allowed; allowed: number 0.001..10000000"),
    ("offline", "sv_max_batch", 300,
     "max_batch: 300 is not allowed; allowed: integer 1..256"),
    ("server", "sv_max_wait", -1.0,
     "max_wait_ms: -1 is not allowed; allowed: number 0..10000"),
])
def test_bad_input_is_named_with_its_range_and_nothing_launches(scenario, key, value, message,
                                                               db_path, monkeypatch, fake):
    at = page(DEPLOY, db_path, monkeypatch)
    at.radio(key="sv_scenario").set_value(scenario).run()
    at.number_input(key=key).set_value(value).run()
    assert [e.value for e in at.error] == [message]
    assert at.button(key="sv_launch").disabled is True  # a press of it is dropped
    assert fake.submitted == [] and not at.success  # (tests/test_crafted.py sends one)


def test_a_link_fills_the_form_and_the_test_and_the_page_writes_it_back(db_path, monkeypatch):
    seed_serving(db_path)
    query = {"model": "identity", "runtime": "selftest/python", "threads": "1",
             "scenario": "server", "bound_ms": "15", "target_qps": "50", "max_batch": "4",
             "duration": "custom", "min_duration_s": "0.5", "run": "serve-si"}
    at = page(DEPLOY, db_path, monkeypatch, query)
    assert not at.warning, [w.value for w in at.warning]
    assert (at.selectbox(key="sv_model").value, at.radio(key="sv_scenario").value,
            at.number_input(key="sv_bound").value, at.number_input(key="sv_qps").value,
            at.number_input(key="sv_max_batch").value, at.radio(key="sv_duration").value,
            at.number_input(key="sv_min_duration").value, at.selectbox(key="sv_run").value
            ) == ("identity", "server", 15.0, 50.0, 4, "custom", 0.5, "serve-single")
    # what differs from the form's defaults (identity's one runtime is its default)
    written = {**query, "run": "serve-single"}
    del written["runtime"]
    assert dict(at.query_params) == written
    # a bad value in a link is named with its range; the page still draws
    at = page(DEPLOY, db_path, monkeypatch, {"scenario": "server", "bound_ms": "0",
                                             "max_batch": "999", "run": "nope"})
    notes = [w.value for w in at.warning]
    assert "link: bound_ms='0' is not allowed; allowed: number 0.001..600000; using 100" in notes
    assert "link: max_batch='999' is not allowed; allowed: integer 1..256; using 8" in notes
    assert any(n.startswith("link: run='nope' is not offered") or n.startswith("link: run=")
               for n in notes)
    assert at.number_input(key="sv_bound").value == 100.0


def test_the_report_of_a_launch_holds_its_verdicts_reasons_and_log(db_path, monkeypatch):
    seed_serving(db_path)
    at = page(DEPLOY, db_path, monkeypatch, {"run": "serve-server"})
    at.radio(key="sv_report_format").set_value("md").run()
    at.button(key="sv_prepare_report").click().run()
    (button,) = [d for d in at.get("download_button") if d.proto.label.startswith(
        "Download (.md")]
    import duckdb

    from engine.present.serving_report import build_serving_report
    with duckdb.connect(str(db_path), read_only=True) as con:
        md = build_serving_report(con, "sweep-serve-2", "md").decode()
        html = build_serving_report(con, "sweep-serve-2", "html").decode()
    assert md.startswith("# Serving report: sweep sweep-se")
    assert "LoadGen: **INVALID**" in md and "**Min duration** not satisfied" in md
    assert "Result is : INVALID" in md and "| p99 | 604.1594 |" in md
    assert "<h2>" in html and "plotly" in html and "Performance constraints not satisfied" in html


def test_the_failed_rules_and_the_chart_from_the_summary_and_raw_samples():
    class Row:
        scenario, min_duration_s, min_query_count, bound_ms = "server", 10.0, 100, 15.0
        summary = parse_summary(SERVER_INVALID)
    assert [line.split(":")[0] for line in failed_rule_reasons(Row)] == [
        "**Performance constraints** not satisfied", "**Min duration** not satisfied",
        "**Early stopping** not satisfied", "LoadGen recommends", "LoadGen recommends"]
    samples = [1_000_000] * 99 + [500_000_000]  # one slow query in the tail
    fig = latency_distribution(samples, title="t", percentile=99.0, bound_ms=15.0)
    assert fig.layout.title.text == ("t: 100 queries · 1 queries beyond p99.9 not drawn "
                                     "(max 500.000 ms)")
    assert sum(fig.data[0].y) == 99
    assert latency_distribution([], title="t").layout.title.text == \
        "t: no per-query latency stored"


def test_the_plan_says_what_a_single_stream_test_will_run():
    req = ServeRequest(("single-stream",), "identity", "selftest", bound_ms=5.0)
    text = serve_plan(req, req.specs())
    assert text == ("**LoadGen SingleStream test** of identity (selftest, python), 1 thread(s); "
                    "p90 reported against 5 ms; at least 10 s and 100 queries, plus the "
                    "model's load and warm-up.")


def test_a_users_model_file_is_picked_as_on_the_run_page(db_path, monkeypatch, tmp_path, fake):
    monkeypatch.setenv("BENCH_MODELS_DIR", str(tmp_path / "models"))
    at = page(DEPLOY, db_path, monkeypatch)
    at.radio(key="model_source").set_value("Your model file").run()
    (msg,) = [e.value for e in at.error]
    assert msg.startswith("model_file: no model file in ") and "allowed: upload one" in msg
    assert at.button(key="sv_launch").disabled is True and fake.submitted == []
