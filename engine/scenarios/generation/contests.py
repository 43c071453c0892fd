"""What a generation contest judges, as the shared comparison reads it: the metrics (TTFT,
TPOT, output tokens/s), the configuration label that keeps prompt and output lengths apart,
and a run's figure for one metric as the "median_ms" compare.aggregate judges.

engine/analysis/compare.py groups runs by (model, image size, batch, threads, contention)
and names contenders by framework, runtime, precision and inter-op threads. A generation run
has no image size, and two prompt lengths of one model would share a row; so the model
field carries the label "model · prompt P · output N", and every contest is one (model,
prompt length, output length, batch, threads), its contenders the runtimes and precisions
that ran it. The sweep driver (its rounds until decided, through the Scenario's
contest_fields and contest_rows) and the stored sweep's verdicts
(engine/analysis/generation_verdicts.py) read runs through the same two functions here, so
the contest that extends a sweep is the contest its verdict states.

Framework-free; it may not import engine/analysis (which reads the kinds).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.scenarios.generation.table import GENERATION_RUNS

__all__ = ["Metric", "METRICS", "contest_label", "metric_rows", "record_row"]


@dataclass(frozen=True)
class Metric:
    key: str  # the column of generation_runs it is read from
    name: str  # as a sentence says it
    lower_is_better: bool
    unit: str


METRICS = (Metric("ttft_p50_ms", "TTFT", True, "ms"),
           Metric("tpot_p50_ms", "TPOT", True, "ms"),
           Metric("output_tok_s", "output tokens/s", False, "tokens/s"))


def contest_label(model: str, prompt_len, output_len) -> str:
    """The model field of a generation contest: its prompt and output lengths are part of
    the configuration, so no contest mixes two of them."""
    return f"{model} · prompt {prompt_len} · output {output_len}"


def record_row(rec) -> dict:
    """A RunRecord of this kind as a stored generation run reads (store.generation's
    generation_runs rows): its prompt and output length from what it was asked, its
    figures from the generation_runs row it carries (none: it measured nothing)."""
    extra = rec.extra or {}
    rows = (rec.kind_rows or {}).get(GENERATION_RUNS.name) or [{}]
    return {**vars(rec), "prompt_len": extra.get("prompt_len"),
            "output_len": extra.get("output_len"),
            **{m.key: rows[0].get(m.key) for m in METRICS}}


def metric_rows(runs, metric: Metric) -> list[dict]:
    """Generation runs (store.generation.generation_runs rows, or record_row's) as
    compare.aggregate reads them: the metric as median_ms (lower is better; a tokens/s
    figure as its reciprocal, ms per 1000 tokens, so a ratio of those is the ratio of the
    throughputs), the row's prompt and output length in its model label. A run without the
    figure (failed, invalid) is a failure."""
    out = []
    for r in runs:
        v = r.get(metric.key)
        ok = r.get("status") == "ok" and v is not None and v == v and v > 0
        ms = (v if metric.lower_is_better else 1000.0 / v) if ok else None
        out.append({**r, "model": contest_label(r["model"], r.get("prompt_len"),
                                                r.get("output_len")),
                    "image_size": None, "median_ms": ms, "throughput": None,
                    "status": r.get("status") if ok or r.get("status") != "ok" else "invalid"})
    return out
