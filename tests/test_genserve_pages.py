"""Serving a language model on the Deploy page (issue 38), on seeds.records.seed_genserve's
tests (a VALID and an INVALID Server test, a closed-loop sweep of 1, 2, 4 and 8 users): the
Work switch, the chosen test's verdict, figures, histograms, its sweep's Pareto and probes,
a bad link value, viewer mode and the launch form; and the queries and words behind them,
on the same fixed numbers."""

import json

import duckdb
import pytest

from engine.present.genserve_text import (figures_frame, launch_plan, pareto_frame,
                                          pareto_sentence, request_frame, verdict)
from engine.run.jobs.genserve_request import GenServeRequest
from seeds.records import GS_SWEEP, GS_USERS_SWEEP, seed_genserve, seed_sweep
from store.genserve import (genserve_log, genserve_log_sizes, genserve_requests,
                            genserve_tests, has_genserve, sweep_tests)
from tests.conftest import seed_once
from tests.test_crafted import crafted, errors
from tests.test_pages import FakeManager, page

DEPLOY = "views/deploy.py"


@pytest.fixture
def gs_db(db_path):
    seed_once(seed_genserve, db_path)
    return db_path


@pytest.fixture
def con(gs_db):
    with duckdb.connect(str(gs_db), read_only=True) as c:
        yield c


# ---- store/genserve.py ----------------------------------------------------------------

def test_the_stored_tests_newest_first_filtered_and_by_sweep(con):
    assert genserve_tests(con).run_id.tolist() == [
        "gs-users-8", "gs-users-4", "gs-users-2", "gs-users-1", "gs-invalid", "gs-valid"]
    assert genserve_tests(con, "tiny_llama", "eager", "server").run_id.tolist() == [
        "gs-invalid", "gs-valid"]
    assert genserve_tests(con, scenario="offline").empty
    assert sweep_tests(con, GS_USERS_SWEEP).users.tolist() == [1, 2, 4, 8]  # as they ran
    row = genserve_tests(con, engine="eager").set_index("run_id").loc["gs-invalid"]
    assert (row.status, row.failed_rules, row.loadgen_errors, row.target_qps) == (
        "invalid", ["Performance constraints", "Early stopping"], 1, 20.0)
    assert has_genserve(con)


def test_one_tests_requests_and_logs(con):
    req = genserve_requests(con, "gs-valid")
    assert req.seq.tolist() == list(range(10))
    assert (req.issue_ns[9], req.first_ns[9], req.done_ns[9]) == (
        1_620_000_000, 1_930_000_000, 2_000_000_000)
    assert genserve_log_sizes(con, "gs-valid") == {"mlperf_log_summary.txt": 622,
                                                   "mlperf_log_detail.txt": 18}
    assert genserve_log(con, "gs-valid", "mlperf_log_detail.txt") == "detail of gs-valid"
    assert "Result is : VALID" in genserve_log(con, "gs-valid", "mlperf_log_summary.txt")
    assert genserve_log_sizes(con, "gs-users-1") == {}  # a closed loop: no LoadGen
    assert genserve_log(con, "gs-users-1", "mlperf_log_summary.txt") is None


def test_has_genserve_is_false_without_genserve_rows(db_path):
    seed_once(seed_sweep, db_path)
    with duckdb.connect(str(db_path), read_only=True) as c:
        assert not has_genserve(c)


# ---- engine/present/genserve_text.py --------------------------------------------------

def test_the_verdicts_name_each_failed_rule_and_our_lower_bounds(con):
    rows = genserve_tests(con).set_index("run_id", drop=False)
    state, text = verdict(rows.loc["gs-valid"].to_dict())
    assert state == "ok"
    assert text.startswith("LoadGen: VALID: p99 TTFT 310.0 ms and p99 TPOT 10.0 ms within "
                           "TTFT 2,000 ms and TPOT 100 ms. 10 of 10 requests (100%) met both "
                           "bounds")
    assert "Our readings (TTFT, E2E) are lower bounds on LoadGen's" in text
    state, text = verdict(rows.loc["gs-invalid"].to_dict())
    assert state == "invalid"
    assert text.startswith("LoadGen: INVALID — Performance constraints: p99 TTFT 2,775.0 ms "
                           "over its 2,000 ms bound; Early stopping: too few requests")
    assert "LoadGen counted 1 SUT error (its detail log lists them)" in text
    assert "7 of 10 requests (70%) met both bounds" in text
    state, text = verdict(rows.loc["gs-users-8"].to_dict())
    assert (state, text) == ("ok", "Closed loop of 8 users: ours, not LoadGen's, so no LoadGen "
                             "verdict. 32 of 32 requests (100%) met both bounds (TTFT 2,000 "
                             "ms and TPOT 100 ms); p99 TTFT 200.0 ms, p99 TPOT 45.0 ms.")
    assert verdict({"status": "error", "reason": "OOM", "requests": None}) == (
        "failed", "The test measured nothing (error): OOM")


