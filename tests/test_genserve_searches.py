"""Serving a language model's searches as jobs (issue 38): the requests' validation, each
replay's conclusion equal to what the job's stored search returned (seeds.genserve_searches:
the three jobs run against a rule-answering engine, fixed numbers), one job run through the
store's own sweep and read back, the Deploy page showing each search with its figures and
cost, a bad link value, viewer mode, a crafted widget message, the queued requests, the
report and the reproduce command."""

import duckdb
import pytest

from engine.core.errors import UserError
from engine.run.search.gen_report import build_genserve_report
from engine.present.genserve_search_text import (concurrency_summary, rate_summary,
                                                 reproduce_command, tuning_summary)
from engine.run.search.gen_max_rate import figures_of
from engine.run.search.gen_replays import (gen_probes, replay_gen_rate, replay_gen_tune,
                                           replay_users)
from engine.run.search.genserve_jobs import (GenMaxRateRequest, GenTuneRequest,
                                             GenUsersRequest)
from engine.run.search.replays import (GEN_RATE_COMMAND, GEN_TUNE_COMMAND,
                                       GEN_USERS_COMMAND, request_fields)
from seeds.genserve_searches import (GS_SEARCH_SWEEPS, GS_TUNE_SHAPE, GS_USERS_REQUEST,
                                     SeedEngine, seed_genserve_searches)
from store.genserve import sweep_tests
from tests.conftest import seed_once
from tests.test_crafted import crafted, errors
from tests.test_pages import FakeManager, page

DEPLOY = "views/deploy.py"
GS = dict(model="tiny_llama", prompt_len=16, output_len=8, cores=4)
RATE = ("max rate under p99 TTFT <= 2000 ms and p99 TPOT <= 100 ms: 5 requests/s (LoadGen "
        "VALID, 459 requests a probe); there: 41.7 output tok/s, goodput 5.21 req/s (100.0% "
        "of requests met both bounds on the SUT's clock), LoadGen p99 TTFT 50.0 ms, p99 TPOT "
        "10.00 ms")
USERS = ("most output tokens/s at 4 users: 188.2 tok/s for the machine, 50.0 tok/s per user "
         "(1 / median TPOT); Pareto front at users 1, 2, 4; stopped: output tokens/s rose "
         "-34.0% from 4 to 8 users, under 5%: saturated")
TUNE = ("recommended under p99 TTFT <= 2000 ms and p99 TPOT <= 100 ms: openvino_genai_cb "
        "fp32, up to 4 sequences, 1 thread: 11.5 requests/s; the default (eager fp32, one "
        "request at a time, 1 thread): 5.47 requests/s; +110 % more requests/s; Pareto front: "
        "openvino_genai_cb fp32, up to 4 sequences, 1 thread; openvino_genai_cb fp32, up to 1 "
        "sequences, 1 thread; stopped: every candidate that survived pruning confirmed (2)")

_JOBS: dict = {}


def _seed(path):
    _JOBS["out"] = seed_genserve_searches(path)


@pytest.fixture
def searched(db_path):
    """The seeded searches and what each job returned (run once a session: a copy after)."""
    seed_once(_seed, db_path)
    return db_path, _JOBS["out"]


def _stored(db_path, name):
    with duckdb.connect(str(db_path), read_only=True) as con:
        sid = GS_SEARCH_SWEEPS[name]
        command = con.execute("SELECT command FROM sweeps WHERE sweep_id = ?",
                              [sid]).fetchone()[0]
        return request_fields(command), gen_probes(sweep_tests(con, sid)), con.execute(
            "SELECT count(*) FROM runs WHERE sweep_id = ?", [sid]).fetchone()[0]


# ---- the requests' validation -----------------------------------------------------------

