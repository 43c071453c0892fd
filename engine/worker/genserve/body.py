"""The worker body of serving a language model: the front. It starts the engine process
(engine_proc.py: the model, the engine's step loop, the check and warm-up), then runs one
test against it: LoadGen in token-latency mode (Server, Offline, SingleStream) or a closed
loop of N users.

LoadGen's IssueQuery writes each request to an engine ("A <id> <sample>"; with replicas, to
the one with the fewest in flight); one reader thread per engine reads its token lines and
makes LoadGen's calls: FirstTokenComplete when a
request's first token appears (not in Offline, where LoadGen takes none), then
QuerySamplesComplete with its token count when it is done. Both calls of a request come
from that one thread, as LoadGen's per-thread logs need (the reference SUT does the same).
The front stamps each request's issue, first token and completion with
time.perf_counter_ns() as it makes those calls: the raw readings every figure is derived
from (engine/scenarios/genserve/metrics.py). The closed loop keeps `users` requests in
flight: the reader sends the next as one completes, until min_query_count were sent.

Imports neither torch nor OpenVINO: only the engine process does.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from engine.core.protocol import Progress
from engine.scenarios.genserve.engines import engine_row
from engine.scenarios.genserve.messages import GenServeResult
from engine.scenarios.genserve.spec import LOADGEN_SCENARIOS
from engine.scenarios.serving.loadgen import LatencyHistogram
from engine.worker.errors import OutputMismatch
from engine.worker.generation.body import workdir
from engine.worker.generation.prepare import ensure
from engine.worker.generation.session import Refused
from engine.worker.harness import Frame, peak_resident_bytes
from engine.worker.serving.body import LIVE_INTERVAL_ENV, _Folder, _read
from engine.worker.serving.replica import replica_cores
from engine.scenarios.serving.spec import LIVE_PROGRESS_S

__all__ = ["run_group", "EngineProcess", "ENGINE_START_TIMEOUT_S"]

ENGINE_START_TIMEOUT_S = 1800.0  # an export of the 1 B model and its first compile
# Offline's one query holds expected QPS x min duration samples (LoadGen's rule); MLPerf
# advises overstating it, as serving's body does
OFFLINE_QPS_MARGIN = 2.0


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def run_group(runs, frame: Frame) -> None:
    frame.ready({"mlperf_loadgen": _version("mlcommons-loadgen")}, {})
    for run_id, spec, _ in runs:
        frame.guarded(run_id, spec, lambda run_id=run_id, spec=spec: _serve(frame, run_id,
                                                                            spec))


class EngineProcess:
    """The engine process of one run, and the lines to and from it. cores: the CPUs it
    pins itself to before it imports anything (a replica's); None: the worker's."""

    def __init__(self, spec, folder, reference, cores=None):
        self.err = tempfile.TemporaryFile()
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
        self.proc = subprocess.Popen([sys.executable, "-m", "engine.worker.genserve.engine_proc"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err, env=env, bufsize=0)
        cfg = {"spec": spec.to_dict(), "module": engine_row(spec.runtime).path,
               "folder": str(folder), "workdir": str(workdir()), "reference": str(reference),
               "cores": list(cores) if cores else None}
        self.lock = threading.Lock()
        self.asked_quit = False
        self._write(json.dumps(cfg))

    def _write(self, line: str) -> None:
        with self.lock:
            self.proc.stdin.write((line + "\n").encode())
            self.proc.stdin.flush()

    def ready(self) -> dict:
        """The engine's build, check and warm-up; Refused, OutputMismatch or RuntimeError
        with its reason when it could not start."""
        line = self.proc.stdout.readline().decode()
        if line.startswith("R "):
            return json.loads(line[2:])
        if line.startswith("F "):
            _, kind, reason = line.rstrip("\n").split(" ", 2)
            reason = json.loads(reason)
            raise {"refused": Refused, "mismatch": OutputMismatch}.get(
                kind, RuntimeError)(reason)
        self.proc.wait(timeout=60)
        self.err.seek(0)
        tail = self.err.read().decode(errors="replace")[-2000:]
        raise RuntimeError(f"the engine process ended (exit {self.proc.returncode}) before "
                           f"it was ready: {tail or 'no output'}")

    def add(self, rid: int, sample: int) -> None:
        self._write(f"A {rid} {sample}")

    def lines(self):
        """(rid, tokens, done) for each token line until the stats line, then its dict."""
        for raw in self.proc.stdout:
            if raw.startswith(b"T "):
                _, rid, n, d = raw.split()
                yield int(rid), int(n), d == b"1"
            elif raw.startswith(b"S "):
                yield json.loads(raw[2:])
                return

    def quit(self) -> None:
        """Ask the engine to end (it answers with its stats line first); once."""
        if self.asked_quit or self.proc.poll() is not None:
            return
        self.asked_quit = True
        try:
            self._write("Q")
        except OSError:  # it is gone already
            pass

    def close(self) -> None:
        self.quit()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.err.close()


class _Engines:
    """spec.replicas engine processes behind one front, each pinned to whole cores of its
    own out of the worker's (serving's replica_cores); a request goes to the one with the
    fewest requests in flight (the lowest index on a tie), as a least-loaded balancer
    would. One reader thread per engine makes LoadGen's calls for that engine's requests,
    so both calls of a request come from one thread."""

    def __init__(self, spec, folder, reference):
        self.cores = (replica_cores(os.sched_getaffinity(0), spec.replicas,
                                    spec.intra_threads) if spec.replicas > 1 else [None])
        self.procs = [EngineProcess(spec, folder, reference, c) for c in self.cores]
        self.inflight = [0] * len(self.procs)
        self.where: dict[int, int] = {}
        self.lock = threading.Lock()
        self.stats: list[dict] = []

    def ready(self) -> list[dict]:
        return [p.ready() for p in self.procs]

    def add(self, rid: int, sample: int) -> None:
        with self.lock:
            i = min(range(len(self.procs)), key=self.inflight.__getitem__)
            self.inflight[i] += 1
            self.where[rid] = i
        self.procs[i].add(rid, sample)

    def finished(self, rid: int) -> None:
        with self.lock:
            self.inflight[self.where.pop(rid)] -= 1

    def read(self, reqs, on_first, on_done) -> list[threading.Thread]:
        threads = [threading.Thread(target=_reader, args=(p, self, reqs, on_first, on_done,
                                                          self.stats),
                                    daemon=True, name=f"engine-reader-{i}")
                   for i, p in enumerate(self.procs)]
        for t in threads:
            t.start()
        return threads

    def quit(self) -> None:
        for p in self.procs:
            p.quit()

    def close(self) -> None:
        for p in self.procs:
            p.close()

    def merged_stats(self) -> dict:
        """One engine's counters as they are; several: each one's, the drops and the peak
        resident sets summed."""
        if len(self.stats) == 1:
            return dict(self.stats[0])
        peaks = [s.get("engine_peak_rss_bytes") for s in self.stats]
        return {"replicas": list(self.stats),
                "ignored": sum(s.get("ignored") or 0 for s in self.stats),
                "engine_peak_rss_bytes": (sum(peaks) if peaks and None not in peaks
                                          else None)}


class _Requests:
    """Every request's readings (ns since the test's start), in completion order, and the
    live state of those in flight."""

    def __init__(self, t0: int):
        self.t0 = t0
        self.issued: dict[int, tuple[int, int]] = {}  # rid -> (sample, issue ns)
        self.first: dict[int, int] = {}
        self.done: list[tuple[int, int, int, int, int]] = []  # sample, issue, first, done, n
        self.ttft = LatencyHistogram()
        self.lock = threading.Lock()

    def issue(self, rid: int, sample: int) -> None:
        with self.lock:
            self.issued[rid] = (sample, time.perf_counter_ns() - self.t0)


def _serve(frame: Frame, run_id: str, spec) -> GenServeResult:
    progress = frame.progress(run_id)
    progress("prepare", 0)
    shape = (1, spec.prompt_len, spec.output_len)
    folder, refs = ensure(spec.model, spec.seed, [shape])
    progress("load", 0)
    t = time.perf_counter()
    eng = _Engines(spec, folder, refs[shape])
    try:
        infos = eng.ready()
        info = {**infos[0], "warm_requests": sum(i["warm_requests"] for i in infos),
                "warm_ns": max(i["warm_ns"] for i in infos)}
        load_s = time.perf_counter() - t
        loadgen = spec.scenario in LOADGEN_SCENARIOS
        progress("serve", 0)
        t0, cpu0 = time.perf_counter(), time.process_time()
        logs, reqs = (_loadgen_test(frame, run_id, spec, eng, info) if loadgen
                      else _closed_loop(frame, run_id, spec, eng))
        measured_s = time.perf_counter() - t0
        front_cpu_s = time.process_time() - cpu0
    finally:
        eng.close()
    done, stats = reqs.done, eng.merged_stats()
    settings = dict(info["settings"])
    if spec.replicas > 1:
        settings.update(replicas=spec.replicas,
                        replica_cpus=[",".join(map(str, c)) for c in eng.cores],
                        balancer="each request to the replica with the fewest in flight")
    if not done:
        raise RuntimeError("the test completed no request")
    cols = list(zip(*done))
    front = peak_resident_bytes()
    engine_peak = stats.get("engine_peak_rss_bytes")
    return GenServeResult(
        run_id, load_s=load_s, first_forward_s=info["check_ns"] / 1e9,
        warmup_ns=(info["warm_ns"],), samples_ns=tuple(d - i for _, i, _, d, _ in done),
        warmup_s=info["warm_ns"] / 1e9, measured_s=measured_s,
        stop_reason=("LoadGen's test ended" if loadgen else
                     f"the closed loop's {spec.min_query_count} requests completed"),
        params=None,
        peak_rss_bytes=(front + engine_peak if front is not None and engine_peak else None),
        peak_rss_method=("VmHWM of the front (LoadGen) plus the engine process's" +
                         (f" (each of {spec.replicas})" if spec.replicas > 1 else "")),
        scenario=spec.scenario, prompt_len=spec.prompt_len, output_len=spec.output_len,
        ttft_bound_ms=spec.ttft_bound_ms, tpot_bound_ms=spec.tpot_bound_ms,
        target_qps=spec.target_qps, users=spec.users,
        req_sample=cols[0], req_issue_ns=cols[1], req_first_ns=cols[2], req_done_ns=cols[3],
        req_tokens=cols[4], summary_log=logs[0], detail_log=logs[1],
        loadgen_version=_version("mlcommons-loadgen") if loadgen else None,
        build_s=info["build_s"], engine_settings=settings,
        engine_stats={k: v for k, v in stats.items()},
        runtime_versions=info["versions"], agreement=info["agreement"],
        agreement_tokens=info["agreement_tokens"], front_cpu_s=front_cpu_s)


def _live(frame, run_id, reqs: _Requests, stop: threading.Event) -> threading.Thread:
    """Every LIVE_PROGRESS_S: requests completed, their rate, p99 TTFT so far."""
    interval = float(os.environ.get(LIVE_INTERVAL_ENV) or LIVE_PROGRESS_S)
    seen = [0]

    def report() -> None:
        with reqs.lock:
            new = reqs.done[seen[0]:]
            seen[0] = len(reqs.done)
        reqs.ttft.add(f - i for _, i, f, _, _ in new)
        elapsed = (time.perf_counter_ns() - reqs.t0) / 1e9
        tail = reqs.ttft.percentile_ns(99)
        frame.emit(Progress(run_id, "serve", 0, completed=seen[0],
                            per_s=seen[0] / elapsed if elapsed > 0 else None,
                            unit="request", tail_pct=99 if tail else None,
                            tail_ms=tail / 1e6 if tail else None))

    def loop() -> None:
        while not stop.wait(interval):
            report()
        report()

    thread = threading.Thread(target=loop, daemon=True, name="live")
    thread.start()
    return thread


def _reader(proc: EngineProcess, engines: _Engines, reqs: _Requests, on_first, on_done,
            out: list) -> None:
    """The thread that reads one engine's token lines and reports them."""
    for item in proc.lines():
        if isinstance(item, dict):
            out.append(item)
            return
        rid, n, finished = item
        now = time.perf_counter_ns() - reqs.t0
        if n and rid not in reqs.first:
            reqs.first[rid] = now
            on_first(rid)
        if finished:
            with reqs.lock:
                sample, issued = reqs.issued.pop(rid)
                reqs.done.append((sample, issued, reqs.first.pop(rid, now), now, n))
            engines.finished(rid)
            on_done(rid, n)


