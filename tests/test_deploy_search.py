"""The Deploy page's searches (issue 27): "Find the max QPS under the bound" and "Tune",
launched through a fake job queue (exactly one request of the right type with the chosen
fields), refused with the field and its range, and what stored searches found, seeded
through the store as their jobs store them and read back by replaying the search; the
Pareto builder's points."""

import json
from dataclasses import replace

import pytest

from engine.scenarios.inference.spec import RunSpec
from engine.core.errors import UserError
from engine.core.limits import logical_cores
from engine.analysis.cost import load_catalog
from engine.scenarios.serving.spec import ServeSpec
from engine.present.search_view import front_points, pareto_figure, probe_frame
from engine.run.search.autotune import Candidate, ClosedFigure, autotune
from engine.run.search.max_qps import QpsSearch, StoredProbe, loadgen_p99_ms, replay_max_qps
from engine.run.search.replays import MAX_QPS_COMMAND, TUNE_COMMAND
from engine.run.search.serving_jobs import MaxQpsRequest, TuneRequest
from seeds.records import SYSTEM, failed_record, ok_record
from tests.serving_seed import serve_record
from tests.test_crafted import crafted, errors
from tests.test_deploy import DEPLOY
from tests.test_pages import FakeManager, page


@pytest.fixture
def fake(monkeypatch):
    manager = FakeManager()
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: manager)
    return manager


class QueueingManager(FakeManager):
    """A job queue that keeps what it was given: the panel lists it as waiting."""

    def _view(self, job_id, request):
        from engine.run.jobs.queue import JobView
        return JobView(job_id, request, "queued", 17, 0, None, None, (), "", 0.0, None, None,
                       ())

    def submit(self, request):
        self.submitted.append(request)
        return self._view(len(self.submitted), request)

    def queued(self):
        return [self._view(i, r) for i, r in enumerate(self.submitted, 1)]


def server_summary(valid: bool, qps: float, p99_ms: float) -> str:
    yes = "Yes" if valid else "NO"
    return f"""================================================
MLPerf Results Summary
================================================
SUT name : PySUT
Scenario : Server
Mode     : PerformanceOnly
Completed samples per second    : {qps:.2f}
Result is : {"VALID" if valid else "INVALID"}
  Performance constraints satisfied : {yes}
  Min duration satisfied : Yes
  Min queries satisfied : Yes
  Early stopping satisfied: {yes}

================================================
Additional Stats
================================================
Scheduled samples per second : {qps:.2f}
Min latency (ns)                : 1000000
Max latency (ns)                : {int(p99_ms * 1.2e6)}
Mean latency (ns)               : 2000000
50.00 percentile latency (ns)   : 2000000
90.00 percentile latency (ns)   : {int(p99_ms * 0.9e6)}
99.00 percentile latency (ns)   : {int(p99_ms * 1e6)}

================================================
Test Parameters Used
================================================
target_qps : {qps:g}
target_latency (ns): 15000000
min_duration (ms): 2000
min_query_count : 459
"""


MAX_QPS_PROBES = [(100.0, True), (200.0, False), (150.0, True), (175.0, False),
                  (162.5, True), (168.75, True)]  # -> max 168.75, bracket [168.75, 175)
DEFAULT_PROBES = [(100.0, True), (200.0, False), (150.0, False), (125.0, False),
                  (112.5, False), (106.25, True), (109.375, True)]  # -> max 109.375


def _probes(con, sweep_id, probes, *, batch, threads, p99_ms, prefix, minute,
            queries: int | None = None, tpc: int = 2, hypervisor: bool | None = None):
    """queries: every probe's fixed count, LoadGen's over count kept (1 over when VALID, 9
    when not); None: probes as stored before the count was fixed, LoadGen's 10 s at each
    target (at least 459 queries) and no over count."""
    from store.runs import save_record

    for i, (q, valid) in enumerate(probes):
        s = ServeSpec(RunSpec("resnet18", "torch", batch, threads, image_size=64), "server",
                      target_qps=q, bound_ms=15.0, min_duration_s=10.0, min_query_count=459,
                      query_count=queries)
        rec = serve_record(f"{prefix}-{i}", s, server_summary(valid, q, p99_ms if valid
                                                              else 40.0),
                           [2_000_000] * 50, minute=minute + i,
                           queries=queries or max(459, round(10 * q)),
                           overs=None if queries is None else 1 if valid else 9)
        vm = {} if hypervisor is None else {"hypervisor": hypervisor}
        save_record(con, replace(rec, sweep_id=sweep_id, round_no=1, threads_per_core=tpc,
                                 extra={**rec.extra, "cores_used": threads, **vm}), SYSTEM)


def seed_max_qps(db_path, sweep_id="sweep-maxqps", queries: int | None = None,
                 chosen: dict | None = None, probes=MAX_QPS_PROBES, **host):
    """A search's sweep and probes; queries: the count its command records and every probe
    ran (None: a search stored before the count was fixed); chosen: how the command says it
    was chosen from the estimate (None: given, or not said)."""
    from store.db import open_db
    from store.runs import save_sweep

    with open_db(db_path) as con:
        save_sweep(con, sweep_id, rounds=1, seed=1, plan=[], configurations=1,
                   command=MAX_QPS_COMMAND + " " + json.dumps(
                       {"model": "resnet18", "framework": "torch", "bound_ms": 15.0,
                        "max_batch": 4, "threads": 2,
                        **({"search_queries": queries} if queries else {}),
                        **({"queries_from": chosen} if chosen else {})}))
        _probes(con, sweep_id, probes, batch=4, threads=2, p99_ms=12.0,
                prefix=sweep_id, minute=0, queries=queries, **host)


