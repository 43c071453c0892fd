"""One file per runtime behind the `Backend` protocol (base.py). Imported only by workers."""

import importlib

__all__ = ["load_backend", "load_trainer", "configure_threads"]

_MODULES = {
    ("torch", "eager"): "engine.worker.backends.torch_eager",
    ("torch", "channels_last"): "engine.worker.backends.torch_channels_last",
    ("torch", "torchscript"): "engine.worker.backends.torch_script",
    ("torch", "onnxruntime"): "engine.worker.backends.onnx_runtime",
    ("torch", "compile"): "engine.worker.backends.torch_compile",
    ("torch", "libtorch"): "engine.worker.backends.torch_libtorch",
    ("torch", "aoti"): "engine.worker.backends.torch_aoti",
    ("torch", "libtorch_aoti"): "engine.worker.backends.torch_libtorch_aoti",
    ("torch", "openvino"): "engine.worker.backends.openvino_rt",
    ("tensorflow", "keras"): "engine.worker.backends.tf_keras",
    ("tensorflow", "tf_function"): "engine.worker.backends.tf_function",
    ("tensorflow", "xla"): "engine.worker.backends.tf_xla",
    ("selftest", "python"): "engine.worker.backends.selftest",
    ("selftest", "mismatch"): "engine.worker.backends.selftest",
}


def configure_threads(framework: str, intra: int, inter: int) -> None:
    """Once per worker process, before the framework runs any op: TensorFlow raises if its
    thread pools are configured later, and torch ignores a late inter-op setting. Denormal
    flushing is per thread, so it is set here too, before any pool thread exists
    (engine/worker/numerics.py), in every worker and serving replica alike."""
    from engine.worker.numerics import flush_denormals

    flush_denormals(framework)
    if framework == "torch":
        import torch

        torch.set_num_threads(intra)
        torch.set_num_interop_threads(inter)
    elif framework == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(intra)
        tf.config.threading.set_inter_op_parallelism_threads(inter)


def load_backend(framework: str, runtime: str):
    """Import the runtime's module (and so its framework) only when a worker asks for it."""
    return importlib.import_module(_MODULES[(framework, runtime)]).Backend()


_TRAINERS = {
    ("torch", "eager"): "engine.worker.backends.train_torch",
    ("torch", "libtorch"): "engine.worker.backends.train_libtorch",
    ("tensorflow", "tf_function"): "engine.worker.backends.train_tf",
}


def load_trainer(framework: str, runtime: str):
    """The training counterpart of load_backend: one file per (framework, runtime)."""
    return importlib.import_module(_TRAINERS[(framework, runtime)]).Trainer()
