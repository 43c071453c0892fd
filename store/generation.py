"""Named queries for generation runs (issue 37): a sweep's runs with their figures, the
stored generation sweeps, one run's per-token timeline, and a sweep's per-metric contests
(judged by engine/analysis/generation_verdicts.py). The kind is a bound parameter, like
every value here; the tables are generation's own (engine/scenarios/generation/table.py).
"""

from __future__ import annotations

import pandas as pd

from engine.analysis.generation_verdicts import MetricContest, judge_generation
from engine.analysis.sequential import VerdictRule
from engine.scenarios import GENERATION
from store.runs import sweep_rule

__all__ = ["generation_runs", "generation_sweeps", "newest_generation_sweep",
           "token_timeline", "generation_contests"]

_FIGURES = ("g.reps, g.ttft_p50_ms, g.ttft_p90_ms, g.ttft_p99_ms, g.tpot_p50_ms, "
            "g.tpot_p90_ms, g.tpot_p99_ms, g.itl_p50_ms, g.itl_p90_ms, g.itl_p99_ms, "
            "g.e2e_p50_ms, g.e2e_p90_ms, g.e2e_p99_ms, g.prefill_tok_s, g.decode_tok_s, "
            "g.output_tok_s, g.kv_cache_bytes, g.agreement, g.agreement_tokens, "
            "g.agreement_reference, g.build_s, g.timing_source, g.per_token, g.energy_source, "
            "g.energy_absent, g.energy_j_per_1k_tokens, g.energy_loop_s, g.energy_tokens, "
            "g.energy_counters")


def generation_runs(con, sweep_id: str | None = None) -> pd.DataFrame:
    """Generation runs (of one sweep, or all), in the order they ran: the configuration
    (prompt and output length from what the run was asked, so a failed run has them too),
    status and reason, the run's figures (NULL where it measured nothing) and its memory."""
    return con.execute(
        "SELECT r.run_id, r.sweep_id, r.round_no, r.started_at, r.model, r.framework, "
        "r.runtime, r.precision, r.device, r.batch_size, r.intra_threads, r.inter_threads, "
        "r.system_id, r.machine_shape, "
        "(r.extra->>'prompt_len')::INTEGER AS prompt_len, "
        "(r.extra->>'output_len')::INTEGER AS output_len, "
        "(r.extra->>'seed')::BIGINT AS seed, r.status, coalesce(r.reason, '') AS reason, "
        "r.validity, r.throughput, r.median_ms, r.peak_rss_bytes, r.model_peak_bytes, "
        "r.load_s, r.first_forward_s, " + _FIGURES + " "
        "FROM runs r LEFT JOIN generation_runs g USING (run_id) "
        "WHERE r.kind = ? AND (?::VARCHAR IS NULL OR r.sweep_id = ?) "
        "ORDER BY r.round_no NULLS LAST, r.started_at, r.run_id",
        [GENERATION.kind, sweep_id, sweep_id]).df()


def generation_sweeps(con) -> pd.DataFrame:
    """Sweeps holding generation runs, newest first, with their run counts."""
    return con.execute(
        "SELECT s.sweep_id, s.created_at, s.rounds, s.command, count(r.run_id) AS runs, "
        "count(r.run_id) FILTER (WHERE r.status = 'ok') AS ok "
        "FROM sweeps s JOIN runs r USING (sweep_id) WHERE r.kind = ? "
        "GROUP BY s.sweep_id, s.created_at, s.rounds, s.command "
        "ORDER BY s.created_at DESC, s.sweep_id", [GENERATION.kind]).df()


def newest_generation_sweep(con) -> str | None:
    df = generation_sweeps(con)
    return None if df.empty else str(df["sweep_id"].iloc[0])


def token_timeline(con, run_id: str) -> pd.DataFrame:
    """One run's raw readings: per timed call (rep) and step, ns since the call's start and
    the gap since the step before (NULL for a call's first reading, which is its TTFT);
    reading is "token" or, for a one-call runtime, "ttft_call" (its separate call)."""
    return con.execute(
        "SELECT rep, step, t_ns, t_ns - lag(t_ns) OVER (PARTITION BY rep ORDER BY step) "
        "AS gap_ns, reading FROM generation_tokens WHERE run_id = ? ORDER BY rep, step",
        [run_id]).df()


def generation_contests(con, sweep_id: str) -> tuple[VerdictRule, list[MetricContest]]:
    """The sweep's contests per metric (TTFT, TPOT, output tokens/s), judged under the rule
    it kept or the default widened to its rounds."""
    runs = generation_runs(con, sweep_id).to_dict("records")
    return judge_generation(runs, sweep_rule(con, sweep_id))
