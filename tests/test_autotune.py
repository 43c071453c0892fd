"""The autotuner (issue 27, part 3): the search driven by scripted probes (fixed closed-loop
figures and fixed max-QPS answers: the exact pruned set and reasons, the confirmations,
the stop, the winner, the Pareto front and the gain over the default), the Pareto rule on
its own, bad input refused before anything runs, and one tiny real tune with the selftest
identity model. Nothing here times or sleeps."""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb
import pytest

from engine.analysis.pareto import dominates, pareto_front
from engine.cli import main
from engine.core.limits import logical_cores
from engine.present.tune_text import recommendation, tune_lines
from engine.run.search.autotune import Candidate, ClosedFigure, autotune, closed_by_sut
from engine.run.search.max_qps import QpsSearch


@dataclass
class Rec:  # what the tuner reads of a Server probe's run
    status: str
    p99_ms: float | None = None
    throughput: float | None = None
    reason: str = ""
    serving: dict = field(default_factory=dict)


def C(runtime, batch, threads):
    return Candidate("torch", runtime, "fp32", batch, threads)


A, B, CC = C("eager", 1, 1), C("onnxruntime", 4, 2), C("onnxruntime", 8, 2)
D, E, F = C("torchscript", 4, 2), C("compile", 4, 2), C("eager", 4, 2)
G, H = C("channels_last", 2, 1), C("libtorch", 2, 2)
DEFAULT = C("eager", 1, 4)
CANDIDATES = [A, B, CC, D, E, F, G, H]
# closed loop: (status, samples/s, p99 ms of one call at the batch)
CLOSED = {A: ("ok", 100, 10), B: ("ok", 400, 20), CC: ("ok", 500, 60), D: ("ok", 350, 15),
          E: ("error", None, None), F: ("ok", 300, 25), G: ("ok", 200, 5), H: ("ok", 260, 8),
          DEFAULT: ("ok", 150, 9)}
# the max-QPS search: (max QPS, LoadGen's p99 ms there)
SERVER = {A: (95, 11), B: (380, 40), D: (390, 30), F: (392, 45), G: (200, 4), H: (395, 20),
          DEFAULT: (140, 12)}


def run(objective, *, candidates=CANDIDATES, closed=CLOSED, price=None, margin=0.05):
    probed, searched = [], []

    def closed_probe(c):
        probed.append(c)
        status, tp, p99 = closed[c]
        return ClosedFigure(status, tp, p99, reason="boom" if status != "ok" else "")

    def qps_search(c, start):
        searched.append((c, start))
        q, p99 = SERVER[c]
        rec = Rec("ok", p99_ms=p99)
        return QpsSearch(((q, rec),), q, rec, (q, None), "scripted", query_count=1000)

    t = autotune(candidates, default=DEFAULT, closed_probe=closed_probe,
                 qps_search=qps_search, bound_ms=50, objective=objective, margin=margin,
                 price=price or (lambda c, f, rate: None))
    return t, probed, searched


def per_core(c, fig, rate):  # a scripted price: $100 a core-hour-ish, per 1 M
    return c.threads * 100 / rate


def test_prunes_each_with_its_reason_then_confirms_the_top_three_and_stops():
    t, probed, searched = run("qps")
    assert probed == [*CANDIDATES, DEFAULT]  # the default is probed once, after
    assert [(c, why) for c, why in t.pruned] == [
        (CC, "closed-loop p99 60 ms at batch 8 already over the 50 ms bound"),
        (E, "closed-loop probe ended error: boom"),
        (A, "closed-loop 100.0 samples/s is 4.00x worse than the best candidate's (torch "
            "onnxruntime fp32, max batch 4, 2 threads); pruned beyond 2x")]
    # survivors best first: B 400, D 350, F 300, H 260, G 200 (G is exactly 2x: kept)
    assert [c for c, _ in searched] == [B, D, F, DEFAULT]
    assert [s for _, s in searched] == [400, 350, 300, 150]  # each from its closed loop
    assert [x.candidate for x in t.confirmed] == [B, D, F]
    assert t.stop_reason == ("the last 2 confirmations gained under 5.0% (2.6%, 0.5%); "
                             "2 survivor(s) left unconfirmed")
    assert t.winner.candidate == F and t.winner.qps == 392
    assert t.gain_pct == pytest.approx((392 / 140 - 1) * 100)  # 180 %
    # D beats B on both; F has the most QPS; the default the lowest p99
    assert [x.candidate for x in t.front] == [D, F, DEFAULT]


