"""The small protocol every runtime implements. The worker drives it; it never times."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

from engine.scenarios.inference.spec import RunSpec
from engine.core.precision import REDUCED
from engine.worker.errors import OutputMismatch  # the one class the frame classifies

__all__ = ["Backend", "ModelStats", "SEED", "OutputMismatch", "check_close", "checked_rows",
           "OUTPUT_RTOL", "output_matrix", "compared_rows", "OutputError", "output_error",
           "ERROR_INPUTS", "ERROR_SEED", "error_batches", "check_agreement", "INT8_MIN_TOP1",
           "token_arrays"]

# One seed for weights and inputs, so both frameworks see statistically identical work.
SEED = 0


@dataclass(frozen=True)
class ModelStats:
    params: int  # the framework's own count (torch: parameters(); Keras: count_params())
    params_trainable: int
    flops_per_sample: int | None  # FLOPs (not MACs) of one forward of one sample
    flops_method: str


def token_arrays(gen: np.random.Generator, vocab: int, batch: int, length: int) -> list:
    """A token model's inputs for one batch: ids drawn uniformly from the whole vocabulary
    (no tokenizer: the time a forward takes does not depend on which ids) and an all-ones
    attention mask, both int64 as transformers takes them."""
    ids = gen.integers(0, vocab, (batch, length), dtype=np.int64)
    return [ids, np.ones((batch, length), dtype=np.int64)]


# A runtime's output may differ from the reference's by reordered floating-point sums
# (fused kernels, other layouts); 0.1 % of the output's largest magnitude is far above that
# and far below a wrong graph.
OUTPUT_RTOL = 1e-3


# bf16 keeps 8 bits of mantissa: on calibrated models its outputs land 3-14 % of the output's
# magnitude away from fp32 while pointing the same way (cosine similarity >= 0.992 measured
# on mobilenet_v3_small, resnet18, efficientnet_b0), where a different input scores 0.62-0.85.
# So bf16 is checked by direction: cosine similarity to the fp32 reference >= 0.98.
BF16_MIN_COSINE = 0.98


def check_close(reference, got, what: str, precision: str = "fp32") -> float:
    """fp32: max |reference - got| / max |reference|, or OutputMismatch past OUTPUT_RTOL.
    bf16 and int8: 1 - cosine similarity, or OutputMismatch below BF16_MIN_COSINE (int8's
    own gate on top of it: check_agreement)."""
    reference = np.asarray(reference, dtype=np.float64)
    got = np.asarray(got, dtype=np.float64)
    if reference.shape != got.shape:
        raise OutputMismatch(f"output shape {got.shape} differs from {what}'s "
                             f"{reference.shape}")
    if precision in REDUCED:
        a, b = reference.ravel(), got.ravel()
        norm = float(np.linalg.norm(a) * np.linalg.norm(b))
        cos = float(a @ b) / norm if norm else 1.0
        if not cos >= BF16_MIN_COSINE:
            raise OutputMismatch(f"{precision} output points away from {what}'s fp32 output: "
                                 f"cosine similarity {cos:.4f} (tolerance >= "
                                 f"{BF16_MIN_COSINE})")
        return 1.0 - cos
    scale = float(np.max(np.abs(reference))) if reference.size else 0.0
    diff = float(np.max(np.abs(reference - got))) if reference.size else 0.0
    rel = diff / scale if scale else diff
    if not rel <= OUTPUT_RTOL:
        raise OutputMismatch(f"output differs from {what}: max |diff| {diff:.3g} is "
                             f"{rel:.2%} of max |output| {scale:.3g} (tolerance "
                             f"{OUTPUT_RTOL:.1%})")
    return rel


# A reduced-precision run's distance from fp32 is counted on this many generated inputs (whole
# batches of the run's size, so at least this many), drawn from their own seed: the check's
# two rows say whether the graph is right, these say how far the numbers moved.
ERROR_INPUTS = 64
ERROR_SEED = SEED + 2
# int8's own gate (check_agreement). Measured at 224 px, batch 8, on the 64 inputs, with the
# catalog's seeded weights (BatchNorm calibrated): ONNX Runtime's quantize_dynamic agreed on
# 81 % (resnet18) and 88 % (mobilenet_v3_small), torch's Linear-only int8 on 95 % and 92 %,
# bf16 on 95-98 %. Random weights leave the top logits close together, so a small error
# flips them; a wrong graph agrees by chance (about 1 in 1000 classes). Half the inputs
# separates the two with room on both sides.
INT8_MIN_TOP1 = 0.5


@dataclass(frozen=True)
class OutputError:
    """A runtime's outputs against the fp32 reference's on the same inputs."""

    max_abs: float  # max |reference - got|
    max_rel: float  # max_abs over the reference's largest magnitude (as check_close)
    top1_agreement: float  # fraction of inputs whose argmax is the reference's
    inputs: int  # rows counted


def error_batches(batch_size: int) -> int:
    """Batches of batch_size that give at least ERROR_INPUTS inputs."""
    return math.ceil(ERROR_INPUTS / batch_size)


def output_error(reference, got) -> OutputError:
    """OutputError of two output matrices (a row per input)."""
    ref = np.asarray(reference, dtype=np.float64)
    out = np.asarray(got, dtype=np.float64)
    if ref.shape != out.shape or ref.ndim != 2 or not ref.size:
        raise OutputMismatch(f"output shape {out.shape} differs from the reference's "
                             f"{ref.shape}")
    max_abs = float(np.max(np.abs(ref - out)))
    scale = float(np.max(np.abs(ref)))
    agree = np.argmax(ref, axis=1) == np.argmax(out, axis=1)
    return OutputError(max_abs, max_abs / scale if scale else max_abs, float(np.mean(agree)),
                       int(ref.shape[0]))


def check_agreement(err: OutputError, precision: str) -> None:
    """int8's gate beside the cosine rule: dynamic quantization rounds every weight and
    activation to 256 levels, so outputs can point the right way overall and still change
    the answer; top-1 agreement with fp32 on the generated inputs at least INT8_MIN_TOP1."""
    if precision == "int8" and not err.top1_agreement >= INT8_MIN_TOP1:
        raise OutputMismatch(f"int8 output's top-1 class agrees with fp32 on "
                             f"{err.top1_agreement:.1%} of {err.inputs} inputs (tolerance "
                             f">= {INT8_MIN_TOP1:.0%})")


def output_matrix(out, to_numpy) -> np.ndarray:
    """A model's output as one float array, a row per sample: a catalog model's logits as
    they are; a user's model may return tuples, lists or dicts of tensors (nested), whose
    leaves are flattened per sample and joined, so every output is checked, not the first.
    A leaf without the batch axis first (a scalar, a pooled statistic) makes the whole
    output compared as one flat row."""
    leaves = []

    def walk(o):
        if isinstance(o, dict):
            for v in o.values():
                walk(v)
        elif isinstance(o, (list, tuple)):
            for v in o:
                walk(v)
        elif o is not None:
            leaves.append(np.asarray(to_numpy(o), dtype=np.float32))

    walk(out)
    if len(leaves) == 1 and leaves[0].ndim >= 1:
        return leaves[0].reshape(leaves[0].shape[0], -1)
    if not leaves:
        return np.zeros((1, 0), np.float32)
    batch = leaves[0].shape[0] if leaves[0].ndim else None
    if batch and all(a.ndim >= 1 and a.shape[0] == batch for a in leaves):
        return np.concatenate([a.reshape(batch, -1) for a in leaves], axis=1)
    return np.concatenate([a.ravel() for a in leaves])[None, :]


def compared_rows(spec):
    """The rows checked against the reference: a catalog model's first and last (its
    samples are independent, see checked_rows); all of a user's model's, whose outputs may
    mix samples."""
    return checked_rows(spec.batch_size) if spec.user_model is None else slice(None)


def checked_rows(batch_size: int) -> list[int]:
    """The samples whose outputs are compared with the reference: the first and the last.

    In inference every sample's output depends on that sample alone (BatchNorm uses its
    stored statistics), so the reference need not run the whole batch: at batch 32 a Keras
    eager call costs seconds per check, every batch size of a sweep. The runtime still runs
    the whole batch at its compiled shape; checking its last row too catches a scrambled
    batch axis."""
    return [0, batch_size - 1] if batch_size > 1 else [0]

class Backend(Protocol):
    # prepare_s: seconds spent turning the model into this runtime's form (trace, export,
    # compile). Shape-specialised runtimes (torch.compile, tf.function, XLA) redo it for
    # every batch size in prepare(); shape-generic ones (TorchScript, ONNX, LibTorch) do it
    # once in load() and keep the value. output_rel_diff: the relative difference of this
    # run's output to the reference runtime's (0.0 for the reference itself), set by prepare().
    prepare_s: float
    output_rel_diff: float
    # The first call after preparation, in seconds, when prepare()'s output check made it
    # (shape-generic runtimes: TorchScript, ONNX Runtime, channels_last, bf16 eager); None
    # when the worker times it. One definition for every runtime: a shape-specialised one
    # (compile, tf.function, XLA) compiles in its check, which is preparation, so its first
    # call after preparation is the next one.
    first_forward_s: float | None

    def versions(self) -> dict: ...
    def effective_threads(self) -> dict: ...
    # Build the model and do the shape-independent work. A worker reuses what load() built
    # for the next batch size of the same (model, size, weights, device, runtime).
    def load(self, spec: RunSpec) -> None: ...
    # Every run, after load() or on reuse: the shape-specific work for this run's input, then
    # its output checked against the reference on that same input (OutputMismatch if not),
    # so a reused model is never timed at a batch size whose output nobody checked.
    def prepare(self, spec: RunSpec) -> None: ...
    def model_stats(self, spec: RunSpec, count_flops: bool) -> ModelStats: ...
    def make_step(self, spec: RunSpec) -> Callable[[], int | None]: ...
    def context(self): ...  # entered around first forward, warm-up and timing
    # Before the memory baseline a model is measured from: start what the device needs
    # before any model (a CUDA context and its libraries), so the model is not charged.
    def start_device(self, spec: RunSpec) -> None: ...
    # After warm-up, before the timed loop: the device peak is the timed loop's alone.
    def reset_device_peak(self) -> None: ...
    def device_peak_bytes(self) -> int | None: ...
    def unload(self) -> None: ...
