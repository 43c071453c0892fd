"""The Run page's "Your model file" choice through AppTest: a file in the models folder is
picked (by a link naming its server-side name), named, given its input, and submitted as a
sweep of that model; bad fields are named; the catalog form is untouched. The page never
opens a model file, so the files here are a few bytes each."""

import io

import pytest

from dashboard.access import decide
from engine.run.jobs.requests import SweepRequest
from engine.core.model_source import InputSpec, ModelSource
from store.models_dir import save_upload
from tests.test_pages import FakeManager, page


@pytest.fixture
def models(tmp_path, monkeypatch):
    folder = tmp_path / "models"
    monkeypatch.setenv("BENCH_MODELS_DIR", str(folder))
    monkeypatch.delenv("BENCH_MAX_UPLOAD_MB", raising=False)
    onnx = save_upload(io.BytesIO(b"onnx bytes"), "My Net.onnx", cap_bytes=100)
    keras = save_upload(io.BytesIO(b"keras bytes"), "resnet18.keras", cap_bytes=100)
    return folder, onnx, keras


@pytest.fixture
def fake(monkeypatch):
    manager = FakeManager()
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: manager)
    return manager


def test_a_linked_file_is_named_given_its_input_and_submitted(models, fake, db_path,
                                                              monkeypatch):
    _, onnx, _ = models
    at = page("views/run.py", db_path, monkeypatch,
              query={"source": "file", "model_file": onnx.name})
    assert at.radio(key="model_source").value == "Your model file"
    assert at.selectbox(key="um_file").value == str(onnx)
    assert at.text_input(key="um_name").value == "My_Net"  # the uploaded name, made safe
    # the runtimes that read ONNX (their rows say so); none picked: the format's default
    assert at.multiselect(key="um_runtimes_onnx").options == ["onnxruntime", "openvino"]
    keys = {w.key for w in at.multiselect} | {w.key for w in at.text_input}
    assert not keys & {"models", "frameworks", "runtimes", "image_size"}
    assert [e.value for e in at.error] == [
        "input: required; allowed: C,H,W (e.g. 3,224,224) or one NAME:DIMS[:DTYPE] per line "
        "(e.g. input_ids:1x128:int64)"]
    assert at.button(key="launch").disabled is True
    at.text_area(key="um_input").set_value("3,16,16")
    at.multiselect(key="batch_presets").set_value([1])
    at.multiselect(key="threads").set_value([1])
    at.number_input(key="rounds").set_value(1)
    at.number_input(key="max_rounds").set_value(1)
    at.run()
    assert not at.error and not at.exception
    assert at.info[0].value.startswith("**1 configuration × 1 round = 1 run**")
    at.button(key="launch").click().run()
    [req] = fake.submitted
    assert isinstance(req, SweepRequest)
    assert (req.models, req.frameworks, req.batch_sizes, req.threads, req.image_size,
            req.runtimes) == (("My_Net",), ("torch",), (1,), (1,), None, ())
    assert req.user_model == ModelSource("My_Net", "onnx", (InputSpec("input", (1, 3, 16, 16)),),
                                         path=str(onnx))
    assert [s.runtime for s in req.specs()] == ["onnxruntime"]
    assert at.success[0].value == "Sweep job 1 starts now."


def test_bad_fields_are_named_where_they_are_typed(models, fake, db_path, monkeypatch):
    _, _, keras = models
    at = page("views/run.py", db_path, monkeypatch,
              query={"source": "file", "model_file": keras.name})
    # The default name of resnet18.keras would pass for the catalog's resnet18.
    assert at.text_input(key="um_name").value == "my_resnet18"
    at.text_input(key="um_name").set_value("resnet18")
    at.text_area(key="um_input").set_value("16,16,3\nimage:1x16x16x3")
    at.run()
    assert [e.value.split(";")[0] for e in at.error] == [
        "model_name: 'resnet18' is a catalog model's name",
        "input: '16,16,3' is not NAME:DIMS[:DTYPE]"]
    assert at.button(key="launch").disabled is True
    at.text_input(key="um_name").set_value("mine")
    at.text_area(key="um_input").set_value("16,16,3")
    at.multiselect(key="um_runtimes_keras").set_value(["keras", "xla"])
    at.multiselect(key="batch_presets").set_value([1, 8])
    at.run()
    assert not at.error
    at.button(key="launch").click().run()
    [req] = fake.submitted
    assert (req.models, req.frameworks, req.runtimes, req.batch_sizes) == (
        ("mine",), ("tensorflow",), ("keras", "xla"), (1, 8))
    assert req.user_model.inputs == (InputSpec("input", (1, 16, 16, 3)),)


