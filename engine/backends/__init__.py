"""One file per runtime behind the `Backend` protocol (base.py). Imported only by workers."""

import importlib

__all__ = ["load_backend"]

_MODULES = {"torch": "engine.backends.torch_eager", "tensorflow": "engine.backends.tf_function",
            "selftest": "engine.backends.selftest"}


def load_backend(framework: str, intra_threads: int, inter_threads: int):
    """Import the backend module (and so its framework) only when a worker asks for it.

    Thread counts are applied in the constructor, before the framework runs any op
    (TensorFlow raises if they are set later; torch ignores a late inter-op setting)."""
    return importlib.import_module(_MODULES[framework]).Backend(intra_threads, inter_threads)
