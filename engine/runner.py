"""Runs specs in worker subprocesses and turns every ending into exactly one RunRecord.

One worker per consecutive (framework, intra, inter, device) group, so framework imports are
paid once per group and torch and TensorFlow never share a process. The parent enforces a
wall-time limit per run (killing the worker's whole process group), passes the memory cap to
the worker (RLIMIT_AS per run), and respawns a worker for the rest of a group when one dies,
so results already reported are kept and the next runs still run.
"""

from __future__ import annotations

import collections
import ctypes
import gzip
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime, timezone
from typing import Callable

from engine.measure import STOP_MAX_ITERS
from engine.record import OOM_MARKERS, STATUSES, RunRecord
from engine.spec import RunSpec
from engine.stats import summarize, verdict
from engine.system import PROJECT_ROOT, git_commit, system_info

__all__ = ["Runner", "RunRecord", "classify_exit", "count_model_stats", "STATUSES", "new_id", "worker_groups"]

STDERR_TAIL_BYTES = 8192


def new_id() -> str:
    return uuid.uuid4().hex


def classify_exit(returncode: int | None, stderr_tail: str) -> tuple[str, str, str | None]:
    """(status, reason, signal name) for a worker that ended without reporting its run."""
    oom = any(m in stderr_tail.lower() for m in OOM_MARKERS)
    if returncode is not None and returncode < 0:
        name = signal.Signals(-returncode).name
        if oom:
            return "oom", f"worker ran out of memory and died from {name}", name
        if -returncode == signal.SIGKILL:
            return ("killed", "worker was killed by SIGKILL before reporting a result (an "
                    "external kill, or the kernel's OOM killer)", name)
        return "killed", f"worker died from {name} before reporting a result", name
    if oom:
        return "oom", f"worker ran out of memory and exited with code {returncode}", None
    return "killed", f"worker exited with code {returncode} before reporting a result", None


def _set_parent_death_signal() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _ts(epoch: float | None) -> datetime | None:
    return datetime.fromtimestamp(epoch, timezone.utc) if epoch else None


def thread_env(spec: RunSpec) -> dict:
    """Set before the worker imports a framework, so OpenMP/MKL/TF read them at start."""
    intra, inter = str(spec.intra_threads), str(spec.inter_threads)
    return {"OMP_NUM_THREADS": intra, "MKL_NUM_THREADS": intra, "OPENBLAS_NUM_THREADS": intra,
            "TF_NUM_INTRAOP_THREADS": intra, "TF_NUM_INTEROP_THREADS": inter,
            "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONHASHSEED": "0",
            # torch.compile's kernels are cached under the project, not in /tmp of the day
            "TORCHINDUCTOR_CACHE_DIR": str(PROJECT_ROOT / "data" / "inductor-cache")}


class _Worker:
    """One worker subprocess and the threads draining its pipes."""

    def __init__(self, python: str, runs: list[dict], env: dict, memory_cap_bytes,
                 mode: str = "bench", kind: str = "inference", trace_dir: str | None = None):
        full_env = {**os.environ, **env}
        full_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen(
            [python, "-m", "engine.worker"], cwd=PROJECT_ROOT, env=full_env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, preexec_fn=_set_parent_death_signal)
        self.events: queue.Queue = queue.Queue()
        self.stderr = collections.deque()
        self._stderr_len = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        self._err_thread = threading.Thread(target=self._read_stderr, daemon=True)
        self._err_thread.start()
        payload = {"runs": runs, "memory_cap_bytes": memory_cap_bytes, "mode": mode,
                   "kind": kind, "trace_dir": trace_dir}
        try:
            self.proc.stdin.write((json.dumps(payload) + "\n").encode())
            self.proc.stdin.flush()  # stdin stays open: its EOF tells the worker we are gone
        except BrokenPipeError:
            pass  # it died at start-up; its exit code and stderr tell why

    def _read_stdout(self):
        for line in self.proc.stdout:
            try:
                self.events.put(json.loads(line))
            except ValueError:
                continue  # not protocol: cannot happen unless the worker is broken
        self.events.put(None)

    def _read_stderr(self):
        for chunk in iter(lambda: self.proc.stderr.read1(4096), b""):
            with self._lock:
                self.stderr.append(chunk)
                self._stderr_len += len(chunk)
                while self._stderr_len - len(self.stderr[0]) > STDERR_TAIL_BYTES:
                    self._stderr_len -= len(self.stderr.popleft())

    def stderr_tail(self) -> str:
        self._err_thread.join(timeout=5)
        with self._lock:
            data = b"".join(self.stderr)[-STDERR_TAIL_BYTES:]
        return data.decode("utf-8", "replace")

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def close(self) -> int | None:
        try:
            self.proc.stdin.close()
        except OSError:  # includes a broken pipe when flushing to a dead worker
            pass
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.wait()


