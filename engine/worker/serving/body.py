"""The serving body of a worker: one MLPerf LoadGen test per run against a warm system under
test (SUT), built the way inference builds it (engine.worker.inference.body's Models: a
backend per runtime, catalog model or a user's file).

LoadGen owns the arrival schedule, the clock and the verdict; the SUT only answers. The
dispatch stays lean: SingleStream and MultiStream answer inside LoadGen's IssueQuery call
(LoadGen waits for each query before the next), Server and Offline queue each sample and
one batcher thread per replica calls its model on up to max_batch of them, as Triton's
dynamic batcher does: a batch leaves when it is full or when its oldest sample has waited
max_wait_ms. One replica is this process's model; R replicas are R processes of their own
(engine/worker/serving/replica.py), each on whole cores of its own, fed by their batcher threads. The query sample library holds `samples` generated inputs in memory; the
backends' generated inputs for each batch size stand in for the samples LoadGen picks
(loading a sample is a no-op), so a query costs LoadGen's callback, one model call and
QuerySamplesComplete. Every query's latency is recorded by the SUT (engine/scenarios/
serving.py, LATENCY_SOURCE): LoadGen's logs give percentiles, not a per-query list.
During the test a thread of its own (_Live, not LoadGen's query path) reports every
LIVE_PROGRESS_S what completed so far, its rate and the scenario's tail percentile of
those latencies, read from the list the dispatch already appends to.
"""

from __future__ import annotations

import collections
import contextlib
import importlib.metadata
import os
import shutil
import statistics
import tempfile
import threading
import time

from engine.core.protocol import Progress
from engine.scenarios.serving.messages import ServeResult
from engine.scenarios.serving.loadgen import LatencyHistogram
from engine.scenarios.serving.spec import LIVE_PROGRESS_S, LOADGEN_SCENARIO, SCENARIO_PERCENTILE
from engine.worker.harness import Frame, peak_resident_bytes, resident_bytes
from engine.worker.inference.body import Models
from engine.worker.serving.replica import ReplicaSet
from engine.worker.serving.model import warm_model

__all__ = ["run_group", "EXPECTED_LATENCY_FLOOR_NS"]

# LoadGen pre-generates min_duration / expected latency queries (SingleStream,
# MultiStream). A model call of a few hundred ns (the selftest identity) would make that
# tens of millions; a query also costs LoadGen's own work and our callback, microseconds,
# so an expectation under this floor only pre-generates queries that are never issued.
EXPECTED_LATENCY_FLOOR_NS = 5_000
# Offline's one query holds expected QPS x min duration samples: a run faster than the
# warm-up's estimate (caches warmer, no first-call costs) ends before the minimum duration,
# INVALID. MLPerf's advice is to overstate it; twice the estimate only lengthens the test.
OFFLINE_QPS_MARGIN = 2.0
# $BENCH_LIVE_PROGRESS_S: the live report's interval in seconds (tests shorten it to see
# several reports in a sub-second test); LIVE_PROGRESS_S otherwise.
LIVE_INTERVAL_ENV = "BENCH_LIVE_PROGRESS_S"


def run_group(runs, frame: Frame) -> None:
    models = Models(runs[0][1].sut)
    frame.ready({**models.backend.versions(), "mlperf_loadgen": _loadgen_version()},
                models.backend.effective_threads())
    for run_id, spec, known in runs:
        frame.guarded(run_id, spec,
                      lambda run_id=run_id, spec=spec, known=known:
                      _serve(frame, models, run_id, spec, known),
                      on_failure=models.forget,
                      failure_fields=lambda spec=spec: models.digest_fields(spec.sut))


def _loadgen_version() -> str:
    return importlib.metadata.version("mlcommons-loadgen")


