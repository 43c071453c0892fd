"""PerfZero summaries and pytorch-benchmark YAML out (store/export.py), PerfZero back in."""

import json
import math
from dataclasses import replace
from datetime import datetime, timezone

import pytest

from engine.cli import main
from engine.core.errors import UserError
from store.db import open_db
from store.ingest import import_file
from store.export import export_dir, to_yaml
from store.runs import save_record, save_sweep
from seeds.records import SYSTEM, ok_record, seed_sweep, seed_workloads
from tests.conftest import seed_once

SWEEP = "sweep-seeded"
# What a PerfZero round trip must give back, column for column (started_at to the us).
ROUND_TRIP = ("run_id, sweep_id, model, framework, runtime, batch_size, intra_threads, "
              "inter_threads, precision, image_size, device, status, reason, validity, "
              "throughput, median_ms, mean_ms, p90_ms, p95_ms, p99_ms, min_ms, max_ms, std_ms, "
              "iqr_ms, cv, iterations, peak_rss_bytes, peak_rss_method, params, "
              "flops_per_sample, gflops_per_s, measured_s, epoch_us(started_at), versions, "
              "env, git_commit, system_id, round_no")


def _read_yaml(text: str):
    """Our writer's block YAML read back (PyYAML is no dependency of the project): mappings
    by indentation, '- ' items, scalars as JSON or null/true/false/.nan/.inf/{}/[]."""
    lines = [(len(raw) - len(raw.lstrip(" ")), raw.strip()) for raw in text.splitlines()]
    pos = 0
    words = {"null": None, "true": True, "false": False, ".nan": math.nan, ".inf": math.inf,
             "-.inf": -math.inf}

    def scalar(t):
        return words[t] if t in words else {} if t == "{}" else [] if t == "[]" else json.loads(t)

    def split(body):  # (key, rest) of "key: value", or None for a plain scalar
        if body.startswith('"'):
            key, end = json.JSONDecoder().raw_decode(body)
        else:
            end = body.find(":")
            if end < 0 or not body[:end].replace("_", "a").isalnum():
                return None
            key = body[:end]
        return (key, body[end + 1:].strip()) if body[end:end + 1] == ":" else None

    def block(indent):
        nonlocal pos
        if lines[pos][1].startswith("- "):
            items = []
            while pos < len(lines) and lines[pos][0] == indent and lines[pos][1][:2] == "- ":
                body = lines[pos][1][2:]
                if split(body):
                    lines[pos] = (indent + 2, body)  # a mapping item: its first pair
                    items.append(block(indent + 2))
                else:
                    items.append(scalar(body))
                    pos += 1
            return items
        out = {}
        while pos < len(lines) and lines[pos][0] == indent:
            key, rest = split(lines[pos][1])
            pos += 1
            out[key] = scalar(rest) if rest else block(lines[pos][0])
        return out
    return block(0)


def _summaries(out_dir) -> dict:
    return {p.stem: json.loads(p.read_text()) for p in sorted(out_dir.glob("*.json"))}


