"""The dashboard's tables and charts, built without a browser: the cells, the highlighted
best cells and the labels each page draws."""

import pandas as pd
import pytest

from engine.analysis.sweep_verdict import judge_sweep
from engine.present.charts import fleet_bars
from engine.present.frames import BEST_CSS, compare_frame, highlight_cells, load_grid


def _round(framework, batch, round_no, median):
    return {"model": "resnet18", "framework": framework, "runtime": "eager",
            "image_size": 64, "batch_size": batch, "intra_threads": 2, "round_no": round_no,
            "status": "ok", "median_ms": median, "iqr_ms": 0.1, "validity": "valid"}


def test_compare_frame_has_one_row_per_contest_and_stars_the_best():
    rounds = [_round("torch", 1, 1, 10.0), _round("torch", 1, 2, 10.2),
              _round("tensorflow", 1, 1, 20.0), _round("tensorflow", 1, 2, 19.0),
              _round("torch", 8, 1, 80.0), _round("tensorflow", 8, 1, 60.0)]
    df, best, n_rounds, contests = compare_frame(judge_sweep(rounds))
    assert list(df.columns) == ["model", "batch", "threads", "torch (eager)",
                                "tensorflow (eager)"]
    assert df.to_dict("records") == [
        {"model": "resnet18 64px", "batch": 1, "threads": 2,
         # 2 rounds against looks at rounds 2-6: t with 1 degree of freedom, undecided
         "torch (eager)": "★ 10.10 [10.00-10.20]", "tensorflow (eager)": "≈ 19.49 [19.00-20.00]"},
        {"model": "resnet18 64px", "batch": 8, "threads": 2,
         # one paired round has no spread: the best is shown, its gap undecided
         "torch (eager)": "≈ 80.00 [80.00-80.00]", "tensorflow (eager)": "★ 60.00 [60.00-60.00]"}]
    assert best == [(0, "torch (eager)"), (1, "tensorflow (eager)")]
    assert n_rounds == 2 and [c.row for c in contests] == [("resnet18", 64, 1, 2, "none"),
                                                           ("resnet18", 64, 8, 2, "none")]
    styles = highlight_cells(df, best)._compute().ctx
    assert styles[(0, 3)] == [("background-color", "#d4f4dd"), ("font-weight", "bold")]
    assert (0, 4) not in styles and (1, 4) in styles


def test_load_grid_pivots_implementations_and_picks_each_rows_best():
    summary = pd.DataFrame([
        {"workers": 0, "threads": 1, "batch_size": 8, "implementation": "loop:a",
         "ms_per_batch": 5.0, "images_per_s": 1600.0},
        {"workers": 0, "threads": 1, "batch_size": 8, "implementation": "loop:b",
         "ms_per_batch": 4.0, "images_per_s": 2000.0},
        {"workers": 2, "threads": 1, "batch_size": 8, "implementation": "dl:c",
         "ms_per_batch": 3.5, "images_per_s": 2285.7}])
    shown, best = load_grid(summary, "ms_per_batch")
    assert shown.to_dict("records") == [
        {"workers": 0, "threads": 1, "batch_size": 8, "dl:c": "–", "loop:a": "5.00",
         "loop:b": "4.00"},
        {"workers": 2, "threads": 1, "batch_size": 8, "dl:c": "3.50", "loop:a": "–",
         "loop:b": "–"}]
    assert best == [(0, "loop:b"), (1, "dl:c")]
    _, best_rate = load_grid(summary, "images_per_s")  # a rate: the highest is best
    assert best_rate == [(0, "loop:b"), (1, "dl:c")]
    assert BEST_CSS.startswith("background-color")


