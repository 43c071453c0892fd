"""OpenVINO on its CPU plugin (issue 28 part 5): the torch model converted by
`openvino.convert_model` (its PyTorch frontend, from the module and an example input),
compiled per batch size with a performance hint (the spec's `ov_hint` option), the thread
count and the precision pinned.

Why convert from the module and not from the ONNX file the onnxruntime backend exports:
one step instead of two (no export, no temporary file), and OpenVINO's PyTorch frontend is
what its documentation recommends for torch models; the ONNX path would add the exporter's
own choices between the two runtimes compared.

Compiled for the run's static shape in prepare(), as benchmark_app does (a dynamic batch
axis makes the CPU plugin pick shape-generic kernels), so prepare_s is the conversion
(once per model) plus this shape's compile. The plugin's settings are read back from the
compiled model and recorded: NUM_STREAMS (what the hint chose), INFERENCE_NUM_THREADS and
INFERENCE_PRECISION_HINT. On a CPU with bf16 instructions the plugin picks bf16 for an
"fp32" model by default (measured here: INFERENCE_PRECISION_HINT read back bfloat16), so an
fp32 run pins f32 and a bf16 run asks for bf16; the output check then holds each to its rule.

The timed loop drives one synchronous request at a time, as for every runtime. Under the
throughput hint the plugin splits the threads into NUM_STREAMS streams and one request uses
one of them; benchmark_app's throughput mode keeps OPTIMAL_NUMBER_OF_INFER_REQUESTS requests
in flight instead (recorded as ov_optimal_requests). Several requests at once is what this
project's replicas measure.
"""

from __future__ import annotations

import time

import numpy as np
import openvino as ov
import openvino.properties as props
import openvino.properties.hint as hints
import torch

from engine.core import RunSpec
from engine.worker.backends import torch_eager
from engine.worker.backends.torch_eager import as_matrix, input_tensors, make_inputs

_MODES = {"latency": hints.PerformanceMode.LATENCY,
          "throughput": hints.PerformanceMode.THROUGHPUT}
_TYPES = {"fp32": ov.Type.f32, "bf16": ov.Type.bf16}


class Backend(torch_eager.Backend):
    is_reference = False
    reference_name = "eager fp32"
    holds_own_weights = True  # the compiled model's: the eager model kept is the reference

    def __init__(self):
        super().__init__()
        self.core = ov.Core()
        self.ov_model = None
        self.compiled = None
        self.convert_s = 0.0
        self.shape = None

    def load(self, spec: RunSpec) -> None:
        if spec.device != "cpu":
            raise RuntimeError("openvino here runs on its CPU plugin only")
        self.compiled = self.shape = None
        super().load(spec)

    def cast(self, model, spec: RunSpec):
        return model  # the precision is the plugin's setting: converted from fp32

    def to_input(self, x, spec: RunSpec):
        return x  # fp32 in; the plugin converts inside the graph

    def convert(self, model, spec: RunSpec):
        xs = tuple(input_tensors(spec, "cpu"))
        t = time.perf_counter()
        self.ov_model = ov.convert_model(model, example_input=xs if len(xs) > 1 else xs[0])
        self.convert_s = self.prepare_s = time.perf_counter() - t
        return None  # the compiled model runs; the eager module is kept as the reference

    def _compile(self, spec: RunSpec) -> None:
        """The model compiled for this run's batch size (static shapes), settings read
        back."""
        shapes = [tuple(a.shape) for a in make_inputs(spec)]
        if shapes == self.shape:
            return
        t = time.perf_counter()
        model = self.ov_model.clone()
        model.reshape({i: ov.PartialShape(list(s)) for i, s in enumerate(shapes)})
        self.compiled = self.core.compile_model(model, "CPU", {
            hints.performance_mode: _MODES[spec.options["ov_hint"]],
            props.inference_num_threads: torch.get_num_threads(),
            hints.inference_precision: _TYPES[spec.precision]})
        self.prepare_s = self.convert_s + time.perf_counter() - t
        self.shape = shapes
        self.request = self.compiled.create_infer_request()
        self.runtime_settings = {
            "ov_hint": spec.options["ov_hint"],
            "ov_streams": int(self.compiled.get_property(props.num_streams)),
            "ov_threads": int(self.compiled.get_property(props.inference_num_threads)),
            "ov_inference_precision":
                str(self.compiled.get_property(hints.inference_precision).get_type_name()),
            "ov_optimal_requests":
                int(self.compiled.get_property(props.optimal_number_of_infer_requests)),
        }

    def prepare(self, spec: RunSpec) -> None:
        self.prepare_s = self.convert_s  # a reused shape compiles nothing
        self._compile(spec)
        super().prepare(spec)

    def first_output(self, xs, spec: RunSpec):
        arrays = [x.cpu().numpy() for x in xs]
        shapes = [a.shape for a in arrays]
        if shapes != self.shape:  # the error figures' batches have the run's shape too
            raise ValueError(f"openvino compiled for {self.shape}, fed {shapes}")
        out = self.request.infer(arrays)
        return as_matrix([np.asarray(out[o]) for o in self.compiled.outputs])

    def versions(self) -> dict:
        return {**super().versions(), "openvino": ov.__version__}

    def make_step(self, spec: RunSpec):
        # the input set once, as benchmark_app does: a call is the inference alone
        self.fed = [np.ascontiguousarray(a) for a in make_inputs(spec)]  # the tensors' memory
        for i, a in enumerate(self.fed):
            self.request.set_input_tensor(i, ov.Tensor(a))
        infer = self.request.infer

        def step():
            infer()
        return step

    def unload(self) -> None:
        self.compiled = self.ov_model = self.shape = self.request = self.fed = None
        super().unload()
