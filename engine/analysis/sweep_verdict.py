"""A sweep's verdict, judged once: the one result the Compare page, the report and
`python -m engine compare` present (store.verdicts.sweep_verdicts reads a stored sweep
into it), so none of them can assemble it differently.

Method: the runs are aggregated per configuration over their rounds (compare.aggregate);
the rule is the one the sweep kept, else the default widened to the rounds measured
(compare.stored_rule); every contest is judged on its own paired rounds (compare.contests:
drift-adjusted figures, the best, Holm over its comparisons), and the same configuration +
round fit gives each contest's throughput figures; the two-way noise model (noise.py) and
shared versus dedicated (contention.py: slowdowns, verdict changes under the same rule,
the wait policy's effect) are fitted over the whole sweep. A page that shows some models
takes their rows (`results_for`, `contests_for`); what a row says never depends on which
others are shown.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.analysis.compare import (ConfigResult, Contest, aggregate, contests,
                                     stored_rule)
from engine.analysis.contention import (Slowdown, VerdictChange, slowdowns, verdict_changes,
                                        wait_policy_effects)
from engine.analysis.noise import NoiseModel, noise_model
from engine.analysis.sequential import VerdictRule
from engine.analysis.verdicts import figures_of

__all__ = ["SweepVerdict", "judge_sweep", "verdict_of"]


@dataclass(frozen=True)
class SweepVerdict:
    """Everything a sweep's comparison says, before it is worded."""

    results: tuple[ConfigResult, ...]  # every configuration, in the order its runs came
    rule: VerdictRule  # the rule every contest was judged by
    columns: tuple[str, ...]  # the contenders, in the order they first appear
    contests: tuple[Contest, ...]  # a row per (model, size, batch, threads, neighbour)
    # contest row -> contender -> drift-adjusted samples/s (the latency fit, on throughputs)
    throughputs: dict
    noise: NoiseModel | None  # None: no residual degree of freedom
    slowdowns: tuple[Slowdown, ...] = ()  # beside the neighbour against quiet, paired
    changes: tuple[VerdictChange, ...] = ()  # the decided winner quietly and beside it
    # (row, contender, condition, default ms, passive ms, paired Comparison)
    wait_effects: tuple[tuple, ...] = ()
    sweep_id: str | None = None
    runs: int = 0  # stored runs read, every status
    ok: int = 0  # of which succeeded
    models: tuple[str, ...] = ()  # the models the runs measured, sorted

    @property
    def rounds(self) -> int:
        """The most rounds any configuration got (0: none succeeded)."""
        return max((r.summary.rounds for r in self.results if r.summary), default=0)

    def results_for(self, models) -> tuple[ConfigResult, ...]:
        """The configurations of these models (all of them for None)."""
        return self.results if models is None else tuple(r for r in self.results
                                                         if r.model in models)

    def contests_for(self, models) -> tuple[Contest, ...]:
        """The contests of these models (all of them for None), judged as in the sweep."""
        return self.contests if models is None else tuple(c for c in self.contests
                                                          if c.row[0] in models)


def verdict_of(results, rule: VerdictRule | None = None, **facts) -> SweepVerdict:
    """Judge aggregated configurations (compare.aggregate) by `rule` (default_rule for
    the results when None). facts: sweep_id, runs, ok, models of the runs read."""
    results = tuple(results)
    rule = rule or stored_rule(None, results)
    columns, rows = contests(list(results), rule)
    for contest in rows:
        # Worded here once (the projection of an undecided gap is the costly part), so a
        # verdict cached by the dashboard carries its sentences.
        contest.sentences  # noqa: B018
    return SweepVerdict(
        results=results, rule=rule, columns=tuple(columns), contests=tuple(rows),
        throughputs={c.row: figures_of({name: r.throughputs for name, r in c.cells.items()
                                        if r.summary}) for c in rows},
        noise=noise_model(results), slowdowns=tuple(slowdowns(results)),
        changes=tuple(verdict_changes(list(results), rule)),
        wait_effects=tuple(wait_policy_effects(results)), **facts)


def judge_sweep(rows, kept: dict | None = None, *, rule: VerdictRule | None = None,
                sweep_id: str | None = None) -> SweepVerdict:
    """The verdict of a sweep's runs: rows are store.runs.sweep_rounds rows (or
    RunRecord.__dict__); kept: the rule the sweep stored (store.runs.sweep_rule), read by
    compare.stored_rule; rule: a rule to judge by instead (a sweep still running)."""
    rows = list(rows)
    results = aggregate(rows)
    return verdict_of(results, rule or stored_rule(kept, results), sweep_id=sweep_id,
                      runs=len(rows), ok=sum(r["status"] == "ok" for r in rows),
                      models=tuple(sorted({r["model"] for r in rows})))