def seed_tuning(db_path, sweep_id="sweep-tune", **command):
    """Candidates b1/1 thread (confirmed, the winner) and b4/1 thread (its closed-loop probe
    failed: pruned); the default b1/2 threads confirmed too. command: fields to add to or
    change in the sweep's command (a launch's group, another model's name)."""
    from store.db import open_db
    from store.runs import save_record, save_sweep

    with open_db(db_path) as con:
        save_sweep(con, sweep_id, rounds=1, seed=1, plan=[], configurations=3,
                   command=TUNE_COMMAND + " " + json.dumps({
                       "model": "resnet18", "objective": "qps", "bound_ms": 15.0,
                       "margin": 0.05, "machine_shape": None,
                       "candidates": [["torch", "eager", "fp32", 1, 1, 0.0],
                                      ["torch", "eager", "fp32", 4, 1, 0.0]],
                       "default": ["torch", "eager", "fp32", 1, 2, 0.0], **command}))
        for rec in (ok_record(f"{sweep_id}-b1t1", minute=0),
                    replace(failed_record(f"{sweep_id}-b4t1", minute=1), batch_size=4),
                    ok_record(f"{sweep_id}-b1t2", minute=2, intra_threads=2)):
            save_record(con, replace(rec, sweep_id=sweep_id, round_no=1), SYSTEM)
        _probes(con, sweep_id, MAX_QPS_PROBES, batch=1, threads=1, p99_ms=12.0,
                prefix=f"{sweep_id}-w", minute=10)
        _probes(con, sweep_id, DEFAULT_PROBES, batch=1, threads=2, p99_ms=5.0,
                prefix=f"{sweep_id}-d", minute=30)


def frame(at, column):
    """The table holding this column (AppTest finds a dataframe by index, not by key)."""
    (df,) = [d.value for d in at.dataframe if column in d.value.columns]
    return df


def _server(at):
    at.radio(key="sv_scenario").set_value("server").run()
    at.number_input(key="sv_bound").set_value(20.0).run()
    at.number_input(key="sv_max_batch").set_value(4).run()
    return at


def test_find_max_qps_launches_one_search_of_the_forms_server_configuration(
        db_path, monkeypatch, fake):
    at = page(DEPLOY, db_path, monkeypatch)
    assert at.button(key="sv_maxqps_launch").disabled  # SingleStream: nothing to search
    assert any(i.value.startswith("scenario: the search runs Server tests") for i in at.info)
    _server(at).number_input(key="sv_qps_precision").set_value(0.1)
    at.number_input(key="sv_qps_probes").set_value(8).run()
    assert any(c.value.startswith("An Offline run of this configuration gives the estimate")
               and "bisected to 10.0%, at most 8 probes" in c.value
               and "each a stored LoadGen Server test of one query count, chosen from the "
                   "Offline run's samples/s so that the targets reach 8x it (at least 1,000;"
               in c.value for c in at.caption)  # the default: chosen from the estimate
    assert at.number_input(key="sv_search_queries").value == 0  # 0: automatic
    at.number_input(key="sv_search_queries").set_value(5000).run()
    assert any("each a stored LoadGen Server test of 5,000 queries, up to 33 over the bound: "
               "p99.34 (LoadGen's early stopping at 99 % confidence), at 16.7 to 12,500 QPS "
               "(5,000 queries span at most 300 s, at least 20x the 20 ms bound)." in c.value
               for c in at.caption)
    at.button(key="sv_maxqps_launch").click().run()
    assert not at.exception
    (req,) = fake.submitted
    assert type(req) is MaxQpsRequest
    assert (req.scenarios, req.bound_ms, req.max_batch, req.model, req.qps_precision,
            req.max_probes, req.search_queries) == (("server",), 20.0, 4, "efficientnet_b0",
                                                    0.1, 8, 5000)
    assert req.command().startswith(MAX_QPS_COMMAND + " {")
    assert json.loads(req.command().removeprefix(MAX_QPS_COMMAND + " "))["search_queries"] \
        == 5000  # the stored request says it: a replay is the same search


def test_tune_launches_one_tuning_with_the_chosen_objective_batches_threads_and_shape(
        db_path, monkeypatch, fake):
    at = _server(page(DEPLOY, db_path, monkeypatch))
    at.radio(key="sv_tune_objective").set_value("cost").run()
    at.multiselect(key="sv_tune_batches").set_value([1, 4]).run()
    at.multiselect(key="sv_tune_threads").set_value([1]).run()
    at.multiselect(key="sv_tune_replicas").set_value([1, 2]).run()
    at.button(key="sv_tune_launch").click().run()
    assert not at.exception
    (req,) = fake.submitted
    assert type(req) is TuneRequest
    assert (req.objective, req.batches, req.thread_choices, req.replica_choices, req.bound_ms,
            req.qps_precision, req.max_probes, req.search_queries) == (
        "cost", (1, 4), (1,), (1, 2), 20.0, 0.05, 16, None)  # None: chosen as it runs
    # every candidate's Server tests run the one count, recorded in the tuning's command
    # once it is chosen (before the first confirmation); until then the command says none
    assert json.loads(req.command().removeprefix(TUNE_COMMAND + " "))["search_queries"] is None
    from engine.run.search.query_choice import choose_query_count
    chosen = json.loads(req.command(queries=choose_query_count(
        900, 20, lowest_qps=300, source="s")).removeprefix(TUNE_COMMAND + " "))
    assert (chosen["search_queries"], chosen["queries_from"]) == (2_900, {
        "estimate_qps": 900, "source": "s", "lowest_qps": 300, "binds": ""})
    assert req.machine_shape and req.machine_shape in at.selectbox(key="sv_shape").value
    # every split of 1 thread x 1 or 2 replicas (both fit 2 cores), each max batch
    assert [(c.threads, c.replicas, c.max_batch) for c in req.candidates()] == [
        (1, 1, 1), (1, 1, 4), (1, 2, 1), (1, 2, 4)]


