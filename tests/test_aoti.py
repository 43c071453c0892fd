"""AOTInductor from Python (`aoti`) and from the LibTorch C++ runner (`libtorch_aoti`), for
real (issue 28 part 4): one torch.export + AOTInductor package per model, every batch size
of it checked against eager before it is timed; a user's torch.export .pt2 and a factory's
model on both; and what is refused, or fails, with the reason. Real workers, tiny models
(tests/model_files.py's 3x16x16 net); this process imports no framework."""

import pytest

from engine.cli import main
from engine.scenarios.inference.spec import RunSpec
from engine.core.errors import UserError
from engine.core.model_source import InputSpec, ModelSource
from engine.run.process.runner import Runner
from store.db import open_db
from tests.test_user_model_cli import PARAMS, QUICK

pytestmark = pytest.mark.slow

RUNTIMES = ("aoti", "libtorch_aoti")


@pytest.fixture
def files(model_files):  # made once a session (tests/conftest.py)
    return model_files


def stored(db):
    with open_db(db) as con:
        return con.execute(
            "SELECT model, runtime, batch_size, status, reason, prepare_s, "
            "CAST(extra->>'$.output_rel_diff' AS DOUBLE), extra->>'$.model_reused', "
            "extra->>'$.first_forward_from', peak_rss_method, params, model_format "
            "FROM runs ORDER BY model, runtime, batch_size").fetchall()


def test_a_users_pt2_and_a_factorys_model_run_on_both_after_their_output_check(
        files, db_path, worker_env, monkeypatch):
    monkeypatch.chdir(files["factory_dir"])
    # the user's torch.export program, compiled as exported (its batch axis is dynamic)
    assert main(["run", "--model-file", str(files["pt2"]), "--input-shape", "3,16,16",
                 "--runtime", *RUNTIMES, *QUICK, "--db", str(db_path)]) == 0
    # a factory's module, exported by us with a dynamic batch axis (the catalog's path,
    # which aoti shares: torch_aoti.build_package); one runtime, as each compile takes
    # tens of seconds on two cores
    assert main(["run", "--model-factory", "usermodels:image_net", "--framework", "torch",
                 "--input-shape", "3,16,16", "--runtime", "libtorch_aoti", *QUICK,
                 "--db", str(db_path)]) == 0
    got = stored(db_path)
    assert [r[:4] for r in got] == [
        (m, rt, b, "ok") for m, rts in (("image_net", ("libtorch_aoti",)), ("net", RUNTIMES))
        for rt in rts for b in (1, 3)]
    by = {(r[0], r[1], r[2]): r for r in got}
    for (model, rt, batch), r in by.items():
        prepare_s, diff, reused, first_from, method, params, fmt = r[5:]
        assert diff is not None and 0.0 <= diff <= 1e-3, (model, rt, batch, diff)
        assert prepare_s > 0.0 and params == PARAMS
        assert fmt == ("pt2" if model == "net" else "factory")
        # one package per model: batch 3 reuses the one compiled for batch 1 (dynamic batch)
        assert reused == ("true" if batch == 3 else "false"), (model, rt, batch)
        assert prepare_s == by[(model, rt, 1)][5]
        if rt == "libtorch_aoti":  # timed in C++, the runner's own memory
            assert (first_from, method) == ("the runner's first call",
                                            "VmHWM of the LibTorch runner process")
        else:
            assert first_from == "the output check's call"


def test_libtorch_aoti_without_a_built_runner_is_an_error_row_that_says_what_to_do(
        db_path, worker_env, monkeypatch, tmp_path):
    missing = tmp_path / "missing" / "libtorch_runner"
    monkeypatch.setenv("LIBTORCH_RUNNER", str(missing))
    spec = RunSpec("mobilenet_v3_small", "torch", 1, 1, image_size=32,
                   runtime="libtorch_aoti").validate()
    [rec] = Runner(timeout_s=120).run([spec], on_record=lambda r: None)
    assert (rec.status, rec.runtime) == ("error", "libtorch_aoti")
    assert rec.reason == (f"RuntimeError: the LibTorch C++ runner is not built ({missing} "
                          "missing): run scripts/build_libtorch_runner.sh, which needs g++ "
                          "(apt-get install g++)")


@pytest.mark.parametrize("kw, field, text", [
    (dict(runtime="libtorch_aoti", precision="bf16"), "precision",
     "precision: bf16 is not supported by torch libtorch_aoti: the C++ runner feeds fp32 "
     "inputs"),
    (dict(runtime="aoti", precision="bf16"), "precision",
     "precision: bf16 is not supported by torch aoti: its package is exported and compiled "
     "from the fp32 model only"),
    (dict(runtime="libtorch_aoti", replicas=2), "replicas",
     "the LibTorch runner times itself, outside the replicas' shared window"),
    (dict(runtime="aoti", device="cuda"), "device",
     "device: cuda is not available for torch aoti: AOTInductor packages are compiled and "
     "checked for the CPU here; allowed: cpu"),
])
def test_what_the_aoti_runtimes_refuse_is_named_before_anything_runs(kw, field, text):
    with pytest.raises(UserError) as err:
        RunSpec("resnet18", "torch", 1, 1, **kw).validate(cores=4)
    assert err.value.field == field and text in str(err.value)


def test_the_cpp_runner_takes_one_float32_image_input_of_a_users_pt2(tmp_path):
    path = tmp_path / "tok.pt2"
    path.write_bytes(b"never opened: the spec is checked from the path and the inputs")
    tokens = ModelSource("tok", "pt2", (InputSpec("ids", (1, 128), "int64"),), path=str(path))
    with pytest.raises(UserError) as err:
        RunSpec("tok", "torch", 1, 1, runtime="libtorch_aoti", user_model=tokens).validate(
            cores=4)
    assert err.value.field == "runtime" and str(err.value).startswith(
        "runtime: the LibTorch C++ runner feeds one float32 N,C,H,W input; this model takes ")
    # the same file on aoti, from Python, is accepted: any inputs its program declares
    spec = RunSpec("tok", "torch", 1, 1, runtime="aoti", user_model=tokens).validate(cores=4)
    assert spec.runtime == "aoti"
