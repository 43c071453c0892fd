"""Real tiny training, data-loading and profiled runs in torch and TensorFlow workers (this
pytest process imports neither framework)."""

import gzip
import json

import pytest

from engine.cli import main
from store.db import open_db

pytestmark = pytest.mark.slow


def test_tiny_training_in_both_frameworks_lands_rows_with_falling_loss(db_path, worker_env,
                                                                      capsys):
    rc = main(["train", "--model", "resnet18", "--framework", "torch", "tensorflow",
               "--epochs", "2", "--steps", "6", "--batch", "16", "--threads", "1",
               "--dataset", "digits", "--warmup-steps", "2", "--profile", "2",
               "--db", str(db_path)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "training 2 configurations on digits: 2 epochs of 6 steps" in out
    assert "s/epoch (1st / rest)" in out and "2 training runs stored" in out
    with open_db(db_path) as con:
        runs = con.execute(
            "SELECT run_id, framework, runtime, status, kind, dataset, iterations, "
            "extra->>'feed_sha256', throughput FROM runs ORDER BY framework").fetchall()
        epochs = {fw: con.execute(
            "SELECT epoch, steps, samples, wall_s, samples_per_s, train_loss, test_acc "
            "FROM train_epochs JOIN runs USING (run_id) WHERE framework = ? ORDER BY epoch",
            [fw]).fetchall() for fw in ("torch", "tensorflow")}
        losses = {fw: [r[0] for r in con.execute(
            "SELECT loss FROM train_steps JOIN runs USING (run_id) WHERE framework = ? "
            "ORDER BY step", [fw]).fetchall()] for fw in ("torch", "tensorflow")}
        ops = dict(con.execute("SELECT r.framework, count(*) FROM profile_ops p JOIN runs r "
                               "USING (run_id) GROUP BY 1").fetchall())
        traces = con.execute("SELECT count(*) FROM profile_traces").fetchall()[0][0]
    assert [(r[1], r[2], r[4], r[5]) for r in runs] == [
        ("tensorflow", "tf_function", "train", "digits"), ("torch", "eager", "train", "digits")]
    for _, fw, _, status, _, _, iterations, _, throughput in runs:
        assert status == "ok", status  # invalid only for a broken rule (a diverged loss)
        assert iterations == 12 - 2 and throughput > 0
        assert [e[:3] for e in epochs[fw]] == [(1, 6, 96), (2, 6, 96)]
        assert all(e[3] > 0 and e[4] == pytest.approx(96 / e[3]) for e in epochs[fw])
        assert all(0.0 <= e[6] <= 1.0 for e in epochs[fw])
        loss = losses[fw]
        assert len(loss) == 12
        # From about ln(10) = 2.3 at random initialisation; a few SGD steps on the digits
        # bring the training loss down (seeded, the same batches in both frameworks).
        assert sum(loss[-4:]) / 4 < loss[0], (fw, loss)
        assert epochs[fw][1][5] < epochs[fw][0][5] + 0.5, (fw, epochs[fw])
    assert runs[0][7] == runs[1][7]  # the same images, labels and order fed to both
    assert ops["torch"] > 0 and ops["tensorflow"] > 0 and traces == 2


def test_dataload_with_torch_and_tensorflow_pipelines(db_path, worker_env, tmp_path,
                                                      monkeypatch, capsys):
    monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "sets"))
    rc = main(["dataload", "--format", "png", "jpeg", "--decoder", "opencv", "tf_io",
               "--normalize", "torch", "tf", "--pipeline", "loop", "torch_dataloader",
               "tf_data", "--batch", "4", "--workers", "0", "1", "--count", "16", "--size",
               "32", "--min-time", "0.05", "--min-iters", "5", "--db", str(db_path)])
    assert rc == 0
    with open_db(db_path) as con:
        rows = con.execute(
            "SELECT model, runtime, workers, framework, status, "
            "(extra->>'check_error')::DOUBLE, (extra->>'batches_per_sample')::INTEGER "
            "FROM runs ORDER BY model, runtime, workers").fetchall()
    assert [r[:4] for r in rows] == [
        (fmt, impl, w, fw) for fmt in ("jpeg", "png") for impl, w, fw in (
            ("loop:opencv+torch", 0, "torch"),
            ("tf_data:tf_io+tf", 0, "tensorflow"), ("tf_data:tf_io+tf", 1, "tensorflow"),
            ("torch_dataloader:opencv+torch", 0, "torch"),
            ("torch_dataloader:opencv+torch", 1, "torch"))]
    for fmt, _, workers, _, status, err, per_sample in rows:
        assert status == "ok", status
        assert err < (4.0 if fmt == "jpeg" else 1e-5)
        assert per_sample == max(1, 2 * workers)


