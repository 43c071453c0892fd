"""Where a sweep's wall time went (issue 39 part 4): timed iterations as a share of the wall
time, each worker's import and model build counted once however many runs it made."""

import pytest

from engine.analysis.time_split import time_split
from engine.present.outcome import split_text


def _run(worker, **kw):
    base = dict(import_s=5.0, load_s=2.0, prepare_s=0.5, first_forward_s=0.1, warmup_s=0.4,
                measured_s=2.0, extra={"model_reused": False}, worker=worker)
    return {**base, **kw}


def test_a_workers_import_and_reused_build_count_once_and_timing_is_a_share_of_the_wall():
    runs = [_run((1, "torch")),  # b1: its worker imports and builds
            _run((1, "torch"), extra={"model_reused": True}),  # b8: the same model
            _run((1, "tensorflow"), import_s=8.0, load_s=5.0),
            _run((2, "torch"), import_s=0.1)]  # round 2: a fresh (forked) worker
    split = time_split(runs, 40.0, worker_of=lambda r: r["worker"])
    assert dict(split.phases) == pytest.approx({
        "import": 5.0 + 8.0 + 0.1, "build": 2.0 + 5.0 + 2.0, "prepare": 2.0,
        "first call": 0.4, "warm-up": 1.6})
    assert (split.measuring_s, split.measuring_share, split.runs) == (8.0, 0.2, 4)
    text = split_text(split)
    assert text.startswith("wall 40.0 s over 4 runs, measuring 8.0 s (20 %); ")
    assert text.endswith("import 13.1 s, build 9.0 s, prepare 2.0 s, first call 0.4 s, "
                         "warm-up 1.6 s")


def test_a_run_with_no_phase_times_says_only_the_wall_and_measuring():
    split = time_split([_run(1, import_s=None, load_s=None, prepare_s=None,
                             first_forward_s=None, warmup_s=None, measured_s=None)], 0.0,
                       worker_of=lambda r: r["worker"])
    assert (split.measuring_share, split_text(split)) == (
        0.0, "wall 0.0 s over 1 runs, measuring 0.0 s (0 %)")


def test_a_fork_servers_import_counts_once_with_the_worker_that_waited_for_it():
    """A forked worker imports nothing itself (~0.03 s); its server's import, paid once per
    sweep while its first worker waited, is stored on that worker's runs and counted as
    that worker's import, once however many runs the worker made."""
    waited = {"model_reused": False, "fork_server_import_s": 3.9}
    runs = [_run((1, "tensorflow"), import_s=0.03, extra=waited),
            _run((1, "tensorflow"), import_s=0.03, extra={**waited, "model_reused": True}),
            _run((2, "tensorflow"), import_s=0.02)]  # round 2: the server was ready
    split = time_split(runs, 30.0, worker_of=lambda r: r["worker"])
    assert dict(split.phases)["import"] == pytest.approx(0.03 + 3.9 + 0.02)


def test_a_models_calibration_kept_out_of_its_build_time_counts_once_in_the_build_phase():
    # round 1's worker calibrated (1.9 s, outside load_s) and reused the model for b8;
    # round 2's read the weights from the runner's file: nothing to add
    runs = [_run((1, "tensorflow"), load_s=1.1,
                 extra={"model_reused": False, "weights_from": "calibrated",
                        "calibrate_s": 1.9}),
            _run((1, "tensorflow"), load_s=1.1,
                 extra={"model_reused": True, "weights_from": "calibrated",
                        "calibrate_s": 1.9}),
            _run((2, "tensorflow"), load_s=1.2,
                 extra={"model_reused": False, "weights_from": "file"})]
    split = time_split(runs, 30.0, worker_of=lambda r: r["worker"])
    assert dict(split.phases)["build"] == pytest.approx(1.1 + 1.9 + 1.2)