def test_bad_tune_input_names_the_field_and_its_range_and_launches_nothing(
        db_path, monkeypatch, fake):
    at = _server(page(DEPLOY, db_path, monkeypatch))
    at.multiselect(key="sv_tune_threads").set_value([]).run()
    assert any(e.startswith("threads: pick at least one; allowed: 1..") for e in errors(at))
    assert at.button(key="sv_tune_launch").disabled
    at.multiselect(key="sv_tune_threads").set_value([1]).run()
    at.multiselect(key="sv_tune_batches").set_value([]).run()
    assert "batches: pick at least one max batch; allowed: 1..256" in errors(at)
    assert at.button(key="sv_tune_launch").disabled and fake.submitted == []


def test_a_bad_form_number_refuses_both_searches_and_is_named_once(db_path, monkeypatch, fake):
    at = _server(page(DEPLOY, db_path, monkeypatch))
    at.number_input(key="sv_bound").set_value(0.0).run()
    assert [e for e in errors(at) if e.startswith("bound_ms:")] == [
        "bound_ms: 0 is not allowed; allowed: number 0.001..600000"]
    assert at.button(key="sv_maxqps_launch").disabled and at.button(key="sv_tune_launch").disabled


def test_a_stored_max_qps_search_shows_its_max_p99_bracket_probes_and_cost(db_path,
                                                                           monkeypatch):
    seed_max_qps(db_path)
    at = page(DEPLOY, db_path, monkeypatch)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["max QPS"] == "168.8" and metrics["p99 at the max"] == "12.000 ms"
    assert metrics["bracket"] == "[168.8, 175.0)" and metrics["probes"] == "6"
    assert any("Stopped: bracket [169, 175) within 5.0% of its VALID end" in c.value
               for c in at.caption)
    probes = frame(at, "target QPS")
    assert probes["target QPS"].tolist() == [q for q, _ in MAX_QPS_PROBES]
    assert probes["max"].tolist() == [""] * 5 + ["max"]
    # stored before a search fixed its count: LoadGen's 10 s at each target, so each probe
    # was held to its own percentile, and the page says so; LoadGen's over count was not kept
    assert probes["queries"].tolist() == [1000, 2000, 1500, 1750, 1625, 1688]
    assert probes["allowed over (early stopping)"].tolist() == [2, 9, 6, 8, 7, 7]
    assert probes["held to"].tolist() == ["p99.8", "p99.55", "p99.6", "p99.54", "p99.57",
                                          "p99.59"]
    assert probes["over the bound (LoadGen's count)"].isna().all()
    assert [w.value for w in at.warning if "query count" in w.value] == [
        "This search was stored before a search fixed its query count: its probes ran 1,000 "
        "to 2,000 queries, held from p99.8 to p99.55 by early stopping: a probe of more "
        "queries (a faster rate, under a fixed duration) was held to a looser percentile."]
    assert any("max 169 QPS: p99 ≤ 15 ms at 99 % confidence (LoadGen early stopping; "
               "probes of varying query counts)" in c.value for c in at.caption)
    cost = frame(at, "USD per 1 M")
    assert cost[""].tolist() == ["within p99 15 ms"]  # no Offline run: no flat-out figure
    assert cost.basis.iloc[0].startswith("estimate")
    assert cost.machines.iloc[0] >= 1 and cost["USD a month"].iloc[0] > 0
    assert any("estimate" in c.value for c in at.caption)


def test_a_stored_search_of_a_fixed_count_shows_each_probes_overs_and_what_was_allowed(
        db_path, monkeypatch):
    seed_max_qps(db_path, queries=1000)
    at = page(DEPLOY, db_path, monkeypatch)
    assert {m.label: m.value for m in at.metric}["max QPS"] == "168.8"
    probes = frame(at, "target QPS")
    assert probes["queries"].tolist() == [1000] * 6
    assert probes["over the bound (LoadGen's count)"].tolist() == [1, 9, 1, 9, 1, 1]
    assert probes["allowed over (early stopping)"].tolist() == [2] * 6
    assert probes["held to"].tolist() == ["p99.8"] * 6
    assert any(c.value.startswith(
        "max 169 QPS: p99 ≤ 15 ms at 99 % confidence (LoadGen early stopping, 1,000 "
        "queries per probe, up to 2 over allowed); LoadGen's p99 there 12 ms; bracket "
        "[169, 175) after 6 probes") for c in at.caption)
    assert not [w for w in at.warning if "query count" in w.value]  # one count: no caveat
    assert not [c for c in at.caption if c.value.startswith("Queries: ")]  # given: claimed


def test_a_stored_search_valid_at_its_ceiling_prices_the_bound_as_at_most(db_path,
                                                                          monkeypatch):
    """1,000 queries a probe under 15 ms test up to 3,333 QPS: VALID there, the max is at
    least that, so the cost per 1 M within the bound is at most the table's figure."""
    ceiling = 1000 / (20 * 15.0 / 1000)
    seed_max_qps(db_path, queries=1000, probes=[(ceiling / 2, True), (ceiling, True)])
    at = page(DEPLOY, db_path, monkeypatch)
    assert {m.label: m.value for m in at.metric}["max QPS"] == "≥ 3,333.3"
    cost = frame(at, "USD per 1 M")
    [note] = cost["figure"].tolist()  # no Offline run: the one row within the bound
    assert note == (f"at most ${cost['USD per 1 M'].iloc[0]:.3g} per 1 M: the max QPS is a "
                    "lower bound")


