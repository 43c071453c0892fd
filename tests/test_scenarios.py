"""The scenario registry: every kind of work, what each hook gives for fixed inputs, and the
job requests every kind shares. No framework and no worker is needed."""

import ast
from dataclasses import replace

import pytest

from engine.run.search.batch_search import BatchSearchRequest
from engine.run.jobs.requests import LoadRequest, SweepRequest, TrainRequest
from engine.run.jobs.serve_request import ServeRequest
from engine.scenarios import DATA_LOADING, INFERENCE, SCENARIOS, SERVING, TRAINING, scenario_of
from engine.scenarios.dataload.spec import LoadSpec
from engine.scenarios.generation.spec import GenSpec
from engine.scenarios.genserve.spec import GenServeSpec
from engine.scenarios.inference.spec import RunSpec
from engine.scenarios.training.spec import TrainSpec
from engine.core.errors import UserError
from engine.scenarios.serving.spec import SCENARIO_INPUTS, SERVE_SCENARIOS, ServeSpec
from engine.core.protocol import Progress, Started
from engine.scenarios.inference.messages import InferenceResult
from engine.scenarios.training.messages import TrainResult
from tests.conftest import ROOT
from seeds.records import failed_record, ok_record


def test_every_spec_type_has_exactly_one_scenario():
    assert {k: s.spec_type for k, s in SCENARIOS.items()} == {
        "inference": RunSpec, "train": TrainSpec, "dataload": LoadSpec, "serve": ServeSpec,
        "generate": GenSpec, "genserve": GenServeSpec}
    for kind, s in SCENARIOS.items():
        assert s.kind == kind == s.spec_type.kind
    assert (SweepRequest.scenario, TrainRequest.scenario, LoadRequest.scenario,
            ServeRequest.scenario) == (INFERENCE, TRAINING, DATA_LOADING, SERVING)
    assert BatchSearchRequest.scenario is INFERENCE  # its probes are inference runs


@pytest.mark.parametrize("kind", sorted(SCENARIOS))
def test_worker_body_is_a_worker_module_with_run_group(kind):
    """Named by module path (the parent never imports it): the file must exist under
    engine/worker/ and define run_group(runs, frame)."""
    body = SCENARIOS[kind].worker_body
    assert body.startswith("engine.worker.")
    path = ROOT / (body.replace(".", "/") + ".py")
    tree = ast.parse(path.read_text())
    defs = {n.name: [a.arg for a in n.args.args] for n in tree.body
            if isinstance(n, ast.FunctionDef)}
    assert defs.get("run_group") == ["runs", "frame"]


def test_specs_round_trip_through_their_scenario():
    run = RunSpec("resnet18", "torch", 8, 2, image_size=64).validate(cores=4)
    train = TrainSpec("resnet18", "torch", 32, 1).validate(cores=4)
    load = LoadSpec("png", "pillow", "numpy", "loop", 8).validate(cores=4)
    for spec in (run, train, load):
        assert scenario_of(spec).spec_from_dict(spec.to_dict()) == spec


def test_record_columns_and_extras_per_kind():
    train = TrainSpec("resnet18", "torch", 32, 1, epochs=2, steps_per_epoch=3,
                      lr=0.05).validate(cores=4)
    load = LoadSpec("png", "pillow", "numpy", "torch_dataloader", 8, workers=2,
                    count=64, image_size=32).validate(cores=4)
    run = RunSpec("resnet18", "torch", 8, 2, image_size=64, profile_steps=3).validate(cores=4)
    assert TRAINING.record_columns(train) == {"dataset": "digits"}
    assert DATA_LOADING.record_columns(load) == {"dataset": "png-64x32px-seed0", "workers": 2}
    assert INFERENCE.record_columns(run) == {"replicas": 1, "contention": "none", "wait_policy": ""}
    assert TRAINING.config_extra(train) == {
        "lr": 0.05, "momentum": 0.9, "optimizer": "sgd", "epochs": 2, "steps_per_epoch": 3,
        "seed": 0, "warmup_steps": 5, "profile_steps": 0, "bn_momentum": 0.1}
    assert DATA_LOADING.config_extra(load) == {
        "count": 64, "decoder": "pillow", "normalize": "numpy",
        "pipeline": "torch_dataloader", "seed": 0}
    assert INFERENCE.config_extra(run) == {"profile_steps": 3}
    assert INFERENCE.config_extra(replace(run, profile_steps=0)) == {}


def test_throughput_is_samples_over_the_total_measured_time():
    run = RunSpec("resnet18", "torch", 8, 2, image_size=64).validate(cores=4)
    # 27 calls of 10 ms and 3 stalls of 30 ms: 240 samples in 0.36 s, not 8 / 10 ms (800/s)
    stalls = [10_000_000] * 27 + [30_000_000] * 3
    res = InferenceResult("r", None, None, (), tuple(stalls), 0.0, 0.36, "policy met")
    assert INFERENCE.throughput(run, res, stalls) == pytest.approx(240 / 0.36)
    train = TrainSpec("resnet18", "torch", 32, 1).validate(cores=4)
    # the measured steps only: the epochs' wall time (warm-up steps included) is not used
    res = TrainResult("t", None, None, (), (100_000_000,) * 4, 0.0, 0.4, "steps",
                      epochs=({"wall_s": 2.0, "samples": 320}, {"wall_s": 3.0, "samples": 320}))
    assert TRAINING.throughput(train, res, [100_000_000] * 4) == pytest.approx(320.0)


