"""A user's own model, as far as it is decided without opening it (issue #14, first part):
the format from the path, the inputs from their description, the runtimes per format."""

import pytest

from engine.core.errors import UserError
from engine.core.model_source import (MAX_ELEMENTS, InputSpec, ModelSource, check_model_name,
                                      check_runtime, detect_format,
                                      parse_factory, parse_input, parse_input_shape)


def test_the_format_comes_from_the_path_without_reading_it(tmp_path):
    for name, fmt in (("m.pt2", "pt2"), ("m.pt", "torchscript"), ("m.PTH", "torchscript"),
                      ("m.onnx", "onnx"), ("m.keras", "keras")):
        (tmp_path / name).write_bytes(b"not read")
        assert detect_format(tmp_path / name) == fmt
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "saved_model.pb").write_bytes(b"")
    assert detect_format(saved) == "savedmodel"


@pytest.mark.parametrize("name, message", [
    ("missing.onnx", "does not exist"),
    ("m.h5", "legacy HDF5 Keras files bypass safe_mode"),
    ("m.pkl", "a pickle runs code when it is read"),
    ("m.bin", "unknown extension '.bin'"),
    ("folder", "is a folder without saved_model.pb"),
])
def test_a_path_it_cannot_run_is_refused_with_the_reason(tmp_path, name, message):
    if name == "folder":
        (tmp_path / name).mkdir()
    elif name != "missing.onnx":
        (tmp_path / name).write_bytes(b"x")
    with pytest.raises(UserError) as e:
        detect_format(tmp_path / name)
    assert e.value.field == "model_file" and message in str(e.value)


def test_inputs_are_described_with_the_batch_axis_first():
    assert parse_input_shape("3,224,224") == InputSpec("input", (1, 3, 224, 224), "float32")
    ids = parse_input("input_ids:1x128:int64")
    assert ids == InputSpec("input_ids", (1, 128), "int64") and ids.shape(8) == (8, 128)
    assert parse_input("image:1x3x32x32").dtype == "float32"


@pytest.mark.parametrize("text, field, message", [
    ("3,0,224", "input_shape", "dimension 0 in '3,0,224' is not positive"),
    ("3,-1,224", "input_shape", "dimension -1"),
    ("3,a,224", "input_shape", "'a' in '3,a,224' is not an integer"),
    ("3,,224", "input_shape", "'3,,224' has an empty dimension"),
    ("3,x,224", "input_shape", "'3,x,224' has an empty dimension"),
    ("", "input_shape", "has an empty dimension"),
    ("1,2,3,4,5,6,7,8,9", "input_shape", "has 9 dimensions; allowed: 1 to 8"),
    (f"{MAX_ELEMENTS + 1}", "input_shape", "allowed: at most 268,435,456 per batch"),
])
def test_a_shape_that_cannot_be_fed_is_refused(text, field, message):
    with pytest.raises(UserError) as e:
        parse_input_shape(text)
    assert e.value.field == field and message in str(e.value)


@pytest.mark.parametrize("text, message", [
    ("input_ids", "is not NAME:DIMS[:DTYPE]"),
    ("ids:1x128:complex64", "dtype 'complex64' is not supported"),
    ("../x:1x2", "name '../x' is not allowed"),
    ("ids:1x0", "dimension 0"),
])
def test_a_bad_input_description_names_the_field(text, message):
    with pytest.raises(UserError) as e:
        parse_input(text)
    assert e.value.field == "input" and message in str(e.value)


def test_factories_are_module_colon_function():
    assert parse_factory(" mypkg.models:build ") == "mypkg.models:build"
    for bad in ("mypkg.models", "mypkg/models:build", "a:b:c", "os.system('x'):f", ":f"):
        with pytest.raises(UserError) as e:
            parse_factory(bad)
        assert e.value.field == "model_factory"


