"""A generation sweep's contests, one per metric: TTFT, TPOT and output tokens/s.

The same rule as every sweep's (engine/analysis/compare.py): each run's figure for the
metric is its round's value, rounds are the unit of replication, runtimes are compared
round by round on paired log ratios with the sequential interval, the margin and Holm
over a contest's comparisons, and an undecided gap says what max rounds would decide it.
Nothing is re-implemented: a run's metric is handed to compare.aggregate / contests as the
"median_ms" it judges (lower is better), a tokens/s figure as its reciprocal (ms per
token), so a ratio of those is the ratio of the throughputs.

A contest is one (model, prompt length, output length, batch, threads): its contenders are
the runtimes (and precisions) that ran it. Framework-free: numpy and scipy only.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.analysis.compare import Contest, aggregate, contests, stored_rule
from engine.analysis.sequential import VerdictRule

__all__ = ["Metric", "METRICS", "MetricContest", "judge_generation", "metric_rows"]


@dataclass(frozen=True)
class Metric:
    key: str  # the column of generation_runs it is read from
    name: str  # as a sentence says it
    lower_is_better: bool
    unit: str


METRICS = (Metric("ttft_p50_ms", "TTFT", True, "ms"),
           Metric("tpot_p50_ms", "TPOT", True, "ms"),
           Metric("output_tok_s", "output tokens/s", False, "tokens/s"))


@dataclass(frozen=True)
class MetricContest:
    """One metric's contest for one configuration row."""

    metric: Metric
    model: str
    prompt_len: int
    output_len: int
    batch_size: int
    threads: int
    contest: Contest

    def value(self, contender: str) -> float | None:
        """The contender's drift-adjusted figure in the metric's own unit."""
        v = self.contest.figures.get(contender)
        if v is None:
            return None
        return v if self.metric.lower_is_better else 1000.0 / v


def _label(model: str, prompt_len, output_len) -> str:
    return f"{model} · prompt {prompt_len} · output {output_len}"


def metric_rows(runs, metric: Metric) -> list[dict]:
    """Stored generation runs (store.generation.generation_sweep rows) as compare.aggregate
    reads them: the metric as median_ms (lower is better), the row's prompt and output
    length in its model label. A run without the figure (failed, invalid) is a failure."""
    out = []
    for r in runs:
        v = r.get(metric.key)
        ok = r.get("status") == "ok" and v is not None and v == v and v > 0
        ms = (v if metric.lower_is_better else 1000.0 / v) if ok else None
        out.append({**r, "model": _label(r["model"], r.get("prompt_len"), r.get("output_len")),
                    "image_size": None, "median_ms": ms, "throughput": None,
                    "status": r.get("status") if ok or r.get("status") != "ok" else "invalid"})
    return out


def judge_generation(runs, kept: dict | None = None, rule: VerdictRule | None = None
                     ) -> tuple[VerdictRule, list[MetricContest]]:
    """(the rule, every metric's contests) over a sweep's runs. kept: the rule the sweep
    stored (none for a generation sweep: the default widened to the rounds measured)."""
    runs = list(runs)
    shapes = {_label(r["model"], r.get("prompt_len"), r.get("output_len")):
              (r["model"], r.get("prompt_len"), r.get("output_len")) for r in runs}
    out: list[MetricContest] = []
    used = rule
    for metric in METRICS:
        results = aggregate(metric_rows(runs, metric))
        used = used or stored_rule(kept, results)
        for c in contests(results, used)[1]:
            model, p, n = shapes[c.row[0]]
            out.append(MetricContest(metric, model, p, n, c.row[2], c.row[3], c))
    return used or stored_rule(kept, []), out