def test_the_figures_of_the_valid_test(con):
    row = genserve_tests(con).set_index("run_id").loc["gs-valid"].to_dict()
    table = figures_frame(row).set_index("figure")
    # 10 requests, 80 tokens, the first issue at 0 and the last completion at 2.000 s
    assert table.loc["requests/s", "ours"] == 5.0
    assert table.loc["output tokens/s (per machine)"].tolist()[:2] == [40.0, 40.0]
    assert table.loc["input tokens/s", "ours"] == 80.0
    assert table.loc["tokens/s per user", "ours"] == 100.0  # 1 / 10 ms
    # TTFT 40..120 ms and 310, by LoadGen's rule (sorted[floor(N p)]): p50 [5], p99 [9]
    assert table.loc["TTFT p50", "ours"] == 90.0
    assert table.loc["TTFT p99", "ours"] == 310.0
    assert table.loc["TPOT p99"].tolist()[:2] == [10.0, 10.0]
    frame = request_frame(genserve_requests(con, "gs-valid"))
    assert frame.ttft_ms.tolist()[-1] == 310.0 and set(frame.tpot_ms) == {10.0}


def test_the_pareto_front_of_the_concurrency_sweep(con):
    points = pareto_frame(sweep_tests(con, GS_USERS_SWEEP))
    assert points.users.tolist() == [1, 2, 4, 8]
    assert points.front.tolist() == [True, True, True, False]  # 8 users: beaten on both
    assert points.output_tok_s.round(2).tolist() == [80.0, 136.17, 188.24, 124.27]
    assert pareto_sentence(points) == (
        "On the Pareto front: at 1 user: 100.0 tok/s per user, 80.0 tok/s per machine; at 2 "
        "users: 80.0 tok/s per user, 136.2 tok/s per machine; at 4 users: 50.0 tok/s per "
        "user, 188.2 tok/s per machine. Off it: at 8 users: 22.2 tok/s per user, 124.3 tok/s "
        "per machine (2 users beat it on both).")


def test_the_launch_plan_names_each_test():
    specs, _ = GenServeRequest(scenarios=("server", "closed-loop"), model="tiny_llama",
                               target_qps=2.0, users=(1, 4), cores=4).expand()
    assert launch_plan(specs).startswith(
        "**3 tests** of tiny_llama on eager (fp32, 1 thread(s), max 1 sequence(s)), prompt "
        "128, output 64, bounds TTFT 2,000 ms and TPOT 100 ms: Server at 2 req/s; Closed loop "
        "of 1 user; Closed loop of 4 users.")


# ---- the page ---------------------------------------------------------------------------

def test_with_no_test_stored_the_switch_offers_the_form_and_says_so(db_path, monkeypatch):
    seed_once(seed_sweep, db_path)
    at = page(DEPLOY, db_path, monkeypatch, {"work": "generate"})
    assert at.radio(key="work").value == "generate" and not at.exception
    assert [s for s in at.selectbox if s.key == "gsf_model"]  # the form: launch the first
    assert not [s for s in at.selectbox if s.key == "gs_run"]
    assert any(i.value.startswith("No serving test of a language model is stored yet")
               for i in at.info)


def test_a_chosen_test_shows_its_verdict_figures_histograms_and_logs(gs_db, monkeypatch):
    at = page(DEPLOY, gs_db, monkeypatch, {"work": "generate", "run": "gs-valid"})
    assert at.radio(key="work").value == "generate"
    assert at.selectbox(key="gs_run").value == "gs-valid"
    (ok,) = [s.value for s in at.success]
    assert ok.startswith("LoadGen: VALID: p99 TTFT 310.0 ms and p99 TPOT 10.0 ms")
    assert [(m.label, m.value) for m in at.metric] == [
        ("output tok/s", "40.0"), ("tok/s per user", "100.0"), ("goodput", "5 req/s"),
        ("TTFT p99", "310.0 ms"), ("TPOT p99", "10.0 ms")]
    charts = [json.loads(c.proto.spec)["layout"] for c in at.get("plotly_chart")]
    assert len(charts) == 2
    assert charts[0]["title"]["text"] == "TTFT per request: 10 requests · 0 over the bound"
    # the bound a rule, the axis reaching it: 2,000 ms x 1.05
    assert [a["text"] for a in charts[0]["annotations"]][-1] == "bound 2,000 ms"
    assert charts[0]["xaxis"]["range"] == [0, 2100.0]
    assert [a["text"] for a in charts[1]["annotations"]][-1] == "bound 100 ms"
    assert len(at.get("download_button")) == 2
    # its sweep's two Server tests: the highest VALID rate and the first above it that is not
    assert any(m.value.startswith("Highest rate LoadGen judged VALID here: 5 req/s")
               for m in at.markdown)
    assert (at.query_params["run"], at.query_params["work"]) == ("gs-valid", "generate")