def test_a_link_value_that_is_a_path_or_unknown_is_refused_with_a_note(models, db_path,
                                                                       monkeypatch):
    folder, onnx, keras = models
    for raw in (str(onnx), "../models/" + onnx.name, "nothere.onnx"):
        at = page("views/run.py", db_path, monkeypatch,
                  query={"source": "file", "model_file": raw})
        [warning] = at.warning
        assert warning.value.startswith("link: model_file="), warning.value
        assert at.selectbox(key="um_file").value == str(keras)  # newest first: the default
    at = page("views/run.py", db_path, monkeypatch, query={"source": "files"})
    assert at.radio(key="model_source").value == "Catalog"
    assert [w.value for w in at.warning] == [
        "link: source='files' is not allowed; allowed: one of catalog, file; ignored"]


def test_an_empty_models_folder_says_where_to_put_a_file(tmp_path, db_path, monkeypatch):
    monkeypatch.setenv("BENCH_MODELS_DIR", str(tmp_path / "none"))
    at = page("views/run.py", db_path, monkeypatch, query={"source": "file"})
    assert [e.value for e in at.error] == [
        f"model_file: no model file in {tmp_path / 'none'} yet; allowed: upload one above, or "
        "copy a .pt2, .pt, .pth, .onnx or .keras file or a SavedModel folder there"]
    assert at.button(key="launch").disabled is True


def test_a_session_that_may_not_write_gets_no_upload_control(models, db_path, monkeypatch):
    remote = decide(env={}, settings={}, auth_configured=False, ip_address="10.0.0.7",
                    headers={}, email=None)
    assert not remote.can_write and not remote.viewer
    monkeypatch.setattr("dashboard.session.access", lambda: remote)
    at = page("views/run.py", db_path, monkeypatch, query={"source": "file"})
    assert "Uploading needs write access" in " ".join(c.value for c in at.caption)
    assert not [b for b in at.button if b.key in ("um_save", "launch")]
    assert at.get("file_uploader") == []


def test_the_catalog_form_is_the_default_and_unchanged(models, db_path, monkeypatch):
    at = page("views/run.py", db_path, monkeypatch)
    assert at.radio(key="model_source").value == "Catalog"
    assert at.multiselect(key="models").value == ["efficientnet_b0"]
    assert at.get("file_uploader") == [] and not [s for s in at.selectbox if s.key == "um_file"]
    at.radio(key="model_source").set_value("Your model file").run()
    assert at.selectbox(key="um_file").value is not None
    at.radio(key="model_source").set_value("Catalog").run()
    assert at.multiselect(key="models").value == ["efficientnet_b0"] and not at.exception


def test_a_link_seeds_the_name_input_and_runtimes_and_names_a_runtime_the_format_lacks(
        models, fake, db_path, monkeypatch):
    _, onnx, keras = models
    at = page("views/run.py", db_path, monkeypatch,
              query={"source": "file", "model_file": keras.name, "name": "shared_net",
                     "input": "image:1x16x16x3", "runtime": "xla,keras,eager"})
    assert at.text_input(key="um_name").value == "shared_net"
    assert at.text_area(key="um_input").value == "image:1x16x16x3"
    assert at.multiselect(key="um_runtimes_keras").value == ["xla", "keras"]
    notes = [w.value for w in at.warning]
    assert any(n.startswith("link: runtime='eager' is not allowed") for n in notes), notes
    at.multiselect(key="batch_presets").set_value([1])
    at.multiselect(key="threads").set_value([1])
    at.run()
    assert not at.error and not at.exception
    assert at.info[0].value.startswith("**2 configurations × 3 rounds = 6 runs**")


TRUST_REFUSED = ("trust_model_code: hand.pt is TorchScript, a program: loading it runs code "
                 "from the file; allowed: tick \"runs code from this file\" when you trust it, "
                 "or a .pt2, .onnx or .keras file")


def test_a_torchscript_file_runs_only_once_its_code_is_allowed_and_a_link_cannot_allow_it(
        models, fake, db_path, monkeypatch):
    folder, _, _ = models
    hand = folder / "hand.pt"
    hand.write_bytes(b"torchscript bytes")  # copied in by hand: uploads take no .pt
    at = page("views/run.py", db_path, monkeypatch,
              query={"source": "file", "model_file": hand.name, "input": "3,16,16",
                     "trust_model_code": "1", "um_trust_hand.pt": "true"})
    box = at.checkbox(key="um_trust_hand.pt")
    assert box.label == "runs code from this file" and box.value is False  # never linked
    assert [e.value for e in at.error] == [TRUST_REFUSED]
    assert at.button(key="launch").disabled is True
    at.multiselect(key="batch_presets").set_value([1])
    at.multiselect(key="threads").set_value([1])
    box.check().run()
    assert not at.error and not at.exception
    assert "trust" not in at.query_params and "um_trust_hand.pt" not in at.query_params
    at.button(key="launch").click().run()
    [req] = fake.submitted
    assert req.user_model == ModelSource("hand", "torchscript",
                                         (InputSpec("input", (1, 3, 16, 16)),),
                                         path=str(hand.resolve()), trust_code=True)
    assert [s.user_model.trust_code for s in req.specs()] == [True]