class Runner:
    """Runs a list of validated specs; calls on_record once per spec, as each one ends."""

    def __init__(self, *, timeout_s: float = 600.0, memory_cap_bytes: int | None = None,
                 python: str = sys.executable, clock: Callable[[], float] = time.monotonic,
                 poll_s: float = 0.2, known_stats: Callable[[RunSpec], dict | None] = None,
                 cancel: threading.Event | None = None, process_per_run: bool = False):
        self.timeout_s = timeout_s
        self.memory_cap_bytes = memory_cap_bytes
        self.python = python
        self.clock = clock
        self.poll_s = poll_s
        self.known_stats = known_stats or (lambda spec: None)
        self.cancel = cancel or threading.Event()
        # process_per_run: a fresh worker for every run (full isolation, imports paid each
        # time); the default shares one worker per (framework, threads) group.
        self.process_per_run = process_per_run

    def run(self, specs: list[RunSpec], *, on_record: Callable[[RunRecord], None],
            on_event: Callable[[dict], None] | None = None,
            sweep_id: str | None = None, round_no: int | None = None) -> list[RunRecord]:
        on_event = on_event or (lambda e: None)
        records: list[RunRecord] = []

        def record(r: RunRecord):
            records.append(r)
            on_record(r)

        tags = {"sweep_id": sweep_id, "round_no": round_no}  # copied onto every record
        groups = [[s] for s in specs] if self.process_per_run else worker_groups(specs)
        for group in groups:
            pending = [(new_id(), s) for s in group]
            while pending and not self.cancel.is_set():
                done = self._run_worker(pending, tags, record, on_event)
                pending = [(rid, s) for rid, s in pending if rid not in done]
            if self.cancel.is_set():
                break
        return records

    def _run_worker(self, pending, tags, record, on_event) -> set[str]:
        """Run one worker over `pending`; return the run ids that got their row."""
        specs = dict(pending)
        runs = [{"run_id": rid, "spec": s.to_dict(), "known_stats": self.known_stats(s)}
                for rid, s in pending]
        first = pending[0][1]
        # Profiled runs leave their Chrome trace here; _record reads it into the record.
        trace_dir = (tempfile.mkdtemp(prefix="bench-traces-")
                     if any(s.profile_steps for _, s in pending) else None)
        try:
            worker = _Worker(self.python, runs, thread_env(first), self.memory_cap_bytes,
                             kind=first.kind, trace_dir=trace_dir)
            return self._drive(worker, pending, specs, tags, record, on_event)
        finally:
            if trace_dir:
                shutil.rmtree(trace_dir, ignore_errors=True)

    def _drive(self, worker, pending, specs, tags, record, on_event) -> set[str]:
        ctx = {"ready": {}, "started_at": None, "load_avg": None, "phase": "start-up",
               "iters": 0}
        done: set[str] = set()
        in_flight: str | None = None
        deadline = self.clock() + self.timeout_s
        ending = None  # (status, reason) when the parent ended the worker
        try:
            while True:
                if self.cancel.is_set():
                    ending = ("killed", "cancelled by the user")
                    break
                remaining = deadline - self.clock()
                if remaining <= 0:
                    ending = ("timeout", f"exceeded the {self.timeout_s:g} s wall-time limit "
                              f"per run (in phase {ctx['phase']}, after {ctx['iters']} "
                              f"timed iterations)")
                    break
                try:
                    ev = worker.events.get(timeout=min(remaining, self.poll_s))
                except queue.Empty:
                    continue
                if ev is None:
                    break
                kind = ev["event"]
                if kind == "ready":
                    ctx["ready"] = ev
                elif kind == "started":
                    in_flight = ev["run_id"]
                    ctx.update(started_at=ev["started_at"], phase="load", iters=0,
                               load_avg=os.getloadavg()[0])
                    deadline = self.clock() + self.timeout_s
                elif kind == "progress":
                    ctx.update(phase=ev["phase"], iters=ev["iters"])
                elif kind in ("result", "failed"):
                    rid = ev["run_id"]
                    record(self._record(rid, specs[rid], tags, ev, ctx, worker))
                    done.add(rid)
                    in_flight = None
                    deadline = self.clock() + self.timeout_s
                on_event({**ev, "spec": specs.get(ev.get("run_id"))})
        except BaseException:
            worker.kill()
            worker.close()
            raise
        if ending is not None:
            worker.kill()
        rc = worker.close()
        if ending is None and (in_flight is not None or len(done) < len(pending)):
            status, reason, sig = classify_exit(rc, worker.stderr_tail())
            if in_flight is None:
                reason = f"worker failed during start-up: {reason}"
        else:
            status, reason = ending or (None, None)
            sig = "SIGKILL" if ending else None
        if status is not None:
            rid = in_flight or next(rid for rid, _ in pending if rid not in done)
            ev = {"event": "failed", "run_id": rid, "status": status, "reason": reason,
                  "exit_code": rc, "signal": sig, "ended_at": time.time()}
            record(self._record(rid, specs[rid], tags, ev, ctx, worker))
            on_event({**ev, "spec": specs[rid]})
            done.add(rid)
        return done

    def _record(self, run_id, spec: RunSpec, tags, ev, ctx, worker) -> RunRecord:
        ready = ctx["ready"]
        sysinfo = system_info()
        base = dict(
            run_id=run_id, **tags, model=spec.model, framework=spec.framework,
            runtime=spec.runtime, batch_size=spec.batch_size,
            intra_threads=spec.intra_threads, inter_threads=spec.inter_threads,
            precision=spec.precision, image_size=spec.image_size, device=spec.device,
            weight_policy=spec.weight_policy, warmup_iters=spec.policy.warmup_iters,
            min_time_s=spec.policy.min_time_s, min_iters=spec.policy.min_iters,
            max_time_s=spec.policy.max_time_s,
            started_at=_ts(ctx["started_at"]) or _now(), ended_at=_ts(ev.get("ended_at")),
            import_s=ready.get("import_s"), load_avg_1m=ctx["load_avg"],
            memory_cap_bytes=self.memory_cap_bytes, timeout_s=self.timeout_s,
            git_commit=git_commit(), system_id=sysinfo["system_id"],
            versions=ready.get("versions", {}), threads_effective=ready.get("threads", {}),
            env=ready.get("env", {}), kind=spec.kind, dataset=getattr(spec, "dataset", None),
            workers=getattr(spec, "workers", None), extra=config_extra(spec))
        if ev["event"] == "failed":
            tail = ev.get("traceback") or worker.stderr_tail()
            return RunRecord(**base, status=ev["status"], reason=ev["reason"],
                             exit_code=ev.get("exit_code"), signal=ev.get("signal"),
                             stderr_tail=tail[-STDERR_TAIL_BYTES:])
        return record_from_result(base, ev, spec)


