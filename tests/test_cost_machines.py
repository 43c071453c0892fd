"""Cost from measured machines (issue 15): a shape with runs is priced from them, a shape
without is an estimate scaled by physical cores; two machines' runs are never blended."""

import pytest

from engine.analysis.cost import custom_machine, load_catalog
from engine.analysis.cost_machines import (basis, contender_rows, figure, fleet_rows,
                                           machine_rows, machine_vs_machine, physical_cores,
                                           threads_per_core, training_rows)
from store.db import open_db
from store.queries import machine_throughput
from seeds.records import seed_machines

CATALOG = {m.shape: m for m in load_catalog()}
C6I, E4, E5 = (CATALOG["c6i.8xlarge"], CATALOG["VM.Standard.E4.Flex 16 OCPU/32 GB"],
               CATALOG["VM.Standard.E5.Flex 16 OCPU/32 GB"])
LOCAL_SETTING = ("cpu", "fp32", 1, "sys-local")  # the benchmark machine, no shape named


@pytest.fixture
def stored(db_path):
    seed_machines(db_path)
    with open_db(db_path) as con:
        return machine_throughput(con, "inference", LOCAL_SETTING).to_dict("records")


def test_physical_cores_follow_the_catalog_rows_threads_per_core():
    arm = CATALOG["c7g.8xlarge (Graviton3)"]
    a1 = CATALOG["VM.Standard.A1.Flex 16 OCPU/32 GB (Ampere Altra; 1 OCPU = 1 vCPU)"]
    assert [(threads_per_core(m), physical_cores(m)) for m in (C6I, E4, arm, a1)] == [
        (2, 16.0), (2, 16.0), (1, 32.0), (1, 16.0)]
    assert physical_cores(custom_machine(1.0, 2)) == 1.0  # taken as x86 with SMT
    from dataclasses import replace
    # the row's column, whatever the name says (the name only fills a row without it)
    assert threads_per_core(replace(C6I, shape="m7a.8xlarge", threads_per_core=1)) == 1


def test_each_stored_split_is_its_own_rounds_median_per_machine(stored):
    # Grouped by shape and system: the two c6i.8xlarge hosts stay apart, the bf16 run and
    # the other machines' unnamed runs are not there.
    got = sorted((r["system_id"],
                  r["machine_shape"] if isinstance(r["machine_shape"], str) else None,
                  r["threads"], r["replicas"], r["throughput"], r["runs"], bool(r["selected"]))
                 for r in stored)
    assert got == [
        ("sys-c6i", "c6i.8xlarge", 16, 2, 236.0, 3, False),
        ("sys-c6i", "c6i.8xlarge", 32, 1, 205.0, 3, False),
        ("sys-c6i-b", "c6i.8xlarge", 16, 2, 100.0, 3, False),
        ("sys-e4", E4.shape, 32, 1, 160.0, 3, False),
        ("sys-local", None, 1, 4, 27.0, 3, True),
        ("sys-local", None, 2, 1, 16.0, 3, True),
        ("sys-local", None, 2, 2, 28.4, 3, True),
        ("sys-local", None, 4, 1, 26.0, 3, True)]


def test_a_measured_shape_shows_its_best_split_exactly(stored):
    b = basis(stored)
    assert b.shapes == sorted([C6I.shape, E4.shape])
    c6i = figure(b, C6I)
    # Best of 205 (32 x 1) and 236 (16 x 2) on the first host; the second host's 100 is
    # neither averaged in nor picked.
    assert (c6i.throughput, c6i.estimate, c6i.p99_ms) == (236.0, False, 41.0)
    assert c6i.assumption == "measured on c6i.8xlarge (16 threads x 2 replicas; median of 3 runs)"
    e4 = figure(b, E4)
    assert (e4.throughput, e4.estimate, e4.p99_ms) == (160.0, False, 21.0)
    assert e4.assumption == ("measured on VM.Standard.E4.Flex 16 OCPU/32 GB (32 threads x "
                             "1 replica; median of 3 runs)")


def test_an_unmeasured_shape_is_an_estimate_per_physical_core_from_the_best_split(stored):
    b = basis(stored)
    # The benchmark machine has 2 threads per core: 4 threads are 2 cores. At 2 cores the
    # best split is 2 threads x 2 replicas (28.4/s, over 4 x 1 at 26.0 and 1 x 4 at 27.0):
    # 14.2/s per core, times E5's 16 OCPUs (16 cores).
    assert (b.best_source.threads, b.best_source.replicas, b.best_source.cores) == (2, 2, 2.0)
    e5 = figure(b, E5)
    assert e5.estimate and e5.p99_ms is None
    assert e5.throughput == pytest.approx(14.2 * 16)
    assert e5.assumption == ("estimate: 14.2 samples/s per core from CPU of sys-local (best "
                             "split 2 threads x 2 replicas at 2 cores) scaled to 16 cores")
    # A 16-vCPU AWS machine is 8 cores: half of that, not the vCPU count's figure.
    assert figure(b, CATALOG["c6i.4xlarge"]).throughput == pytest.approx(14.2 * 8)
    assert figure(b, CATALOG["c7g.8xlarge (Graviton3)"]) is None  # x86 figures stay on x86