def test_a_remote_session_never_lets_a_files_code_run_even_an_admins(models, db_path,
                                                                     monkeypatch):
    folder, _, _ = models
    (folder / "hand.pt").write_bytes(b"torchscript bytes")
    admin = decide(env={}, settings={"admins": ["a@example.com"]}, auth_configured=True,
                   ip_address="10.0.0.7", headers={}, email="a@example.com")
    assert admin.can_write and admin.remote
    monkeypatch.setattr("dashboard.session.access", lambda: admin)
    at = page("views/run.py", db_path, monkeypatch,
              query={"source": "file", "model_file": "hand.pt", "input": "3,16,16"})
    assert not [c for c in at.checkbox if c.key.startswith("um_trust")]
    assert [e.value for e in at.error] == [
        "trust_model_code: hand.pt is TorchScript, a program: loading it runs code from the "
        "file, which only a session on the server's own machine may allow; allowed: a .pt2, "
        ".onnx or .keras file, or run this one from that machine (or the CLI with "
        "--trust-model-code)"]
    assert at.button(key="launch").disabled is True


def _keras_declaring(batch_shape) -> bytes:
    """A .keras file's description alone (its config.json): what the worker reads of what
    the file declares; the page never opens it and nothing here runs it."""
    import json
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("config.json", json.dumps({"class_name": "Functional", "config": {
            "layers": [{"class_name": "InputLayer", "name": "image", "config": {
                "name": "image", "batch_shape": batch_shape, "dtype": "float32"}}],
            "input_layers": [["image", 0, 0]]}}))
    return buf.getvalue()


def test_a_file_that_declares_its_input_needs_none_typed_and_a_typed_one_must_fit(
        models, fake, db_path, monkeypatch, worker_env):
    """Issue 26 part 8 on the Run page: a worker reads what the chosen file declares (this
    process never opens it); the form says it, the Input box may stay empty, and a typed
    input that does not fit is named before any launch."""
    net = save_upload(io.BytesIO(_keras_declaring([None, 64, 64, 3])), "net64.keras",
                      cap_bytes=10_000)
    at = page("views/run.py", db_path, monkeypatch,
              query={"source": "file", "model_file": net.name})
    assert ("the file declares 1x64x64x3 float32 \\(NHWC\\): leave Input empty to use it"
            in [c.value for c in at.caption])
    assert not at.error
    at.multiselect(key="batch_presets").set_value([1, 8])
    at.multiselect(key="threads").set_value([1])
    at.number_input(key="rounds").set_value(1)
    at.number_input(key="max_rounds").set_value(1)
    at.text_area(key="um_input").set_value("3,64,64")
    at.run()
    assert [e.value for e in at.error] == [
        "input: the file declares 1x64x64x3 float32 (NHWC); given 3,64,64 (dimension 1 of "
        "input is 3, the file's 64; dimension 3 of input is 64, the file's 3); allowed: leave "
        "the input out (the file's is used) or --input image:1x64x64x3:float32"]
    assert at.button(key="launch").disabled is True
    at.text_area(key="um_input").set_value("")
    at.run()
    assert not at.error and not at.exception
    at.button(key="launch").click().run()
    [req] = fake.submitted
    assert (req.frameworks, req.batch_sizes) == (("tensorflow",), (1, 8))
    assert req.user_model == ModelSource("net64", "keras", (InputSpec("image", (1, 64, 64, 3)),),
                                         path=str(net))
    # a file saved for batch 1 only: batch 8 is named before any launch
    one = save_upload(io.BytesIO(_keras_declaring([1, 64, 64, 3])), "one.keras",
                      cap_bytes=10_000)
    at.run()  # the folder is listed again
    at.selectbox(key="um_file").set_value(str(one))
    at.run()
    assert [e.value for e in at.error] == [
        "batch_size: the file fixes the batch dimension of image at 1 (it declares 1x64x64x3 "
        "float32 (NHWC)), so batch 8 cannot run; allowed: --batch 1"]
