"""Comparisons that survive machine drift: round aggregation, noise floor, decisions.

A sweep runs in rounds, each in fresh worker processes. On shared VMs two processes running
the same benchmark can differ by up to 40 % while samples inside one process agree within
about 5 %, so the process (the round), not the sample, is the unit of replication: pooling
samples across processes would make every difference look significant.

Method: per round r, each configuration's median latency m_r. Every measured round counts,
noisy ones included (a noisy round is flagged, never dropped: dropping the disturbed
processes keeps the lucky ones). A configuration's figure is the geometric mean of its
round medians, with the between-round spread (min-max). Two configurations A and B are
compared round by round (rounds are blocks: A and B of the same round ran close in time) on
log ratios d_r = ln(m_B,r / m_A,r): the speed-up of A over B is exp(mean d), with a 95 %
Student-t interval on mean d (R - 1 degrees of freedom). The star and the sentence use the
same statistic: with every round paired, the speed-up is exactly the ratio of the two
cells' geometric means.

A contest is decided when its interval excludes 1, no round favours the loser by more than
the noise floor, and the speed-up itself exceeds the noise floor: a difference smaller than
the spread the same benchmark shows from process to process is no decision, however narrow
its interval (the interval is re-tested after every extra round, and a true tie would
otherwise be "decided" by chance in about one sweep in ten). An undecided contest gets more
rounds (engine/run/sweep.py) up to the user's budget; when that runs out it reads "no
decision within the noise (±x %)".
Pure Python but for scipy's t quantile, so the dashboard can use it without a framework.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

__all__ = ["RoundSummary", "Comparison", "ConfigResult", "Contest", "aggregate", "contests",
           "summarize_rounds", "compare_rounds", "noise_floor", "undecided", "geomean",
           "likely_cause", "t975", "ROUND_SPREAD_NOISY", "STEAL_NOTABLE", "OTHERS_NOTABLE"]

# Rounds of one configuration whose medians spread more than this (max-min over the centre)
# disagree beyond the ~5 % that rounds inside one process show here: flagged noisy.
ROUND_SPREAD_NOISY = 0.10
# Interference worth naming as a noisy verdict's likely cause: shares of the worker's cores.
STEAL_NOTABLE = 0.02
OTHERS_NOTABLE = 0.05


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
    center: float  # geometric mean of the round medians: what the cell shows and is ranked by
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


@dataclass(frozen=True)
class Comparison:
    speedup: float  # how many times faster A is than B (B's latency / A's)
    ci_low: float
    ci_high: float
    rounds: int  # paired rounds used
    significant: bool  # the interval excludes 1
    disagree: bool = False  # a round favours the other side by more than the noise floor
    floor: float | None = None  # the noise floor it was judged against (a fraction)

    @property
    def within_floor(self) -> bool:
        """The speed-up, either way, is no larger than the noise floor."""
        return (self.floor is not None
                and abs(math.log(self.speedup)) <= math.log1p(self.floor))

    @property
    def decided(self) -> bool:
        return (self.rounds >= 2 and self.significant and not self.disagree
                and not self.within_floor)

    @property
    def noise_pct(self) -> float:
        """How far either way the noise reaches from 'equal', in percent: the interval's
        reach as a factor (the same whichever side is named first), or the noise floor
        where that is wider."""
        reach = max(self.ci_high - 1, 1 / self.ci_low - 1) if self.ci_low > 0 else math.inf
        return 100 * max(reach, self.floor or 0.0, 0.0)

    def sentence(self, a: str, b: str) -> str:
        n = f"{self.rounds} rounds"
        if self.rounds < 2:
            return (f"{a} vs {b}: {self.speedup:.2f}x from a single round; no interval "
                    "(run at least 2 rounds)")
        if not self.decided:
            why = "; a round disagrees beyond the noise floor" if self.disagree else ""
            if self.within_floor and self.significant:
                why += (f"; the difference is within the noise floor "
                        f"({100 * self.floor:.0f} %)")
            if self.rounds == 2:  # Student-t with 1 degree of freedom: 12.7 x the error
                why += "; 2 rounds give a very wide interval: 3 or more narrow it"
            # Name the side the measurement leans to, so "1.09x" is never read backwards.
            fast, slow, x, lo, hi = ((a, b, self.speedup, self.ci_low, self.ci_high)
                                     if self.speedup >= 1 else
                                     (b, a, 1 / self.speedup, 1 / self.ci_high,
                                      1 / self.ci_low))
            return (f"no decision within the noise (±{self.noise_pct:.0f} %) between {a} and "
                    f"{b}: {fast} measured {x:.2f}x faster than {slow}, 95 % CI {lo:.2f}-"
                    f"{hi:.2f} over {n}{why}")
        if self.speedup >= 1:
            return (f"{a} is {self.speedup:.2f}x faster than {b} "
                    f"(95 % CI {self.ci_low:.2f}-{self.ci_high:.2f}, {n})")
        return (f"{b} is {1 / self.speedup:.2f}x faster than {a} "
                f"(95 % CI {1 / self.ci_high:.2f}-{1 / self.ci_low:.2f}, {n})")


def compare_rounds(a: dict[int, float], b: dict[int, float],
                   floor: float | None = None) -> Comparison | None:
    """a, b: round number -> median latency. Only rounds both have are paired. floor: the
    noise floor (a fraction); a round whose ratio points the other way by more than it
    leaves the contest undecided even when the interval excludes 1, and so does a speed-up
    no larger than the floor."""
    paired = sorted(set(a) & set(b))
    if not paired:
        return None
    d = [math.log(b[r] / a[r]) for r in paired]
    mean = statistics.fmean(d)
    if len(d) < 2:
        s = math.exp(mean)
        return Comparison(s, s, s, 1, False, floor=floor)
    half = t975(len(d) - 1) * statistics.stdev(d) / math.sqrt(len(d))
    lo, hi = math.exp(mean - half), math.exp(mean + half)
    disagree = floor is not None and any(
        x * mean < 0 and abs(x) > math.log1p(floor) for x in d)
    return Comparison(math.exp(mean), lo, hi, len(d), not (lo <= 1.0 <= hi), disagree,
                      floor)


def noise_floor(summaries) -> tuple[float, float, int] | None:
    """(median, worst, count) of the between-round spread over configurations that ran at
    least two rounds: how far apart the same benchmark lands from process to process. Every
    measured round counts, noisy ones included."""
    spreads = [s.spread_ratio for s in summaries if s.rounds >= 2]
    if not spreads:
        return None
    return statistics.median(spreads), max(spreads), len(spreads)


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
    steal: float | None = None  # the worst round's hypervisor steal, share of its cores
    others: float | None = None  # the worst round's other-process CPU, share of its cores
    # The contender as its spec names it (engine.run.sweep.config_key), before a machine or
    # model-file suffix: which configuration another round must run, on every machine.
    spec_contender: str = ""

    @property
    def row(self) -> tuple:
        return (self.model, self.image_size, self.batch_size, self.threads)

    @property
    def key(self) -> tuple:
        return (*self.row, self.contender)


def _interference(rows, what: str) -> float | None:
    # A stored row carries it as a column; a RunRecord in its extra.
    values = [(r.get("interference") or (r.get("extra") or {}).get("interference") or {})
              .get(what) for r in rows]
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
        key = (r["model"], r["image_size"], r["batch_size"], r["intra_threads"], name)
        groups.setdefault(key, []).append(r)
        plain[key] = base
    out = []
    for (model, size, batch, threads, contender), rs in groups.items():
        ok = [r for r in rs if r["status"] == "ok" and r["median_ms"] is not None]
        meds = {(r["round_no"] or 1): r["median_ms"] for r in ok}
        tput = {(r["round_no"] or 1): r["throughput"] for r in ok if r.get("throughput")}
        failed = tuple(r["status"] for r in rs if r not in ok)
        summary = summarize_rounds(list(meds.values())) if meds else None
        noisy = sum(r.get("validity") == "noisy" for r in ok)
        out.append(ConfigResult(model, size, batch, threads, contender, meds, failed,
                                summary, noisy, tput, _interference(ok, "steal_frac"),
                                _interference(ok, "others_cpu_frac"),
                                plain[(model, size, batch, threads, contender)]))
    return out


def likely_cause(results) -> str:
    """Names what most likely made these configurations' rounds disagree, from what was
    recorded while they ran (steal, other processes), or says nothing was recorded."""
    steal = max((r.steal for r in results if r.steal is not None), default=None)
    others = max((r.others for r in results if r.others is not None), default=None)
    causes = []
    if steal is not None and steal >= STEAL_NOTABLE:
        causes.append(f"steal took {steal:.0%} of a run")
    if others is not None and others >= OTHERS_NOTABLE:
        causes.append(f"other processes took {others:.0%} of a run's cores")
    if causes:
        return "likely cause: " + " and ".join(causes)
    if steal is None and others is None:
        return "no interference was recorded for these runs"
    return ("no steal or other-process load above "
            f"{STEAL_NOTABLE:.0%}/{OTHERS_NOTABLE:.0%} was measured: the spread is between "
            "the processes themselves")


@dataclass(frozen=True)
class Contest:
    """One row of a comparison: the contenders for one (model, size, batch, threads)."""

    row: tuple
    cells: dict  # contender -> ConfigResult
    best: str | None  # lowest geometric mean of round medians, when two or more have one
    not_significant: frozenset  # contenders whose gap to the best is not decided
    sentences: tuple[str, ...]  # "A is 1.31x faster than B (95 % CI ...)", per rival
    comparisons: dict = field(default_factory=dict)  # rival -> Comparison with the best

    @property
    def decided(self) -> bool:
        """Every rival's gap to the best is decided (a row of one is not a contest)."""
        return bool(self.comparisons) and all(c.decided for c in self.comparisons.values())


