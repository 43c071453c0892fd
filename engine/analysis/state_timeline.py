"""A group's sweeps, one after another, each judged by the regression gate: every
configuration's state as of every sweep (engine/analysis/states.py says what each state
means and how it is read off the points).

For each sweep and configuration the baseline is the last `window` earlier sweeps since its
baseline's start (a distribution change mark) that measured it successfully in the same
environment, with a figure inside the threshold. The sweep is then judged in one
call of the gate, `compare_sets(each configuration's rows in its own baseline sweeps, the
sweep's rows)`: the same threshold, sweep-to-sweep spread (pooled over the configurations),
interval and family-wise test over the sweep's configurations as `compare --baseline ...
--candidate`, so the board and the gate cannot disagree on the same rows. Where no other
configuration went beyond the threshold in those baseline sweeps (the usual case) they are
exactly the rows of `compare --baseline <its baseline sweeps> --candidate <the sweep>`; one
that did keeps those sweeps out, because a regressed configuration's step inside a baseline
would widen every configuration's spread for as long as it stays regressed.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.analysis.regress import NOT_COMPARABLE as GATE_NOT_COMPARABLE, Config, compare_sets
from engine.analysis.states import (DISTRIBUTION_CHANGE, ACKNOWLEDGED, IGNORED, INSUFFICIENT,
                                    MISSING, NOT_COMPARABLE, ConfigState, Environment, Mark,
                                    Point, StatePolicy, config_key, read_state, worst_first)

__all__ = ["SweepRows", "timeline", "latest", "transitions"]


@dataclass(frozen=True)
class SweepRows:
    """One sweep of a group: its id, date and inference runs (store.history.sweep_runs
    dicts: what compare_sets reads)."""

    sweep_id: str
    created_at: object
    rows: tuple


class _Track:
    """One configuration's bookkeeping while the sweeps are walked (local, mutable)."""

    def __init__(self, first: int):
        self.first = first  # the sweep it first appeared in
        self.measured: set[int] = set()  # sweeps with any run of it
        self.ok: dict[int, Environment] = {}  # sweeps with a successful round: environment
        self.excluded: set[int] = set()  # beyond the threshold: kept out of later baselines
        self.points: list[Point] = []  # judged since its baseline last started afresh
        self.start = 0  # its baseline's start (a distribution change's sweep)
        self.states: list[ConfigState] = []


def _by_config(rows) -> dict[Config, list[dict]]:
    out: dict = {}
    for r in rows:
        out.setdefault(Config.of(r), []).append(r)
    return out


def _silent(t: _Track, i: int, policy: StatePolicy, sweeps) -> tuple:
    """A sweep that did not measure the configuration: missing when the last
    `missing_after` sweeps did (and it stays missing until measured again), else its state
    carries on."""
    prev = t.states[-1]
    n = policy.missing_after
    if prev.state == MISSING:
        return MISSING, prev.note, prev.environment, 0
    if i - n >= t.first and all(j in t.measured for j in range(i - n, i)):
        return (MISSING, f"not measured in this sweep; measured in each of the {n} before "
                f"(last {sweeps[i - 1].sweep_id})", prev.environment, 0)
    return None, prev.note, prev.environment, prev.baseline_needed


def _point(cmp, config: Config, sweep: SweepRows, base: tuple[str, ...]) -> Point | None:
    """The gate's decision on the configuration in this comparison, as a point."""
    found = [ch for ch in cmp.changes if ch.config == config]
    judged = [ch for ch in found if ch.verdict != GATE_NOT_COMPARABLE]
    if not judged:
        return None
    ch = judged[0]
    d = ch.decision
    return Point(sweep.sweep_id, sweep.created_at, d.verdict, d.ratio, d.ci_low, d.ci_high,
                 d.p_value, ch.candidate_ms, ch.baseline_ms, base, d.undecided, d.note)


