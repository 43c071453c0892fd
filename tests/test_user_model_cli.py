"""A user's own model through the CLI (issue #14), for real: files made by torch and Keras
(tests/model_files.py), run by real workers on every runtime their format allows, stored
with the SHA-256 and size of what was loaded; a factory on every torch runtime, LibTorch
included; a token-ids model on int64 input; and each kind of bad input, which is refused
before anything runs or leaves exactly one failure row naming the field."""

import hashlib
import subprocess
import sys

import pytest

from engine.cli import main
from engine.core.limits import logical_cores
from store.db import open_db
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

QUICK = ["--batch", "1", "3", "--threads", "1", "--rounds", "1", "--max-rounds", "1",
         "--min-time", "0", "--min-iters", "3", "--warmup", "1", "--no-table"]
# The image net of tests/model_files.py: Conv2d(3, 4, 3) then Linear(4, 5) on 3x16x16.
PARAMS = 4 * 3 * 3 * 3 + 4 + 4 * 5 + 5
TORCH_FLOPS = 2 * (14 * 14 * 4 * 27 + 4 * 5)


@pytest.fixture
def files(model_files):  # made once a session (tests/conftest.py)
    return model_files


def rows(db, sql="SELECT model, runtime, batch_size, status, reason, model_format, "
                 "model_sha256, model_bytes, model_inputs, params, flops_per_sample, "
                 "image_size, weight_policy FROM runs ORDER BY model, runtime, batch_size"):
    with open_db(db) as con:
        return con.execute(sql).fetchall()


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_each_file_format_runs_on_its_runtimes_and_names_what_it_measured(
        files, db_path, worker_env):
    for args in (["--model-file", str(files["pt2"]), "--input-shape", "3,16,16",
                  "--runtime", "eager", "compile", "onnxruntime"],
                 ["--model-file", str(files["torchscript"]), "--name", "net_ts",
                  "--input-shape", "3,16,16", "--runtime", "torchscript", "libtorch",
                  "--trust-model-code"],
                 ["--model-file", str(files["onnx"]), "--name", "net_onnx",
                  "--input", "input:1x3x16x16:float32"],
                 ["--model-file", str(files["keras"]), "--name", "net_keras",
                  "--input-shape", "16,16,3", "--runtime", "keras", "tf_function", "xla"],
                 ["--model-file", str(files["savedmodel"]), "--name", "net_sm",
                  "--input-shape", "16,16,3", "--trust-model-code"]):
        assert main(["run", *args, *QUICK, "--db", str(db_path)]) == 0
    got = rows(db_path)
    assert [(r[0], r[1], r[2], r[3]) for r in got] == [
        (m, rt, b, "ok") for m, rts in (("net", ("compile", "eager", "onnxruntime")),
                                        ("net_keras", ("keras", "tf_function", "xla")),
                                        ("net_onnx", ("onnxruntime",)),
                                        ("net_sm", ("tf_function",)),
                                        ("net_ts", ("libtorch", "torchscript")))
        for rt in rts for b in (1, 3)]
    formats = {"net": "pt2", "net_ts": "torchscript", "net_onnx": "onnx",
               "net_keras": "keras", "net_sm": "savedmodel"}
    for model, runtime, _b, _s, _r, fmt, digest, size, inputs, params, flops, image, \
            weights in got:
        assert fmt == formats[model]
        assert image is None and weights == "as_given"
        assert params == PARAMS  # Keras counts the same 137 weights as torch
        if fmt == "savedmodel":  # a folder: its files' digests, by name
            assert len(digest) == 64 and size == sum(
                p.stat().st_size for p in files["savedmodel"].rglob("*") if p.is_file())
        else:
            path = files[fmt]
            assert (digest, size) == (sha(path), path.stat().st_size)
        if fmt in ("pt2", "torchscript", "onnx"):  # FlopCounterMode, or the ONNX graph count
            assert flops == TORCH_FLOPS, (model, runtime)
        else:  # TF's profiler also counts the bias adds and the pooling
            assert flops > TORCH_FLOPS
        assert inputs == ("input:1x16x16x3:float32" if fmt in ("keras", "savedmodel")
                          else "input:1x3x16x16:float32")
    # the user's word that a file's code may run is stored with each of its rows
    trusted = rows(db_path, "SELECT DISTINCT model, json_extract(extra, '$.trust_model_code') "
                            "FROM runs ORDER BY model")
    assert trusted == [("net", None), ("net_keras", None), ("net_onnx", None),
                       ("net_sm", "true"), ("net_ts", "true")]


