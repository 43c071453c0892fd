"""Worker subprocess: runs one (framework, threads) group of specs and streams JSON lines.

Started by the parent's executor as `python -m engine.worker` with the thread environment
already set, so OMP/MKL read it when the framework is imported here. Reads one Assign
line on stdin and keeps stdin open: EOF means the parent is gone, and the worker exits
rather than live on as an orphan. Never opens the database. A worker whose Assign asks for
a `sync` (a replica's window, or interleaved blocks) reads the parent's commands from the
same stdin, one line each (engine.worker.harness.command).

The Assign's `scenario` names the kind (engine.scenarios), whose `worker_body` module runs
the group: engine/worker/inference/body.py (a backend per runtime, timed by engine.worker.measure),
training.py (a trainer per runtime, engine.worker.training.train_loop) or dataload.py
(engine.worker.dataload.load_loop). Every run gets the same frame (engine.worker.harness), whatever
its kind.

Protocol: engine.core.protocol's messages, one JSON line each, on the original stdout
(stray prints of libraries are sent to stderr so they cannot corrupt it): Ready, then per
run Started, Progress, Armed and BlockTimed (at a gate), and exactly one result or Failed;
Stats in the catalog's counting mode; DeclaredInputs only, in the "declared" mode (what a
user's model file declares about its inputs: no framework imported, nothing run);
Calibrated only, in the CALIBRATE mode (the machine's GEMM and bandwidth ceilings).
"""

from __future__ import annotations

import importlib
import os
import queue
import sys
import threading
import time

from engine.core.protocol import CALIBRATE, REPLICA, Assign, Message, More, encode
from engine.scenarios import SCENARIOS
from engine.worker.harness import Frame, command

__all__ = ["main"]


def _exit_when_parent_gone(fd: int, commands: queue.Queue) -> None:
    # os.read on a raw descriptor, not sys.stdin.read(): a thread blocked in sys.stdin
    # holds its buffer lock, and a forked child (DataLoader workers) that closes stdin at
    # start-up would wait on that lock forever. What the parent writes after the Assign
    # are commands to a worker it holds at a gate (a window, a block, stop), a line each.
    pending = b""
    while data := os.read(fd, 65536):  # b"" at EOF: the parent closed the pipe or died
        *lines, pending = (pending + data).split(b"\n")
        for line in lines:
            if line.strip():
                commands.put(line.decode())
    os._exit(0)


class _Held(list):
    """A held worker's runs: the Assign's, then each More's as the parent sends it. The
    body iterates them as it would a list; the iteration waits, warm, for the next More,
    and the worker ends when the parent closes its stdin (_exit_when_parent_gone)."""

    def __init__(self, runs, commands: queue.Queue, scenario):
        super().__init__(runs)
        self.commands, self.scenario = commands, scenario

    def __iter__(self):
        i = 0
        while True:
            if i == len(self):
                more = command(self.commands.get(), More)
                self.extend((r.run_id, self.scenario.spec_from_dict(r.spec), r.known_stats)
                            for r in more.runs)
                continue
            yield self[i]
            i += 1


def main() -> None:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def emit(msg: Message) -> None:
        proto.write(encode(msg) + "\n")

    with os.fdopen(os.dup(0), "rb", buffering=0) as first_line:  # unbuffered: no byte past
        assign = command(first_line.readline(), Assign)           # the line is consumed
    if assign.mode == REPLICA:  # a serving worker's replica: its front's batches on stdin,
        from engine.worker.serving.replica import serve_replica  # read here, on the query path

        serve_replica(assign, proto.fileno(), 0)
        return
    watch_fd = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # children see an empty stdin, not the parent's pipe
    sys.stdin = open(os.devnull)
    commands: queue.Queue = queue.Queue()
    threading.Thread(target=_exit_when_parent_gone, args=(watch_fd, commands),
                     daemon=True).start()

    if assign.mode == "declared":  # only what a user's file declares: read as data
        from engine.worker.declared import reply_declared
        reply_declared(assign.runs, emit)
        return

    from engine.worker.backends import configure_threads

    scenario = SCENARIOS[assign.scenario]
    runs = [(r.run_id, scenario.spec_from_dict(r.spec), r.known_stats) for r in assign.runs]
    if len({spec.framework for _, spec, _ in runs}) != 1:
        raise SystemExit("a worker runs one framework")  # the runner groups by framework
    first = runs[0][1]
    t0 = time.perf_counter()
    if scenario.worker_imports_framework:
        configure_threads(first.framework, first.intra_threads, first.inter_threads)
    if assign.mode == CALIBRATE:  # the machine's ceilings, on a run's threads and cores
        from engine.worker.calibrate import calibrate

        calibrate(assign, emit)
        return
    frame = Frame(emit, cap=assign.memory_cap_bytes, t0=t0, trace_dir=assign.trace_dir,
                  mode=assign.mode, sync=assign.sync, commands=commands, cgroup=assign.cgroup)
    if assign.held:
        runs = _Held(runs, commands, scenario)
    importlib.import_module(scenario.worker_body).run_group(runs, frame)