def test_a_stored_search_and_tuning_name_a_stale_price_they_used(db_path, monkeypatch):
    """The shape the page prices on, its price as of January 2020 (an imported update):
    the search's cost table and the tuning (its objective: cost) each warn, naming the price
    and where to check it."""
    from engine.analysis.cost import cpu_shapes, default_shape
    from store.db import open_db
    from store.prices import effective_catalog, save_price_updates

    with open_db(db_path) as con:
        shapes = cpu_shapes(effective_catalog(con)[0])
        machine = shapes[default_shape(shapes)]
        save_price_updates(con, [], [replace(machine, as_of="2020-01")])
    seed_max_qps(db_path)
    seed_tuning(db_path, objective="cost", machine_shape=machine.shape)
    at = page(DEPLOY, db_path, monkeypatch)
    stale = [w.value for w in at.warning if " is older than 6 months on " in w.value]
    assert len(stale) == 2, [w.value for w in at.warning]  # the search's, the tuning's
    for said in stale:
        assert said.startswith("1 price used here is older than 6 months on ")
        assert (f"{machine.label}: as of 2020-01 (read as 2020-01-01, the earliest it can "
                f"mean)" in said and f"(check it at {machine.first_party}). Check them "
                "there before signing a budget" in said), said


@pytest.mark.parametrize("hypervisor, host", [
    (True, "1 thread per core on a VM"),
    (None, "1 thread per core on a host that did not record whether it is a VM")])
def test_a_search_on_a_vm_reporting_1_thread_per_core_says_its_cores_may_be_hyperthreads(
        hypervisor, host, db_path, monkeypatch):
    """Its probes' rows record 1 thread per core and the x86 hypervisor flag: the cost's
    per-core estimate says the cores counted may be hyperthreads of a VM, and what the
    figure would be if so (a row that did not record the flag says that instead)."""
    seed_max_qps(db_path, tpc=1, hypervisor=hypervisor)
    at = page(DEPLOY, db_path, monkeypatch)
    [basis] = frame(at, "USD per 1 M").basis.tolist()
    assert (f"the 2 cores counted ({host}) may be hyperthreads of 1 core: if so the figure "
            "would be") in basis, basis


def test_a_tuning_s_cost_from_a_vm_row_says_its_cores_may_be_hyperthreads(db_path):
    """The tuner prices a candidate from its stored probes' figure: a Server test on a VM
    reporting 1 thread per core (store.serving.search_probes reads the flag, the replay
    carries it to the price) is an estimate that says its cores may be hyperthreads."""
    from engine.run.search.replays import stored_probe
    from engine.run.search.serving_jobs import tune_price
    from store.db import open_db
    from store.serving import search_probes

    seed_max_qps(db_path, tpc=1, hypervisor=True)
    with open_db(db_path) as con:
        row = next(search_probes(con, "sweep-maxqps").itertuples())
    probe = stored_probe(row)
    assert (probe.threads_per_core, probe.hypervisor) == (1, True)
    fig = ClosedFigure.of(probe)
    assert (fig.threads_per_core, fig.cores_used, fig.hypervisor) == (1, 2, True)
    cost, note = tune_price(None, "c6i.4xlarge", load_catalog())(
        Candidate("torch", "eager", "fp32", 4, 2), fig, 168.75)
    assert cost > 0 and "(1 thread per core on a VM) may be hyperthreads" in note, note
    fig = ClosedFigure.stored({"run_id": "r", "throughput": 100.0, "p99_ms": 1.0,
                               "threads_per_core": 1, "cores_used": 2, "machine_shape": None,
                               "hypervisor": True})  # as a tuning's command records it
    assert fig.hypervisor is True
    older = {"run_id": "r", "throughput": 100.0, "p99_ms": 1.0, "threads_per_core": 1,
             "cores_used": 2, "machine_shape": None}  # recorded before the flag was read
    assert ClosedFigure.stored(older).hypervisor is None


def test_a_stored_search_says_how_its_count_was_chosen(db_path, monkeypatch):
    seed_max_qps(db_path, queries=1000, chosen={
        "estimate_qps": 100.0, "source": "the Offline run's samples/s", "lowest_qps": None,
        "binds": ""})
    at = page(DEPLOY, db_path, monkeypatch)
    assert [c.value for c in at.caption if c.value.startswith("Queries: ")] == [
        "Queries: 1,000 queries per probe (chosen from the estimate 100 QPS, the Offline "
        "run's samples/s, so the search can reach 3,333 QPS)."]  # 1,000 / (20 x 15 ms)


def test_a_stored_tuning_shows_the_recommendation_gain_front_constraints_and_pruned(
        db_path, monkeypatch):
    seed_tuning(db_path)
    monkeypatch.setenv("BENCH_VIEWER", "1")  # viewer mode: stored results, no launch
    at = page(DEPLOY, db_path, monkeypatch)
    assert not [b for b in at.button if b.key in ("sv_maxqps_launch", "sv_tune_launch")]
    assert [s.value for s in at.success][0:1] == [  # then the stored test's verdict
        "Recommendation: torch eager fp32, max batch 1, 1 thread: 169 QPS: p99 ≤ 15 ms at "
        "99 % confidence (LoadGen's p99 12 ms)"]
    assert {m.label: m.value for m in at.metric}["gain over the default"] == "+54.3 %"
    front = frame(at, "role")
    assert front["max QPS"].tolist() == [168.75, 109.375]
    assert front.role.tolist() == ["winner", "default"]
    pruned = frame(at, "why pruned")
    assert pruned.configuration.tolist() == ["torch eager fp32, max batch 4, 1 thread"]
    assert pruned["why pruned"].iloc[0].startswith("closed-loop probe ended error")
    assert any(c.value.startswith("Constraints: Server p99 ≤ 15 ms at 99 % confidence "
                                  "(LoadGen early stopping; probes of varying query counts); "
                                  "objective: most QPS") for c in at.caption)
    (chart,) = [c for c in at.get("plotly_chart") if c.key == "sv_tune_chart"]
    assert "Pareto front" in chart.proto.spec