def test_openvino_runs_a_users_onnx_and_pt2_file_checked_against_the_files_reference(
        files, db_path, worker_env):
    """OpenVINO reads an ONNX file and a torch.export program (issue 36), each checked
    against its format's reference before it is timed (ONNX Runtime on the same file; the
    program's module in eager), counted as the file's graph, with the hint asked stored and
    the eager weights kept for the check counted apart; and a serving batcher calls it at
    every batch size up to its max (Offline at max batch 2: each size compiled for)."""
    for args in (["--model-file", str(files["onnx"]), "--name", "net_onnx", "--runtime",
                  "openvino", "--ov-hint", "throughput"],
                 ["--model-file", str(files["pt2"]), "--input-shape", "3,16,16", "--runtime",
                  "openvino"]):
        assert main(["run", *args, *QUICK, "--db", str(db_path)]) == 0
    got = rows(db_path, "SELECT model, runtime, batch_size, status, model_format, "
                        "model_sha256, params, flops_per_sample, reference_bytes, "
                        "json_extract_string(extra, '$.ov_hint'), "
                        "json_extract_string(extra, '$.ov_inference_precision'), "
                        "CAST(json_extract(extra, '$.output_rel_diff') AS DOUBLE) "
                        "FROM runs ORDER BY model, batch_size")
    assert [r[:5] + r[6:11] for r in got] == [
        (m, "openvino", b, "ok", fmt, PARAMS, TORCH_FLOPS, 4 * PARAMS, hint, "f32")
        for m, fmt, hint in (("net", "pt2", "latency"), ("net_onnx", "onnx", "throughput"))
        for b in (1, 3)]
    assert all(r[5] == sha(files[r[4]]) and 0 <= r[11] <= 1e-3 for r in got)
    assert main(["serve", "--scenario", "offline", "--model-file", str(files["onnx"]),
                 "--name", "served", "--runtime", "openvino", "--max-batch", "2",
                 "--threads", "1", "--min-duration", "0.5", "--min-queries", "1",
                 "--db", str(db_path)]) == 0
    assert rows(db_path, "SELECT runtime, status, reason FROM runs WHERE model = 'served'") == [
        ("openvino", "ok", "")]


def test_a_factory_runs_on_every_torch_runtime_and_a_token_model_on_int64(
        files, db_path, worker_env, monkeypatch):
    monkeypatch.chdir(files["factory_dir"])  # the user's folder: where their module is
    assert main(["run", "--model-factory", "usermodels:image_net", "--framework", "torch",
                 "--input-shape", "3,16,16", "--runtime", "eager", "channels_last",
                 "torchscript", "compile", "onnxruntime", "libtorch", *QUICK,
                 "--db", str(db_path)]) == 0
    assert main(["run", "--model-factory", "usermodels:tokens", "--framework", "torch",
                 "--name", "tok", "--input", "input_ids:1x128:int64", "--runtime", "eager",
                 "onnxruntime", *QUICK, "--db", str(db_path)]) == 0
    got = rows(db_path)
    module = files["factory_dir"] / "usermodels.py"
    assert [(r[0], r[1], r[2], r[3]) for r in got] == [
        (m, rt, b, "ok") for m, rts in (
            ("image_net", ("channels_last", "compile", "eager", "libtorch", "onnxruntime",
                           "torchscript")),
            ("tok", ("eager", "onnxruntime")))
        for rt in rts for b in (1, 3)]
    for model, *_, fmt, digest, size, inputs, params, flops, _image, _w in got:
        assert (fmt, digest, size) == ("factory", sha(module), module.stat().st_size)
        if model == "tok":  # Embedding(100, 8) + Linear(8, 2): the linear is the only matmul
            assert (inputs, params, flops) == ("input_ids:1x128:int64", 818, 2 * 8 * 2)
        else:
            assert (params, flops) == (PARAMS, TORCH_FLOPS)


