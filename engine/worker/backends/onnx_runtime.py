"""The torch model exported to ONNX (opset 17, export time in prepare_s) and run by ONNX
Runtime on the CPU with the worker's thread counts."""

from __future__ import annotations

import os
import tempfile
import time

import numpy as np
import onnxruntime as ort
import torch

from engine.worker.backends import torch_eager
from engine.worker.backends.torch_eager import make_input
from engine.spec import RunSpec


class Backend(torch_eager.Backend):
    is_reference = False
    reference_name = "eager"

    def load(self, spec: RunSpec) -> None:
        if spec.device != "cpu":
            raise RuntimeError("onnxruntime here runs on the CPU only (onnxruntime, not "
                               "onnxruntime-gpu, is installed)")
        super().load(spec)

    def convert(self, model, spec: RunSpec):
        """Exported once with a dynamic batch axis: one session serves every batch size."""
        x = torch.from_numpy(make_input(spec))
        t = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.onnx")
            # The TorchScript-based exporter: the dynamo one needs onnxscript's graph
            # rewriting for every model and takes far longer on CPU-only machines.
            torch.onnx.export(model, (x,), path, dynamo=False, opset_version=17,
                              input_names=["input"], output_names=["output"],
                              dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = torch.get_num_threads()
            opts.inter_op_num_threads = torch.get_num_interop_threads()
            opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            self.session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        self.prepare_s = time.perf_counter() - t
        return model

    def first_output(self, x, spec: RunSpec):
        return self.session.run(None, {"input": x.cpu().numpy()})[0]

    def versions(self) -> dict:
        return {**super().versions(), "onnxruntime": ort.__version__}

    def make_step(self, spec: RunSpec):
        feed = {"input": np.ascontiguousarray(make_input(spec))}
        run = self.session.run

        def step():
            run(None, feed)
        return step

    def unload(self) -> None:
        self.session = None
        super().unload()
