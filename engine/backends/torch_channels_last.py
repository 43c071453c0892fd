"""Eager PyTorch with the model and the input in channels_last (NHWC) memory format."""

from __future__ import annotations

import torch

from engine.backends import torch_eager
from engine.backends.base import check_close
from engine.backends.torch_eager import dtype_of, eager_reference, input_tensor, to_precision
from engine.spec import RunSpec


class Backend(torch_eager.Backend):
    def load(self, spec: RunSpec) -> None:
        self.device, model, x, reference = eager_reference(spec)
        with torch.inference_mode():
            model = to_precision(model, spec).to(memory_format=torch.channels_last)
            got = model(x.to(dtype_of(spec)).contiguous(memory_format=torch.channels_last))
            got = got.float().cpu().numpy()
        self.output_rel_diff = check_close(reference, got, "eager (contiguous, fp32)",
                                           spec.precision)
        self.model = model

    def make_step(self, spec: RunSpec):
        x = input_tensor(spec, self.device).contiguous(memory_format=torch.channels_last)
        model = self.model

        def step():
            model(x)
        return step
