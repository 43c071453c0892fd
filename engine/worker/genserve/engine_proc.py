"""The engine process: one serving engine (the system under test) owning the model and its
step loop, apart from the front that runs LoadGen (engine/worker/genserve/body.py). It sets
its threads and denormals as a worker does (engine.worker.backends.configure_threads),
before the engine imports its framework; the front does not import it at all.

Why a process of its own: OpenVINO GenAI binds ContinuousBatchingPipeline.step() without
releasing the GIL, so in the front's process every step would hold LoadGen's IssueQuery and
completion calls up to a step's length, and its timing with them; and a front that never
imports torch or OpenVINO keeps its own memory and threads out of the figures. It inherits
the worker's pinned CPUs and thread environment.

Lines on its stdin (the front's): "A <rid> <sample>" adds a request for prompt `sample`,
"Q" ends it (it answers "S <stats JSON>" first). Lines on its stdout: "R <JSON>" once it is
built, checked and warm (or "F <kind> <reason>" and it exits), then "T <rid> <tokens so
far> <0|1 done>" every time a request gains tokens, written as the engine makes them
visible (the front stamps the time as it reads the line). Requests beyond HAND_OVER x
max_num_seqs in the engine wait in this process's queue, in arrival order.

Before it says R: the check request (prompt 0, alone) against the reference tokens (PyTorch
eager fp32 greedy on the same prompt; below the threshold the run is invalid: "F
mismatch"), then one warm-up wave of min(max_num_seqs, samples) requests at once.
"""

from __future__ import annotations

import importlib
import json
import os
import queue
import sys
import threading
import time
import traceback
from collections import deque
from pathlib import Path

__all__ = ["main", "drain", "HAND_OVER"]

# The engine sees its own request ids, 0, 1, 2, ... in the order requests arrive (the check
# and warm-up requests first): OpenVINO's request_id is unsigned, and LoadGen's ids are
# pointers, so the front's ids are mapped here and back on the way out
CHECK_RID = 0
HAND_OVER = 2


def drain(engine, emit) -> None:
    """Step until every queued request finished."""
    while engine.busy():
        engine.step(emit)


def _vm_hwm() -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _start(cfg: dict, out):
    from engine.scenarios.generation.models import language_model
    from engine.scenarios.genserve.spec import GenServeSpec
    from engine.worker.backends import configure_threads
    from engine.worker.generation.agree import check_agreement
    from engine.worker.generation.session import prompts

    spec = GenServeSpec.from_dict(cfg["spec"])
    # as a worker sets its framework before it runs an op: threads, denormals flushed
    configure_threads(spec.framework, spec.intra_threads, spec.inter_threads)
    module = importlib.import_module(cfg["module"])
    t = time.perf_counter()
    engine = module.open_engine(Path(cfg["folder"]), spec, Path(cfg["workdir"]))
    load_s = time.perf_counter() - t
    table = prompts(spec.seed, spec.samples, spec.prompt_len,
                    language_model(spec.model).vocab_size)
    n = spec.output_len
    t0 = time.perf_counter_ns()
    engine.add(CHECK_RID, table[0], n)
    drain(engine, lambda *a: None)
    check_ns = time.perf_counter_ns() - t0
    import numpy as np

    share, compared = check_agreement(np.asarray([engine.tokens(CHECK_RID)]),
                                      Path(cfg["reference"]), spec.precision)
    wave = min(spec.max_num_seqs, spec.samples)
    t0 = time.perf_counter_ns()
    for i in range(wave):
        engine.add(CHECK_RID + 1 + i, table[i], n)
    drain(engine, lambda *a: None)
    warm_ns = time.perf_counter_ns() - t0
    info = {"build_s": engine.build_s, "load_s": load_s, "versions": engine.versions,
            "settings": engine.settings, "agreement": share, "agreement_tokens": compared,
            "check_ns": check_ns, "warm_ns": warm_ns, "warm_requests": wave}
    out.write(f"R {json.dumps(info)}\n".encode())
    out.flush()
    return engine, table, CHECK_RID + 1 + wave


def main() -> None:
    out = sys.stdout.buffer
    cfg = json.loads(sys.stdin.buffer.readline())
    if cfg.get("cores"):  # a replica: its own cores, before a framework starts a thread
        os.sched_setaffinity(0, cfg["cores"])
    # after the pinning: numpy (under session) starts its BLAS threads as it is imported
    from engine.worker.errors import OutputMismatch
    from engine.worker.generation.session import Refused

    try:
        engine, table, next_id = _start(cfg, out)
    except BaseException as exc:  # noqa: BLE001 - told to the front, which fails the run
        kind = ("refused" if isinstance(exc, Refused) else
                "mismatch" if isinstance(exc, OutputMismatch) else "error")
        reason = (str(exc) if kind != "error"
                  else "".join(traceback.format_exception(exc))[-2000:])
        out.write(f"F {kind} {json.dumps(reason)}\n".encode())
        out.flush()
        return
    n = int(cfg["spec"]["output_len"])
    inbox: queue.Queue = queue.Queue()

    def read() -> None:
        for line in sys.stdin.buffer:
            inbox.put(line)
        inbox.put(b"Q\n")  # the front went away

    threading.Thread(target=read, daemon=True, name="inbox").start()

    front_id: dict[int, int] = {}
    # Requests wait here until the engine holds fewer than HAND_OVER x max_num_seqs: it
    # runs at most max_num_seqs at once, and an engine that looks at every request it holds
    # each step (the OpenVINO engine reads each handle) would pay for an Offline test's
    # whole queue at every step
    waiting: deque = deque()
    limit = HAND_OVER * int(cfg["spec"]["max_num_seqs"])
    in_engine = [0]
    # what reporting a token costs this process (the line and its write), timed in place:
    # the bench holds it against TPOT
    cost = {"emit_ns": 0, "emits": 0}

    def emit(rid: int, tokens: int, done: bool) -> None:
        t = time.perf_counter_ns()
        out.write(f"T {front_id[rid]} {tokens} {int(done)}\n".encode())
        out.flush()
        if done:
            del front_id[rid]
            in_engine[0] -= 1
        cost["emit_ns"] += time.perf_counter_ns() - t
        cost["emits"] += 1

    def feed() -> None:
        while waiting and in_engine[0] < limit:
            engine.add(*waiting.popleft(), n)
            in_engine[0] += 1

    while True:
        line = (None if (engine.busy() or waiting) and inbox.empty() else inbox.get())
        while line is not None:
            if line.startswith(b"Q"):
                stats = {**engine.stats(), **cost, "engine_peak_rss_bytes": _vm_hwm()}
                out.write(f"S {json.dumps(stats)}\n".encode())
                out.flush()
                engine.close()
                return
            _, rid, sample = line.split()
            front_id[next_id] = int(rid)
            waiting.append((next_id, table[int(sample) % len(table)]))
            next_id += 1
            try:
                line = inbox.get_nowait()
            except queue.Empty:
                line = None
        feed()
        if engine.busy():
            engine.step(emit)


if __name__ == "__main__":
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    main()