@pytest.mark.parametrize("cls, given, field, message", [
    (GenMaxRateRequest, dict(search_queries=100), "search_queries",
     "search_queries: 100 is out of range; allowed: integer 459..1000000"),
    (GenMaxRateRequest, dict(target_qps=50.0), "target_qps",
     "target_qps: 50 req/s is out of range for 459 requests a probe (at most 1800 s, at "
     "least 20 TTFT bounds); allowed: 0.255..11.5"),
    (GenMaxRateRequest, dict(qps_precision=0.9), "qps_precision",
     "qps_precision: 0.9 is out of range; allowed: number 0.005..0.5"),
    (GenMaxRateRequest, dict(max_probes=1), "max_probes",
     "max_probes: 1 is out of range; allowed: integer 2..40"),
    (GenUsersRequest, dict(max_users=300), "max_users",
     "max_users: 300 is out of range; allowed: integer 1..256"),
    (GenUsersRequest, dict(max_num_seqs=4), "max_num_seqs",
     "max_num_seqs: eager answers one request at a time; allowed: 1"),
    (GenTuneRequest, dict(engines=("vllm",)), "engines",
     "engines: vllm is unknown; allowed: eager, openvino_genai_cb"),
    (GenTuneRequest, dict(engines=("compile",)), "engines",
     "engines: compile does not serve here: compiles a forward"),
    (GenTuneRequest, dict(engines=("eager",), precisions=("int4",)), "engines",
     "engines: no engine x precision of these runs here"),
    (GenTuneRequest, dict(seqs=(0,)), "seqs", "seqs: 0 is out of range; allowed: integer 1..256"),
    (GenTuneRequest, dict(thread_choices=(9,)), "threads",
     "threads: 9 is out of range; allowed: integer 1..4 (this machine has 4 logical cores)"),
    (GenTuneRequest, dict(objective="cost"), "machine_shape",
     "machine_shape: the cost objective prices a shape"),
])
def test_a_search_is_refused_before_it_runs_naming_field_and_range(cls, given, field,
                                                                    message):
    scenario = "server" if cls is GenMaxRateRequest else "closed-loop"
    with pytest.raises(UserError) as err:
        cls(scenarios=(scenario,), **{**GS, **given}).expand()
    assert err.value.field == field
    assert str(err.value).startswith(message), str(err.value)


def test_what_each_search_expands_to_and_records():
    specs, _ = GenMaxRateRequest(scenarios=("server",), max_probes=3, **GS).expand()
    assert (len(specs), specs[0].scenario, specs[0].query_count) == (4, "server", 459)
    specs, _ = GenUsersRequest(scenarios=("closed-loop",), engine="openvino_genai_cb",
                               max_num_seqs=8, max_users=10, min_query_count=4,
                               **GS).expand()
    assert [(s.users, s.min_query_count) for s in specs] == [(1, 4), (2, 8), (4, 16), (8, 32)]
    t = GenTuneRequest(scenarios=("closed-loop",), seqs=(1, 4), **GS)
    fields = request_fields(t.command())
    # engine, precision, max sequences, threads, replicas
    assert fields["candidates"] == [["eager", "fp32", 1, 1, 1],
                                    ["openvino_genai_cb", "fp32", 1, 1, 1],
                                    ["openvino_genai_cb", "fp32", 4, 1, 1]]
    assert (fields["default"], fields["ttft_bound_ms"], fields["tpot_bound_ms"]) == (
        ["eager", "fp32", 1, 1, 1], 2000.0, 100.0)
    assert t.command().startswith(GEN_TUNE_COMMAND + " {")


# ---- replays equal what the jobs returned ----------------------------------------------

def test_the_max_rate_search_replayed_is_what_the_job_found(searched):
    db_path, out = searched
    sweep_id, res, offline, why = out["rate"]
    fields, probes, n = _stored(db_path, "rate")
    assert (sweep_id, n, why) == (GS_SEARCH_SWEEPS["rate"], 6, "the Offline test's requests/s")
    assert [(q, r.status) for q, r in res.probes] == [
        (2.0, "ok"), (4.0, "ok"), (8.0, "invalid"), (6.0, "invalid"), (5.0, "ok")]
    again, off = replay_gen_rate(fields, probes)
    assert [(q, r.status, r.run_id) for q, r in again.probes] == [
        (q, r.status, r.run_id) for q, r in res.probes]
    assert (again.max_qps, again.bracket, again.stop_reason, off.run_id) == (
        5.0, (5.0, 6.0), "bracket [5.0, 6.0) within 20.0% of its VALID end", offline.run_id)
    assert rate_summary(again, figures_of, 2000, 100) == rate_summary(
        res, figures_of, 2000, 100) == RATE


