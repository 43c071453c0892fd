"""Worker subprocess: runs one (framework, threads) group of specs and streams JSON lines.

Started by engine.runner as `python -m engine.worker` with the thread environment already
set, so OMP/MKL read it when the framework is imported here. Reads one JSON payload line on
stdin and keeps stdin open: EOF means the parent is gone, and the worker exits rather than
live on as an orphan. Never opens the database.

The payload's `kind` picks the run body: inference (a backend per runtime, timed by
engine.measure), train (a trainer per runtime, engine.train_loop) or dataload
(engine.load_loop). Every run gets the same frame (_guarded), whatever its kind.

Protocol (one JSON object per line on the original stdout; stray prints of libraries are
sent to stderr so they cannot corrupt it):
  ready    {pid, import_s, versions, threads, env}
  started  {run_id}
  progress {run_id, phase, iters}
  result   {run_id, ...timings, raw samples, params, flops, memory; train: epochs and
            step losses; profiled: top operators, trace path}
  failed   {run_id, status: error|oom|invalid, reason, traceback}
"""

from __future__ import annotations

import gc
import json
import os
import resource
import sys
import threading
import time
import traceback

from engine.record import OOM_MARKERS

THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
              "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OPENBLAS_CORETYPE",
              "KMP_AFFINITY", "KMP_BLOCKTIME", "TF_ENABLE_ONEDNN_OPTS")

def _status_of(exc: BaseException) -> str:
    # A wrong answer (an output or a decoded batch that is not the reference's) or a
    # diverged training: invalid, never timed.
    if type(exc).__name__ in ("OutputMismatch", "Diverged"):
        return "invalid"
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