def test_an_invalid_test_and_a_concurrency_sweep(gs_db, monkeypatch):
    at = page(DEPLOY, gs_db, monkeypatch, {"work": "generate", "run": "gs-inval"})  # a prefix
    (bad,) = [e.value for e in at.error]
    assert "Performance constraints: p99 TTFT 2,775.0 ms over its 2,000 ms bound" in bad
    at.selectbox(key="gs_run").set_value("gs-users-4").run()
    assert not at.exception
    assert any(m.value.startswith("On the Pareto front: at 1 user") for m in at.markdown)
    assert len(at.get("plotly_chart")) == 3  # two histograms and the Pareto
    assert any("No LoadGen logs" in c.value for c in at.caption)


def test_a_bad_run_in_the_link_is_named_and_the_page_still_draws(gs_db, monkeypatch):
    at = page(DEPLOY, gs_db, monkeypatch, {"work": "generate", "run": "nope-xyz"})
    assert any(w.value.startswith("link: run='nope-xyz' is not allowed; allowed: one of "
                                  "gs-users-8,") for w in at.warning)
    assert at.selectbox(key="gs_run").value == "gs-users-8"  # the newest instead


def test_viewer_mode_shows_everything_without_the_form(gs_db, monkeypatch):
    monkeypatch.setenv("BENCH_VIEWER", "1")
    at = page(DEPLOY, gs_db, monkeypatch, {"work": "generate", "run": "gs-valid"})
    assert not [b for b in at.button if b.key == "gsf_launch"]
    assert not [s for s in at.selectbox if s.key == "gsf_model"]
    assert [s.value for s in at.success][0].startswith("LoadGen: VALID")
    assert len(at.get("plotly_chart")) == 2 and len(at.get("download_button")) == 2


def test_the_form_queues_a_genserve_request(gs_db, monkeypatch):
    fake = FakeManager()
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: fake)
    at = page(DEPLOY, gs_db, monkeypatch, {"work": "generate"})
    at.selectbox(key="gsf_model").set_value("smollm2_135m")
    at.multiselect(key="gsf_scenarios").set_value(["server", "closed-loop"])
    at.number_input(key="gsf_prompt").set_value(64)
    at.number_input(key="gsf_output").set_value(16)
    at.number_input(key="gsf_qps").set_value(0.5)
    at.text_input(key="gsf_users").set_value("1 2").run()
    assert not errors(at)[1:], errors(at)  # the chosen test's verdict may be the one error
    at.button(key="gsf_launch").click().run()
    (req,) = fake.submitted
    assert isinstance(req, GenServeRequest)
    assert (req.model, req.engine, req.scenarios, req.prompt_len, req.output_len,
            req.target_qps, req.users, req.preset, req.ttft_bound_ms) == (
        "smollm2_135m", "eager", ("server", "closed-loop"), 64, 16, 0.5, (1, 2), "standard",
        None)


@pytest.mark.parametrize("key, value, message", [
    ("gsf_users", "1, 999", "users: 999 is out of range"),
    ("gsf_output", 1, "output_len: 1 is not allowed; allowed: integer 2..131072"),
])
def test_a_refused_box_names_its_field_and_disables_launch(key, value, message, gs_db,
                                                           monkeypatch):
    at = page(DEPLOY, gs_db, monkeypatch, {"work": "generate", "run": "gs-valid"})
    widget = at.text_input(key=key) if key == "gsf_users" else at.number_input(key=key)
    widget.set_value(value).run()
    assert any(e.startswith(message) for e in errors(at)), errors(at)
    assert at.button(key="gsf_launch").disabled is True


def test_a_crafted_engine_is_refused_naming_the_field(gs_db, monkeypatch):
    at = page(DEPLOY, gs_db, monkeypatch, {"work": "generate"})
    crafted(at, "selectbox", "gsf_engine", click="gsf_launch", string_value="vllm")
    assert errors(at)[0].startswith("runtime: ")
    assert not at.get("plotly_chart")
