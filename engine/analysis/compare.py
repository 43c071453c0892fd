"""Comparisons that survive machine drift: round aggregation, paired decisions, noise.

A sweep runs in rounds, each in fresh worker processes. On shared VMs two processes running
the same benchmark can differ by up to 40 % while samples inside one process agree within
about 5 %, so the process (the round), not the sample, is the unit of replication: pooling
samples across processes would make every difference look significant.

Method: per round r, each configuration's median latency m_r. Every measured round counts,
noisy ones included (a noisy round is flagged, never dropped: dropping the disturbed
processes keeps the lucky ones). A configuration's own figure is the geometric mean of its
round medians, with the between-round spread (min-max). Two configurations A and B are
compared round by round (rounds are blocks: A and B of the same round ran close in time) on
log ratios d_r = ln(m_B,r / m_A,r): the speed-up of A over B is exp(mean d).

Decided contenders stop running while undecided ones get more rounds, so in a contest the
cells show and rank drift-adjusted figures (a configuration + round fit over the row,
engine/analysis/verdicts.py): with two contenders their ratio is exactly the sentence's
speed-up, and where every contender ran every round each is its geometric mean. The star
and the sentences name one best: each rival is compared with it.

Drift of the machine between rounds moves both contenders of a round alike and pairing
cancels it, so the noise a verdict must beat is what pairing leaves: each contest is judged
on its own paired log ratios (never on unrelated configurations), with a sequential
interval whose error rate holds over every look the sweep's budget allows
(engine/analysis/sequential.py), the k - 1 comparisons of a contest as one family (Holm:
5 % for the whole contest). It names a winner when the interval clears the practical
margin (default ±2 %), calls the pair equivalent when it lies inside it, and otherwise says
what max rounds would decide it with 80 % probability; a round that disagrees widens the
interval, it never ends the contest. For the page, a two-way model on log round medians
(configuration + round + residual, noise_model) splits the sweep's variation into the
machine's drift between rounds and the measurement noise pairing leaves.
numpy and scipy only, so the dashboard can use it without a framework.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from engine.analysis.noise import likely_cause
from engine.analysis.paired import NONE, PairedStats
from engine.analysis.sequential import (EQUIVALENT, UNDECIDED, WINNER, VerdictRule,
                                        comparison_of)
from engine.analysis.verdicts import judge
from engine.core.limits import DEFAULT_MAX_ROUNDS, DEFAULT_ROUNDS, DEFAULT_VERDICT_MARGIN

__all__ = ["RoundSummary", "ConfigResult", "Contest", "aggregate", "contests",
           "summarize_rounds", "undecided", "geomean", "default_rule", "stored_rule", "t975",
           "ROUND_SPREAD_NOISY"]

# Rounds of one configuration whose medians spread more than this (max-min over the centre)
# disagree beyond the ~5 % that rounds inside one process show here: flagged noisy.
ROUND_SPREAD_NOISY = 0.10


def t975(df: int) -> float:
    """The two-sided 95 % Student-t quantile (0.975) for df degrees of freedom, from scipy
    (scipy.special, not scipy.stats: a fifth of the import time). A hand table that fell back
    to the normal 1.96 beyond 30 degrees of freedom understated the interval there."""
    from scipy.special import stdtrit

    return float(stdtrit(df, 0.975))


def geomean(values) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values))


@dataclass(frozen=True)
class RoundSummary:
    rounds: int
    round_medians: tuple[float, ...]
    center: float  # geometric mean of the round medians (a contest ranks drift-adjusted ones)
    spread_min: float
    spread_max: float
    spread_ratio: float  # (max - min) / center: how far the rounds landed apart
    flag: str  # "valid" or "noisy"
    reason: str


def summarize_rounds(round_medians) -> RoundSummary:
    meds = tuple(float(m) for m in round_medians)
    if not meds:
        raise ValueError("no rounds to summarize")
    center = geomean(meds)
    lo, hi = min(meds), max(meds)
    ratio = (hi - lo) / center
    if len(meds) > 1 and ratio > ROUND_SPREAD_NOISY:
        flag, why = "noisy", (f"rounds disagree: round medians span {ratio:.1%} of their "
                              f"geometric mean (threshold {ROUND_SPREAD_NOISY:.0%})")
    else:
        flag, why = "valid", ""
    return RoundSummary(len(meds), meds, center, lo, hi, ratio, flag, why)


def contender_name(r: dict) -> str:
    """framework (runtime), with precision, device and inter-op threads where they are not
    the defaults: two of them never share a column."""
    name = f"{r['framework']} ({r['runtime']})"
    extra = [x for x in (r.get("precision") if r.get("precision") not in (None, "fp32")
                         else None,
                         r.get("device") if r.get("device") not in (None, "cpu") else None,
                         f"inter {r['inter_threads']}" if r.get("inter_threads") not in
                         (None, 1) else None) if x]
    replicas = r.get("replicas")
    if replicas and replicas > 1:  # R workers at once over one window (RunSpec.replicas)
        extra.append(f"x{replicas} replicas")
    replica = r.get("replica") or (r.get("extra") or {}).get("replica")
    if replica:  # an A/A test's second copy (RunSpec.replica)
        extra.append(f"#{replica + 1}")
    if r.get("wait_policy") == "passive":  # torch's OpenMP threads sleep at barriers
        extra.append("OMP passive")
    return name + (f" {' '.join(extra)}" if extra else "")


@dataclass(frozen=True)
class ConfigResult:
    """One configuration of a sweep, over its rounds."""

    model: str
    image_size: int | None
    batch_size: int | None
    threads: int | None
    contender: str  # "framework (runtime)": a column of the comparison
    round_medians: dict  # round number -> median latency (ms), every measured round
    failed: tuple[str, ...]  # statuses of rounds that broke a rule or did not finish
    summary: RoundSummary | None
    noisy_rounds: int = 0  # measured rounds flagged noisy (dispersion or tail)
    round_throughputs: dict = field(default_factory=dict)  # round -> samples/s
    # The contender as its spec names it (engine.run.jobs.sweep.config_key), before a machine or
    # model-file suffix: which configuration another round must run, on every machine.
    spec_contender: str = ""
    # round -> (steal, other processes' CPU) of that round's run, shares of its cores
    round_load: dict = field(default_factory=dict)
    # beside a controlled neighbour ("steady", "onoff") or not ("none"): a row of its own
    contention: str = "none"
    # torch's OpenMP wait policy ("passive") or the default (""): a contender of its own
    wait_policy: str = ""

    @property
    def steal(self) -> float | None:
        """The worst round's hypervisor steal, a share of its cores (None: not recorded)."""
        return _worst(v[0] for v in self.round_load.values())

    @property
    def others(self) -> float | None:
        """The worst round's other-process CPU, a share of its cores."""
        return _worst(v[1] for v in self.round_load.values())

    @property
    def throughputs(self) -> dict:
        """round -> samples/s: measured, or from the round median where none was stored."""
        return dict(self.round_throughputs) or {n: self.batch_size * 1000 / m
                                                for n, m in self.round_medians.items()}

    @property
    def row(self) -> tuple:
        """A contest: (model, image size, batch, threads, contention)."""
        return (self.model, self.image_size, self.batch_size, self.threads, self.contention)

    @property
    def key(self) -> tuple:
        return (*self.row, self.contender)