def test_the_users_sweep_replayed_is_what_the_job_found(searched):
    db_path, out = searched
    _, c = out["users"]
    fields, probes, n = _stored(db_path, "users")
    again = replay_users(fields, probes)
    assert (n, [u for u, _ in again.points], again.front) == (4, [1, 2, 4, 8], (1, 2, 4))
    assert concurrency_summary(again, figures_of) == concurrency_summary(c, figures_of) == USERS


def test_a_users_sweep_cut_short_says_so(searched):
    db_path, _ = searched
    fields, probes, _ = _stored(db_path, "users")
    c = replay_users(fields, probes[:2])
    assert [u for u, _ in c.points] == [1, 2]
    assert c.stop_reason == ("stopped after 2 points with no further point stored "
                             "(cancelled, or still running)")


def test_the_tuning_replayed_is_what_the_job_found(searched):
    db_path, out = searched
    _, t, default = out["tune"]
    fields, probes, n = _stored(db_path, "tune")
    from engine.analysis.cost import resolve_shape
    from store.db import open_db
    from store.prices import effective_catalog

    with open_db(db_path) as con:
        machine = resolve_shape(GS_TUNE_SHAPE, effective_catalog(con)[0])
    again = replay_gen_tune(fields, probes, machine)
    assert tuning_summary(again, 2000, 100) == tuning_summary(t, 2000, 100) == TUNE
    assert [(c.label(), why[:41]) for c, why in again.pruned] == [
        ("eager fp32, one request at a time, 1 thread",
         "closed-loop 4.2 requests/s is 5.65x worse")]
    assert round(again.gain_pct, 2) == round(t.gain_pct, 2) == 109.83
    assert [round(x.cost, 4) for x in again.confirmed] == [0.2572, 0.2572]
    assert round(again.default.cost, 4) == 0.5397 and again.default.qps == pytest.approx(5.46875)
    assert (n, default.runtime) == (11, "eager")


def test_a_job_run_through_the_queue_interface_is_read_back_the_same(db_path):
    """GenUsersRequest.run as the job queue calls it, stored by the real sweep; the replay
    from the store says what the job returned."""
    from store.serving import search_sweeps

    specs, _ = GS_USERS_REQUEST.expand()
    stored, events = [], []
    said = GS_USERS_REQUEST.run(specs, db=db_path, runner=SeedEngine("q"), seed=0,
                                on_start=lambda sid: None, on_stored=stored.append,
                                on_event=lambda ev, n: events.append(n))
    assert said == USERS and len(stored) == 4
    with duckdb.connect(str(db_path), read_only=True) as con:
        (sid, command), = con.execute("SELECT sweep_id, command FROM sweeps").fetchall()
        assert search_sweeps(con, GEN_USERS_COMMAND).sweep_id.tolist() == [sid]
        c = replay_users(request_fields(command), gen_probes(sweep_tests(con, sid)))
    assert concurrency_summary(c, figures_of) == said


# ---- the page ---------------------------------------------------------------------------

