import subprocess
import sys

import duckdb
import pytest

from engine.core.errors import UserError
from store.calibrations import CALIBRATION_COLUMNS
from store.queries import overview
from store.db import MIGRATIONS, applied_migrations, connect, open_db, resolve_db_path
from store.runs import (EPOCH_COLUMNS, known_model_stats, list_runs, run_samples, save_record,
                        framework_version)
from seeds.records import SYSTEM, failed_record, ok_record

EXPECTED_RUN_COLUMNS = [
    "run_id", "sweep_id", "model", "framework", "runtime", "batch_size", "intra_threads",
    "inter_threads", "precision", "image_size", "device", "weight_policy", "warmup_iters",
    "min_time_s", "min_iters", "max_time_s", "status", "reason", "exit_code", "signal",
    "stderr_tail", "validity", "validity_reason", "stop_reason", "started_at", "ended_at",
    "import_s", "load_s", "first_forward_s", "warmup_s", "measured_s", "iterations",
    "mean_ms", "median_ms", "p90_ms", "p95_ms", "p99_ms", "min_ms", "max_ms", "std_ms",
    "iqr_ms", "cv", "throughput", "params", "params_trainable", "flops_per_sample",
    "flops_method", "gflops_per_s", "rss_before_bytes", "peak_rss_bytes", "peak_rss_method",
    "device_peak_bytes", "memory_cap_bytes", "timeout_s", "load_avg_1m", "git_commit",
    "system_id", "versions", "threads_effective", "env", "source", "extra", "round_no",
    "prepare_s", "kind", "dataset", "workers", "model_format", "model_origin", "model_inputs",
    "model_sha256", "model_bytes", "machine_shape", "threads_per_core", "cpu_flags",
    "governor", "replicas", "node_id", "node_host", "contention", "wait_policy",
    "model_peak_bytes", "model_baseline_bytes", "reference_bytes",
    # m014_energy (issue 28 parts 3 and 7)
    "energy_source", "energy_absent", "energy_j_per_sample", "energy_kwh_per_million",
    "energy_loop_s", "energy_samples", "energy_counters", "numerics",
    # m015 (issue 28): a reduced-precision run's error against fp32
    "output_max_abs", "output_max_rel", "top1_agreement", "top1_inputs"]


def columns(con, table):
    return [r[0] for r in con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
        "ORDER BY ordinal_position", [table]).fetchall()]


def test_migrations_on_empty_database_create_exact_columns():
    con = connect(":memory:")
    assert applied_migrations(con) == ["m001_initial", "m002_rounds", "m003_price_updates",
                                       "m004_prepare_time", "m005_training_dataload_profiles",
                                       "m006_user_models", "m007_machine_identity",
                                       "m008_cluster_nodes", "m009_sweep_rule",
                                       "m010_contention", "m011_model_memory", "m012_serving",
                                       "m013_calibration", "m014_energy", "m015_output_error",
                                       "m016_states"]
    assert columns(con, "train_epochs") == ["run_id", *EPOCH_COLUMNS]
    assert columns(con, "train_steps") == ["run_id", "step", "loss"]
    assert columns(con, "profile_ops") == ["run_id", "rank", "op", "device", "calls",
                                           "self_ms", "total_ms"]
    assert columns(con, "runs") == EXPECTED_RUN_COLUMNS
    assert columns(con, "samples") == ["run_id", "phase", "idx", "latency_ns"]
    assert columns(con, "systems") == [
        "system_id", "hostname", "cpu_model", "physical_cores", "logical_cores",
        "usable_cores", "sockets", "memory_bytes", "accelerator", "accelerator_count",
        "accelerator_driver", "os", "platform", "python", "first_seen"]
    assert columns(con, "price_updates") == ["kind", "key", "data", "source", "as_of",
                                             "imported_at"]
    assert columns(con, "sweeps") == ["sweep_id", "created_at", "rounds", "seed",
                                      "configurations", "plan", "command", "min_rounds",
                                      "max_rounds", "margin", "alpha"]
    assert columns(con, "serving_results") == [
        "run_id", "scenario", "result", "failed_rules", "recommendations", "early_stopping",
        "percentiles_ns", "figures", "query_count", "samples_per_query", "summary"]
    assert columns(con, "loadgen_logs") == ["run_id", "name", "bytes", "format", "data"]
    assert columns(con, "calibrations") == CALIBRATION_COLUMNS  # m013: the machine's ceilings
    # m016 (issue 42): a group's sweeps, marks on states, each change once, every attempt
    assert columns(con, "state_groups") == ["group_name", "sweep_id", "source", "added_at"]
    assert columns(con, "state_marks") == ["mark_id", "group_name", "config_key", "kind",
                                           "state", "sweep_id", "who", "marked_at", "why",
                                           "withdrawn_by", "withdrawn_at"]
    assert columns(con, "state_changes") == [
        "change_id", "group_name", "config_key", "configuration", "sweep_id", "old_state",
        "new_state", "since", "alert", "note", "points", "policy", "recorded_at"]
    assert columns(con, "alert_deliveries") == ["change_id", "target", "attempt", "tried_at",
                                                "status", "error", "ok", "final"]
    assert columns(con, "model_info") == [
        "model", "framework", "image_size", "framework_version", "params",
        "params_trainable", "flops_per_sample", "flops_method", "measured_at"]