@pytest.mark.parametrize("fmt, framework, runtime, ok", [
    ("pt2", "torch", "eager", True), ("pt2", "torch", "compile", True),
    ("pt2", "torch", "onnxruntime", True), ("pt2", "torch", "torchscript", False),
    ("torchscript", "torch", "libtorch", True), ("torchscript", "torch", "eager", False),
    ("onnx", "torch", "onnxruntime", True), ("onnx", "tensorflow", "keras", False),
    ("keras", "tensorflow", "xla", True), ("keras", "torch", "eager", False),
    ("savedmodel", "tensorflow", "tf_function", True), ("factory", "torch", "libtorch", True),
])
def test_the_runtimes_follow_from_the_format(fmt, framework, runtime, ok):
    if ok:
        check_runtime(fmt, framework, runtime)
        return
    with pytest.raises(UserError) as e:
        check_runtime(fmt, framework, runtime)
    assert e.value.field == "runtime" and f"cannot run a {fmt} model" in str(e.value)


def _source(tmp_path, fmt="pt2", name="net", inputs=None):
    path = tmp_path / {"pt2": "net.pt2", "torchscript": "net.pt", "onnx": "net.onnx",
                       "keras": "net.keras"}[fmt]
    path.write_bytes(b"x")  # never read here: the format comes from the name
    return ModelSource(name, fmt, inputs or (InputSpec("input", (1, 3, 16, 16)),),
                       path=str(path))


def test_a_user_model_spec_resolves_from_its_format_and_travels_as_json(tmp_path):
    import json

    from engine.scenarios.inference.expand import expand_sweep
    from engine.scenarios.inference.spec import RunSpec

    src = _source(tmp_path, "onnx")
    (spec,) = expand_sweep(["net"], ["torch"], [4], [1], user_model=src, cores=2)
    assert (spec.runtime, spec.image_size, spec.weight_policy) == ("onnxruntime", None,
                                                                   "as_given")
    back = RunSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert back == spec and back.user_model.inputs[0].dims == (1, 3, 16, 16)
    keras = _source(tmp_path, "keras", inputs=(InputSpec("image", (1, 16, 16, 3)),))
    specs = expand_sweep(["net"], ["tensorflow"], [1], [1], user_model=keras, cores=2)
    assert [s.runtime for s in specs] == ["tf_function"]


@pytest.mark.parametrize("change, field, message", [
    (dict(precision="bf16"), "precision", "runs in the precision it was saved in"),
    (dict(image_size=64), "image_size", "takes the input it describes"),
    (dict(framework="tensorflow"), "framework", "a pt2 model runs in torch"),
    (dict(runtime="torchscript"), "runtime", "cannot run a pt2 model"),
    (dict(model="other"), "model", "differs from the user model's name"),
])
def test_a_user_model_spec_refuses_what_its_format_cannot_do(tmp_path, change, field,
                                                             message):
    from engine.scenarios.inference.spec import RunSpec

    spec = RunSpec(**{**dict(model="net", framework="torch", batch_size=1, intra_threads=1,
                             user_model=_source(tmp_path)), **change})
    with pytest.raises(UserError) as e:
        spec.validate(cores=2)
    assert e.value.field == field and message in str(e.value)


def test_names_of_user_models_are_plain_and_not_the_catalogs():
    assert check_model_name(" my-net_v2.1 ") == "my-net_v2.1"
    for bad, message in (("resnet18", "a catalog model's name"), ("a b", "not allowed"),
                         ("", "not allowed"), ("x" * 65, "not allowed"),
                         ("<b>x</b>", "not allowed")):
        with pytest.raises(UserError) as e:
            check_model_name(bad)
        assert e.value.field == "model_name" and message in str(e.value)


def _program(tmp_path, fmt, trust):
    if fmt == "savedmodel":
        path = tmp_path / "exported"
        path.mkdir(exist_ok=True)
        (path / "saved_model.pb").write_bytes(b"p")  # never read here
        inputs = (InputSpec("image", (1, 16, 16, 3)),)
    else:
        path = tmp_path / "net.pt"
        path.write_bytes(b"x")
        inputs = (InputSpec("input", (1, 3, 16, 16)),)
    return ModelSource("net", fmt, inputs, path=str(path), trust_code=trust)


