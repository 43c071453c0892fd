"""Find the throughput-optimal batch size: grow the batch, then bisect.

Doubling from `start` until a probe runs out of memory (the runner's cap), fails, reaches
`max_batch`, or no longer improves throughput by more than `margin` over the best so far.
After an out-of-memory stop, bisection between the largest batch that fitted and the one
that did not finds the memory limit more closely (at most `bisect_probes` more probes).
Every probe is a normal run, stored and linked to the search's sweep. The result names the
throughput-optimal batch and, given a bound, the largest batch whose p99 stays under it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from engine.record import RunRecord
from engine.runner import Runner
from engine.spec import BATCH_RANGE, RunSpec

__all__ = ["SearchResult", "batch_search", "stored_batch_search", "DEFAULT_MARGIN"]

# A doubling that buys under 5 % more throughput is within this machine's run-to-run
# noise for one round (see the noise floor of a sweep): not worth the latency it costs.
DEFAULT_MARGIN = 0.05


@dataclass(frozen=True)
class SearchResult:
    probes: tuple[RunRecord, ...]
    best_batch: int | None
    best_throughput: float | None
    p99_batch: int | None  # largest probed batch whose p99 is within the bound
    stop_reason: str


def batch_search(base: RunSpec, *, runner: Runner, on_record: Callable[[RunRecord], None],
                 sweep_id: str | None = None, start: int = 1, max_batch: int = BATCH_RANGE[1],
                 margin: float = DEFAULT_MARGIN, p99_bound_ms: float | None = None,
                 bisect_probes: int = 3) -> SearchResult:
    probes: list[RunRecord] = []

    noisy: list[int] = []

    def probe(batch: int) -> RunRecord:
        # A probe ruined by interference (invalid, but measured) is measured once more; if
        # it is still invalid its figure is used, and the conclusion says so.
        for attempt in range(2):
            [rec] = runner.run([replace(base, batch_size=batch).validate()],
                               on_record=on_record, sweep_id=sweep_id)
            probes.append(rec)
            if not (rec.status == "invalid" and rec.throughput is not None):
                return rec
        noisy.append(batch)
        return rec

    def ok(rec):
        return rec.status in ("ok", "invalid") and rec.throughput is not None

    best: RunRecord | None = None
    batch, fitted, failed_at, reason = start, None, None, ""
    while True:
        rec = probe(batch)
        if rec.status == "oom":
            failed_at, reason = batch, f"out of memory at batch {batch}"
            break
        if not ok(rec):  # error, timeout, killed: no figure to go on
            reason = f"batch {batch} ended {rec.status}: {rec.reason[:120]}"
            break
        fitted = batch
        if best is not None and rec.throughput <= best.throughput * (1 + margin):
            if rec.throughput > best.throughput:
                best = rec
            reason = (f"throughput stopped improving by more than {margin:.0%} at batch "
                      f"{batch}")
            break
        best = rec
        if batch * 2 > max_batch:
            reason = f"reached the largest batch allowed ({max_batch})"
            break
        batch *= 2
    if failed_at is not None and fitted is not None:
        lo, hi = fitted, failed_at
        for _ in range(bisect_probes):
            if hi - lo <= max(1, lo // 8):  # within an eighth: close enough to the limit
                break
            mid = (lo + hi) // 2
            rec = probe(mid)
            if ok(rec):
                lo = mid
                if rec.throughput > best.throughput:
                    best = rec
            else:
                hi = mid
        reason += f"; the largest batch that fits lies in [{lo}, {hi})"
    if noisy:
        reason += (f"; batch {', '.join(map(str, noisy))} stayed invalid (too noisy) after a "
                   "second measurement: treat those figures with care")
    p99_batch = None
    if p99_bound_ms is not None:
        within = [r.batch_size for r in probes if ok(r) and r.p99_ms <= p99_bound_ms]
        p99_batch = max(within) if within else None
    return SearchResult(tuple(probes), best.batch_size if best else None,
                        best.throughput if best else None, p99_batch, reason)


def stored_batch_search(base: RunSpec, *, db, runner: Runner, command: str,
                        on_start: Callable[[str], None] = lambda sweep_id: None,
                        on_stored: Callable[[RunRecord], None] = lambda rec: None,
                        **search) -> tuple[str, SearchResult]:
    """batch_search with every probe stored under one sweep, as a sweep's runs are (and
    with the stored params/FLOPs passed on, so probes do not count them again): the CLI and
    the dashboard both search through this. Returns (sweep_id, result)."""
    from engine.sweep import open_sweep

    sweep_id, store = open_sweep(db, runner, command=command, on_stored=on_stored)
    on_start(sweep_id)
    return sweep_id, batch_search(base, runner=runner, on_record=store, sweep_id=sweep_id,
                                  **search)