def test_a_confirmation_that_still_pays_goes_on_past_the_top_three():
    t, _, searched = run("qps", margin=0.005)  # D's 2.6 % pays, F's 0.5 % does too
    assert [c for c, _ in searched] == [B, D, F, H, G, DEFAULT]
    assert t.stop_reason == "every candidate that survived pruning confirmed (5)"
    assert t.winner.candidate == H and t.winner.qps == 395


def test_the_cost_objective_ranks_and_prunes_on_cost_per_million():
    t, _, searched = run("cost", price=per_core)
    # flat-out cost: B and G 0.5, D 0.571, F 0.667, H 0.769, A 1.0 (2.0x the best: kept)
    assert [(c, why) for c, why in t.pruned] == [
        (CC, "closed-loop p99 60 ms at batch 8 already over the 50 ms bound"),
        (E, "closed-loop probe ended error: boom")]
    # B 0.526, G 0.5 (gains 5.3 %), D 0.513 and F 0.510 gain nothing: stop
    assert [c for c, _ in searched] == [B, G, D, F, DEFAULT]
    assert t.stop_reason == ("the last 2 confirmations gained under 5.0% (0.0%, 0.0%); "
                             "2 survivor(s) left unconfirmed")
    assert t.winner.candidate == G and t.winner.cost == pytest.approx(0.5)
    assert t.default.cost == pytest.approx(400 / 140)
    assert t.gain_pct == pytest.approx((1 - 0.5 / (400 / 140)) * 100)  # 82.5 % cheaper
    # G the cheapest and the lowest p99, D a lower p99 than F, F the most QPS; D beats B
    # on all three, G beats the default
    assert [x.candidate for x in t.front] == [G, D, F]
    assert recommendation(t, "c6i.4xlarge") == (
        "torch channels_last fp32, max batch 2, 1 thread: 200 QPS: p99 ≤ 50 ms at 99 % "
        "confidence (LoadGen's p99 4 ms), $0.5 per 1 M on c6i.4xlarge")


def test_every_candidate_pruned_leaves_no_winner_but_the_default_measured():
    t, _, searched = run("qps", candidates=[CC, E])
    assert [c for c, _ in t.pruned] == [CC, E]
    assert t.confirmed == () and t.winner is None and t.gain_pct is None
    assert t.stop_reason == "every candidate was pruned"
    assert [c for c, _ in searched] == [DEFAULT] and t.default.qps == 140
    assert recommendation(t, None) == "no configuration met the p99 bound of 50 ms"


def test_a_default_already_over_the_bound_closed_loop_is_not_searched():
    closed = {**CLOSED, DEFAULT: ("ok", 33, 399)}
    t, probed, searched = run("qps", closed=closed)
    assert probed[-1] == DEFAULT and DEFAULT not in [c for c, _ in searched]
    assert t.default.search is None and t.gain_pct is None and t.winner.candidate == F
    assert tune_lines(t, shape=None, space="")[1] == (
        "default (torch eager fp32, max batch 1, 4 threads): closed-loop p99 399 ms at batch "
        "1, already over the 50 ms bound: no Server test could meet it")