def _settings(lg, spec, info: dict):
    ts = lg.TestSettings()
    ts.scenario = getattr(lg.TestScenario, LOADGEN_SCENARIOS[spec.scenario])
    ts.mode = lg.TestMode.PerformanceOnly
    ts.use_token_latencies = True
    ts.ttft_latency = int(round(spec.ttft_bound_ms * 1e6))
    ts.tpot_latency = int(round(spec.tpot_bound_ms * 1e6))
    # LoadGen's over-latency count still reads the plain target: make it the TTFT bound
    ts.server_target_latency_ns = ts.ttft_latency
    ts.min_duration_ms = int(round(spec.loadgen_min_duration_s * 1000))
    ts.min_query_count = spec.loadgen_min_queries
    ts.qsl_rng_seed = ts.sample_index_rng_seed = ts.schedule_rng_seed = spec.seed
    one_ns = max(1, info["check_ns"])
    ts.single_stream_expected_latency_ns = one_ns
    if spec.scenario == "server":
        ts.server_target_qps = spec.target_qps
    # Offline: as asked, else what the warm-up wave did, overstated (LoadGen's advice)
    ts.offline_expected_qps = spec.target_qps or (
        OFFLINE_QPS_MARGIN * info["warm_requests"] * 1e9 / max(1, info["warm_ns"]))
    return ts