def config_extra(spec) -> dict:
    """What a training or data-loading run was asked to do beyond the common columns: kept
    on every row, failed ones included."""
    if spec.kind == "train":
        return {"lr": spec.lr, "momentum": spec.momentum, "optimizer": "sgd",
                "epochs": spec.epochs, "steps_per_epoch": spec.steps_in_epoch(),
                "seed": spec.seed, "warmup_steps": spec.warmup_steps,
                "profile_steps": spec.profile_steps}
    if spec.kind == "dataload":
        return {"count": spec.count, "decoder": spec.decoder, "normalize": spec.normalize,
                "pipeline": spec.pipeline, "seed": spec.seed}
    return {"profile_steps": spec.profile_steps} if spec.profile_steps else {}


def record_from_result(base: dict, ev: dict, spec: RunSpec) -> RunRecord:
    """Derive statistics and the verdict from the raw samples a worker reported."""
    samples = tuple(int(x) for x in ev["samples_ns"])
    st = summarize(samples)
    validity, why = verdict(st, iterations=st.count, measured_s=ev["measured_s"],
                            min_iters=spec.policy.min_iters, min_time_s=spec.policy.min_time_s,
                            hit_max_iters=ev["stop_reason"] == STOP_MAX_ITERS)
    median_s = st.median / 1e9
    flops = ev.get("flops_per_sample")
    ms = lambda ns: ns / 1e6  # noqa: E731
    base = dict(base)
    extra = dict(base.pop("extra", None) or {})
    throughput = spec.batch_size / median_s if median_s else None
    if spec.kind == "train":
        # Samples per second over whole epochs (data feeding included), not from one step.
        wall = sum(e["wall_s"] for e in ev["epochs"])
        throughput = sum(e["samples"] for e in ev["epochs"]) / wall if wall else None
        extra.update(data=ev.get("data_description"), feed_sha256=ev.get("feed_sha256"))
    elif spec.kind == "dataload":
        extra.update(check_error=ev.get("check_error"), bytes_on_disk=ev.get("bytes_on_disk"),
                     batches_per_sample=ev.get("batches_per_sample"))
    else:
        extra.update(model_reused=bool(ev.get("model_reused")),
                     output_rel_diff=ev.get("output_rel_diff"))
    trace_gz = None
    if ev.get("trace_path") and os.path.exists(ev["trace_path"]):
        with open(ev["trace_path"], "rb") as f:
            trace_gz = gzip.compress(f.read(), 6)
    if ev.get("profile_step_s") is not None:
        extra["profile_step_ms"] = ev["profile_step_s"] * 1e3
        extra["profile_steps"] = spec.profile_steps
    return RunRecord(
        **base, status="invalid" if validity == "invalid" else "ok",
        reason=why if validity == "invalid" else "", validity=validity, validity_reason=why,
        stop_reason=ev["stop_reason"], load_s=ev["load_s"],
        first_forward_s=ev["first_forward_s"], warmup_s=ev["warmup_s"],
        measured_s=ev["measured_s"], iterations=st.count, mean_ms=ms(st.mean),
        median_ms=ms(st.median), p90_ms=ms(st.p90), p95_ms=ms(st.p95), p99_ms=ms(st.p99),
        min_ms=ms(st.min), max_ms=ms(st.max), std_ms=ms(st.std), iqr_ms=ms(st.iqr), cv=st.cv,
        throughput=throughput, params=ev["params"], params_trainable=ev["params_trainable"], flops_per_sample=flops,
        flops_method=ev["flops_method"],
        gflops_per_s=(flops * spec.batch_size / median_s / 1e9) if flops and median_s else None,
        rss_before_bytes=ev["rss_before_bytes"], peak_rss_bytes=ev["peak_rss_bytes"],
        peak_rss_method=ev["peak_rss_method"], device_peak_bytes=ev["device_peak_bytes"],
        prepare_s=ev.get("prepare_s"), extra=extra,
        warmup_ns=tuple(int(x) for x in ev["warmup_ns"]), samples_ns=samples,
        epochs=tuple(ev.get("epochs", ())), step_losses=tuple(ev.get("step_losses", ())),
        profile_ops=tuple(ev.get("profile_ops", ())), trace_gz=trace_gz)


