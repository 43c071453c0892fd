"""Find the throughput-optimal batch size, or the largest batch that fits: grow, then bisect.

Doubling from `start` until a probe runs out of memory (the runner's cap), fails, reaches
`max_batch`, or doubling no longer pays. Each doubling (b, 2b) is judged on 2-3 paired
rounds probed in alternating order (b 2b, 2b b, b 2b), with the sweeps' sequential interval
on the paired log ratios (engine/analysis/sequential.py): the doubling goes on when 2b is
faster by more than `margin`, stops when the interval says it is not; still undecided after
the last round, the median of the paired ratios decides and the conclusion says so. After an out-of-memory stop, bisection between the largest batch that fitted and the one
that did not finds the memory limit more closely (at most `bisect_probes` more probes); a
bisection probe is measured once, and is the best if its one figure beats the best's.
Every probe is a normal run, stored and linked to the search's sweep. The result names the
throughput-optimal batch and, given a bound, the largest batch whose p99 stays under it.

Mode "fits" asks only the memory question: doubling (the last step clamped to `max_batch`)
until a probe runs out of memory, fails or reaches `max_batch`, then the same bisection; no
throughput rule stops it, and a noisy probe is not measured again (it fitted either way).
"""

from __future__ import annotations

import contextlib
import statistics
from dataclasses import dataclass, field, replace
from typing import Callable

from engine.run.process.held import HeldWorker
from engine.run.process.runner import Runner
from engine.run.jobs.requests import Request
from engine.run.jobs.requests import SweepRequest
from engine.analysis.sequential import LookPlan, VerdictRule, compare_rounds
from engine.analysis.stats import P99_MIN_SAMPLES
from engine.scenarios.inference.spec import RunSpec
from engine.core.limits import BATCH_RANGE, MARGIN_RANGE, choice, float_range
from engine.core.policy import MeasurementPolicy
from engine.core.record import RunRecord

__all__ = ["SearchResult", "batch_search", "stored_batch_search", "DEFAULT_MARGIN",
           "BatchSearchRequest", "MODES", "THROUGHPUT", "FITS"]

# A doubling that buys under 5 % more throughput is within this machine's run-to-run
# noise for one round (see a sweep's measurement noise): not worth the latency it costs.
DEFAULT_MARGIN = 0.05
# Each doubling (b, 2b) is decided on paired rounds probed in alternating order (b 2b, 2b b,
# b 2b): two processes here differ by up to 40 %, so one probe each would decide on noise.
# The first look is after 2 rounds, the last after this many.
PAIRED_ROUNDS = 3

# What a search answers: the throughput-optimal batch, or the largest batch that fits.
THROUGHPUT, FITS = "throughput", "fits"
MODES = (THROUGHPUT, FITS)


@dataclass(frozen=True)
class SearchResult:
    probes: tuple[RunRecord, ...]
    best_batch: int | None
    best_throughput: float | None
    p99_batch: int | None  # largest probed batch whose p99 is within the bound
    stop_reason: str
    largest_fit: int | None = None  # largest batch probed ok (None: nothing fitted)
    mode: str = THROUGHPUT

    @property
    def fits_only(self) -> bool:
        """Only the memory question was asked (FITS): no throughput-optimal batch."""
        return self.mode == FITS


def batch_search(base: RunSpec, *, runner: Runner, on_record: Callable[[RunRecord], None],
                 **search) -> SearchResult:
    """Every probe in one worker, held warm between probes (engine/run/process/held.py): the framework is
    imported once, and probes compared with each other were timed in one process. A probe
    that kills its worker (out of memory) gets a fresh one for the rest. Keyword arguments:
    _search's; on_event and known_stats are passed to every probe's run."""
    holder = HeldWorker(runner) if isinstance(runner, Runner) else contextlib.nullcontext(runner)
    with holder as via:
        return _search(base, runner=via, on_record=on_record, **search)


