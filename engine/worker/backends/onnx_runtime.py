"""ONNX Runtime on the CPU with the worker's thread counts: the torch model exported to
ONNX (opset 17, export time in prepare_s), or a user's own .onnx file (issue #14), which is
then its own reference and is never re-exported.

int8 (issue 28): the exported fp32 model through onnxruntime.quantization.quantize_dynamic,
weights int8 (QInt8), activations quantized per call (the quantization in prepare_s). bf16
is refused before launch (engine.core.precision says why)."""

from __future__ import annotations

from dataclasses import replace

import os
import tempfile
import time

import numpy as np
import onnxruntime as ort
import torch

from engine.worker import user_models
from engine.worker.backends import torch_eager
from engine.worker.backends.base import ModelStats
from engine.worker.backends.torch_eager import as_matrix, input_tensors, make_inputs
from engine.scenarios.inference.spec import RunSpec
from engine.core.catalog import get_model
from engine.core.limits import BATCH_RANGE


def _options() -> ort.SessionOptions:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = torch.get_num_threads()
    opts.inter_op_num_threads = torch.get_num_interop_threads()
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return opts


INT8_METHOD = "quantize_dynamic: int8 weights (QInt8), activations quantized per call"


def _quantized(path: str, out: str) -> str:
    """The fp32 ONNX file with dynamic int8 quantization, written to out."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    # it logs a suggestion to pre-process on every call: not ours to act on per run
    logging.getLogger().setLevel(logging.ERROR)
    quantize_dynamic(path, out, weight_type=QuantType.QInt8)
    return out


class Backend(torch_eager.Backend):
    is_reference = False
    reference_name = "eager"
    holds_own_weights = True  # the session's: the eager model kept is the reference alone

    def cast(self, model, spec: RunSpec):
        return model  # exported in fp32; int8 is the quantizer's, on the ONNX graph

    def load(self, spec: RunSpec) -> None:
        if spec.device != "cpu":
            raise RuntimeError("onnxruntime here runs on the CPU only (onnxruntime, not "
                               "onnxruntime-gpu, is installed)")
        src = spec.user_model
        self.is_reference = src is not None and src.format == "onnx"
        if not self.is_reference:
            super().load(spec)
            return
        # The user's file, through the CPU provider with no custom-op library.
        self.device = torch.device("cpu")
        self.model = self.reference = None
        self.prepare_s = 0.0
        self.session = user_models.onnx_session(src, torch.get_num_threads(),
                                                torch.get_num_interop_threads())

    def convert(self, model, spec: RunSpec):
        """Exported once with a dynamic batch axis: one session serves every batch size."""
        xs = tuple(input_tensors(spec, "cpu"))
        src = spec.user_model
        names = [i.name for i in src.inputs] if src else ["input"]
        t = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.onnx")
            if src is None and get_model(spec.model).input_kind == "tokens":
                # transformers' BERT cannot be traced (engine/core/encoders.py), which the
                # TorchScript-based exporter does: the torch.export-based one, batch dynamic
                # (an example of batch 2: torch.export fixes an axis whose example is 1)
                batch = torch.export.Dim("batch", min=1, max=BATCH_RANGE[1])
                xs = tuple(input_tensors(replace(spec, batch_size=2), "cpu"))
                torch.onnx.export(model, xs, path, dynamo=True, opset_version=18,
                                  verbose=False, input_names=["input_ids", "attention_mask"],
                                  dynamic_shapes=tuple({0: batch} for _ in xs))
            elif src is not None and src.format == "pt2":
                # A torch.export program goes through the exporter built for it (its
                # module refuses the TorchScript exporter's train()/eval() calls); its
                # batch axis is dynamic where the program declared it so.
                torch.onnx.export(user_models.load_program(src), xs, path, dynamo=True,
                                  opset_version=18, verbose=False)
            else:
                # The TorchScript-based exporter: the dynamo one needs onnxscript's graph
                # rewriting for every model and takes far longer on CPU-only machines.
                torch.onnx.export(model, xs, path, dynamo=False, opset_version=17,
                                  input_names=names, output_names=["output"],
                                  dynamic_axes={**{n: {0: "batch"} for n in names},
                                                "output": {0: "batch"}})
            if spec.precision == "int8":
                path = _quantized(path, os.path.join(tmp, "model.int8.onnx"))
                self.runtime_settings = {"ort_quantization": INT8_METHOD}
            self.session = ort.InferenceSession(path, _options(),
                                                providers=["CPUExecutionProvider"])
        self.prepare_s = time.perf_counter() - t
        return model

    def _feed(self, arrays, spec: RunSpec) -> dict:
        """Inputs by the session's names: matched by name where the described names are the
        model's, else in the order described."""
        names = [i.name for i in self.session.get_inputs()]
        if len(names) != len(arrays):
            raise ValueError(f"input: the ONNX model takes {len(names)} inputs "
                             f"({', '.join(names)}); {len(arrays)} were described")
        described = [i.name for i in spec.user_model.inputs] if spec.user_model else names
        if sorted(described) == sorted(names):
            return {n: np.ascontiguousarray(a) for n, a in zip(described, arrays)}
        return {n: np.ascontiguousarray(a) for n, a in zip(names, arrays)}

    def first_output(self, xs, spec: RunSpec):
        return as_matrix(self.session.run(None, self._feed([x.cpu().numpy() for x in xs], spec)))

    def model_stats(self, spec: RunSpec, count_flops: bool) -> ModelStats:
        if not self.is_reference:
            return super().model_stats(spec, count_flops)
        return user_models.onnx_stats(spec.user_model, spec.user_model.inputs)

    def versions(self) -> dict:
        return {**super().versions(), "onnxruntime": ort.__version__}

    def make_step(self, spec: RunSpec):
        feed = self._feed(make_inputs(spec), spec)
        run = self.session.run

        def step():
            run(None, feed)
        return step

    def unload(self) -> None:
        self.session = None
        super().unload()
