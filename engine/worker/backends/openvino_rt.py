"""OpenVINO on its CPU plugin (issue 28 part 5): the model converted by `openvino.
convert_model`, compiled per batch size with a performance hint (the spec's `ov_hint`
option), the thread count and the precision pinned.

What is converted: a catalog model or a factory's from the torch module (OpenVINO's PyTorch
frontend, from the module and an example input); a user's torch.export file (.pt2) from its
ExportedProgram, read by the same guarded loader as every runtime's (no pickle able to run
code), which convert_model takes natively; a user's ONNX file from the file, by OpenVINO's
ONNX frontend with no extension library (so no custom op's code). Each is checked against its
format's reference before it is timed: the module in eager fp32 (a .pt2 file's: its
`.module()`), or ONNX Runtime on the same .onnx file, whose session is made first, so a file
ONNX Runtime refuses (a custom op, external data outside its folder) never reaches OpenVINO.

Why a catalog model is converted from the module and not from the ONNX file the onnxruntime
backend exports: one step instead of two (no export, no temporary file), and OpenVINO's
PyTorch frontend is what its documentation recommends for torch models; the ONNX path would
add the exporter's own choices between the two runtimes compared.

Compiled for the run's static shape in prepare(), as benchmark_app does (a dynamic batch
axis makes the CPU plugin pick shape-generic kernels), so prepare_s is the conversion
(once per model) plus this shape's compile. The plugin's settings are read back from the
compiled model and recorded: NUM_STREAMS (what the hint chose), INFERENCE_NUM_THREADS and
INFERENCE_PRECISION_HINT. On a CPU with bf16 instructions the plugin picks bf16 for an
"fp32" model by default (measured here: INFERENCE_PRECISION_HINT read back bfloat16), so an
fp32 run pins f32 and a bf16 run asks for bf16 (a user's file too: the precision is the
plugin's setting, not the file's); the output check then holds each to its rule.

The timed loop drives one synchronous request at a time, as for every runtime. Under the
throughput hint the plugin splits the threads into NUM_STREAMS streams and one request uses
one of them; benchmark_app's throughput mode keeps OPTIMAL_NUMBER_OF_INFER_REQUESTS requests
in flight instead (recorded as ov_optimal_requests). Several requests at once is what this
project's replicas measure. A serving batcher calls every batch size up to its max: a step
for a shape other than the run's gets a compiled model and a request of its own.
"""

from __future__ import annotations

from dataclasses import replace

import math
import time

import numpy as np
import openvino as ov
import openvino.properties as props
import openvino.properties.hint as hints
import torch

from engine.scenarios.inference.spec import RunSpec
from engine.core.catalog import get_model
from engine.core.errors import plain_text
from engine.core.limits import BATCH_RANGE
from engine.worker import user_models
from engine.worker.backends import torch_eager
from engine.worker.backends.torch_eager import as_matrix, input_tensors, make_inputs

_MODES = {"latency": hints.PerformanceMode.LATENCY,
          "throughput": hints.PerformanceMode.THROUGHPUT}
_TYPES = {"fp32": ov.Type.f32, "bf16": ov.Type.bf16}


def _converted(convert, source):
    """convert() for a user's file; ModelFileError with OpenVINO's reason in one line."""
    try:
        return convert()
    except user_models.ModelFileError:
        raise
    except Exception as exc:  # noqa: BLE001 - the reason goes to the failure row
        why = " ".join(plain_text(str(exc)).split())[:300]
        raise user_models.ModelFileError(
            f"model_file: OpenVINO could not convert {source.name} ({type(exc).__name__}: "
            f"{why})") from None


class _OnnxReference:
    """ONNX Runtime on a user's .onnx file, called like a module (torch tensors in, the
    outputs out): the reference OpenVINO's output is checked against. One thread: it runs
    only in the check, and leaves no pool of its own beside the timed loop."""

    def __init__(self, source):
        self.source = source
        self.session = user_models.onnx_session(source, 1, 1)
        self.names = [i.name for i in self.session.get_inputs()]

    def __call__(self, *xs):
        return self.session.run(None, dict(zip(self.names, _ordered(
            [x.cpu().numpy() for x in xs], [[n] for n in self.names], self.source))))

    def weight_bytes(self) -> int:
        """The initializers' bytes: the copy of the weights the session holds."""
        import onnx
        from onnx import helper

        graph = onnx.load(self.source.path, load_external_data=False).graph
        return int(sum(math.prod(t.dims) * helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
                       for t in graph.initializer))


