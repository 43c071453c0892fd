"""Generation's own tables, declared as data: a run's derived figures (generation_runs, one
row a run, with its energy per 1 K output tokens when asked) and its raw readings
(generation_tokens, one row a reading).

generation_tokens keeps what the figures were derived from: per timed call (rep, from 0),
per step, the ns since the call's start at which that step's tokens were seen ("token"); a
one-call runtime, which has no per-token readings, keeps its separately measured TTFT as
step 0 ("ttft_call"). The call's E2E is the run's sample (runs.samples_ns, one per rep).
"""

from __future__ import annotations

from engine.core.energy import EnergyReading
from engine.scenarios.generation.messages import GenResult, calls_of
from engine.scenarios.generation.metrics import PERCENTILES, rep_figures, run_figures
from engine.scenarios.tables import Column, KindTable

__all__ = ["GENERATION_RUNS", "GENERATION_TOKENS", "TABLES", "kind_rows", "reps_of",
           "energy_columns", "TOKEN", "TTFT_CALL"]

TOKEN, TTFT_CALL = "token", "ttft_call"
_PCT = tuple(Column(f"{m}_p{p}_ms", "DOUBLE") for m in ("ttft", "tpot", "itl", "e2e")
             for p in PERCENTILES)

# The energy loop's reading (engine.core.energy.EnergyReading): joules per 1 K output
# tokens and the counter it came from, or only why there is none; all NULL when not asked
_ENERGY = (Column("energy_source", "VARCHAR"), Column("energy_absent", "VARCHAR"),
           Column("energy_j_per_1k_tokens", "DOUBLE"), Column("energy_loop_s", "DOUBLE"),
           Column("energy_tokens", "BIGINT"), Column("energy_counters", "VARCHAR"))

GENERATION_RUNS = KindTable("generation_runs", (
    Column("run_id", "VARCHAR"), Column("prompt_len", "INTEGER", not_null=True),
    Column("output_len", "INTEGER", not_null=True), Column("reps", "INTEGER", not_null=True),
    *_PCT, Column("prefill_tok_s", "DOUBLE"), Column("decode_tok_s", "DOUBLE"),
    Column("output_tok_s", "DOUBLE"), Column("kv_cache_bytes", "BIGINT"),
    Column("agreement", "DOUBLE"), Column("agreement_tokens", "INTEGER"),
    Column("agreement_reference", "VARCHAR"), Column("build_s", "DOUBLE"),
    Column("timing_source", "VARCHAR"), Column("per_token", "BOOLEAN"),
    *_ENERGY))

GENERATION_TOKENS = KindTable("generation_tokens", (
    Column("run_id", "VARCHAR"), Column("rep", "INTEGER", not_null=True),
    Column("step", "INTEGER", not_null=True), Column("t_ns", "BIGINT", not_null=True),
    Column("reading", "VARCHAR", not_null=True)), key=("run_id", "rep", "step"))

TABLES = (GENERATION_RUNS, GENERATION_TOKENS)


def reps_of(res: GenResult) -> list:
    """Each timed call's figures (engine.scenarios.generation.metrics.rep_figures)."""
    ttfts = list(res.ttft_ns) or [None] * len(res.samples_ns)
    tokens = calls_of(res)
    return [rep_figures(t, e2e, batch=res.batch_size, prompt_len=res.prompt_len,
                        output_len=res.output_len, ttft_ns=ttft)
            for t, e2e, ttft in zip(tokens, res.samples_ns, ttfts)]


def energy_columns(energy: dict | None) -> dict:
    """generation_runs' energy columns from a result's reading (per output token): joules
    per 1 K output tokens where a counter gave one, the reason where none did."""
    if energy is None:
        return {}
    e = EnergyReading.from_dict(energy)
    return {"energy_source": e.source, "energy_absent": e.absent,
            "energy_j_per_1k_tokens": (1000 * e.j_per_sample
                                       if e.j_per_sample is not None else None),
            "energy_loop_s": e.loop_s, "energy_tokens": e.samples,
            "energy_counters": ", ".join(e.counters) or None}


def kind_rows(res: GenResult) -> dict[str, list[dict]]:
    """The rows a successful run adds: its figures, and every reading it took."""
    per_token = bool(res.token_ns)
    run = {"run_id": res.run_id, "prompt_len": res.prompt_len, "output_len": res.output_len,
           "reps": len(res.samples_ns), **run_figures(reps_of(res)),
           "kv_cache_bytes": res.kv_cache_bytes, "agreement": res.agreement,
           "agreement_tokens": res.agreement_tokens,
           "agreement_reference": res.agreement_reference, "build_s": res.build_s,
           "timing_source": res.timing_source, "per_token": per_token,
           **energy_columns(res.energy)}
    if per_token:
        tokens = [{"run_id": res.run_id, "rep": rep, "step": step, "t_ns": int(t),
                   "reading": TOKEN}
                  for rep, ts in enumerate(calls_of(res)) for step, t in enumerate(ts)]
    else:
        tokens = [{"run_id": res.run_id, "rep": rep, "step": 0, "t_ns": int(t),
                   "reading": TTFT_CALL} for rep, t in enumerate(res.ttft_ns)]
    return {GENERATION_RUNS.name: [run], GENERATION_TOKENS.name: tokens}
