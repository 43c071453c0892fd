"""The generation body of a worker: per run, the model folder and reference tokens made
where missing (prepare.py's subprocess), a session of the run's runtime opened (its module
imported by the row's path) or reused, the first call's tokens checked against the
reference (agree.py), then warm-up calls and timed calls by engine.worker.measure's loop,
each call's per-token readings kept, then, when the policy asks, an energy loop of its own
(engine.worker.energy: its reading per output token). Nothing is derived here: the parent
derives TTFT, TPOT, ITL and tokens/s from the readings (engine/scenarios/generation/
metrics.py).

A runtime that cannot run the spec here raises session.Refused: a failed row with the
runtime's measured reason ("Refused: ..."), as the frame makes every failure one row.
"""

from __future__ import annotations

import gc
import importlib
import time
from dataclasses import asdict
from importlib.metadata import PackageNotFoundError, version

from engine.scenarios.generation.agreement import REFERENCE_TEXT
from engine.scenarios.generation.messages import GenResult
from engine.scenarios.generation.models import language_model
from engine.scenarios.generation.runtimes import gen_row
from engine.worker.energy import measure_energy
from engine.worker.generation.agree import check_agreement
from engine.worker.generation.models import model_root
from engine.worker.generation.prepare import ensure
from engine.worker.generation.session import prompts
from engine.worker.harness import Frame, resident_bytes
from engine.worker.measure import time_loop

__all__ = ["run_group", "Sessions", "workdir"]

_PACKAGES = {"torch": ("torch", "transformers"),
             "tensorflow": ("tensorflow-cpu", "keras", "keras-hub")}


def workdir():
    """Where runtimes cache their exports and compiled models (beside the folders)."""
    path = model_root() / "builds"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _versions(framework: str) -> dict:
    out = {}
    for name in _PACKAGES.get(framework, ()):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            pass
    return out


def _threads(framework: str) -> dict:
    # the worker's main configured them before this body was imported
    if framework == "torch":
        import torch

        return {"torch_intra_op": torch.get_num_threads(),
                "torch_inter_op": torch.get_num_interop_threads()}
    if framework == "tensorflow":
        import tensorflow as tf

        return {"tf_intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
                "tf_inter_op": tf.config.threading.get_inter_op_parallelism_threads()}
    return {}


class Sessions:
    """The session a worker keeps from one run to the next: one at a time (a model's
    memory is freed before the next is loaded), reused by runs of the same runtime, model,
    precision, seed and options (a compiled runtime compiles each new shape on its first
    call), with its open time and the resident set before it was opened."""

    def __init__(self):
        self.key = None
        self.session = None
        self.load_s: float | None = None
        self.build_s = 0.0  # its build time as measured when it was opened
        self.baseline: int | None = None

    def get(self, spec, folder):
        key = (spec.runtime, spec.model, spec.precision, spec.seed, spec.options)
        if key == self.key:
            return self.session
        self.forget()
        gc.collect()
        self.baseline = resident_bytes()
        module = importlib.import_module(gen_row(spec.runtime, spec.framework).path)
        t = time.perf_counter()
        self.session = module.open_session(folder, spec, workdir())
        self.load_s = time.perf_counter() - t
        self.build_s = self.session.build_s
        self.key = key
        return self.session

    def forget(self) -> None:
        self.session, self.key = None, None


def run_group(runs, frame: Frame) -> None:
    first = runs[0][1]
    frame.ready(_versions(first.framework), _threads(first.framework))
    sessions = Sessions()
    # every shape this group runs, per (model, seed): one prepare subprocess makes all the
    # missing references at once (each start imports torch and transformers). A slice: a
    # held worker's runs (engine/worker/main.py) wait for more when iterated past the end.
    shapes: dict = {}
    for _, spec, _ in runs[:len(runs)]:
        shapes.setdefault((spec.model, spec.seed), []).append(
            (spec.batch_size, spec.prompt_len, spec.output_len))
    prepared: dict = {}
    for run_id, spec, _ in runs:
        frame.guarded(run_id, spec,
                      lambda run_id=run_id, spec=spec: _run(frame, sessions, run_id, spec,
                                                            prepared, shapes),
                      on_failure=sessions.forget)


