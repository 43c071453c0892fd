"""Training and data-loading specs, data, scoring, storage and tables: no framework in this
process. The data-loading runs here use NumPy-only implementations (real subprocesses,
real files); the torch and TensorFlow ones are in test_workloads_slow.py."""

from dataclasses import replace

import numpy as np
import pytest

from engine.cli import main
from engine.worker.dataload.images import OutputMismatch, check_batch, expected_batch, generate_dataset
from engine.worker.training.datasets import epoch_order, load_data
from engine.core.errors import UserError
from engine.core.record import RunRecord
from engine.present.tables import load_table, train_table
from engine.run.process.records import config_extra
from engine.scenarios.dataload.spec import LoadSpec, expand_load
from engine.scenarios.training.spec import expand_train
from engine.worker.training.train_loop import cross_entropy
from store.db import open_db
from store.queries import load_summary, train_runs
from store.runs import profile_ops, profile_trace, save_record, train_epochs, train_steps
from seeds.records import SYSTEM, base_fields, train_record as _train_record, train_spec


@pytest.mark.parametrize("kw, field, text", [
    ({"lr": 0.0}, "lr", "allowed: number 1e-08..10"),
    ({"momentum": 1.0}, "momentum", "allowed: number 0..0.999"),
    ({"dataset": "mnist"}, "dataset", "allowed: digits, synthetic"),
    ({"image_size": 64}, "image_size", "allowed: 32 (use --dataset synthetic for 64 px)"),
    ({"batch_size": 2000}, "batch_size", "allowed: integer 1..1024"),
    ({"dataset": "synthetic", "synthetic_samples": 100, "batch_size": 200}, "batch_size",
     "larger than the 100 training images"),
    ({"framework": "selftest"}, "framework", "allowed: torch, tensorflow"),
    ({"epochs": 0}, "epochs", "allowed: integer 1..1000"),
    ({"profile_steps": 51}, "profile_steps", "allowed: integer 0..50"),
    ({"runtime": "xla"}, "runtime", "tensorflow does not train with 'xla'; allowed: "
                                    "tf_function"),
    ({"runtime": "libtorch", "profile_steps": 2}, "profile_steps",
     "the LibTorch trainer runs outside torch.profiler's sight"),
])
def test_train_spec_refuses_bad_input_naming_field_and_range(kw, field, text):
    kw = {"framework": "tensorflow", **kw} if kw.get("runtime") == "xla" else kw
    with pytest.raises(UserError) as err:
        train_spec(**kw)
    assert err.value.field == field and text in str(err.value)


