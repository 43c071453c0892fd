"""Serving a language model (issue 38, kind genserve): the spec's refusals naming the field,
the figures derived from fixed request readings, the row LoadGen's word and error count
make (on logs the real LoadGen wrote in token mode, tests/data/loadgen_tokens/), the
concurrency sweep's stop rule and Pareto front on fixed figures, the cost per token on fixed
rates; then real tests: LoadGen Offline and Server and a closed loop against PyTorch eager
serving tiny_llama in an engine process, every request stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.core.errors import UserError
from engine.core.record import RunRecord
from engine.scenarios.genserve.hooks import GENSERVING
from engine.scenarios.genserve.messages import GenServeResult
from engine.scenarios.genserve.metrics import test_figures as figures
from engine.scenarios.genserve.spec import GenServeSpec, kv_blocks_needed
from engine.scenarios.genserve.table import GENSERVE_RESULTS, kind_rows

DATA = Path(__file__).parent / "data" / "loadgen_tokens"


def _spec(**kw):
    base = dict(model="tiny_llama", runtime="eager", scenario="closed-loop", prompt_len=16,
                output_len=8)
    return GenServeSpec(**{**base, **kw})


@pytest.mark.parametrize("kw, field, says", [
    (dict(output_len=1), "output_len", "allowed: integer 2.."),
    (dict(runtime="compile"), "runtime", "compile does not serve here: compiles a forward"),
    (dict(runtime="nope"), "runtime", "unknown engine 'nope'; allowed: eager, "
                                      "openvino_genai_cb"),
    (dict(max_num_seqs=2), "max_num_seqs", "eager answers one request at a time; allowed: 1"),
    (dict(runtime="openvino_genai_cb", max_num_seqs=4, kv_blocks=0, max_batched_tokens=2),
     "max_batched_tokens", "allowed: 0 (the engine's) or 4.."),
    (dict(runtime="openvino_genai_cb", kv_blocks=1, prompt_len=40),
     "kv_blocks", "one request of 40 + 8 tokens needs 2 blocks of 32"),
    (dict(kv_blocks=4), "kv_blocks", "eager has no such limit; allowed: 0"),
    (dict(scenario="server"), "target_qps", "the server scenario needs a target rate"),
    (dict(scenario="offline", users=2), "users", "a closed loop's"),
    (dict(users=8, min_query_count=4), "min_query_count", "allowed: 8.."),
    (dict(ttft_bound_ms=500.0), "preset", "standard is TTFT 2000 ms and TPOT 100 ms"),
    (dict(scenario="offline", query_count=500), "query_count", "allowed: none, or scenario "
                                                               "server"),
    (dict(precision="int8"), "precision", "allowed: fp32, bf16"),
    (dict(replicas=2, intra_threads=2), "replicas", "2 replicas x 2 threads = 4; allowed: at "
                                                    "most 2"),
    (dict(replicas=2, scenario="single-stream"), "replicas", "single-stream issues one "
                                                             "request at a time"),
])
def test_a_bad_field_is_refused_naming_it_and_its_range(kw, field, says):
    with pytest.raises(UserError) as err:
        _spec(**kw).validate(cores=2)
    assert err.value.field == field
    assert says in str(err.value)


def test_a_spec_round_trips_and_sizes_its_kv_cache():
    s = _spec(runtime="openvino_genai_cb", max_num_seqs=4, preset="interactive",
              ttft_bound_ms=500.0, tpot_bound_ms=30.0).validate(cores=2)
    assert GenServeSpec.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    assert s.batch_size == 4 and s.kv_blocks_resolved == 4  # 4 x ceil(24 / 32)
    assert kv_blocks_needed(8, 128, 64) == 8 * 6


def test_figures_derive_from_fixed_readings():
    # three requests of 4 tokens; ns since the test's start
    issue = [0, 100_000_000, 200_000_000]
    first = [50_000_000, 400_000_000, 260_000_000]  # TTFT 50, 300, 60 ms
    done = [80_000_000, 460_000_000, 500_000_000]  # E2E 80, 360, 300 ms
    f = figures(issue, first, done, [4, 4, 4], prompt_len=16, ttft_bound_ms=200.0,
                tpot_bound_ms=30.0)
    # TPOT = (E2E - TTFT) / 3: 10, 20, 80 ms
    assert f["requests"] == 3 and f["span_s"] == pytest.approx(0.5)
    assert f["requests_per_s"] == pytest.approx(6.0)
    assert f["output_tok_s"] == pytest.approx(24.0) and f["input_tok_s"] == pytest.approx(96.0)
    assert (f["ttft_over"], f["tpot_over"], f["good_requests"]) == (1, 1, 1)
    assert f["goodput_req_s"] == pytest.approx(2.0) and f["good_share"] == pytest.approx(1 / 3)
    assert f["tpot_p50_ms"] == pytest.approx(20.0) and f["user_tok_s"] == pytest.approx(50.0)
    # LoadGen's rule: the sorted value at floor(N p), p99 of 3 is the largest
    assert f["ttft_p50_ms"] == pytest.approx(60.0) and f["e2e_p99_ms"] == pytest.approx(360.0)


def _result(name: str | None, tokens=(4, 4), **kw) -> GenServeResult:
    summary = (DATA / f"{name}_summary.txt").read_text() if name else ""
    detail = (DATA / f"{name}_detail.txt").read_text() if name else ""
    return GenServeResult(
        "r1", load_s=1.0, first_forward_s=0.1, warmup_ns=(1,), samples_ns=(80, 90),
        warmup_s=0.0, measured_s=1.0, stop_reason="", scenario="server", prompt_len=16,
        output_len=4, ttft_bound_ms=2000.0, tpot_bound_ms=100.0, req_sample=(0, 1),
        req_issue_ns=(0, 10), req_first_ns=(50, 60), req_done_ns=(80, 100),
        req_tokens=tokens, summary_log=summary, detail_log=detail, **kw)


def _rec(**kw) -> RunRecord:
    blank = dict(sweep_id=None, model="tiny_llama", framework="torch", runtime="eager",
                 batch_size=1, intra_threads=1, inter_threads=1, precision="fp32",
                 image_size=None, device="cpu", weight_policy="random", warmup_iters=None,
                 min_time_s=None, min_iters=None, max_time_s=None, kind="genserve")
    return RunRecord(**{**blank, **kw})


def _record(res: GenServeResult):
    rec = _rec(run_id=res.run_id, status="ok",
               kind_rows=GENSERVING.result_columns(res)["kind_rows"])
    return GENSERVING.finish_record(rec, res)


def test_loadgen_valid_with_no_error_is_ok_and_its_logs_and_requests_are_kept():
    res = _result("server")
    rows = kind_rows(res)
    g = rows[GENSERVE_RESULTS.name][0]
    assert (g["loadgen_result"], g["loadgen_errors"]) == ("VALID", 0)
    assert g["loadgen_ttft_p99_ms"] is not None and g["loadgen_tok_s"] is not None
    assert [r["n_tokens"] for r in rows["genserve_requests"]] == [4, 4]
    assert sorted(r["name"] for r in rows["genserve_logs"]) == ["mlperf_log_detail.txt",
                                                                "mlperf_log_summary.txt"]
    assert _record(res).status == "ok"


def test_loadgen_errors_invalid_rules_short_requests_and_dropped_ones_make_a_row_invalid():
    errors = _record(_result("server_one_token"))
    assert errors.status == "invalid" and "LoadGen counted 67 SUT errors" in errors.reason
    tpot = _record(_result("server_tpot_1ns"))
    assert tpot.status == "invalid"
    assert "LoadGen: INVALID (performance constraints, early stopping not satisfied)" \
        in tpot.reason
    short = _record(_result(None, tokens=(4, 3), engine_stats={"ignored": 1}))
    assert short.status == "invalid"
    assert "1 of 2 requests did not return 4 tokens" in short.reason
    assert "the engine dropped 1 requests" in short.reason


def _point(users: int, tok_s: float, user_tok_s: float, status: str = "ok") -> RunRecord:
    return _rec(run_id=f"u{users}", status=status,
                kind_rows={GENSERVE_RESULTS.name: [{"output_tok_s": tok_s,
                                                    "user_tok_s": user_tok_s}]})


def test_the_concurrency_sweep_doubles_until_tokens_per_second_stop_rising():
    from engine.run.search.gen_max_rate import sweep_users

    figures_by_users = {1: (30.0, 30.0), 2: (55.0, 27.5), 4: (90.0, 22.0), 8: (93.0, 11.0),
                        16: (95.0, 6.0)}
    asked = []

    def probe(users):
        asked.append(users)
        return _point(users, *figures_by_users[users])

    c = sweep_users(probe, cap=64)
    assert asked == [1, 2, 4, 8]  # 90 -> 93 is +3.3 %, under 5 %: saturated
    assert "rose +3.3% from 4 to 8 users" in c.stop_reason
    assert c.front == (1, 2, 4, 8)  # each trades per-user speed for machine tokens/s
    assert [u for u, _ in sweep_users(probe, cap=3).points] == [1, 2]
    dominated = sweep_users(lambda u: _point(u, *{1: (30.0, 30.0), 2: (80.0, 40.0),
                                                  4: (81.0, 20.0)}[u]), cap=64)
    assert dominated.front == (2, 4)  # 1 user is worse on both than 2


def test_cost_per_token_prices_whole_machines_from_fixed_rates():
    from dataclasses import replace

    from engine.analysis.cost import custom_machine
    from engine.analysis.genserve_cost import TokenRates, token_serving_rows

    m = replace(custom_machine(0.36, 4), provider="OCI", shape="VM.Test")
    r = TokenRates(100.0, 400.0, 2.0, threads=2, threads_per_core=2, cores_used=2,
                   shape="VM.Test", flat_output_tok_s=200.0, flat_input_tok_s=800.0)
    [row] = token_serving_rows([m], r, target_tok_s=250.0)
    # measured on this shape, filling its 2 cores: 100 tok/s a machine
    assert row["estimate"] is False and row["output_tok_s"] == pytest.approx(100.0)
    assert row["usd_per_m_output"] == pytest.approx(0.36 / (100 * 3600) * 1e6)  # $1.00
    assert row["usd_per_m_input"] == pytest.approx(0.25)
    assert row["usd_per_m_output_flat"] == pytest.approx(0.5)
    assert row["machines"] == 3 and row["monthly"] == pytest.approx(3 * 0.36 * 730)


def test_the_command_refuses_bad_input_naming_the_field(capsys, tmp_path):
    db = str(tmp_path / "g.duckdb")
    assert main(["genserve", "--model", "tiny_llama", "--engine", "keras_hub", "--scenarios",
                 "offline", "--db", db]) == 2
    assert "error: runtime: keras_hub does not serve here" in capsys.readouterr().err
    assert main(["genserve-search", "--model", "tiny_llama", "--prompt-len", "16",
                 "--output-len", "8", "--target-qps", "50", "--db", db]) == 2
    assert "target_qps: 50 req/s is out of range" in capsys.readouterr().err
    assert not Path(db).exists()


# ------------------------------------------------------- real tests against real engines

@pytest.fixture(scope="module")
def real_tests(tmp_path_factory):
    """tiny_llama, prompt 16, output 8, PyTorch eager one request at a time: a closed loop
    of 2 users (6 requests), Offline and Server of LoadGen's minimum of 6 requests (Server
    at 40 req/s): too few for LoadGen's early stopping to judge a p99 (459 with none over),
    so Server is INVALID for that rule alone, which the row says (a VALID Server test runs
    459 requests: the CLI check in docs/SERVING.md)."""
    from store.db import open_db

    tmp = tmp_path_factory.mktemp("genserve")
    db = str(tmp / "g.duckdb")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BENCH_MODEL_DIR", str(tmp / "models"))
        code = main(["genserve", "--model", "tiny_llama", "--engine", "eager", "--scenarios",
                     "closed-loop", "offline", "server", "--prompt-len", "16",
                     "--output-len", "8", "--users", "2", "--min-queries", "6",
                     "--min-duration", "0.01", "--target-qps", "40",
                     "--ttft-ms", "60000", "--tpot-ms", "10000", "--db", db])
    with open_db(db) as con:
        runs = con.execute("SELECT run_id, status, reason, json_extract_string(extra, "
                           "'$.scenario') FROM runs").fetchall()
        results = {r[0]: r for r in con.execute(
            "SELECT scenario, requests, loadgen_result, loadgen_errors, agreement, "
            "output_tok_s, ttft_p99_ms, loadgen_ttft_p99_ms, tpot_p99_ms, "
            "loadgen_tpot_p99_ms FROM genserve_results").fetchall()}
        requests = dict(con.execute(
            "SELECT r.scenario, count(*) FROM genserve_requests q JOIN genserve_results r "
            "USING (run_id) WHERE q.n_tokens = 8 AND q.first_ns > q.issue_ns "
            "AND q.done_ns >= q.first_ns GROUP BY 1").fetchall())
        logs = con.execute("SELECT count(*) FROM genserve_logs").fetchone()[0]
    return code, runs, results, requests, logs


@pytest.mark.slow
def test_real_tests_store_every_request_and_loadgen_s_word(real_tests):
    code, runs, results, requests, logs = real_tests
    assert code == 1, runs  # the Server row is invalid
    by = {r[3]: r for r in runs}
    assert sorted(by) == ["closed-loop", "offline", "server"]
    assert (by["closed-loop"][1], by["offline"][1], by["server"][1]) == ("ok", "ok", "invalid")
    assert "LoadGen: INVALID (early stopping not satisfied)" in by["server"][2]
    assert set(results) == {"closed-loop", "offline", "server"}
    assert results["closed-loop"][1:4] == (6, None, None)
    assert results["server"][1:4] == (6, "INVALID", 0)
    assert results["offline"][2:4] == ("VALID", 0)
    assert {r[4] for r in results.values()} == {1.0}  # the check request: eager's own tokens
    assert requests["server"] == 6 and requests["closed-loop"] == 6
    assert requests["offline"] == results["offline"][1]
    assert logs == 4  # summary and detail of the two LoadGen tests
    # Ours count from the moment the front was handed a request, LoadGen's from its
    # scheduled time: ours can only be lower
    s = results["server"]
    assert s[6] <= s[7] * 1.001


def test_the_tuner_prunes_on_either_bound_and_confirms_the_default_too():
    from engine.run.search.autotune import autotune
    from engine.run.search.gen_autotune import GenCandidate, closed_figure, gen_candidates
    from engine.run.search.max_qps import QpsSearch

    cands = gen_candidates(["eager", "openvino_genai_cb", "keras_hub"], ["fp32", "int8"],
                           [1, 4], [2])
    assert [(c.runtime, c.precision, c.max_num_seqs) for c in cands] == [
        ("eager", "fp32", 1), ("openvino_genai_cb", "fp32", 1),
        ("openvino_genai_cb", "fp32", 4), ("openvino_genai_cb", "int8", 1),
        ("openvino_genai_cb", "int8", 4)]
    # closed loops at each candidate's full batch: requests/s, p99 TTFT, median TPOT
    closed = {("eager", "fp32", 1): (2.0, 300.0, 40.0),
              ("openvino_genai_cb", "fp32", 1): (3.0, 200.0, 30.0),
              ("openvino_genai_cb", "fp32", 4): (8.0, 400.0, 120.0),  # TPOT over 100
              ("openvino_genai_cb", "int8", 1): (4.0, 2500.0, 20.0),  # TTFT over 2000
              ("openvino_genai_cb", "int8", 4): (9.0, 900.0, 60.0)}

    def probe(c):
        qps, ttft, tpot = closed[(c.runtime, c.precision, c.max_num_seqs)]
        rec = _rec(run_id=f"{c.runtime}-{c.precision}-{c.max_num_seqs}", status="ok",
                   kind_rows={GENSERVE_RESULTS.name: [{
                       "requests_per_s": qps, "ttft_p99_ms": ttft, "tpot_p50_ms": tpot}]})
        return closed_figure(rec, 2000.0, 100.0)

    def search(c, start):  # the max rate each would sustain: 60 % of its closed loop
        best = _rec(run_id="best", status="ok")
        return QpsSearch(((0.6 * start, best),), 0.6 * start, best, (0.6 * start, None), "")

    t = autotune(cands, default=GenCandidate("eager", "fp32", 1, 2), closed_probe=probe,
                 qps_search=search, price=lambda c, f, rate: None, bound_ms=2000.0,
                 objective="qps", top_n=5)
    pruned = {c.max_num_seqs if c.precision == "fp32" else -c.max_num_seqs: why
              for c, why in t.pruned}
    assert "median TPOT 120.0 ms at its full batch is over the 100 ms TPOT bound" \
        in pruned[4]
    assert "closed-loop p99 2.5e+03 ms at batch 1 already over the 2000 ms bound" \
        in pruned[-1]
    assert t.winner.candidate == GenCandidate("openvino_genai_cb", "int8", 4, 2)
    assert t.winner.qps == pytest.approx(5.4) and t.default.qps == pytest.approx(1.2)
    assert t.gain_pct == pytest.approx(350.0)
