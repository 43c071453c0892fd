"""From a worker's events to a RunRecord: the common columns of every attempt, and the
statistics and verdict derived, in the parent, from the raw samples a worker reported.
What differs by kind (throughput, extras) comes from the run's scenario. Events are
engine.core.protocol's, read by their fields."""

from __future__ import annotations

import gzip
import os
import uuid
from dataclasses import replace
from datetime import datetime, timezone

from engine.analysis.stats import summarize, verdict
from engine.scenarios import scenario_of
from engine.core.policy import STOP_MAX_ITERS
from engine.core.protocol import Ready, Result
from engine.core.record import RunRecord

__all__ = ["new_id", "base_fields", "record_from_result", "config_extra", "one_flop_count",
           "load_avg", "FLOP_BASIS", "FLOP_FRAMEWORK"]

# GFLOP/s compares across frameworks only on one count: torch's FlopCounterMode counts
# convolutions and matmuls, TensorFlow's profiler also elementwise ops, pooling and
# BatchNorm. Every run's GFLOP/s uses the torch count of its (model, image size); each
# framework's own count stays in flops_per_sample and flops_method.
FLOP_FRAMEWORK = "torch"
FLOP_BASIS = ("torch FlopCounterMode on the torchvision model (convolutions and matmuls, "
              "2 FLOPs per MAC), one count per model and image size for every framework")


def new_id() -> str:
    return uuid.uuid4().hex


def load_avg(ready: Ready | None) -> float | None:
    """This machine's load average for a record; None for a cluster node's worker (this
    machine's load says nothing of that node's: its interference record measures it)."""
    return None if ready is not None and ready.node else os.getloadavg()[0]


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _ts(epoch: float | None) -> datetime | None:
    return datetime.fromtimestamp(epoch, timezone.utc) if epoch else None


def config_extra(spec) -> dict:
    """What a run was asked to do beyond the common columns (its scenario says): kept on
    every row, failed ones included."""
    return scenario_of(spec).config_extra(spec)


def base_fields(spec, *, run_id: str, tags: dict, ready: Ready | None, started_at, ended_at,
                load_avg, memory_cap_bytes, timeout_s, git_commit, system_id,
                machine_shape: str | None = None, node: dict | None = None) -> dict:
    """The columns every record of this spec carries, however the run ended."""
    machine = (ready.machine if ready is not None else None) or {}
    return dict(
        run_id=run_id, **tags, model=spec.model, framework=spec.framework,
        runtime=spec.runtime, batch_size=spec.batch_size,
        intra_threads=spec.intra_threads, inter_threads=spec.inter_threads,
        precision=spec.precision, image_size=spec.image_size, device=spec.device,
        weight_policy=spec.weight_policy, warmup_iters=spec.policy.warmup_iters,
        min_time_s=spec.policy.min_time_s, min_iters=spec.policy.min_iters,
        max_time_s=spec.policy.max_time_s,
        started_at=_ts(started_at) or _now(), ended_at=_ts(ended_at),
        load_avg_1m=load_avg, memory_cap_bytes=memory_cap_bytes, timeout_s=timeout_s,
        git_commit=git_commit, system_id=system_id, kind=spec.kind,
        extra={**config_extra(spec), **_cores_used(machine), **_hypervisor(machine),
               **_left_to_ray(node), **_start(ready)},
        machine_shape=machine_shape, node_id=(node or {}).get("node_id"),
        node_host=(node or {}).get("hostname"), node_system=(node or {}).get("system"),
        **_process_columns(ready),
        **{k: machine.get(k) for k in ("threads_per_core", "cpu_flags", "governor")},
        **scenario_of(spec).record_columns(spec))


def _process_columns(ready: Ready | None) -> dict:
    """What the worker's Ready says of its process; empty when it never said it."""
    if ready is None:
        return dict(import_s=None, versions={}, threads_effective={}, env={})
    return dict(import_s=ready.import_s, versions=ready.versions,
                threads_effective=ready.threads, env=ready.env)


def _start(ready: Ready | None) -> dict:
    """How the worker began (issue 39), where it was not the plain spawn: a fork from a
    fork server that had imported the framework, so its import_s is only its own."""
    start = getattr(ready, "start", "spawn")
    return {} if start == "spawn" else {"worker_start": start}


def _left_to_ray(node: dict | None) -> dict:
    """A cluster node's run says which core its workers kept off for Ray's processes."""
    cpus = (node or {}).get("ray_cpus")
    if not cpus:
        return {}
    return {"left_to_ray": f"1 core (CPU {', '.join(map(str, cpus))}) left to Ray's "
                           "processes; the run used the node's other cores"}


def _cores_used(machine: dict) -> dict:
    # The physical cores the worker (replicas: all of them) was allowed: what Cost divides
    # throughput by, since N threads on SMT siblings are fewer than N cores.
    n = machine.get("cores_used")
    return {"cores_used": n} if n else {}


def _hypervisor(machine: dict) -> dict:
    # A VM may show each hyperthread as a core (1 thread per core): Cost says so beside an
    # estimate scaled by those cores. Left out when the worker could not tell.
    v = machine.get("hypervisor")
    return {"hypervisor": v} if v is not None else {}


