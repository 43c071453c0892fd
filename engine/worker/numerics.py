"""Numerics set on purpose (issue 28 part 7), and read back for the run's provenance.

The policy, the same for both frameworks:
- Denormals are flushed to zero (FTZ/DAZ). TensorFlow flushes them in its own threads and
  offers no switch to stop; torch does not by default, so `torch.set_flush_denormal(True)`
  makes it match. It is called before torch's OpenMP pool starts (`flush_denormals`, from
  backends.configure_threads in every worker and serving replica), because the flag is
  per thread and a pool thread started earlier keeps its own.
- TF32 for fp32 CUDA matmuls and convolutions is off unless the spec asks (`RunSpec.tf32`):
  a figure labelled fp32 is fp32. torch 2.14 has two APIs for it: `fp32_precision` ("ieee"
  or "tf32") and the older `allow_tf32` flags, and reading the older ones after the newer
  were set raises; inductor (compile, AOTInductor) reads the older ones, so those are set
  (cuDNN's covers its convolutions and RNNs alike; its default is on). Recorded as "ieee"
  or "tf32", read back. TensorFlow's is `enable_tensor_float_32_execution`, on by
  default, turned off here.
- cudnn.benchmark is on: cuDNN times its convolution algorithms per shape in warm-up and
  keeps the fastest, as TensorFlow's cuDNN autotuning does by default and as a deployment
  would; the timed loop never sees the search.

What a run records is what the worker reads back after setting it: a denormal is
multiplied in the worker's thread and the result compared with zero, not assumed.
"""

from __future__ import annotations

from engine.core.runtimes import ROWS

__all__ = ["DENORMAL_POLICY", "CUDNN_BENCHMARK", "flush_denormals", "apply"]

DENORMAL_POLICY = "flush to zero (FTZ/DAZ) in both frameworks"
CUDNN_BENCHMARK = True
# 2e-38 is a normal float32; a quarter of it (5e-39) is denormal, so a thread that flushes
# returns exactly 0.0 for the product.
_NORMAL, _QUARTER = 2e-38, 0.25
# Runtimes whose arithmetic runs in threads or a process of their own, which the flag set
# in torch's threads does not reach: their rows say whose (engine.core.runtimes).
_OWN_THREADS = {r.name: r.own_threads for r in ROWS if r.own_threads}


def flush_denormals(framework: str) -> None:
    """Once per worker, before the framework starts a thread (engine.worker.main)."""
    if framework == "torch":
        import torch

        torch.set_flush_denormal(True)
    elif framework == "tensorflow":
        import tensorflow as tf

        tf.config.experimental.enable_tensor_float_32_execution(False)


def apply(spec) -> dict | None:
    """Set this run's TF32 and cudnn.benchmark, and return what the worker reads back
    (None for the selftest framework, which has no numerics of its own)."""
    if spec.framework == "torch":
        return _torch(spec)
    if spec.framework == "tensorflow":
        return _tensorflow(spec)
    return None


def _torch(spec) -> dict:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = bool(spec.tf32)
    torch.backends.cudnn.allow_tf32 = bool(spec.tf32)
    torch.backends.cudnn.benchmark = CUDNN_BENCHMARK
    flushed = (torch.tensor([_NORMAL], dtype=torch.float32) * _QUARTER).item() == 0.0

    def mode(allowed: bool) -> str:
        return "tf32" if allowed else "ieee"
    out = {"policy": DENORMAL_POLICY, "denormals_flushed": flushed,
           "tf32_asked": spec.tf32,
           "cuda_matmul_fp32_precision": mode(torch.backends.cuda.matmul.allow_tf32),
           "cudnn_conv_fp32_precision": mode(torch.backends.cudnn.allow_tf32),
           "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
           "tf32_scope": _scope(spec)}
    if spec.runtime in _OWN_THREADS:
        out["denormals_note"] = _OWN_THREADS[spec.runtime]
    return out


def _tensorflow(spec) -> dict:
    import tensorflow as tf

    x = tf.constant([_NORMAL], tf.float32) * tf.constant(_QUARTER, tf.float32)
    return {"policy": DENORMAL_POLICY, "denormals_flushed": bool(x.numpy()[0] == 0.0),
            "tf32_asked": spec.tf32,
            "tf32_enabled": bool(tf.config.experimental.tensor_float_32_execution_enabled()),
            "tf32_scope": _scope(spec)}


def _scope(spec) -> str:
    return ("this run's CUDA matmuls and convolutions" if spec.device == "cuda"
            else f"CUDA only: this run is on {spec.device}, where it changes nothing")