def _search(base: RunSpec, *, runner, on_record: Callable[[RunRecord], None],
            sweep_id: str | None = None, start: int = 1, max_batch: int = BATCH_RANGE[1],
            margin: float = DEFAULT_MARGIN, p99_bound_ms: float | None = None,
            bisect_probes: int = 3, on_event: Callable[[dict], None] | None = None,
            known_stats=None, mode: str = THROUGHPUT) -> SearchResult:
    choice("mode", mode, MODES)
    probes: list[RunRecord] = []

    noisy: list[int] = []

    raised = ""
    if p99_bound_ms is not None and base.policy.min_iters < P99_MIN_SAMPLES:
        # A p99 from fewer samples is an extreme order statistic: a bound on it would be
        # decided by one or two calls. Every probe times at least P99_MIN_SAMPLES.
        base = replace(base, policy=replace(base.policy, min_iters=P99_MIN_SAMPLES))
        raised = f"; min_iters raised to {P99_MIN_SAMPLES} so that p99 is measured"

    def probe(batch: int) -> RunRecord:
        # A probe disturbed by interference (noisy: measured, flagged) is measured once
        # more; if it is still noisy the second figure is used, and the conclusion says so.
        for attempt in range(2):
            [rec] = runner.run([replace(base, batch_size=batch).validate()],
                               on_record=on_record, sweep_id=sweep_id, on_event=on_event,
                               known_stats=known_stats)
            probes.append(rec)
            if mode == FITS or not (rec.status == "ok" and rec.validity == "noisy"):
                return rec
        noisy.append(batch)
        return rec

    def ok(rec):
        return rec.status == "ok" and rec.throughput is not None

    best: tuple[int, float] | None = None  # (batch, its throughput)
    batch, fitted, failed_at, reason = start, None, None, ""
    undecided: list[int] = []

    def ended(rec) -> str:
        nonlocal failed_at
        if rec.status == "oom":
            failed_at = rec.batch_size
            return f"out of memory at batch {rec.batch_size}"
        # error, timeout, killed: no figure to go on
        return f"batch {rec.batch_size} ended {rec.status}: {rec.reason[:120]}"

    if mode == FITS:
        while True:
            rec = probe(batch)
            if not ok(rec):
                reason = ended(rec)
                break
            fitted = batch
            if best is None or rec.throughput > best[1]:
                best = (batch, rec.throughput)
            if batch >= max_batch:
                reason = f"reached the largest batch allowed ({max_batch}): every batch probed fits"
                break
            batch = min(batch * 2, max_batch)
    else:
        rule = VerdictRule(margin, LookPlan(2, PAIRED_ROUNDS))
        while True:
            if batch * 2 > max_batch:
                if fitted is None:  # the start alone: nothing to pair it with
                    rec = probe(batch)
                    if not ok(rec):
                        reason = ended(rec)
                        break
                    fitted, best = batch, (batch, rec.throughput)
                reason = f"reached the largest batch allowed ({max_batch})"
                break
            small, large = batch, 2 * batch
            thr: dict[int, dict[int, float]] = {small: {}, large: {}}
            bad, cmp = None, None
            for r in range(1, PAIRED_ROUNDS + 1):
                for b in ((small, large) if r % 2 else (large, small)):  # b 2b, 2b b, b 2b
                    rec = probe(b)
                    if not ok(rec):
                        bad = rec
                        break
                    thr[b][r] = rec.throughput
                if bad is not None:
                    break
                if r >= 2:
                    # speedup of 2b over b: latency per sample is 1 / throughput
                    cmp = compare_rounds({k: 1 / v for k, v in thr[large].items()},
                                         {k: 1 / v for k, v in thr[small].items()}, rule)
                    if cmp.ci_low > 1 + margin or cmp.ci_high <= 1 + margin:
                        break
            if bad is not None:
                if thr[small]:
                    best = (small, statistics.median(thr[small].values()))
                    fitted = small
                reason = ended(bad)
                break
            fitted = large
            ratio = cmp.speedup
            if not (cmp.ci_low > 1 + margin or cmp.ci_high <= 1 + margin):
                # Undecided within the rounds allowed: one wild round must not decide it,
                # so the median of the paired ratios does, and the conclusion says so.
                undecided.append(large)
                ratio = statistics.median(thr[large][k] / thr[small][k] for k in thr[small])
            if ratio > 1 + margin:
                best = (large, statistics.median(thr[large].values()))
                batch = large
                continue
            faster = large if ratio > 1 else small
            best = (faster, statistics.median(thr[faster].values()))
            reason = (f"throughput stopped improving by more than {margin:.0%} at batch "
                      f"{large}: {large} vs {small} {cmp.speedup:.3f}x, 95 % sequential "
                      f"interval {cmp.ci_low:.3f}-{cmp.ci_high:.3f} over {cmp.rounds} paired "
                      "rounds")
            break
    largest_fit = fitted
    if failed_at is not None and fitted is not None:
        lo, hi = fitted, failed_at
        for _ in range(bisect_probes):
            if hi - lo <= max(1, lo // 8):  # within an eighth: close enough to the limit
                break
            mid = (lo + hi) // 2
            rec = probe(mid)
            if ok(rec):
                lo = mid
                if rec.throughput > best[1]:  # a single probe: see the module's note
                    best = (mid, rec.throughput)
            else:
                hi = mid
        largest_fit = lo
        reason += f"; the largest batch that fits lies in [{lo}, {hi})"
    if noisy:
        reason += (f"; batch {', '.join(map(str, dict.fromkeys(noisy)))} stayed noisy after a second "
                   "measurement: treat those figures with care")
    if undecided:
        reason += (f"; batch {', '.join(map(str, undecided))} undecided after "
                   f"{PAIRED_ROUNDS} paired rounds: judged on the median of its paired ratios")
    reason += raised
    p99_batch = None
    if p99_bound_ms is not None:
        p99s: dict[int, list[float]] = {}
        for r in probes:
            if ok(r):
                p99s.setdefault(r.batch_size, []).append(r.p99_ms)
        # a batch measured in several rounds counts only if every one of them is within
        within = [b for b, v in p99s.items() if max(v) <= p99_bound_ms]
        p99_batch = max(within) if within else None
    return SearchResult(tuple(probes), best[0] if best else None,
                        best[1] if best else None, p99_batch, reason, largest_fit, mode)


def stored_batch_search(base: RunSpec, *, db, runner: Runner, command: str,
                        on_start: Callable[[str], None] = lambda sweep_id: None,
                        on_stored: Callable[[RunRecord], None] = lambda rec: None,
                        **search) -> tuple[str, SearchResult]:
    """batch_search with every probe stored under one sweep, as a sweep's runs are (and
    with the stored params/FLOPs passed on, so probes do not count them again): the CLI and
    the dashboard both search through this. Returns (sweep_id, result)."""
    from engine.run.jobs.sweep import open_sweep

    sweep = open_sweep(db, command=command, on_stored=on_stored)
    on_start(sweep.sweep_id)
    return sweep.sweep_id, batch_search(base, runner=runner, on_record=sweep.store,
                                        sweep_id=sweep.sweep_id,
                                        known_stats=sweep.known_stats, **search)


@dataclass(frozen=True)
class BatchSearchRequest(Request):
    """An optimal-batch search as a dashboard job: its probes are inference runs."""

    scenario = SweepRequest.scenario

    model: str
    framework: str
    runtime: str | None
    threads: int
    image_size: int | None = None
    precision: str = "fp32"
    start: int = 1
    max_batch: int = BATCH_RANGE[1]
    margin: float = DEFAULT_MARGIN
    p99_bound_ms: float | None = None
    mode: str = THROUGHPUT  # or FITS: the largest batch that fits, no throughput rule
    policy: MeasurementPolicy = field(default_factory=lambda: MeasurementPolicy(
        warmup_iters=3, min_time_s=1.0, min_iters=10))
    timeout_s: float = 600.0
    memory_cap_bytes: int | None = None
    rounds: int = 1  # a search is one pass; kept so views treat both kinds alike
    seed: int | None = None

    @property
    def models(self):
        return (self.model,)

    @property
    def frameworks(self):
        return (self.framework,)

    def base(self) -> RunSpec:
        return RunSpec(self.model, self.framework, self.start, self.threads,
                       image_size=self.image_size, precision=self.precision,
                       runtime=self.runtime, policy=self.policy).validate()

    def _expand(self):
        base = self.base()
        float_range("margin", self.margin, *MARGIN_RANGE)
        choice("mode", self.mode, MODES)
        # The most probes it can take (a noisy probe measured again aside): doublings up to
        # max_batch (paired rounds of two probes each in throughput mode, the last one
        # clamped to max_batch in fits mode), plus 3 bisections.
        steps = max(1, (self.max_batch // max(self.start, 1)).bit_length())
        n = (steps + 1 if self.mode == FITS else max(1, 2 * PAIRED_ROUNDS * (steps - 1))) + 3
        return [base] * n, []

    def same_work(self, other) -> bool:
        return self == other

    def label(self) -> str:
        return f"batch search {self.model} × {self.framework} ({self.runtime})"

    def run(self, specs, *, db, runner: Runner, seed: int, on_start, on_stored,
            on_event, on_plan=lambda step: None, on_stop=lambda why: None,
            command: str | None = None) -> str:
        """Probe, store every probe, and say what was found (on_stop(why) too)."""
        from engine.present.search_text import batch_conclusion

        def probe_event(ev):  # a search's progress names the probe where a sweep's the round
            on_event(ev, probe_event.count)
        probe_event.count = 1

        def stored(rec):
            probe_event.count += 1
            on_stored(rec)
        _, res = stored_batch_search(
            self.base(), db=db, runner=runner,
            command=command or f"dashboard batch-search {self.model} {self.framework}",
            on_start=on_start, on_stored=stored, start=self.start, max_batch=self.max_batch,
            margin=self.margin, p99_bound_ms=self.p99_bound_ms, on_event=probe_event,
            mode=self.mode)
        on_stop(res.stop_reason)
        return batch_conclusion(res, self.p99_bound_ms)