def test_fleet_bars_label_each_machine_with_its_total_and_count():
    fleet = [{"machine": "OCI A", "provider": "OCI", "machines": 1, "compute": 300.0,
              "extras": 0.0, "total": 300.0, "estimate": False, "assumption": "measured",
              "memory_gb": 32.0},
             {"machine": "AWS B", "provider": "AWS", "machines": 3, "compute": 2900.0,
              "extras": 0.0, "total": 2900.0, "estimate": True, "assumption": "estimate",
              "memory_gb": 64.0}]
    fig = fleet_bars(fleet, 250.0, 32)
    labels = {y: t for trace in fig.data for y, t in zip(trace.y, trace.text)}
    # each bar says its machines' memory: 32 GB against 64 GB is not like with like
    assert labels == {"OCI A": "$300 · 1 machine · 32 GB",
                      "AWS B": "$2,900 · 3 machines · 64 GB"}
    assert fig.layout.title.text.startswith("Monthly cost for 250 samples/s (≈32-vCPU")


def test_cost_bars_name_memory_where_the_machines_compared_differ_in_it():
    from engine.present.charts import cost_bars, memory_note
    from engine.present.charts_workloads import training_cost_bars

    rows = [{"machine": "OCI A", "provider": "OCI", "cost_per_million": 0.5,
             "estimate": True, "assumption": "est", "memory_gb": 32.0},
            {"machine": "AWS B", "provider": "AWS", "cost_per_million": 1.25,
             "estimate": False, "assumption": "measured", "memory_gb": 64.0}]
    fig = cost_bars(rows, "cost_per_million", "t", "USD")
    assert {y: t for tr in fig.data for y, t in zip(tr.y, tr.text)} == {
        "OCI A": "$0.50 (est.) · 32 GB", "AWS B": "$1.25 · 64 GB"}
    # one memory size (framework vs framework on one machine), or unknown: nothing added
    assert memory_note([{**r, "memory_gb": 64.0} for r in rows]) == {}
    assert memory_note([rows[0], {**rows[1], "memory_gb": 0.0}]) == {}
    train = [{**r, "model": "m", "contender": "torch (eager)", "batch_size": 8} for r in rows]
    assert [t.name for t in training_cost_bars(train).data] == ["OCI A · 32 GB",
                                                                "AWS B · 64 GB"]


def test_gflops_use_one_flop_count_for_every_framework():
    from dataclasses import replace

    from engine.run.process.records import FLOP_BASIS, one_flop_count
    from seeds.records import ok_record
    torch_run = ok_record("t", samples=(2_000_000,) * 3)  # 1 GFLOP per sample, 2 ms
    assert one_flop_count(torch_run, None).gflops_per_s == pytest.approx(500.0)
    tf_run = replace(torch_run, framework="tensorflow", runtime="tf_function",
                     flops_per_sample=1_700_000_000)  # TF's profiler counts more ops
    same = one_flop_count(tf_run, 1_000_000_000)
    assert same.gflops_per_s == pytest.approx(500.0)  # the torch count, not TF's own
    assert same.flops_per_sample == 1_700_000_000 and same.extra["gflops_basis"] == FLOP_BASIS
    none = one_flop_count(tf_run, None)
    assert none.gflops_per_s is None and none.extra["gflops_basis"].startswith(
        "no torch FLOP count stored for resnet18 at 64 px")


def test_comparisons_across_frameworks_state_the_architecture_differences():
    from engine.analysis.compare import aggregate
    from engine.present.tables import architecture_notes, compare_table
    from engine.core.catalog import CATALOG
    rounds = [_round("torch", 1, 1, 10.0), _round("tensorflow", 1, 1, 20.0)]
    assert architecture_notes(aggregate(rounds)) == [("resnet18", CATALOG["resnet18"].note)]
    assert f"  resnet18: {CATALOG['resnet18'].note}" in compare_table(judge_sweep(rounds))
    assert architecture_notes(aggregate(rounds[:1])) == []  # one framework: nothing crossed


# -- the Run page's forms (engine/present/run_form.py) ----------------------------------------