def test_perfzero_export_is_one_summary_per_run_failures_included(tmp_path, db_path):
    seed_once(seed_sweep, db_path)
    with open_db(db_path) as con:
        done = export_dir(con, tmp_path / "pz", "perfzero", sweep_id=SWEEP)
    docs = _summaries(tmp_path / "pz")
    assert (done.runs, done.left_out, len(done.files)) == (17, 0, 17)
    assert sorted(docs) == sorted([f"{fw}-{b}-{t}-{r}" for fw in ("torch", "tensorflow")
                                   for b in (1, 8) for t in (1, 2) for r in (1, 2)] + ["tf-oom"])
    ok = docs["torch-8-2-1"]  # samples 40.08..40.12 ms at batch 8
    assert ok["execution_id"] == SWEEP
    assert ok["execution_timestamp"] == datetime(2026, 11, 21, 12, 6, 0, 123456,
                                                 tzinfo=timezone.utc).timestamp()
    assert ok["ml_framework_info"] == {"name": "torch", "version": "2.14.1"}
    assert ok["process_info"] == {"max_rss": 300 * 2**20}
    result = ok["benchmark_result"]
    assert result["name"] == "mobilenet_v3_small.torch.eager.batch_8.threads_2x1.fp32.cpu"
    assert (result["succeeded"], result["wall_time"]) == (True, 0.006)
    metrics = {m["name"]: m["value"] for m in result["metrics"]}
    assert metrics["exp_per_second"] == pytest.approx(8 * 5 / 0.2005)
    assert metrics["latency_median_ms"] == pytest.approx(40.1)
    assert metrics["latency_p90_ms"] == pytest.approx(40.116)  # type-7 between 40.11 and 40.12
    assert metrics["latency_p99_ms"] == pytest.approx(40.1196)
    assert (metrics["iterations"], metrics["params"]) == (5, 11_689_512)
    assert ok["benchmark_info"]["flags"]["batch_size"] == 8
    assert ok["benchmark_info"]["flags"]["intra_threads"] == 2
    assert ok["benchmark_info"]["has_exception"] is False
    assert ok["system_info"]["cpu_model"] == "Test CPU @ 2 GHz"

    failed = docs["tf-oom"]
    assert failed["benchmark_result"]["succeeded"] is False
    assert failed["benchmark_result"]["wall_time"] == -1  # PerfZero's "never reported"
    assert failed["benchmark_info"]["has_exception"] is True
    assert failed["benchmark_result"]["extras"]["status"] == "oom"
    assert failed["benchmark_result"]["extras"]["reason"] == "ValueError: boom"
    assert [m["name"] for m in failed["benchmark_result"]["metrics"]] == ["import_s"]
    assert "process_info" not in failed  # no peak RSS was measured


def test_perfzero_round_trip_gives_back_the_same_runs_once(tmp_path):
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    seed_once(seed_sweep, a)
    with open_db(a) as con:
        export_dir(con, tmp_path / "pz", "perfzero", sweep_id=SWEEP)
    files = sorted((tmp_path / "pz").glob("*.json"))
    with open_db(b) as con:
        assert [import_file(con, f) for f in files] == [(1, 0, "PerfZero summary")] * 17
        assert [import_file(con, f) for f in files] == [(0, 1, "PerfZero summary")] * 17
    q = f"SELECT {ROUND_TRIP} FROM runs ORDER BY run_id"
    with open_db(a) as ca, open_db(b) as cb:
        assert ca.execute(q).fetchall() == cb.execute(q).fetchall()
        systems = "SELECT * EXCLUDE (first_seen) FROM systems"
        assert ca.execute(systems).fetchall() == cb.execute(systems).fetchall()
        # Figures, not samples: PerfZero has no place for the raw samples.
        assert cb.execute("SELECT count(*) FROM samples").fetchall() == [(0,)]
        row = cb.execute(
            "SELECT model, framework, batch_size, intra_threads, status, median_ms, p99_ms, "
            "peak_rss_bytes, versions->>'$.torch', source FROM runs "
            "WHERE run_id = 'torch-8-2-1'").fetchall()
        assert row == [("mobilenet_v3_small", "torch", 8, 2, "ok", pytest.approx(40.1),
                        pytest.approx(40.1196), 300 * 2**20, "2.14.1", "perfzero")]
        assert cb.execute("SELECT status, reason, throughput FROM runs "
                          "WHERE run_id = 'tf-oom'").fetchall() == [("oom", "ValueError: boom",
                                                                     None)]
        # The database it came from already holds these runs: nothing is added twice.
        assert import_file(ca, files[0]) == (0, 1, "PerfZero summary")