def test_the_report_says_the_recommendation_default_front_constraints_and_pruned():
    t, _, _ = run("qps")
    lines = tune_lines(t, shape=None, space="8 candidates")
    assert lines[0] == ("recommendation: torch eager fp32, max batch 4, 2 threads: 392 QPS: "
                        "p99 ≤ 50 ms at 99 % confidence (LoadGen's p99 45 ms)")
    assert lines[1] == ("default (torch eager fp32, max batch 1, 4 threads): 140 QPS: p99 ≤ "
                        "50 ms at 99 % confidence (LoadGen's p99 12 ms); the winner is 180.0% "
                        "more QPS")
    text = "\n".join(lines)
    assert "constraints: Server p99 ≤ 50 ms at 99 % confidence (LoadGen early stopping, 1,000 " \
           "queries per probe, up to 2 over allowed); objective: most QPS; margin 5.0%; " \
           "8 candidates" in text
    assert "pruned (3):\n  torch onnxruntime fp32, max batch 8, 2 threads: closed-loop p99 " \
           "60 ms at batch 8 already over the 50 ms bound\n" in text


def test_a_closed_loop_figure_is_its_configurations_once_and_the_stores_before_a_probe():
    """closed_by_sut, which the tuner and its replay share: the batcher's wait plays no part
    in a closed loop, so two candidates that differ only in it get one probe; a
    configuration the store held is not probed and keeps the stored run's figure."""
    probed = []

    def probe(c):
        probed.append(c)
        return ClosedFigure("ok", 100.0 * c.max_batch, 1.0)
    waits = [Candidate("torch", "eager", "fp32", 4, 1, w) for w in (0.0, 2.0)]
    stored = Candidate("torch", "eager", "fp32", 1, 1, 2.0)
    row = {"run_id": "old-run", "throughput": 55.0, "p99_ms": 3.0, "threads_per_core": 2,
           "cores_used": 1, "machine_shape": None}
    closed = closed_by_sut({stored.closed_loop(): row}, probe)
    first, second, kept = (closed(c) for c in [*waits, stored])
    assert probed == [waits[0]] and first is second
    assert (first.source, first.throughput) == ("measured", 400.0)
    assert kept == ClosedFigure("ok", 55.0, 3.0, "", "stored", "old-run", 2, 1, None)


def test_the_pareto_rule():
    assert dominates((1, -5), (2, -4)) and not dominates((1, -5), (1, -5))
    assert not dominates((1, -3), (2, -4))
    assert dominates((1, -5, None), (2, -4, 0.1))  # an unknown cost is left out
    pts = [(3, -10), (1, -5), (2, -10), (1, -4)]
    assert pareto_front(pts, key=lambda p: p) == [(1, -5), (2, -10)]


# -- the command ---------------------------------------------------------------------------

TUNE = ["tune", "--model", "identity", "--framework", "selftest"]