def _load(row, what: str) -> float | None:
    # A stored row carries it as a column; a RunRecord in its extra.
    return (row.get("interference") or (row.get("extra") or {}).get("interference")
            or {}).get(what)


def _worst(values) -> float | None:
    values = [v for v in values if v is not None]
    return max(values) if values else None


def aggregate(runs) -> list[ConfigResult]:
    """runs: mappings with model, framework, runtime, image_size, batch_size,
    intra_threads, round_no, status, median_ms, validity, and optionally throughput,
    precision, device, inter_threads and interference (store.runs.sweep_rounds rows, or
    RunRecord.__dict__). Runs with status ok count, noisy ones included; the rest (invalid:
    a rule broken; or a failure) are listed as failed."""
    runs = list(runs)
    # Runs of two machines (an imported sweep) are never averaged: each machine's runs are
    # a contender of their own, named by the machine.
    # A machine is its systems row and, where given, its catalog shape: the nodes of a
    # local test cluster share a host but stand for different shapes.
    machines = {(r.get("system_id"), r.get("machine_shape")) for r in runs}
    # Nor are two different files under one user-model name (a file replaced between
    # rounds): each file's runs are a contender of their own, named by its digest.
    digests: dict = {}
    for r in runs:
        if r.get("model_sha256"):
            digests.setdefault(r["model"], set()).add(r["model_sha256"])
    groups: dict = {}
    plain: dict = {}  # each group's contender as its spec names it
    for r in runs:
        name = base = contender_name(r)
        if len(machines) > 1:
            name += f" @{r.get('machine_shape') or str(r.get('system_id'))[:8]}"
        if len(digests.get(r["model"], ())) > 1:
            name += f" sha256:{str(r.get('model_sha256'))[:8]}"
        key = (r["model"], r["image_size"], r["batch_size"], r["intra_threads"],
               r.get("contention") or "none", name)
        groups.setdefault(key, []).append(r)
        plain[key] = (base, r.get("wait_policy") or "")  # the name holds the policy
    out = []
    for key, rs in groups.items():
        model, size, batch, threads, contention, contender = key
        base, policy = plain[key]
        ok = [r for r in rs if r["status"] == "ok" and r["median_ms"] is not None]
        meds = {(r["round_no"] or 1): r["median_ms"] for r in ok}
        tput = {(r["round_no"] or 1): r["throughput"] for r in ok if r.get("throughput")}
        load = {(r["round_no"] or 1): (_load(r, "steal_frac"), _load(r, "others_cpu_frac"))
                for r in ok}
        failed = tuple(r["status"] for r in rs if r not in ok)
        summary = summarize_rounds(list(meds.values())) if meds else None
        noisy = sum(r.get("validity") == "noisy" for r in ok)
        out.append(ConfigResult(model, size, batch, threads, contender, meds, failed,
                                summary, noisy, tput, spec_contender=base, round_load=load,
                                contention=contention, wait_policy=policy))
    return out


