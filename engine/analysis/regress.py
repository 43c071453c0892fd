"""Regressions: a candidate result set against a baseline, configuration by configuration.

A configuration is everything that changes what is measured (model, framework, runtime,
batch, threads, image size, precision, device, inter-op threads, and an A/A copy's number).
Its figure in a set is the geometric mean of its round medians (compare.aggregate: every
measured round counts), and the change is the latency ratio candidate / baseline.

Rounds are the unit of replication, as in engine/analysis/compare.py. Rounds of one sweep
ran interleaved, so a configuration compared with itself inside one sweep is paired round by
round (compare_rounds); rounds of different sweeps ran hours or commits apart, and pairing
"round 1" with "round 1" would mean nothing, so two sweeps are compared with Welch's
interval on the log round medians. Either way the interval is 95 % Student-t (t975).

Verdicts, with asv's threshold (10 % by default, symmetric in log: 1.10x slower or 1/1.10
faster):
- within the threshold: `no change`;
- beyond it: `regression` or `improvement` only when the whole interval clears the
  threshold and the ratio exceeds the noise floor (how far rounds of one configuration land
  apart, compare.noise_floor) and, when paired, no round points the other way by more than
  that floor; otherwise `no change`, flagged undecided with the reason;
- a single round on either side has no interval: the threshold alone decides, and the note
  says so;
- `not comparable`: missing on one side, no successful round on one side, another machine,
  or another measurement policy (warm-up, min_time, min_iters), since each moves the figure
  by itself.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from engine.analysis.compare import (ConfigResult, aggregate, compare_rounds, contender_name,
                                     geomean, noise_floor, t975)
from engine.spec.limits import THRESHOLD_RANGE, float_range
from engine.spec.catalog import model_label

__all__ = ["Config", "Decision", "Change", "SetComparison", "HistoryPoint", "decide",
           "compare_sets", "history_points", "policy_text", "DEFAULT_THRESHOLD", "VERDICTS",
           "REGRESSION", "IMPROVEMENT", "NO_CHANGE", "NOT_COMPARABLE", "PAIRED", "WELCH",
           "THRESHOLD_ONLY"]

DEFAULT_THRESHOLD = 0.10  # asv's default factor of 1.1
REGRESSION, IMPROVEMENT, NO_CHANGE, NOT_COMPARABLE = (
    "regression", "improvement", "no change", "not comparable")
VERDICTS = (REGRESSION, IMPROVEMENT, NO_CHANGE, NOT_COMPARABLE)
PAIRED, WELCH, THRESHOLD_ONLY = "paired rounds", "Welch", "threshold only"
# What makes two runs measure the same thing differently: not comparable across sets.
POLICY_FIELDS = ("warmup_iters", "min_time_s", "min_iters")


@dataclass(frozen=True)
class Config:
    model: str
    framework: str
    runtime: str
    batch_size: int | None
    threads: int | None
    image_size: int | None
    precision: str | None
    device: str | None
    inter_threads: int | None
    replica: int | None = None  # an A/A test's second copy is a configuration of its own

    @classmethod
    def of(cls, row: dict) -> "Config":
        return cls(row["model"], row["framework"], row["runtime"], row["batch_size"],
                   row["intra_threads"], row["image_size"], row.get("precision"),
                   row.get("device"), row.get("inter_threads"), row.get("replica"))

    @property
    def values(self) -> tuple:
        """In store.history.CONFIG_COLUMNS order (the replica left out)."""
        return (self.model, self.framework, self.runtime, self.batch_size, self.threads,
                self.image_size, self.precision, self.device, self.inter_threads)

    @property
    def label(self) -> str:
        contender = contender_name({"framework": self.framework, "runtime": self.runtime,
                                    "precision": self.precision, "device": self.device,
                                    "inter_threads": self.inter_threads,
                                    "replica": self.replica})
        return (f"{model_label(self.model, self.image_size)} b{self.batch_size} t{self.threads} · "
                f"{contender}")

    def sort_key(self) -> tuple:
        return tuple((v is None, v if v is not None else 0) for v in
                     (*self.values, self.replica))


def policy_text(policy: tuple) -> str:
    warmup, min_time, min_iters = policy
    return f"warmup {warmup}, min_time {min_time:g} s, min_iters {min_iters}"


@dataclass(frozen=True)
class Decision:
    verdict: str
    note: str
    ratio: float | None = None  # candidate latency / baseline latency
    ci_low: float | None = None
    ci_high: float | None = None
    method: str = ""  # PAIRED, WELCH, THRESHOLD_ONLY, or "" when not compared
    undecided: bool = False

    @property
    def significant(self) -> bool:
        """The 95 % interval excludes 1 (never, without an interval)."""
        return self.ci_low is not None and not self.ci_low <= 1.0 <= self.ci_high

    def fails(self, fail_above: float) -> bool:
        """A gate's failure: slower than fail_above, and either significantly slower or
        judged on a single round (which has no interval to ask)."""
        if self.verdict == NOT_COMPARABLE or self.ratio is None or self.ratio <= fail_above:
            return False
        return self.method == THRESHOLD_ONLY or self.significant


def _welch(baseline, candidate) -> tuple[float, float]:
    """95 % interval of the latency ratio from two independent samples of log round
    medians (Welch-Satterthwaite degrees of freedom)."""
    a = [math.log(v) for v in baseline]
    b = [math.log(v) for v in candidate]
    diff = statistics.fmean(b) - statistics.fmean(a)
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:  # identical rounds on each side: no spread to build an interval from
        return math.exp(diff), math.exp(diff)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    half = t975(df) * math.sqrt(va + vb)
    return math.exp(diff - half), math.exp(diff + half)


def decide(baseline: dict, candidate: dict, threshold: float = DEFAULT_THRESHOLD,
           floor: float | None = None) -> Decision:
    """baseline, candidate: round -> median latency, for one configuration. Rounds are
    paired when both sides hold the same rounds (one sweep's), else compared by Welch.
    floor: the noise floor (a fraction), or None."""
    float_range("threshold", threshold, *THRESHOLD_RANGE)
    pct = f"±{100 * threshold:g} %"
    band = math.log1p(threshold)
    ratio = geomean(candidate.values()) / geomean(baseline.values())
    beyond = abs(math.log(ratio)) > band
    direction = REGRESSION if ratio > 1 else IMPROVEMENT
    if len(baseline) < 2 or len(candidate) < 2:
        sides = [s for s, d in (("baseline", baseline), ("candidate", candidate)) if len(d) < 2]
        why = (f"a single round on the {' and '.join(sides)} side: no interval, decided by "
               f"the threshold ({pct}) alone")
        return Decision(direction if beyond else NO_CHANGE, why, ratio, method=THRESHOLD_ONLY)
    disagree = False
    if set(baseline) == set(candidate):
        cmp = compare_rounds(baseline, candidate, floor)  # its "speed-up" is B's / A's latency
        lo, hi, method, disagree = cmp.ci_low, cmp.ci_high, PAIRED, cmp.disagree
    else:
        (lo, hi), method = _welch(baseline.values(), candidate.values()), WELCH
    interval = f"95 % CI {lo:.2f}-{hi:.2f}"
    if not beyond:
        return Decision(NO_CHANGE, f"within the threshold ({pct})", ratio, lo, hi, method)
    inside = lo <= 1 + threshold if ratio > 1 else hi >= 1 / (1 + threshold)
    if inside:
        reach = "includes 1" if lo <= 1.0 <= hi else f"reaches inside the threshold ({pct})"
        return Decision(NO_CHANGE, f"undecided: {ratio:.2f}x, but the {interval} {reach}",
                        ratio, lo, hi, method, undecided=True)
    if floor is not None and abs(math.log(ratio)) <= math.log1p(floor):
        return Decision(NO_CHANGE, f"undecided: {ratio:.2f}x is within the noise floor "
                        f"({floor:.1%}: how far rounds of one configuration land apart)",
                        ratio, lo, hi, method, undecided=True)
    if disagree:
        return Decision(NO_CHANGE, "undecided: a round points the other way by more than the "
                        f"noise floor ({floor:.1%})", ratio, lo, hi, method, undecided=True)
    return Decision(direction, f"{interval} clears the threshold ({pct})", ratio, lo, hi,
                    method)


@dataclass(frozen=True)
class Change:
    """One configuration on one machine under one policy, and the decision on it; a
    machine or policy only one set has gets a row of its own, not comparable."""

    config: Config
    machine: str | None
    decision: Decision
    baseline: ConfigResult | None = None
    candidate: ConfigResult | None = None

    @property
    def verdict(self) -> str:
        return self.decision.verdict

    @property
    def baseline_ms(self) -> float | None:
        return self.baseline.summary.center if self.baseline and self.baseline.summary else None

    @property
    def candidate_ms(self) -> float | None:
        return (self.candidate.summary.center if self.candidate and self.candidate.summary
                else None)


@dataclass(frozen=True)
class SetComparison:
    baseline: str  # how each set was named
    candidate: str
    threshold: float
    floor: float | None  # the noise floor the decisions used (a fraction), if measured
    changes: tuple[Change, ...]

    def count(self, verdict: str) -> int:
        return sum(c.verdict == verdict for c in self.changes)

    def failing(self, fail_above: float) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.decision.fails(fail_above))

    def unverified(self) -> tuple[Change, ...]:
        """Configurations the baseline measured and the candidate did not (missing there, or
        every round failed): a gate cannot pass what it could not check, and a candidate
        that crashes is no faster than one that is slow."""
        return tuple(c for c in self.changes
                     if c.verdict == NOT_COMPARABLE and c.baseline is not None
                     and c.baseline.summary is not None
                     and (c.candidate is None or c.candidate.summary is None))

    @property
    def compared(self) -> int:
        """Configurations that were actually compared (any verdict but not comparable)."""
        return sum(c.verdict != NOT_COMPARABLE for c in self.changes)


def _sides(rows) -> dict:
    """Config -> {(machine, policy): ConfigResult} for one set's runs."""
    groups: dict = {}
    for r in rows:
        key = (Config.of(r), r.get("system_id"), tuple(r.get(f) for f in POLICY_FIELDS))
        # A round is (sweep, round): rounds of two sweeps are never merged by their number.
        groups.setdefault(key, []).append({**r, "round_no": (r.get("sweep_id"),
                                                             r.get("round_no") or 1)})
    out: dict = {}
    for (config, machine, policy), rs in groups.items():
        (result,) = aggregate(rs)  # one configuration, one machine: one result
        out.setdefault(config, {})[(machine, policy)] = result
    return out


def _no_success(side: str, result: ConfigResult) -> str:
    statuses = ", ".join(sorted(set(result.failed))) or "none"
    return f"no successful round in the {side} ({len(result.failed)} failed: {statuses})"


def _unmatched(b: dict, c: dict) -> str:
    machines_b, machines_c = {m for m, _ in b}, {m for m, _ in c}
    if not machines_b & machines_c:
        def names(ms):
            return ", ".join(str(m)[:8] for m in sorted(ms, key=str))
        return f"different machine: baseline {names(machines_b)}, candidate {names(machines_c)}"
    return ("different measurement policy: baseline "
            f"{'; '.join(sorted(policy_text(p) for _, p in b))}, candidate "
            f"{'; '.join(sorted(policy_text(p) for _, p in c))}")


def compare_sets(baseline_rows, candidate_rows, threshold: float = DEFAULT_THRESHOLD, *,
                 baseline: str = "baseline", candidate: str = "candidate") -> SetComparison:
    """Every configuration of either set, with its verdict. Rows: store.history
    selection_runs dicts (or anything aggregate reads, plus system_id and the policy)."""
    float_range("threshold", threshold, *THRESHOLD_RANGE)
    b_sides, c_sides = _sides(baseline_rows), _sides(candidate_rows)
    summaries = [r.summary for sides in (b_sides, c_sides) for by in sides.values()
                 for r in by.values() if r.summary]
    nf = noise_floor(summaries)
    floor = nf[0] if nf else None
    changes = []
    for config in sorted(set(b_sides) | set(c_sides), key=Config.sort_key):
        b, c = b_sides.get(config, {}), c_sides.get(config, {})
        if not b or not c:
            missing = "baseline" if not b else "candidate"
            only = next(iter((b or c).items()))
            changes.append(Change(config, only[0][0], Decision(
                NOT_COMPARABLE, f"missing in the {missing}"),
                baseline=b.get(only[0]), candidate=c.get(only[0])))
            continue
        common = sorted(set(b) & set(c), key=str)
        if not common:
            changes.append(Change(config, None, Decision(NOT_COMPARABLE, _unmatched(b, c))))
            continue
        for key in common:
            rb, rc = b[key], c[key]
            if rb.summary is None or rc.summary is None:
                side, r = ("baseline", rb) if rb.summary is None else ("candidate", rc)
                decision = Decision(NOT_COMPARABLE, _no_success(side, r))
            else:
                decision = decide(rb.round_medians, rc.round_medians, threshold, floor)
            changes.append(Change(config, key[0], decision, rb, rc))
        for key in sorted(set(b) ^ set(c), key=str):  # a machine or policy only one side has
            one = {key: None}
            changes.append(Change(config, key[0], Decision(
                NOT_COMPARABLE, _unmatched(one, c) if key in b else _unmatched(b, one)),
                baseline=b.get(key), candidate=c.get(key)))
    return SetComparison(baseline, candidate, threshold, floor, tuple(changes))


@dataclass(frozen=True)
class HistoryPoint:
    """One configuration in one sweep on one machine: what a history chart plots."""

    sweep_id: str | None
    created_at: object  # the sweep's date (datetime)
    machine: str | None
    versions: str
    commit: str | None
    center_ms: float  # geometric mean of the sweep's round medians
    min_ms: float
    max_ms: float
    rounds: int


def history_points(rows) -> list[HistoryPoint]:
    """store.history.config_history rows -> one point per (sweep, machine) with a
    successful round, oldest first."""
    groups: dict = {}
    for r in rows:
        if r["status"] == "ok" and r["median_ms"] is not None:
            groups.setdefault((r["sweep_id"], r["system_id"]), []).append(r)
    out = []
    for (sweep_id, machine), rs in groups.items():
        meds = [r["median_ms"] for r in rs]
        out.append(HistoryPoint(sweep_id, rs[0]["sweep_created"], machine,
                                ", ".join(sorted({r["versions"] for r in rs})),
                                rs[0]["git_commit"], geomean(meds), min(meds), max(meds),
                                len(meds)))
    return sorted(out, key=lambda p: (p.created_at is None, p.created_at or 0,
                                      str(p.sweep_id)))