def record_from_result(base: dict, res: Result, spec) -> RunRecord:
    """Derive statistics and the verdict from the raw samples a worker reported."""
    samples = tuple(int(x) for x in res.samples_ns)
    st = summarize(samples)
    validity, why = verdict(st, iterations=st.count, measured_s=res.measured_s,
                            min_iters=spec.policy.min_iters, min_time_s=spec.policy.min_time_s,
                            hit_max_iters=res.stop_reason == STOP_MAX_ITERS)
    if res.flags and validity != "invalid":  # what the parent saw of the run (skew)
        validity, why = "noisy", "; ".join([why, *res.flags] if why else res.flags)
    if res.broken:  # a rule the parent saw broken (replicas that never overlapped)
        validity, why = "invalid", res.broken
    median_s = st.median / 1e9
    flops = res.flops_per_sample
    ms = lambda ns: ns / 1e6  # noqa: E731
    base = dict(base)
    extra = dict(base.pop("extra", None) or {})
    scenario = scenario_of(spec)
    throughput = scenario.throughput(spec, res, samples)
    extra.update(scenario.result_extra(res))
    # Python's garbage collector during timing: False/True, None where no Python loop timed.
    extra["gc_disabled"] = res.gc_disabled
    # Why warm-up ended (settled, or a cap); absent: a loop that does not say (C++ runner).
    if res.warmup_stop:
        extra["warmup_stop"] = res.warmup_stop
    # Calls per timed sample (blocks for calls under ~1 ms); absent: one call per sample.
    if res.block_calls > 1:
        extra["block_calls"] = res.block_calls
    # Steal, other processes' CPU, the cores and the load over the measured window.
    if res.interference:
        extra["interference"] = res.interference
    trace_gz = None
    if res.trace_path and os.path.exists(res.trace_path):
        with open(res.trace_path, "rb") as f:
            trace_gz = gzip.compress(f.read(), 6)
    if res.profile_step_s is not None:
        extra["profile_step_ms"] = res.profile_step_s * 1e3
        extra["profile_steps"] = spec.profile_steps
    return scenario.finish_record(RunRecord(
        **base, status="invalid" if validity == "invalid" else "ok",
        reason=why if validity == "invalid" else "", validity=validity, validity_reason=why,
        stop_reason=res.stop_reason, load_s=res.load_s,
        first_forward_s=res.first_forward_s, warmup_s=res.warmup_s,
        measured_s=res.measured_s, iterations=st.count, mean_ms=ms(st.mean),
        median_ms=ms(st.median), p90_ms=ms(st.p90), p95_ms=ms(st.p95), p99_ms=ms(st.p99),
        min_ms=ms(st.min), max_ms=ms(st.max), std_ms=ms(st.std), iqr_ms=ms(st.iqr), cv=st.cv,
        throughput=throughput, params=res.params, params_trainable=res.params_trainable,
        flops_per_sample=flops,
        flops_method=res.flops_method,
        gflops_per_s=(flops * spec.batch_size / median_s / 1e9) if flops and median_s else None,
        rss_before_bytes=res.rss_before_bytes, peak_rss_bytes=res.peak_rss_bytes,
        peak_rss_method=res.peak_rss_method, device_peak_bytes=res.device_peak_bytes,
        model_peak_bytes=res.model_peak_bytes, model_baseline_bytes=res.model_baseline_bytes,
        reference_bytes=res.reference_bytes, prepare_s=res.prepare_s, extra=extra,
        model_sha256=res.model_sha256, model_bytes=res.model_bytes,
        warmup_ns=tuple(int(x) for x in res.warmup_ns), samples_ns=samples,
        profile_ops=tuple(res.profile_ops), trace_gz=trace_gz,
        **scenario.result_columns(res)), res)


def one_flop_count(rec: RunRecord, reference_flops: int | None) -> RunRecord:
    """The record with GFLOP/s on the one FLOP count of its model and size (the torch count:
    its own for a torch run, the stored one otherwise), and the basis said in extra. A run
    with no reference count stored gets no GFLOP/s rather than an incomparable one."""
    if rec.median_ms is None:
        return rec
    if rec.model_format:  # a user's model: its own count, the only one there is
        basis = (f"this run's own count ({rec.flops_method})" if rec.flops_per_sample
                 else f"no FLOP count for this {rec.model_format} model: no GFLOP/s")
        return replace(rec, extra={**(rec.extra or {}), "gflops_basis": basis})
    count = rec.flops_per_sample if rec.framework == FLOP_FRAMEWORK else reference_flops
    basis = FLOP_BASIS if count else (
        f"no {FLOP_FRAMEWORK} FLOP count stored for {rec.model} at {rec.image_size} px yet "
        "(`python -m engine models` counts it): no GFLOP/s")
    g = count * rec.batch_size / (rec.median_ms / 1e3) / 1e9 if count else None
    return replace(rec, gflops_per_s=g, extra={**(rec.extra or {}), "gflops_basis": basis})
