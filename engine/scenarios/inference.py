"""Inference: a model's forward pass timed per batch, one runtime at a time."""

from __future__ import annotations

from engine.core.inference import RunSpec
from engine.core.model_source import describe_inputs
from engine.scenarios.base import Scenario

__all__ = ["Inference", "INFERENCE"]


class Inference(Scenario):
    kind = RunSpec.kind
    spec_type = RunSpec
    worker_body = "engine.worker.inference"
    title = "Compare"
    sample_unit = "batch"
    counts_model_stats = True
    decides_contests = True
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
        if spec.replica:
            extra["replica"] = spec.replica
        return extra

    def result_extra(self, ev: dict) -> dict:
        extra = {"model_reused": bool(ev.get("model_reused")),
                 "output_rel_diff": ev.get("output_rel_diff"),
                 # which call first_forward_s timed: always the first after preparation
                 "first_forward_from": ev.get("first_forward_from")}
        if ev.get("replica_throughputs"):  # each replica's own figure and the window's skew
            extra.update(replica_throughputs=ev["replica_throughputs"],
                         window_start_skew_ms=ev["window_start_skew_ms"],
                         window_end_skew_ms=ev["window_end_skew_ms"])
            if ev.get("window_skew_frac") is not None:  # the window every replica covered
                extra.update(window_skew_frac=ev["window_skew_frac"], window_s=ev["window_s"])
        if ev.get("interleaved"):  # timed alternately with a contest's other contenders
            extra["interleaved"] = ev["interleaved"]
        if ev.get("sequential"):  # timed alone, and why
            extra["sequential"] = ev["sequential"]
        return extra

    def throughput(self, spec, ev: dict, samples_ns) -> float | None:
        """Replicas serve at once: the machine's throughput is the sum of theirs over the
        window every replica covered; one worker: the base definition."""
        if ev.get("replica_throughputs"):
            return sum(ev["replica_throughputs"])
        return super().throughput(spec, ev, samples_ns)

    def describe_event(self, spec, ev: dict) -> str:
        iters = f" {ev['iters']} it" if ev.get("iters") else ""
        return (f"{spec.model} {spec.framework} b{spec.batch_size} t{spec.intra_threads}: "
                f"{ev.get('phase', 'start')}{iters}")

    def figure(self, rec) -> str:
        return (f"p50 {rec.median_ms:.3f} ms, {rec.throughput:,.1f} samples/s, "
                f"{rec.validity}")


INFERENCE = Inference()