def test_migrations_run_once(db_path):
    connect(db_path).close()
    con = connect(db_path)
    assert con.execute("SELECT count(*) FROM migrations").fetchall() == [(len(MIGRATIONS),)]


def test_save_record_stores_run_samples_system_and_model_facts(db_path):
    with open_db(db_path) as con:
        save_record(con, ok_record(), SYSTEM)
        save_record(con, failed_record(), SYSTEM)
        assert overview(con)["counts"] == {"runs": 2, "samples": 5, "systems": 1, "sweeps": 0,
                                           "model_info": 1}
        runs = list_runs(con)
        ok = runs[runs.run_id == "r-ok"].iloc[0]
        assert ok.status == "ok" and ok.validity == "valid"
        assert ok.median_ms == 2.0 and ok.throughput == 500.0 and ok.p90_ms == 2.008
        err = runs[runs.run_id == "r-err"].iloc[0]
        assert err.status == "error" and err.reason == "ValueError: boom"
        s = run_samples(con, "r-ok")
        assert s[s.phase == "measure"].latency_ns.tolist() == [2_010_000, 1_990_000, 2_000_000]
        assert s[s.phase == "warmup"].latency_ns.tolist() == [9_000_000, 5_000_000]
        # quantiles in SQL agree with engine.analysis.stats (both type 7)
        assert con.execute("SELECT quantile_cont(latency_ns, 0.5) FROM samples "
                           "WHERE run_id = ? AND phase = 'measure'",
                           ["r-ok"]).fetchall() == [(2_000_000.0,)]
        assert known_model_stats(con, "resnet18", "torch", 64, framework_version("torch")) == {
            "params": 11_689_512, "params_trainable": 11_689_512,
            "flops_per_sample": 1_000_000_000, "flops_method": "FlopCounterMode"}


def test_a_failed_write_leaves_nothing_behind(db_path):
    with open_db(db_path) as con:
        save_record(con, ok_record(), SYSTEM)
        with pytest.raises(duckdb.ConstraintException):
            save_record(con, ok_record(), SYSTEM)  # same run_id: the transaction rolls back
        assert overview(con)["counts"]["samples"] == 5  # 3 timed + 2 warm-up, of the first save only


def test_db_path_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("BENCH_DB", str(tmp_path / "env.duckdb"))
    assert resolve_db_path() == tmp_path / "env.duckdb"
    assert resolve_db_path(tmp_path / "flag.duckdb") == tmp_path / "flag.duckdb"
    monkeypatch.delenv("BENCH_DB")
    assert resolve_db_path().name == "bench.duckdb" and resolve_db_path().parent.name == "data"