def test_the_page_shows_each_search_with_its_figures_and_cost(searched, monkeypatch):
    db_path, _ = searched
    at = page(DEPLOY, db_path, monkeypatch, {"work": "generate"})
    assert [s.value for s in at.success][:2] == [RATE, TUNE]
    metrics = {m.label: m.value for m in at.metric}
    assert (metrics["max rate"], metrics["goodput there"], metrics["probes"],
            metrics["gain over the default"]) == ("5 req/s", "5.21 req/s", "5", "+109.8 %")
    assert any(m.value == USERS for m in at.markdown)
    frames = [d.value for d in at.dataframe]
    probes = next(f for f in frames if "target req/s" in f.columns)
    assert probes["target req/s"].tolist() == ["2", "4", "8", "6", "5"]
    cost = next(f for f in frames if "$/1M out at max" in f.columns)
    oci = cost.iloc[0]
    # 41.7 output tok/s on 1 core, scaled to the shape's 16: 666.7 tok/s at $0.448/h
    assert oci["which"] == "chosen shape (the cheapest on OCI)"
    assert (round(oci["output tok/s"], 1), round(oci["$/1M out at max"], 4),
            round(oci["$/1M in at max"], 4), round(oci["$/1M out flat out"], 4),
            oci["machines"], round(oci["USD a month"], 2)) == (
        666.7, 0.1867, 0.0933, 0.4861, 2, 654.08)
    assert oci["basis"].startswith("estimate: 41.7 output tokens/s per core")
    assert cost.provider.tolist() == ["OCI", "AWS", "Azure", "GCP"]
    pruned = next(f for f in frames if "why pruned" in f.columns)
    assert pruned.candidate.tolist() == ["eager fp32, one request at a time, 1 thread"]
    front = next(f for f in frames if "role" in f.columns)
    assert front["max req/s"].tolist() == [">= 11.5", ">= 11.5"]
    assert front["$/1M out"].tolist() == ["<= 0.2572", "<= 0.2572"]
    assert any(c.value.startswith("Reproduce in a terminal: `python -m engine genserve-users "
                                  "--model tiny_llama --engine openvino_genai_cb")
               for c in at.caption)
    charts = [c for c in at.get("plotly_chart")]
    assert charts  # the users sweep's Pareto


def test_the_bill_follows_the_target_in_the_link(searched, monkeypatch):
    db_path, _ = searched
    at = page(DEPLOY, db_path, monkeypatch, {"work": "generate", "gs_bill": "rps",
                                             "gs_target": "100"})
    cost = next(d.value for d in at.dataframe if "$/1M out at max" in d.value.columns)
    # 5.21 req/s on 1 core -> 83.3 on 16: 100 req/s is 2 machines
    assert (cost.iloc[0]["machines"], round(cost.iloc[0]["USD a month"], 2)) == (2, 654.08)


def test_a_bad_sweep_in_the_link_is_named_and_the_page_still_draws(searched, monkeypatch):
    db_path, _ = searched
    at = page(DEPLOY, db_path, monkeypatch, {"work": "generate", "gs_search": "nope"})
    assert any(w.value.startswith("link: gs_search='nope' is not allowed") for w in at.warning)
    assert at.selectbox(key="gs_search_sweep").value == GS_SEARCH_SWEEPS["rate"]


def test_viewer_mode_shows_the_searches_without_forms(searched, monkeypatch):
    db_path, _ = searched
    monkeypatch.setenv("BENCH_VIEWER", "1")
    at = page(DEPLOY, db_path, monkeypatch, {"work": "generate"})
    assert not [b for b in at.button if b.key in ("gss_launch", "gsu_launch", "gst_launch")]
    assert [s.value for s in at.success][:2] == [RATE, TUNE]


def test_the_search_forms_queue_their_requests(searched, monkeypatch):
    db_path, _ = searched
    fake = FakeManager()
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: fake)
    at = page(DEPLOY, db_path, monkeypatch, {"work": "generate"})
    at.number_input(key="gsf_prompt").set_value(16)
    at.number_input(key="gsf_output").set_value(8)
    at.number_input(key="gss_start").set_value(2.0)
    at.number_input(key="gss_probes").set_value(5).run()
    at.button(key="gss_launch").click().run()
    at.number_input(key="gsu_max_users").set_value(8).run()
    at.button(key="gsu_launch").click().run()
    at.multiselect(key="gst_seqs").set_value([1, 4]).run()
    at.button(key="gst_launch").click().run()
    rate, users, tune = fake.submitted
    assert isinstance(rate, GenMaxRateRequest) and (rate.target_qps, rate.max_probes,
                                                    rate.prompt_len) == (2.0, 5, 16)
    assert isinstance(users, GenUsersRequest) and (users.max_users, users.min_query_count) \
        == (8, 16)
    assert isinstance(tune, GenTuneRequest) and tune.seqs == (1, 4)
    assert tune.machine_shape == "VM.Standard.E3.Flex 16 OCPU/32 GB"  # the shape shown