@pytest.mark.parametrize("fmt, framework, what", [
    ("torchscript", "torch", "net.pt is TorchScript, a program"),
    ("savedmodel", "tensorflow", "exported is a SavedModel, a program"),
])
def test_a_file_whose_loading_runs_code_runs_only_when_the_user_says_so(tmp_path, fmt,
                                                                         framework, what):
    import json

    from engine.scenarios.inference.expand import expand_sweep
    from engine.scenarios.inference.spec import RunSpec

    with pytest.raises(UserError) as e:
        expand_sweep(["net"], [framework], [1], [1], user_model=_program(tmp_path, fmt, False),
                     cores=2)
    assert e.value.field == "trust_model_code"
    assert str(e.value) == (
        f"trust_model_code: {what}: loading it runs code from the file; allowed: "
        "--trust-model-code (on the Run page: \"runs code from this file\") when you trust "
        "this file, or a format that loads without running code (.pt2, .onnx, .keras)")
    (spec,) = expand_sweep(["net"], [framework], [1], [1],
                           user_model=_program(tmp_path, fmt, True), cores=2)
    assert spec.user_model.trust_code is True
    # the trust travels with the spec (a job, a stored row) and is read back as given
    back = RunSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert back == spec and back.user_model.trust_code is True
    d = spec.to_dict()
    d["user_model"]["trust_code"] = "yes"  # only a JSON true turns it on
    assert RunSpec.from_dict(d).user_model.trust_code is False
    from engine.scenarios import scenario_of
    assert scenario_of(spec).config_extra(spec) == {"trust_model_code": True}


def test_files_that_load_without_running_code_need_no_trust(tmp_path):
    from engine.core.model_source import check_trust

    for fmt in ("pt2", "onnx", "keras"):
        check_trust(_source(tmp_path, fmt))  # no refusal
    check_trust(ModelSource("f", "factory", (), path=str(tmp_path), factory="m:f"))


def test_stored_reasons_are_plain_text():
    from engine.core.errors import plain_text

    # Keras's message as a terminal shows it: bold codes around the layer's name
    keras = ("ValueError: Input 0 of layer \x1b[1m\"functional\"\x1b[0m is incompatible with "
             "the layer: expected shape=(None, 16, 16, 3), found shape=(1, 3, 16, 16)")
    assert plain_text(keras) == ("ValueError: Input 0 of layer \"functional\" is incompatible "
                                 "with the layer: expected shape=(None, 16, 16, 3), found "
                                 "shape=(1, 3, 16, 16)")
    assert plain_text("\x1b[31;1mred\x1b[m \x1b]8;;https://x\x07link\x1b]8;;\x1b\\ \x07bell") \
        == "red link bell"
    assert plain_text("tab\tand\nnewline stay; \x00nul \x7fdel go") == \
        "tab\tand\nnewline stay; nul del go"


def test_a_workers_failure_row_carries_its_reason_as_plain_text():
    from engine.core.protocol import Failed
    from engine.worker.harness import Frame
    from seeds.records import spec

    events = []

    def bold_keras_error():  # what Keras raises for a call on the wrong layout
        raise ValueError("Exception encountered when calling Sequential.call().\n\n\x1b[1m"
                         "Input 0 of layer 'dense' is incompatible with the layer\x1b[0m")

    Frame(events.append, cap=None, t0=0.0, trace_dir=None).guarded("r1", spec(),
                                                                   bold_keras_error)
    [failed] = [e for e in events if isinstance(e, Failed)]
    assert (failed.status, failed.reason) == (
        "error", "ValueError: Exception encountered when calling Sequential.call().\n\n"
                 "Input 0 of layer 'dense' is incompatible with the layer")


def _zip(path, members: dict):
    import json
    import zipfile

    with zipfile.ZipFile(path, "w") as z:
        for name, value in members.items():
            z.writestr(name, json.dumps(value))
    return str(path)


