"""The max QPS under a bound (issue 27, part 2) and its cost (part 4): the search's stop rule
driven by a scripted runner (fixed answers, exact probe sequence and bracket), the cost
formulas on fixed figures and a fixed catalog (to the cent), bad input refused before
anything runs, and one small real search with the selftest identity model. Nothing here
times or sleeps."""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb
import pytest

from engine.analysis.cost import Machine
from engine.analysis.serving_cost import choose_flat_out, serving_cost, serving_split
from engine.cli import main
from engine.core.errors import UserError
from engine.present.search_text import qps_summary
from engine.run.search.max_qps import find_max_qps
from tests.serving_seed import seed_closed_loop


@dataclass
class Rec:  # what the search reads of a probe's run
    status: str
    reason: str = ""
    serving: dict = field(default_factory=dict)
    p99_ms: float | None = None


def scripted(valid_below: float, failures: dict | None = None):
    """A runner whose LoadGen is VALID below `valid_below` QPS; failures: {qps: status}."""
    asked = []

    def probe(q):
        asked.append(q)
        if failures and q in failures:
            return Rec(failures[q], reason=f"{failures[q]} at {q}")
        ok = q < valid_below
        return Rec("ok" if ok else "invalid",
                   serving={"percentiles_ns": {"99": int(q * 1000)}} if ok else {})
    return probe, asked


def test_doubles_while_valid_then_bisects_to_the_precision():
    probe, asked = scripted(230)
    res = find_max_qps(probe, start_qps=100, precision=0.05, query_count=1000)
    assert asked == [100, 200, 400, 300, 250, 225, 237.5, 231.25]
    assert (res.max_qps, res.bracket) == (225, (225, 231.25))
    assert res.best.status == "ok"
    assert res.stop_reason == "bracket [225, 231) within 5.0% of its VALID end"
    # worded as LoadGen judged it: early stopping over 1,000 queries a probe, 2 allowed over
    assert qps_summary(res, 50) == ("max 225 QPS: p99 ≤ 50 ms at 99 % confidence (LoadGen early "
                               "stopping, 1,000 queries per probe, up to 2 over allowed); "
                               "LoadGen's p99 there 0.225 ms; bracket [225, 231) after 8 "
                               "probes")


def test_halves_from_an_estimate_above_the_answer():
    probe, asked = scripted(230)
    res = find_max_qps(probe, start_qps=1000, precision=0.05)
    assert asked == [1000, 500, 250, 125, 187.5, 218.75, 234.375, 226.5625]
    assert res.bracket == (226.5625, 234.375) and res.max_qps == 226.5625


def test_a_finer_precision_takes_more_probes_and_a_narrower_bracket():
    probe, asked = scripted(230)
    res = find_max_qps(probe, start_qps=100, precision=0.01)
    lo, hi = res.bracket
    assert lo < 230 <= hi and hi - lo <= 0.01 * lo
    assert len(asked) == 10


def test_a_timed_out_probe_counts_as_a_miss_and_the_search_goes_on():
    probe, asked = scripted(230, failures={400: "timeout"})
    res = find_max_qps(probe, start_qps=100)
    assert asked == [100, 200, 400, 300, 250, 225, 237.5, 231.25]
    assert res.missed_by_failure == (400,)
    assert res.stop_reason.endswith("; 400 QPS timed out or ran out of memory: counted as "
                                    "missing the bound")


def test_an_error_stops_the_search_with_its_reason_and_the_bracket_so_far():
    probe, asked = scripted(230, failures={300: "error"})
    res = find_max_qps(probe, start_qps=100)
    assert asked == [100, 200, 400, 300]
    assert (res.max_qps, res.bracket) == (200, (200, 400))
    assert res.stop_reason.startswith("the probe at 300 QPS ended error: error at 300.0;")


def test_the_probe_limit_stops_it_with_the_bracket_so_far():
    probe, asked = scripted(230)
    res = find_max_qps(probe, start_qps=100, max_probes=4)
    assert asked == [100, 200, 400, 300]
    assert res.bracket == (200, 300)
    assert res.stop_reason.startswith("probe limit (4) reached")


def test_the_ends_of_the_allowed_range_stop_it():
    probe, asked = scripted(1e9)
    res = find_max_qps(probe, start_qps=2, qps_range=(1, 8))
    assert asked == [2, 4, 8] and res.bracket == (8, None)
    assert res.stop_reason == "still VALID at the largest target allowed (8 QPS)"
    probe, asked = scripted(0.5)
    res = find_max_qps(probe, start_qps=4, qps_range=(1, 8))
    assert asked == [4, 2, 1] and res.max_qps is None and res.bracket == (None, 1)
    assert qps_summary(res, 50).startswith("no target QPS met p99 ≤ 50 ms at 99 % confidence "
                                      "(LoadGen early stopping; probes of varying query "
                                      "counts)")


