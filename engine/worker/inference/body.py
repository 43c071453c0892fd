"""The inference body of a worker: a backend per runtime, a model built once and reused
across batch sizes, every run prepared, checked and timed by engine.worker.measure inside
the worker's frame. In "stats" mode it only counts params and FLOPs (the catalog)."""

from __future__ import annotations

import contextlib
import gc
import time
from dataclasses import asdict, dataclass
from typing import Callable

from engine.core.errors import plain_text
from engine.core.model_source import describe_inputs
from engine.core.protocol import Failed, Stats
from engine.scenarios.inference.messages import InferenceResult
from engine.worker.backends import load_backend
from engine.worker.backends.base import ModelStats
from engine.worker.harness import Frame, resident_bytes, status_of
from engine.worker.interference import interference, snapshot
from engine.worker.measure import WINDOW, LoopResult, time_loop
from engine.worker.profiling import profile_pass
from engine.worker.declared import declared_inputs, declared_mismatch
from engine.worker.energy import absent, measure_energy
from engine.worker.numerics import apply as apply_numerics
from engine.worker.user_models import ModelFileError, source_digest

__all__ = ["run_group", "Models", "inputs_named"]


def run_group(runs, frame: Frame) -> None:
    models = Models(runs[0][1])
    frame.ready(models.backend.versions(), models.backend.effective_threads())
    if frame.mode == "stats":
        _count_stats(models.backend, runs, frame.emit)
        return
    for run_id, spec, known in runs:
        # A failure after the file was hashed still names the bytes it failed on.
        frame.guarded(run_id, spec,
                      lambda run_id=run_id, spec=spec, known=known:
                      _run(frame, models, run_id, spec, known),
                      on_failure=models.forget,
                      failure_fields=lambda spec=spec: models.digest_fields(spec))


class Models:
    """What a worker keeps from one run to the next: a backend per runtime, the model it
    built last (with its build time, the resident set before it was built and, for a user's
    model, the digest of its bytes) and the FLOP counts it made. `resident` reads the
    resident set the baseline is taken with (harness.resident_bytes)."""

    def __init__(self, first, resident: Callable[[], int | None] = resident_bytes):
        self.backends = {first.runtime: load_backend(first.framework, first.runtime)}
        self.backend = self.backends[first.runtime]
        self.key = None  # what the model built is keyed on (_model_key)
        self.load_s: float | None = None
        self.calibrate_s = 0.0
        self.baseline: int | None = None  # resident bytes before the model was built
        self.digest: tuple = (None, None)  # (sha256, bytes) of a user's model
        self.counted: dict = {}  # (model, size, user model) -> ModelStats
        self.declared: dict = {}  # user model -> the inputs its file declares (or None)
        self.resident = resident

    def ensure(self, spec, progress) -> bool:
        """The spec's model built; True when the last run's was reused.

        A model built for the same (model, size, weights, device, runtime) is reused across
        batch sizes: weights are identical by seed, and a Keras build costs seconds. The
        build time recorded is the one measured when it was built; the backend's prepare()
        redoes everything that depends on the batch size."""
        key = _model_key(spec)
        if key == self.key:
            return True
        self.forget()
        gc.collect()
        if spec.runtime not in self.backends:
            self.backends[spec.runtime] = load_backend(spec.framework, spec.runtime)
        self.backend = self.backends[spec.runtime]
        # The framework imported, the device started (a CUDA context and its libraries are
        # CUDA's memory, not the model's), the last model freed: what this model's memory
        # adds to, kept for the batch sizes that reuse it.
        self.backend.start_device(spec)
        self.baseline = self.resident()
        progress("load", 0)
        src = spec.user_model
        # what exactly is loaded, by content: a file hashed before its load is timed, a
        # factory's module once it is imported
        self.digest = (source_digest(src) if src is not None and src.format != "factory"
                       else (None, None))
        # a backend whose load() sets none (a user's file) built no calibrated weights
        self.backend.weights_from, self.backend.calibrate_s = None, 0.0
        t = time.perf_counter()
        self.backend.load(spec)
        if src is not None and src.format == "factory":
            self.digest = source_digest(src)
        # Build only: a conversion load() did (trace, export) is prepare_s, and the
        # benchmark's own BatchNorm calibration calibrate_s (engine.worker.weights), kept apart.
        self.calibrate_s = self.backend.calibrate_s
        self.load_s = time.perf_counter() - t - self.backend.prepare_s - self.calibrate_s
        self.key = key
        return False

    def stats(self, spec, known: dict | None) -> ModelStats:
        """Params and FLOPs, counted once per (model, size): the parent passes what the store
        already knows, and this worker keeps what it counted."""
        if known is not None:
            return ModelStats(**known)
        key = (spec.model, spec.image_size, spec.user_model)
        if key not in self.counted:
            self.counted[key] = self.backend.model_stats(spec, count_flops=True)
        return self.counted[key]

    def check_declared(self, spec) -> None:
        """A user's inputs that do not fit what the file declares are named here, before
        anything is prepared or timed (ModelInputError: one failure row)."""
        src = spec.user_model
        if src is None:
            return
        if src not in self.declared:
            self.declared[src] = declared_inputs(src)
        why = declared_mismatch(src, spec.batch_size, self.declared[src])
        if why:
            raise ModelInputError(why)

    def digest_fields(self, spec) -> dict:
        if spec.user_model is None:
            return {}
        sha, size = self.digest
        return {"model_sha256": sha, "model_bytes": size}

    def forget(self) -> None:
        self.backend.unload()
        self.key = None