def test_refusals_before_anything_runs_name_the_field(files, db_path, capsys, worker_env):
    cases = [
        (["--model-file", str(files["pt2"].with_name("missing.pt2")), "--input-shape", "3,16,16"],
         "error: model_file: "),
        (["--model-file", str(files["pt2"]), "--input-shape", "3,0,16"],
         "error: input_shape: dimension 0 in '3,0,16' is not positive"),
        (["--model-file", str(files["pt2"]), "--input", "ids:1x-4:int64"],
         "error: input: dimension -4"),
        (["--model-file", str(files["onnx"]), "--input-shape", "3,16,16", "--runtime", "eager"],
         "error: runtime: torch eager cannot run a onnx model"),
        (["--model-file", str(files["keras"]), "--input-shape", "16,16,3", "--framework",
          "torch"], "error: framework: a keras model runs in tensorflow"),
        (["--model-factory", "usermodels:tokens", "--framework", "torch", "--input",
          "ids:1x8:int64", "--runtime", "libtorch"], "error: runtime: the LibTorch C++ runner"),
        (["--model-factory", "usermodels:tokens", "--input", "ids:1x8:int64"],
         "error: framework: a factory's model belongs to one framework"),
        (["--model-file", str(files["pt2"]), "--input-shape", "3,16,16", "--input",
          "x:1x3x16x16"], "error: input: describe the model's input"),
        # a file that declares nothing needs its input given
        (["--model-file", str(files["torchscript"]), "--trust-model-code"],
         "error: input: required for net.pt, a TorchScript file, which declares no inputs we "
         "read; allowed: --input-shape C,H,W or one or more --input NAME:DIMS[:DTYPE] (on the "
         "Run page: the Input box)"),
        (["--model-file", str(files["savedmodel"]), "--trust-model-code"],
         "error: input: required for net_savedmodel, a SavedModel, which declares no inputs"),
        (["--model-factory", "usermodels:image_net", "--framework", "torch"],
         "error: input: required for "),
        # an input that does not fit what the file declares (a worker reads it as data) is
        # refused before any run, with what the file declares and what to give instead
        (["--model-file", str(files["keras"]), "--input-shape", "3,16,16"],
         "error: input: the file declares 1x16x16x3 float32 (NHWC); given 3,16,16 (dimension "
         "1 of input is 3, the file's 16; dimension 3 of input is 16, the file's 3); allowed: "
         "leave the input out (the file's is used) or --input image:1x16x16x3:float32\n"),
        (["--model-file", str(files["keras_sequential"]), "--input", "input:1x16x16x3:float32",
          "--input", "mask:1x16:bool"],
         "error: input: the file declares 1x16x16x3 float32 (NHWC); given "
         "input:1x16x16x3:float32 mask:1x16:bool (2 input(s) given, 1 declared); allowed: "
         "leave the input out (the file's is used) or --input "
         "input_layer:1x16x16x3:float32\n"),
        (["--model-file", str(files["onnx"]), "--input", "input:1x3x16x16:int64"],
         "error: input: the file declares 1x3x16x16 float32 (NCHW); given "
         "input:1x3x16x16:int64 (input is int64, the file's float32); allowed: leave the "
         "input out (the file's is used) or --input-shape 3,16,16\n"),
        (["--model-file", str(files["pt2"]), "--input-shape", "4,16,16"],
         "error: input: the file declares 1x3x16x16 float32 (NCHW); given 4,16,16 (dimension "
         "1 of input is 4, the file's 3); allowed: leave the input out (the file's is used) "
         "or --input x:1x3x16x16:float32\n"),
        (["--model-file", str(files["pt2"]), "--input-shape", "3,16,16", "--name", "resnet18"],
         "error: model_name: 'resnet18' is a catalog model's name"),
        (["--model", "resnet18", "--model-file", str(files["pt2"]), "--input-shape", "3,16,16"],
         "error: model: --model names catalog models"),
        (["--model-file", str(files["pt2"].with_suffix(".h5")), "--input-shape", "3,16,16"],
         "error: model_file: net.h5 is refused: legacy HDF5 Keras files bypass safe_mode"),
        # a program: loading it runs code from the file, so only with the user's word
        (["--model-file", str(files["torchscript"]), "--input-shape", "3,16,16"],
         "error: trust_model_code: net.pt is TorchScript, a program: loading it runs code "
         "from the file; allowed: --trust-model-code (on the Run page: \"runs code from this "
         "file\") when you trust this file, or a format that loads without running code "
         "(.pt2, .onnx, .keras)"),
        (["--model-file", str(files["torchscript"]), "--input-shape", "3,16,16", "--runtime",
          "libtorch"], "error: trust_model_code: net.pt is TorchScript, a program"),
        (["--model-file", str(files["savedmodel"]), "--input-shape", "16,16,3"],
         "error: trust_model_code: net_savedmodel is a SavedModel, a program"),
        (["--model", "resnet18", "--trust-model-code"],
         "error: model_file: --input-shape, --input, --name and --trust-model-code describe "
         "your own model"),
    ]
    files["pt2"].with_suffix(".h5").write_bytes(b"\x89HDF")
    for args, start in cases:
        assert main(["run", *args, *QUICK, "--db", str(db_path)]) == 2, args
        err = capsys.readouterr().err
        assert (err == start) if start.endswith("\n") else err.startswith(start), (args, err)
    assert not db_path.exists()  # nothing ran, nothing was written


