"""Executors: where a worker group runs. Today one kind, local subprocesses; a cluster
executor (a worker group sent to another machine) implements the same `start`.

An executor starts a worker for a group of runs and hands back a handle with `events` (a
queue of the worker's messages, engine.core.protocol's, decoded; a ProtocolError for a line
that is none; None when its stream ends), `command(cmd)` (to a worker held at a gate),
`kill()`, `close() -> exit code` and `stderr_tail()`; and it
`release`s replicas into one timed window on its machine's clock. The runner drives those
handles and turns every ending into exactly one record; it never touches a process itself.
"""

from __future__ import annotations

import collections
import ctypes
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref

from engine.core.protocol import (CALIBRATE, Assign, Command, Go, Message, ProtocolError,
                                  RunOrder, encode)
from engine.scenarios import decode
from engine.run.process import pinning
from engine.run.process.cgroups import make_worker_cgroup
from engine.run.process.forkserver import ForkServers
from engine.scenarios import scenario_of
from engine.core.paths import PROJECT_ROOT
from engine.core.policy import WEIGHTS_ENV
from engine.core.record import MEMORY_CAP_MARKER, OOM_MARKERS

__all__ = ["LocalProcesses", "WorkerProcess", "thread_env", "classify_exit", "window_times",
           "read_line", "STDERR_TAIL_BYTES", "WINDOW_LEAD_S"]

STDERR_TAIL_BYTES = 8192
# The frameworks whose workers are forked from a fork server by default: those a fork is
# shown to keep the process-to-process lottery for (bench/starts.py). None: a forked
# worker re-draws its heap and mmap base, but its libraries stay where its server loaded
# them, drawn once per server. torch, forked: 16 processes each, sd of log medians 0.074
# spawned against 0.150 forked (Brown-Forsythe p 0.014), a slow mode spawned ones rarely
# reached. TensorFlow, forked: the spread inside one server as wide as spawned ones' (24
# each pooled, p 0.71), but each server's workers centred on a value of its own (4
# servers of 5 forks: between-server sd 0.062 against 0.128 within, F p 0.13; two earlier
# servers 23.5 and 25.9 ms), and a sweep forks every round from one server, so its rounds
# would not sample that part of the draw. docs/ARCHITECTURE.md has every run.
# LocalProcesses(forked={...}) forks them, as bench/ does.
FORKED: frozenset[str] = frozenset()
# A replicas' window opens this long after the parent sends its times, so that every replica
# has read them (a pipe write and a wake-up each) before it opens.
WINDOW_LEAD_S = 0.05


def window_times(window_s: float, now_ns: int) -> tuple[int, int]:
    """(start, end) of a replicas' window on the monotonic clock, from `now_ns`."""
    start = now_ns + int(WINDOW_LEAD_S * 1e9)
    return start, start + int(window_s * 1e9)


def read_line(line: str | bytes) -> Message | ProtocolError:
    """A worker's line as its handle's `events` hold it: the message, or the ProtocolError
    saying why it is none (the runner ends that worker and fails its run)."""
    try:
        return decode(line)
    except ProtocolError as exc:
        return exc


def classify_exit(returncode: int | None, stderr_tail: str) -> tuple[str, str, str | None]:
    """(status, reason, signal name) for a worker that ended without reporting its run."""
    oom = any(m in stderr_tail.lower() for m in OOM_MARKERS)
    name = (signal.Signals(-returncode).name
            if returncode is not None and returncode < 0 else None)
    capped = [line[len(MEMORY_CAP_MARKER):] for line in stderr_tail.splitlines()
              if line.startswith(MEMORY_CAP_MARKER)]
    if capped:  # its memory cap ended it (the watchdog's word, or the cgroup's kill)
        return "oom", f"over its memory cap: {capped[-1]}", name
    if returncode is not None and returncode < 0:
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


def thread_env(spec) -> dict:
    """Set before the worker imports a framework, so OpenMP/MKL/TF read them at start."""
    intra, inter = str(spec.intra_threads), str(spec.inter_threads)
    env = {"OMP_NUM_THREADS": intra, "MKL_NUM_THREADS": intra, "OPENBLAS_NUM_THREADS": intra,
           "TF_NUM_INTRAOP_THREADS": intra, "TF_NUM_INTEROP_THREADS": inter,
           "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONHASHSEED": "0",
           # torch.compile's kernels are cached under the project, not in /tmp of the day
           "TORCHINDUCTOR_CACHE_DIR": str(PROJECT_ROOT / "data" / "inductor-cache")}
    if getattr(spec, "wait_policy", ""):  # recorded with the run's env (frame.THREAD_ENV)
        env["OMP_WAIT_POLICY"] = spec.wait_policy.upper()
    return env