def test_a_split_that_uses_part_of_the_shape_is_scaled_to_it_as_an_estimate():
    # 4 threads on SMT siblings: 2 of c6i.8xlarge's 16 cores; a machine is paid for whole
    rows = [{"threads": 4, "replicas": 1, "throughput": 40.0, "runs": 2,
             "threads_per_core": 2, "machine_shape": C6I.shape, "selected": False}]
    f = figure(basis(rows), C6I)
    assert (f.throughput, f.estimate, f.p99_ms) == (320.0, True, None)
    assert f.assumption == ("estimate: measured on c6i.8xlarge on 2 of its 16 cores (4 threads "
                            "x 1 replica: 40.0 samples/s, median of 2 runs), scaled to the "
                            "whole machine at 20.0 samples/s per core; assumes the other cores "
                            "serve as many")
    assert figure(basis(rows), E5) is None  # no selected machine: nothing to estimate from


def test_the_c6i_worked_example_is_priced_scaled_not_as_the_whole_machine():
    # 2 threads pinned one per core (2 cores) at 100 samples/s: priced as the whole
    # c6i.8xlarge ($1.36/h) that was $1.36 / (100 x 3,600) x 1e6 = $3.78 per 1 M; scaled to
    # its 16 cores, 800/s: $1.36 / (800 x 3,600) x 1e6 = $0.47.
    rows = [{"threads": 2, "replicas": 1, "throughput": 100.0, "runs": 3, "cores_used": 2,
             "threads_per_core": 2, "machine_shape": C6I.shape, "selected": False}]
    assert round(C6I.usd_per_hour / (100 * 3600) * 1e6, 2) == 3.78
    [row] = machine_rows([C6I], basis(rows))
    assert (row["throughput"], row["estimate"]) == (800.0, True)
    assert round(row["cost_per_million"], 2) == 0.47
    assert row["assumption"].startswith("estimate: measured on c6i.8xlarge on 2 of its 16 "
                                        "cores (2 threads x 1 replica: 100.0 samples/s")
    # A split that fills the shape is measured and wins over the scaled one, even if lower.
    full = {**rows[0], "threads": 16, "replicas": 2, "throughput": 700.0, "cores_used": 16}
    [row] = machine_rows([C6I], basis(rows + [full]))
    assert (row["throughput"], row["estimate"], round(row["cost_per_million"], 2)) == (
        700.0, False, 0.54)
    versus = machine_vs_machine([C6I, E4], basis(rows + [
        {**rows[0], "machine_shape": E4.shape, "throughput": 50.0}]), 800.0)
    # cheapest per 1 M first: E4 at $0.448/h and 400/s ($0.31) before c6i ($0.47)
    assert [(r["machine"], r["samples/s"], r["configuration"]) for r in versus] == [
        (f"OCI {E4.shape}", 400.0, "2 threads x 1 replica (2 of 16 cores; estimate scaled to "
                                   "the whole machine)"),
        ("AWS c6i.8xlarge", 800.0, "2 threads x 1 replica (2 of 16 cores; estimate scaled to "
                                   "the whole machine)")]


def test_machine_vs_machine_sets_the_measured_shapes_side_by_side(stored):
    rows = machine_vs_machine(list(CATALOG.values()), basis(stored), 500.0, hours=730)
    assert [r["machine"] for r in rows] == [f"OCI {E4.shape}", "AWS c6i.8xlarge"]
    oci, aws = rows
    assert (oci["samples/s"], oci["p99 ms"], oci["configuration"], oci["machines"]) == (
        160.0, 21.0, "32 threads x 1 replica", 4)
    assert oci["p99 samples"] == 3  # each round timed 3 samples (ok_record)
    assert oci["USD per 1 M"] == pytest.approx(E4.usd_per_hour / (160 * 3600) * 1e6)
    assert oci["USD/month"] == pytest.approx(E4.usd_per_hour * 730 * 4)
    assert (aws["samples/s"], aws["machines"]) == (236.0, 3)
    assert aws["USD/month"] == pytest.approx(C6I.usd_per_hour * 730 * 3)