EVIL = r'''
import sys, torch
d = sys.argv[1]
class Evil:
    def __reduce__(self):
        return (open, (d + "/pwned", "w"))
torch.save({"w": torch.ones(1), "evil": Evil()}, d + "/evil.pt")
'''


def test_bad_models_leave_exactly_one_failure_row_each(files, db_path, worker_env,
                                                        tmp_path, monkeypatch):
    subprocess.run([sys.executable, "-c", EVIL, str(tmp_path)], cwd=ROOT, check=True,
                   timeout=300)
    assert not (tmp_path / "pwned").exists()  # saving does not run it; loading must not
    (tmp_path / "fake.onnx").write_text("not an onnx file")
    monkeypatch.chdir(files["factory_dir"])
    one = ["--batch", "1", "--threads", "1", "--rounds", "1", "--max-rounds", "1",
           "--min-time", "0", "--min-iters", "3", "--no-table", "--db", str(db_path)]
    for args in (["--model-file", str(tmp_path / "evil.pt"), "--input-shape", "3,16,16",
                  "--trust-model-code"],  # trusted as TorchScript; a pickle, never run
                 ["--model-file", str(tmp_path / "fake.onnx"), "--input-shape", "3,16,16"],
                 ["--model-factory", "usermodels:broken", "--framework", "torch",
                  "--input-shape", "3,16,16"],
                 ["--model-factory", "usermodels:not_a_model", "--framework", "torch",
                  "--input-shape", "3,16,16"],
                 ["--model-factory", "usermodels:image_net", "--framework", "tensorflow",
                  "--name", "wrong_fw", "--input-shape", "3,16,16"]):
        assert main(["run", *args, *one]) == 1  # each run fails: not ok
    got = rows(db_path, "SELECT model, status, model_sha256, reason FROM runs ORDER BY model")
    # a file is hashed before it is loaded: its failure row names the bytes it failed on; a
    # factory that fails to build one has no module digest to give
    assert [r[:3] for r in got] == [
        ("broken", "error", None), ("evil", "error", sha(tmp_path / "evil.pt")),
        ("fake", "error", sha(tmp_path / "fake.onnx")),
        ("not_a_model", "error", None), ("wrong_fw", "error", None)]
    reasons = {r[0]: r[3] for r in got}
    assert reasons["evil"].startswith("ModelFileError: model_file: evil.pt was refused: it "
                                      "is not TorchScript")
    assert not (tmp_path / "pwned").exists()  # the pickle's code never ran
    assert reasons["fake"].startswith("ModelFileError: model_file: fake.onnx is not a "
                                      "runnable ONNX model")
    assert reasons["broken"] == ("ModelFileError: model_factory: usermodels:broken raised "
                                 "ValueError: no weights here")
    assert reasons["not_a_model"] == ("ModelFileError: model_factory: usermodels:not_a_model "
                                      "returned int, not a torch.nn.Module or a Keras model")
    assert reasons["wrong_fw"].startswith("ModelFileError: model_factory: usermodels:image_net")
    # an input that does not fit what the file declares is refused before any run now
    # (test_refusals_before_anything_runs_name_the_field); the worker's own check of it
    # stays, tested in tests/test_model_source.py
    assert all("\n" not in r for r in reasons.values())  # one line each
    # plain text: no terminal escape codes (Keras writes a layer's error in bold:
    # tests/test_user_models.py checks it does, test_model_source.py that the row has none)
    assert all("\x1b" not in r and r.isprintable() for r in reasons.values()), reasons