def _ordered(arrays, port_names, source) -> list:
    """The described inputs in the model's order: matched by name where every described
    name is one of a port's, else in the order described."""
    if len(port_names) != len(arrays):
        raise ValueError(f"input: the model takes {len(port_names)} inputs; {len(arrays)} "
                         "were described")
    if source is None:
        return list(arrays)
    described = [i.name for i in source.inputs]
    at = [next((i for i, n in enumerate(described) if n in names), None)
          for names in port_names]
    if None in at or len(set(at)) != len(at):
        return list(arrays)
    return [arrays[i] for i in at]


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
        self.key = None  # (shapes, hint, precision) the compiled model was made for
        self.others = {}  # a serving batcher's other shapes: key -> compiled model

    def load(self, spec: RunSpec) -> None:
        if spec.device != "cpu":
            raise RuntimeError("openvino here runs on its CPU plugin only")
        self.compiled = self.key = None
        self.others = {}
        src = spec.user_model
        if src is None or src.format != "onnx":
            self.reference_name = type(self).reference_name
            super().load(spec)
            return
        # A user's ONNX file: no torch module; ONNX Runtime on the file is the reference.
        self.device = torch.device("cpu")
        self.reference_name = "onnxruntime"
        self.reference = _OnnxReference(src)
        self.model, self.output_error = None, None
        t = time.perf_counter()
        self.ov_model = _converted(lambda: ov.convert_model(src.path), src)
        self.convert_s = self.prepare_s = time.perf_counter() - t

    def cast(self, model, spec: RunSpec):
        return model  # the precision is the plugin's setting: converted from fp32

    def to_input(self, x, spec: RunSpec):
        return x  # fp32 in; the plugin converts inside the graph

    def convert(self, model, spec: RunSpec):
        src = spec.user_model
        t = time.perf_counter()
        if src is not None and src.format == "pt2":  # the program, as the file holds it
            self.ov_model = _converted(
                lambda: ov.convert_model(user_models.load_program(src)), src)
        elif src is None and get_model(spec.model).input_kind == "tokens":
            # its PyTorch frontend traces the module with TorchScript, which transformers'
            # BERT refuses (engine/core/encoders.py): converted from a torch.export program,
            # batch axis dynamic (the compile fixes each run's shape)
            # an example of batch 2: torch.export fixes an axis whose example is 1
            xs = tuple(input_tensors(replace(spec, batch_size=2), "cpu"))
            batch = torch.export.Dim("batch", min=1, max=BATCH_RANGE[1])
            with torch.no_grad():
                program = torch.export.export(model, xs,
                                              dynamic_shapes=tuple({0: batch} for _ in xs))
            self.ov_model = ov.convert_model(program)
        else:
            xs = tuple(input_tensors(spec, "cpu"))
            self.ov_model = ov.convert_model(model, example_input=xs if len(xs) > 1 else xs[0])
        self.convert_s = self.prepare_s = time.perf_counter() - t
        return None  # the compiled model runs; the eager module is kept as the reference

    def _arrays(self, arrays, spec: RunSpec) -> list:
        return _ordered(arrays, [p.get_names() for p in self.ov_model.inputs],
                        spec.user_model)

    def _key(self, spec: RunSpec) -> tuple:
        shapes = tuple(tuple(a.shape) for a in self._arrays(make_inputs(spec), spec))
        return shapes, spec.options["ov_hint"], spec.precision

    def _compiled_for(self, key):
        """The model compiled for these static shapes with the hint, this worker's threads
        and the precision pinned."""
        shapes, hint, precision = key
        model = self.ov_model.clone()
        model.reshape({i: ov.PartialShape(list(s)) for i, s in enumerate(shapes)})
        return self.core.compile_model(model, "CPU", {
            hints.performance_mode: _MODES[hint],
            props.inference_num_threads: torch.get_num_threads(),
            hints.inference_precision: _TYPES[precision]})

    def _compile(self, spec: RunSpec) -> None:
        """The model compiled for this run (a reused shape and hint compile nothing), its
        settings read back."""
        key = self._key(spec)
        if key == self.key:
            return
        t = time.perf_counter()
        self.compiled = self._compiled_for(key)
        self.prepare_s = self.convert_s + time.perf_counter() - t
        self.key = key
        self.request = self.compiled.create_infer_request()
        self.runtime_settings = {
            "ov_hint": key[1],
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
        arrays = self._arrays([x.cpu().numpy() for x in xs], spec)
        shapes = tuple(a.shape for a in arrays)
        if shapes != self.key[0]:  # the error figures' batches have the run's shape too
            raise ValueError(f"openvino compiled for {self.key[0]}, fed {shapes}")
        out = self.request.infer(arrays)
        return as_matrix([np.asarray(out[o]) for o in self.compiled.outputs])

    def model_stats(self, spec: RunSpec, count_flops: bool):
        if isinstance(self.reference, _OnnxReference):  # the file's graph, counted as data
            return user_models.onnx_stats(spec.user_model, spec.user_model.inputs)
        return super().model_stats(spec, count_flops)

    def reference_bytes(self) -> int:
        if isinstance(self.reference, _OnnxReference):
            return self.reference.weight_bytes()
        return super().reference_bytes()

    def versions(self) -> dict:
        return {**super().versions(), "openvino": ov.__version__}

    def make_step(self, spec: RunSpec):
        # the input set once, as benchmark_app does: a call is the inference alone
        fed = [np.ascontiguousarray(a) for a in self._arrays(make_inputs(spec), spec)]
        key = self._key(spec)
        if key == self.key:
            request = self.request
            self.fed = fed  # the run's own
        else:  # a serving batcher's other batch size: a compiled model of its own
            if key not in self.others:
                self.others[key] = self._compiled_for(key)
            request = self.others[key].create_infer_request()
        for i, a in enumerate(fed):
            request.set_input_tensor(i, ov.Tensor(a))
        infer = request.infer

        def step():
            infer()
        return step

    def unload(self) -> None:
        self.compiled = self.ov_model = self.key = self.request = self.fed = None
        self.others = {}
        super().unload()