def test_rows_fleet_and_contenders_use_the_same_figures(stored):
    b = basis(stored)
    table = {r["shape"]: r for r in machine_rows([C6I, E4, E5], b)}
    assert [(s, r["throughput"], r["estimate"]) for s, r in table.items()] == [
        (C6I.shape, 236.0, False), (E4.shape, 160.0, False),
        (E5.shape, pytest.approx(227.2), True)]
    assert table[C6I.shape]["cost_per_million"] == pytest.approx(
        C6I.usd_per_hour / (236 * 3600) * 1e6)
    fleet = {r["machine"]: r for r in fleet_rows([C6I, E5], b, 472.0)}
    assert (fleet["AWS c6i.8xlarge"]["machines"], fleet[f"OCI {E5.shape}"]["machines"]) == (2, 3)
    tf = [{**r, "contender": "tensorflow (tf_function)", "throughput": r["throughput"] / 2}
          for r in stored]
    out = contender_rows(stored + tf, C6I)
    assert [(r["machine"], r["throughput"]) for r in out] == [
        ("tensorflow (tf_function)", 118.0), ("torch (eager)", 236.0)]


def test_training_is_priced_from_a_shape_it_was_measured_on(db_path):
    from dataclasses import replace

    from store.runs import save_record
    from seeds.records import SYSTEM, seed_workloads, train_record
    from tests.conftest import seed_once

    seed_once(seed_workloads, db_path)
    with open_db(db_path) as con:
        rec = train_record("t-c6i", "torch", [0.5, 0.5], [0.5, 0.8])
        save_record(con, replace(rec, sweep_id="sweep-c6i", system_id="sys-c6i",
                                 machine_shape=C6I.shape, threads_per_core=2,
                                 throughput=1000.0),
                    {**SYSTEM, "system_id": "sys-c6i"})
        rows = machine_throughput(con, "train", ("cpu", "fp32", 1, SYSTEM["system_id"]))
    out = {(r["contender"], r["shape"]): r for r in
           training_rows(rows.to_dict("records"), [C6I, E5])}
    c6i = out[("torch (eager)", C6I.shape)]
    # One thread on a host of 2 threads per core (no cores counted: half a core) used part
    # of the shape: scaled to its 16 cores, 32 x 1000/s, an estimate (issue 26).
    assert (c6i["throughput"], c6i["estimate"]) == (32000.0, True)
    assert c6i["s_per_epoch"] == pytest.approx(128 / 32000)
    # The selected machine's torch run: 1 thread on a host with 2 threads per core is half
    # a core, so 16 cores are 32 of its 1-thread figure; TensorFlow has no c6i run.
    local = rows[rows.selected & (rows.contender == "torch (eager)")].throughput.iloc[0]
    e5 = out[("torch (eager)", E5.shape)]
    assert e5["estimate"] and e5["throughput"] == pytest.approx(local * 32)
    assert out[("tensorflow (tf_function)", C6I.shape)]["estimate"]


def test_the_cores_a_worker_counted_beat_the_threads_per_core_rule():
    """2 threads pinned to two whole cores of an SMT host are 2 cores, not 2 / 2: the
    worker's count (extra.cores_used) is what the per-core figure divides by."""
    row = {"threads": 2, "replicas": 1, "throughput": 100.0, "runs": 3,
           "threads_per_core": 2, "machine_shape": None, "selected": True}
    counted = figure(basis([{**row, "cores_used": 2}]), C6I)
    assumed = figure(basis([row]), C6I)
    assert (counted.throughput, assumed.throughput) == (50.0 * 16, 100.0 * 16)
    assert "at 2 cores" in counted.assumption and "at 1 core" in assumed.assumption


def test_an_arm_machine_is_no_source_for_x86_estimates():
    row = {"threads": 2, "replicas": 1, "throughput": 100.0, "runs": 3,
           "threads_per_core": 1, "machine_shape": None, "selected": True}
    arm = {**row, "platform": "Linux-6.1.0-aarch64-with-glibc2.36"}
    x86 = {**row, "platform": "Linux-6.1.0-x86_64-with-glibc2.36"}
    assert figure(basis([arm]), C6I) is None
    assert figure(basis([x86]), C6I).throughput == 50.0 * 16


def test_training_runs_without_an_epoch_length_get_no_epoch_cost():
    row = {"model": "resnet18", "contender": "torch (eager)", "batch_size": 32,
           "dataset": "digits", "image_size": 32, "threads": 2, "replicas": 1,
           "throughput": 100.0, "runs": 1, "threads_per_core": 1, "machine_shape": None,
           "selected": True}
    assert training_rows([{**row, "samples_per_epoch": None}], [C6I]) == []
    [priced] = training_rows([{**row, "samples_per_epoch": 1600}], [C6I])
    assert (priced["samples_per_epoch"], priced["s_per_epoch"]) == (1600, 1600 / (50.0 * 16))
