"""R replicas behind one queue (issue 27): a serving test's model in R processes of its own,
each pinned to whole cores of its own, answering the batches one front sends them.

The front is the serving worker (engine/worker/serving/body.py): LoadGen, its queue and one
batcher thread per replica. Each replica is `python -m engine.worker` given an Assign of
mode REPLICA with its cores: it pins itself before its framework starts a thread (so its
intra-op pool of `threads` threads inherits those cores), builds the model as inference
builds it, checks it against the reference, warms every batch size and says ReplicaWarm.
Processes, not threads in the front, so a replica is what a deployment's replica is and
every runtime is replicated alike: torch eager's Python overhead holds the GIL of its own
process only, and TensorFlow's one intra-op pool per process is a pool per replica.

On the query path a batch's order is 4 bytes (its size, little-endian) and the answer one
byte (0: done; 1: a Failed line follows), on each replica's pipes: a JSON line there would
cost every batch its encoding. Size 0 closes the replica: it answers ReplicaDone and ends.
Every other line is engine.core.protocol's. A replica's stderr is its front's, so the
parent's tail of the worker's stderr has it.

A replica that ends without answering is gone for good: when a signal ended it (the
kernel's OOM killer at the worker's memory cgroup, a kill) the front ends its own process
group, so the parent classifies the worker's end as it does any other (its cgroup's OOM
count, its watchdog's line); else the run fails naming the replica and its exit code.
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import time

from engine.core.errors import plain_text
from engine.core.protocol import REPLICA, Assign, Failed, Ready, RunOrder, encode
from engine.scenarios import decode
from engine.scenarios.serving.messages import ReplicaDone, ReplicaWarm
from engine.core.topology import read_topology, replica_cpus
from engine.worker.errors import ReplicaFailed

__all__ = ["ReplicaSet", "ReplicaFailed", "serve_replica", "replica_cores", "ORDER"]

ORDER = struct.Struct("<i")  # a batch's size; 0 closes the replica
OK, FAILED = b"\x00", b"\x01"
# A replica closed after its test answers at once; one that does not is killed.
CLOSE_S = 10.0


def replica_cores(cpus, replicas: int, threads: int, topology=None) -> list[tuple[int, ...]]:
    """Each replica's CPUs out of the front's: whole cores of its own (engine/core/topology:
    one thread per core where cores allow), else consecutive CPUs in core order."""
    cpus = sorted(cpus)
    return replica_cpus(cpus, replicas, threads,
                        read_topology(cpus) if topology is None else topology)


# ------------------------------------------------------------------ the front's side


class _Replica:
    """One replica process and its two pipes, read with a buffer of our own (a line, then
    single bytes: a buffered reader could hold bytes an os.read never sees)."""

    def __init__(self, index: int, of: int, run_id: str, spec_dict: dict, known, cores):
        self.index, self.of, self.run_id = index, of, run_id
        self.proc = subprocess.Popen([sys.executable, "-m", "engine.worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     bufsize=0, env=os.environ.copy())
        self.w, self.r = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        self.buf = b""
        self.calls = 0
        assign = Assign(scenario="serve", runs=(RunOrder(run_id, spec_dict, known),),
                        mode=REPLICA, cores=tuple(cores))
        self._write((encode(assign) + "\n").encode())

    @property
    def name(self) -> str:
        return f"replica {self.index + 1} of {self.of}"

    def _write(self, data: bytes) -> None:
        try:
            os.write(self.w, data)
        except OSError:  # it is gone: its answer's absence says so
            pass

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = os.read(self.r, 65536)
            if not chunk:
                break
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _line(self) -> bytes:
        while b"\n" not in self.buf:
            chunk = os.read(self.r, 65536)
            if not chunk:
                out, self.buf = self.buf, b""
                return out
            self.buf += chunk
        out, _, self.buf = self.buf.partition(b"\n")
        return out

    def message(self):
        """The replica's next protocol line, or the end of a replica that is gone."""
        line = self._line()
        if not line.strip():
            self.gone("before it was warm")
        return decode(line)

    def gone(self, when: str):
        """A replica that ended without answering: a signal's end takes the whole worker
        down for the parent to classify (its cgroup's OOM count, its watchdog's line);
        any other is this run's failure."""
        try:
            code = self.proc.wait(timeout=CLOSE_S)
        except subprocess.TimeoutExpired:
            code = None
        if code is not None and code < 0:
            sys.stderr.write(f"\n{self.name} was ended by {signal.Signals(-code).name} "
                             f"{when}; ending the serving worker with it\n")
            sys.stderr.flush()
            os.killpg(os.getpgid(0), signal.SIGKILL)
        raise ReplicaFailed("error", f"{self.name} exited with code {code} {when} (its "
                                     "stderr is above in the worker's)")

    def call(self, n: int) -> None:
        """One batch of n on this replica; raises its failure (ReplicaFailed)."""
        if n <= 0:  # 0 would close the replica
            raise ValueError(f"a batch of {n} samples")
        self._write(ORDER.pack(n))
        answer = self._read(1)
        if answer == OK:
            self.calls += 1
            return
        if answer == FAILED:
            failed = decode(self._line())
            raise ReplicaFailed(failed.status, f"{self.name}: {failed.reason}")
        self.gone("during the test")

    def close(self) -> ReplicaDone | None:
        """Its last word (None: it could not say), and its process reaped."""
        done = None
        if self.proc.poll() is None:
            self._write(ORDER.pack(0))
            try:
                msg = decode(self._line())
                done = msg if isinstance(msg, ReplicaDone) else None
            except ValueError:
                done = None
        try:
            self.proc.wait(timeout=CLOSE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return done

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class ReplicaSet:
    """A serving test's replicas, started together on the front's CPUs split into whole
    cores, each built and warm before the test (`warm` is each one's ReplicaWarm, the
    first's counts and timings the run's). A context manager: on leaving, every replica is
    closed, its peak resident set kept (`done`)."""

    def __init__(self, spec, run_id: str, known: dict | None, progress=lambda p, n: None,
                 cpus=None):
        self.spec = spec
        n, t = spec.replicas, spec.intra_threads
        cpus = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
        self.cores = replica_cores(cpus, n, t)
        # Only the first replica counts params and FLOPs (a forward pass under a counter):
        # the others are told the counts are known, and none.
        skip = {"params": None, "params_trainable": None, "flops_per_sample": None,
                "flops_method": None}
        progress("load", 0)
        spec_dict = spec.to_dict()
        self.replicas = [_Replica(i, n, run_id, spec_dict, known if i == 0 else skip,
                                  self.cores[i]) for i in range(n)]
        self.ready: list[Ready] = []
        self.warm: list[ReplicaWarm] = []
        self.done: list[ReplicaDone | None] = []
        self.start_s = time.perf_counter()
        try:
            for rep in self.replicas:  # they load side by side; read in order
                ready = rep.message()
                if isinstance(ready, Failed):
                    raise ReplicaFailed(ready.status, f"{rep.name}: {ready.reason}")
                warm = rep.message()
                if isinstance(warm, Failed):
                    raise ReplicaFailed(warm.status, f"{rep.name}: {warm.reason}")
                self.ready.append(ready)
                self.warm.append(warm)
        except BaseException:
            for rep in self.replicas:
                rep.kill()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        self.done = [rep.close() for rep in self.replicas]
        return False

    @property
    def lanes(self):
        """Each replica's call(n), one per batcher thread."""
        return [rep.call for rep in self.replicas]

    def peak_rss_bytes(self) -> int | None:
        """The replicas' peak resident sets, summed (None when one could not say)."""
        peaks = [d.peak_rss_bytes if d is not None else None for d in self.done]
        return sum(peaks) if peaks and None not in peaks else None


# ------------------------------------------------------------------ the replica's side


def serve_replica(assign: Assign, out_fd: int, in_fd: int) -> None:
    """A replica's life: pinned, model built, checked and warm, then batches until its
    front closes it (size 0) or goes (EOF)."""
    from engine.scenarios import SCENARIOS

    order = assign.runs[0]
    spec = SCENARIOS[assign.scenario].spec_from_dict(order.spec)
    run_id = order.run_id

    def say(msg) -> None:
        os.write(out_fd, (encode(msg) + "\n").encode())

    if assign.cores:  # before the framework starts a thread: its pools inherit them
        os.sched_setaffinity(0, assign.cores)
    from engine.worker.backends import configure_threads
    from engine.worker.harness import THREAD_ENV, peak_resident_bytes, status_of
    from engine.worker.inference.body import Models
    from engine.worker.machine import machine_facts
    from engine.worker.serving.model import warm_model

    t0 = time.perf_counter()
    models = None
    try:
        configure_threads(spec.framework, spec.intra_threads, spec.inter_threads)
        models = Models(spec.sut)
        say(Ready(pid=os.getpid(), import_s=time.perf_counter() - t0,
                  versions=models.backend.versions(),
                  threads=models.backend.effective_threads(), machine=machine_facts(),
                  env={k: os.environ[k] for k in THREAD_ENV if k in os.environ}))
        warmed = warm_model(models, spec, order.known_stats, lambda phase, n: None)
    except BaseException as exc:  # noqa: BLE001 - told to the front, which fails the run
        say(Failed(run_id, status_of(exc), plain_text(f"{type(exc).__name__}: {exc}")[:2000],
                   **(models.digest_fields(spec.sut) if models is not None else {})))
        return
    backend = models.backend
    stats = warmed.stats
    say(ReplicaWarm(run_id, load_s=models.load_s, prepare_s=backend.prepare_s,
                    first_forward_s=warmed.first_s, warmup_ns=tuple(warmed.warm),
                    samples_ns=(), warmup_s=sum(warmed.warm) / 1e9, measured_s=0.0,
                    stop_reason="warm",
                    params=stats.params, params_trainable=stats.params_trainable,
                    flops_per_sample=stats.flops_per_sample, flops_method=stats.flops_method,
                    model_baseline_bytes=models.baseline,
                    reference_bytes=(backend.reference_bytes()
                                     if hasattr(backend, "reference_bytes") else 0),
                    **models.digest_fields(spec.sut)))
    calls, steps = 0, warmed.steps
    with backend.context():  # thread-local (torch's inference mode): this thread's
        while True:
            data = b""
            while len(data) < ORDER.size:
                chunk = os.read(in_fd, ORDER.size - len(data))
                if not chunk:
                    return  # the front is gone
                data += chunk
            (n,) = ORDER.unpack(data)
            if n == 0:
                say(ReplicaDone(run_id, calls=calls, peak_rss_bytes=peak_resident_bytes()))
                return
            try:
                steps[n]()
                calls += 1
                os.write(out_fd, OK)
            except BaseException as exc:  # noqa: BLE001 - the front decides
                failed = Failed(run_id, status_of(exc),
                                plain_text(f"{type(exc).__name__}: {exc}")[:2000])
                os.write(out_fd, FAILED + (encode(failed) + "\n").encode())