def test_the_run_forms_text_boxes_parse_into_values_or_name_the_field():
    from engine.core.errors import UserError
    from engine.present.run_form import (batch_sizes, default_threads, parse_image_size,
                                         parse_time_budget, split_batches)

    assert split_batches([3, 8, 48, 1]) == ([8, 1], "3,48")
    assert split_batches([]) == ([], "")
    assert batch_sizes([8, 1], "3, 48 8") == [8, 1, 3, 48]  # a preset typed again: once
    assert parse_time_budget("  ") is None and parse_time_budget("900") == 900.0
    assert parse_image_size("") is None and parse_image_size("64") == 64
    assert default_threads(16, 4) == [4] and default_threads(2, 8) == [2]
    for call, message in (
            (lambda: batch_sizes([1], "0"),
             "batch_size: 0 is out of range; allowed: integer 1..4096"),
            (lambda: parse_time_budget(" soon "),
             "time_budget_s: 'soon' is not a number; allowed: number 1..86400"),
            # from 1: a token model's sequence length; each model's own range is
            # RunSpec's (a 16 px resnet18 is refused there: tests/test_encoders.py)
            (lambda: parse_image_size("0"),
             "image_size: 0 is out of range; allowed: integer 1..1024")):
        with pytest.raises(UserError) as exc:
            call()
        assert str(exc.value) == message and exc.value.field == message.split(":")[0]


def test_the_run_forms_labels_count_what_is_known_at_the_native_size():
    from engine.present.run_form import model_facts, model_label, runtime_label

    info = pd.DataFrame([
        {"model": "resnet18", "framework": "torch", "image_size": 224, "params": 11_689_512,
         "flops_per_sample": 1_818_563_584},
        {"model": "resnet18", "framework": "tensorflow", "image_size": 224,
         "params": 11_699_112, "flops_per_sample": None},
        {"model": "resnet18", "framework": "torch", "image_size": 64, "params": 11_689_512,
         "flops_per_sample": 148_000_000},  # another size: another model's count
        {"model": "my_net", "framework": "torch", "image_size": 224, "params": 1,
         "flops_per_sample": 1}])  # not the catalog's
    facts = model_facts(info)
    assert sorted(facts) == [("resnet18", "tensorflow"), ("resnet18", "torch")]
    label = model_label(facts)
    assert label("resnet18") == ("resnet18  ·  224px, 11.7M params, 1.82 GFLOPs (torch), "
                                 "11.7M params (keras)")
    assert label("efficientnet_b0") == "efficientnet_b0  ·  224px"
    assert runtime_label("eager") == "eager (torch)"
    assert runtime_label("tf_function") == "tf_function (tensorflow)"


def test_the_run_forms_sentences_say_what_will_run():
    from types import SimpleNamespace

    from engine.core.budget import RoundBudget
    from engine.present.run_form import launched, load_summary, sweep_summary, train_summary

    assert sweep_summary(4, RoundBudget(3, 6), 1, 90.0) == (
        "**4 configurations × 3 rounds = 12 runs** (up to 6 rounds for undecided contests), "
        "rough estimate for the minimum ≈ 1.5 min")
    assert sweep_summary(1, RoundBudget(1, 1), 1, 6.0) == (
        "**1 configuration × 1 round = 1 run**, rough estimate for the minimum ≈ 0.1 min")
    assert sweep_summary(2, RoundBudget(3, 8, 900.0), 2, 600.0) == (
        "**2 configurations × 3 rounds × 2 node kinds = 12 runs** (up to 8 rounds for "
        "undecided contests, within 900 s), rough estimate for the minimum ≈ 10.0 min")
    train = [SimpleNamespace(epochs=2, steps_in_epoch=lambda: 5)] * 4
    assert train_summary(train) == "**4 training runs** of 2 epoch(s) × 5 steps"
    assert train_summary(train[:1]) == "**1 training run** of 2 epoch(s) × 5 steps"
    load = [SimpleNamespace(runtime=r) for r in ("loop:pillow+numpy", "loop:pillow+numpy",
                                                 "loop:opencv+numpy")]
    assert load_summary(load) == "**3 data-loading runs** of 2 implementation(s)"
    assert launched("Sweep", 1, True) == "Sweep job 1 starts now."
    assert launched("Training", 7, False) == "Training job 7 is queued."