def test_a_file_that_declares_its_inputs_runs_without_one_and_a_given_one_must_fit(
        files, db_path, worker_env, capsys):
    """Issue 26 part 8: a worker reads what a .keras or .onnx file declares before anything
    is launched; no input given, the declared one is used for every batch size (the batch
    axis the file leaves open takes each); one given that does not fit is refused, exit 2,
    no run and no row, as every bad input before a run is."""
    once = ["--threads", "1", "--rounds", "1", "--max-rounds", "1", "--min-time", "0",
            "--min-iters", "3", "--warmup", "1", "--no-table", "--db", str(db_path)]
    net64 = ["--model-file", str(files["keras64"]), "--name", "k64"]
    assert main(["run", *net64, "--input-shape", "3,64,64", "--batch", "1", *once]) == 2
    assert capsys.readouterr().err == (
        "error: input: the file declares 1x64x64x3 float32 (NHWC); given 3,64,64 (dimension 1 "
        "of input is 3, the file's 64; dimension 3 of input is 64, the file's 3); allowed: "
        "leave the input out (the file's is used) or --input image:1x64x64x3:float32\n")
    assert not db_path.exists()  # refused before any run: nothing was written
    assert main(["run", *net64, "--batch", "1", *once]) == 0
    assert main(["run", "--model-file", str(files["onnx"]), "--name", "onnx_open",
                 "--batch", "1", "4", *once]) == 0
    assert rows(db_path, "SELECT model, runtime, batch_size, status, model_inputs, "
                         "model_sha256 FROM runs ORDER BY model, batch_size") == [
        ("k64", "tf_function", 1, "ok", "image:1x64x64x3:float32", sha(files["keras64"])),
        ("onnx_open", "onnxruntime", 1, "ok", "input:1x3x16x16:float32", sha(files["onnx"])),
        ("onnx_open", "onnxruntime", 4, "ok", "input:1x3x16x16:float32", sha(files["onnx"]))]
    # a TorchScript file declares nothing: its input is still required, by name
    assert main(["run", "--model-file", str(files["torchscript"]), "--trust-model-code",
                 "--batch", "1", *once]) == 2
    assert capsys.readouterr().err.startswith(
        "error: input: required for net.pt, a TorchScript file, which declares no inputs we "
        "read; allowed: --input-shape C,H,W or one or more --input NAME:DIMS[:DTYPE]")
    assert len(rows(db_path, "SELECT run_id FROM runs")) == 3  # no row for a refusal