def test_the_inputs_a_file_declares_are_read_as_data_and_a_mismatch_named(tmp_path):
    """Crafted files: a .keras config with two inputs (in input_layers order, not the
    layers'), a built Sequential without an InputLayer, a .pt2 program with a symbolic
    batch; read from their JSON, nothing unpickled (worker side, no framework needed)."""
    from engine.worker.declared import Declared, declared_inputs, declared_mismatch

    layer = lambda name, shape, dtype: {  # noqa: E731
        "class_name": "InputLayer", "name": name,
        "config": {"name": name, "batch_shape": shape, "dtype": dtype}}
    two = _zip(tmp_path / "two.keras", {"config.json": {"class_name": "Functional", "config": {
        "layers": [layer("mask", [None, 8], "bool"), layer("ids", [None, 8], "int64")],
        "input_layers": [["ids", 0, 0], ["mask", 0, 0]]}}})
    built = _zip(tmp_path / "built.keras", {"config.json": {
        "class_name": "Sequential", "config": {"layers": [{"class_name": "Dense"}]},
        "build_config": {"input_shape": [None, 4]}}})
    sym = {"as_expr": {"expr_str": "s0"}}
    program = _zip(tmp_path / "p.pt2", {"p/models/model.json": {"graph_module": {
        "signature": {"input_specs": [
            {"parameter": {"arg": {"name": "w"}, "parameter_name": "fc.weight"}},
            {"user_input": {"arg": {"as_tensor": {"name": "x"}}}}]},
        "graph": {"tensor_values": {
            "w": {"dtype": 7, "sizes": [{"as_int": 2}, {"as_int": 4}]},
            "x": {"dtype": 7, "sizes": [sym, {"as_int": 4}]}}}}}})
    src = lambda path, fmt, *inputs: ModelSource("m", fmt, inputs, path=path)  # noqa: E731
    assert declared_inputs(src(two, "keras")) == (Declared("ids", (None, 8), "int64"),
                                                   Declared("mask", (None, 8), "bool"))
    assert declared_inputs(src(built, "keras")) == (Declared("input", (None, 4), None),)
    assert declared_inputs(src(program, "pt2")) == (Declared("x", (None, 4), "float32"),)
    # nothing readable (not a zip): no declaration, the loader then names what is wrong
    (tmp_path / "junk.keras").write_bytes(b"junk")
    assert declared_inputs(src(str(tmp_path / "junk.keras"), "keras")) is None
    assert declared_inputs(src(str(tmp_path / "junk.keras"), "torchscript")) is None

    ok = src(two, "keras", InputSpec("a", (1, 8), "int64"), InputSpec("b", (1, 8), "bool"))
    assert declared_mismatch(ok, 16, declared_inputs(ok)) is None  # names are the user's
    swapped = src(two, "keras", InputSpec("a", (1, 8), "bool"), InputSpec("b", (1, 8), "int64"))
    assert declared_mismatch(swapped, 2, declared_inputs(swapped)) == (
        "input: two.keras declares ids:?x8:int64 mask:?x8:bool; given a:2x8:bool b:2x8:int64 "
        "at batch 2 (a is bool, ids takes int64; b is int64, mask takes bool); allowed: "
        "--input ids:1x8:int64 --input mask:1x8:bool")
    flat = src(program, "pt2", InputSpec("input", (1, 2, 2)))
    assert declared_mismatch(flat, 1, declared_inputs(flat)) == (
        "input: p.pt2 declares x:?x4:float32; given input:1x2x2:float32 at batch 1 (input has "
        "3 dimensions, x 2); allowed: --input x:1x4:float32")
    fixed = (Declared("x", (1, 4), "float32"),)  # a program exported for batch 1 only
    assert declared_mismatch(src(program, "pt2", InputSpec("x", (1, 4))), 8, fixed) == (
        "input: p.pt2 declares x:1x4:float32; given x:8x4:float32 at batch 8 (the batch axis "
        "of x is 8, x takes 1); allowed: --input x:1x4:float32")