# -- the Cost page's sentences (engine/present/cost_text.py) ----------------------------------

def test_the_cost_pages_sentences_come_from_the_figures():
    from engine.analysis.cost import cpu_shapes, custom_machine, load_catalog, oci_vs_aws
    from engine.analysis.cost_machines import Basis, Figure, Split
    from engine.present.cost_text import (break_even_defaults, break_even_text,
                                          catalog_frame, claim_text, extras_caption,
                                          figure_caption, source_caption,
                                          versus_missing_text)

    from engine.analysis.cost import load_unit_rates
    rates = load_unit_rates()
    catalog = load_catalog(rates=rates)
    cpu = cpu_shapes(catalog)
    # Before: "**OCI VM.Standard.E3.Flex 16 OCPU/32 GB** costs **$327.04/month** ... AWS
    # c6i.8xlarge [64 GB] ... 3.04x": 32 GB against 64 GB.
    assert claim_text(oci_vs_aws(cpu, rates, hours=730), 730) == (
        "At catalog list prices, **OCI VM.Standard.E3.Flex 16 OCPU/64 GB** (32 vCPUs, 64 GB) "
        "costs **$362.08/month**; the cheapest 32-vCPU x86 AWS machine, **AWS c6i.8xlarge** "
        "(32 vCPUs, 64 GB), costs **$992.80/month** — 2.74x at 64 GB each (OCI Flex shapes "
        "are priced at the AWS machine's memory from OCI's unit rates, as in the table); list "
        "prices as of 2026-03-03 (OCI) and 2026-09-24 (AWS, us-east-1). On OCI x86 one OCPU is two vCPUs, so 16 OCPUs match 32 vCPUs; per-inference cost also "
        "depends on the throughput each machine reaches, below.")
    assert claim_text(oci_vs_aws([m for m in cpu if m.provider == "OCI"], rates), 730) is None
    # Only a fixed OCI shape with more memory than the AWS machine: said, not hidden.
    fixed = [m for m in cpu if m.shape.startswith("VM.Standard2.16")]
    aws = [m for m in cpu if m.shape == "c6i.8xlarge"]
    assert "— 1.33x with OCI's 240 GB against AWS's 64 GB; list prices" in claim_text(
        oci_vs_aws(fixed + aws, rates, hours=730), 730)
    frame = catalog_frame(catalog[:2])
    assert list(frame.columns) == ["provider", "shape", "region", "vCPUs", "OCPUs",
                                   "threads/core", "memory GB", "accelerator", "USD/hour",
                                   "basis", "source", "as of", "secondary source",
                                   "check at (first party)"] and len(frame) == 2

    one = Split(threads=1, replicas=1, throughput=100.0, runs=3, threads_per_core=2,
                machine="Test CPU")
    two = Split(threads=2, replicas=2, throughput=350.0, runs=3, threads_per_core=2,
                machine="Test CPU")
    assert source_caption(Basis((), ())) is None
    assert source_caption(Basis((two, one), ())) == (
        "Selected machine: Test CPU (2 threads per core): 1 thread x 1 replica: 100.0 "
        "samples/s, 2 threads x 2 replicas: 350.0 samples/s.")
    mine = custom_machine(0.5, 8)
    assert figure_caption(Figure(700.0, True, "estimate: 175.0 samples/s per core", two,
                                 None), mine) == (
        "Assumption: 175.0 samples/s per core (custom 8 vCPUs: 2 threads per core, assumed "
        "for a price entered by hand).")
    assert figure_caption(Figure(236.0, False, "measured on c6i.8xlarge (16 threads)", two,
                                 41.0), mine) == "Measured on c6i.8xlarge (16 threads)."
    assert extras_caption({"OCI": 1.5, "AWS": 12.25}) == (
        "Included per month: OCI $1.50 storage and egress, AWS $12.25 storage and egress "
        "(GCP and Azure extras not modelled).")
    assert versus_missing_text([{"machine": "AWS c6i.8xlarge"}], "torch (eager)", 8) == (
        "1 shape measured for torch (eager) at batch 8 (AWS c6i.8xlarge): a side-by-side "
        "comparison needs two. Measure on another machine and name its catalog shape: "
        "`python -m engine run ... --machine-shape NAME` (`python -m engine prices list` "
        "prints the names).")
    labels = [m.label for m in cpu]
    b_contender, b_shape = break_even_defaults(["a", "b"], "a", cpu, labels, 32)
    assert b_contender == 1 and labels[b_shape] == "AWS c6i.8xlarge"
    assert break_even_defaults(["a"], "a", cpu, labels[:1], 32) == (0, 0)
    from engine.analysis.break_even import break_even_steps
    assert break_even_text(break_even_steps((500.0, 1.0), (400.0, 2.0), 400.0), 730) == (
        "Up to 400 samples/s the cheaper choice never changes: **A** is cheaper (A 1 machine "
        "$730.00, B 1 machine $1,460.00 up to 400 samples/s).")
    assert break_even_text(break_even_steps((0.1, 1.0), (0.3, 2.9), 0.55), 730).startswith(
        "From 0 to 0.2 samples/s **A** is cheaper")
    # The case: B from 0, A above 7,000 (at 7,000 one B machine still serves it)
    said = break_even_text(break_even_steps((12000, 1.36), (7000, 0.768), 25000), 730)
    assert said == (
        "From 0 to 7,000 samples/s **B** is cheaper (A 1 machine $992.80, B 1 machine "
        "$560.64).  \n"
        "Above 7,000 samples/s → A (A 1 machine $992.80, B 2 machines $1,121.28)  \n"
        "Above 12,000 samples/s → B (A 2 machines $1,985.60, B 2 machines $1,121.28)  \n"
        "Above 21,000 samples/s → A (A 2 machines $1,985.60, B 4 machines $2,242.56)  \n"
        "Above 24,000 samples/s → B (A 3 machines $2,978.40, B 4 machines $2,242.56)  \n"
        "(Up to 25,000 samples/s.) A change at a rate holds just above it: at that rate "
        "itself the fleet before the change still serves it; monthly costs at 730 h.")
    tie = break_even_text(break_even_steps((100.0, 1.0), (250.0, 2.0), 300), 730)
    assert tie.startswith("From 0 to 100 samples/s **A** is cheaper (A 1 machine $730.00, B 1 "
                          "machine $1,460.00).  \nAbove 100 samples/s → same cost (A 2 "
                          "machines $1,460.00, B 1 machine $1,460.00)  \nAbove 200 samples/s "
                          "→ B")
    many = break_even_text(break_even_steps((12000, 1.36), (7000, 0.768), 600000), 730)
    assert many.count("→") == 12 and "… and 2 more changes up to 600,000 samples/s." in many