def test_pytorch_benchmark_yaml_per_configuration_from_pooled_raw_samples(tmp_path, db_path):
    seed_once(seed_sweep, db_path)
    with open_db(db_path) as con:
        done = export_dir(con, tmp_path / "pb", "pytorch-benchmark", sweep_id=SWEEP)
    assert (done.runs, done.left_out) == (16, 1)  # the oom run has no timing to give
    assert sorted(p.name for p in done.files) == sorted(
        f"mobilenet_v3_small-{fw}-fp32-cpu-64px-threads{t}x1-batch1_8.yaml"
        for fw in ("torch-eager", "tensorflow-tf_function") for t in (1, 2))
    doc = _read_yaml((tmp_path / "pb" /
                      "mobilenet_v3_small-torch-eager-fp32-cpu-64px-threads1x1-batch1_8.yaml")
                     .read_text())
    assert list(doc) == ["machine_info", "device", "params", "flops", "timing",
                         "dl_bench_dashboard"]  # no `memory`: CUDA only in pytorch-benchmark
    assert doc["machine_info"] == {
        "system": {"system": "Linux", "node": "box", "release": "6.1"},
        "cpu": {"model": "Test CPU @ 2 GHz", "architecture": None,
                "cores": {"physical": 1, "total": 2}, "frequency": None},
        "memory": {"total": "24.00 GB", "used": None, "available": None}, "gpus": None}
    assert (doc["device"], doc["params"], doc["flops"]) == ("cpu", 11_689_512, 500_000_000)
    assert list(doc["timing"]) == ["batch_size_1", "batch_size_8"]
    # Batch 1, both rounds pooled: 10.08..10.12 ms and 10.18..10.22 ms, mean 10.15 ms, and
    # squared deviations summing to 0.027 ms^2 over 10 samples (population std, as numpy).
    one = doc["timing"]["batch_size_1"]["on_device_inference"]
    m = one["metrics"]
    assert m["seconds_per_batch_mean"] == pytest.approx(0.01015)
    assert m["seconds_per_batch_std"] == pytest.approx(math.sqrt(0.0027) / 1e3)
    assert (m["seconds_per_batch_min"], m["seconds_per_batch_max"]) == (0.01008, 0.01022)
    assert m["batches_per_second_max"] == pytest.approx(1 / 0.01008)
    assert m["batches_per_second_min"] == pytest.approx(1 / 0.01022)
    assert one["human_readable"] == {
        "batches_per_second": "98.52 +/- 0.50 [97.85, 99.21]",
        "batch_latency": "10.150 ms +/- 51.962 us [10.080 ms, 10.220 ms]"}
    eight = doc["timing"]["batch_size_8"]["on_device_inference"]["metrics"]
    assert eight["seconds_per_batch_mean"] == pytest.approx(0.08015)
    ours = doc["dl_bench_dashboard"]
    assert (ours["framework"], ours["runtime"], ours["sweep_ids"]) == ("torch", "eager", [SWEEP])
    assert ours["batches"]["batch_size_1"] == {"run_ids": ["torch-1-1-1", "torch-1-1-2"],
                                              "rounds": [1, 2], "samples": 10,
                                              "peak_rss_bytes": 300 * 2**20}


def test_pytorch_benchmark_cuda_memory_and_no_mac_count_without_torch_counter(tmp_path,
                                                                              db_path):
    """A CUDA run's allocator peak is pytorch-benchmark's max_inference_bytes; a FLOP count
    that is not torch FlopCounterMode's (2 per MAC) gives no `flops`, as an uncounted model."""
    with open_db(db_path) as con:
        save_sweep(con, "s-gpu", rounds=1, seed=1, plan=[[]], configurations=1)
        rec = replace(ok_record("g1", batch_size=4), sweep_id="s-gpu", round_no=1,
                      device="cuda", device_peak_bytes=3 * 2**30,
                      flops_method="tf.profiler float_ops")
        save_record(con, rec, {**SYSTEM, "accelerator": "NVIDIA H100", "accelerator_count": 2})
        done = export_dir(con, tmp_path / "pb", "pytorch-benchmark", sweep_id="s-gpu")
    doc = _read_yaml(done.files[0].read_text())
    assert done.files[0].name == "resnet18-torch-eager-fp32-cuda-64px-threads1x1-batch4.yaml"
    assert "flops" not in doc
    assert doc["dl_bench_dashboard"]["flops_basis"].startswith("not written")
    assert doc["memory"] == {"batch_size_4": {"max_inference_bytes": 3 * 2**30,
                                              "max_inference": "3.00 GB"}}
    assert doc["machine_info"]["gpus"] == [{"name": "NVIDIA H100", "memory": None}] * 2