def test_profiled_run_has_an_operator_table_and_timings_on_the_unprofiled_scale(
        db_path, worker_env, tmp_path):
    common = ["run", "--model", "mobilenet_v3_small", "--framework", "torch", "tensorflow",
              "--batch", "1", "--threads", "1", "--image-size", "64", "--rounds", "1",
              "--min-time", "0.3", "--min-iters", "10", "--warmup", "3", "--no-table",
              "--db", str(db_path)]
    assert main(common) == 0
    assert main(common + ["--profile", "3"]) == 0
    with open_db(db_path) as con:
        runs = con.execute(
            "SELECT framework, (extra->>'profile_steps') IS NOT NULL AS profiled, median_ms, "
            "run_id, (extra->>'profile_step_ms')::DOUBLE FROM runs ORDER BY started_at"
        ).fetchall()
        profiled = {fw: rid for fw, p, _, rid, _ in runs if p}
        ops = {fw: con.execute("SELECT op, calls, self_ms, total_ms FROM profile_ops "
                               "WHERE run_id = ? ORDER BY rank", [rid]).fetchall()
               for fw, rid in profiled.items()}
        trace = con.execute("SELECT data FROM profile_traces WHERE run_id = ?",
                            [profiled["torch"]]).fetchall()[0][0]
    median = {(fw, p): m for fw, p, m, _, _ in runs}
    for fw in ("torch", "tensorflow"):
        assert ops[fw], fw
        assert all(calls > 0 and 0 <= self_ms <= total_ms + 1e-9
                   for _, calls, self_ms, total_ms in ops[fw])
        assert [s for _, _, s, _ in ops[fw]] == sorted((s for _, _, s, _ in ops[fw]),
                                                       reverse=True)
        # The profiler runs after the timed pass: the timed median stays on the scale of
        # an unprofiled run (a wide band: two processes on this machine differ by up to 40 %).
        ratio = median[(fw, True)] / median[(fw, False)]
        assert 0.25 < ratio < 4, (fw, ratio)
    assert any("conv" in op.lower() for op, *_ in ops["torch"][:5])
    assert any("conv" in op.lower() for op, *_ in ops["tensorflow"][:8])
    events = json.loads(gzip.decompress(trace))["traceEvents"]
    assert any(e.get("name", "").startswith("aten::") for e in events)


def test_libtorch_cpp_training_matches_python_step_for_step(db_path, worker_env, capsys):
    """The same scripted model, data, order and optimiser in C++: at one thread every
    step's loss equals Python's, so its time per epoch compares like with like."""
    rc = main(["train", "--model", "resnet18", "--framework", "torch", "--runtime", "eager",
               "libtorch", "--epochs", "2", "--steps", "4", "--batch", "16", "--threads", "1",
               "--warmup-steps", "1", "--db", str(db_path)])
    assert rc == 0
    assert "torch (libtorch)" in capsys.readouterr().out
    with open_db(db_path) as con:
        runs = {r[0]: r[1:] for r in con.execute(
            "SELECT runtime, status, extra->>'feed_sha256', peak_rss_method, prepare_s, "
            "iterations FROM runs").fetchall()}
        losses = {rt: [r[0] for r in con.execute(
            "SELECT loss FROM train_steps JOIN runs USING (run_id) WHERE runtime = ? "
            "ORDER BY step", [rt]).fetchall()] for rt in ("eager", "libtorch")}
        tests = {rt: [r[0] for r in con.execute(
            "SELECT test_loss FROM train_epochs JOIN runs USING (run_id) WHERE runtime = ? "
            "ORDER BY epoch", [rt]).fetchall()] for rt in ("eager", "libtorch")}
    assert set(runs) == {"eager", "libtorch"}
    assert runs["eager"][0] == "ok" and runs["libtorch"][0] == "ok"
    assert runs["eager"][1] == runs["libtorch"][1]  # the same feed
    assert runs["libtorch"][2] == "VmHWM of the LibTorch runner process"
    assert runs["libtorch"][3] > 0 and runs["libtorch"][4] == 8 - 1
    assert len(losses["libtorch"]) == 8
    assert losses["libtorch"] == pytest.approx(losses["eager"], rel=1e-4)
    assert tests["libtorch"] == pytest.approx(tests["eager"], rel=1e-3)
