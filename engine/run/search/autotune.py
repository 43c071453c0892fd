"""The autotuner (issue 27, part 3): for one model, a p99 bound and an objective (the most
Server QPS, or the least cost per 1 M inferences on a shape), the serving configuration
(runtime x precision x max batch x max wait x threads x replicas) to deploy.

The search, as Triton's Model Analyzer states one: candidates, a measurement per
candidate, a stop rule in one place (`autotune`, a pure function of its probes' answers):

1. prune on cheap closed-loop figures (a short inference run per closed-loop
   configuration, or what the store held for it on this machine as the tuning started):
   a candidate whose probe failed, whose closed-loop p99 at its batch already exceeds the
   bound, or whose figure (samples/s, or cost per 1 M flat out) is worse than the best
   candidate's by more than PRUNE_FACTOR is pruned with that reason;
2. confirm the survivors, best first, with the max-QPS search (engine/run/search/max_qps.py):
   at least the top TOP_N;
3. go on to the next survivor only while the last STOP_STEPS confirmations gained at least
   `margin` on the best so far.

The default configuration (the reference runtime, batch 1, every thread, one replica) is
confirmed too, so the report can say how much better the winner is. `stored_autotune`
(engine/run/search/autotune_runs.py) drives it on real runs, every probe stored under one
sweep.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from engine.analysis.pareto import pareto_front
from engine.core.errors import UserError
from engine.core.limits import MARGIN_RANGE, SERVE_BOUND_MS_RANGE, choice, float_range
from engine.run.search.max_qps import QpsSearch, loadgen_p99_ms

__all__ = ["Candidate", "ClosedFigure", "Confirmed", "Tuning", "autotune", "check_tune",
           "closed_by_sut", "OBJECTIVES", "TOP_N", "PRUNE_FACTOR", "STOP_STEPS",
           "DEFAULT_TUNE_MARGIN"]

OBJECTIVES = ("qps", "cost")
# Closed-loop figures of two processes here differ by up to 40 % run to run (see
# batch_search.PAIRED_ROUNDS): only a candidate worse than the best by more than 2x is
# surely worse under load too, so only that is pruned without a Server test.
PRUNE_FACTOR = 2.0
# The max-QPS search costs 5-9 LoadGen tests a candidate: the top 3 closed-loop figures
# are confirmed, since the closed-loop order can change under Poisson arrivals.
TOP_N = 3
# More only while the search still pays: the last 2 confirmations each gained under the
# margin on the best so far, and it stops.
STOP_STEPS = 2
DEFAULT_TUNE_MARGIN = 0.05


@dataclass(frozen=True)
class Candidate:
    framework: str
    runtime: str
    precision: str
    max_batch: int
    threads: int
    max_wait_ms: float = 0.0
    replicas: int = 1  # processes of `threads` threads behind one queue

    def closed_loop(self) -> "Candidate":
        """The configuration a closed-loop probe measures: the batcher's wait plays no part
        in a closed loop, so candidates that differ only in it share one figure."""
        return replace(self, max_wait_ms=0.0)

    def label(self) -> str:
        """'torch onnxruntime fp32, max batch 4, 2 threads' (x 2 replicas)."""
        wait = f", max wait {self.max_wait_ms:g} ms" if self.max_wait_ms else ""
        reps = f" x {self.replicas} replicas" if self.replicas > 1 else ""
        return (f"{self.framework} {self.runtime} {self.precision}, max batch "
                f"{self.max_batch}{wait}, {self.threads} thread{'s' * (self.threads != 1)}"
                f"{reps}")


@dataclass(frozen=True)
class ClosedFigure:
    """What the tuner reads of a run: a closed-loop probe's, or a Server test's."""
    status: str
    throughput: float | None = None  # samples/s
    p99_ms: float | None = None  # one call at the batch, closed loop
    reason: str = ""
    source: str = "measured"  # or "stored": the store already had it
    run_id: str = ""
    threads_per_core: int | None = None
    cores_used: int | None = None
    shape: str | None = None
    hypervisor: bool | None = None  # the host a VM (x86 cpuinfo flag); None: not recorded

    @classmethod
    def stored(cls, row: dict) -> "ClosedFigure":
        """The store's figure for the configuration (store.queries.closed_loop_known's row,
        as a tuning's sweep command records it; one recorded before the flag: None)."""
        return cls("ok", row["throughput"], row["p99_ms"], "", "stored", row["run_id"],
                   row["threads_per_core"], row["cores_used"], row["machine_shape"],
                   row.get("hypervisor"))

    @classmethod
    def of(cls, rec, source: str = "measured") -> "ClosedFigure":
        extra = getattr(rec, "extra", None) or {}
        return cls(rec.status, rec.throughput, rec.p99_ms, rec.reason or "", source,
                   getattr(rec, "run_id", ""), getattr(rec, "threads_per_core", None),
                   extra.get("cores_used"), getattr(rec, "machine_shape", None),
                   extra.get("hypervisor"))