def test_the_targets_are_those_whose_queries_span_20_bounds_and_at_most_300_s():
    """1,000 queries a probe under a 50 ms bound: under 3.33 QPS a probe would run past
    300 s, so the search halves no further; over 1,000 QPS its queries would span under 20
    bounds (1 s), too short for a backlog of a rate the system cannot sustain to push
    queries over the bound, so it doubles no further and its max is a lower bound."""
    probe, asked = scripted(1.0)
    res = find_max_qps(probe, start_qps=20, query_count=1000, bound_ms=50)
    assert asked == [20, 10, 5, 1000 / 300]
    assert res.max_qps is None and res.bracket == (None, 1000 / 300) and not res.capped
    assert res.stop_reason == ("missed the bound even at the smallest target allowed (3.333 "
                               "QPS: 1,000 queries a probe span at most 300 s, at least 20x "
                               "the 50 ms bound; fewer queries a probe reach lower rates)")
    probe, asked = scripted(1e9)
    res = find_max_qps(probe, start_qps=300, query_count=1000, bound_ms=50)
    assert asked == [300, 600, 1000] and res.capped and res.bracket == (1000, None)
    assert res.stop_reason == ("still VALID at the largest target allowed (1000 QPS: 1,000 "
                               "queries a probe span at most 300 s, at least 20x the 50 ms "
                               "bound; more queries a probe reach higher rates)")
    assert qps_summary(res, 50).startswith(
        "max ≥ 1,000 QPS (the highest target a probe tests: the max is at least this): p99 ≤ "
        "50 ms at 99 % confidence (LoadGen early stopping, 1,000 queries per probe, up to 2 "
        "over allowed)")
    for q in (3, 1001):
        with pytest.raises(UserError) as exc:
            find_max_qps(probe, start_qps=q, query_count=1000, bound_ms=50)
        assert str(exc.value) == (f"start_qps: {q} is out of range; allowed: number "
                                  "3.33333..1000")


# -- the query count chosen from the estimate ---------------------------------------------

def test_the_count_is_chosen_so_the_targets_reach_8x_the_estimate():
    """20 bounds x bound x 8 x the estimate, two significant digits up, at least 1,000."""
    from engine.run.search.query_choice import choose_query_count, readable

    assert (readable(145_048), readable(1_875), readable(1_875, up=False)) == (
        150_000, 1_900, 1_800)
    for estimate, bound, n, ceiling in [(18_131.8, 50, 150_000, 150_000), (1_000, 50, 8_000,
                                        8_000), (1_000, 12.5, 2_000, 8_000),
                                        (30, 100, 1_000, 500)]:  # at least 1,000
        c = choose_query_count(estimate, bound, source="the Offline run's samples/s")
        assert (c.query_count, c.ceiling, c.binds) == (n, ceiling, "")
    assert c.text() == ("1,000 queries per probe (chosen from the estimate 30.0 QPS, the "
                        "Offline run's samples/s, so the search can reach 500 QPS)")
    assert choose_query_count(18_131.8, 50).text() == (
        "150,000 queries per probe (chosen from the estimate 18,132 QPS so the search can "
        "reach 150,000 QPS)")


def test_the_chosen_count_keeps_8_halvings_under_the_lowest_estimate_and_a_million_at_most():
    from engine.run.search.query_choice import QueryChoice, choose_query_count

    # a 1 s bound: 8x 50 QPS needs 8,000 queries, but then a probe at 6.25 QPS would run
    # 1,280 s; 300 s at 6.25 QPS is 1,875 queries, 1,800 read down: up to 90 QPS
    c = choose_query_count(50, 1000)
    assert (c.query_count, c.ceiling, c.binds) == (1_800, 90.0, "duration")
    assert c.text() == ("1,800 queries per probe (chosen from the estimate 50.0 QPS so the "
                        "search can reach 90.0 QPS, 1.8x the estimate, not 8x: more queries "
                        "would run a probe at 1/8 of the estimate past 300 s)")
    # a tuning whose slowest candidate (its default) does 500: 18,750 queries at most
    c = choose_query_count(15_000, 50, lowest_qps=500)
    assert (c.query_count, c.ceiling, c.binds) == (18_000, 18_000.0, "duration")
    assert c.text().endswith("so the search can reach 18,000 QPS, 1.2x the estimate, not 8x: "
                             "more queries would run a probe at 1/8 of the slowest "
                             "candidate's 500 QPS past 300 s)")
    c = choose_query_count(400_000, 50)
    assert (c.query_count, c.ceiling, c.binds) == (1_000_000, 1_000_000.0, "range")
    assert c.text().endswith("2.5x the estimate, not 8x: 1,000,000 queries is the most a "
                             "probe runs)")
    # what a stored request records reads back as it was chosen; a given count says so
    assert QueryChoice.from_fields({"bound_ms": 50, **c.fields()}) == c
    assert QueryChoice.from_fields({"search_queries": 5000}).text() == (
        "5,000 queries per probe (given)")
    assert QueryChoice.from_fields({}) is None
    assert QueryChoice.from_fields({"search_queries": None}) is None