def timeline(sweeps: list[SweepRows], marks: list[Mark] = (),
             policy: StatePolicy | None = None) -> dict[Config, tuple[ConfigState, ...]]:
    """Each configuration's state as of every sweep from its first on, sweeps oldest first.
    marks: the group's marks in force (withdrawn ones left out)."""
    policy = (policy or StatePolicy()).validate()
    index = {s.sweep_id: i for i, s in enumerate(sweeps)}
    starts = [(m.config_key, index[m.sweep_id]) for m in marks
              if m.kind == DISTRIBUTION_CHANGE and m.sweep_id in index]
    acks = {(m.config_key, m.state, m.sweep_id): m for m in marks if m.kind == ACKNOWLEDGED}
    ignores = {m.config_key: m for m in marks if m.kind == IGNORED}
    tracks: dict[Config, _Track] = {}
    grouped: list[dict[Config, list[dict]]] = []
    for i, sweep in enumerate(sweeps):
        here = _by_config(sweep.rows)
        grouped.append(here)
        for c in here:
            tracks.setdefault(c, _Track(i))
        decided: dict[Config, tuple] = {}
        pending: list[tuple[Config, list[int]]] = []  # judged now, and its baseline sweeps
        for c, t in tracks.items():
            key = config_key(c)
            start = max((j for k, j in starts if k in (None, key) and j <= i), default=0)
            if start != t.start:  # a new baseline from this sweep on: its points start afresh
                t.start, t.points = start, []
            rows = here.get(c)
            if not rows:
                decided[c] = _silent(t, i, policy, sweeps)
                continue
            t.measured.add(i)
            env = Environment.of(rows)
            if not any(r["status"] == "ok" and r.get("median_ms") is not None for r in rows):
                failed = ", ".join(sorted({r["status"] for r in rows}))
                decided[c] = (MISSING, f"measured with no successful round ({failed})", env, 0)
                continue
            t.ok[i] = env
            prior = [j for j in sorted(t.ok) if t.start <= j < i and j not in t.excluded]
            same = [j for j in prior if t.ok[j] == env]
            if prior and not same:
                t.points = []  # judged afresh once sweeps of this environment accumulate
                what = " and ".join(env.differences(t.ok[prior[-1]]))
                decided[c] = (NOT_COMPARABLE, f"{what} differ from the baseline's (sweep "
                              f"{sweeps[prior[-1]].sweep_id}); not judged", env, 0)
            elif len(same) < policy.min_baseline:
                decided[c] = (INSUFFICIENT, f"{len(same)} baseline sweep"
                              f"{'s' if len(same) != 1 else ''} of the {policy.min_baseline} "
                              "needed", env, policy.min_baseline)
            else:
                pending.append((c, same[-policy.window:]))
                decided[c] = (None, "", env, 0)
        if pending:
            cmp = compare_sets([r for c, base in pending for j in base for r in grouped[j][c]],
                               [r for c, _ in pending for r in here[c]],
                               policy.threshold, fail_above=policy.upper)
            for c, base in pending:
                point = _point(cmp, c, sweep, tuple(sweeps[j].sweep_id for j in base))
                if point is None:
                    decided[c] = (NOT_COMPARABLE, "the gate could not compare it",
                                  decided[c][2], 0)
                    continue
                tracks[c].points.append(point)
                # Only a sweep inside the threshold joins later baselines: one beyond it,
                # shown or not, would let a slowdown the first sweeps could not yet show
                # seep into the baseline and never be shown (HUD's flag is the figure's).
                if not policy.inside(point.ratio):
                    tracks[c].excluded.add(i)
        for c, t in tracks.items():
            state, note, env, needed = decided[c]
            prev = t.states[-1] if t.states else None
            evidence: tuple[Point, ...] = ()
            if state is None and c in here:  # judged: read off its points
                state, evidence = read_state(t.points, policy)
                note = evidence[-1].note
            elif state is None:  # not measured, not missing: as it was
                state, evidence = prev.state, prev.points
            since = prev.since if prev is not None and prev.state == state else sweep.sweep_id
            key = config_key(c)
            t.states.append(ConfigState(c, sweep.sweep_id, state, since, note, evidence, env,
                                        acks.get((key, state, since)), ignores.get(key),
                                        needed))
    return {c: tuple(t.states) for c, t in tracks.items()}


def latest(sweeps: list[SweepRows], marks: list[Mark] = (),
           policy: StatePolicy | None = None) -> list[ConfigState]:
    """Every configuration's state as of the group's newest sweep, worst first."""
    return worst_first(states[-1] for states in timeline(sweeps, marks, policy).values())


def transitions(states: tuple[ConfigState, ...]) -> list[tuple[str, str | None, str]]:
    """(sweep id, state before, state after) at every sweep where one configuration's
    state changed; the first state comes from None."""
    out, before = [], None
    for s in states:
        if s.state != before:
            out.append((s.sweep_id, before, s.state))
        before = s.state
    return out
