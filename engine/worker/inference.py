"""The inference body of a worker: a backend per runtime, a model built once and reused
across batch sizes, every run prepared, checked and timed by engine.worker.measure inside
the worker's frame. In "stats" mode it only counts params and FLOPs (the catalog)."""

from __future__ import annotations

import contextlib
import gc
import time

from engine.core.model_source import describe_inputs
from engine.worker.backends import load_backend
from engine.worker.backends.base import ModelStats
from engine.worker.harness import Frame, status_of
from engine.worker.interference import interference, snapshot
from engine.worker.measure import WINDOW, time_loop
from engine.worker.profiling import profile_pass
from engine.worker.user_models import ModelFileError, source_digest

__all__ = ["run_group"]


def run_group(runs, frame: Frame) -> None:
    emit = frame.emit
    first = runs[0][1]
    backends = {first.runtime: load_backend(first.framework, first.runtime)}
    backend = backends[first.runtime]
    frame.ready(backend.versions(), backend.effective_threads())
    if frame.mode == "stats":
        _count_stats(backend, runs, emit)
        return
    flops_cache: dict = {}
    state = {"loaded_key": None, "load_s": None, "digest": (None, None)}

    def digest(spec) -> dict:
        if spec.user_model is None:
            return {}
        sha, size = state["digest"]
        return {"model_sha256": sha, "model_bytes": size}

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
                         spec.runtime, spec.user_model)
            reused = model_key == state["loaded_key"]
            if not reused:
                backend.unload()
                state["loaded_key"] = None
                gc.collect()
                if spec.runtime not in backends:
                    backends[spec.runtime] = load_backend(spec.framework, spec.runtime)
                backend = backends[spec.runtime]
                emit("progress", run_id=run_id, phase="load", iters=0)
                state["digest"] = (None, None)
                if spec.user_model is not None and spec.user_model.format != "factory":
                    # what exactly is loaded, by content; hashed before the load is timed
                    state["digest"] = source_digest(spec.user_model)
                t = time.perf_counter()
                backend.load(spec)
                if spec.user_model is not None and spec.user_model.format == "factory":
                    state["digest"] = source_digest(spec.user_model)  # its module, imported
                # Build only: a conversion load() did (trace, export) is prepare_s, kept apart.
                state["load_s"] = time.perf_counter() - t - backend.prepare_s
                state["loaded_key"] = model_key
            # Every run, reused or not: this shape's trace/compile and output check.
            emit("progress", run_id=run_id, phase="prepare", iters=0)
            with inputs_named(spec):
                backend.prepare(spec)
            # FLOPs are counted once per (model, size): the parent passes what the store
            # already knows, and this worker caches what it counted.
            key = (spec.model, spec.image_size, spec.user_model)
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
            gate = frame.gate(run_id)
            if hasattr(backend, "measure"):  # the runtime times itself (LibTorch C++)
                before = snapshot()
                with inputs_named(spec):  # its first call is the runner's
                    first_s, loop = backend.measure(spec, progress)
                window = interference(before, snapshot())
                first_from = "the runner's first call"
            else:
                step = backend.make_step(spec)
                with backend.context():
                    # The first call after preparation: shape-generic runtimes made it in
                    # prepare()'s output check, timed there; the others make it here.
                    first_s = backend.first_forward_s
                    first_from = "the output check's call"
                    if first_s is None:
                        with inputs_named(spec):  # the reference's first call is this one
                            t = time.perf_counter()
                            step()
                            first_s = time.perf_counter() - t
                        first_from = "a timed call"
                    emit("progress", run_id=run_id, phase="warmup", iters=0)
                    before = snapshot()
                    loop = time_loop(step, spec.policy, on_progress=progress, gate=gate,
                                     **({"clock": time.monotonic_ns}
                                        if gate and gate.mode == WINDOW else {}))
                    # an interleaved contender: over its own blocks, not its rivals'
                    window = ((gate.interference() if gate else None)
                              or interference(before, snapshot()))
                    trace_path = frame.trace_path(run_id)
                    if spec.profile_steps and trace_path:
                        # A separate pass after the timed one: the profiler never
                        # touches the timed samples.
                        emit("progress", run_id=run_id, phase="profile", iters=0)
                        profile = profile_pass(spec.framework, step, spec.profile_steps,
                                               trace_path, cuda=spec.device == "cuda")
            return dict(load_s=state["load_s"],
                        first_forward_s=first_s, warmup_ns=list(loop.warmup_ns),
                        samples_ns=list(loop.samples_ns), warmup_s=loop.warmup_wall_ns / 1e9,
                        measured_s=loop.wall_ns / 1e9, stop_reason=loop.stop_reason,
                        gc_disabled=loop.gc_disabled, block_calls=loop.block_calls,
                        interference=window, first_forward_from=first_from,
                        params=stats.params, params_trainable=stats.params_trainable,
                        flops_per_sample=stats.flops_per_sample,
                        flops_method=stats.flops_method,
                        own_peak_rss_bytes=getattr(backend, "peak_rss_bytes", None),
                        device_peak_bytes=backend.device_peak_bytes(), model_reused=reused,
                        prepare_s=backend.prepare_s, output_rel_diff=backend.output_rel_diff,
                        **digest(spec), **profile,
                        **({"sample_ends_ns": list(loop.sample_ends_ns)}
                           if loop.sample_ends_ns else {}),
                        **({"blocks": loop.blocks} if loop.blocks else {}))
        # A failure after the file was hashed still names the bytes it failed on.
        frame.guarded(run_id, spec, body, on_failure=forget,
                      failure_fields=lambda spec=spec: digest(spec))


class ModelInputError(Exception):
    """A user's model refused the inputs described for it: the framework's message, in one
    line, naming the field."""


@contextlib.contextmanager
def inputs_named(spec):
    """The first calls of a user's model are where a described input that does not fit it
    fails: its error then names the input field and the inputs given, in one line."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - re-raised, classified, below
        if (spec.user_model is None or status_of(exc) != "error"
                or isinstance(exc, ModelFileError)):
            raise
        text = " ".join(str(exc).split())
        if len(text) > 600:  # TorchScript puts its traceback first and the reason last
            text = f"{text[:150]} ... {text[-440:]}"
        raise ModelInputError(f"input: the model's first call on "
                              f"{describe_inputs(spec.user_model.inputs)} at batch "
                              f"{spec.batch_size} failed: {type(exc).__name__}: {text}") from None


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
            emit("failed", run_id=run_id, status=status_of(exc),
                 reason=f"{type(exc).__name__}: {exc}"[:2000])
        finally:
            backend.unload()
            gc.collect()