def test_a_database_held_by_another_process_gets_a_clear_message(db_path):
    connect(db_path).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1]); "
         "print('held', flush=True); sys.stdin.read()", str(db_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        ticks = iter(range(100))
        with pytest.raises(UserError) as info:
            connect(db_path, wait_s=3, clock=lambda: next(ticks), pause=lambda s: None)
        msg = str(info.value)
        assert f"{db_path} is in use by process {holder.pid}" in msg
        assert "pass --db PATH" in msg
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


def test_read_only_open_of_a_missing_file_says_what_to_do(tmp_path):
    with pytest.raises(UserError) as info:
        connect(tmp_path / "none.duckdb", read_only=True)
    assert "does not exist yet; run a benchmark first" in str(info.value)


def test_latest_latency_matches_runtime_and_precision(db_path):
    """An estimate for a compiled or bf16 sweep must not borrow eager fp32 medians."""
    from dataclasses import replace

    from store.queries import latest_latency
    from seeds.records import seed_sweep, spec
    from tests.conftest import seed_once

    seed_once(seed_sweep, db_path)
    eager = spec(model="mobilenet_v3_small", batch_size=1, intra_threads=1)
    with open_db(db_path) as con:
        assert latest_latency(con, eager) == pytest.approx(0.0102)  # round 2: 10.2 ms
        assert latest_latency(con, replace(eager, runtime="compile")) is None
        assert latest_latency(con, replace(eager, precision="bf16")) is None


def test_comparable_models_are_those_with_ok_timed_inference_runs(db_path):
    from store.queries import comparable_models
    from seeds.records import seed_sweep, seed_workloads
    from tests.conftest import seed_once

    seed_once(seed_sweep, db_path)
    # resnet18 training and png loading are not comparable here
    seed_once(seed_workloads, db_path)
    with open_db(db_path) as con:
        assert comparable_models(con) == ["mobilenet_v3_small"]
        assert comparable_models(con, "sweep-seeded") == ["mobilenet_v3_small"]
        assert comparable_models(con, "sweep-train") == []


def test_aggregates_never_blend_devices_precisions_inter_threads_or_machines(db_path):
    from dataclasses import replace

    from engine.present.frames import setting_choices
    from store.queries import config_summary, machine_throughput, settings
    from seeds.records import SYSTEM, ok_record
    other = {**SYSTEM, "system_id": "sys-other", "hostname": "cloud", "cpu_model": "Other CPU"}
    fast, slow = (1_000_000,) * 3, (4_000_000,) * 3
    with open_db(db_path) as con:
        save_record(con, ok_record("here", samples=fast), SYSTEM)
        save_record(con, replace(ok_record("there", samples=slow, minute=2),
                                 system_id="sys-other", machine_shape="c6i.8xlarge"), other)
        save_record(con, replace(ok_record("bf16", samples=slow, minute=3),
                                 precision="bf16"), SYSTEM)
        save_record(con, replace(ok_record("inter", samples=slow, minute=4),
                                 inter_threads=2), SYSTEM)
        rows = settings(con, "inference")
        # same model, framework, batch and threads: four settings, each its own figure
        assert len(rows) == 4
        everything = machine_throughput(con, "inference", None)
        assert sorted(everything.throughput.round(1)) == [250.0, 250.0, 250.0, 1000.0]
        choices, labels = setting_choices(rows)
        here = ("cpu", "fp32", 1, SYSTEM["system_id"], "", "none")  # no shape, no neighbour
        assert here in choices and labels[here].startswith(
            "cpu · fp32 · inter-op 1 · Test CPU @ 2 GHz on box (1 runs)")
        # this machine's own figure, and the other machine's where its shape is named
        mine = machine_throughput(con, "inference", here)
        assert mine[["throughput", "selected", "machine_shape"]].fillna("").values.tolist() \
            == [[1000.0, True, ""], [250.0, False, "c6i.8xlarge"]]
        there = ("cpu", "fp32", 1, "sys-other", "c6i.8xlarge", "none")
        assert labels[there].startswith(  # the machine's catalog shape, where it was told
            "cpu · fp32 · inter-op 1 · c6i.8xlarge (Other CPU on cloud) (1 runs)")
        assert machine_throughput(con, "inference", there).throughput.tolist() == [250.0]
        assert config_summary(con, ["resnet18"], None, here).p50_ms.tolist() == [1.0]


def test_the_run_pages_speed_estimate_is_taken_from_quiet_default_runs_only(db_path):
    """A neighbour's runs and torch's passive waits are settings of their own: the Run page's
    GFLOP/s per thread estimate never takes them in, and Results names each."""
    from dataclasses import replace

    from store.queries import framework_gflops_per_thread, results_table

    with open_db(db_path) as con:
        for rid, gflops, kw in (("quiet", 8.0, {}), ("busy", 1.0, {"contention": "steady"}),
                                ("passive", 2.0, {"wait_policy": "passive"})):
            rec = ok_record(rid, intra_threads=2)
            save_record(con, replace(rec, gflops_per_s=gflops, **kw), SYSTEM)
        assert framework_gflops_per_thread(con, "torch") == 4.0
        shown = dict(zip(*results_table(con)[["run_id", "setting"]].T.values))
    assert shown == {"quiet": "", "busy": "steady neighbour", "passive": "OMP passive"}


def test_data_loading_images_per_s_is_samples_over_measured_time_per_machine(db_path):
    from dataclasses import replace

    from engine.present.frames import setting_choices
    from engine.scenarios import DATA_LOADING
    from store.queries import load_summary, settings
    from seeds.records import load_record
    other = {**SYSTEM, "system_id": "sys-other", "hostname": "cloud", "cpu_model": "Other CPU"}
    # Batch 8; here one batch of three stalls: median 2 ms, but 3 batches in 12 ms, so
    # 2,000 images/s (batch over the median would say 4,000). There: 1 ms each, 8,000/s.
    here = replace(load_record("l-here", "png", "loop:pillow+numpy", 8, 0, 2.0),
                   samples_ns=(2_000_000, 2_000_000, 8_000_000), throughput=2000.0)
    there = replace(load_record("l-there", "png", "loop:pillow+numpy", 8, 0, 1.0),
                    samples_ns=(1_000_000,) * 3, throughput=8000.0, system_id="sys-other")
    with open_db(db_path) as con:
        save_record(con, here, SYSTEM)
        save_record(con, there, other)
        every = load_summary(con, None)
        choices, _ = setting_choices(settings(con, DATA_LOADING.kind))
        one = {c[3]: load_summary(con, None, c) for c in choices}
    # Two machines: two rows, never one blended median.
    assert sorted(zip(every.images_per_s, every.batches_per_s, every.ms_per_batch)) == [
        (2000.0, 250.0, 2.0), (8000.0, 1000.0, 1.0)]
    assert sorted(one) == ["sys-other", "sys-test-0001"]
    assert one["sys-test-0001"].images_per_s.tolist() == [2000.0]
    assert one["sys-other"].images_per_s.tolist() == [8000.0]
