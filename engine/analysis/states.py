"""A configuration's state over its sweeps: the words, the policy stated once, and the rule
that reads a state off the gate's decisions.

A team runs the same sweep every day; each new sweep is judged, configuration by
configuration, by the regression gate itself (engine/analysis/regress.py's compare_sets:
its threshold, its sweep-to-sweep spread, its interval and its family-wise test), against
that configuration's baseline: the last `window` earlier sweeps of the group that measured
it in the same environment and were not themselves violations. That is one point per sweep
(engine/analysis/state_timeline.py), and the state is read off the points as PyTorch's HUD
reads its flags:

- regression: the last `confirm` (2) or more points are regressions by the gate's rule;
- suspicious: a violation among the last `lookback` points that is not (yet) a regression;
- recovered: back inside within `lookback` points after a regression;
- improvement: the last `confirm` or more points are improvements by the gate's rule;
- no change: none of these;
- insufficient data: fewer than `min_baseline` baseline sweeps (the gate needs 2 to
  estimate a spread at all);
- missing: the last `missing_after` sweeps of the group measured it and the newest did not
  (or measured it with no successful round);
- not comparable: its machine, framework versions or measurement policy differ from every
  baseline sweep's: said as such, never judged, and its points start afresh.

Only a sweep whose figure lies inside the threshold joins later baselines, so a real
slowdown stays a regression (a speed-up an improvement) until it reverts or someone marks
"distribution changes here" (a new baseline from a sweep on), and one the gate cannot show
at once keeps being judged against the level before it: a baseline that took in the new
level would widen its spread, so that no second point could confirm the change, then absorb
it silently.
Marks (engine/analysis/states.Mark, stored by store/states.py) acknowledge a state (it stays,
but stops alerting until the state changes again), ignore a configuration, or move its
baseline's start.
"""

from __future__ import annotations

import json
from dataclasses import astuple, dataclass, field
from datetime import datetime

from engine.analysis.regress import (DEFAULT_THRESHOLD, IMPROVEMENT, NO_CHANGE, NOT_COMPARABLE,
                                     REGRESSION, Config)
from engine.core.errors import UserError
from engine.core.limits import (BASELINE_SWEEPS_RANGE, CONFIRM_RANGE, FAIL_ABOVE_RANGE,
                                LOOKBACK_RANGE, MISSING_AFTER_RANGE, THRESHOLD_RANGE,
                                float_range, int_range)

__all__ = ["StatePolicy", "Point", "Environment", "Mark", "ConfigState", "StateChange",
           "config_key",
           "config_of_key", "read_state", "worst_first", "exit_status", "INSUFFICIENT",
           "NO_CHANGE", "IMPROVEMENT", "SUSPICIOUS", "REGRESSION", "RECOVERED", "MISSING",
           "NOT_COMPARABLE", "IGNORED", "STATES", "ALERT_STATES", "ACKNOWLEDGED",
           "DISTRIBUTION_CHANGE", "MARK_KINDS"]

INSUFFICIENT, SUSPICIOUS, RECOVERED, MISSING, IGNORED = (
    "insufficient data", "suspicious", "recovered", "missing", "ignored")
# Worst first: the board's order, and the order a person reads them in.
STATES = (REGRESSION, MISSING, SUSPICIOUS, NOT_COMPARABLE, RECOVERED, IMPROVEMENT,
          INSUFFICIENT, NO_CHANGE)
# What is sent to people (the feed, a webhook): a regression, and what a team would act on
# or want to know; a suspicious point alone is not (HUD's policy: it is shown, not sent), nor
# the quiet ends of a state (into no change or insufficient data).
ALERT_STATES = (REGRESSION, RECOVERED, IMPROVEMENT, MISSING, NOT_COMPARABLE)
ACKNOWLEDGED, DISTRIBUTION_CHANGE = "acknowledged", "distribution change"
MARK_KINDS = (ACKNOWLEDGED, IGNORED, DISTRIBUTION_CHANGE)


