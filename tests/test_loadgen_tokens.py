"""LoadGen 6.0.17's token-latency mode read by parse_summary and detail_value (issue 38's
groundwork): logs the real LoadGen wrote in token mode (tests/data/loadgen_tokens/, captured
with tests/token_probe.py) parsed to their exact figures, then the real LoadGen run here
against a model-free SUT that answers each sample's first token and its completion from one
thread after fixed delays (1 ms, 3 ms): Server VALID under loose bounds and INVALID under a
1 ns TPOT bound, Offline's tokens/s by LoadGen's own arithmetic, SingleStream's judged
latency kept apart from its first-token line, errors counted but not judged. Each real test
runs well under a second; nothing asserts a duration."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.scenarios.serving.loadgen import detail_value, parse_summary
from tests.serving_seed import SERVER_INVALID
from tests.token_probe import run_token_test

# Captured on this project's 2-core machine with LoadGen 6.0.17 by run_token_test:
# server ("server"), server_tpot_1ns ("server", tpot_ns=1), offline ("offline",
# min_queries=200, min_duration_ms=2), single_stream ("single-stream", min_queries=100),
# server_one_token ("server", tokens=1 for every 8th sample index, else 3)
DATA = Path(__file__).parent / "data" / "loadgen_tokens"
PERCENTILES = ["50", "90", "95", "97", "99", "99.9"]  # LoadGen's, as parse_summary keys them
# what parse_summary returned before token mode, and still returns for a log without it
PLAIN_KEYS = {"result", "rules", "failed_rules", "recommendations", "early_stopping",
              "percentiles_ns", "figures", "early_stopping_lines", "scenario"}
TOKEN_KEYS = {"token_mode", "errors", "ttft_percentiles_ns", "tpot_percentiles_ns",
              "early_stopping_ttft", "early_stopping_ttft_lines", "early_stopping_tpot",
              "early_stopping_tpot_lines"}


def _logs(name: str) -> tuple[dict, str]:
    summary = (DATA / f"{name}_summary.txt").read_text()
    return parse_summary(summary), (DATA / f"{name}_detail.txt").read_text()


def _detail_key(p: str) -> str:  # "99.9" -> "99.90", as LoadGen names its detail keys
    return f"{float(p):.2f}"


# -- logs the real LoadGen wrote, parsed to their figures ---------------------------------

def test_a_server_token_log_parses_to_its_ttft_tpot_rates_and_two_early_stopping_sections():
    s, detail = _logs("server")
    assert (s["scenario"], s["result"], s["failed_rules"], s["token_mode"], s["errors"]) == (
        "Server", "VALID", [], True, 0)
    assert set(s) == PLAIN_KEYS | TOKEN_KEYS
    assert s["ttft_percentiles_ns"] == {"50": 1170152, "90": 1265730, "95": 1329846,
                                        "97": 1452743, "99": 1886828, "99.9": 2079566}
    assert s["tpot_percentiles_ns"] == {"50": 958926, "90": 2015764, "95": 2063004,
                                        "97": 2085856, "99": 2296661, "99.9": 2973148}
    assert s["percentiles_ns"]["99"] == 3888173  # the E2E ones stay where they were
    f = s["figures"]
    assert (f["ttft_min_ns"], f["ttft_max_ns"], f["ttft_mean_ns"]) == (1012434, 2079566,
                                                                       1188547)
    assert (f["tpot_min_ns"], f["tpot_max_ns"], f["tpot_mean_ns"]) == (371629, 2973148,
                                                                       1093997)
    assert (f["completed_tokens_per_s"], f["completed_samples_per_s"]) == (6708.40, 1953.03)
    assert (f["ttft_latency_ns"], f["tpot_latency_ns"]) == (1e9, 1e9)
    assert "target_latency_ns" not in f  # token mode prints the two bounds instead
    # each bound's section apart; the plain section is absent from a token-mode log
    assert s["early_stopping_ttft_lines"] == s["early_stopping_tpot_lines"] == [
        "Run successful."]
    assert (s["early_stopping"], s["early_stopping_lines"]) == ({}, [])
    # the summary and the detail log say the same
    for p in PERCENTILES:
        assert s["ttft_percentiles_ns"][p] == detail_value(
            detail, f"result_first_token_{_detail_key(p)}_percentile_latency_ns")
        assert s["tpot_percentiles_ns"][p] == detail_value(
            detail, f"result_time_per_output_token_{_detail_key(p)}_percentile_ns")
    assert detail_value(detail, "result_completed_tokens_per_second") == 6708.4
    assert detail_value(detail, "early_stopping_ttft_result") == " * Run successful."
    assert detail_value(detail, "num_errors") == 0


def test_a_one_ns_tpot_bound_fails_performance_and_early_stopping_naming_tpot():
    s, detail = _logs("server_tpot_1ns")
    assert (s["result"], s["failed_rules"]) == ("INVALID",
                                                ["Performance constraints", "Early stopping"])
    assert s["recommendations"] == ["TPOT constrain not met: Reduce target QPS to improve "
                                    "latency."]
    assert s["figures"]["tpot_latency_ns"] == 1 and s["tpot_percentiles_ns"]["99"] == 2092799
    assert s["early_stopping_tpot_lines"][:2] == ["Run unsuccessful.", "Processed 500 queries."]
    # LoadGen judges TPOT first and stops there (a && b): the TTFT section is printed empty
    assert s["early_stopping_ttft_lines"] == []
    assert detail_value(detail, "result_validity") == "INVALID"
    assert detail_value(detail, "early_stopping_ttft_result") == ""


def test_an_offline_token_log_has_tokens_per_second_and_no_first_token():
    s, detail = _logs("offline")
    assert (s["scenario"], s["result"], s["token_mode"], s["errors"]) == ("Offline", "VALID",
                                                                          True, 0)
    assert (s["figures"]["tokens_per_s"], s["figures"]["samples_per_s"]) == (163494, 46913.6)
    assert s["ttft_percentiles_ns"] == s["tpot_percentiles_ns"] == {}  # no first token
    assert s["early_stopping_ttft_lines"] == s["early_stopping_tpot_lines"] == []
    assert "ttft_min_ns" not in s["figures"]
    assert detail_value(detail, "result_tokens_per_second") == 163494
    # LoadGen's arithmetic: both rates over the one query's latency, so their ratio is the
    # tokens per sample the SUT reported (697 over 200 samples in this capture)
    assert s["figures"]["tokens_per_s"] / s["figures"]["samples_per_s"] == pytest.approx(
        697 / 200, rel=1e-5)


def test_single_stream_s_first_token_line_never_becomes_its_judged_latency():
    s, detail = _logs("single_stream")
    f = s["figures"]
    # before token mode was read, the "90.0th first token percentile latency (ns)" line
    # matched the fallback and overwrote scenario_latency_ns with 1141006
    assert f["scenario_latency_ns"] == 3157984 == s["percentiles_ns"]["90"] == detail_value(
        detail, "result_90.00_percentile_latency_ns")
    assert f["scenario_first_token_latency_ns"] == 1141006 == s["ttft_percentiles_ns"]["90"]
    assert (f["tps_with_loadgen_overhead"], f["tps_without_loadgen_overhead"]) == (1104.97,
                                                                                   1108.99)
    assert (f["qps_with_loadgen_overhead"], f["qps_without_loadgen_overhead"]) == (312.55,
                                                                                   316.85)
    # each bound's early-stopping estimate apart
    assert (s["early_stopping_ttft"], s["early_stopping_tpot"]) == ({"90": 1250332},
                                                                    {"90": 2090344})
    assert s["early_stopping_ttft_lines"][0] == "Processed at least 64 queries (100)."


def test_errors_are_counted_but_leave_the_result_valid():
    # samples of 1 token (every 8th index): LoadGen logs "Number of tokens need to be
    # greater than 1" for each and still says VALID; their TPOT is garbage (a negative min)
    s, detail = _logs("server_one_token")
    assert (s["result"], s["errors"]) == ("VALID", 67)
    assert detail_value(detail, "num_errors") == 67
    assert detail_value(detail, "error_runtime") == "Number of tokens need to be greater than 1"
    assert s["figures"]["tpot_min_ns"] == -3039141


def test_a_log_without_token_mode_parses_as_before():
    s = parse_summary(SERVER_INVALID)  # the plain Server summary the store's tests seed
    assert set(s) == PLAIN_KEYS
    assert s["failed_rules"] == ["Performance constraints", "Min duration", "Early stopping"]
    assert s["early_stopping_lines"] == ["Run unsuccessful."]


# -- the real LoadGen, in token mode, against a model-free SUT ----------------------------

def _ordered(percentiles: dict) -> bool:
    values = [percentiles[p] for p in PERCENTILES]
    return list(percentiles) == PERCENTILES and values == sorted(values) and values[0] > 0


def test_the_real_server_under_loose_bounds_is_valid_with_ordered_ttft_and_tpot():
    run = run_token_test("server")  # 500 queries at 2,000 QPS, bounds 1 s
    s = parse_summary(run.summary)
    assert (s["result"], s["failed_rules"], s["token_mode"], s["errors"]) == (
        "VALID", [], True, 0)
    assert _ordered(s["ttft_percentiles_ns"]) and _ordered(s["tpot_percentiles_ns"])
    # every sample's first token came 1 ms before its last, so E2E > TTFT, rank by rank
    assert all(s["percentiles_ns"][p] > s["ttft_percentiles_ns"][p] for p in PERCENTILES)
    assert run.samples == detail_value(run.detail, "result_query_count") == 500
    # Server's rates share one denominator (the last completion): tokens over samples - 1
    f = s["figures"]
    assert f["completed_tokens_per_s"] / f["completed_samples_per_s"] == pytest.approx(
        run.tokens / (run.samples - 1), rel=1e-5)


def test_the_real_server_under_a_one_ns_tpot_bound_is_invalid_for_its_constraints():
    s = parse_summary(run_token_test("server", tpot_ns=1).summary)
    assert s["result"] == "INVALID"
    assert s["failed_rules"] == ["Performance constraints", "Early stopping"]
    assert s["recommendations"][0].startswith("TPOT constrain not met")
    assert s["early_stopping_tpot_lines"][0] == "Run unsuccessful."


def test_the_real_offline_reports_the_sut_s_tokens_over_its_query_s_latency():
    # one query of 200 samples; a 2 ms minimum under the SUT's 3 ms answer: VALID by design
    run = run_token_test("offline", min_queries=200, min_duration_ms=2)
    s = parse_summary(run.summary)
    assert (s["result"], s["errors"], s["ttft_percentiles_ns"]) == ("VALID", 0, {})
    assert run.samples == detail_value(run.detail, "generated_samples_per_query") == 200
    seconds = detail_value(run.detail, "result_max_latency_ns") / 1e9  # the query's end
    tokens_per_s = detail_value(run.detail, "result_tokens_per_second")
    assert tokens_per_s == pytest.approx(run.tokens / seconds, rel=1e-5)
    assert tokens_per_s == pytest.approx(s["figures"]["tokens_per_s"], rel=1e-5)
    assert detail_value(run.detail, "result_samples_per_second") == pytest.approx(
        200 / seconds, rel=1e-5)


def test_the_real_single_stream_keeps_its_judged_latency_apart_from_the_first_token():
    run = run_token_test("single-stream", min_queries=100)
    s = parse_summary(run.summary)
    f = s["figures"]
    assert s["result"] == "VALID" and run.samples == 100
    assert f["scenario_latency_ns"] == s["percentiles_ns"]["90"] == detail_value(
        run.detail, "result_90.00_percentile_latency_ns")
    assert f["scenario_first_token_latency_ns"] == s["ttft_percentiles_ns"]["90"]
    assert f["scenario_latency_ns"] > f["scenario_first_token_latency_ns"]


def test_the_real_loadgen_counts_one_token_samples_as_errors_only():
    ones: list[bool] = []

    def tokens(index: int) -> int:
        ones.append(index % 8 == 0)
        return 1 if ones[-1] else 3

    run = run_token_test("server", tokens=tokens)
    s = parse_summary(run.summary)
    assert sum(ones) > 0 and s["errors"] == detail_value(run.detail, "num_errors") == sum(ones)
    assert s["result"] == "VALID"  # LoadGen does not judge them: the caller must


def test_the_real_loadgen_without_token_mode_parses_to_the_plain_keys():
    run = run_token_test("single-stream", min_queries=100, token_mode=False)
    s = parse_summary(run.summary)
    assert set(s) == PLAIN_KEYS and s["result"] == "VALID"
    assert s["figures"]["scenario_latency_ns"] == s["percentiles_ns"]["90"]
    assert "ttft_latency_ns" not in s["figures"]
    assert s["figures"]["target_latency_ns"] == 0  # the plain line (no bound in SingleStream)