def default_rule(results) -> VerdictRule:
    """The rule for results whose sweep stored none (older sweeps): looks from the default
    minimum rounds to the default max_rounds, widened to the rounds actually measured."""
    measured = max((len(r.round_medians) for r in results), default=1)
    return VerdictRule.of(min(DEFAULT_ROUNDS, max(measured, 2)),
                          max(DEFAULT_MAX_ROUNDS, measured), DEFAULT_VERDICT_MARGIN)


def stored_rule(row: dict | None, results) -> VerdictRule:
    """The rule a stored sweep kept (store.runs.sweep_rule, or its store.provenance.sweep_info
    row), or default_rule for one that kept none."""
    if not row or row.get("min_rounds") is None:
        return default_rule(results)
    return VerdictRule.of(row["min_rounds"], row["max_rounds"], row["margin"], row["alpha"])


@dataclass(frozen=True)
class Contest:
    """One row of a comparison: the contenders for one (model, size, batch, threads,
    contention)."""

    row: tuple
    cells: dict  # contender -> ConfigResult
    best: str | None  # lowest drift-adjusted figure, when two or more have one
    comparisons: dict = field(default_factory=dict)  # rival -> Comparison with the best
    # contender -> drift-adjusted latency (ms): engine/analysis/verdicts.py; what the
    # cell shows and is ranked by (its geometric mean when every contender ran every round)
    figures: dict = field(default_factory=dict)
    # configurations another round could decide: the best and each rival whose gap is
    # neither decided nor futile (what the sweep driver runs again)
    more: frozenset = frozenset()

    @cached_property
    def sentences(self) -> tuple[str, ...]:
        """"A is 1.31x faster than B (95 % sequential ...)", per rival, with the likely
        cause of an undecided one (built on first use: an undecided sentence projects)."""
        out = []
        for rival, cmp in self.comparisons.items():
            text = cmp.sentence(self.best, rival)
            if cmp.state == UNDECIDED:
                text += f" ({likely_cause([self.cells[self.best], self.cells[rival]])})"
            out.append(text)
        return tuple(out)

    @property
    def balanced(self) -> bool:
        """Every contender with a round ran the same rounds: each figure is then exactly
        its geometric mean of round medians."""
        sets = {frozenset(r.round_medians) for r in self.cells.values() if r.summary}
        return len(sets) <= 1

    @property
    def decided(self) -> bool:
        """Every rival's gap to the best is decided (a row of one is not a contest)."""
        return bool(self.comparisons) and all(c.decided for c in self.comparisons.values())

    @property
    def undecided(self) -> frozenset:
        """Contenders whose gap to the best is not decided either way."""
        return frozenset(c for c, cmp in self.comparisons.items()
                         if cmp.state not in (WINNER, EQUIVALENT))

    @property
    def winner(self) -> str | None:
        """The best, when it beat every rival by more than the margin."""
        cmps = self.comparisons.values()
        return self.best if cmps and all(c.state == WINNER for c in cmps) else None

    @property
    def equivalent(self) -> frozenset:
        """Contenders equivalent to the best within the margin."""
        return frozenset(c for c, cmp in self.comparisons.items() if cmp.state == EQUIVALENT)


