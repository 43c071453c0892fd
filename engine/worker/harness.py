"""The frame every run gets inside a worker, whatever its kind: started, memory cap and
peak-RSS reset, then exactly one result or failed event; and the worker's ready event.
Every message is engine.core.protocol's.

Framework-free: the kind's body (engine/worker/inference/body.py, training.py, dataload.py)
imports its framework itself.
"""

from __future__ import annotations

import ctypes
import gc
import os
import time
import traceback
from dataclasses import replace
from typing import Callable

from engine.core.errors import plain_text
from engine.core.policy import WORKER_START_ENV
from engine.core.protocol import (BLOCKS, Armed, BlockTimed, Failed, Go, Message, Progress,
                                  Ready, Result, RunNext, Started, Stop, TimeBlock)
from engine.scenarios import decode
from engine.core.record import OOM_MARKERS
from engine.worker.errors import WRONG_ANSWERS, ReplicaFailed
from engine.worker.memcap import ResidentCap

__all__ = ["Frame", "Gate", "THREAD_ENV", "status_of", "command", "resident_bytes",
           "peak_resident_bytes"]

THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
              "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OPENBLAS_CORETYPE",
              "KMP_AFFINITY", "KMP_BLOCKTIME", "TF_ENABLE_ONEDNN_OPTS", "OMP_WAIT_POLICY")


def command(line: str | bytes, *expected: type):
    """The parent's command to a worker held at a gate (engine.core.protocol), one of the
    expected kinds; anything else is a broken parent."""
    cmd = decode(line)
    if not isinstance(cmd, expected):
        raise ValueError(f"expected {' or '.join(e.kind for e in expected)} from the parent, "
                         f"got {cmd.kind}")
    return cmd


class Gate:
    """Where a timed loop waits for its parent (engine.worker.measure's gate): a replica's
    window, or an interleaved contender's blocks. Says Armed when it first waits."""

    def __init__(self, frame: "Frame", run_id: str):
        self.mode, self.frame, self.run_id = frame.sync, frame, run_id
        self.armed = False
        self._opened = None  # the snapshot as the block in progress opened
        self._elapsed_ns = 0  # timed over its blocks so far
        self.blocks: list = []  # (snapshot before, after) of each interleaved block

    def _next(self, per_sample_ns: int, *expected: type):
        if not self.armed:
            self.frame.emit(Armed(self.run_id, per_sample_ns))
            self.armed = True
        return command(self.frame.commands.get(), *expected)

    def window(self, per_sample_ns: int) -> tuple[int, int]:
        go = self._next(per_sample_ns, Go)
        return go.start_ns, go.end_ns

    def sleep_until(self, ns: int) -> None:
        wait = ns - time.monotonic_ns()
        if wait > 0:
            time.sleep(wait / 1e9)

    def next_block(self, per_sample_ns: int) -> float | None:
        cmd = self._next(per_sample_ns, TimeBlock, Stop)
        if isinstance(cmd, Stop):
            return None
        from engine.worker.interference import snapshot

        self._opened = snapshot()
        return cmd.seconds

    def report(self, iters: int, elapsed_ns: int, met: bool, maxed: bool) -> None:
        from engine.worker.interference import snapshot

        if elapsed_ns > self._elapsed_ns:  # a maxed contender's turn timed nothing of its own
            self.blocks.append((self._opened, snapshot()))
        self._elapsed_ns = elapsed_ns
        self.frame.emit(BlockTimed(self.run_id, iters, elapsed_ns, met, maxed))

    def interference(self) -> dict | None:
        """Steal and other processes' CPU over this contender's own blocks, or None."""
        from engine.worker.interference import interference_over

        return interference_over(self.blocks) if self.blocks else None


def status_of(exc: BaseException) -> str:
    # A wrong answer (an output or a decoded batch that is not the reference's) or a
    # diverged training: invalid, never timed.
    if isinstance(exc, WRONG_ANSWERS):
        return "invalid"
    if isinstance(exc, ReplicaFailed):  # a serving replica classified its own failure
        return exc.status
    if isinstance(exc, MemoryError):
        return "oom"
    text = f"{type(exc).__name__}: {exc}".lower()
    return "oom" if any(m in text for m in OOM_MARKERS) else "error"