def _serve(frame: Frame, models: Models, run_id: str, spec, known) -> ServeResult:
    import mlperf_loadgen as lg

    progress = frame.progress(run_id)
    with contextlib.ExitStack() as stack:
        if spec.replicas > 1:  # R processes of their own behind this one queue
            front_before = resident_bytes()
            reps = stack.enter_context(ReplicaSet(spec, run_id, known, progress))
            first = reps.warm[0]
            lanes, context = reps.lanes, contextlib.nullcontext
            warm, first_s = list(first.warmup_ns), first.first_forward_s
        else:
            warmed = warm_model(models, spec, known, progress)
            steps, context = warmed.steps, models.backend.context
            lanes = [lambda n, steps=steps: steps[n]()]
            warm, first_s = warmed.warm, warmed.first_s
        expected_ns = max(EXPECTED_LATENCY_FLOOR_NS, int(statistics.median(warm)))
        settings = _settings(lg, spec, expected_ns)
        out = stack.enter_context(_Folder())
        log = lg.LogSettings()
        log.log_output.outdir = out
        log.log_output.copy_summary_to_stdout = False
        log.enable_trace = False
        server = (_Batcher(lg, lanes, spec, context)
                  if spec.scenario in ("server", "offline") else None)
        answer = _Stream(lg, lanes[0], context) if server is None else server
        sut_handle = lg.ConstructSUT(answer.issue, lambda: None)
        qsl = lg.ConstructQSL(spec.samples, spec.samples, lambda s: None, lambda s: None)
        progress("serve", 0)
        live = _Live(answer, spec, lambda **figures: frame.emit(
            Progress(run_id, "serve", 0, **figures)))
        t = time.perf_counter()
        try:
            with context():  # the warm steps' context, for LoadGen's thread's calls too
                lg.StartTestWithLogSettings(sut_handle, qsl, settings, log)
        finally:
            live.stop()
            if server is not None:
                server.stop()
            lg.DestroyQSL(qsl)
            lg.DestroySUT(sut_handle)
        measured_s = time.perf_counter() - t
        if answer.error is not None:  # the model failed inside LoadGen's test
            raise answer.error
        summary = _read(out, "mlperf_log_summary.txt")
        detail = _read(out, "mlperf_log_detail.txt")
    figures = dict(queries=answer.queries, model_calls=answer.calls,
                   expected_latency_ns=expected_ns, summary_log=summary, detail_log=detail,
                   loadgen_version=_loadgen_version(), first_forward_s=first_s,
                   warmup_ns=tuple(warm), samples_ns=tuple(answer.latencies),
                   warmup_s=sum(warm) / 1e9, measured_s=measured_s,
                   stop_reason="LoadGen's test ended")
    if spec.replicas > 1:
        return _replicated_result(run_id, reps, front_before, figures)
    backend, stats = models.backend, warmed.stats
    return ServeResult(
        run_id, load_s=models.load_s, params=stats.params,
        params_trainable=stats.params_trainable, flops_per_sample=stats.flops_per_sample,
        flops_method=stats.flops_method, prepare_s=backend.prepare_s,
        model_baseline_bytes=models.baseline,
        reference_bytes=backend.reference_bytes() if hasattr(backend, "reference_bytes") else 0,
        device_peak_bytes=backend.device_peak_bytes(), **figures,
        **models.digest_fields(spec.sut))


def _replicated_result(run_id: str, reps: ReplicaSet, front_before: int | None,
                       figures: dict) -> ServeResult:
    """The run's result from its replicas: the first's build, counts and file digest; the
    memory of the whole tree: this front's peak plus each replica's, over a baseline of this
    front's resident set before the replicas started plus each replica's before its model
    (and its reference apart), so what the model adds is counted once per replica."""
    first = reps.warm[0]
    peaks = reps.peak_rss_bytes()
    front = peak_resident_bytes()
    return ServeResult(
        run_id, load_s=first.load_s, params=first.params,
        params_trainable=first.params_trainable, flops_per_sample=first.flops_per_sample,
        flops_method=first.flops_method, prepare_s=first.prepare_s,
        peak_rss_bytes=front + peaks if peaks is not None and front is not None else None,
        peak_rss_method=(f"VmHWM of this front (LoadGen, its queue) plus each of the "
                         f"{len(reps.warm)} replica processes'"),
        model_baseline_bytes=_sum([front_before, *(w.model_baseline_bytes
                                                  for w in reps.warm)]),
        reference_bytes=_sum(w.reference_bytes or 0 for w in reps.warm),
        model_sha256=first.model_sha256, model_bytes=first.model_bytes,
        replica_cpus=tuple(",".join(map(str, c)) for c in reps.cores),
        replica_calls=tuple(rep.calls for rep in reps.replicas), **figures)


