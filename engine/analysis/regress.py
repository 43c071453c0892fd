"""Regressions: a candidate result set against a baseline, configuration by configuration.

A configuration is everything that changes what is measured (model, framework, runtime,
batch, threads, image size, precision, device, inter-op threads, replicas, the model file's
digest, a neighbour and torch's wait policy, and an A/A copy's number), on one machine (systems row and catalog shape) under one
measurement policy. Its figure in a set is the geometric mean of its round medians (every
measured round counts), and the change is the latency ratio candidate / baseline.

Two sets are sweeps run hours or commits apart. The unit that repeats from one build to the
next is the sweep, so a change must beat the spread of a configuration's sweep means from
one sweep of a build to another (engine/analysis/evidence.py), estimated from the sets' own
repeated sweeps (a selector naming several: `commit:<prefix>`, `<package>:<version>`, or
sweep ids separated by commas); the change's 95 % interval is a t interval with
sd * sqrt(1/k_baseline + 1/k_candidate). With one sweep on each side there is nothing to
estimate it from, and the verdict says so: "undecided: one baseline sweep cannot tell a
slower day from a slower build". A configuration measured by both sides in the very same
rounds (one sweep on both sides) is compared round by round.

Verdicts, with asv's threshold (10 % by default, symmetric in log: 1.10x slower or 1/1.10
faster); `fail_above` moves the regression side's bound:
- `regression` (`improvement`): slower (faster) than the bound, one-sided, with the p-value
  adjusted over every configuration compared (step-down min-p, engine/analysis/
  multiplicity.py) at 5 %, so that identical builds give any false regression in at most
  5 % of comparisons, whether they hold 1 configuration or 50;
- `no change`: the 95 % interval lies inside the threshold both ways;
- `no change`, undecided: neither, with the reason (the interval reaches across the bound,
  or one sweep per side);
- `not comparable`: missing on one side, no successful round on one side, another machine,
  or another measurement policy (warm-up, min_time, min_iters).
A gate (engine/cli/history.py) fails exactly on the configurations whose verdict is
regression, so the table and the exit status cannot disagree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.analysis.compare import ConfigResult, aggregate, contender_name
from engine.analysis.evidence import SWEEPS, Evidence, Side, evidence, sweep_spread
from engine.analysis.multiplicity import Statistic, step_down_minp
from engine.core.catalog import model_label
from engine.scenarios.inference.spec import CONDITION_LABELS
from engine.core.limits import FAIL_ABOVE_RANGE, THRESHOLD_RANGE, float_range

__all__ = ["Config", "Decision", "Change", "SetComparison", "decide", "compare_sets",
           "policy_text", "DEFAULT_THRESHOLD", "FAMILY_ALPHA", "VERDICTS", "REGRESSION",
           "IMPROVEMENT", "NO_CHANGE", "NOT_COMPARABLE"]

DEFAULT_THRESHOLD = 0.10  # asv's default factor of 1.1
# The chance of any false regression (or improvement) over all the configurations compared.
FAMILY_ALPHA = 0.05
REGRESSION, IMPROVEMENT, NO_CHANGE, NOT_COMPARABLE = (
    "regression", "improvement", "no change", "not comparable")
VERDICTS = (REGRESSION, IMPROVEMENT, NO_CHANGE, NOT_COMPARABLE)
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
    replicas: int | None = None  # R workers at once: another split, another configuration
    model_sha256: str | None = None  # a user's model file: another file, another model
    contention: str | None = None  # beside our neighbour ("steady", "onoff"): a setting
    wait_policy: str | None = None  # torch's OpenMP wait policy ("passive")

    @classmethod
    def of(cls, row: dict) -> "Config":
        replicas = row.get("replicas")
        contention = row.get("contention")
        return cls(row["model"], row["framework"], row["runtime"], row["batch_size"],
                   row["intra_threads"], row["image_size"], row.get("precision"),
                   row.get("device"), row.get("inter_threads"), row.get("replica"),
                   None if replicas in (None, 1) else replicas, row.get("model_sha256"),
                   None if contention in (None, "none") else contention,
                   row.get("wait_policy") or None)

    @property
    def values(self) -> tuple:
        """In store.history.CONFIG_COLUMNS order (an A/A copy's number and the digest left
        out: the history follows a configuration across files)."""
        return (self.model, self.framework, self.runtime, self.batch_size, self.threads,
                self.image_size, self.precision, self.device, self.inter_threads,
                self.replicas or 1, self.contention or "none", self.wait_policy or "")

    @property
    def label(self) -> str:
        contender = contender_name({"framework": self.framework, "runtime": self.runtime,
                                    "precision": self.precision, "device": self.device,
                                    "inter_threads": self.inter_threads,
                                    "replica": self.replica, "replicas": self.replicas,
                                    "wait_policy": self.wait_policy})
        digest = f" sha256:{self.model_sha256[:8]}" if self.model_sha256 else ""
        beside = f" · {CONDITION_LABELS[self.contention]}" if self.contention else ""
        return (f"{model_label(self.model, self.image_size)} b{self.batch_size} t{self.threads} · "
                f"{contender}{digest}{beside}")

    def sort_key(self) -> tuple:
        return tuple((v is None, v if v is not None else 0) for v in
                     (*self.values, self.replica, self.model_sha256))


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
    method: str = ""  # PAIRED, SWEEPS, or "" when not compared
    undecided: bool = False
    judged: bool = True  # False: the data cannot answer (one sweep per side)
    p_value: float | None = None  # the adjusted one-sided p-value of the verdict's direction


def _p(p: float) -> str:
    """'= 0.0023', or '< 0.001' where two significant digits would print 0 or a power of
    ten no reader needs ("adjusted p = 0" read as certainty)."""
    return "< 0.001" if p < 0.001 else f"= {p:.2g}"


def decide(evidence: Evidence, threshold: float = DEFAULT_THRESHOLD,
           fail_above: float | None = None, *, regressed: bool = False,
           improved: bool = False, p_value: float | None = None) -> Decision:
    """The verdict for one configuration's evidence. regressed / improved: the family's
    adjusted p-value (p_value) rejected that direction (compare_sets decides it; a lone
    configuration is a family of one)."""
    float_range("threshold", threshold, *THRESHOLD_RANGE)
    ratio = evidence.ratio
    lo, hi = evidence.interval()
    upper = fail_above if fail_above is not None else 1 + threshold
    lower = 1 / (1 + threshold)
    if evidence.se is None:
        return Decision(NO_CHANGE, evidence.why_not, ratio, method=evidence.method,
                        undecided=True, judged=False)
    interval = f"95 % CI {lo:.2f}-{hi:.2f}"
    if regressed:
        return Decision(REGRESSION, f"slower than {upper:g}x: adjusted p {_p(p_value)} "
                        f"<= {FAMILY_ALPHA:g} ({interval})", ratio, lo, hi,
                        evidence.method, p_value=p_value)
    if improved:
        return Decision(IMPROVEMENT, f"faster than 1/{1 + threshold:g}x: adjusted p "
                        f"{_p(p_value)} <= {FAMILY_ALPHA:g} ({interval})",
                        ratio, lo, hi, evidence.method, p_value=p_value)
    if lower < lo and hi < 1 + threshold:
        return Decision(NO_CHANGE, f"{interval} lies within the threshold "
                        f"(±{100 * threshold:g} %)", ratio, lo, hi, evidence.method)
    if lo <= 1.0 <= hi:
        reach = "includes 1"
    elif lo > 1 + threshold or hi < lower:
        reach = (f"lies beyond ±{100 * threshold:g} % but does not show it slower than "
                 f"{upper:g}x" if ratio > 1 else
                 "lies beyond the threshold but not surely, over every configuration judged")
    else:
        reach = f"reaches past ±{100 * threshold:g} %"
    return Decision(NO_CHANGE, f"undecided: {ratio:.2f}x, and the {interval} {reach}; more "
                    "sweeps on either side narrow it", ratio, lo, hi, evidence.method,
                    undecided=True)


@dataclass(frozen=True)
class Change:
    """One configuration on one machine under one policy, and the decision on it; a
    machine or policy only one set has gets a row of its own, not comparable."""

    config: Config
    machine: str | None
    decision: Decision
    baseline: ConfigResult | None = None
    candidate: ConfigResult | None = None
    sweeps: tuple[int, int] = (0, 0)  # sweeps measured on each side

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
    fail_above: float  # the regression side's bound (a latency ratio)
    sweep_sd: float | None  # the pooled sweep-to-sweep spread (log scale), if measured
    sweep_df: float  # its degrees of freedom (Welch-Satterthwaite)
    changes: tuple[Change, ...]
    family: int = 0  # configurations in the family the p-values are adjusted over

    def count(self, verdict: str) -> int:
        return sum(c.verdict == verdict for c in self.changes)

    def failing(self) -> tuple[Change, ...]:
        """The configurations the gate fails on: exactly those whose verdict is regression."""
        return tuple(c for c in self.changes if c.verdict == REGRESSION)

    def unverified(self) -> tuple[Change, ...]:
        """Configurations the baseline measured and the candidate did not measure comparably
        (missing there, every round failed, or only on another machine or policy): a gate
        cannot pass what it could not check, and a candidate that crashes is no faster than
        one that is slow."""
        return tuple(c for c in self.changes
                     if c.verdict == NOT_COMPARABLE and c.baseline is not None
                     and c.baseline.summary is not None)

    def unjudged(self) -> tuple[Change, ...]:
        """Compared configurations the data cannot answer (one sweep on each side)."""
        return tuple(c for c in self.changes if not c.decision.judged)

    @property
    def compared(self) -> int:
        """Configurations that were actually compared (any verdict but not comparable)."""
        return sum(c.verdict != NOT_COMPARABLE for c in self.changes)

    @property
    def sweep_sd_pct(self) -> float | None:
        return None if self.sweep_sd is None else 100 * math.expm1(self.sweep_sd)


def _sides(rows) -> dict:
    """Config -> {(machine, shape, policy): Side} for one set's runs."""
    groups: dict = {}
    for r in rows:
        key = (Config.of(r), r.get("system_id"), r.get("machine_shape"),
               tuple(r.get(f) for f in POLICY_FIELDS))
        # A round is (sweep, round): rounds of two sweeps are never merged by their number.
        groups.setdefault(key, []).append({**r, "round_no": (r.get("sweep_id"),
                                                             r.get("round_no") or 1)})
    out: dict = {}
    for (config, machine, shape, policy), rs in groups.items():
        (result,) = aggregate(rs)  # one configuration, one machine: one result
        sweeps: dict = {}
        for (sweep, rnd), med in result.round_medians.items():
            sweeps.setdefault(sweep, {})[rnd] = med
        out.setdefault(config, {})[(machine, shape, policy)] = Side(result, sweeps)
    return out


