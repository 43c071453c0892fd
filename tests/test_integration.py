"""Real tiny runs of both frameworks, each in its own worker subprocess (this pytest process
imports neither framework)."""


import pytest

from engine.cli import main
from engine.run.process.runner import Runner
from engine.run.process.worker_steps import count_model_stats
from engine.core import MeasurementPolicy
from engine.scenarios.inference.spec import RunSpec
from store.db import open_db

pytestmark = pytest.mark.slow

# Reference counts for mobilenet_v3_small: torchvision's parameters(); Keras' count_params()
# adds BatchNorm moving statistics (torchvision keeps those as buffers).
TORCH_PARAMS = 2_542_856
KERAS_PARAMS = 2_554_968


def test_two_round_sweep_in_both_frameworks_lands_plausible_linked_rows(
        db_path, worker_env, capsys):
    rc = main(["run", "--model", "mobilenet_v3_small", "--framework", "torch", "tensorflow",
               "--batch", "1", "2", "--threads", "1", "--image-size", "64", "--rounds", "2",
               "--max-rounds", "2", "--min-time", "0.2", "--min-iters", "10", "--warmup", "3",
               "--db", str(db_path)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "torch (eager)" in out and "tensorflow (tf_function)" in out
    # both tables over the sweep's 2 rounds, their cells drift-adjusted (the caption says so)
    assert out.count("(up to 2 rounds)") == 2 and "\ndrift-adjusted figures: " in out
    assert "\nmeasurement noise ±" in out and "\nthe machine drifted " in out
    # the contenders of each contest were timed alternately, both workers warm at once
    assert out.count("contenders timed alternately in blocks, 2 workers warm at once") == 2
    with open_db(db_path) as con:
        sweeps = con.execute("SELECT sweep_id, rounds, configurations FROM sweeps").fetchall()
        assert len(sweeps) == 1 and sweeps[0][1:] == (2, 4)
        linked = con.execute(
            "SELECT round_no, framework, batch_size, model_reused FROM ("
            "SELECT round_no, framework, batch_size, started_at, "
            "extra->>'$.model_reused' AS model_reused FROM runs WHERE sweep_id = ?) "
            "ORDER BY started_at", [sweeps[0][0]]).fetchall()
    # Round 1 forward, round 2 reversed, read back from the stored start times: each contest's
    # contenders together, first mover first; within a worker the second batch size reuses
    # the model built for the first.
    assert linked == [
        (1, "torch", 1, "false"), (1, "tensorflow", 1, "false"),
        (1, "torch", 2, "true"), (1, "tensorflow", 2, "true"),
        (2, "tensorflow", 2, "false"), (2, "torch", 2, "false"),
        (2, "tensorflow", 1, "true"), (2, "torch", 1, "true")]
    # Round 1's TensorFlow worker calibrated the BatchNorm statistics (seconds outside
    # load_s) and wrote the weights; round 2's fresh one read them; torch's calibrate in
    # every worker (engine/worker/weights.py says why).
    with open_db(db_path) as con:
        weights = con.execute(
            "SELECT round_no, framework, extra->>'$.weights_from', "
            "(extra->>'$.calibrate_s')::DOUBLE > 0 FROM runs "
            "ORDER BY round_no, framework, batch_size").fetchall()
    assert weights == [(1, "tensorflow", "calibrated", True)] * 2 \
        + [(1, "torch", "calibrated", True)] * 2 + [(2, "tensorflow", "file", None)] * 2 \
        + [(2, "torch", "calibrated", True)] * 2
    with open_db(db_path) as con:
        rows = con.execute(
            "SELECT framework, batch_size, status, iterations, median_ms, p90_ms, p99_ms, "
            "mean_ms, extra->>'$.gflops_basis', "
            "min_ms, throughput, params, params_trainable, flops_per_sample, gflops_per_s, "
            "load_s, first_forward_s, peak_rss_bytes, rss_before_bytes, "
            "threads_effective, env->>'$.OMP_NUM_THREADS', started_at < ended_at, "
            "versions, image_size, (SELECT count(*) FROM samples s WHERE s.run_id = r.run_id "
            "AND phase = 'measure') FROM runs r ORDER BY framework DESC, batch_size").fetchall()
        cpu = con.execute("SELECT cpu_model, logical_cores FROM systems").fetchall()
    assert [(r[0], r[1]) for r in rows] == [("torch", 1)] * 2 + [("torch", 2)] * 2 + \
        [("tensorflow", 1)] * 2 + [("tensorflow", 2)] * 2
    torch_flops = rows[0][13]
    for (fw, batch, status, iters, med, p90, p99, mean, basis, mn, thr, params, trainable,
         flops, gfs, load_s, first_s, peak, before, threads, omp, ordered, versions, size,
         n) in rows:
        assert status == "ok", status  # dispersion flags a run noisy, never invalid
        assert iters >= 10 and n == iters and size == 64
        assert 0.05 < mn <= med <= p90 <= p99 < 2000
        assert thr == pytest.approx(batch / (mean / 1000))  # samples over measured time
        assert params == (TORCH_PARAMS if fw == "torch" else KERAS_PARAMS)
        assert trainable == TORCH_PARAMS  # Keras' trainable weights match torchvision's
        # GFLOP/s on torch's count for both frameworks; each keeps its own count beside it
        assert flops > 1_000_000 and basis.startswith("torch FlopCounterMode")
        assert gfs == pytest.approx(torch_flops * batch / (med / 1000) / 1e9)
        assert load_s > 0 and first_s > 0
        assert peak > before > 50 * 2**20
        assert omp == "1" and ordered
        key = "torch_intra_op" if fw == "torch" else "tf_intra_op"
        assert f'"{key}": 1' in threads
        assert ('"torch": "2.14.1' if fw == "torch" else '"tensorflow": "2.21.0"') in versions
    assert cpu[0][0] and cpu[0][1] >= 1


def test_catalog_counts_match_the_runs_and_keras_resnet18_matches_torchvision(worker_env):
    specs = [RunSpec(m, fw, 1, 1, image_size=64, weight_policy="random").validate()
             for fw in ("torch", "tensorflow") for m in ("mobilenet_v3_small", "resnet18")]
    got = {}
    count_model_stats(specs, on_stats=lambda ev: got.__setitem__(
        (ev.model, ev.framework), (ev.params, ev.params_trainable)))
    assert got == {
        ("mobilenet_v3_small", "torch"): (TORCH_PARAMS, TORCH_PARAMS),
        ("mobilenet_v3_small", "tensorflow"): (KERAS_PARAMS, TORCH_PARAMS),
        # Our Keras ResNet18 is torchvision's BasicBlock ResNet: trainable counts are equal;
        # Keras adds 2 x 4,800 BatchNorm moving statistics.
        ("resnet18", "torch"): (11_689_512, 11_689_512),
        ("resnet18", "tensorflow"): (11_689_512 + 9_600, 11_689_512),
    }


def test_every_runtime_runs_after_its_output_check(db_path, worker_env, capsys):
    rc = main(["run", "--model", "mobilenet_v3_small", "--framework", "torch", "tensorflow",
               "--runtime", "eager", "channels_last", "torchscript", "compile", "onnxruntime",
               "libtorch", "keras",
               "tf_function", "xla", "--batch", "2", "--threads", "1", "--image-size", "64",
               "--rounds", "1", "--min-time", "0.1", "--min-iters", "5", "--warmup", "2",
               "--no-table", "--db", str(db_path)])
    assert rc == 0
    with open_db(db_path) as con:
        rows = con.execute(
            "SELECT runtime, status, iterations, prepare_s, "
            "CAST(extra->>'$.output_rel_diff' AS DOUBLE), params, first_forward_s, "
            "extra->>'$.first_forward_from', peak_rss_bytes, model_baseline_bytes, "
            "reference_bytes, model_peak_bytes, peak_rss_method FROM runs "
            "ORDER BY framework DESC, runtime").fetchall()
    by = {r[0]: r[:6] for r in rows}
    # first_forward_s is the first call after preparation for every runtime: shape-generic
    # runtimes made it in their output check; compiling ones compiled there (prepare_s), so
    # theirs is the next call; references and the C++ runner time their very first call.
    first = {r[0]: r[7] for r in rows}
    assert all(r[6] > 0 for r in rows)
    assert first == {
        "channels_last": "the output check's call", "torchscript": "the output check's call",
        "onnxruntime": "the output check's call", "compile": "a timed call",
        "eager": "a timed call", "libtorch": "the runner's first call",
        "keras": "a timed call", "tf_function": "a timed call", "xla": "a timed call"}
    assert sorted(by) == ["channels_last", "compile", "eager", "keras", "libtorch",
                          "onnxruntime", "tf_function", "torchscript", "xla"]
    for rt, (_, status, iters, prepare_s, diff, params) in by.items():
        assert status == "ok", (rt, status)  # dispersion flags noisy, never invalid
        assert iters >= 5
        # the output check ran and passed: within 0.1 % of the reference's magnitude
        assert diff is not None and 0.0 <= diff <= 1e-3, (rt, diff)
        assert params == (TORCH_PARAMS if rt in ("eager", "channels_last", "torchscript",
                                                 "compile", "onnxruntime", "libtorch")
                          else KERAS_PARAMS)
    for rt in ("eager", "keras"):  # references: nothing to prepare, nothing to differ from
        assert by[rt][3] == 0.0 and by[rt][4] == 0.0
    for rt in ("torchscript", "compile", "onnxruntime", "libtorch", "tf_function", "xla"):
        assert by[rt][3] > 0.0, rt
    # Memory like for like: what the model adds over the resident set its process had before
    # the model (framework imported; the LibTorch runner's own with libtorch loaded), less
    # the eager reference a runtime keeps beside a model of its own (its fp32 parameters and
    # buffers: 4 bytes a parameter plus BatchNorm statistics), beside the process peak.
    mem = {r[0]: r[8:] for r in rows}
    for rt, (peak, baseline, reference, added, method) in mem.items():
        assert 0 < baseline < peak and 0 < added < peak, (rt, peak, baseline, added)
        assert added == peak - baseline - reference, rt
        apart = rt in ("channels_last", "torchscript", "onnxruntime")
        assert (TORCH_PARAMS * 4 <= reference < TORCH_PARAMS * 4 + 2**20 if apart
                else reference == 0), (rt, reference)
    assert mem["libtorch"][4] == "VmHWM of the LibTorch runner process"
    assert mem["libtorch"][0] < mem["eager"][0]  # the runner alone, without Python's


def test_libtorch_without_a_built_runner_is_an_error_row_that_says_what_to_do(
        db_path, worker_env, monkeypatch, tmp_path):
    monkeypatch.setenv("LIBTORCH_RUNNER", str(tmp_path / "missing" / "libtorch_runner"))
    spec = RunSpec("mobilenet_v3_small", "torch", 1, 1, image_size=64,
                   runtime="libtorch").validate()
    [rec] = Runner(timeout_s=120).run([spec], on_record=lambda r: None)
    assert rec.status == "error"
    assert rec.reason == (f"RuntimeError: the LibTorch C++ runner is not built "
                          f"({tmp_path / 'missing' / 'libtorch_runner'} missing): run "
                          "scripts/build_libtorch_runner.sh, which needs g++ (apt-get install g++)")


def test_bf16_runs_are_checked_against_fp32_eager_by_direction(db_path, worker_env):
    specs = [RunSpec("mobilenet_v3_small", "torch", 2, 1, image_size=64, precision="bf16",
                     runtime=rt, policy=MeasurementPolicy(warmup_iters=2, min_time_s=0.1,
                                                          min_iters=5)).validate()
             for rt in ("eager", "channels_last", "torchscript")]
    records = Runner(timeout_s=300).run(specs, on_record=lambda r: None)
    for rec in records:
        assert rec.status == "ok" and rec.precision == "bf16", rec.reason
        # 1 - cosine similarity to fp32 eager: bf16 rounding, far from a wrong graph's 0.15+
        assert 0.0 < rec.extra["output_rel_diff"] <= 0.02, (rec.runtime, rec.extra)
        assert rec.iterations >= 5


def test_a_reused_model_is_prepared_and_checked_again_at_each_batch_size(db_path, worker_env):
    """One worker per framework builds each model once; the second batch size recompiles
    (compile, tf_function, XLA) in prepare_s, not hidden in first_forward_s, and its output
    is checked again. bf16 eager keeps its fp32 reference: had the cast reached the
    reference, batch 2 would be checked bf16 against bf16 and differ by exactly 0."""
    policy = MeasurementPolicy(warmup_iters=2, min_time_s=0.1, min_iters=5)
    runs = [("torch", "compile", "fp32"), ("torch", "eager", "bf16"),
            ("tensorflow", "tf_function", "fp32"), ("tensorflow", "xla", "fp32")]
    specs = [RunSpec("mobilenet_v3_small", fw, batch, 1, image_size=64, runtime=rt,
                     precision=prec, policy=policy).validate()
             for fw, rt, prec in runs for batch in (1, 2)]
    # One after another, as a single runtime's sweep runs: interleaved, a worker holding two
    # runtimes of one contest rebuilds one of them at the next batch size (test_together).
    records = Runner(timeout_s=600, interleave=False).run(specs, on_record=lambda r: None)
    by = {(r.runtime, r.batch_size): r for r in records}
    assert len(by) == 8
    for (rt, batch), rec in by.items():
        assert rec.status == "ok", (rt, batch, rec.reason)
        assert rec.extra["model_reused"] is (batch == 2), (rt, batch)
        diff = rec.extra["output_rel_diff"]
        if rt == "eager":
            assert 0.0 < diff <= 0.02, (batch, diff)  # bf16 by direction, against fp32
        else:
            assert diff is not None and 0.0 <= diff <= 1e-3, (rt, batch, diff)
            assert rec.prepare_s > 0.0, (rt, batch)
    for rt in ("compile", "tf_function", "xla"):
        # Each shape's own compile, measured: a reused model used to carry batch 1's figure
        # (the same float) while batch 2's recompile hid in first_forward_s.
        assert by[(rt, 2)].prepare_s != by[(rt, 1)].prepare_s, rt
