"""LibTorch C++ with AOTInductor: the runner loads the `aoti` runtime's .pt2 package.

The package is built exactly as for `aoti` from Python (torch_aoti.build_package: torch.export
with a dynamic batch axis, AOTInductor compile, timed as prepare_s), then measured by the same
C++ runner as `libtorch` (engine/worker/cpp/libtorch_runner), which opens a .pt2 path with
torch::inductor::AOTIModelPackageLoader instead of torch::jit::load. Everything else - the
C++ timing loop, the first output checked against eager before any timing is accepted, the
runner's own memory - is torch_libtorch's. So "Python vs C++" compares one compiled
artifact called from two languages.
"""

from __future__ import annotations

import os
import tempfile

from engine.worker.backends import torch_aoti, torch_libtorch
from engine.scenarios.inference.spec import RunSpec


class Backend(torch_libtorch.Backend):
    def convert(self, model, spec: RunSpec):
        self.tmp = tempfile.TemporaryDirectory(prefix="aoti-")
        # the suffix is what tells the runner this is an AOTInductor package
        self.model_path = os.path.join(self.tmp.name, "model.pt2")
        self.prepare_s = torch_aoti.build_package(model, spec, self.device, self.model_path)
        return model