def test_a_crafted_objective_or_shape_is_refused_and_nothing_launches(db_path, monkeypatch,
                                                                     fake):
    for kind, key, value, field in (
            ("radio", "sv_tune_objective", dict(string_value="latency"), "objective"),
            ("selectbox", "sv_shape", dict(string_value="../x"), "machine_shape"),
            ("multiselect", "sv_tune_batches", dict(string_array_value=["999"]), "batches")):
        at = _server(page(DEPLOY, db_path, monkeypatch))
        crafted(at, kind, key, click="sv_tune_launch", **value)
        assert not at.exception, [e.value for e in at.exception]
        (msg,) = errors(at)
        assert msg.startswith(f"{field}: ") and " allowed: " in msg, msg
        assert fake.submitted == []


def test_replay_gives_the_search_as_it_ran_and_says_when_it_was_cut_short():
    probes = [StoredProbe(q, "ok" if v else "invalid", p99_ms=3.0) for q, v in MAX_QPS_PROBES]
    res = replay_max_qps(probes)
    assert (res.max_qps, res.bracket, len(res.probes)) == (168.75, (168.75, 175.0), 6)
    assert res.stop_reason.startswith("bracket [169, 175) within 5.0%")
    cut = replay_max_qps(probes[:3])
    assert cut.max_qps == 150.0 and len(cut.probes) == 3
    assert cut.stop_reason.startswith("stopped after 3 probes with no further probe stored")
    assert probe_frame(res, loadgen_p99_ms)["max"].tolist() == [""] * 5 + ["max"]


def test_the_pareto_builder_returns_the_front_with_winner_default_and_cost():
    cands = [Candidate("torch", "eager", "fp32", b, 1) for b in (1, 2, 4)]
    default = Candidate("torch", "eager", "fp32", 1, 4)
    qps = {1: 100.0, 2: 150.0, 4: 140.0}  # b4: fewer QPS at a higher p99: dominated
    p99 = {1: 3.0, 2: 6.0, 4: 9.0}

    def search(c, start):
        q = 60.0 if c == default else qps[c.max_batch]
        best = StoredProbe(q, "ok", p99_ms=2.0 if c == default else p99[c.max_batch])
        return QpsSearch(((q, best),), q, best, (q, None), "scripted")

    t = autotune(cands, default=default,
                 closed_probe=lambda c: ClosedFigure("ok", 100.0, 1.0),
                 qps_search=search, price=lambda c, f, rate: 10.0 / rate,
                 bound_ms=15.0, objective="qps")
    points = front_points(t)
    assert [(p[1], p[2], round(p[3], 4), p[4]) for p in points] == [
        (100.0, 3.0, 0.1, ""), (150.0, 6.0, 0.0667, "winner"), (60.0, 2.0, 0.1667, "default")]
    fig = pareto_figure(t, shape="c6i.xlarge")
    front = fig.data[1]
    assert list(front.x) == [60.0, 100.0, 150.0] and list(front.y) == [2.0, 3.0, 6.0]
    assert list(front.text) == ["default", "", "winner"]
    assert front.marker.colorbar.title.text == "USD per 1 M (c6i.xlarge)"


def test_crafted_tune_threads_are_refused_and_nothing_launches(db_path, monkeypatch, fake):
    at = _server(page(DEPLOY, db_path, monkeypatch))
    crafted(at, "multiselect", "sv_tune_threads", click="sv_tune_launch",
            string_array_value=["999"])
    assert not at.exception, [e.value for e in at.exception]
    (msg,) = errors(at)
    assert msg.startswith("threads: ") and " allowed: " in msg, msg
    assert fake.submitted == []


def test_the_stored_search_pickers_and_the_rate_box_refuse_what_they_did_not_offer(
        db_path, monkeypatch):
    seed_max_qps(db_path)
    seed_tuning(db_path)
    for kind, key, value, field in (
            ("selectbox", "sv_maxqps_sweep", dict(string_value="../../etc/passwd"), "sweep"),
            ("selectbox", "sv_tune_sweep", dict(string_value="x" * 5000), "sweep")):
        at = page(DEPLOY, db_path, monkeypatch)
        crafted(at, kind, key, **value)
        assert not at.exception, [e.value for e in at.exception]
        assert [e for e in errors(at) if "INVALID" not in e and field in e][0].startswith(
            f"{field}: ")
    at = page(DEPLOY, db_path, monkeypatch)
    crafted(at, "number_input", "sv_target_rps", double_value=-1.0)
    assert not at.exception
    assert "target_rps: -1 is not allowed; allowed: number 0.001..1000000000" in errors(at)
    assert frame(at, "USD a month")["USD a month"].isna().all()  # no bill for a refused rate