def test_a_fast_configuration_is_decided_at_the_chosen_count_not_stopped_at_1000():
    """The tuner's bench: mobilenet_v3_small on onnxruntime, 2 replicas, served 11,349 QPS
    under a 50 ms bound; from a closed-loop estimate of 15,000 the old fixed 1,000 queries
    a probe stopped at 1,000 QPS (max >= 1,000), the chosen 120,000 bracket it to 5 %."""
    from engine.run.search.query_choice import choose_query_count

    probe, asked = scripted(11_349)
    old = find_max_qps(probe, start_qps=1000, query_count=1000, bound_ms=50)
    assert (old.max_qps, old.capped, asked) == (1000, True, [1000])
    c = choose_query_count(15_000, 50)
    assert (c.query_count, c.ceiling) == (120_000, 120_000)
    probe, asked = scripted(11_349)
    new = find_max_qps(probe, start_qps=15_000, query_count=c.query_count, bound_ms=50)
    assert asked == [15_000, 7_500, 11_250, 13_125, 12_187.5, 11_718.75]
    assert (new.max_qps, new.bracket, new.capped) == (11_250, (11_250, 11_718.75), False)


def test_a_search_states_its_chosen_count_in_its_command_before_its_first_server_probe(
        db_path):
    """No count given and no estimate before the sweep opens: the Offline run's samples/s
    gives it, and the sweep's command is restated with it before the first Server probe."""
    from engine.scenarios.inference.spec import RunSpec
    from engine.scenarios.serving.spec import ServeSpec
    from engine.run.search.max_qps import stored_max_qps_search

    said, seen = [], []

    class Runner:  # scripted: Offline 5,000 samples/s, Server VALID below 6,000 QPS
        def run(self, specs, *, on_record, sweep_id, on_event=None, known_stats=None):
            [spec] = specs
            with duckdb.connect(str(db_path), read_only=True) as con:
                said.append(con.execute("SELECT command FROM sweeps").fetchone()[0])
            seen.append((spec.scenario, spec.query_count, spec.target_qps))
            if spec.scenario == "offline":
                return [SimpleRec("ok", throughput=5_000.0)]
            return [SimpleRec("ok" if spec.target_qps < 6_000 else "invalid")]

    base = ServeSpec(RunSpec("identity", "selftest", 1, 1), "server", target_qps=1.0,
                     bound_ms=10.0).validate(8)
    _, res, offline, why = stored_max_qps_search(
        base, db=db_path, runner=Runner(), start_qps=None, max_probes=3,
        command=lambda c: "search" + (f" --search-queries {c.query_count}" if c else ""))
    # 20 x 10 ms x 8 x 5,000 = 8,000 queries, up to 40,000 QPS
    assert seen == [("offline", None, None), ("server", 8000, 5000.0),
                    ("server", 8000, 10000.0), ("server", 8000, 7500.0)]
    assert said == ["search", "search --search-queries 8000", "search --search-queries 8000",
                    "search --search-queries 8000"]
    assert res.query_count == 8000 and res.queries.text() == (
        "8,000 queries per probe (chosen from the estimate 5,000 QPS, the Offline run's "
        "samples/s, so the search can reach 40,000 QPS)")


@dataclass
class SimpleRec:
    status: str
    throughput: float | None = None
    reason: str = ""
    serving: dict = field(default_factory=dict)
    p99_ms: float | None = None


