"""TorchScript: torch.jit.trace on the first run's input, then torch.jit.freeze (prepare_s).

The traced graph is shape-generic, as LibTorch's is: a reused model meets a new batch size
as a user's scripted model would, and prepare() checks its output there.
"""

from __future__ import annotations

import time

import torch

from engine.worker.backends import torch_eager
from engine.worker.backends.torch_eager import make_input
from engine.spec import RunSpec


class Backend(torch_eager.Backend):
    is_reference = False
    def convert(self, model, spec: RunSpec):
        x = self.to_input(torch.from_numpy(make_input(spec)).to(self.device), spec)
        with torch.no_grad():
            t = time.perf_counter()
            scripted = torch.jit.freeze(torch.jit.trace(model, x))
            self.prepare_s = time.perf_counter() - t
        return scripted