def _model_key(spec) -> tuple:
    # precision: an fp32 and an int8 run of one runtime are two built models
    return (spec.model, spec.image_size, spec.weight_policy, spec.device, spec.runtime,
            spec.user_model, spec.precision)


def _error_fields(err) -> dict:
    """A reduced-precision run's distance from fp32 (backends.base.OutputError) as the
    result's fields; none for fp32 runs."""
    if err is None:
        return {}
    return dict(output_max_abs=err.max_abs, output_max_rel=err.max_rel,
                top1_agreement=err.top1_agreement, top1_inputs=err.inputs)


@dataclass(frozen=True)
class _Timed:
    first_s: float  # the first call after preparation
    first_from: str  # which call that was
    loop: LoopResult
    window: dict  # engine.worker.interference over the timed loop
    profile: dict  # a profiled run's fields (profile_pass), else empty
    energy: dict | None = None  # the energy loop's reading (EnergyReading), None: not asked
    device_peak: int | None = None  # over the timed loop (backend.reset_device_peak), or None


def _run(frame: Frame, models: Models, run_id: str, spec, known) -> InferenceResult:
    """One run: its model built or reused, prepared for this shape and checked, timed."""
    progress = frame.progress(run_id)
    numerics = apply_numerics(spec)  # before the model: cudnn.benchmark, TF32, read back
    reused = models.ensure(spec, progress)
    models.check_declared(spec)
    progress("prepare", 0)  # every run, reused or not: this shape's trace/compile and check
    backend = models.backend
    with inputs_named(spec):
        backend.prepare(spec)
    stats = models.stats(spec, known)
    progress("first forward", 0)
    timed = (_timed_by_backend(backend, spec, progress) if hasattr(backend, "measure")
             else _timed_here(frame, backend, run_id, spec, progress))
    loop = timed.loop
    return InferenceResult(
        run_id, load_s=models.load_s, first_forward_s=timed.first_s,
        warmup_ns=tuple(loop.warmup_ns), samples_ns=tuple(loop.samples_ns),
        warmup_s=loop.warmup_wall_ns / 1e9, measured_s=loop.wall_ns / 1e9,
        stop_reason=loop.stop_reason, gc_disabled=loop.gc_disabled,
        warmup_stop=loop.warmup_stop,
        block_calls=loop.block_calls, interference=timed.window,
        first_forward_from=timed.first_from, params=stats.params,
        params_trainable=stats.params_trainable, flops_per_sample=stats.flops_per_sample,
        flops_method=stats.flops_method,
        peak_rss_bytes=getattr(backend, "peak_rss_bytes", None),  # the C++ runner's own
        # the C++ runner's own baseline, else this process's before the model was built
        model_baseline_bytes=getattr(backend, "baseline_rss_bytes", None) or models.baseline,
        reference_bytes=backend.reference_bytes() if hasattr(backend, "reference_bytes") else 0,
        device_peak_bytes=timed.device_peak, model_reused=reused,
        prepare_s=backend.prepare_s, output_rel_diff=backend.output_rel_diff,
        weights_from=backend.weights_from, calibrate_s=models.calibrate_s or None,
        **_error_fields(getattr(backend, "output_error", None)),
        runtime_settings=getattr(backend, "runtime_settings", None),
        sample_ends_ns=tuple(loop.sample_ends_ns) if loop.sample_ends_ns else None,
        blocks=loop.blocks, energy=timed.energy, numerics=numerics,
        **models.digest_fields(spec), **timed.profile)