# -- one run on the Results page (engine/present/run_detail.py) -------------------------------

def _run(**kw):
    base = {"kind": "inference", "model": "resnet18", "framework": "torch", "runtime": "eager",
            "batch_size": 8, "intra_threads": 2, "status": "ok", "reason": None,
            "exit_code": None, "signal": None, "stderr_tail": None, "median_ms": 10.1,
            "p90_ms": 10.4, "p99_ms": 11.0, "iqr_ms": 0.2, "throughput": 792.08,
            "iterations": 120, "extra": None}
    return {**base, **kw}


def test_a_runs_title_metrics_and_failure_read_as_the_results_page_shows_them():
    from engine.present.run_detail import (failure_text, profile_caption, run_metrics,
                                           run_title, stderr_tail)

    assert run_title(_run()) == ("inference · resnet18 · torch (eager) · batch 8 · 2 threads · "
                                 "ok")
    assert failure_text(_run()) is None
    assert failure_text(_run(status="oom", reason="ValueError: boom")) == \
        "**oom**: ValueError: boom"
    assert failure_text(_run(status="error", reason="killed", exit_code=-9, signal=9)) == \
        "**error**: killed (exit code -9) (signal 9)"
    assert stderr_tail(_run(stderr_tail="x" * 3500)) == "x" * 3000
    assert stderr_tail(_run()) == ""
    assert run_metrics(_run()) == [
        ("p50", "10.10 ms", None), ("p90", "10.40 ms", None), ("p99", "11.00 ms", None),
        ("IQR", "0.2000 ms", None),
        ("samples/s", "792.1", "samples processed over the total measured time"),
        ("iterations", "120", None)]
    few = run_metrics(_run(iterations=5, extra={"block_calls": 4}))
    assert few[2] == ("p99 (low confidence)", "11.00 ms",
                      "from 5 samples: below 100, p99 is one of the largest few samples")
    assert few[5] == ("iterations (blocks of 4 calls)", "5", "calls under 1 ms are timed in "
                      "blocks; each sample is a block's time over its calls")
    assert profile_caption(_run(extra={"profile_steps": 3, "profile_step_ms": 12.5}),
                           "iteration") == (
        "3 iterations profiled in a separate pass after the timed one, so the profiler never "
        "touched the figures above: 12.50 ms per profiled iteration against a p50 of 10.10 ms "
        "unprofiled (the difference is the profiler's own overhead). Self time: time in the "
        "operator itself, its children excluded.")