def _sum(values):
    values = list(values)
    return None if any(v is None for v in values) else sum(values)


class _Folder:
    """A temporary folder for LoadGen's logs, removed on leaving."""

    def __enter__(self) -> str:
        self.path = tempfile.mkdtemp(prefix="bench-loadgen-")
        return self.path

    def __exit__(self, *exc) -> bool:
        shutil.rmtree(self.path, ignore_errors=True)
        return False


def _settings(lg, spec, expected_ns: int):
    ts = lg.TestSettings()
    ts.scenario = getattr(lg.TestScenario, LOADGEN_SCENARIO[spec.scenario])
    ts.mode = lg.TestMode.PerformanceOnly
    # a fixed query count: no minimum duration, so LoadGen generates exactly that many
    ts.min_duration_ms = int(round(spec.loadgen_min_duration_s * 1000))
    ts.min_query_count = spec.loadgen_min_queries
    ts.qsl_rng_seed = ts.sample_index_rng_seed = ts.schedule_rng_seed = spec.seed
    ts.single_stream_expected_latency_ns = expected_ns
    ts.multi_stream_expected_latency_ns = expected_ns
    if spec.scenario == "server":
        ts.server_target_qps = spec.target_qps
        ts.server_target_latency_ns = spec.server_target_latency_ns
    # Offline: the QPS the user expects, else what a warm max batch did
    ts.offline_expected_qps = (spec.target_qps or OFFLINE_QPS_MARGIN * spec.batch_size
                               * spec.replicas * 1e9 / expected_ns)
    return ts


def _read(folder: str, name: str) -> str:
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