def _machine_name(key) -> str:
    machine, shape, _ = key
    return f"{str(machine)[:8]}" + (f" {shape}" if shape else "")


def _no_success(side: str, result: ConfigResult) -> str:
    statuses = ", ".join(sorted(set(result.failed))) or "none"
    return f"no successful round in the {side} ({len(result.failed)} failed: {statuses})"


def _unmatched(b: dict, c: dict) -> str:
    machines_b, machines_c = {k[:2] for k in b}, {k[:2] for k in c}
    if not machines_b & machines_c:
        def names(keys):
            return ", ".join(_machine_name((*k, None)) for k in sorted(keys, key=str))
        return f"different machine: baseline {names(machines_b)}, candidate {names(machines_c)}"
    return ("different measurement policy: baseline "
            f"{'; '.join(sorted(policy_text(k[2]) for k in b))}, candidate "
            f"{'; '.join(sorted(policy_text(k[2]) for k in c))}")


def compare_sets(baseline_rows, candidate_rows, threshold: float = DEFAULT_THRESHOLD, *,
                 fail_above: float | None = None, baseline: str = "baseline",
                 candidate: str = "candidate") -> SetComparison:
    """Every configuration of either set, with its verdict. Rows: store.history
    selection_runs dicts (or anything aggregate reads, plus sweep_id, system_id and the
    policy). fail_above: the latency ratio a regression must exceed (default 1 +
    threshold)."""
    float_range("threshold", threshold, *THRESHOLD_RANGE)
    upper = fail_above if fail_above is not None else 1 + threshold
    float_range("fail_above", upper, *FAIL_ABOVE_RANGE)
    b_sides, c_sides = _sides(baseline_rows), _sides(candidate_rows)
    # The sweep-to-sweep spread, pooled over every configuration either set measured in
    # several sweeps with a successful round (the same build, measured on other days).
    spread = sweep_spread([[side for by in sides.values() for side in by.values()]
                           for sides in (b_sides, c_sides)])
    rows, found = [], {}
    for config in sorted(set(b_sides) | set(c_sides), key=Config.sort_key):
        b, c = b_sides.get(config, {}), c_sides.get(config, {})
        if not b or not c:
            missing = "baseline" if not b else "candidate"
            key, only = next(iter((b or c).items()))
            rows.append(Change(config, _machine_name(key), Decision(
                NOT_COMPARABLE, f"missing in the {missing}"),
                baseline=b.get(key) and b[key].result, candidate=c.get(key) and c[key].result))
            continue
        common = sorted(set(b) & set(c), key=str)
        if not common:  # the baseline's measurement, which the candidate did not match
            rows.append(Change(config, None, Decision(NOT_COMPARABLE, _unmatched(b, c)),
                               baseline=next(iter(b.values())).result))
            continue
        for key in common:
            rb, rc = b[key], c[key]
            if rb.result.summary is None or rc.result.summary is None:
                side, r = (("baseline", rb.result) if rb.result.summary is None
                           else ("candidate", rc.result))
                rows.append(Change(config, _machine_name(key),
                                   Decision(NOT_COMPARABLE, _no_success(side, r)),
                                   rb.result, rc.result))
                continue
            found[len(rows)] = evidence(rb, rc, spread)
            rows.append(Change(config, _machine_name(key), None, rb.result, rc.result,
                               (len(rb.sweeps), len(rc.sweeps))))
        for key in sorted(set(b) ^ set(c), key=str):  # a machine or policy only one side has
            one = {key: None}
            rows.append(Change(config, _machine_name(key), Decision(
                NOT_COMPARABLE, _unmatched(one, c) if key in b else _unmatched(b, one)),
                baseline=b[key].result if key in b else None,
                candidate=c[key].result if key in c else None))
    # One family-wise rate over the configurations compared, each direction on its own.
    judged = {i: e for i, e in found.items() if e.se is not None}
    adjusted = {}  # direction -> configuration -> adjusted one-sided p-value
    for direction, bound in (("slower", upper), ("faster", 1 / (1 + threshold))):
        tests = [Statistic(e.t_beyond(bound), e.df, e.method == SWEEPS) for e in judged.values()]
        adjusted[direction] = dict(zip(judged, step_down_minp(tests, spread[2], FAMILY_ALPHA)))
    changes = []
    for i, ch in enumerate(rows):
        if i in found:
            up, down = adjusted["slower"].get(i, 1.0), adjusted["faster"].get(i, 1.0)
            ch = Change(ch.config, ch.machine, decide(
                found[i], threshold, upper, regressed=up <= FAMILY_ALPHA,
                improved=down <= FAMILY_ALPHA, p_value=min(up, down)),
                ch.baseline, ch.candidate, ch.sweeps)
        changes.append(ch)
    return SetComparison(baseline, candidate, threshold, upper, spread[0], spread[1],
                         tuple(changes), len(judged))
