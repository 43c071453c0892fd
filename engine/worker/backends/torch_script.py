"""TorchScript: torch.jit.trace on the first run's input, then torch.jit.freeze (prepare_s).

The traced graph is shape-generic, as LibTorch's is: a reused model meets a new batch size
as a user's scripted model would, and prepare() checks its output there. A user's
TorchScript file (issue #14) runs as saved: it is its own reference, nothing is traced.
"""

from __future__ import annotations

import time

import torch

from engine.worker.backends import torch_eager
from engine.worker.backends.torch_eager import input_tensors
from engine.scenarios.inference.spec import RunSpec


class Backend(torch_eager.Backend):
    is_reference = False

    def load(self, spec: RunSpec) -> None:
        # A user's TorchScript file is the model itself: checked against nothing.
        self.is_reference = spec.user_model is not None and spec.user_model.format == "torchscript"
        super().load(spec)

    def convert(self, model, spec: RunSpec):
        if self.is_reference:
            return model
        xs = [self.to_input(x, spec) for x in input_tensors(spec, self.device)]
        with torch.no_grad():
            t = time.perf_counter()
            scripted = torch.jit.freeze(torch.jit.trace(model, tuple(xs)))
            self.prepare_s = time.perf_counter() - t
        return scripted