@pytest.mark.parametrize("kw, field, allowed", [
    ({"precision": 0.0}, "precision", "0.005..0.5"),
    ({"precision": 0.9}, "precision", "0.005..0.5"),
    ({"max_probes": 1}, "max_probes", "2..40"),
])
def test_the_search_refuses_settings_outside_their_range(kw, field, allowed):
    probe, asked = scripted(230)
    with pytest.raises(UserError, match=f"^{field}:.*{allowed}"):
        find_max_qps(probe, start_qps=100, **kw)
    assert asked == []


# -- cost at the bound: fixed figures, a fixed catalog -------------------------------------

def _machine(shape, vcpus, usd, tpc=2, arch="x86_64"):
    return Machine(provider="AWS", region="r", shape=shape, vcpus=vcpus, ocpus=None,
                   memory_gb=16, accelerator="none", accelerator_count=0, usd_per_hour=usd,
                   pricing="fixed", ocpu_part="", memory_part="", price_basis="test",
                   source="test", as_of="2026-01-01", secondary=False, arch=arch,
                   threads_per_core=tpc)


FOUR = _machine("t.4core", 8, 0.40)  # 4 physical cores
ARM = _machine("t.arm", 4, 0.10, tpc=1, arch="arm64")


def _split(rate, threads, shape="t.4core"):
    return serving_split(rate, threads=threads, threads_per_core=2, cores_used=threads,
                         shape=shape)


def _offline(rate, threads=2):
    """The search's own Offline run: flat out as measured."""
    return choose_flat_out(lambda r: _split(r, threads), offline=("off-1", rate))


def test_a_configuration_on_part_of_the_shape_is_scaled_to_it_and_labelled():
    c = serving_cost(FOUR, _split(212, 2), _offline(500), target_rps=1000)
    assert c.at_bound.estimate and c.at_bound.throughput == 424
    assert "on 2 of its 4 cores" in c.at_bound.assumption
    assert round(c.per_million_at_bound, 2) == 0.26  # 0.40 / (424 x 3600) x 1e6
    assert round(c.per_million_flat_out, 2) == 0.11  # 0.40 / (1000 x 3600) x 1e6
    assert (c.machines, round(c.monthly, 2)) == (3, 876.00)  # ceil(1000/424) x 0.40 x 730
    assert (c.machines_flat_out, round(c.monthly_flat_out, 2)) == (1, 292.00)


def test_a_configuration_filling_the_shape_is_measured_there():
    c = serving_cost(FOUR, _split(900, 4), None, target_rps=2700)
    assert not c.at_bound.estimate and c.at_bound.throughput == 900
    assert c.at_bound.assumption.startswith("measured on t.4core")
    assert round(c.per_million_at_bound, 4) == 0.1235  # 0.40 / (900 x 3600) x 1e6
    assert (c.machines, round(c.monthly, 2)) == (3, 876.00)
    assert c.flat_out is None and c.machines_flat_out is None


def test_flat_out_is_this_searchs_offline_run_else_an_estimate_naming_this_machines_run():
    def split(rate):
        return _split(rate, 4)
    # the search's Offline run, on the shape it filled: measured, and which run it is
    c = serving_cost(FOUR, _split(900, 4), choose_flat_out(split, offline=("off-1", 1200.0)))
    assert not c.flat_out.estimate and c.flat_out.throughput == 1200
    assert c.flat_out.assumption == ("this search's Offline run off-1 on this machine, "
                                     "measured on t.4core (4 threads x 1 replica; median of "
                                     "1 run)")
    # No Offline run: this machine's closed loop (one replica) x the search's 2 replicas is
    # an estimate saying so, even on the shape the search ran on.
    flat = choose_flat_out(split, offline=None, closed=("closed-1", 412.0, 1), replicas=2)
    assert (flat.estimate, flat.split.throughput) == (True, 824.0)
    c = serving_cost(FOUR, _split(900, 4), flat, target_rps=2000)
    assert c.flat_out.estimate and c.flat_out.throughput == 824
    assert c.flat_out.assumption == (
        "estimate: no Offline run in this search; closed-loop run closed-1 on this machine "
        "(412.0 samples/s at batch 1, one replica) x 2 replicas; measured on t.4core (4 "
        "threads x 1 replica; median of 1 run)")
    assert (c.machines_flat_out, round(c.monthly_flat_out, 2)) == (3, 876.00)  # ceil(2000/824)
    # The Offline run wins over a closed loop; neither: no flat-out figure.
    assert not choose_flat_out(split, offline=("off-1", 1200.0),
                               closed=("closed-1", 412.0, 1)).estimate
    assert choose_flat_out(split, offline=None, closed=None) is None


