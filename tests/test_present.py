"""The dashboard's tables and charts, built without a browser: the cells, the highlighted
best cells and the labels each page draws."""

import pandas as pd
import pytest

from engine.analysis.compare import aggregate
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
    df, best, n_rounds, contests = compare_frame(aggregate(rounds))
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
              "extras": 0.0, "total": 300.0, "estimate": False, "assumption": "measured"},
             {"machine": "AWS B", "provider": "AWS", "machines": 3, "compute": 2900.0,
              "extras": 0.0, "total": 2900.0, "estimate": True, "assumption": "estimate"}]
    fig = fleet_bars(fleet, 250.0, 32)
    labels = {y: t for trace in fig.data for y, t in zip(trace.y, trace.text)}
    assert labels == {"OCI A": "$300 · 1 machine", "AWS B": "$2,900 · 3 machines"}
    assert fig.layout.title.text.startswith("Monthly cost for 250 samples/s (≈32-vCPU")


def test_gflops_use_one_flop_count_for_every_framework():
    from dataclasses import replace

    from engine.run.records import FLOP_BASIS, one_flop_count
    from tests.helpers import ok_record
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
    assert f"  resnet18: {CATALOG['resnet18'].note}" in compare_table(aggregate(rounds))
    assert architecture_notes(aggregate(rounds[:1])) == []  # one framework: nothing crossed
