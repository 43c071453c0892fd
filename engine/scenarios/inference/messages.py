"""An inference run's result on the wire: a Result with the output check, what a replica
or an interleaved contender adds, and what the parent sets as it combines them.

Registered with the protocol's decoder by the registry (engine/scenarios/__init__.py reads
the kind's Scenario.messages); encoded and decoded like every message (engine.core.protocol).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.protocol import Result

__all__ = ["InferenceResult", "MESSAGES"]


@dataclass(frozen=True)
class InferenceResult(Result):
    kind = "inference_result"
    model_reused: bool | None = None  # the model built for an earlier batch size
    # catalog weights: read from the runner's file or calibrated here (engine.worker.weights),
    # and the seconds calibrating took, apart from load_s
    weights_from: str | None = None
    calibrate_s: float | None = None
    output_rel_diff: float | None = None  # against the reference, from the output check
    # bf16/int8 against fp32 on generated inputs (engine.worker.backends.base.OutputError)
    output_max_abs: float | None = None
    output_max_rel: float | None = None
    top1_agreement: float | None = None
    top1_inputs: int | None = None
    runtime_settings: dict | None = None  # what the runtime chose, read back (OpenVINO's)
    first_forward_from: str | None = None  # which call first_forward_s timed
    sample_ends_ns: tuple[int, ...] | None = None  # a replica's: each sample's end
    blocks: int = 0  # an interleaved contender's timed blocks
    # Set by the parent: replicas combined over their common window (engine.run.process.replicas)
    window_s: float | None = None
    replica_throughputs: tuple[float, ...] | None = None
    window_start_skew_ms: float | None = None
    window_end_skew_ms: float | None = None
    window_skew_frac: float | None = None
    # Set by the parent: timed alternately with whom (engine.run.process.together), or alone and why
    interleaved: dict | None = None
    sequential: str | None = None
    # the energy loop's reading (engine.core.energy.EnergyReading; None: not asked) and the
    # numerics read back after setting them (engine.worker.numerics)
    energy: dict | None = None
    numerics: dict | None = None


# The kind's messages, as its Scenario.messages lists them for the registry
MESSAGES = (InferenceResult,)