class WorkerProcess:
    """One worker subprocess and the threads draining its pipes: `events` yields its
    messages (None at its end); kill() ends its whole process group. relay: its lines as
    they came instead (a cluster node's host passes them on, and the driver reads them)."""

    def __init__(self, python: str, runs: list[RunOrder], env: dict, memory_cap_bytes, *,
                 kind: str, mode: str = "bench", trace_dir: str | None = None,
                 pins=None, sync: str | None = None, relay: bool = False,
                 held: bool = False, cgroup: bool = True, calibration: dict | None = None,
                 forks=None):
        """forks: a fork server (engine/run/process/forkserver.py) to fork the worker from,
        its framework already imported; None: spawn it."""
        self.relay = relay
        full_env = {**os.environ, **env, **pinning.worker_env(pins)}
        pin_child = pinning.pin_child(pins, pinning.usable_cores())
        # a memory cgroup of its own where the machine allows one: the kernel holds the cap
        self.cgroup = make_worker_cgroup() if memory_cap_bytes and cgroup else None
        self._oom_note: str | None = None

        def preexec():
            _set_parent_death_signal()
            pin_child()
            if self.cgroup is not None:
                self.cgroup.join()
        full_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH")) if p)
        self.proc = None
        self.how_started = "spawn"  # for the parent's Starting notice
        # a forked worker that waited for its fork server's import: that import's seconds
        # (the server's, paid once per sweep and thread environment), stored with its runs
        self.server_import_s: float | None = None
        if forks is not None and forks.usable:
            try:  # what preexec does, done by the fork server's child from these facts
                self.proc = forks.spawn(pinning.worker_env(pins),
                                        pins[0] if pins else pinning.usable_cores(),
                                        self.cgroup.path if self.cgroup else None)
            except RuntimeError:
                self.proc = None  # spawned instead, below
            else:
                self.how_started = "fork"
                self.server_import_s = self.proc.server_import_s
        if self.proc is None:
            self.proc = subprocess.Popen(
                [python, "-m", "engine.worker"], cwd=PROJECT_ROOT, env=full_env,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True, preexec_fn=preexec)
        # This process keeps off the worker's cores until close().
        self._parent_off = pinning.parent_off(pins)
        self._parent_off.__enter__()
        self.events: queue.Queue = queue.Queue()
        self.stderr = collections.deque()
        self._stderr_len = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        self._err_thread = threading.Thread(target=self._read_stderr, daemon=True)
        self._err_thread.start()
        assign = Assign(scenario=kind, runs=tuple(runs), memory_cap_bytes=memory_cap_bytes,
                        mode=mode, trace_dir=trace_dir, sync=sync, held=held,
                        cgroup=self.cgroup.path if self.cgroup else None,
                        calibration=calibration)
        try:
            self.proc.stdin.write((encode(assign) + "\n").encode())
            self.proc.stdin.flush()  # stdin stays open: its EOF tells the worker we are gone
        except BrokenPipeError:
            pass  # it died at start-up; its exit code and stderr tell why

    def command(self, cmd: Command) -> None:
        """A command to a worker waiting, warm, at its gate (engine.worker.harness)."""
        self.write_line(encode(cmd))

    def write_line(self, line: str) -> None:
        """An encoded command, as a cluster node's host is given it."""
        try:
            self.proc.stdin.write((line + "\n").encode())
            self.proc.stdin.flush()
        except OSError:
            pass  # it died meanwhile: its stream's end tells the runner

    def _read_stdout(self):
        for line in self.proc.stdout:
            if not line.endswith(b"\n"):
                break  # cut off by the worker's death: its exit says why, not this line
            self.events.put(line.decode("utf-8", "replace") if self.relay else read_line(line))
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
        return data.decode("utf-8", "replace") + self._cgroup_note()

    def _cgroup_note(self) -> str:
        """A line saying the kernel ended the worker at its cgroup's limit, if it did: put
        where every reader of the tail (this parent's classification, a cluster node's
        driver) sees it. Read from the group while it lasts, kept once it is removed."""
        if self.cgroup is None:
            return ""
        if self._oom_note is not None:
            return self._oom_note
        if not self.cgroup.oom_kills():
            return ""
        limit = self.cgroup.limit_bytes()
        return (f"\n{MEMORY_CAP_MARKER}the kernel's OOM killer ended the worker at its "
                "memory cgroup's limit" + (f" of {limit / 2**20:,.0f} MiB" if limit else "")
                + " (what the worker held when the run began, plus the run's cap; "
                f"{'memory.max' if self.cgroup.v2 else 'memory.limit_in_bytes'})\n")

    def classify(self, returncode: int | None) -> tuple[str, str, str | None]:
        """(status, reason, signal) for this worker ending without reporting its run."""
        return classify_exit(returncode, self.stderr_tail())

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
        finally:
            self._parent_off.__exit__(None, None, None)
            if self.cgroup is not None:
                self._oom_note = self._cgroup_note()  # kept: the group is about to go
                self.cgroup.remove()