def _contest(key, cells: dict, rule: VerdictRule) -> Contest:
    """A row judged by engine/analysis/verdicts.py: figures, best, comparisons (Holm)."""
    usable = {c: r for c, r in cells.items() if r.summary is not None}
    names = list(usable)
    rounds = sorted({n for r in usable.values() for n in r.round_medians})
    y = np.full((1, len(names), len(rounds)), np.nan)
    for i, c in enumerate(names):
        for j, n in enumerate(rounds):
            if n in usable[c].round_medians:
                y[0, i, j] = math.log(usable[c].round_medians[n])
    if not names:
        return Contest(key, cells, None)
    got = judge(y, rounds, rule)
    figures = {c: math.exp(got.figure[0, i]) for i, c in enumerate(names)}
    b = int(got.best[0])
    if b < 0:
        return Contest(key, cells, None, figures=figures)
    comparisons = {}
    for i, c in enumerate(names):
        if got.state[0, i] == NONE:
            continue
        one = PairedStats(*(x[0, i] for x in (got.stats.n, got.stats.mean, got.stats.sd,
                                                got.stats.kept_mean, got.stats.kept_sd)))
        comparisons[c] = comparison_of(one, float(got.half[0, i]), got.state[0, i], rule,
                                       float(got.alpha[0, i]), bool(got.futile[0, i]),
                                       (int(got.step[0, i]), int(got.family[0])))
    more = frozenset(c for i, c in enumerate(names) if got.more[0, i])
    return Contest(key, cells, names[b], comparisons, figures, more)


def contests(results: list[ConfigResult], rule: VerdictRule | None = None
             ) -> tuple[list[str], list[Contest]]:
    """(contender columns, rows) with the best and the decision on each gap, each judged on
    its own paired rounds by `rule` (default_rule when None), the k - 1 comparisons of a
    row as one family (Holm)."""
    rule = rule or default_rule(results)
    cols = list(dict.fromkeys(r.contender for r in results))
    rows: dict = {}
    for r in results:
        rows.setdefault(r.row, {})[r.contender] = r
    return cols, [_contest(key, cells, rule) for key, cells in rows.items()]


def undecided(results: list[ConfigResult], rule: VerdictRule | None = None) -> set[tuple]:
    """Keys (ConfigResult.key) of the configurations in a contest another round could still
    decide: the row's best and each rival whose gap is neither decided nor futile."""
    return {(*contest.row, c) for contest in contests(results, rule)[1] for c in contest.more}