@dataclass(frozen=True)
class Confirmed:
    candidate: Candidate
    closed: ClosedFigure
    search: QpsSearch | None  # None: its closed-loop probe failed or was over the bound
    cost: float | None = None  # USD per 1 M inferences at the max QPS; None: not priced
    # "" when measured on the priced shape's whole machine; else the estimate's assumption
    # (engine.analysis.cost_machines: part of the shape scaled to it, or another machine)
    cost_note: str = ""

    @property
    def qps(self) -> float | None:
        return self.search.max_qps if self.search is not None else None

    @property
    def p99_ms(self) -> float | None:
        return loadgen_p99_ms(self.search.best) if self.search is not None else None


@dataclass(frozen=True)
class Tuning:
    objective: str
    bound_ms: float
    margin: float
    closed: tuple[tuple[Candidate, ClosedFigure], ...]  # every candidate, probe order
    pruned: tuple[tuple[Candidate, str], ...]  # (candidate, why)
    confirmed: tuple[Confirmed, ...]  # confirmation order
    default: Confirmed
    winner: Confirmed | None
    stop_reason: str
    front: tuple[Confirmed, ...]  # Pareto: p99 low, QPS high, cost low
    gain_pct: float | None  # winner over default: % more QPS, or % cheaper
    # every confirmation's query count and where it came from (engine/run/query_choice.
    # QueryChoice); None: nothing was confirmed, or not recorded
    queries: object = None

    def value(self, c: Confirmed) -> float | None:
        return _value(self.objective, c)


def _value(objective: str, c: Confirmed) -> float | None:
    return c.qps if objective == "qps" else (c.cost if c.qps is not None else None)


def _better(objective: str, a: float, b: float) -> bool:
    return a > b if objective == "qps" else a < b


def _gain(objective: str, new: float, old: float) -> float:
    """The fraction new improves on old: more QPS, or cheaper."""
    return new / old - 1 if objective == "qps" else old / new - 1


def check_tune(*, bound_ms, objective: str, margin: float, shape: str | None) -> None:
    """Everything refused before anything runs, each naming its field and range."""
    if bound_ms is None or not bound_ms > 0:
        raise UserError(f"bound_ms: {bound_ms!r} must be a p99 bound in ms; allowed: "
                        f"{SERVE_BOUND_MS_RANGE[0]:g}..{SERVE_BOUND_MS_RANGE[1]:g}",
                        field="bound_ms")
    float_range("bound_ms", bound_ms, *SERVE_BOUND_MS_RANGE)
    choice("objective", objective, OBJECTIVES)
    float_range("margin", margin, *MARGIN_RANGE)
    if objective == "cost" and not shape:
        raise UserError("machine_shape: the cost objective prices a shape; allowed: "
                        "--machine-shape NAME as `python -m engine prices list` prints it",
                        field="machine_shape")


def _prune(closed, bound_ms, objective, price, prune_factor: float = PRUNE_FACTOR,
           unit: str = "samples/s"):
    """(survivors best first as (candidate, figure, score), pruned as (candidate, why))."""
    pruned, scored = [], []
    for c, f in closed:
        if f.status != "ok" or not f.throughput:
            pruned.append((c, f"closed-loop probe ended {f.status}: {f.reason[:120]}"))
        elif f.p99_ms is not None and f.p99_ms > bound_ms:
            pruned.append((c, f"closed-loop p99 {f.p99_ms:,.3g} ms at batch {c.max_batch} "
                              f"already over the {bound_ms:g} ms bound"))
        elif objective == "cost" and (cost := priced(price(c, f, f.throughput))[0]) is None:
            pruned.append((c, "not priced on the shape: its figure does not carry over"))
        else:
            scored.append((c, f, f.throughput if objective == "qps" else cost))
    if not scored:
        return [], pruned
    best_c, _, best = (max if objective == "qps" else min)(scored, key=lambda x: x[2])
    survivors = []
    for c, f, s in scored:
        worse = best / s if objective == "qps" else s / best
        if worse > prune_factor:
            what = (f"closed-loop {s:,.1f} {unit}" if objective == "qps" else
                    f"flat-out ${s:.3g} per 1 M")
            pruned.append((c, f"{what} is {worse:,.2f}x worse than the best candidate's "
                              f"({best_c.label()}); pruned beyond {prune_factor:g}x"))
        else:
            survivors.append((c, f, s))
    survivors.sort(key=lambda x: -x[2] if objective == "qps" else x[2])
    return survivors, pruned


def priced(value) -> tuple[float | None, str]:
    """A price callable's answer as (USD per 1 M or None, the estimate's assumption)."""
    if isinstance(value, tuple):
        return value
    return value, ""