def test_the_cost_lines_label_a_flat_out_figure_from_a_closed_loop_an_estimate():
    from engine.present.max_qps_text import cost_lines

    flat = choose_flat_out(lambda r: _split(r, 4), offline=None,
                           closed=("closed-1", 412.0, 1), replicas=2)
    lines = cost_lines(serving_cost(FOUR, _split(900, 4), flat), 50)
    assert lines[2] == (
        "  flat out (no bound): 824.0 samples/s -> $0.135 per 1 M [estimate: no Offline run "
        "in this search; closed-loop run closed-1 on this machine (412.0 samples/s at batch "
        "1, one replica) x 2 replicas; measured on t.4core (4 threads x 1 replica; median of "
        "1 run)]; the bound costs 0.92x")
    assert cost_lines(serving_cost(FOUR, _split(900, 4)), 50)[2] == (
        "  flat out: no figure (no Offline run in this search and no closed-loop run of this "
        "configuration on this machine)")


def test_a_cost_from_a_lower_bound_max_is_at_most_its_figure():
    """A search VALID at its highest target: the max is at least it, so the cost per 1 M
    within the bound, the machines and the bill are at most theirs, said beside them."""
    from engine.present.max_qps_text import cost_lines
    from engine.present.search_view import cost_frame

    c = serving_cost(FOUR, _split(900, 4), _offline(1200, 4), target_rps=2700)
    lines = cost_lines(c, 50, lower_bound=True)
    assert lines[1] == ("  within p99 50 ms: at least 900.0 samples/s a machine -> at most "
                        "$0.123 per 1 M inferences: the max QPS is a lower bound [measured: "
                        "measured on t.4core (4 threads x 1 replica; median of 1 run)]")
    assert lines[2].startswith("  flat out (no bound): 1,200.0 samples/s -> $0.0926 per 1 M")
    assert lines[3] == ("  2,700 requests/s within the bound: at most 3 machines x $0.4000/h "
                        "x 730 h = at most $876.00 a month: the max QPS is a lower bound")
    assert cost_lines(c, 50)[1].startswith("  within p99 50 ms: 900.0 samples/s a machine -> "
                                           "$0.123 per 1 M inferences [measured")
    df = cost_frame(c, 50, lower_bound=True)
    assert df["figure"].tolist() == ["at most $0.123 per 1 M: the max QPS is a lower bound",
                                     ""]
    assert list(df.columns).index("figure") == list(df.columns).index("USD per 1 M") + 1
    assert "figure" not in cost_frame(c, 50).columns


def test_a_searchs_stale_price_is_named_with_where_to_check_it():
    """The serving cost's shape priced more than 6 months before the day it is read: one
    line naming it and its first-party list; none when it is recent or entered by hand."""
    from datetime import date
    from dataclasses import replace

    from engine.present.cost_text import stale_note

    listed = replace(FOUR, first_party="the provider's price list API (t.4core)")
    assert stale_note([listed, None], date(2026, 11, 27)) == (
        "1 price used here is older than 6 months on 2026-11-27 or undated: AWS t.4core: as "
        "of 2026-01-01, 10 months (330 days) before 2026-11-27 (check it at the provider's "
        "price list API (t.4core)). Check them there before signing a budget, or import a "
        "current one: `python -m engine prices import FILE`.")
    assert stale_note([listed], date(2026, 6, 30)) is None  # 5 months old
    assert stale_note([replace(FOUR, provider="custom")], date(2030, 1, 1)) is None
    assert "(check it at its source)" in stale_note([FOUR], date(2026, 11, 27))


def stale_c6i(db_path):
    """The store's catalog with c6i.4xlarge priced as of January 2020 (an imported update):
    stale on any day this test runs. Returns its first-party source."""
    from dataclasses import replace

    from store.db import open_db
    from store.prices import effective_catalog, save_price_updates

    with open_db(db_path) as con:
        [c6i] = [m for m in effective_catalog(con)[0] if m.shape == "c6i.4xlarge"]
        save_price_updates(con, [], [replace(c6i, as_of="2020-01")])
    return c6i.first_party


