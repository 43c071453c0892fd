"""The regression gate for generation sweeps (issue 37): a candidate set of generation runs
against a baseline on one metric (TPOT, TTFT or output tokens/s), with engine/analysis/
regress.py's compare_sets unchanged: the same threshold, the same sweep-to-sweep evidence,
the same family-wise step-down over configurations, the same "not comparable" rules.

A run's metric is handed to it as the latency figure it judges, as the contests do
(generation_verdicts.metric_rows): TTFT and TPOT in ms, output tokens/s as ms per token
(1000 / tokens/s), so a ratio above 1 is slower in every metric and a "regression" means
worse. A configuration's prompt and output length are in its model label, so two lengths
are never one configuration. No framework import.
"""

from __future__ import annotations

from engine.analysis.generation_verdicts import METRICS, Metric, metric_rows
from engine.analysis.regress import DEFAULT_THRESHOLD, SetComparison, compare_sets
from engine.core.errors import UserError

__all__ = ["GATE_METRICS", "gate_metric", "compare_generation_sets"]

# --metric's names: the metric's generation_runs column without its unit
GATE_METRICS = {"ttft": METRICS[0], "tpot": METRICS[1], "output_tok_s": METRICS[2]}


def gate_metric(name: str) -> Metric:
    if name not in GATE_METRICS:
        raise UserError(f"metric: {name!r} is not a generation metric; allowed: "
                        f"{', '.join(GATE_METRICS)}", field="metric")
    return GATE_METRICS[name]


def compare_generation_sets(baseline_runs, candidate_runs, metric: Metric,
                            threshold: float = DEFAULT_THRESHOLD, *,
                            fail_above: float | None = None, baseline: str = "baseline",
                            candidate: str = "candidate") -> SetComparison:
    """Every generation configuration of either set with its verdict on `metric`. Runs:
    store.generation.generation_runs records (with sweep_id, system_id, machine_shape)."""
    return compare_sets(metric_rows(baseline_runs, metric), metric_rows(candidate_runs, metric),
                        threshold, fail_above=fail_above, baseline=baseline,
                        candidate=candidate)