def autotune(candidates: list[Candidate], *, default: Candidate,
             closed_probe: Callable[[Candidate], ClosedFigure],
             qps_search: Callable[[Candidate, float], QpsSearch],
             price: Callable[[Candidate, ClosedFigure, float], float | None],
             bound_ms: float, objective: str, margin: float = DEFAULT_TUNE_MARGIN,
             top_n: int = TOP_N, prune_factor: float = PRUNE_FACTOR,
             unit: str = "samples/s",
             choose_queries: Callable[[list[float]], object] = lambda rates: None) -> Tuning:
    """closed_probe(c) -> its closed-loop figure; qps_search(c, start samples/s) -> its
    max-QPS search; price(c, figure, samples/s) -> USD per 1 M on the shape, or (USD, the
    estimate's assumption, "" when measured there), or None. Pure but for what those do;
    the prune rule in _prune, the stop rule here. top_n and prune_factor as TOP_N and
    PRUNE_FACTOR say (an exhaustive search: every candidate, no factor).
    choose_queries(rates) is called once, after pruning and before the first confirmation,
    with the closed-loop samples/s of every candidate that may be confirmed (the survivors,
    best first, then the default's when it is searched): every confirmation then runs the
    one query count it settles (its answer is the Tuning's `queries`)."""
    closed = [(c, closed_probe(c)) for c in candidates]
    survivors, pruned = _prune(closed, bound_ms, objective, price, prune_factor, unit)
    default_fig = next((f for c, f in closed if c == default), None) or closed_probe(default)
    rates = [f.throughput for _, f, _ in survivors]
    if _searchable(default_fig, bound_ms):
        rates.append(default_fig.throughput)
    queries = choose_queries(rates) if rates else None

    def confirm(c: Candidate, f: ClosedFigure) -> Confirmed:
        # only the default can come here failed or over the bound (a candidate would be
        # pruned): a Server test cannot do better than closed loop, and halving towards a
        # rate it might meet runs ever longer tests (1,000 queries at 4 QPS: 4 minutes)
        if not _searchable(f, bound_ms):
            return Confirmed(c, f, None)
        res = qps_search(c, f.throughput)
        cost, note = None, ""
        if res.max_qps is not None:
            best = ClosedFigure.of(res.best)
            cost, note = priced(price(c, replace(best, shape=best.shape or f.shape),
                                      res.max_qps))
        return Confirmed(c, f, res, cost, note)

    confirmed: list[Confirmed] = []
    gains: list[float] = []
    best_value = None
    reason = (f"every candidate that survived pruning confirmed ({len(survivors)})"
              if survivors else "every candidate was pruned")
    for i, (c, f, _) in enumerate(survivors):
        last = gains[-STOP_STEPS:]
        if i >= top_n and len(last) == STOP_STEPS and all(g < margin for g in last):
            reason = (f"the last {STOP_STEPS} confirmations gained under {margin:.1%} ("
                      + ", ".join(f"{g:.1%}" for g in last) + f"); {len(survivors) - i} "
                      "survivor(s) left unconfirmed")
            break
        conf = confirm(c, f)
        confirmed.append(conf)
        v = _value(objective, conf)
        if v is not None and (best_value is None or _better(objective, v, best_value)):
            if best_value is not None:
                gains.append(_gain(objective, v, best_value))
            best_value = v
        elif best_value is not None:
            gains.append(0.0)
    default_conf = next((x for x in confirmed if x.candidate == default), None)
    if default_conf is None:
        default_conf = confirm(default, default_fig)
    ranked = [x for x in confirmed if _value(objective, x) is not None]
    winner = None
    for x in ranked:
        if winner is None or _better(objective, _value(objective, x), _value(objective, winner)):
            winner = x
    d = _value(objective, default_conf)
    w = _value(objective, winner) if winner is not None else None
    gain = None
    if w is not None and d:  # % more QPS, or % cheaper
        gain = (w / d - 1) * 100 if objective == "qps" else (1 - w / d) * 100
    measured = confirmed + ([default_conf] if default_conf not in confirmed else [])
    front = pareto_front([x for x in measured if x.qps is not None],
                         key=lambda x: (x.p99_ms, -x.qps, x.cost))
    return Tuning(objective, bound_ms, margin, tuple(closed), tuple(pruned),
                  tuple(confirmed), default_conf, winner, reason, tuple(front), gain, queries)


def _searchable(f: ClosedFigure, bound_ms: float) -> bool:
    """Whether a candidate's figure gets a max-QPS search: an ok closed loop within the
    bound (only the default can be confirmed without one; a candidate would be pruned)."""
    return f.status == "ok" and bool(f.throughput) and (f.p99_ms or 0) <= bound_ms


def closed_by_sut(known: dict, probe: Callable[[Candidate], ClosedFigure]
                  ) -> Callable[[Candidate], ClosedFigure]:
    """autotune's closed_probe: a candidate's figure is its closed-loop configuration's
    (Candidate.closed_loop), the store's when `known` (that configuration -> a
    store.queries.closed_loop_known row) holds one, else probe(c), once per configuration.
    The tuner and its replay (engine/run/search/replays.replay_tune) both read their figures
    through this, from the same known rows and the same first probe, so the replay sees
    the figure the tuner used."""
    seen = {k: ClosedFigure.stored(row) for k, row in known.items()}

    def closed_probe(c: Candidate) -> ClosedFigure:
        key = c.closed_loop()
        if key not in seen:
            seen[key] = probe(c)
        return seen[key]
    return closed_probe
