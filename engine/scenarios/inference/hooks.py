"""Inference: a model's forward pass timed per batch, one runtime at a time."""

from __future__ import annotations

from engine.core.catalog import tokens_per_sample
from engine.core.energy import EnergyReading, energy_words
from engine.scenarios.inference.spec import RunSpec
from engine.core.model_source import describe_inputs
from engine.core.protocol import Event, Progress
from engine.scenarios.inference.messages import MESSAGES, InferenceResult
from engine.scenarios.base import Scenario, phase_of

__all__ = ["Inference", "INFERENCE"]


class Inference(Scenario):
    kind = RunSpec.kind
    spec_type = RunSpec
    worker_body = "engine.worker.inference.body"
    messages = MESSAGES
    title = "Compare"
    sample_unit = "batch"
    counts_model_stats = True
    decides_contests = True
    interleaves = True
    exports = ("perfzero", "pytorch-benchmark")

    def record_columns(self, spec) -> dict:
        src = spec.user_model
        common = {"replicas": spec.replicas, "contention": spec.contention,
                  "wait_policy": spec.wait_policy}
        if src is None:
            return common
        # a file's path, or a factory's module:function (its folder is in the command line)
        return {"model_format": src.format, "model_origin": src.factory or src.path,
                "model_inputs": describe_inputs(src.inputs), **common}

    def config_extra(self, spec) -> dict:
        extra = {"profile_steps": spec.profile_steps} if spec.profile_steps else {}
        # the runtime's own options as asked (OpenVINO's hint; the streams it gave are the
        # result's), under the option's name
        extra.update(spec.options)
        if spec.replica:
            extra["replica"] = spec.replica
        if spec.user_model is not None and spec.user_model.trust_code:
            extra["trust_model_code"] = True  # the user let this file's code run
        return extra

    def result_extra(self, res: InferenceResult) -> dict:
        extra = {"model_reused": bool(res.model_reused),
                 "output_rel_diff": res.output_rel_diff,
                 # which call first_forward_s timed: always the first after preparation
                 "first_forward_from": res.first_forward_from}
        if res.runtime_settings:  # what the runtime chose, read back (OpenVINO's streams)
            extra.update(res.runtime_settings)
        if res.weights_from:  # a catalog model's calibrated weights, and how they came
            extra["weights_from"] = res.weights_from
            if res.calibrate_s:  # seconds the calibration took, outside load_s
                extra["calibrate_s"] = res.calibrate_s
        if res.replica_throughputs:  # each replica's own figure and the window's skew
            extra.update(replica_throughputs=list(res.replica_throughputs),
                         window_start_skew_ms=res.window_start_skew_ms,
                         window_end_skew_ms=res.window_end_skew_ms)
            if res.window_skew_frac is not None:  # the window every replica covered
                extra.update(window_skew_frac=res.window_skew_frac, window_s=res.window_s)
        if res.interleaved:  # timed alternately with a contest's other contenders
            extra["interleaved"] = res.interleaved
        if res.sequential:  # timed alone, and why
            extra["sequential"] = res.sequential
        return extra

    def result_columns(self, res: InferenceResult) -> dict:
        """The energy loop's reading and the numerics read back (issue 28), and a
        reduced-precision run's error against fp32 (m015; None on fp32 runs), as columns."""
        out = {"numerics": dict(res.numerics or {}),
               "output_max_abs": res.output_max_abs, "output_max_rel": res.output_max_rel,
               "top1_agreement": res.top1_agreement, "top1_inputs": res.top1_inputs}
        if res.energy is None:
            return out
        e = EnergyReading.from_dict(res.energy)
        return {**out, "energy_source": e.source, "energy_absent": e.absent,
                "energy_j_per_sample": e.j_per_sample,
                "energy_kwh_per_million": e.kwh_per_million, "energy_loop_s": e.loop_s,
                "energy_samples": e.samples,
                "energy_counters": ", ".join(e.counters) or None}

    def throughput(self, spec, res: InferenceResult, samples_ns) -> float | None:
        """Replicas serve at once: the machine's throughput is the sum of theirs over the
        window every replica covered; one worker: the base definition."""
        if res.replica_throughputs:
            return sum(res.replica_throughputs)
        return super().throughput(spec, res, samples_ns)

    def describe_event(self, spec, ev: Event) -> str:
        iters = f" {ev.iters} it" if isinstance(ev, Progress) and ev.iters else ""
        return (f"{spec.model} {spec.framework} b{spec.batch_size} t{spec.intra_threads}: "
                f"{phase_of(ev)}{iters}")

    def figure(self, rec) -> str:
        energy = energy_words(rec.energy_source, rec.energy_absent, rec.energy_j_per_sample,
                              rec.energy_kwh_per_million)
        tokens = tokens_per_sample(rec.model, getattr(rec, "image_size", None))
        per_token = f" ({rec.throughput * tokens:,.0f} tokens/s)" if tokens else ""
        return (f"p50 {rec.median_ms:.3f} ms, {rec.throughput:,.1f} samples/s{per_token}, "
                f"{rec.validity}" + (f"; {energy}" if energy else ""))


INFERENCE = Inference()