def test_a_runs_timings_say_where_its_time_went_how_it_started_and_how_sure_its_median_is():
    from engine.present.run_detail import TIMING_KEYS, run_timings

    samples = [10_000_000 + 10_000 * (i % 7) for i in range(40)]  # 10.00 .. 10.06 ms
    run = _run(**{k: None for k in TIMING_KEYS}, median_ms=10.03, samples_ns=samples,
               extra={"warmup_stop": "settled", "worker_start": "fork"})
    got = run_timings(run)
    assert [k for k in got][:6] == ["import_s", "load_s", "prepare_s", "first_forward_s",
                                     "warmup_s", "measured_s"]
    # n = 40: the 13th and 28th smallest (six of each value from 10.00 up), 10.02 and
    # 10.04 ms, around the stored median 10.03
    assert (got["worker_start"], got["warmup_stop"], got["median_95pct_interval"]) == (
        "fork", "settled", "-0.10 % / +0.10 %")
    plain = run_timings(_run(**{k: None for k in TIMING_KEYS}, samples_ns=None))
    assert plain["worker_start"] == "spawn"
    assert "warmup_stop" not in plain and "median_95pct_interval" not in plain
    assert "fork_server_import_s" not in got
    first = run_timings(_run(**{k: None for k in TIMING_KEYS}, samples_ns=None,
                             extra={"worker_start": "fork", "fork_server_import_s": 3.9}))
    assert (first["worker_start"], first["fork_server_import_s"]) == ("fork", 3.9)
    assert "weights_from" not in first and "calibrate_s" not in first
    made = run_timings(_run(**{k: None for k in TIMING_KEYS}, samples_ns=None,
                            extra={"weights_from": "calibrated", "calibrate_s": 1.9}))
    read = run_timings(_run(**{k: None for k in TIMING_KEYS}, samples_ns=None,
                            extra={"weights_from": "file"}))
    assert (made["weights_from"], made["calibrate_s"]) == ("calibrated", 1.9)
    assert read["weights_from"] == "file" and "calibrate_s" not in read


# -- the Training page's sentences (engine/present/training_text.py) -------------------------