def contests(results: list[ConfigResult]) -> tuple[list[str], list[Contest]]:
    """(contender columns, rows) with the best and the decision on each gap."""
    cols = list(dict.fromkeys(r.contender for r in results))
    floor = noise_floor([r.summary for r in results if r.summary])
    rows: dict = {}
    for r in results:
        rows.setdefault(r.row, {})[r.contender] = r
    out = []
    for key, cells in rows.items():
        usable = {c: r for c, r in cells.items() if r.summary is not None}
        best = min(usable, key=lambda c: usable[c].summary.center) if len(usable) > 1 else None
        same, sentences, comparisons = set(), [], {}
        if best is not None:
            for c, r in usable.items():
                if c == best:
                    continue
                cmp = compare_rounds(usable[best].round_medians, r.round_medians,
                                     floor[0] if floor else None)
                if cmp is None:
                    continue
                comparisons[c] = cmp
                text = cmp.sentence(best, c)
                if cmp.rounds > 1 and not cmp.decided:
                    same.add(c)
                    text += f" ({likely_cause([usable[best], r])})"
                sentences.append(text)
        out.append(Contest(key, cells, best, frozenset(same), tuple(sentences), comparisons))
    return cols, out


def undecided(results: list[ConfigResult]) -> set[tuple]:
    """Keys (ConfigResult.key) of the configurations in a contest not yet decided: the row's
    best and each rival whose gap is undecided. What another round should measure."""
    keys: set = set()
    for contest in contests(results)[1]:
        for rival, cmp in contest.comparisons.items():
            if not cmp.decided:
                keys.add((*contest.row, contest.best))
                keys.add((*contest.row, rival))
    return keys