def _proc_status_kb(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def resident_bytes() -> int | None:
    """This process's resident set now (VmRSS), after handing freed heap back to the system
    (glibc's malloc_trim) so a model freed before it is not counted: the baseline a model's
    memory is measured from."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass
    kb = _proc_status_kb("VmRSS")
    return kb * 1024 if kb is not None else None


def peak_resident_bytes() -> int | None:
    """This process's peak resident set (VmHWM) since the last reset (_reset_peak_rss)."""
    kb = _proc_status_kb("VmHWM")
    return kb * 1024 if kb is not None else None


def _model_peak(peak: int | None, result: Result) -> int | None:
    """The peak less the baseline the body measured (and less the reference it keeps apart),
    never below 0: a run whose peak stayed under its baseline added nothing seen."""
    if peak is None or result.model_baseline_bytes is None:
        return None
    return max(0, peak - result.model_baseline_bytes - (result.reference_bytes or 0))


def _reset_peak_rss() -> bool:
    """Reset VmHWM so the peak read after a run is that run's own (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class Frame:
    """What a kind's body needs from the worker: the event stream, the memory cap, the
    folder for profiler traces, and the per-run frame."""

    def __init__(self, emit: Callable[[Message], None], *, cap: int | None, t0: float,
                 trace_dir: str | None, mode: str = "bench", sync: str | None = None,
                 commands=None, cgroup: str | None = None):
        self.emit, self.cap, self.t0, self.trace_dir, self.mode = emit, cap, t0, trace_dir, mode
        # each run's cap on the resident memory it adds (engine/worker/memcap.py)
        self.resident_cap = ResidentCap(cap, cgroup)
        # "window" (a replica) or "blocks" (interleaved): the parent's commands decide when
        # this worker times, read from `commands` (a queue of lines)
        self.sync, self.commands = sync, commands

    def gate(self, run_id: str) -> Gate | None:
        """The gate a run's timed loop waits at, or None for a run on its own."""
        return Gate(self, run_id) if self.sync else None

    def ready(self, versions: dict, threads: dict) -> None:
        from engine.worker.machine import machine_facts

        self.emit(Ready(pid=os.getpid(), import_s=time.perf_counter() - self.t0,
                        versions=versions, threads=threads, machine=machine_facts(),
                        env={k: os.environ[k] for k in THREAD_ENV if k in os.environ},
                        start=os.environ.get(WORKER_START_ENV, "spawn")))

    def progress(self, run_id: str) -> Callable[[str, int], None]:
        """progress(phase, iters) for one run."""
        return lambda phase, n: self.emit(Progress(run_id, phase, n))

    def trace_path(self, run_id: str) -> str | None:
        return os.path.join(self.trace_dir, f"{run_id}.json") if self.trace_dir else None

    def guarded(self, run_id: str, spec, body: Callable[[], Result], *,
                on_failure=lambda: None, failure_fields=dict) -> None:
        """One run's frame, whatever its kind: started, memory cap and peak reset, then exactly
        one result (body's, with the frame's fields) or Failed (with failure_fields(): what
        the run knew when it failed, such as the digest of a user's model)."""
        emit = self.emit
        if self.sync == BLOCKS:  # interleaved: start only when the parent says
            command(self.commands.get(), RunNext)
        emit(Started(run_id, time.time()))
        try:
            per_run_peak = _reset_peak_rss()
            rss_before = (_proc_status_kb("VmRSS") or 0) * 1024
            # The cap holds what the run adds to host memory (a CUDA run's device memory is
            # the device's business: it reports its own out-of-memory).
            with self.resident_cap.run():
                result = body()
            peak_kb = _proc_status_kb("VmHWM")
            # The run's RSS at its start is one of its own samples: the high-water mark can
            # read below it when memory freed during the run went back to the system by
            # madvise (glibc's trim after a collection), which the kernel's mark never sees.
            peak = max(peak_kb * 1024, rss_before) if peak_kb else None
            own_peak = result.peak_rss_bytes  # a process of the body's own did the work
            method = (result.peak_rss_method if result.peak_rss_method else
                      "VmHWM of the LibTorch runner process" if own_peak else
                      "VmHWM, reset per run via /proc/self/clear_refs" if per_run_peak
                      else "VmHWM over the worker's lifetime")
            emit(replace(result, ended_at=time.time(), rss_before_bytes=rss_before,
                         peak_rss_bytes=own_peak or peak, peak_rss_method=method,
                         model_peak_bytes=_model_peak(own_peak or peak, result)))
        except BaseException as exc:  # every ending becomes one row; the parent decides
            reason = plain_text(str(exc) if isinstance(exc, ReplicaFailed)  # names its
                                else f"{type(exc).__name__}: {exc}")      # replica's error
            if getattr(spec, "user_model", None) is not None:  # one line, as the CLI prints it
                reason = " ".join(reason.split())
            emit(Failed(run_id, status_of(exc), reason[:2000], ended_at=time.time(),
                        traceback=traceback.format_exc()[-4000:], **failure_fields()))
            on_failure()
            gc.collect()
            if isinstance(exc, KeyboardInterrupt):
                raise