def test_a_first_target_out_of_range_is_named_and_disables_launch(searched, monkeypatch):
    db_path, _ = searched
    at = page(DEPLOY, db_path, monkeypatch, {"work": "generate"})
    at.number_input(key="gss_start").set_value(50.0).run()
    assert any(e.startswith("target_qps: 50 req/s is out of range for 459 requests a probe")
               for e in errors(at)), errors(at)
    assert at.button(key="gss_launch").disabled is True


def test_a_crafted_engine_list_is_refused_naming_the_field(searched, monkeypatch):
    db_path, _ = searched
    at = page(DEPLOY, db_path, monkeypatch, {"work": "generate"})
    crafted(at, "multiselect", "gst_engines", click="gst_launch",
            string_array_value=["vllm"])
    assert errors(at)[0].startswith("engines: ")
    assert not at.get("plotly_chart")


# ---- the report and the reproduce command ------------------------------------------------

def test_the_report_holds_each_searchs_figures(searched):
    db_path, _ = searched
    with duckdb.connect(str(db_path), read_only=True) as con:
        rate = build_genserve_report(con, GS_SEARCH_SWEEPS["rate"], "md").decode()
        users = build_genserve_report(con, GS_SEARCH_SWEEPS["users"], "html").decode()
        tune = build_genserve_report(con, GS_SEARCH_SWEEPS["tune"], "md").decode()
        with pytest.raises(UserError) as err:
            build_genserve_report(con, "no-such-sweep", "md")
    assert err.value.field == "sweep"
    assert rate.startswith("# Max-rate search: tiny_llama, sweep sweep-gs")
    assert RATE in rate and "| 8 | invalid | INVALID |" in rate
    assert ("OCI VM.Standard.E3.Flex 16 OCPU/32 GB ($0.4480/h, 2026-03-03): $0.1867 per 1 M "
            "output tokens, $0.0933 per 1 M input tokens at the bound; flat out $0.4861 per "
            "1 M output [estimate:") in rate
    assert "python -m engine genserve-search --model tiny_llama --engine eager" in rate
    assert USERS in users and "plotly" in users and "<table" in users
    assert TUNE in tune and "Gain over the default (eager fp32, one request at a time, " \
                            "1 thread): +109.8 %." in tune
    assert "--machine-shape c6i.4xlarge" in tune


def test_the_reproduce_command_parses_back_to_the_same_request():
    from engine.cli import build_parser

    req = GenTuneRequest(scenarios=("closed-loop",), seqs=(1, 4), thread_choices=(1, 2),
                         objective="cost", machine_shape="c6i.4xlarge", preset="custom",
                         ttft_bound_ms=500.0, tpot_bound_ms=50.0, **GS)
    line = reproduce_command(GEN_TUNE_COMMAND, request_fields(req.command()))
    import shlex

    args = build_parser().parse_args(shlex.split(line)[3:])
    assert (args.model, args.seqs, args.threads_list, args.objective, args.machine_shape,
            args.ttft_ms, args.tpot_ms, args.prompt_len) == (
        "tiny_llama", [1, 4], [1, 2], "cost", "c6i.4xlarge", 500.0, 50.0, 16)
    line = reproduce_command(GEN_RATE_COMMAND, request_fields(GenMaxRateRequest(
        scenarios=("server",), target_qps=2.0, **GS).command()))
    args = build_parser().parse_args(shlex.split(line)[3:])
    assert (args.target_qps, args.search_queries, args.max_probes) == (2.0, 459, 16)