def test_the_training_pages_accuracy_gap_machines_and_cost_caption():
    from engine.analysis.cost import cpu_shapes, load_catalog
    from engine.present.training_text import (accuracy_gap_text, accuracy_metrics,
                                              cost_caption, final_epochs, measure_label,
                                              priced_machines)

    epochs = pd.DataFrame([
        {"run_id": "t", "framework": "torch", "epoch": 2, "test_acc": 0.8, "train_acc": 0.9},
        {"run_id": "t", "framework": "torch", "epoch": 1, "test_acc": 0.6, "train_acc": 0.7},
        {"run_id": "k", "framework": "tensorflow", "epoch": 1, "test_acc": 0.7,
         "train_acc": 0.75}])
    last = final_epochs(epochs)
    assert sorted(zip(last.run_id, last.epoch)) == [("k", 1), ("t", 2)]
    assert sorted(accuracy_metrics(last, {"t": "torch (eager)", "k": "tf"})) == [
        ("test accuracy · tf", "70.0%", "epoch 1; train accuracy 75.0%"),
        ("test accuracy · torch (eager)", "80.0%", "epoch 2; train accuracy 90.0%")]
    assert accuracy_gap_text(last).startswith(
        "Test-accuracy gap between the runs shown: **10.0 points**. Initialisations differ")
    assert accuracy_gap_text(last[last.framework == "torch"]) is None
    # Both runs recorded the BatchNorm momentum the trainers used (ResNet: torch's 0.1).
    matched = pd.Series([0.1, 0.1], index=["k", "t"])
    assert accuracy_gap_text(last, matched).endswith(
        "(Kaiming in torchvision, Glorot or variance scaling in Keras); BatchNorm momentum "
        "is matched: torchvision's 0.1 (Keras' 0.9) in both; other BatchNorm defaults "
        "(epsilon) stay each framework's, so the curves can part even on identical data "
        "and order.")
    older = pd.Series([float("nan"), 0.1], index=["k", "t"])
    assert "before its momentum was matched (Keras' 0.99 or 0.999" in \
        accuracy_gap_text(last, older)
    assert measure_label(2, 12) == "Measure inference for the 2 configuration(s) without it " \
                                   "(12 runs)"

    cpu = cpu_shapes(load_catalog())
    e4 = next(m for m in cpu if m.shape == "VM.Standard.E4.Flex 16 OCPU/32 GB")
    chosen = priced_machines(cpu, e4, {"c6i.8xlarge"})
    assert chosen[0] == e4 and "OCI" not in {m.provider for m in chosen[1:]}
    assert [m.shape for m in chosen].count("c6i.8xlarge") == 1  # an equivalent: once

    measured = pd.DataFrame([
        {"selected": True, "cpu_model": "Test CPU", "threads": 2, "samples_per_epoch": 1797},
        {"selected": True, "cpu_model": "Test CPU", "threads": 1, "samples_per_epoch": 1797}])
    rows = [{"estimate": True, "assumption": "estimate: 50.0 samples/s per core",
             "shape": "x", "config": ""},
            {"estimate": False, "assumption": "", "shape": "c6i.8xlarge",
             "config": "16 threads x 1 replica"}]
    assert cost_caption(measured, rows) == (
        "Training samples/s over whole epochs (first epoch included), on the selected machine "
        "(Test CPU) at 1 thread, 2 threads; an epoch here is 1,797 samples of this run's data "
        "set and image size, so USD per 1 M samples is the figure to scale to your own data "
        "set. Measured on their shape: c6i.8xlarge (16 threads x 1 replica). Hatched bars are "
        "estimates (no run on the shape, or runs on part of it scaled to the whole machine): "
        "50.0 samples/s per core.")


# -- the System page's lines (engine/present/system_text.py) ----------------------------------