def test_progress_is_counted_in_runs_or_in_training_steps():
    train = [TrainSpec("resnet18", "torch", 32, 1, epochs=2, steps_per_epoch=3).validate(cores=4),
             TrainSpec("resnet18", "torch", 64, 1, epochs=2).validate(cores=4)]
    assert TRAINING.progress_total(train) == 2 * 3 + 2 * (1437 // 64)
    assert TRAINING.progress_units(Progress("r", "epoch 1/2", 7)) == 7
    assert TRAINING.progress_units(Started("r", 0.0)) is None
    assert INFERENCE.progress_total([object(), object()]) == 2
    assert INFERENCE.progress_units(Progress("r", "measure", 7)) is None


def test_cli_lines_for_a_measured_and_a_failed_run():
    ok = ok_record()  # resnet18 torch eager b1 t1, p50 2.0 ms
    assert INFERENCE.describe_record(ok) == (
        "resnet18 torch (eager) b1 t1: ok - p50 2.000 ms, 500.0 samples/s, valid")
    assert INFERENCE.describe_record(failed_record()) == (
        "resnet18 torch (eager) b1 t1: error - ValueError: boom")
    spec = RunSpec("resnet18", "torch", 8, 2, image_size=64).validate(cores=4)
    assert INFERENCE.describe_event(spec, Progress("r", "measure", 12)) == \
        "resnet18 torch b8 t2: measure 12 it"
    assert INFERENCE.describe_event(spec, Started("r", 0.0)) == "resnet18 torch b8 t2: start"
    loaded = replace(ok, model="png", runtime="loop:pillow+numpy", workers=0)
    assert DATA_LOADING.describe_record(loaded) == (
        "png loop:pillow+numpy b1 w0 t1: ok - p50 2.00 ms/batch, 500 images/s, valid")
    trained = replace(ok, epochs=({"test_acc": 0.764},))
    assert TRAINING.describe_record(trained) == (
        "resnet18 torch (eager) b1 t1: ok - 500.0 samples/s, step p50 2.0 ms, "
        "test acc 76.4%")


def test_requests_share_rounds_check_duplicate_rule_and_label():
    sweep = SweepRequest(("resnet18",), ("torch",), (1,), (1,), seed=1)
    assert sweep.same_work(replace(sweep, seed=2))
    assert not sweep.same_work(replace(sweep, batch_sizes=(2,)))
    assert not sweep.same_work(TrainRequest(("resnet18",), ("torch",), (1,), (1,)))
    assert sweep.label() == "resnet18 × torch"
    assert TrainRequest(("resnet18", "vgg11"), ("torch", "tensorflow"), (1,), (1,)).label() \
        == "resnet18, vgg11 × torch, tensorflow"
    load = LoadRequest(("png", "jpeg"), ("pillow",), ("numpy",), ("loop",), (8,), (0,), (1,))
    assert load.label() == "png, jpeg × pillow × loop"
    for bad in (0, 101):
        with pytest.raises(UserError) as e:
            replace(load, rounds=bad).specs()
        assert e.value.field == "rounds"
        assert str(e.value) == f"rounds: {bad} is out of range; allowed: integer 1..100"
    specs, skipped = replace(load, decoders=("pillow", "tf_io")).expand()
    assert [s.decoder for s in specs] == ["pillow", "pillow"]
    assert len(skipped) == 2  # tf_io runs only inside tf_data, for both formats


def test_a_serving_request_gives_each_scenario_what_its_row_takes():
    """engine.scenarios.serving.spec.SCENARIO_INPUTS, not the names, decides: the bound reaches
    Server and SingleStream, the rate Server and Offline, a stream's query its own batch (1, 8)
    whatever the max batch; an unknown name is refused as the spec refuses it."""
    assert set(SCENARIO_INPUTS) == set(SERVE_SCENARIOS)
    req = ServeRequest(SERVE_SCENARIOS, "identity", "selftest", max_batch=4, target_qps=50.0,
                       bound_ms=20.0)
    got = {s.scenario: (s.bound_ms, s.target_qps, s.sut.batch_size) for s in req.specs()}
    assert got == {"single-stream": (20.0, None, 1), "multi-stream": (None, None, 8),
                   "server": (20.0, 50.0, 4), "offline": (None, 50.0, 4)}
    with pytest.raises(UserError) as e:
        replace(req, scenarios=("server", "closed-loop")).specs()
    assert str(e.value) == ("scenario: 'closed-loop' is not supported; allowed: single-stream, "
                            "multi-stream, server, offline")
