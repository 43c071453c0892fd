"""Eager PyTorch with the model and the input in channels_last (NHWC) memory format."""

from __future__ import annotations

import torch

from engine.worker.backends import torch_eager
from engine.worker.backends.torch_eager import dtype_of
from engine.spec import RunSpec


class Backend(torch_eager.Backend):
    is_reference = False
    converts_in_place = True
    reference_name = "eager (contiguous, fp32)"

    def convert(self, model, spec: RunSpec):
        return model.to(memory_format=torch.channels_last)

    def to_input(self, x, spec: RunSpec):
        # The input in the model's layout, made once outside the timed step: eager's step
        # (and its CUDA-event timing) then runs unchanged on it.
        return x.to(dtype_of(spec)).contiguous(memory_format=torch.channels_last)