def _run(frame: Frame, sessions: Sessions, run_id: str, spec, prepared: dict,
         shapes: dict) -> GenResult:
    progress = frame.progress(run_id)
    row = gen_row(spec.runtime, spec.framework)
    shape = (spec.batch_size, spec.prompt_len, spec.output_len)
    progress("prepare", 0)
    key = (spec.model, spec.seed)
    if key not in prepared or shape not in prepared[key][1]:
        prepared[key] = ensure(spec.model, spec.seed, list(dict.fromkeys(
            [shape, *shapes.get(key, ())])))
    folder, refs = prepared[key]
    progress("load", 0)
    session = sessions.get(spec, folder)  # Refused: the frame's row says "Refused: why"
    prompt = prompts(spec.seed, spec.batch_size, spec.prompt_len,
                     language_model(spec.model).vocab_size)
    n = spec.output_len
    progress("first call", 0)
    before = session.build_s
    first = session.generate(prompt, n)
    compile_s = session.build_s - before  # what the first call of this shape compiled
    _check_shape(first, spec)
    share, compared = check_agreement(first.tokens, refs[shape], spec.precision)
    calls = []

    def step() -> int:
        t = session.generate(prompt, n)
        calls.append(t)
        return t.end_ns - t.start_ns

    progress("warmup", 0)
    loop = time_loop(step, spec.policy, on_progress=lambda k, _ns: progress("measure", k))
    timed = calls[len(loop.warmup_ns):]
    # Asked for: an energy loop of its own after the timed calls (never beside them), its
    # reading per output token, B x N a call; absent with the reason where no counter is
    energy = None
    if spec.policy.energy_s:
        progress("energy", 0)
        energy = asdict(measure_energy(lambda: session.generate(prompt, n), spec,
                                       per_call=spec.batch_size * n))
    for t in timed:
        _check_shape(t, spec)
    per_token = all(t.token_ns for t in timed)
    return GenResult(
        run_id, load_s=sessions.load_s, first_forward_s=(first.end_ns - first.start_ns) / 1e9,
        warmup_ns=tuple(loop.warmup_ns), samples_ns=tuple(loop.samples_ns),
        warmup_s=loop.warmup_wall_ns / 1e9, measured_s=loop.wall_ns / 1e9,
        stop_reason=loop.stop_reason, gc_disabled=loop.gc_disabled, prepare_s=compile_s,
        warmup_stop=loop.warmup_stop,
        params=language_model(spec.model).params, model_baseline_bytes=sessions.baseline,
        batch_size=spec.batch_size, prompt_len=spec.prompt_len, output_len=n,
        token_ns=tuple(x - t.start_ns for t in timed for x in t.token_ns) if per_token else (),
        ttft_ns=() if per_token else tuple(int(t.ttft_ns) for t in timed),
        timing_source=row.timing if per_token else (timed[0].no_steps or row.timing),
        agreement=share, agreement_tokens=compared, agreement_reference=REFERENCE_TEXT,
        build_s=sessions.build_s + compile_s, kv_cache_bytes=spec.kv_cache_bytes,
        runtime_versions=dict(session.versions), energy=energy)


def _check_shape(t, spec) -> None:
    """A call that returned other than B x N tokens, or readings for other than N steps,
    measured something else: the run fails saying so."""
    want = (spec.batch_size, spec.output_len)
    if tuple(t.tokens.shape) != want:
        raise RuntimeError(f"{spec.runtime} returned tokens of shape {tuple(t.tokens.shape)} "
                           f"for batch x output {want}")
    if t.token_ns and len(t.token_ns) != spec.output_len:
        raise RuntimeError(f"{spec.runtime} gave {len(t.token_ns)} per-token readings for "
                           f"{spec.output_len} tokens")
    if not t.token_ns and t.ttft_ns is None:
        raise RuntimeError(f"{spec.runtime} gave neither per-token readings nor a TTFT "
                           f"({t.no_steps or 'no reason given'})")