def test_the_closed_loop_a_search_reads_is_this_machines_never_anothers(db_path):
    """The store's best run of any machine (an import, a fleet node) is not this one's."""
    from types import SimpleNamespace

    from engine.run.process.machine import system_info
    from store.db import open_db
    from store.queries import closed_loop_best
    from store.serving import closed_loop_run

    seed_closed_loop(db_path, "here-1")  # 412 samples/s on this machine
    seed_closed_loop(db_path, "elsewhere-1", per_call_ns=20_000, system_id="another-machine")
    sut = SimpleNamespace(model="identity", framework="selftest", runtime="python",
                          precision="fp32", intra_threads=1, image_size=32)
    with open_db(db_path, read_only=True) as con:
        assert round(closed_loop_best(con, sut, 1)) == 50_000  # any machine: the other's
        run = closed_loop_run(con, sut, 1, system_info()["system_id"])
        assert closed_loop_run(con, sut, 1, "no-such-machine") is None
    assert (run[0], round(run[1], 1), run[2]) == ("here-1", 412.0, 1)


def test_another_shape_is_an_estimate_per_core_and_arm_is_not_priced():
    other = _machine("t.8core", 16, 0.80)
    c = serving_cost(other, _split(212, 2), target_rps=100)
    assert c.at_bound.estimate and c.at_bound.throughput == 848  # 106 per core x 8
    assert round(c.per_million_at_bound, 2) == 0.26 and c.machines == 1
    assert round(c.monthly, 2) == 584.00
    assert serving_cost(ARM, _split(212, 2)) is None


def test_bad_cost_input_names_its_field():
    with pytest.raises(UserError, match="^target_rps:.*0.001..1e"):
        serving_cost(FOUR, _split(212, 2), target_rps=0)
    with pytest.raises(UserError, match="^throughput:"):
        _split(0, 2)


# -- the command ---------------------------------------------------------------------------

IDENTITY = ["--model", "identity", "--framework", "selftest"]
SEARCH = ["serve", "--scenario", "server", *IDENTITY, "--find-max-qps"]