def _timed_by_backend(backend, spec, progress) -> _Timed:
    """A runtime that times itself (the LibTorch C++ runner): its first call is the
    runner's."""
    before = snapshot()
    with inputs_named(spec):
        first_s, loop = backend.measure(spec, lambda n, _ns: progress("measure", n))
    energy = (asdict(absent("the LibTorch runner times itself in a process of its own, "
                            "which runs no energy loop")) if spec.policy.energy_s else None)
    return _Timed(first_s, "the runner's first call", loop, interference(before, snapshot()),
                  {}, energy, backend.device_peak_bytes())


def _timed_here(frame: Frame, backend, run_id: str, spec, progress) -> _Timed:
    """The first call after preparation, then the timed loop (on its own, in a replica's
    window or in interleaved blocks: the frame's gate), then a profiled pass if asked. The
    device peak is the timed loop's: reset after warm-up, read before the energy loop and
    the profiled pass, so neither a shape's first-call work (cuDNN's algorithm search) nor
    what ran before in this worker is in it."""
    step = backend.make_step(spec)
    gate = frame.gate(run_id)
    with backend.context():
        # Shape-generic runtimes made the first call in prepare()'s output check, timed
        # there; the others make it here.
        first_s, first_from = backend.first_forward_s, "the output check's call"
        if first_s is None:
            with inputs_named(spec):  # the reference's first call is this one
                t = time.perf_counter()
                step()
                first_s, first_from = time.perf_counter() - t, "a timed call"
        progress("warmup", 0)
        before = snapshot()
        loop = time_loop(step, spec.policy, on_progress=lambda n, _ns: progress("measure", n),
                         gate=gate, after_warmup=backend.reset_device_peak,
                         **({"clock": time.monotonic_ns} if gate and gate.mode == WINDOW
                            else {}))
        device_peak = backend.device_peak_bytes()
        # an interleaved contender: over its own blocks, not its rivals'
        window = (gate.interference() if gate else None) or interference(before, snapshot())
        # After the timed loop, never inside it; a gated worker (a replica, an interleaved
        # contender) is refused energy before it starts (RunSpec, together.interleavable)
        if spec.policy.energy_s:
            progress("energy", 0)
        energy = measure_energy(step, spec)
        profile = {}
        trace_path = frame.trace_path(run_id)
        if spec.profile_steps and trace_path:
            # A separate pass after the timed one: the profiler never touches the samples.
            progress("profile", 0)
            profile = profile_pass(spec.framework, step, spec.profile_steps, trace_path,
                                   cuda=spec.device == "cuda")
    return _Timed(first_s, first_from, loop, window, profile,
                  asdict(energy) if energy is not None else None, device_peak)


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
        text = " ".join(plain_text(str(exc)).split())
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
            emit(Stats(run_id, model=spec.model, framework=spec.framework,
                       image_size=spec.image_size, versions=backend.versions(),
                       params=st.params, params_trainable=st.params_trainable,
                       flops_per_sample=st.flops_per_sample, flops_method=st.flops_method))
        except Exception as exc:
            emit(Failed(run_id, status_of(exc), plain_text(f"{type(exc).__name__}: {exc}")[:2000]))
        finally:
            backend.unload()
            gc.collect()
