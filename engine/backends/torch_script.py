"""TorchScript: torch.jit.trace on the run's input, then torch.jit.freeze (prepare_s)."""

from __future__ import annotations

import time

import torch

from engine.backends import torch_eager
from engine.backends.base import check_close
from engine.backends.torch_eager import dtype_of, eager_reference, to_precision
from engine.spec import RunSpec


class Backend(torch_eager.Backend):
    def load(self, spec: RunSpec) -> None:
        self.device, model, x, reference = eager_reference(spec)
        with torch.no_grad():
            model, x = to_precision(model, spec), x.to(dtype_of(spec))
            t = time.perf_counter()
            scripted = torch.jit.freeze(torch.jit.trace(model, x))
            self.prepare_s = time.perf_counter() - t
        with torch.inference_mode():
            got = scripted(x).float().cpu().numpy()
        self.output_rel_diff = check_close(reference, got, "eager fp32", spec.precision)
        self.eager = model  # parameters and FLOPs are counted on the eager module
        self.model = scripted