def _reset_peak_rss() -> bool:
    """Reset VmHWM so the peak read after a run is that run's own (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _limit_address_space(cap_bytes: int | None) -> None:
    """Let this run add at most cap_bytes of address space: beyond it allocations fail
    (MemoryError, bad_alloc) and the run ends as oom instead of swapping the machine."""
    if not cap_bytes:
        return
    size_kb = _proc_status_kb("VmSize") or 0
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    soft = size_kb * 1024 + cap_bytes
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _lift_address_limit() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))


def _exit_when_parent_gone(fd: int) -> None:
    # os.read on a raw descriptor, not sys.stdin.read(): a thread blocked in sys.stdin
    # holds its buffer lock, and a forked child (DataLoader workers) that closes stdin at
    # start-up would wait on that lock forever.
    while os.read(fd, 65536):
        pass  # returns b"" at EOF: the parent closed the pipe or died
    os._exit(0)


def main() -> None:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def emit(event: str, **fields) -> None:
        proto.write(json.dumps({"event": event, **fields}) + "\n")

    with os.fdopen(os.dup(0), "rb", buffering=0) as first_line:  # unbuffered: no byte past
        payload = json.loads(first_line.readline())                # the line is consumed
    watch_fd = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # children see an empty stdin, not the parent's pipe
    sys.stdin = open(os.devnull)
    threading.Thread(target=_exit_when_parent_gone, args=(watch_fd,), daemon=True).start()

    from engine.backends import configure_threads
    from engine.spec import spec_from_dict

    kind = payload.get("kind", "inference")
    runs = [(r["run_id"], spec_from_dict(kind, r["spec"]), r.get("known_stats"))
            for r in payload["runs"]]
    if len({spec.framework for _, spec, _ in runs}) != 1:
        raise SystemExit("a worker runs one framework")  # the runner groups by framework
    first = runs[0][1]
    t0 = time.perf_counter()
    configure_threads(first.framework, first.intra_threads, first.inter_threads)
    ctx = {"emit": emit, "cap": payload.get("memory_cap_bytes"), "t0": t0,
           "trace_dir": payload.get("trace_dir")}
    if kind == "train":
        _run_training(runs, ctx)
    elif kind == "dataload":
        _run_dataload(runs, ctx)
    else:
        _run_inference(runs, ctx, stats_only=payload.get("mode") == "stats")


def _ready(ctx, versions: dict, threads: dict) -> None:
    ctx["emit"]("ready", pid=os.getpid(), import_s=time.perf_counter() - ctx["t0"],
                versions=versions, threads=threads,
                env={k: os.environ[k] for k in THREAD_ENV if k in os.environ})


def _guarded(ctx, run_id: str, spec, body, *, on_failure=lambda: None) -> None:
    """One run's frame, whatever its kind: started, memory cap and peak reset, then exactly
    one result or failed event."""
    emit = ctx["emit"]
    emit("started", run_id=run_id, started_at=time.time())
    try:
        per_run_peak = _reset_peak_rss()
        rss_before = (_proc_status_kb("VmRSS") or 0) * 1024
        # CUDA maps large virtual ranges for its own use: the cap applies to CPU runs.
        _limit_address_space(ctx["cap"] if spec.device == "cpu" else None)
        fields = body()
        peak_kb = _proc_status_kb("VmHWM")
        own_peak = fields.pop("own_peak_rss_bytes", None)
        emit("result", run_id=run_id, ended_at=time.time(), rss_before_bytes=rss_before,
             peak_rss_bytes=own_peak or (peak_kb * 1024 if peak_kb else None),
             peak_rss_method=("VmHWM of the LibTorch runner process" if own_peak else
                              "VmHWM, reset per run via /proc/self/clear_refs"
                              if per_run_peak else "VmHWM over the worker's lifetime"),
             **fields)
    except BaseException as exc:  # every ending becomes one row; the parent decides
        emit("failed", run_id=run_id, ended_at=time.time(), status=_status_of(exc),
             reason=f"{type(exc).__name__}: {exc}"[:2000],
             traceback=traceback.format_exc()[-4000:])
        on_failure()
        gc.collect()
        if isinstance(exc, KeyboardInterrupt):
            raise
    finally:
        _lift_address_limit()


def _trace_path(ctx, run_id: str) -> str | None:
    return os.path.join(ctx["trace_dir"], f"{run_id}.json") if ctx["trace_dir"] else None


def _run_training(runs, ctx) -> None:
    from engine.backends import load_trainer
    from engine.train_loop import run_training

    first = runs[0][1]
    trainers = {first.runtime: load_trainer(first.framework, first.runtime)}
    _ready(ctx, trainers[first.runtime].versions(),
           trainers[first.runtime].effective_threads())
    for run_id, spec, _ in runs:
        if spec.runtime not in trainers:  # eager and LibTorch share a torch worker
            trainers[spec.runtime] = load_trainer(spec.framework, spec.runtime)
        trainer = trainers[spec.runtime]
        progress = lambda phase, n, rid=run_id: ctx["emit"](  # noqa: E731
            "progress", run_id=rid, phase=phase, iters=n)

        def body(spec=spec, run_id=run_id, progress=progress, trainer=trainer):
            try:
                return run_training(spec, trainer, progress=progress,
                                    trace_path=_trace_path(ctx, run_id))
            finally:
                trainer.unload()
        _guarded(ctx, run_id, spec, body)


def _run_dataload(runs, ctx) -> None:
    from engine.load_loop import measure_loading, versions

    _ready(ctx, versions(), {"threads": runs[0][1].intra_threads})
    for run_id, spec, _ in runs:
        progress = lambda phase, n, rid=run_id: ctx["emit"](  # noqa: E731
            "progress", run_id=rid, phase=phase, iters=n)
        _guarded(ctx, run_id, spec,
                 lambda spec=spec, progress=progress: measure_loading(spec, progress))


def _run_inference(runs, ctx, *, stats_only: bool) -> None:
    from engine.backends import load_backend
    from engine.backends.base import ModelStats
    from engine.measure import time_loop

    emit = ctx["emit"]
    first = runs[0][1]
    backends = {first.runtime: load_backend(first.framework, first.runtime)}
    backend = backends[first.runtime]
    _ready(ctx, backend.versions(), backend.effective_threads())
    if stats_only:
        _count_stats(backend, runs, emit)
        return
    flops_cache: dict = {}
    state = {"loaded_key": None, "load_s": None}

    def forget():
        backend.unload()
        state["loaded_key"] = None

    for run_id, spec, known in runs:
        def body(run_id=run_id, spec=spec, known=known):
            nonlocal backend
            # A model built for the same (model, size, weights, device, runtime) is reused
            # across batch sizes: weights are identical by seed, and a Keras build costs
            # seconds. The build time recorded is the one measured when it was built;
            # prepare() below redoes everything that depends on the batch size.
            model_key = (spec.model, spec.image_size, spec.weight_policy, spec.device,
                         spec.runtime)
            reused = model_key == state["loaded_key"]
            if not reused:
                backend.unload()
                state["loaded_key"] = None
                gc.collect()
                if spec.runtime not in backends:
                    backends[spec.runtime] = load_backend(spec.framework, spec.runtime)
                backend = backends[spec.runtime]
                emit("progress", run_id=run_id, phase="load", iters=0)
                t = time.perf_counter()
                backend.load(spec)
                # Build only: a conversion load() did (trace, export) is prepare_s, kept apart.
                state["load_s"] = time.perf_counter() - t - backend.prepare_s
                state["loaded_key"] = model_key
            # Every run, reused or not: this shape's trace/compile and output check.
            emit("progress", run_id=run_id, phase="prepare", iters=0)
            backend.prepare(spec)
            # FLOPs are counted once per (model, size): the parent passes what the store
            # already knows, and this worker caches what it counted.
            key = (spec.model, spec.image_size)
            if known is not None:
                stats = ModelStats(**known)
            elif key in flops_cache:
                stats = flops_cache[key]
            else:
                stats = flops_cache[key] = backend.model_stats(spec, count_flops=True)
            emit("progress", run_id=run_id, phase="first forward", iters=0)
            progress = lambda n, _ns: emit(  # noqa: E731
                "progress", run_id=run_id, phase="measure", iters=n)
            profile = {}
            if hasattr(backend, "measure"):  # the runtime times itself (LibTorch C++)
                first_s, loop = backend.measure(spec, progress)
            else:
                step = backend.make_step(spec)
                with backend.context():
                    t = time.perf_counter()
                    step()
                    first_s = time.perf_counter() - t
                    emit("progress", run_id=run_id, phase="warmup", iters=0)
                    loop = time_loop(step, spec.policy, on_progress=progress)
                    trace_path = _trace_path(ctx, run_id)
                    if spec.profile_steps and trace_path:
                        # A separate pass after the timed one: the profiler never
                        # touches the timed samples.
                        from engine.profiling import profile_pass
                        emit("progress", run_id=run_id, phase="profile", iters=0)
                        profile = profile_pass(spec.framework, step, spec.profile_steps,
                                               trace_path, cuda=spec.device == "cuda")
            return dict(load_s=state["load_s"],
                        first_forward_s=first_s, warmup_ns=list(loop.warmup_ns),
                        samples_ns=list(loop.samples_ns), warmup_s=loop.warmup_wall_ns / 1e9,
                        measured_s=loop.wall_ns / 1e9, stop_reason=loop.stop_reason,
                        params=stats.params, params_trainable=stats.params_trainable,
                        flops_per_sample=stats.flops_per_sample,
                        flops_method=stats.flops_method,
                        own_peak_rss_bytes=getattr(backend, "peak_rss_bytes", None),
                        device_peak_bytes=backend.device_peak_bytes(), model_reused=reused,
                        prepare_s=backend.prepare_s, output_rel_diff=backend.output_rel_diff,
                        **profile)
        _guarded(ctx, run_id, spec, body, on_failure=forget)


def _count_stats(backend, runs, emit) -> None:
    """Catalog mode: build each model and count params and FLOPs, timing nothing."""
    for run_id, spec, _ in runs:
        try:
            backend.load(spec)
            st = backend.model_stats(spec, count_flops=True)
            emit("stats", run_id=run_id, model=spec.model, framework=spec.framework,
                 image_size=spec.image_size, versions=backend.versions(), params=st.params,
                 params_trainable=st.params_trainable, flops_per_sample=st.flops_per_sample,
                 flops_method=st.flops_method)
        except Exception as exc:
            emit("failed", run_id=run_id, status=_status_of(exc),
                 reason=f"{type(exc).__name__}: {exc}"[:2000])
        finally:
            backend.unload()
            gc.collect()


if __name__ == "__main__":
    main()