@dataclass(frozen=True)
class StatePolicy:
    """How a state is read, stated once: the gate's threshold (and fail_above) decide each
    point; the rest say how many points make what."""

    threshold: float = DEFAULT_THRESHOLD
    fail_above: float | None = None  # the gate's: default 1 + threshold
    confirm: int = 2  # consecutive regressions (improvements) that make the state
    lookback: int = 3  # points back a violation or a regression's end still counts
    min_baseline: int = 3  # baseline sweeps before a point is judged
    window: int = 7  # the most recent baseline sweeps judged against, at most
    missing_after: int = 3  # sweeps in a row that measured it, before silence is missing
    alert_states: tuple[str, ...] = ALERT_STATES

    def validate(self) -> "StatePolicy":
        float_range("threshold", self.threshold, *THRESHOLD_RANGE)
        float_range("fail_above", self.upper, *FAIL_ABOVE_RANGE)
        int_range("confirm", self.confirm, *CONFIRM_RANGE)
        int_range("lookback", self.lookback, *LOOKBACK_RANGE)
        int_range("min_baseline", self.min_baseline, *BASELINE_SWEEPS_RANGE)
        int_range("window", self.window, self.min_baseline, BASELINE_SWEEPS_RANGE[1],
                  " (at least min_baseline)")
        int_range("missing_after", self.missing_after, *MISSING_AFTER_RANGE)
        unknown = [s for s in self.alert_states if s not in STATES]
        if unknown:
            raise UserError(f"alert_states: {unknown[0]!r} is not a state; allowed: "
                            f"{', '.join(STATES)}", field="alert_states")
        return self

    @property
    def upper(self) -> float:
        """The latency ratio a regression must exceed (the gate's fail_above)."""
        return self.fail_above if self.fail_above is not None else 1 + self.threshold

    def inside(self, ratio: float | None) -> bool:
        """Whether a latency ratio lies inside the threshold both ways (what a baseline
        sweep's must); no ratio is not inside."""
        return ratio is not None and 1 / (1 + self.threshold) <= ratio <= 1 + self.threshold

    def alerts(self, old: str | None, new: str) -> bool:
        """Whether a change from old to new is sent to people."""
        return new != old and new in self.alert_states


@dataclass(frozen=True)
class Point:
    """One sweep's gate decision on a configuration against its baseline sweeps: what
    `compare --baseline <baseline> --candidate <sweep_id>` says of it."""

    sweep_id: str
    created_at: object
    verdict: str  # the gate's (engine.analysis.regress.VERDICTS)
    ratio: float | None  # candidate / baseline latency
    ci_low: float | None
    ci_high: float | None
    p_value: float | None  # adjusted over the sweep's configurations, as the gate's
    candidate_ms: float | None
    baseline_ms: float | None
    baseline: tuple[str, ...]  # the baseline sweeps, oldest first
    undecided: bool = False
    note: str = ""

    @property
    def violation(self) -> bool:
        return self.verdict == REGRESSION

    @property
    def faster(self) -> bool:
        return self.verdict == IMPROVEMENT

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["created_at"] = None if self.created_at is None else str(self.created_at)
        d["baseline"] = list(self.baseline)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Point":
        return cls(**{**d, "baseline": tuple(d["baseline"])})


@dataclass(frozen=True)
class Environment:
    """What a configuration ran on in one sweep: its machines (systems row and shape), its
    framework versions and its measurement policy (warm-up, min_time, min_iters)."""

    machines: tuple[str, ...]
    versions: tuple[str, ...]
    policies: tuple[tuple, ...]

    @classmethod
    def of(cls, rows) -> "Environment":
        return cls(tuple(sorted({str(r.get("system_id")) + (f" {r['machine_shape']}"
                                                            if r.get("machine_shape") else "")
                                 for r in rows})),
                   tuple(sorted({str(r.get("versions")) for r in rows})),
                   tuple(sorted({(r.get("warmup_iters"), r.get("min_time_s"),
                                  r.get("min_iters")) for r in rows}, key=str)))

    def differences(self, other: "Environment") -> tuple[str, ...]:
        """What differs from other: 'machine', 'framework versions', 'measurement policy'."""
        return tuple(name for name, a, b in (
            ("machine", self.machines, other.machines),
            ("framework versions", self.versions, other.versions),
            ("measurement policy", self.policies, other.policies)) if a != b)