class _Live:
    """The test's live figures from a thread of its own, every LIVE_PROGRESS_S and once as
    it ends: the latencies completed so far (the dispatch's own list, read by length and a
    slice of the new ones: nothing is added to LoadGen's query path), their rate since the
    test began and the scenario's tail percentile (LatencyHistogram: each report costs the
    new latencies, not all of them)."""

    def __init__(self, answer, spec, report):
        self.answer, self.report = answer, report
        self.pct = SCENARIO_PERCENTILE.get(spec.scenario)
        self.unit = "sample" if spec.scenario == "offline" else "query"
        self.histogram, self.seen = LatencyHistogram(), 0
        self.interval = float(os.environ.get(LIVE_INTERVAL_ENV) or LIVE_PROGRESS_S)
        self.done = threading.Event()
        self.t0 = time.perf_counter()
        self.thread = threading.Thread(target=self._loop, name="live", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.done.set()
        self.thread.join()
        self._report()

    def _loop(self) -> None:
        while not self.done.wait(self.interval):
            self._report()

    def _report(self) -> None:
        latencies = self.answer.latencies
        n = len(latencies)
        self.histogram.add(latencies[self.seen:n])
        self.seen = n
        elapsed = time.perf_counter() - self.t0
        tail = self.histogram.percentile_ns(self.pct) if self.pct is not None else None
        self.report(completed=n, per_s=n / elapsed if elapsed > 0 else None, unit=self.unit,
                    tail_pct=self.pct if tail is not None else None,
                    tail_ms=tail / 1e6 if tail is not None else None)


class _Stream:
    """SingleStream and MultiStream: LoadGen waits for each query before it issues the next,
    so the query is answered inside its IssueQuery call: one model call of its samples.
    The backend's context (torch's inference mode) is thread-local, and the call runs on
    LoadGen's thread: it is entered around each call (about a microsecond)."""

    def __init__(self, lg, call, context):
        self.lg, self.call, self.context = lg, call, context
        self.latencies: list[int] = []
        self.queries = self.calls = 0
        self.error: BaseException | None = None

    def issue(self, qs) -> None:
        t0 = time.perf_counter_ns()
        lg = self.lg
        try:
            with self.context():
                self.call(len(qs))
        except BaseException as exc:  # noqa: BLE001 - re-raised after LoadGen's test ends
            self.error = self.error or exc
        responses = [lg.QuerySampleResponse(q.id, 0, 0) for q in qs]
        self.latencies.append(time.perf_counter_ns() - t0)
        self.queries += 1
        self.calls += 1
        lg.QuerySamplesComplete(responses)


class _Batcher:
    """Server and Offline: IssueQuery queues its samples; one thread per replica (one lane:
    this process's model, or a replica process's) takes up to max_batch of them when the
    batch is full or its oldest sample has waited max_wait_ms (Triton's dynamic batcher;
    0: whatever is queued), calls its model once, and completes them. Whichever replica is
    free takes the next batch. A sample's latency runs from its query's IssueQuery call to
    its completion. After a failed call the batches still queued are completed without a
    call, so LoadGen's test ends at once and the failure is the run's."""

    def __init__(self, lg, lanes, spec, context):
        self.lg, self.context = lg, context
        self.max_batch = spec.batch_size
        self.max_wait_ns = int(spec.max_wait_ms * 1e6)
        self.queue: collections.deque = collections.deque()  # (issued ns, sample id)
        self.cv = threading.Condition()
        self.latencies: list[int] = []
        self.queries = self.calls = 0
        self.error: BaseException | None = None
        self.running = True
        self.threads = [threading.Thread(target=self._loop, args=(call,), daemon=True,
                                         name=f"batcher-{i}") for i, call in enumerate(lanes)]
        for thread in self.threads:
            thread.start()

    def issue(self, qs) -> None:
        t0 = time.perf_counter_ns()
        with self.cv:
            self.queue.extend((t0, q.id) for q in qs)
            self.queries += 1
            self.cv.notify()

    def stop(self) -> None:
        with self.cv:
            self.running = False
            self.cv.notify_all()
        for thread in self.threads:
            thread.join()

    def _take(self) -> list | None:
        """The next batch, waiting as the batcher's rule says; None when stopped. Never an
        empty one: while this replica waits for its batch to fill, another may take what was
        queued, and then it waits for the next sample again."""
        with self.cv:
            while True:
                while self.running and not self.queue:
                    self.cv.wait()
                if not self.queue:
                    return None
                # wait for a full batch until the oldest queued sample has waited max wait
                # (the head may change: another replica takes batches meanwhile)
                while (self.max_wait_ns and self.running and self.error is None
                       and 0 < len(self.queue) < self.max_batch):
                    left = self.queue[0][0] + self.max_wait_ns - time.perf_counter_ns()
                    if left <= 0:
                        break
                    self.cv.wait(left / 1e9)
                if self.queue:
                    break
            n = min(self.max_batch, len(self.queue))
            batch = [self.queue.popleft() for _ in range(n)]
            if self.queue:  # another replica may take the rest now
                self.cv.notify()
            return batch

    def _loop(self, call) -> None:
        with self.context():  # thread-local (torch's inference mode): this thread's own
            self._serve(call)

    def _serve(self, call) -> None:
        lg = self.lg
        while (batch := self._take()) is not None:
            if self.error is None:
                try:
                    call(len(batch))
                except BaseException as exc:  # noqa: BLE001 - re-raised after the test
                    with self.cv:
                        self.error = self.error or exc
            responses = [lg.QuerySampleResponse(sid, 0, 0) for _, sid in batch]
            done = time.perf_counter_ns()
            with self.cv:
                self.latencies.extend(done - t0 for t0, _ in batch)
                self.calls += 1
            lg.QuerySamplesComplete(responses)