def _loadgen_test(frame, run_id, spec, eng: _Engines, info: dict):
    import mlperf_loadgen as lg

    reqs = _Requests(time.perf_counter_ns())
    offline = spec.scenario == "offline"

    def issue(qs) -> None:
        for q in qs:
            reqs.issue(q.id, q.index)
            eng.add(q.id, q.index)

    def first(rid: int) -> None:
        if not offline:  # LoadGen takes no first token in Offline
            lg.FirstTokenComplete([lg.QuerySampleResponse(rid, 0, 0)])

    def done(rid: int, n: int) -> None:
        lg.QuerySamplesComplete([lg.QuerySampleResponse(rid, 0, 0, n)])

    readers = eng.read(reqs, first, done)
    stop = threading.Event()
    live = _live(frame, run_id, reqs, stop)
    with _Folder() as out:
        log = lg.LogSettings()
        log.log_output.outdir = out
        log.log_output.copy_summary_to_stdout = False
        log.enable_trace = False
        sut = lg.ConstructSUT(issue, lambda: None)
        qsl = lg.ConstructQSL(spec.samples, spec.samples, lambda s: None, lambda s: None)
        try:
            lg.StartTestWithLogSettings(sut, qsl, _settings(lg, spec, info), log)
        finally:
            stop.set()
            live.join()
            eng.quit()
            for r in readers:
                r.join()
            lg.DestroyQSL(qsl)
            lg.DestroySUT(sut)
        logs = (_read(out, "mlperf_log_summary.txt"), _read(out, "mlperf_log_detail.txt"))
    return logs, reqs


def _closed_loop(frame, run_id, spec, eng: _Engines):
    """`users` requests in flight until min_query_count were sent; samples drawn from the
    seed, the same sequence for every engine."""
    order = np.random.Generator(np.random.PCG64(spec.seed)).integers(
        0, spec.samples, size=spec.min_query_count)
    reqs = _Requests(time.perf_counter_ns())
    sent = [0]
    finished = threading.Event()
    send_lock = threading.Lock()

    def send() -> None:
        with send_lock:
            k = sent[0]
            if k >= spec.min_query_count:
                return
            sent[0] += 1
        reqs.issue(k, int(order[k]))
        eng.add(k, int(order[k]))

    def done(rid: int, n: int) -> None:
        if len(reqs.done) >= spec.min_query_count:
            finished.set()
        else:
            send()

    readers = eng.read(reqs, lambda rid: None, done)
    stop = threading.Event()
    live = _live(frame, run_id, reqs, stop)
    for _ in range(spec.users):
        send()
    while not finished.wait(1.0):
        if not all(r.is_alive() for r in readers):  # an engine went away: what completed
            break  # is the run's
    stop.set()
    live.join()
    eng.quit()
    for r in readers:
        r.join()
    return ("", ""), reqs
