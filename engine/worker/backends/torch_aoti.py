"""AOTInductor: torch.export, then AOTInductor compiles a .pt2 package, run from Python.

What PyTorch recommends in place of TorchScript for deployment: the model is exported once
(torch.export.export) with a dynamic batch axis, compiled ahead of time by
torch._inductor.aoti_compile_and_package (weights frozen into the package, as torch.compile
freezes them) into a .pt2 file, and loaded by torch._inductor.aoti_load_package. The same
package is what the LibTorch C++ runner loads for `libtorch_aoti` (torch_libtorch_aoti.py).

Shape-generic, like TorchScript: one export and one compile per model (load()), timed as
prepare_s; every batch size of a sweep then runs the same package, whose output prepare()
checks at that batch size. The export's example is batch 2, because torch.export
specialises an axis whose example size is 1 (a batch-1 example would fix the batch at 1).

The package is compiled for this worker's thread count (inductor's C++ kernels fix their
OpenMP thread count when they are generated), so it is built in the run's own worker and
kept in a temporary folder for the worker's lifetime of the model, never shared across runs
of other thread counts. Inductor's cache is TORCHINDUCTOR_CACHE_DIR (set by the runner).

A user's torch.export program (.pt2 saved by torch.export.save) is compiled as it was
exported: its dynamic axes are the user's; a batch size outside them fails with the reason.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import replace

import torch
import torch._inductor

from engine.worker import user_models
from engine.worker.backends import torch_eager
from engine.worker.backends.torch_eager import input_tensors
from engine.scenarios.inference.spec import RunSpec
from engine.core.limits import BATCH_RANGE

# The export's example batch: torch.export specialises an axis whose example size is 0 or 1.
EXAMPLE_BATCH = 2
# Freezing folds the weights into the package as constants: the PyTorch documentation
# recommends it for CPU inference, and it is what torch_compile.py does for torch.compile.
INDUCTOR_CONFIGS = {"freezing": True}


def build_package(model, spec: RunSpec, device, path: str) -> float:
    """Export `model` (or, for a user's .pt2, the program the file holds) and compile it
    with AOTInductor into the package `path`; returns the seconds that took."""
    t = time.perf_counter()
    src = spec.user_model
    if src is not None and src.format == "pt2":
        program = user_models.load_program(src)  # the user's export, as the user made it
    else:
        # fp32 only (RunSpec refuses bf16 for both AOTInductor runtimes)
        xs = tuple(input_tensors(replace(spec, batch_size=EXAMPLE_BATCH), device))
        batch = torch.export.Dim("batch", min=1, max=BATCH_RANGE[1])
        with torch.no_grad():
            program = torch.export.export(model, xs,
                                          dynamic_shapes=tuple({0: batch} for _ in xs))
    with torch.no_grad():
        torch._inductor.aoti_compile_and_package(program, package_path=path,
                                                 inductor_configs=INDUCTOR_CONFIGS)
    return time.perf_counter() - t


class Backend(torch_eager.Backend):
    is_reference = False
    holds_own_weights = True  # the package carries its own (frozen) copy of the weights

    def convert(self, model, spec: RunSpec):
        self.tmp = tempfile.TemporaryDirectory(prefix="aoti-")
        path = os.path.join(self.tmp.name, "model.pt2")
        self.prepare_s = build_package(model, spec, self.device, path)
        t = time.perf_counter()
        compiled = torch._inductor.aoti_load_package(path)
        self.prepare_s += time.perf_counter() - t  # extracting and loading the .so
        return compiled

    def unload(self) -> None:
        super().unload()
        if getattr(self, "tmp", None) is not None:
            self.tmp.cleanup()
            self.tmp = None
