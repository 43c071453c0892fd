"""One file per runtime behind the `Backend` protocol (base.py), named by its row in
engine/core/runtimes.py. Imported only by workers."""

import importlib

from engine.core.runtimes import BACKENDS, ROWS

__all__ = ["load_backend", "load_trainer", "configure_threads"]

# (framework, runtime) -> its backend module, from the runtimes' rows
_MODULES = {(r.framework, r.name): r.backend for r in ROWS}


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


_TRAINERS = {(r.framework, r.name): BACKENDS + r.trainer for r in ROWS if r.trainer}


def load_trainer(framework: str, runtime: str):
    """The training counterpart of load_backend: one file per (framework, runtime)."""
    return importlib.import_module(_TRAINERS[(framework, runtime)]).Trainer()