def test_both_searches_carry_their_precision_and_probe_limit_into_the_sweep_command():
    form = dict(scenarios=("server",), model="resnet18", framework="torch", bound_ms=15.0,
                max_batch=4)
    req = MaxQpsRequest(**form, qps_precision=0.1, max_probes=5)
    assert len(req.specs()) == 6  # the most runs: the Offline estimate and 5 probes
    recorded = json.loads(req.command().removeprefix(MAX_QPS_COMMAND + " "))
    assert (recorded["qps_precision"], recorded["max_probes"]) == (0.1, 5)
    tune = json.loads(TuneRequest(**form, max_probes=3).command().removeprefix(
        TUNE_COMMAND + " "))
    assert (tune["qps_precision"], tune["max_probes"]) == (0.05, 3)
    for kind in (MaxQpsRequest, TuneRequest):
        with pytest.raises(UserError) as exc:
            kind(**form, qps_precision=0.9).specs()
        assert str(exc.value) == "qps_precision: 0.9 is out of range; allowed: number 0.005..0.5"
        with pytest.raises(UserError) as exc:
            kind(**form, max_probes=41).specs()
        assert str(exc.value) == "max_probes: 41 is out of range; allowed: integer 2..40"


def test_a_stored_search_replays_with_the_precision_and_limit_it_ran_with(db_path,
                                                                          monkeypatch):
    """Five probes: at 10 % the bracket [162.5, 175) is narrow enough, at the default 5 % the
    search would have gone on; with a limit of 3 the third probe is the last."""
    from store.db import open_db
    from store.runs import save_sweep

    with open_db(db_path) as con:
        for sid, limits, probes in (("sweep-wide", {"qps_precision": 0.1}, 5),
                                    ("sweep-short", {"max_probes": 3}, 3)):
            save_sweep(con, sid, rounds=1, seed=1, plan=[], configurations=1,
                       command=MAX_QPS_COMMAND + " " + json.dumps(
                           {"model": "resnet18", "bound_ms": 15.0, **limits}))
            _probes(con, sid, MAX_QPS_PROBES[:probes], batch=4, threads=2, p99_ms=12.0,
                    prefix=sid, minute=10 * probes)
    at = page(DEPLOY, db_path, monkeypatch)
    at.selectbox(key="sv_maxqps_sweep").set_value("sweep-wide").run()
    metrics = {m.label: m.value for m in at.metric}
    assert (metrics["max QPS"], metrics["bracket"], metrics["probes"]) == (
        "162.5", "[162.5, 175.0)", "5")
    assert any("Stopped: bracket [162, 175) within 10.0% of its VALID end" in c.value
               for c in at.caption)
    at.selectbox(key="sv_maxqps_sweep").set_value("sweep-short").run()
    assert any("Stopped: probe limit (3) reached before the bracket was within 5.0%" in c.value
               for c in at.caption)


def _in_order(node, kinds=("header", "subheader", "markdown")):
    """(type, text) of the page's headers and texts, in the order the page shows them."""
    found = [(node.type, node.value)] if getattr(node, "type", None) in kinds else []
    for child in (getattr(node, "children", None) or {}).values():
        found += _in_order(child, kinds)
    return found


@pytest.mark.parametrize("button, label", [
    ("sv_maxqps_launch", "max-QPS search efficientnet_b0 torch, p99 under 20 ms"),
    ("sv_tune_launch", "tune efficientnet_b0 torch: qps, p99 under 20 ms")])
def test_a_search_launched_below_the_panel_shows_in_it_in_the_same_run(button, label, db_path,
                                                                        monkeypatch):
    """The panel sits under the form, above the searches: it is drawn after their buttons,
    so the job they queued is listed in the run the button was pressed in, once."""
    manager = QueueingManager()
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: manager)
    at = _server(page(DEPLOY, db_path, monkeypatch))
    at.button(key=button).click().run()
    assert not at.exception and len(manager.submitted) == 1
    shown = _in_order(at.main)
    waiting = ("markdown", f"Job 1: {label}, 17 runs — waiting")
    assert [t for t in shown if t == ("subheader", "Queue")] == [("subheader", "Queue")]
    assert shown.index(("subheader", "Queue")) + 1 == shown.index(waiting)
    assert shown.index(waiting) < shown.index(("header", "Max QPS under the bound, and the "
                                                         "tuner"))


def _written(at):
    """The page's address but the stored test shown (?run=, always written)."""
    return {k: v for k, v in at.query_params.items() if k != "run"}


def _search_widgets(at):
    return (at.selectbox(key="sv_shape").value, at.number_input(key="sv_qps_precision").value,
            at.number_input(key="sv_qps_probes").value, at.radio(key="sv_tune_objective").value,
            at.multiselect(key="sv_tune_batches").value,
            at.multiselect(key="sv_tune_threads").value,
            at.selectbox(key="sv_maxqps_sweep").value, at.selectbox(key="sv_tune_sweep").value,
            at.number_input(key="sv_target_rps").value,
            at.number_input(key="sv_search_queries").value)


def test_a_link_sets_the_search_and_tune_widgets_and_the_page_writes_them_back(db_path,
                                                                              monkeypatch):
    seed_max_qps(db_path, "sweep-maxqps-older")
    seed_max_qps(db_path, "sweep-maxqps-newer")
    seed_tuning(db_path)
    at = page(DEPLOY, db_path, monkeypatch)
    cores = logical_cores()
    default_shape = at.selectbox(key="sv_shape").value
    shape = next(s for s in at.selectbox(key="sv_shape").options if s != default_shape)
    assert _search_widgets(at) == (default_shape, 0.05, 16, "qps", [1, 2, 4, 8],
                                   sorted({1, cores}), "sweep-maxqps-newer", "sweep-tune",
                                   100.0, 0)
    assert _written(at) == {}  # every one at its default: none written
    query = {"shape": shape, "qps_precision": "0.1", "max_probes": "8", "objective": "cost",
             "batches": "2,8", "tune_threads": "1", "search": "sweep-maxqps-o",
             "tuning": "sweep-tu", "target_rps": "2500", "search_queries": "5000"}
    at = page(DEPLOY, db_path, monkeypatch, query)
    assert [w.value for w in at.warning if w.value.startswith("link: ")] == []
    assert _search_widgets(at) == (shape, 0.1, 8, "cost", [2, 8], [1], "sweep-maxqps-older",
                                   "sweep-tune", 2500.0, 5000)
    # what differs from the defaults, sweeps by their whole id; the newest tuning is the
    # default; one thread is the default on a 1-core machine
    written = {**query, "search": "sweep-maxqps-older"}
    del written["tuning"]
    if cores == 1:
        del written["tune_threads"]
    assert _written(at) == written
    assert {m.label: m.value for m in at.metric}["probes"] == "6"  # the older search shown
    assert frame(at, "USD a month").machines.iloc[0] >= 1  # priced for 2,500 requests/s