def test_yaml_writer_quotes_what_yaml_would_misread():
    """Checked against PyYAML 6.0.3's safe_load when written: 'on'/'no' keys stay strings,
    1e-05 stays a float (YAML 1.1 needs the dot and the signed exponent), a line separator
    inside a string stays one character rather than a folded line break."""
    doc = {"on": "yes", "no": None, "small": 1e-05, "big": 1e+20, "ratio": 0.5, "count": 3,
           "gpus": [{"name": "A100", "memory": None}], "note": 'a: b\u2028"c"', "empty": {},
           "ids": ["r1", 2]}
    text = to_yaml(doc)
    assert text == ('"on": "yes"\n"no": null\nsmall: 1.0e-05\nbig: 1.0e+20\nratio: 0.5\n'
                    'count: 3\ngpus:\n  - name: "A100"\n    memory: null\n'
                    'note: "a: b\\u2028\\"c\\""\nempty: {}\nids:\n  - "r1"\n  - 2\n')
    assert _read_yaml(text) == doc


def test_bad_export_requests_name_the_field_and_what_is_allowed(tmp_path, db_path):
    seed_once(seed_sweep, db_path)
    seed_once(seed_workloads, db_path)
    a_file = tmp_path / "taken.txt"
    a_file.write_text("x")
    with open_db(db_path) as con:
        with pytest.raises(UserError) as info:
            export_dir(con, tmp_path / "o", "xml")
        assert (info.value.field, str(info.value)) == (
            "format", "format: 'xml' is not a one-file-per-run format; allowed: perfzero, "
                      "pytorch-benchmark")
        with pytest.raises(UserError) as info:
            export_dir(con, a_file, "perfzero")
        assert (info.value.field, str(info.value)) == (
            "out", f"out: {a_file} is a file; perfzero writes several files, so allowed: a "
                   "directory (new or existing)")
        with pytest.raises(UserError) as info:
            export_dir(con, tmp_path / "o", "perfzero", sweep_id="nope")
        assert (info.value.field, str(info.value)) == (
            "sweep", "sweep: 'nope' holds no runs; allowed: a stored sweep id with inference "
                     "runs (see `python -m engine sweeps`)")
        with pytest.raises(UserError, match="sweep: 'sweep-train' holds 2 runs, none of them "
                                            "inference; allowed: "):
            export_dir(con, tmp_path / "o", "pytorch-benchmark", sweep_id="sweep-train")
        save_record(con, replace(ok_record("bad"), sweep_id="s-bad", status="invalid"), SYSTEM)
        with pytest.raises(UserError, match=r"sweep: 's-bad' holds no ok inference run \(1 "
                                            r"failed or invalid\)"):
            export_dir(con, tmp_path / "o", "pytorch-benchmark", sweep_id="s-bad")
    assert not (tmp_path / "o").exists()  # a refused export writes nothing


def test_cli_exports_both_formats_and_imports_a_summary_back(tmp_path, db_path, capsys):
    seed_once(seed_sweep, db_path)
    pz, pb = tmp_path / "pz", tmp_path / "pb"
    assert main(["export", "--format", "perfzero", "--sweep", SWEEP, "--out", str(pz),
                 "--db", str(db_path)]) == 0
    assert capsys.readouterr().out == f"exported 17 runs to 17 perfzero files in {pz}\n"
    assert main(["export", "--format", "pytorch-benchmark", "--out", str(pb),
                 "--db", str(db_path)]) == 0
    assert capsys.readouterr().out == (
        f"exported 16 runs to 4 pytorch-benchmark files in {pb}; 1 left out (not inference, "
        "or not ok: pytorch-benchmark results hold measured runs only)\n")
    fresh = tmp_path / "fresh.duckdb"
    assert main(["import", str(pz / "torch-1-1-1.json"), "--db", str(fresh)]) == 0
    assert capsys.readouterr().out == (f"imported 1 runs from {pz / 'torch-1-1-1.json'} "
                                       "(PerfZero summary); 0 already present were skipped\n")
    assert main(["export", "--format", "perfzero", "--out", str(db_path),
                 "--db", str(db_path)]) == 2
    assert capsys.readouterr().err == (f"error: out: {db_path} is a file; perfzero writes "
                                       "several files, so allowed: a directory (new or "
                                       "existing)\n")
    with pytest.raises(SystemExit) as exit_:
        main(["export", "--format", "xml", "--db", str(db_path)])
    assert exit_.value.code == 2
    assert "argument --format: invalid choice: 'xml' (choose from 'parquet', 'csv', 'json', " \
           "'perfzero', 'pytorch-benchmark')" in capsys.readouterr().err