def _keras_fixed_at_1(folder) -> str:
    """A .keras file's description alone, declaring its batch axis fixed at 1: what the
    worker reads of what the file declares (nothing here runs it)."""
    import json
    import zipfile

    path = folder / "one.keras"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("config.json", json.dumps({"class_name": "Functional", "config": {
            "layers": [{"class_name": "InputLayer", "name": "image", "config": {
                "name": "image", "batch_shape": [1, 16, 16, 3], "dtype": "float32"}}],
            "input_layers": [["image", 0, 0]]}}))
    return str(path)


def test_a_file_fixed_at_batch_1_is_refused_a_batcher_over_1_before_anything_runs(
        tmp_path, db_path, capsys, worker_env):
    one = _keras_fixed_at_1(tmp_path)
    assert main(["serve", "--scenario", "server", "--model-file", one, "--target-qps", "10",
                 "--max-batch", "4", "--db", str(db_path)]) == 2
    assert capsys.readouterr().err == (
        "error: batch_size: the file fixes the batch dimension of image at 1 (it declares "
        "1x16x16x3 float32 (NHWC)), so batch 2, 3, 4 cannot run; allowed: a file with an "
        "open batch axis, or one fixed at 1 with --max-batch 1 (a Server or Offline batcher "
        "calls every batch from 1 to its max batch; this file takes only 1)\n")
    assert main(["tune", "--model-file", one, "--bound-ms", "50", "--batches", "1", "2",
                 "--db", str(db_path)]) == 2
    assert capsys.readouterr().err.endswith(
        "so batch 2 cannot run; allowed: a file with an open batch axis, or one fixed at 1 "
        "with --batches 1 (a Server or Offline batcher calls every batch from 1 to its max "
        "batch; this file takes only 1)\n")
    assert not db_path.exists()


def test_a_user_file_is_tuned_on_its_format_s_runtimes_with_its_bytes_named(
        files, db_path, capsys, worker_env):
    """The tuner on a user's ONNX file: the runtimes its format runs on are searched (ONNX
    Runtime, the default, and OpenVINO) unless named, here ONNX Runtime; every probe names
    the file's bytes; nothing is read from the store in its place (a name is not the
    bytes)."""
    argv = ["tune", "--model-file", str(files["onnx"]), "--bound-ms", "50", "--batches",
            "1", "2", "--threads", "1", "--replicas", "1", "--probe-s", "0.05",
            "--search-queries", "500", "--max-probes", "2",
            "--start-qps", "500", "--runtime", "onnxruntime", "--db", str(db_path)]
    code = main(argv)
    out = capsys.readouterr().out
    assert code in (0, 1), out
    found = rows(db_path, "SELECT kind, model, runtime, model_format, model_sha256, "
                          "batch_size, intra_threads FROM runs ORDER BY started_at")
    assert {(k, m, r, f, s) for k, m, r, f, s, _, _ in found} == {
        ("inference", "net", "onnxruntime", "onnx", sha(files["onnx"])),
        ("serve", "net", "onnxruntime", "onnx", sha(files["onnx"]))}
    # one closed-loop probe each: batch 1 and 2 at 1 thread, and the default (batch 1,
    # every thread), measured afresh
    assert sorted((b, t) for k, *_, b, t in found if k == "inference") == sorted(
        {(1, 1), (2, 1), (1, logical_cores())})
    assert "tune " in out and ": net, p99 under 50 ms" in out
    assert "runtimes onnxruntime x precision fp32 x max batch 1 2" in out
