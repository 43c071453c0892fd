"""The torch model exported to ONNX (opset 17, export time in prepare_s) and run by ONNX
Runtime on the CPU with the worker's thread counts."""

from __future__ import annotations

import os
import tempfile
import time

import numpy as np
import onnxruntime as ort
import torch

from engine.backends import torch_eager
from engine.backends.base import check_close
from engine.backends.torch_eager import eager_reference, make_input
from engine.spec import RunSpec


class Backend(torch_eager.Backend):
    def load(self, spec: RunSpec) -> None:
        if spec.device != "cpu":
            raise RuntimeError("onnxruntime here runs on the CPU only (onnxruntime, not "
                               "onnxruntime-gpu, is installed)")
        self.device, model, x, reference = eager_reference(spec)
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
        got = self.session.run(None, {"input": make_input(spec)})[0]
        self.output_rel_diff = check_close(reference, got, "eager")
        self.model = model  # for parameter and FLOP counts

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