WEIGHTS_PREFIX = "bench-weights-"


def _remove_orphaned_weights() -> None:
    """Remove weights folders whose process is gone (killed before it could remove them)."""
    root = tempfile.gettempdir()
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        pid = name[len(WEIGHTS_PREFIX):].split("-", 1)[0]
        if not name.startswith(WEIGHTS_PREFIX) or not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:  # no such process: its folder is an orphan
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        except OSError:  # alive, another user's
            pass


class LocalProcesses:
    """Each worker group in a fresh subprocess of this machine, in its own session (so a
    kill reaches its children), killed with its parent (PDEATHSIG and stdin EOF)."""

    def __init__(self, python: str = sys.executable, pin: bool = True,
                 memory_cgroups: bool = True, forked=FORKED):
        self.python = python
        # a worker of a framework in `forked` is forked from a fork server that imported
        # it (engine/run/process/forkserver.py); any other is spawned and imports it
        self.forked = frozenset(forked)
        self.forks = ForkServers(python)
        self.pin = pin  # pin a worker with fewer threads than cores (engine/run/process/pinning.py)
        # False: the worker's watchdog holds the memory cap even where a cgroup could
        self.memory_cgroups = memory_cgroups
        self._weights: str | None = None  # made at the first worker's start
        self._weights_gone = None

    def weights_dir(self) -> str:
        """This executor's folder of calibrated catalog weights (engine/worker/weights.py):
        the first worker to build a model writes them, later rounds' workers read them.
        Removed by close(), or when the executor is collected or the process ends; a
        process killed before either leaves its folder, which the next one made on this
        machine removes (the folder names its process)."""
        if self._weights is None:
            _remove_orphaned_weights()
            self._weights = tempfile.mkdtemp(prefix=f"{WEIGHTS_PREFIX}{os.getpid()}-")
            self._weights_gone = weakref.finalize(self, shutil.rmtree, self._weights,
                                                  ignore_errors=True)
        return self._weights

    def core_ids(self) -> list[int]:
        """The cores replicas are split over: those this process may use (before any
        worker moved it off its cores)."""
        return pinning.usable_cores()

    def replica_cores(self, replicas: int, threads: int) -> list[tuple[int, ...]]:
        """Each replica's CPUs: whole cores of its own on this machine's topology."""
        return pinning.replica_cores(pinning.usable_cores(), replicas, threads)

    # Contenders of a contest can be timed alternately in blocks (engine/run/process/together.py).
    interleaves = True
    # A worker can be held warm for runs given later (engine/run/process/held.py: a batch search's
    # probes).
    holds = True

    def release(self, handles, window_s: float) -> None:
        """Open one timed window for these replicas, on this machine's monotonic clock."""
        start, end = window_times(window_s, time.monotonic_ns())
        for h in handles:
            h.command(Go(start, end))

    def start(self, runs: list[RunOrder], first_spec, memory_cap_bytes, *, mode: str = "bench",
              trace_dir: str | None = None, cores: tuple[int, ...] | None = None,
              sync: str | None = None, held: bool = False,
              calibration: dict | None = None) -> WorkerProcess:
        """cores: a replica's own cores (the runner splits them); sync: "window" (a replica,
        which waits for its window) or "blocks" (an interleaved contender, which times the
        blocks it is told to); held: after these runs it waits, warm, for More;
        calibration: the plan of a worker of mode CALIBRATE."""
        scenario = scenario_of(first_spec)
        # a calibration is pinned like the run it is a ceiling for
        pin = self.pin and mode in ("bench", CALIBRATE) and scenario.pinnable
        pins = pinning.plan(scenario.worker_cpus(first_spec)) if pin else None
        if cores is not None:  # replicas use every core between them: the parent stays put
            pins = (tuple(cores), tuple(pinning.usable_cores()))
        env = {**thread_env(first_spec), WEIGHTS_ENV: self.weights_dir()}
        forks = None
        if (mode == "bench" and cores is None
                and scenario.worker_imports_framework
                and getattr(first_spec, "framework", None) in self.forked):
            forks = self.forks.server(first_spec.framework, env)
        return WorkerProcess(self.python, runs, env, memory_cap_bytes,
                             kind=first_spec.kind, mode=mode, trace_dir=trace_dir, pins=pins,
                             sync=sync, held=held, cgroup=self.memory_cgroups,
                             calibration=calibration, forks=forks)

    def close(self) -> None:
        """End the fork servers (the next worker that asks starts one again) and remove
        the weights folder (the next worker makes a new one and calibrates again)."""
        self.forks.close()
        if self._weights_gone is not None:
            self._weights_gone()
            self._weights = self._weights_gone = None
