"""Eager PyTorch with the model and the input in channels_last (NHWC) memory format."""

from __future__ import annotations

import torch

from engine.worker.backends import torch_eager
from engine.scenarios.inference.spec import RunSpec


class Backend(torch_eager.Backend):
    is_reference = False
    converts_in_place = True
    reference_name = "eager (contiguous, fp32)"

    def convert(self, model, spec: RunSpec):
        return model.to(memory_format=torch.channels_last)

    def to_input(self, x, spec: RunSpec):
        # The input in the model's layout, made once outside the timed step: eager's step
        # (and its CUDA-event timing) then runs unchanged on it.
        x = super().to_input(x, spec)
        # channels_last is a layout of 4-D (N,C,H,W) tensors; a user model's other inputs
        # (token ids, vectors) keep theirs
        return x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x