@dataclass(frozen=True)
class Mark:
    """A person's word on a configuration's state, shared through the store: acknowledged
    (state: the state it accepts, sweep_id: the sweep that state began at), ignored, or a
    distribution change (sweep_id: a new baseline from this sweep on; config_key None: for
    every configuration of the group)."""

    mark_id: str
    kind: str
    config_key: str | None
    who: str
    at: datetime
    why: str
    state: str | None = None
    sweep_id: str | None = None


def config_key(config: Config) -> str:
    """A configuration as one stable string (the store's key for marks and changes)."""
    return json.dumps(list(astuple(config)))


def config_of_key(key: str) -> Config:
    return Config(*json.loads(key))


@dataclass(frozen=True)
class ConfigState:
    """A configuration's state as of one sweep of its group, with its evidence: the points
    that made it (each with its interval and baseline sweeps) and the environment."""

    config: Config
    sweep_id: str  # as of this sweep
    state: str
    since: str  # the sweep this state began at
    note: str
    points: tuple[Point, ...] = ()
    environment: Environment | None = None
    acknowledged: Mark | None = None
    ignored: Mark | None = None
    baseline_needed: int = field(default=0, compare=False)  # insufficient: of how many

    @property
    def key(self) -> str:
        return config_key(self.config)

    @property
    def shown(self) -> str:
        """The state a board shows: ignored over whatever was judged."""
        return IGNORED if self.ignored else self.state

    @property
    def quiet(self) -> bool:
        """Acknowledged or ignored: it stays on the board but no longer shouts."""
        return self.acknowledged is not None or self.ignored is not None


@dataclass(frozen=True)
class StateChange:
    """One configuration's state changing, as recorded once (store/states.py) and sent:
    what the feed and a webhook carry."""

    change_id: str
    group: str
    config_key: str
    configuration: str  # its label (engine.analysis.regress.Config.label)
    sweep_id: str  # the sweep whose judgement changed it
    old_state: str | None  # None: the first state recorded
    new_state: str
    since: str
    alert: bool  # sent to people (StatePolicy.alerts)
    note: str
    points: tuple[Point, ...]
    at: datetime  # when it was recorded

    @property
    def newest(self) -> Point | None:
        return self.points[-1] if self.points else None


def read_state(points: list[Point], policy: StatePolicy) -> tuple[str, tuple[Point, ...]]:
    """(state, the points that are its evidence) from a configuration's judged points since
    its baseline last started afresh, oldest first (at least one)."""
    recent = tuple(points[-policy.lookback:])
    run = _trailing(points, lambda p: p.violation)
    if run >= policy.confirm:
        return REGRESSION, tuple(points[-run:])
    if run:
        return SUSPICIOUS, recent
    inside = _trailing(points, lambda p: not p.violation)
    ended = _trailing(points[:len(points) - inside], lambda p: p.violation)
    if inside <= policy.lookback and ended >= policy.confirm:
        return RECOVERED, tuple(points[-(inside + ended):])
    if any(p.violation for p in recent):
        return SUSPICIOUS, recent
    faster = _trailing(points, lambda p: p.faster)
    if faster >= policy.confirm:
        return IMPROVEMENT, tuple(points[-faster:])
    return NO_CHANGE, tuple(points[-1:])


def _trailing(points, pred) -> int:
    """How many of the last points, in a row, pred holds for."""
    n = 0
    for p in reversed(points):
        if not pred(p):
            break
        n += 1
    return n


def worst_first(states) -> list[ConfigState]:
    """The board's order: unmarked before acknowledged before ignored, then worst state
    first, then the configuration's own order."""
    return sorted(states, key=lambda s: (s.ignored is not None, s.acknowledged is not None,
                                         STATES.index(s.state), s.config.sort_key()))


def exit_status(states) -> int:
    """The gate's exit statuses for the newest sweep's states: 1 a regression nobody
    acknowledged; else 2 when something could not be judged (missing, not comparable) or
    nothing was; else 0. Ignored configurations count for nothing."""
    live = [s for s in states if s.ignored is None]
    if any(s.state == REGRESSION and s.acknowledged is None for s in live):
        return 1
    if any(s.state in (MISSING, NOT_COMPARABLE) and s.acknowledged is None for s in live):
        return 2
    if not any(s.state not in (INSUFFICIENT, MISSING, NOT_COMPARABLE) for s in live):
        return 2
    return 0
