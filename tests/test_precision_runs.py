"""OpenVINO and the reduced precisions (issue 28 parts 5 and 6) through the real runner and
workers on a tiny model: each output checked against fp32 eager, the error figures counted
and stored, OpenVINO's settings read back; a bf16 TensorFlow run in a worker of its own
beside an fp32 one it leaves alone."""

from __future__ import annotations

import pytest

from engine.core import MeasurementPolicy
from engine.scenarios.inference.spec import RunSpec
from engine.core.precision import BF16_FLAGS, cpu_flags
from engine.run.process.runner import Runner
from store.db import open_db
from store.runs import save_record

POLICY = MeasurementPolicy(warmup_iters=1, min_time_s=0.05, min_iters=3)
HAS_BF16 = any(f in cpu_flags() for f in BF16_FLAGS)
needs_bf16 = pytest.mark.skipif(not HAS_BF16, reason="this CPU has neither avx512_bf16 nor "
                                                     "amx_bf16: bf16 is refused here")


def run(specs):
    return {(r.runtime, r.precision): r
            for r in Runner(timeout_s=300).run(specs, on_record=lambda r: None)}


def spec(runtime, precision="fp32", **kw):
    base = dict(model="mobilenet_v3_small", framework="torch", batch_size=2, intra_threads=1,
                image_size=32, policy=POLICY)
    return RunSpec(**{**base, **kw}, runtime=runtime, precision=precision).validate()


def test_openvino_and_int8_runs_are_checked_counted_and_stored(db_path, worker_env):
    specs = [spec("openvino"), spec("onnxruntime", "int8"), spec("eager", "int8"),
             spec("openvino", options={"ov_hint": "throughput"}, intra_threads=2)]
    if HAS_BF16:
        specs.append(spec("openvino", "bf16"))
    records = Runner(timeout_s=300).run(specs, on_record=lambda r: None)
    by = {(r.runtime, r.precision, r.extra.get("ov_hint")): r for r in records}
    for key, rec in by.items():
        assert rec.status == "ok", (key, rec.reason)
        assert rec.iterations >= 3
    ov = by[("openvino", "fp32", "latency")]
    # fp32 pinned and read back (this CPU's plugin would pick bf16 otherwise), the streams
    # the latency hint gave, the thread count honoured; the output within 0.1 % of eager's
    assert {k: v for k, v in ov.extra.items() if k.startswith("ov_")} == {
        "ov_hint": "latency", "ov_streams": 1, "ov_threads": 1,
        "ov_inference_precision": "f32", "ov_optimal_requests": 1}
    assert 0.0 <= ov.extra["output_rel_diff"] <= 1e-3
    assert ov.prepare_s > 0 and ov.versions["openvino"].startswith("2026.4")
    assert ov.top1_agreement is None and ov.output_max_abs is None  # fp32: no error figures
    tput = by[("openvino", "fp32", "throughput")]
    assert tput.extra["ov_hint"] == "throughput" and tput.extra["ov_threads"] == 2
    assert tput.extra["ov_streams"] >= 1
    for key in [("onnxruntime", "int8", None), ("eager", "int8", None)] + (
            [("openvino", "bf16", "latency")] if HAS_BF16 else []):
        rec = by[key]
        # 64 generated inputs in batches of 2; the error against fp32 eager stored
        assert rec.top1_inputs == 64, key
        assert 0.5 <= rec.top1_agreement <= 1.0, key  # int8's gate (base.INT8_MIN_TOP1)
        assert 0.0 < rec.output_max_rel < 0.2 and rec.output_max_abs > 0, key
        assert 0.0 < rec.extra["output_rel_diff"] <= 0.02, key  # 1 - cosine, the gate
    assert by[("onnxruntime", "int8", None)].extra["ort_quantization"].startswith(
        "quantize_dynamic")
    if HAS_BF16:
        assert by[("openvino", "bf16", "latency")].extra["ov_inference_precision"] == "bf16"
    with open_db(db_path) as con:
        for rec in records:
            save_record(con, rec)
        stored = con.execute("SELECT runtime, precision, top1_inputs, output_max_rel FROM runs "
                             "WHERE precision <> 'fp32' ORDER BY runtime").fetchall()
    assert [(r[0], r[1], r[2]) for r in stored] == sorted(
        (k[0], k[1], 64) for k in by if k[1] != "fp32")


@needs_bf16
def test_a_bf16_tensorflow_run_has_its_own_worker_and_leaves_fp32_alone(worker_env):
    """bf16 first, then fp32 of the same runtime: the fp32 run is checked and timed as
    fp32 (no error figures, within fp32's tolerance of its Keras call)."""
    tf = dict(framework="tensorflow", model="mobilenet_v3_small", image_size=64)
    records = Runner(timeout_s=300).run(
        [spec("tf_function", "bf16", **tf), spec("tf_function", **tf)],
        on_record=lambda r: None)
    by = {r.precision: r for r in records}
    assert by["bf16"].status == "ok" and by["fp32"].status == "ok", [r.reason for r in records]
    assert by["bf16"].top1_inputs == 64 and 0.0 < by["bf16"].output_max_rel < 0.2
    assert 0.0 < by["bf16"].extra["output_rel_diff"] <= 0.02
    assert by["fp32"].top1_agreement is None
    assert by["fp32"].extra["output_rel_diff"] <= 1e-3
    # (the two share no worker: tests/test_precision.py checks the grouping)