def worker_groups(specs: list[RunSpec]) -> list[list[RunSpec]]:
    """Consecutive specs sharing a worker: same framework, thread counts and device."""
    groups: list[list[RunSpec]] = []
    for s in specs:
        key = (s.framework, s.intra_threads, s.inter_threads, s.device)
        if groups and (groups[-1][0].framework, groups[-1][0].intra_threads,
                       groups[-1][0].inter_threads, groups[-1][0].device) == key:
            groups[-1].append(s)
        else:
            groups.append([s])
    return groups


def count_model_stats(specs: list[RunSpec], *, on_stats: Callable[[dict], None],
                      timeout_s: float = 1800.0, python: str = sys.executable) -> None:
    """Build each model in a worker (one per framework) and report params and FLOPs.

    Used by `python -m engine models` to fill the catalog; nothing is timed."""
    for group in worker_groups(specs):
        runs = [{"run_id": new_id(), "spec": s.to_dict(), "known_stats": None} for s in group]
        worker = _Worker(python, runs, thread_env(group[0]), None, mode="stats")
        deadline = time.monotonic() + timeout_s
        try:
            while True:
                ev = worker.events.get(timeout=max(0.001, deadline - time.monotonic()))
                if ev is None:
                    break
                if ev["event"] in ("stats", "failed"):
                    on_stats(ev)
        except queue.Empty:
            pass  # past the deadline: what was counted is kept
        finally:
            worker.kill()
            worker.close()
