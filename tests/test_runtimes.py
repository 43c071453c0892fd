"""One row per runtime (engine/core/runtimes.py): every table the project reads about a
runtime is derived from the rows, and this file fails when one disagrees with them. The
comparison is a pure function of rows and tables, so a test plants a disagreement (a row
changed, and the hand-written table the rows replaced) and shows it is caught. Then the
runtime added with the rows, OpenVINO on a user's .onnx and .pt2 files: its refusals and
acceptances by value here, real runs in tests/test_user_model_cli.py."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from engine.core import catalog, model_source, precision
from engine.core.errors import UserError
from engine.scenarios.inference import spec as inference
from engine.scenarios.inference.expand import expand_sweep
from engine.scenarios.inference.spec import RunSpec
from engine.core.model_source import InputSpec, ModelSource
from engine.core.runtimes import OPTIONS, ROWS, RuntimeOptions, row
from engine.scenarios.serving import spec as serving
from engine.scenarios.serving.spec import ServeSpec
from engine.scenarios.training import spec as training
from engine.worker import backends, numerics
from store import precision as store_precision
from tests.conftest import ROOT

FILE_FORMATS = ("pt2", "torchscript", "onnx", "keras", "savedmodel")


def tables() -> dict:
    """Every table the project holds about runtimes, as it holds it (worker-side ones too:
    backends/__init__ and numerics import no framework at module level)."""
    keys = [(r.framework, r.name) for r in ROWS]
    return {
        "catalog.RUNTIMES": catalog.RUNTIMES,
        "catalog.FRAMEWORKS": catalog.FRAMEWORKS,
        "catalog.REFERENCE_RUNTIME": catalog.REFERENCE_RUNTIME,
        "catalog.CPP_RUNNER_RUNTIMES": catalog.CPP_RUNNER_RUNTIMES,
        "inference.CPU_ONLY_RUNTIMES": inference.CPU_ONLY_RUNTIMES,
        "inference.device_choices": {k: inference.device_choices(*k) for k in keys},
        "inference.PROFILED_RUNTIMES": inference.PROFILED_RUNTIMES,
        "inference.BF16_RUNTIMES": inference.BF16_RUNTIMES,
        "precision.TORCH_BF16": precision.TORCH_BF16,
        "precision.supported_precisions": {k: precision.supported_precisions(*k) for k in keys},
        "precision.precision_refusal": {
            (*k, p, flags): precision.precision_refusal(*k, p, "cpu", flags)
            for k in keys for p in ("bf16", "int8") for flags in ((), ("amx_bf16",))},
        "model_source.FORMAT_RUNTIMES": model_source.FORMAT_RUNTIMES,
        "serving.UNSERVED_RUNTIMES": serving.UNSERVED_RUNTIMES,
        "training.TRAIN_RUNTIMES": training.TRAIN_RUNTIMES,
        "numerics._OWN_THREADS": numerics._OWN_THREADS,
        "backends._MODULES": backends._MODULES,
        "backends._TRAINERS": backends._TRAINERS,
        "inference.user_precisions": {
            (fmt, *k): inference.user_precisions(fmt, *k)
            for k in keys for fmt in ("onnx", "pt2", "factory")},
        "store.precision options": {o for o in OPTIONS if f"'$.{o.name}'" in store_precision._SAME},
    }


def expected(rows) -> dict:
    """What the rows say each table holds, worked out here from the rows alone."""
    keys = [(r.framework, r.name) for r in rows]
    frameworks = list(dict.fromkeys(r.framework for r in rows))
    by = {(r.framework, r.name): r for r in rows}
    flagged = ("avx512_bf16", "amx_bf16")

    def refusal(r, p, flags):
        if p not in r.precisions:
            return r.refusals.get(p, f"{r.framework} {r.name} has no {p} path in this project")
        if p == "bf16" and r.bf16_needs_flags and not set(flags) & set(flagged):
            return ("this CPU has neither avx512_bf16 nor amx_bf16: bf16 would be emulated in "
                    "fp32 instructions, slower than fp32")
        return ""

    def user(fmt, r):
        bf16 = fmt == "factory" and "bf16" in r.precisions and not r.bf16_needs_flags
        return tuple(dict.fromkeys((*r.file_precisions, *(("bf16",) if bf16 else ()))))

    return {
        "catalog.RUNTIMES": {f: {r.name: r.label for r in rows if r.framework == f}
                             for f in frameworks},
        "catalog.FRAMEWORKS": {r.framework: r.name for r in rows if r.default},
        "catalog.REFERENCE_RUNTIME": {r.framework: r.name for r in rows if r.reference},
        "catalog.CPP_RUNNER_RUNTIMES": tuple(r.name for r in rows if r.cpp_runner),
        "inference.CPU_ONLY_RUNTIMES": {k: by[k].cpu_only for k in keys if by[k].cpu_only},
        "inference.device_choices": {k: ("cpu",) if by[k].cpu_only else ("cpu", "cuda")
                                     for k in keys},
        "inference.PROFILED_RUNTIMES": {
            f: tuple(r.name for r in rows if r.framework == f and r.profiled)
            for f in frameworks if any(r.profiled for r in rows if r.framework == f)},
        "inference.BF16_RUNTIMES": {k for k in keys if "bf16" in by[k].precisions
                                    and not by[k].bf16_needs_flags},
        "precision.TORCH_BF16": tuple(r.name for r in rows if r.framework == "torch"
                                      and "bf16" in r.precisions and not r.bf16_needs_flags),
        "precision.supported_precisions": {k: by[k].precisions for k in keys},
        "precision.precision_refusal": {
            (*k, p, flags): refusal(by[k], p, flags)
            for k in keys for p in ("bf16", "int8") for flags in ((), ("amx_bf16",))},
        "model_source.FORMAT_RUNTIMES": {
            fmt: (next(r.framework for r in rows if fmt in r.formats),
                  tuple(r.name for r in rows if fmt in r.formats)) for fmt in FILE_FORMATS},
        "serving.UNSERVED_RUNTIMES": {r.name: r.unserved for r in rows if r.unserved},
        "training.TRAIN_RUNTIMES": {
            f: tuple(r.name for r in rows if r.framework == f and r.trainer)
            for f in frameworks if any(r.trainer for r in rows if r.framework == f)},
        "numerics._OWN_THREADS": {r.name: r.own_threads for r in rows if r.own_threads},
        "backends._MODULES": {k: f"engine.worker.backends.{by[k].module}" for k in keys},
        "backends._TRAINERS": {k: f"engine.worker.backends.{by[k].trainer}" for k in keys
                               if by[k].trainer},
        "inference.user_precisions": {(fmt, *k): user(fmt, by[k])
                                      for k in keys for fmt in ("onnx", "pt2", "factory")},
        "store.precision options": {o for r in rows for o in r.options},
    }


def disagreements(want: dict, got: dict) -> list[str]:
    """The tables that do not hold what the rows say."""
    return [name for name in want if want[name] != got.get(name)]


def test_every_derived_table_holds_what_the_rows_say():
    assert disagreements(expected(ROWS), tables()) == []


def test_a_planted_disagreement_is_caught_by_name():
    # a row changed and its table not: OpenVINO reading only .pt2 files
    ov = next(i for i, r in enumerate(ROWS) if r.name == "openvino")
    changed = (*ROWS[:ov], replace(ROWS[ov], formats=("pt2",)), *ROWS[ov + 1:])
    assert disagreements(expected(changed), tables()) == ["model_source.FORMAT_RUNTIMES"]
    # the hand-written table the rows replaced, which left libtorch_aoti out: caught
    old = {rt: row("torch", rt).own_threads for rt in ("onnxruntime", "libtorch")}
    assert disagreements(expected(ROWS), {**tables(), "numerics._OWN_THREADS": old}) == [
        "numerics._OWN_THREADS"]


def test_the_rows_hang_together():
    keys = [(r.framework, r.name) for r in ROWS]
    assert len(set(keys)) == len(keys)
    for f in dict.fromkeys(r.framework for r in ROWS):
        mine = [r for r in ROWS if r.framework == f]
        assert [r.reference for r in mine].count(True) == 1 and mine[0].reference, f
        assert [r.default for r in mine].count(True) == 1, f
    for r in ROWS:
        assert r.precisions[0] == "fp32" and set(r.precisions) <= set(precision.PRECISIONS)
        assert set(r.refusals) <= set(precision.PRECISIONS) - set(r.precisions), r.name
        assert set(r.file_precisions) <= set(r.precisions) and set(r.formats) <= set(FILE_FORMATS)
        assert (ROOT / "engine/worker/backends" / f"{r.module}.py").is_file(), r.module
        assert not r.trainer or (ROOT / "engine/worker/backends" / f"{r.trainer}.py").is_file()
        if r.cpp_runner:  # the runner is a process of its own, on the CPU, timing itself
            assert r.cpu_only and r.unserved and r.own_threads and not r.profiled, r.name
    # the threads the worker's denormal flag does not reach: the two C++ runners (a process
    # of their own) and ONNX Runtime's pool; AOTInductor and OpenVINO were measured reached
    assert list(numerics._OWN_THREADS) == ["onnxruntime", "libtorch", "libtorch_aoti"]


def test_the_openvino_hint_is_a_typed_option_of_its_row_alone():
    assert [(r.name, [o.name for o in r.options]) for r in ROWS if r.options] == [
        ("openvino", ["ov_hint"])]
    (hint,) = OPTIONS
    assert (hint.flag, hint.choices, hint.default, hint.label) == (
        "--ov-hint", ("latency", "throughput"), "latency", "OpenVINO hint")
    options = RuntimeOptions({"ov_hint": "throughput"})
    assert hash(options) == hash(RuntimeOptions({"ov_hint": "throughput"}))
    with pytest.raises(TypeError):
        options["ov_hint"] = "latency"
    with pytest.raises(UserError) as info:
        row("torch", "openvino").check_options({"streams": "4"})
    assert (info.value.field, str(info.value)) == (
        "streams", "streams: torch openvino has no option streams; allowed: ov_hint")


def test_a_spec_travels_with_its_options_and_an_old_hint_field_decodes(tmp_path):
    spec = RunSpec("resnet18", "torch", 1, 1, runtime="openvino",
                   options={"ov_hint": "throughput"}).validate(cores=2)
    wire = json.loads(json.dumps(spec.to_dict()))
    assert wire["options"] == {"ov_hint": "throughput"} and "ov_hint" not in wire
    assert RunSpec.from_dict(wire) == spec
    # protocol 7's dict: the hint a field of every spec ("latency" off OpenVINO)
    for runtime, hint, options in (("openvino", "throughput", {"ov_hint": "throughput"}),
                                   ("eager", "latency", {})):
        old = {k: v for k, v in RunSpec("resnet18", "torch", 1, 1, runtime=runtime)
               .validate(cores=2).to_dict().items() if k != "options"}
        back = RunSpec.from_dict({**old, "ov_hint": hint})
        assert back.options == options and back.validate(cores=2).options == (
            options or {})
    serve = ServeSpec(spec, "offline", min_query_count=10).validate(cores=2)
    assert ServeSpec.from_dict(json.loads(json.dumps(serve.to_dict()))) == serve


def _file(tmp_path, fmt) -> ModelSource:
    path = tmp_path / f"net.{fmt}"
    path.write_bytes(b"x")  # never read here: the format comes from the name
    return ModelSource("net", fmt, (InputSpec("input", (1, 3, 16, 16)),), path=str(path))


@pytest.mark.parametrize("fmt", ["onnx", "pt2"])
def test_openvino_takes_a_users_onnx_and_pt2_file_with_its_hint(tmp_path, fmt):
    src = _file(tmp_path, fmt)
    assert model_source.FORMAT_RUNTIMES[fmt][1][-1] == "openvino"
    (spec,) = expand_sweep(["net"], ["torch"], [4], [1], user_model=src, cores=2,
                           runtimes=["openvino"], options={"ov_hint": "throughput"})
    assert (spec.runtime, dict(spec.options), spec.weight_policy, spec.precision) == (
        "openvino", {"ov_hint": "throughput"}, "as_given", "fp32")
    # bf16 is the plugin's setting, so it applies to the file, where the CPU has it
    bf16 = RunSpec("net", "torch", 4, 1, runtime="openvino", precision="bf16", user_model=src)
    assert bf16.validate(cores=2, flags=("amx_bf16",)).precision == "bf16"
    with pytest.raises(UserError) as info:
        bf16.validate(cores=2, flags=("avx512f",))
    assert str(info.value) == (
        "precision: bf16 is not supported by torch openvino: this CPU has neither avx512_bf16 "
        "nor amx_bf16: bf16 would be emulated in fp32 instructions, slower than fp32; "
        "allowed for it here: fp32")


def test_an_onnx_file_keeps_onnx_runtime_as_its_default_and_refuses_what_neither_runs(
        tmp_path):
    src = _file(tmp_path, "onnx")
    (spec,) = expand_sweep(["net"], ["torch"], [1], [1], user_model=src, cores=2)
    assert (spec.runtime, dict(spec.options)) == ("onnxruntime", {})
    cases = [
        (dict(runtime="eager"), "runtime",
         "runtime: torch eager cannot run a onnx model: an ONNX file is a graph, read only by "
         "the runtimes that read ONNX; it holds no torch module; allowed: torch onnxruntime, "
         "openvino"),
        (dict(runtime="openvino", precision="int8"), "precision",
         "precision: a user's model file runs in the precision it was saved in (int8 is not "
         "applied to it); bf16 applies to a torch factory's model on eager, channels_last, "
         "torchscript or compile; and to any torch model on openvino where the CPU has "
         "avx512_bf16 or amx_bf16; allowed: fp32, bf16"),
        (dict(runtime="onnxruntime", precision="bf16"), "precision",
         "precision: a user's model file runs in the precision it was saved in (bf16 is not "
         "applied to it); bf16 applies to a torch factory's model on eager, channels_last, "
         "torchscript or compile; and to any torch model on openvino where the CPU has "
         "avx512_bf16 or amx_bf16; allowed: fp32"),
        (dict(runtime="openvino", device="cuda"), "device",
         "device: cuda is not available for torch openvino; allowed: cpu"),
        (dict(runtime="openvino", profile_steps=2), "profile_steps",
         "profile_steps: torch openvino cannot be profiled; allowed: 0, or a runtime among "
         "eager, channels_last, torchscript, compile"),
        (dict(runtime="onnxruntime", options={"ov_hint": "latency"}), "ov_hint",
         "ov_hint: torch onnxruntime has no option ov_hint (it is torch openvino's); "
         "allowed: none"),
    ]
    for change, field, message in cases:
        spec = RunSpec(**{**dict(model="net", framework="torch", batch_size=1, intra_threads=1,
                                 user_model=src), **change})
        with pytest.raises(UserError) as info:
            spec.validate(cores=2, flags=("amx_bf16",))
        assert (info.value.field, str(info.value)) == (field, message)


def test_the_tuner_searches_openvino_for_a_users_file_too(tmp_path):
    from types import SimpleNamespace

    from engine.cli.tune import candidates

    args = SimpleNamespace(framework=["torch"], runtime=None, precision=["fp32"],
                           threads=[1], replicas=[1], batches=[1], max_wait_ms=[2.0])
    got = {(c.runtime, c.max_batch) for c in candidates(args, _file(tmp_path, "onnx"), cores=2)}
    assert got == {("onnxruntime", 1), ("openvino", 1)}


def test_the_checklist_names_every_file_a_runtime_touches():
    text = (ROOT / "docs/ARCHITECTURE.md").read_text()
    checklist = text[text.index("## Adding a runtime"):]
    for path in ("engine/core/runtimes.py", "engine/worker/backends/", "tests/test_runtimes.py"):
        assert path in checklist
    assert Path(ROOT / "engine/core/runtimes.py").is_file()