def test_the_system_pages_lines_and_package_versions():
    import streamlit

    from engine.present.system_text import (database_line, machine_line, metric_label,
                                            package_versions, status_line)

    assert package_versions(("streamlit", "no-such-distribution-here")) == [
        {"package": "streamlit", "version": streamlit.__version__},
        {"package": "no-such-distribution-here", "version": "not installed"}]
    info = {"cpu_model": "Test CPU @ 2 GHz", "sockets": 1, "platform": "Linux-6.1-x86_64",
            "python": "3.11.7", "hostname": "box"}
    assert machine_line(info, None) == (
        "**CPU** Test CPU @ 2 GHz · 1 socket(s) · **OS** Linux-6.1-x86_64 · **Python** 3.11.7 "
        "· **host** box · **project commit** `unknown`")
    assert database_line("/d/bench.duckdb", 3 * 2**20, ["m001_initial", "m002_x"]) == (
        "`/d/bench.duckdb` · 3.0 MiB on disk · migrations: m001_initial, m002_x")
    assert status_line({"ok": 16, "oom": 1}) == "Runs by status: **ok** 16 · **oom** 1"
    assert metric_label("run_samples") == "run samples"


def test_compare_names_each_sweep_by_its_rounds():
    from engine.present.tables import round_sweep_labels

    sweeps = pd.DataFrame([{"sweep_id": "0123456789abcdef", "created_at": "2026-11-21 12:00:05",
                            "rounds": 1, "models": ["resnet18"]},
                           {"sweep_id": "fedcba9876543210", "created_at": "2026-11-20 09:30:00",
                            "rounds": 3, "models": ["resnet18", "vgg16"]}])
    assert round_sweep_labels(sweeps, "all") == {
        None: "all", "0123456789abcdef": "sweep 01234567 · 2026-11-21 12:00 · 1 round · resnet18",
        "fedcba9876543210": "sweep fedcba98 · 2026-11-20 09:30 · 3 rounds · resnet18, vgg16"}


def test_a_commands_not_ok_line_and_exit_status_name_each_status():
    from engine.present.outcome import not_ok_text, runs_exit
    sample = ["ok", "invalid", "ok", "error", "ok", "ok"]
    assert not_ok_text(sample) == "2 not ok: 1 error, 1 invalid"
    assert runs_exit(sample) == 1
    assert not_ok_text(["oom", "killed", "timeout", "error", "killed"]) == \
        "5 not ok: 1 error, 1 timeout, 1 oom, 2 killed"
    assert (not_ok_text(["ok", "ok"]), runs_exit(["ok", "ok"])) == ("all ok", 0)


def test_a_batch_search_fails_on_anything_but_the_oom_it_bisects_after():
    from engine.present.outcome import search_outcome
    # Doubling fitted 1..64, 128 ran out of memory, bisection 96 fitted, 112 and 104 did not.
    probes = ["ok"] * 7 + ["oom", "ok", "oom", "oom"]
    assert search_outcome(probes, 96) == (
        0, "11 probes; none failed; 3 out of memory, as a search expects")
    assert search_outcome(["ok", "ok"], 2) == (0, "2 probes; none failed")
    assert search_outcome(["ok", "timeout"], 1) == (1, "2 probes; 1 failed: 1 timeout")
    assert search_outcome(["ok", "killed", "oom"], 1) == (
        1, "3 probes; 1 failed: 1 killed; 1 out of memory")
    assert search_outcome(["oom"], None) == (
        1, "1 probes; no batch fits: every probe ran out of memory")


def test_a_missing_value_is_none_nan_or_pandas_na():
    """DuckDB gives a NULL INTEGER to pandas 3 as pd.NA, whose `!=` raises when tested:
    every empty cell reads as missing, and the tables that print them show it empty."""
    import duckdb
    import pandas as pd

    from engine.present.tables import p99_text
    from engine.present.values import missing

    frame = duckdb.connect().execute(
        "SELECT * FROM (VALUES (1, 2.5), (NULL, NULL)) t(size, p99)").df()
    assert frame["size"][1] is pd.NA and missing(frame["size"][1])
    assert [missing(v) for v in (None, float("nan"), pd.NaT, 0, 0.0, "", "x")] == [
        True, True, True, False, False, False, False]
    assert p99_text(2.5, frame["size"][1]) == "2.50 (n=0, low conf.)"
    assert p99_text(frame["p99"][1], 5) == ""