@pytest.mark.parametrize("args, field, allowed", [
    (["--bound-ms", "0"], "bound_ms", "0.001..600000"),
    (["--bound-ms", "-5"], "bound_ms", "0.001..600000"),
    ([], "bound_ms", "0.001..600000"),
    (["--bound-ms", "50", "--objective", "speed"], "objective", "allowed: qps, cost"),
    (["--bound-ms", "50", "--objective", "cost"], "machine_shape",
     "allowed: --machine-shape NAME"),
    (["--bound-ms", "50", "--machine-shape", "m9.huge"], "machine_shape",
     "allowed: a shape as `python -m engine prices list` prints it"),
    (["--bound-ms", "50", "--margin", "2"], "margin", "0..1"),
    (["--bound-ms", "50", "--replicas", "0"], "replicas",
     f"allowed: integer 1..{logical_cores()}"),
    (["--bound-ms", "50", "--replicas", str(logical_cores() + 1)], "replicas",
     f"allowed: integer 1..{logical_cores()}"),
    (["--bound-ms", "50", "--threads", str(logical_cores()), "--replicas", "2"], "replicas",
     f"allowed: threads x replicas <= {logical_cores()}"),
    (["--bound-ms", "50", "--runtime", "onnxruntime"], "runtime", "allowed: selftest:"),
    (["--bound-ms", "50", "--framework", "jax"], "framework", "allowed: torch, tensorflow"),
])
def test_bad_tune_input_is_refused_before_anything_runs(db_path, capsys, args, field,
                                                        allowed):
    assert main([*TUNE, *args, "--db", str(db_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {field}:") and allowed in err, err
    assert not db_path.exists()


def test_a_start_rate_over_ten_times_the_fastest_candidates_closed_loop_is_refused(
        db_path, capsys):
    from tests.serving_seed import seed_closed_loop
    from tests.test_max_qps import stored

    seed_closed_loop(db_path, "b1")  # 412 samples/s: candidate batch 1
    seed_closed_loop(db_path, "b4", batch=4, per_call_ns=5_000_000)  # 800: batch 4
    seed_closed_loop(db_path, "t2", threads=2, per_call_ns=200_000)  # 5,000: not a candidate
    before = stored(db_path)
    argv = [*TUNE, "--bound-ms", "50", "--batches", "1", "4", "--threads", "1",
            "--search-queries", "100000", "--db", str(db_path)]  # targets up to 100,000 QPS
    assert main([*argv, "--replicas", "1", "--start-qps", "8001"]) == 2
    assert capsys.readouterr().err == (
        "error: start_qps: 8,001 QPS cannot be reached: the closed loop of the fastest "
        "candidate stored on this machine did 800 samples/s; allowed: up to 10x the closed "
        "loop's 800 samples/s, i.e. 8,000\n")
    # two replicas behind the queue serve up to two such closed loops
    assert main([*argv, "--replicas", "1", "2", "--start-qps", "16001"]) == 2
    assert capsys.readouterr().err.endswith(
        "allowed: up to 10x the closed loop's 800 samples/s x 2 replicas, i.e. 16,000\n")
    assert stored(db_path) == before == (3, 0)


def test_a_real_tune_stores_every_probe_under_one_sweep_and_reuses_the_store(
        db_path, worker_env, capsys):
    argv = [*TUNE, "--bound-ms", "50", "--batches", "1", "4", "--threads", "1",
            "--replicas", "1", "--probe-s", "0.05", "--search-queries", "1000",
            "--max-probes", "2", "--start-qps", "1000", "--machine-shape", "c6i.4xlarge",
            "--db", str(db_path)]
    from tests.test_max_qps import stale_c6i
    where = stale_c6i(db_path)  # c6i.4xlarge's price as of 2020-01
    code = main(argv)
    out = capsys.readouterr().out
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        rows = con.execute("SELECT sweep_id, kind, status, batch_size, intra_threads "
                           "FROM runs ORDER BY started_at").fetchall()
        counts = con.execute("SELECT DISTINCT query_count FROM serving_results").fetchall()
        [command] = con.execute("SELECT command FROM sweeps").fetchone()
    finally:
        con.close()
    assert counts == [(1000,)]  # every Server test of every candidate: the one count
    assert command.count(" --search-queries ") == 1 and " --search-queries 1000 " in command
    assert len({r[0] for r in rows}) == 1, rows  # one sweep
    closed = [r for r in rows if r[1] == "inference"]
    served = [r for r in rows if r[1] != "inference"]
    # two candidates and the default (batch 1, every thread), each probed once
    assert sorted((r[3], r[4]) for r in closed) == sorted({(1, 1), (4, 1),
                                                           (1, logical_cores())})
    assert [r[2] for r in closed] == ["ok"] * len(closed)
    assert served and {r[2] for r in served} <= {"ok", "invalid"}
    assert "recommendation: selftest python fp32, max batch " in out, out
    assert "per 1 M on c6i.4xlarge" in out
    [note] = [line for line in out.splitlines() if line.startswith("note: 1 price")]
    assert ("AWS c6i.4xlarge: as of 2020-01 (read as 2020-01-01" in note
            and f"(check it at {where}). Check them there" in note)
    assert ("constraints: Server p99 ≤ 50 ms at 99 % confidence (LoadGen early stopping, "
            "1,000 queries per probe, up to 2 over allowed)") in out
    assert code == 0
    # again: the closed-loop figures come from the store, only Server tests run
    assert main(argv) == 0
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        again = con.execute("SELECT kind FROM runs WHERE sweep_id != ?",
                            [rows[0][0]]).fetchall()
    finally:
        con.close()
    assert again and all(k != "inference" for (k,) in again)



@pytest.mark.parametrize("args, field, allowed", [
    (["--min-duration", "2"], "min_duration_s", "allowed: --search-queries N (459..1000000)"),
    (["--min-queries", "500"], "min_query_count", "allowed: --search-queries N (459..1000000)"),
    (["--start-qps", "3"], "start_qps", "allowed: number 3.333..1000, or fewer queries"),
    (["--start-qps", "1001", "--search-queries", "1000"], "start_qps", "1,000 queries a probe "
     "span at most 300 s, at least 20x the 50 ms bound; allowed: number 3.333..1000, or more "
     "queries a probe"),
])
def test_a_tunings_server_tests_run_one_query_count_and_the_old_options_say_so(
        db_path, capsys, args, field, allowed):
    assert main([*TUNE, "--bound-ms", "50", *args, "--db", str(db_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {field}: ") and allowed in err, err
    assert not db_path.exists()


def test_several_models_are_tuned_each_in_a_sweep_of_its_own_then_compared(
        db_path, worker_env, capsys):
    argv = ["tune", "--model", "identity", "fault_raise", "--framework", "selftest",
            "--bound-ms", "50", "--batches", "1", "--threads", "1", "--replicas", "1",
            "--probe-s", "0.05", "--search-queries", "1000",
            "--max-probes", "2", "--start-qps", "1000", "--db", str(db_path)]
    code = main(argv)
    out = capsys.readouterr().out
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        rows = con.execute("SELECT r.model, count(DISTINCT r.sweep_id), list(DISTINCT "
                           "r.status ORDER BY r.status) FROM runs r GROUP BY r.model "
                           "ORDER BY r.model").fetchall()
    finally:
        con.close()
    # one sweep each; the model that fails to load leaves its rows, each with its status
    assert rows[0][:2] == ("fault_raise", 1) and rows[0][2] == ["error"]
    assert rows[1][:2] == ("identity", 1) and "ok" in rows[1][2]
    assert out.index("=== identity") < out.index("=== fault_raise")
    assert "every model (each tuned alone, same bound, objective and search space):" in out
    assert "  fault_raise: no configuration met the p99 bound of 50 ms" in out
    assert "most QPS under the bound: identity, selftest python fp32, max batch 1" in out
    assert code == 1  # one model has no winner


def test_a_model_file_is_tuned_alone(db_path, capsys, tmp_path):
    f = tmp_path / "m.onnx"
    f.write_bytes(b"x")
    assert main(["tune", "--model", "resnet18", "--model-file", str(f), "--bound-ms", "50",
                 "--db", str(db_path)]) == 2
    assert capsys.readouterr().err.startswith("error: model: --model names catalog models")


def test_confirmations_valid_at_the_highest_target_a_probe_tests_are_lower_bounds():
    """Under a 50 ms bound a probe of 1,000 queries tests up to 1,000 QPS (20 bounds): a
    candidate VALID there has a max of at least that, two such are not ranked, and the
    report says so."""
    from engine.present.tune_text import capped_note

    b1, b2 = C("eager", 1, 1), C("eager", 2, 1)

    def search(c, start):
        rec = Rec("ok", p99_ms=5.0)
        return QpsSearch(((1000.0, rec),), 1000.0, rec, (1000.0, None), "still VALID",
                         query_count=1000, capped=True)
    t = autotune([b1, b2], default=b1, closed_probe=lambda c: ClosedFigure("ok", 900.0, 1.0),
                 qps_search=search, price=lambda c, f, rate: None, bound_ms=50,
                 objective="qps")
    assert recommendation(t, None) == ("torch eager fp32, max batch 1, 1 thread: ≥ 1,000 QPS: "
                                       "p99 ≤ 50 ms at 99 % confidence (LoadGen's p99 5 ms)")
    assert capped_note(t) == (
        "2 confirmations were VALID at the highest target a probe of 1,000 queries tests "
        "under the bound (1,000 QPS): such a max QPS is at least that, and no ranking among "
        "such is settled; more queries a probe (--search-queries) reach higher rates")
    assert f"note: {capped_note(t)}" in tune_lines(t, shape=None, space="2 candidates")
    assert capped_note(run("qps")[0]) is None  # none reached it


def test_one_query_count_is_chosen_for_every_confirmation_before_the_first():
    """choose_queries hears, once and before any search, the closed loop of every candidate
    that may be confirmed (the survivors best first, then the default's); what it answers is
    the tuning's count. From those figures under a 50 ms bound: 8x the fastest (500 samples/s
    would be 4,000 QPS; CC is over the bound, so B's 400: 3,200 queries), with 8 halvings
    under the slowest (the default's 150: a probe at 18.75 QPS runs 171 s, under 300 s)."""
    from engine.run.search.query_choice import choose_query_count

    heard, searched = [], []

    def choose(rates):
        heard.append((list(rates), len(searched)))
        return choose_query_count(max(rates), 50, lowest_qps=min(rates), source="scripted")

    def qps_search(c, start):
        searched.append(c)
        q, p99 = SERVER[c]
        rec = Rec("ok", p99_ms=p99)
        return QpsSearch(((q, rec),), q, rec, (q, None), "scripted", query_count=1000)

    t = autotune(CANDIDATES, default=DEFAULT, qps_search=qps_search, bound_ms=50,
                 objective="qps", price=lambda c, f, rate: None, choose_queries=choose,
                 closed_probe=lambda c: ClosedFigure(CLOSED[c][0], CLOSED[c][1], CLOSED[c][2]))
    assert heard == [([400, 350, 300, 260, 200, 150], 0)]  # once, before the first search
    assert (t.queries.query_count, t.queries.ceiling, t.queries.binds) == (3200, 3200.0, "")
    assert t.queries.text() == ("3,200 queries per probe (chosen from the estimate 400 QPS, "
                                "scripted, so the search can reach 3,200 QPS)")
    assert "queries: 3,200 queries per probe (chosen from the estimate 400 QPS, scripted, " \
           "so the search can reach 3,200 QPS)" in tune_lines(t, shape=None, space="")
    # every candidate pruned and the default over the bound: nothing to choose for
    over = {**CLOSED, DEFAULT: ("ok", 150, 60)}
    t = autotune([CC], default=DEFAULT, qps_search=qps_search, bound_ms=50, objective="qps",
                 price=lambda c, f, rate: None, choose_queries=choose,
                 closed_probe=lambda c: ClosedFigure(*over[c]))
    assert t.queries is None and len(heard) == 1


def test_a_real_tuning_chooses_its_count_from_the_fastest_stored_closed_loop(
        db_path, worker_env, capsys):
    """No count given: the candidates' closed loops are the store's (identity: batch 4 800
    samples/s, batch 1 412, the default 600), so under a 12.5 ms bound every Server test of
    every candidate runs 20 x 12.5 ms x 8 x 800 = 1,600 queries, the count the sweep's
    command then states (so that rerunning it is the same tuning)."""
    from tests.serving_seed import seed_closed_loop

    seed_closed_loop(db_path, "b1")
    seed_closed_loop(db_path, "b4", batch=4, per_call_ns=5_000_000)
    seed_closed_loop(db_path, "dflt", threads=logical_cores(), per_call_ns=1_666_667)
    # (whether identity meets the bound on a busy machine is not what this tests)
    main([*TUNE, "--bound-ms", "12.5", "--batches", "1", "4", "--threads", "1", "--replicas",
          "1", "--max-probes", "2", "--db", str(db_path)])
    out = capsys.readouterr().out
    with duckdb.connect(str(db_path), read_only=True) as con:
        counts = con.execute("SELECT DISTINCT query_count FROM serving_results").fetchall()
        [command] = con.execute("SELECT command FROM sweeps").fetchone()
        inference = con.execute("SELECT count(*) FROM runs WHERE kind = 'inference'"
                                ).fetchone()[0]
    assert counts == [(1600,)] and inference == 3  # no probe: the store's figures
    assert command.endswith(" --max-probes 2 --db " + str(db_path) + " --search-queries 1600")
    said = ("1,600 queries per probe (chosen from the estimate 800 QPS, the fastest "
            "candidate's closed-loop samples/s, so the search can reach 6,400 QPS)")
    assert f"queries: {said}" in out.splitlines()  # as it was chosen, and in the report
    assert out.count(said) == 2
    assert ("Server p99 ≤ 12.5 ms at 99 % confidence (LoadGen early stopping, 1,600 queries "
            "per probe, up to 7 over allowed)") in out


def test_a_cost_from_a_lower_bound_max_is_said_to_be_at_most_that():
    """A candidate VALID at the highest target its search tests has a max of at least that,
    so its cost per 1 M at the bound is at most the figure: the recommendation, the Pareto
    table, the front's cost basis and a fleet's per-provider line say so beside it."""
    from types import SimpleNamespace

    from engine.present.search_view import front_frame, models_frame
    from engine.present.tune_text import fleet_best_lines

    b1 = C("eager", 1, 1)

    def search(c, start):
        rec = Rec("ok", p99_ms=5.0)
        return QpsSearch(((1000.0, rec),), 1000.0, rec, (1000.0, None), "still VALID",
                         query_count=1000, capped=True)
    t = autotune([b1], default=b1, closed_probe=lambda c: ClosedFigure("ok", 900.0, 1.0),
                 qps_search=search, price=lambda c, f, rate: 68 / rate, bound_ms=50,
                 objective="cost")  # $0.068 per 1 M at 1,000 QPS
    assert recommendation(t, "c6i.4xlarge") == (
        "torch eager fp32, max batch 1, 1 thread: ≥ 1,000 QPS: p99 ≤ 50 ms at 99 % confidence "
        "(LoadGen's p99 5 ms), at most $0.068 per 1 M on c6i.4xlarge: the max QPS is a lower "
        "bound")
    table = tune_lines(t, shape="c6i.4xlarge", space="")
    assert ("torch eager fp32, max batch 1, 1 thread  ≥ 1,000   5.000  ≤ $0.068   winner"
            in "\n".join(table))  # the Pareto table
    assert front_frame(t)["cost basis"].tolist() == [
        "at most $0.068 per 1 M: the max QPS is a lower bound; measured on the shape"]
    assert models_frame([("resnet18", None, t)])["cost basis"].tolist() == [
        "at most $0.068 per 1 M: the max QPS is a lower bound; measured on the shape"]
    node = SimpleNamespace(shape="c6i.4xlarge", tuning=t)
    best = SimpleNamespace(cheapest=node, per_provider=[("AWS", node), ("OCI", node)])
    assert fleet_best_lines(best)[1] == "best per provider: AWS: c6i.4xlarge, at most $0.068 " \
                                        "per 1 M; OCI: c6i.4xlarge, at most $0.068 per 1 M"


def test_the_store_s_closed_loop_figure_carries_its_hosts_hypervisor_flag(db_path):
    """A tuner that reads a closed-loop figure from the store instead of probing prices it
    with the flag its run recorded (a VM reporting 1 thread per core: its cores may be
    hyperthreads), through the row its sweep's command keeps."""
    from dataclasses import replace

    from engine.run.search.autotune_runs import stored_figures
    from engine.run.process.machine import system_info
    from store.db import open_db
    from store.runs import save_record
    from seeds.records import SYSTEM, ok_record

    here = {**SYSTEM, "system_id": system_info()["system_id"]}
    rec = ok_record("vm-1", samples=(2_427_184,) * 3, model="identity", framework="selftest",
                    batch_size=1, intra_threads=1, image_size=None)
    with open_db(db_path) as con:
        save_record(con, replace(rec, system_id=here["system_id"], threads_per_core=1,
                                 extra={**rec.extra, "hypervisor": True}), here)
    b1 = Candidate("selftest", "python", "fp32", 1, 1)
    [(c, row)] = stored_figures(db_path, [b1], model="identity", image_size=None).items()
    assert (c, row["run_id"], row["threads_per_core"], row["hypervisor"]) == (
        b1, "vm-1", 1, True)
    assert ClosedFigure.stored(row).hypervisor is True