@pytest.mark.parametrize("args, field, allowed", [
    (["--bound-ms", "0"], "bound_ms", "0.001..600000"),
    (["--bound-ms", "-5"], "bound_ms", "0.001..600000"),
    ([], "bound_ms", "0.001..600000"),
    (["--bound-ms", "50", "--qps-precision", "0.9"], "qps_precision", "0.005..0.5"),
    (["--bound-ms", "50", "--qps-precision", "0"], "qps_precision", "0.005..0.5"),
    (["--bound-ms", "50", "--target-rps", "0"], "target_rps", "0.001..1e+09"),
    (["--bound-ms", "50", "--machine-shape", "m9.huge"], "machine_shape",
     "allowed: a shape as `python -m engine prices list` prints it"),
    (["--bound-ms", "50", "--min-queries", "50"], "min_query_count",
     "allowed: --search-queries N (459..1000000)"),
    (["--bound-ms", "50", "--target-qps", "3"], "target_qps",
     "3 QPS is out of range: 1,000 queries a probe span at most 300 s, at least 20x the 50 ms "
     "bound; allowed: number 3.333..1000, or fewer queries a probe"),
    (["--bound-ms", "50", "--target-qps", "2000", "--search-queries", "1000"], "target_qps",
     "2,000 QPS is out of range: 1,000 queries a probe span at most 300 s, at least 20x the 50 "
     "ms bound; allowed: number 3.333..1000, or more queries a probe"),
    (["--bound-ms", "50", "--target-qps", "30", "--search-queries", "10000"], "target_qps",
     "allowed: number 33.33..10000"),
    (["--bound-ms", "15001"], "bound_ms", "too long for a search: a probe spans at least 20x "
     "the bound, so that a rate over what the system sustains shows, and at most 300 s; "
     "allowed: up to 15000 ms"),
])
def test_bad_search_input_is_refused_before_anything_runs(db_path, capsys, args, field,
                                                          allowed):
    assert main([*SEARCH, *args, "--db", str(db_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {field}:") and allowed in err, err
    assert not db_path.exists()


@pytest.mark.parametrize("value", ["458", "1000001", "1e3"])
def test_a_query_count_outside_its_range_is_refused_as_it_is_parsed(db_path, capsys, value):
    with pytest.raises(SystemExit) as exit_:  # argparse refuses the range at parse time
        main([*SEARCH, "--bound-ms", "50", "--search-queries", value, "--db", str(db_path)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "search_queries: " in err and "allowed: integer 459..1000000" in err
    assert not db_path.exists()


def test_the_search_runs_server_only_and_target_rps_needs_it(db_path, capsys):
    assert main(["serve", "--scenario", "offline", *IDENTITY, "--find-max-qps",
                 "--bound-ms", "5", "--db", str(db_path)]) == 2
    assert capsys.readouterr().err.startswith("error: scenario:")
    assert main(["serve", "--scenario", "offline", *IDENTITY, "--target-rps", "5",
                 "--db", str(db_path)]) == 2
    assert capsys.readouterr().err.startswith("error: target_rps:")
    assert main(["serve", "--scenario", "server", *IDENTITY, "--target-qps", "5",
                 "--search-queries", "5000", "--db", str(db_path)]) == 2
    assert capsys.readouterr().err.startswith("error: search_queries: belongs to a max-QPS "
                                              "search; allowed: with --find-max-qps")
    assert not db_path.exists()


def stored(db_path):
    """(runs, sweeps) in the store."""
    with duckdb.connect(str(db_path), read_only=True) as con:
        return tuple(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                     for t in ("runs", "sweeps"))


def test_a_first_target_over_ten_times_this_machines_closed_loop_is_refused(db_path, capsys):
    """As a serving test's --target-qps: a first probe no closed loop here could serve would
    only fill memory with a backlog until its timeout."""
    seed_closed_loop(db_path, "closed-1")  # identity, batch 1, 1 thread: 412 samples/s
    before = stored(db_path)
    assert main([*SEARCH, "--bound-ms", "5", "--target-qps", "5000",
                 "--db", str(db_path)]) == 2
    assert capsys.readouterr().err == (
        "error: target_qps: 5,000 QPS cannot be reached: the closed loop of this "
        "configuration on this machine did 412 samples/s; allowed: up to 10x the closed "
        "loop's 412 samples/s, i.e. 4,120\n")
    assert stored(db_path) == before == (1, 0)


def test_a_search_starts_and_prices_flat_out_from_this_machines_figures_only(
        db_path, worker_env, capsys):
    """Another machine's closed loop in the store (50,000 samples/s) was the first target
    and the flat out; this machine's (1,000 samples/s, which the identity model serves far
    inside a 50 ms bound) is the start, and with no Offline run in the search flat out is an
    estimate naming that run."""
    seed_closed_loop(db_path, "here-1", per_call_ns=1_000_000)
    seed_closed_loop(db_path, "elsewhere-1", per_call_ns=20_000, system_id="another-machine")
    where = stale_c6i(db_path)
    # 1,000 queries a probe at a 50 ms bound: the search's ceiling is 1,000 QPS, one probe
    main([*SEARCH, "--bound-ms", "50", "--max-probes", "2", "--machine-shape", "c6i.4xlarge",
          "--search-queries", "1000", "--db", str(db_path)])
    out = capsys.readouterr().out
    assert ("estimate 1,000.0 QPS (the store's closed-loop figure for this configuration: run "
            "here-1 on this machine, 1,000.0 samples/s at batch 1)") in out
    [flat] = [line for line in out.splitlines() if "flat out (no bound)" in line]
    assert flat.startswith("  flat out (no bound): 8,000.0 samples/s -> ")  # 1,000 x 8 cores
    assert ("[estimate: no Offline run in this search; closed-loop run here-1 on this machine "
            "(1,000.0 samples/s at batch 1, one replica); ") in flat
    assert "50,000" not in out and "elsewhere-1" not in out
    # the price is older than 6 months: one line naming it and where to check it
    [note] = [line for line in out.splitlines() if line.startswith("note: ")]
    assert note.startswith("note: 1 price used here is older than 6 months on ")
    assert (": AWS c6i.4xlarge: as of 2020-01 (read as 2020-01-01, the earliest it can mean), "
            in note and f"(check it at {where}). Check them there before signing" in note)


@pytest.mark.alone  # a LoadGen bound or a contention verdict: measured time
def test_a_real_search_stores_every_probe_under_one_sweep_and_prices_the_bound(
        db_path, worker_env, capsys):
    # No count given: chosen from the first target, 20 bounds x 12.5 ms x 8 x 1,000 QPS =
    # 2,000 queries a probe, so the targets reach 8,000 QPS (2,000 queries over 250 ms)
    code = main([*SEARCH, "--bound-ms", "12.5", "--target-qps", "1000", "--max-probes", "3",
                 "--min-duration", "0.2", "--max-batch", "4",
                 "--machine-shape", "c6i.4xlarge", "--target-rps", "100000",
                 "--db", str(db_path)])
    out = capsys.readouterr().out
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        rows = con.execute(
            "SELECT r.sweep_id, r.status, r.extra->>'scenario', "
            "CAST(r.extra->>'target_qps' AS DOUBLE), s.result, r.import_s, s.query_count, "
            "CAST(s.summary->>'overlatency_count' AS BIGINT), "
            "CAST(r.extra->>'query_count' AS BIGINT), "
            "CAST(r.extra->>'min_duration_s' AS DOUBLE) FROM runs r "
            "JOIN serving_results s USING (run_id) ORDER BY r.started_at").fetchall()
        [command] = con.execute("SELECT command FROM sweeps").fetchone()
    finally:
        con.close()
    assert len(rows) == 3 and len({r[0] for r in rows}) == 1  # one sweep
    # every probe in one worker held warm: one import for the whole search
    assert len({r[5] for r in rows}) == 1
    # every probe ran exactly the 2,000 queries chosen, whatever its rate (LoadGen: min
    # query count 2,000, no minimum duration), and LoadGen's over count is kept
    assert [(r[6], r[8], r[9]) for r in rows] == [(2000, 2000, 0.0)] * 3
    assert all(r[7] is not None and 0 <= r[7] <= 2000 for r in rows)
    for _, status, _, _, result, *_ in rows:
        assert status == ("ok" if result == "VALID" else "invalid")
    assert [r[2] for r in rows] == ["server"] * 3
    # identity at 1000 QPS: part 1 holds it VALID at 3000; then doubled
    assert rows[0][1] == "ok", out
    assert rows[0][7] <= 9  # VALID over 2,000 queries: at most 9 over the bound
    assert [r[3] for r in rows][:2] == [1000.0, 2000.0]
    assert command.endswith(" --search-queries 2000")  # the stored request says it
    assert ("estimate 1,000.0 QPS (the target given)\nqueries: 2,000 queries per probe "
            "(chosen from the estimate 1,000 QPS, the target given, so the search can reach "
            "8,000 QPS); each probe 2,000 queries, up to 9 over the bound: p99.55\n") in out
    assert "over bound" in out and "allowed over" in out and "held to" in out  # the table
    assert "p99 ≤ 12.5 ms at 99 % confidence (LoadGen early stopping, 2,000 queries per " \
           "probe, up to 9 over allowed)" in out
    assert "after 3 probes" in out and "stopped: " in out
    assert "cost on AWS c6i.4xlarge ($0.6800/h" in out
    assert "per 1 M inferences [estimate:" in out  # 1 thread on part of the shape
    # this host's own record of the x86 hypervisor flag reaches the estimate's caveat
    with duckdb.connect(str(db_path), read_only=True) as con:
        tpc, vm = con.execute("SELECT threads_per_core, (extra->>'hypervisor')::BOOLEAN "
                              "FROM runs LIMIT 1").fetchone()
    if tpc == 1 and vm is not False:
        host = "a VM" if vm else "a host that did not record whether it is a VM"
        assert f"(1 thread per core on {host}) may be hyperthreads" in out
    assert "100,000 requests/s within the bound:" in out
    assert code == 0


def test_a_fixed_query_count_is_a_server_tests_with_no_minimum_duration_to_raise_it():
    from engine.scenarios.inference.spec import RunSpec
    from engine.scenarios.serving.spec import ServeSpec
    from engine.scenarios import SERVING

    spec = ServeSpec(RunSpec("identity", "selftest", 1, 1), "server", target_qps=100.0,
                     min_duration_s=10.0, min_query_count=459, query_count=1000).validate(8)
    assert (spec.loadgen_min_duration_s, spec.loadgen_min_queries) == (0.0, 1000)
    assert (spec.policy.min_time_s, spec.policy.min_iters) == (10.0, 1000)  # 1,000 at 100 QPS
    extra = SERVING.config_extra(spec)  # the row says what LoadGen was given
    assert (extra["min_duration_s"], extra["min_query_count"], extra["query_count"]) == (
        0.0, 1000, 1000)
    plain = ServeSpec(RunSpec("identity", "selftest", 1, 1), "server", target_qps=100.0)
    assert (plain.loadgen_min_duration_s, plain.loadgen_min_queries) == (10.0, 100)
    with pytest.raises(UserError) as exc:
        ServeSpec(RunSpec("identity", "selftest", 1, 1), "server", target_qps=100.0,
                  query_count=458).validate(8)
    assert str(exc.value) == ("query_count: 458 is out of range; allowed: integer "
                              "459..1000000 (the fewest LoadGen's early stopping judges a p99 "
                              "on)")
    with pytest.raises(UserError, match="^query_count: a fixed query count holds a Server "
                                        "test's p99 .*allowed: none, or scenario server$"):
        ServeSpec(RunSpec("identity", "selftest", 1, 1), "offline",
                  query_count=1000).validate(8)