def test_train_spec_resolves_defaults_and_counts_steps():
    s = train_spec()
    assert (s.runtime, s.image_size, s.steps_in_epoch(), s.policy.warmup_iters) == (
        "eager", 32, 1437 // 32, 5)
    assert train_spec(steps_per_epoch=3).steps_in_epoch() == 3
    syn = train_spec(dataset="synthetic", image_size=64, synthetic_samples=100, batch_size=16)
    assert (syn.image_size, syn.steps_in_epoch()) == (64, 6)
    specs = expand_train(["resnet18"], ["torch", "tensorflow"], [8, 16], [1], epochs=2)
    assert [(s.framework, s.runtime, s.batch_size) for s in specs] == [
        ("torch", "eager", 8), ("torch", "eager", 16),
        ("tensorflow", "tf_function", 8), ("tensorflow", "tf_function", 16)]
    specs = expand_train(["resnet18"], ["torch", "tensorflow"], [8], [1],
                         runtimes=["eager", "libtorch", "tf_function"])
    assert [(s.framework, s.runtime) for s in specs] == [
        ("torch", "eager"), ("torch", "libtorch"), ("tensorflow", "tf_function")]
    with pytest.raises(UserError) as err:
        expand_train(["resnet18"], ["tensorflow"], [8], [1], runtimes=["libtorch"])
    assert err.value.field == "runtime" and "allowed: tensorflow: tf_function" in str(err.value)


def test_digits_split_is_fixed_and_orders_are_shared_by_seed_and_epoch():
    d = load_data(train_spec())
    assert d.x_train.shape == (1437, 32, 32, 3) and d.x_test.shape == (360, 32, 32, 3)
    assert d.x_train.dtype == np.float32 and d.y_train.dtype == np.int64
    assert abs(float(d.x_train.mean())) < 1e-4 and abs(float(d.x_train.std()) - 1) < 1e-3
    assert np.bincount(d.y_test).tolist() == [36, 36, 35, 37, 36, 37, 36, 36, 35, 36]
    again = load_data(train_spec(framework="tensorflow"))
    assert np.array_equal(d.x_train, again.x_train) and np.array_equal(d.y_test, again.y_test)
    o1, o1b, o2 = epoch_order(1437, 1, 0), epoch_order(1437, 1, 0), epoch_order(1437, 2, 0)
    assert np.array_equal(o1, o1b) and not np.array_equal(o1, o2)
    assert sorted(o1.tolist()) == list(range(1437))


def test_cross_entropy_matches_the_definition():
    logits = np.array([[2.0, 0.0, 0.0], [0.0, 0.0, 5.0]], dtype=np.float32)
    loss, correct = cross_entropy(logits, np.array([0, 1]))
    expected = -np.log(np.exp(2) / (np.exp(2) + 2)) - np.log(1 / (2 + np.exp(5)))
    assert loss == pytest.approx(expected, rel=1e-9) and correct == 1


def test_training_record_derives_throughput_from_measured_steps_and_round_trips(db_path):
    rec = _train_record("t-torch", "torch", [1.6, 1.0], [0.5, 0.8],
                        profile_ops=[{"op": "aten::convolution_backward", "device": "cpu",
                                      "calls": 40, "self_ms": 120.5, "total_ms": 130.0}],
                        profile_step_s=0.2)
    # The 6 measured steps (32 samples each) over their 0.600015 s: the 2 warm-up steps
    # (0.9 s and 0.15 s, TensorFlow's trace among them) are reported apart, not averaged in.
    assert rec.throughput == pytest.approx(32 * 6 / 0.600015)
    assert (rec.warmup_s, rec.first_forward_s) == (1.05, 0.9)
    assert rec.extra["lr"] == 0.01 and rec.extra["steps_per_epoch"] == 4
    assert rec.extra["feed_sha256"] == "abc" and rec.status == "ok"
    tf = _train_record("t-tf", "tensorflow", [3.0, 2.0], [0.3, 0.7])
    with open_db(db_path) as con:
        save_record(con, replace(rec, sweep_id="sw", trace_gz=b"\x1f\x8bfake"), SYSTEM)
        save_record(con, replace(tf, sweep_id="sw"), SYSTEM)
        ep = train_epochs(con, ["t-torch", "t-tf"])
        steps = train_steps(con, ["t-torch"])
        ops = profile_ops(con, "t-torch")
        trace = profile_trace(con, "t-torch")
        runs = train_runs(con, "sw")
        no_info = con.execute("SELECT count(*) FROM model_info").fetchall()[0][0]
    assert ep[["framework", "epoch", "wall_s", "test_acc"]].values.tolist() == [
        ["tensorflow", 1, 3.0, 0.3], ["tensorflow", 2, 2.0, 0.7],
        ["torch", 1, 1.6, 0.5], ["torch", 2, 1.0, 0.8]]
    assert steps.step.tolist() == list(range(8))
    assert steps.loss.tolist() == pytest.approx([2.3 - 0.1 * i for i in range(8)])
    assert ops[["rank", "op", "calls", "self_ms"]].values.tolist() == [
        [1, "aten::convolution_backward", 40, 120.5]]
    assert trace == b"\x1f\x8bfake"
    assert runs.set_index("framework").final_test_acc.to_dict() == {"tensorflow": 0.7,
                                                                    "torch": 0.8}
    assert no_info == 0  # a 10-class training model is not the catalog's model
    table = train_table([rec, tf])
    assert "1.60 / 1.00" in table and "320.0" in table and "1.700 / 80.0%" in table


def test_failed_training_row_keeps_its_configuration(db_path):
    s = train_spec(framework="tensorflow", lr=0.5)
    rec = RunRecord(**{**base_fields(s, "t-fail"), "kind": "train", "dataset": "digits",
                       "extra": config_extra(s)}, status="invalid",
                    reason="Diverged: training diverged: the loss became nan at step 3")
    with open_db(db_path) as con:
        save_record(con, rec, SYSTEM)
        row = con.execute("SELECT kind, status, reason, extra->>'lr', dataset FROM runs"
                          ).fetchall()
    assert row == [("train", "invalid", rec.reason, "0.5", "digits")]


# -- data loading -----------------------------------------------------------------------------

@pytest.mark.parametrize("kw, field, text", [
    ({"fmt": "tiff", "decoder": "pillow"}, "decoder", "pillow cannot decode 4-band 16-bit TIFF"),
    ({"fmt": "tiff", "decoder": "tf_io", "normalize": "tf", "pipeline": "tf_data"}, "decoder",
     "tf.io has no TIFF decoder"),
    ({"workers": 2}, "workers", "allowed: 0 (use torch_dataloader or tf_data"),
    ({"fmt": "webp"}, "format", "allowed: tiff, png, jpeg"),
    ({"batch_size": 300}, "batch_size", "larger than the 256 images"),
])
def test_load_spec_refuses_bad_input_naming_field(kw, field, text):
    base = dict(fmt="png", decoder="opencv", normalize="numpy", pipeline="loop", batch_size=8)
    with pytest.raises(UserError) as err:
        LoadSpec(**{**base, **kw}).validate(cores=4)
    assert err.value.field == field and text in str(err.value)


def test_expand_load_keeps_runnable_combinations_and_says_why_others_are_skipped():
    specs, skipped = expand_load(["png", "tiff"], ["pillow", "tf_io"], ["numpy", "tf"],
                                 ["loop", "tf_data"], [8], [0, 2], [1])
    got = sorted((s.fmt, s.runtime, s.workers, s.framework) for s in specs)
    # tiff: neither pillow nor tf.io reads it; the loop runs at 0 workers only
    assert got == [("png", "loop:pillow+numpy", 0, "numpy"),
                   ("png", "tf_data:tf_io+tf", 0, "tensorflow"),
                   ("png", "tf_data:tf_io+tf", 2, "tensorflow")]
    assert any(line.startswith("loop:pillow+numpy on tiff: pillow cannot decode")
               for line in skipped)
    with pytest.raises(UserError) as err:
        expand_load(["tiff"], ["pillow"], ["numpy"], ["loop"], [8], [0], [1])
    assert err.value.field == "decoder" and "no combination" in str(err.value)
    with pytest.raises(UserError) as err:  # an unknown name is refused, not skipped
        expand_load(["png"], ["pillow", "rasterio"], ["numpy"], ["loop"], [8], [0], [1])
    assert err.value.field == "decoder"
    assert str(err.value) == ("decoder: 'rasterio' is not supported; allowed: pillow, opencv, "
                              "skimage, tf_io")


def test_generated_images_are_deterministic_and_a_band_swap_is_caught(tmp_path):
    a = generate_dataset(tmp_path, "png", 8, 32, seed=3)
    b = generate_dataset(tmp_path, "png", 8, 32, seed=3)  # idempotent: same folder, kept
    assert a == b and (a / "manifest.json").exists()
    assert sorted(p.name for p in a.glob("img_*")) == [f"img_{i:05d}.png" for i in range(8)]
    good = expected_batch("png", 32, 3, range(4))
    assert check_batch(good, "png", 32, 3, range(4)) == 0.0
    with pytest.raises(OutputMismatch, match="band order swapped"):
        check_batch(good[:, ::-1].copy(), "png", 32, 3, range(4), decoder="opencv")


def test_dataload_cli_runs_each_numpy_implementation_in_a_real_worker(db_path, worker_env,
                                                                      tmp_path, monkeypatch,
                                                                      capsys):
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "sets"))
    rc = main(["dataload", "--format", "png", "jpeg", "tiff", "--decoder", "pillow", "opencv",
               "skimage", "--normalize", "numpy", "--pipeline", "loop", "--batch", "4",
               "--count", "16", "--size", "32", "--min-time", "0.05", "--min-iters", "5",
               "--db", str(db_path)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "skipped 1: pillow cannot decode 4-band 16-bit TIFF" in out
    assert "ms per batch, median (images/s)" in out
    with open_db(db_path) as con:
        rows = con.execute(
            "SELECT model, runtime, status, kind, workers, iterations >= 5, "
            "(extra->>'check_error')::DOUBLE, dataset FROM runs ORDER BY model, runtime"
        ).fetchall()
        sorted_throughputs = [t for (t,) in con.execute(
            "SELECT throughput FROM runs ORDER BY model, runtime").fetchall()]
        summary = load_summary(con, None)
    assert [(r[0], r[1]) for r in rows] == [
        ("jpeg", "loop:opencv+numpy"), ("jpeg", "loop:pillow+numpy"),
        ("jpeg", "loop:skimage+numpy"), ("png", "loop:opencv+numpy"),
        ("png", "loop:pillow+numpy"), ("png", "loop:skimage+numpy"),
        ("tiff", "loop:opencv+numpy"), ("tiff", "loop:skimage+numpy")]
    for fmt, _, status, kind, workers, enough, err, dataset in rows:
        assert status == "ok" and kind == "dataload" and workers == 0
        assert enough and dataset == f"{fmt}-16x32px-seed0"
        assert err < 1e-5 if fmt != "jpeg" else err < 4.0  # checked against ground truth
    # One run per configuration: its images/s is the stored throughput (images over the
    # total measured time), batches/s that over the batch size.
    assert summary.images_per_s.round(6).tolist() == [
        round(t, 6) for t in sorted_throughputs]
    assert (summary.batches_per_s * summary.batch_size).round(6).tolist() == \
        summary.images_per_s.round(6).tolist()


def test_load_table_puts_implementations_in_columns():
    def rec(runtime, ms, workers=0):
        return RunRecord(run_id=runtime, sweep_id=None, model="png", framework="numpy",
                         runtime=runtime, batch_size=8, intra_threads=1, inter_threads=1,
                         precision=None, image_size=64, device="cpu", weight_policy=None,
                         warmup_iters=1, min_time_s=1, min_iters=1, max_time_s=1,
                         status="ok", median_ms=ms, throughput=8000 / ms, workers=workers)
    text = load_table([rec("loop:pillow+numpy", 4.0), rec("loop:opencv+numpy", 2.0)])
    lines = text.splitlines()
    assert lines[1].split() == ["format", "batch", "workers", "threads", "loop:pillow+numpy",
                                "loop:opencv+numpy"]
    assert lines[3].split() == ["png", "8", "0", "1", "4.00", "(2,000/s)", "2.00",
                                "(4,000/s)"]


@pytest.mark.parametrize("fmt", ["json", "csv", "parquet"])
def test_training_epochs_steps_and_operators_survive_export_and_import(fmt, tmp_path):
    from store.ingest import export_runs, import_file
    from seeds.records import seed_workloads
    from tests.conftest import seed_once

    src, dst = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    seed_once(seed_workloads, src)
    out = tmp_path / f"runs.{fmt}"
    with open_db(src) as con:
        n = export_runs(con, out, fmt, sweep_id="sweep-train")
        want = (train_epochs(con, ["t-torch"]).drop(columns=["sweep_id"]),
                train_steps(con, ["t-torch"]), profile_ops(con, "t-torch"))
    assert n == 2
    with open_db(dst) as con:
        added, skipped, _ = import_file(con, out)
        got = (train_epochs(con, ["t-torch"]).drop(columns=["sweep_id"]),
               train_steps(con, ["t-torch"]), profile_ops(con, "t-torch"))
        kinds = con.execute("SELECT DISTINCT kind FROM runs").fetchall()
    assert (added, skipped, kinds) == (2, 0, [("train",)])
    for a, b in zip(want, got):
        assert a.equals(b), (a, b)


_BN_PROBE = """
import json, torch, torchvision
from engine.scenarios.training.spec import TrainSpec
from engine.worker.backends.train_tf import Trainer
out = {}
for name in ("resnet18", "resnet50", "mobilenet_v3_small"):
    tv = getattr(torchvision.models, name)(weights=None)
    t = Trainer()
    t.load(TrainSpec(name, "tensorflow", 8, 1).validate(cores=1), 10)
    bns = [l for l in t.model._flatten_layers() if type(l).__name__ == "BatchNormalization"]
    out[name] = [sorted({m.momentum for m in tv.modules()
                         if isinstance(m, torch.nn.BatchNorm2d)}),
                 sorted({round(l.momentum, 12) for l in bns}), len(bns) > 0]
    t.unload()
print(json.dumps(out))
"""


def test_keras_training_uses_torchvisions_batchnorm_momentum(worker_env):
    """Keras' defaults (ResNet50 0.99, MobileNetV3 0.999) would track batch statistics ten
    times slower than torchvision's (0.1, 0.01 in torch's terms): the TF trainer sets
    1 - torch's on every BatchNormalization layer, and the catalog's figure is torch's own.
    In a subprocess: TensorFlow and torch stay out of the test process."""
    import json
    import subprocess
    import sys

    from engine.core.catalog import CATALOG
    out = subprocess.run([sys.executable, "-c", _BN_PROBE], capture_output=True, text=True,
                         check=True, timeout=600).stdout
    assert json.loads(out.splitlines()[-1]) == {
        "resnet18": [[0.1], [0.9], True], "resnet50": [[0.1], [0.9], True],
        "mobilenet_v3_small": [[0.01], [0.99], True]}
    assert [CATALOG[m].torch_bn_momentum for m in ("resnet50", "mobilenet_v3_small")] == \
        [0.1, 0.01]