def test_refused_search_link_values_are_named_and_the_widgets_keep_their_defaults(
        db_path, monkeypatch):
    seed_max_qps(db_path)
    seed_tuning(db_path)
    query = {"shape": "m9.huge", "qps_precision": "0.9", "max_probes": "abc",
             "objective": "latency", "batches": "3,8", "tune_threads": "999",
             "search": "zzzz", "tuning": "../x", "target_rps": "-1",
             "search_queries": "100"}
    at = page(DEPLOY, db_path, monkeypatch, query)
    assert not at.exception
    notes = {w.value.split("=", 1)[0].removeprefix("link: "): w.value for w in at.warning
             if w.value.startswith("link: ")}
    assert sorted(notes) == sorted(query)
    assert notes["qps_precision"] == ("link: qps_precision='0.9' is not allowed; allowed: "
                                      "number 0.005..0.5; using 0.05")
    assert notes["max_probes"] == ("link: max_probes='abc' is not allowed; allowed: integer "
                                   "2..40; using 16")
    assert notes["target_rps"] == ("link: target_rps='-1' is not allowed; allowed: number "
                                   "0.001..1000000000; using 100")
    assert notes["search_queries"] == ("link: search_queries='100' is not allowed; allowed: "
                                       r"0 \(automatic\) or integer 459..1000000; using 0")
    assert notes["objective"] == "link: objective='latency' is not allowed; allowed: one of " \
                                 "qps, cost; ignored"
    assert notes["batches"].startswith("link: batches='3' is not allowed; allowed: one of 1, 2")
    assert notes["tuning"].startswith("link: tuning='../x' is not allowed; allowed: a name, "
                                      "not a path;")
    for param in ("shape", "tune_threads", "search"):
        assert " is not allowed; allowed: one of " in notes[param], notes[param]
    (default_shape, *rest) = _search_widgets(at)
    assert rest == [0.05, 16, "qps", [8], sorted({1, logical_cores()}), "sweep-maxqps",
                    "sweep-tune", 100.0, 0]
    assert _written(at) == {"batches": "8"}  # the one value used
    assert not at.error  # a refused link value is a note, not the form's error


def test_a_tuning_that_read_a_stored_figure_replays_with_that_figure(db_path, monkeypatch):
    """The tuner read batch 4's closed loop from an older run on this machine instead of
    probing it: the sweep records that figure, so the replay sees it (not "no closed-loop
    figure stored", and not a newer run stored since), with source "stored"."""
    import duckdb

    from engine.run.search.autotune_runs import stored_figures
    from engine.run.process.machine import system_info
    from engine.run.search.replays import replay_tune, request_fields
    from store.db import open_db
    from store.runs import save_record, save_sweep
    from store.serving import search_probes

    here = {**SYSTEM, "system_id": system_info()["system_id"]}

    def closed_loop(run_id, minute, per_call_ns):
        rec = ok_record(run_id, samples=(per_call_ns,) * 3, minute=minute, batch_size=4)
        with open_db(db_path) as con:
            save_record(con, replace(rec, system_id=here["system_id"]), here)
        return rec

    old = closed_loop("old-b4t1", 0, 6_000_000)  # 667 samples/s, p99 6 ms
    req = TuneRequest(scenarios=("server",), model="resnet18", framework="torch",
                      image_size=64, bound_ms=15.0, batches=(2, 4), thread_choices=(1,))
    b2, b4 = req.candidates()
    default = req.default()
    known = stored_figures(db_path, [b2, b4, default], model="resnet18", image_size=64)
    assert list(known) == [b4] and known[b4]["run_id"] == "old-b4t1"
    with open_db(db_path) as con:  # the sweep as the tuning job stores it
        save_sweep(con, "sweep-tune", rounds=1, seed=1, plan=[], configurations=3,
                   command=req.command(known))
        for rec in (ok_record("cl-b2t1", minute=1, batch_size=2),
                    ok_record("cl-default", minute=2, intra_threads=default.threads)):
            save_record(con, replace(rec, sweep_id="sweep-tune", round_no=1), SYSTEM)
        for c, probes, minute in ((b2, MAX_QPS_PROBES, 10), (b4, DEFAULT_PROBES, 20),
                                  (default, DEFAULT_PROBES, 30)):
            _probes(con, "sweep-tune", probes, batch=c.max_batch, threads=c.threads,
                    p99_ms=12.0, prefix=f"t{minute}", minute=minute)
    closed_loop("new-b4t1", 59, 4_000_000)  # stored after the tuning: not what it used
    with duckdb.connect(str(db_path), read_only=True) as con:
        fields = request_fields(con.execute("SELECT command FROM sweeps WHERE sweep_id = ?",
                                            ["sweep-tune"]).fetchone()[0])
        probes = list(search_probes(con, "sweep-tune").itertuples())
    t = replay_tune(fields, probes, price=lambda c, f, rate: None)
    figures = dict(t.closed)
    assert (figures[b4].source, figures[b4].run_id, figures[b4].status) == (
        "stored", "old-b4t1", "ok")
    assert (figures[b4].throughput, figures[b4].p99_ms) == (old.throughput, old.p99_ms)
    assert (figures[b2].source, figures[b2].run_id) == ("measured", "cl-b2t1")
    assert t.pruned == () and [x.candidate for x in t.confirmed] == [b2, b4]
    assert (t.winner.candidate, t.winner.qps, t.confirmed[1].qps) == (b2, 168.75, 109.375)
    at = page(DEPLOY, db_path, monkeypatch)  # and so the page shows it
    assert any(c.value == "Pruned: none." for c in at.caption)
    assert frame(at, "role")["max QPS"].tolist()[0] == 168.75