def test_the_parent_fills_inputs_from_a_declaration_and_names_what_does_not_fit():
    """fill_inputs (issue 26 part 8): what a worker read of a file fills the inputs none
    were given for (the open batch axis written 1, each batch size replacing it), checks
    given ones, and names a fixed batch axis other batch sizes cannot take; a format that
    declares nothing needs them given. Pure: the declaration here is written by hand."""
    from engine.core.model_source import DeclaredInput, declared_text, fill_inputs

    keras = ModelSource("k", "keras", (), path="/m/net64.keras")
    nhwc = (DeclaredInput("image", (None, 64, 64, 3), "float32"),)
    assert declared_text(nhwc) == "1x64x64x3 float32 (NHWC)"
    assert fill_inputs(keras, nhwc, (1, 4)).inputs == (InputSpec("image", (1, 64, 64, 3)),)
    given = ModelSource("k", "keras", (parse_input_shape("64,64,3"),), path="/m/net64.keras")
    assert fill_inputs(given, nhwc, (1, 4)) == given  # it fits: the user's value stands
    with pytest.raises(UserError) as e:
        fill_inputs(ModelSource("k", "keras", (parse_input_shape("3,64,64"),),
                                path="/m/net64.keras"), nhwc, (1,), "3,64,64")
    assert (e.value.field, str(e.value)) == ("input", (
        "input: the file declares 1x64x64x3 float32 (NHWC); given 3,64,64 (dimension 1 of "
        "input is 3, the file's 64; dimension 3 of input is 64, the file's 3); allowed: leave "
        "the input out (the file's is used) or --input image:1x64x64x3:float32"))
    # a program exported for batch 2 only: another batch size is named, with the one allowed
    fixed = (DeclaredInput("x", (2, 3, 8, 8), "float32"),)
    pt2 = ModelSource("p", "pt2", (), path="/m/p.pt2")
    assert fill_inputs(pt2, fixed, (2,)).inputs == (InputSpec("x", (1, 3, 8, 8)),)
    with pytest.raises(UserError) as e:
        fill_inputs(pt2, fixed, (1, 2, 4))
    assert (e.value.field, str(e.value)) == ("batch_size", (
        "batch_size: the file fixes the batch dimension of x at 2 (it declares 2x3x8x8 "
        "float32 (NCHW)), so batch 1, 4 cannot run; allowed: --batch 2"))
    # two inputs, one with a length the file leaves open: it must be given
    tokens = (DeclaredInput("ids", (None, None), "int64"), DeclaredInput("mask", (None, 8), "bool"))
    onnx = ModelSource("o", "onnx", (), path="/m/t.onnx")
    with pytest.raises(UserError, match=r"^input: t.onnx declares ids:\?x\?:int64 \(its "
                                         r"dimensions after the batch axis left open\)"):
        fill_inputs(onnx, tokens, (1,))
    ok = ModelSource("o", "onnx", (parse_input("ids:1x128:int64"), parse_input("mask:1x8:bool")),
                     path="/m/t.onnx")
    assert fill_inputs(ok, tokens, (1, 8)) == ok  # an open dimension takes what is given
    # nothing declared (TorchScript), or a declaring format whose file could not be read
    for fmt, says in (("torchscript", "a TorchScript file, which declares no inputs we read"),
                      ("onnx", "an ONNX file whose declared inputs could not be read")):
        with pytest.raises(UserError) as e:
            fill_inputs(ModelSource("t", fmt, (), path=f"/m/t.{fmt}"), None, (1,))
        assert str(e.value) == (
            f"input: required for t.{fmt}, {says}; allowed: --input-shape C,H,W or one or "
            "more --input NAME:DIMS[:DTYPE] (on the Run page: the Input box)")
    given_ts = ModelSource("t", "torchscript", (parse_input_shape("3,8,8"),), path="/m/t.pt")
    assert fill_inputs(given_ts, None, (1,)) == given_ts
