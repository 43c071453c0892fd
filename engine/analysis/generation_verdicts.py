"""A generation sweep's contests, one per metric: TTFT, TPOT and output tokens/s.

The same rule as every sweep's (engine/analysis/compare.py): each run's figure for the
metric is its round's value, rounds are the unit of replication, runtimes are compared
round by round on paired log ratios with the sequential interval, the margin and Holm
over a contest's comparisons, and an undecided gap says what max rounds would decide it.
Nothing is re-implemented: a run's metric is handed to compare.aggregate / contests as the
"median_ms" it judges (lower is better), a tokens/s figure as its reciprocal (ms per
token), so a ratio of those is the ratio of the throughputs.

A contest is one (model, prompt length, output length, batch, threads): its contenders are
the runtimes (and precisions) that ran it. What a contest reads is the kind's
(engine/scenarios/generation/contests.py), which the sweep driver reads too: the contests
its extra rounds decide are these. Framework-free: numpy and scipy only.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.analysis.compare import Contest, aggregate, contests, stored_rule
from engine.analysis.sequential import VerdictRule
from engine.scenarios.generation.contests import METRICS, Metric, contest_label, metric_rows

__all__ = ["Metric", "METRICS", "MetricContest", "judge_generation", "metric_rows"]


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


def judge_generation(runs, kept: dict | None = None, rule: VerdictRule | None = None
                     ) -> tuple[VerdictRule, list[MetricContest]]:
    """(the rule, every metric's contests) over a sweep's runs. kept: the rule the sweep
    stored (its minimum and max rounds and margin; none kept: the default widened to the
    rounds measured)."""
    runs = list(runs)
    shapes = {contest_label(r["model"], r.get("prompt_len"), r.get("output_len")):
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