def test_a_tuning_of_a_user_s_file_searches_its_runtime_and_defaults_to_its_format_s(
        tmp_path):
    from engine.core.model_source import InputSpec, ModelSource

    onnx = tmp_path / "net.onnx"
    onnx.write_bytes(b"not parsed here")  # the spec stats the path; a worker reads it
    src = ModelSource("net", "onnx", (InputSpec("input", (1, 3, 16, 16)),), path=str(onnx))
    req = TuneRequest(scenarios=("server",), model="net", framework="torch",
                      runtime="onnxruntime", user_model=src, bound_ms=20.0, batches=(1, 2),
                      thread_choices=(1,), replica_choices=(1,))
    assert [(c.runtime, c.max_batch) for c in req.candidates()] == [("onnxruntime", 1),
                                                                    ("onnxruntime", 2)]
    # the torch reference (eager) cannot run an ONNX file: the format's runtime is the default
    assert req.default() == Candidate("torch", "onnxruntime", "fp32", 1, logical_cores())
    specs, _ = req.expand()
    assert {s.sut.user_model for s in specs} == {src} and len(specs) == 3


def test_tune_launches_the_other_models_picked_and_the_first_target(db_path, monkeypatch,
                                                                    fake):
    at = _server(page(DEPLOY, db_path, monkeypatch))
    assert "efficientnet_b0" not in at.multiselect(key="sv_tune_models").options  # the form's
    at.multiselect(key="sv_tune_models").set_value(["resnet18", "mobilenet_v3_small"])
    at.number_input(key="sv_tune_start").set_value(50.0).run()
    at.button(key="sv_tune_launch").click().run()
    assert not at.exception
    (req,) = fake.submitted
    assert (req.model, req.models, req.start_qps) == (
        "efficientnet_b0", ("resnet18", "mobilenet_v3_small"), 50.0)
    assert req.tuned_models() == ("efficientnet_b0", "resnet18", "mobilenet_v3_small")
    specs, _ = req.expand()  # each model's candidates and default: 3 x (4 x 3 splits + 1)
    assert [s.sut.model for s in specs].count("resnet18") == len(specs) // 3
    assert req.label().startswith("tune efficientnet_b0, resnet18, mobilenet_v3_small torch")


def test_bad_models_or_first_target_are_named_with_what_is_allowed(db_path, monkeypatch,
                                                                   fake):
    at = _server(page(DEPLOY, db_path, monkeypatch))
    at.number_input(key="sv_tune_start").set_value(-5.0).run()
    assert any(e.startswith("start_qps: ") and "allowed: number 0..10000000" in e
               for e in errors(at)), errors(at)
    assert at.button(key="sv_tune_launch").disabled
    at = _server(page(DEPLOY, db_path, monkeypatch))
    crafted(at, "multiselect", "sv_tune_models", click="sv_tune_launch",
            string_array_value=["not_a_model"])
    assert not at.exception
    (msg,) = errors(at)
    assert msg.startswith("models: ") and " allowed: " in msg, msg
    assert fake.submitted == []
    form = dict(scenarios=("server",), model="resnet18", framework="torch", bound_ms=15.0)
    for extra, field in (({"models": ("nope",)}, "models"),
                         ({"start_qps": 0.0}, "start_qps")):
        with pytest.raises(UserError) as exc:
            TuneRequest(**form, **extra).specs()
        assert exc.value.field == field and " allowed: " in str(exc.value)


def test_a_launch_s_models_show_side_by_side_and_the_objective_s_pick(db_path, monkeypatch):
    seed_tuning(db_path, "sweep-a", group="launch-1")
    seed_tuning(db_path, "sweep-b", group="launch-1", model="mobilenet_v3_small")
    seed_tuning(db_path, "sweep-c", model="efficientnet_b0")  # another launch: not shown
    monkeypatch.setenv("BENCH_VIEWER", "1")
    at = page(DEPLOY, db_path, monkeypatch)
    assert not [d for d in at.dataframe if "winner" in d.value.columns]  # sweep-c: alone
    at = page(DEPLOY, db_path, monkeypatch, query={"tuning": "sweep-b"})
    table = frame(at, "winner")
    assert list(table.columns) == ["model", "winner", "max QPS", "p99 ms", "USD per 1 M",
                                   "cost basis"]  # no node kind: tuned on this machine
    assert table.model.tolist() == ["resnet18", "mobilenet_v3_small"]  # in the order tuned
    assert table["max QPS"].tolist() == [168.75, 168.75]
    assert table.winner.tolist() == ["torch eager fp32, max batch 1, 1 thread"] * 2
    assert any(c.value == "most QPS under the bound: resnet18, torch eager fp32, max batch 1, "
                          "1 thread" for c in at.caption)
