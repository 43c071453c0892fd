"""Comparisons that survive machine drift: round aggregation, noise floor, significance.

A sweep runs in R rounds, each in fresh worker processes. On shared VMs two processes
running the same benchmark can differ by up to 40 % while samples inside one process agree
within about 5 %, so the process (the round), not the sample, is the unit of replication:
pooling samples across processes would make every difference look significant.

Method: per round r, each configuration's median latency m_r. A configuration's summary is
the median of its round medians, with the between-round spread (min-max). Two
configurations A and B are compared round by round (rounds are blocks: A and B of the same
round ran close in time), on log ratios d_r = ln(m_B,r / m_A,r); the speed-up of A over B
is exp(mean d) with a 95 % Student-t interval on mean d (R - 1 degrees of freedom). The
difference is significant when the interval excludes 1.
Pure Python but for scipy's t quantile, so the dashboard can use it without a framework.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

__all__ = ["RoundSummary", "Comparison", "ConfigResult", "Contest", "aggregate", "contests",
           "summarize_rounds",
           "compare_rounds", "noise_floor",
           "t975", "ROUND_SPREAD_NOISY"]

# Rounds of one configuration whose medians spread more than this (max-min over median)
# disagree beyond the ~5 % that rounds inside one process show here: flagged noisy.
ROUND_SPREAD_NOISY = 0.10

def t975(df: int) -> float:
    """The two-sided 95 % Student-t quantile (0.975) for df degrees of freedom, from scipy
    (scipy.special, not scipy.stats: a fifth of the import time). A hand table that fell back
    to the normal 1.96 beyond 30 degrees of freedom understated the interval there."""
    from scipy.special import stdtrit

    return float(stdtrit(df, 0.975))


@dataclass(frozen=True)
class RoundSummary:
    rounds: int
    round_medians: tuple[float, ...]
    median: float  # median of the round medians
    spread_min: float
    spread_max: float
    spread_ratio: float  # (max - min) / median: how far the rounds landed apart
    flag: str  # "valid" or "noisy"
    reason: str


def summarize_rounds(round_medians) -> RoundSummary:
    meds = tuple(float(m) for m in round_medians)
    if not meds:
        raise ValueError("no rounds to summarize")
    med = statistics.median(meds)
    lo, hi = min(meds), max(meds)
    ratio = (hi - lo) / med if med else 0.0
    if len(meds) > 1 and ratio > ROUND_SPREAD_NOISY:
        flag, why = "noisy", (f"rounds disagree: round medians span {ratio:.1%} of their "
                              f"median (threshold {ROUND_SPREAD_NOISY:.0%})")
    else:
        flag, why = "valid", ""
    return RoundSummary(len(meds), meds, med, lo, hi, ratio, flag, why)


@dataclass(frozen=True)
class Comparison:
    speedup: float  # how many times faster A is than B (B's latency / A's)
    ci_low: float
    ci_high: float
    rounds: int  # paired rounds used
    significant: bool

    def sentence(self, a: str, b: str) -> str:
        if self.rounds < 2:
            return (f"{a} vs {b}: {self.speedup:.2f}x from a single round; no interval "
                    "(run at least 2 rounds)")
        if not self.significant:
            return (f"no significant difference between {a} and {b} (ratio "
                    f"{self.speedup:.2f}x, 95 % CI {self.ci_low:.2f}-{self.ci_high:.2f})")
        if self.speedup >= 1:
            return (f"{a} is {self.speedup:.2f}x faster than {b} "
                    f"(95 % CI {self.ci_low:.2f}-{self.ci_high:.2f})")
        return (f"{b} is {1 / self.speedup:.2f}x faster than {a} "
                f"(95 % CI {1 / self.ci_high:.2f}-{1 / self.ci_low:.2f})")


def compare_rounds(a: dict[int, float], b: dict[int, float]) -> Comparison | None:
    """a, b: round number -> median latency. Only rounds both have are paired."""
    paired = sorted(set(a) & set(b))
    if not paired:
        return None
    d = [math.log(b[r] / a[r]) for r in paired]
    mean = statistics.fmean(d)
    if len(d) < 2:
        s = math.exp(mean)
        return Comparison(s, s, s, 1, False)
    half = t975(len(d) - 1) * statistics.stdev(d) / math.sqrt(len(d))
    lo, hi = math.exp(mean - half), math.exp(mean + half)
    return Comparison(math.exp(mean), lo, hi, len(d), not (lo <= 1.0 <= hi))


def noise_floor(summaries) -> tuple[float, float, int] | None:
    """(median, worst, count) of the between-round spread over configurations that ran at
    least two rounds: how far apart the same benchmark lands from process to process."""
    spreads = [s.spread_ratio for s in summaries if s.rounds >= 2]
    if not spreads:
        return None
    return statistics.median(spreads), max(spreads), len(spreads)


@dataclass(frozen=True)
class ConfigResult:
    """One configuration of a sweep, over its rounds."""

    model: str
    image_size: int | None
    batch_size: int | None
    threads: int | None
    contender: str  # "framework (runtime)": a column of the comparison
    round_medians: dict  # round number -> median latency (ms), ok runs only
    failed: tuple[str, ...]  # statuses of rounds that did not produce a usable median
    summary: RoundSummary | None
    noisy_rounds: int = 0  # rounds whose own IQR/median was above 10 %

    @property
    def row(self) -> tuple:
        return (self.model, self.image_size, self.batch_size, self.threads)


def aggregate(runs) -> list[ConfigResult]:
    """runs: mappings with model, framework, runtime, image_size, batch_size,
    intra_threads, round_no, status, median_ms, validity (store.runs.sweep_rounds rows, or
    RunRecord.__dict__). Runs with status ok count; the rest are listed as failed."""
    groups: dict = {}
    for r in runs:
        key = (r["model"], r["image_size"], r["batch_size"], r["intra_threads"],
               f"{r['framework']} ({r['runtime']})")
        groups.setdefault(key, []).append(r)
    out = []
    for (model, size, batch, threads, contender), rs in groups.items():
        ok = [r for r in rs if r["status"] == "ok" and r["median_ms"] is not None]
        meds = {(r["round_no"] or 1): r["median_ms"] for r in ok}
        failed = tuple(r["status"] for r in rs if r not in ok)
        summary = summarize_rounds(list(meds.values())) if meds else None
        noisy = sum(r.get("validity") == "noisy" for r in ok)
        out.append(ConfigResult(model, size, batch, threads, contender, meds, failed,
                                summary, noisy))
    return out


@dataclass(frozen=True)
class Contest:
    """One row of a comparison: the contenders for one (model, size, batch, threads)."""

    row: tuple
    cells: dict  # contender -> ConfigResult
    best: str | None  # lowest median of round medians, when two or more have one
    not_significant: frozenset  # contenders whose gap to the best is within the noise
    sentences: tuple[str, ...]  # "A is 1.31x faster than B (95 % CI ...)", per rival


def contests(results: list[ConfigResult]) -> tuple[list[str], list[Contest]]:
    """(contender columns, rows) with the best and the significance of each gap."""
    cols = list(dict.fromkeys(r.contender for r in results))
    rows: dict = {}
    for r in results:
        rows.setdefault(r.row, {})[r.contender] = r
    out = []
    for key, cells in rows.items():
        usable = {c: r for c, r in cells.items() if r.summary is not None}
        best = min(usable, key=lambda c: usable[c].summary.median) if len(usable) > 1 else None
        same, sentences = set(), []
        if best is not None:
            for c, r in usable.items():
                if c == best:
                    continue
                cmp = compare_rounds(usable[best].round_medians, r.round_medians)
                if cmp is None:
                    continue
                if cmp.rounds > 1 and not cmp.significant:
                    same.add(c)
                sentences.append(cmp.sentence(best, c))
        out.append(Contest(key, cells, best, frozenset(same), tuple(sentences)))
    return cols, out
