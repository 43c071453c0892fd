"""Precision as a dimension (issue 28 part 6), without a worker: which runtime runs which
precision and why the others are refused (CPU flags injected), the error figures on fixed
arrays, the worker a bf16 TensorFlow run gets, and what the pages say from fixed rows."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from engine.scenarios.inference.expand import expand_sweep
from engine.scenarios.inference.spec import RunSpec
from engine.core.errors import UserError
from engine.core.precision import cpu_flags, parse_cpu_flags
from engine.present.precision_text import precision_table, speedup_text, with_vs_fp32
from engine.run.process.runner import worker_groups
from engine.worker.backends.base import (OutputError, OutputMismatch, check_agreement,
                                         error_batches, output_error)
from store.db import open_db
from store.precision import precision_vs_fp32
from store.runs import save_record
from seeds.records import SYSTEM, ok_record

NO_BF16 = ("avx512f", "avx512_vnni")
BF16 = ("avx512f", "avx512_bf16")


def refusal(flags=None, **kw) -> UserError:
    base = dict(model="resnet18", framework="torch", batch_size=1, intra_threads=1)
    with pytest.raises(UserError) as info:
        RunSpec(**{**base, **kw}).validate(cores=2, flags=flags)
    assert info.value.field == "precision"
    return info.value


@pytest.mark.parametrize("kw, flags, message", [
    (dict(framework="tensorflow", precision="bf16"), NO_BF16,
     "precision: bf16 is not supported by tensorflow tf_function: this CPU has neither "
     "avx512_bf16 nor amx_bf16: bf16 would be emulated in fp32 instructions, slower than fp32; "
     "allowed for it here: fp32"),
    (dict(runtime="openvino", precision="bf16"), NO_BF16,
     "precision: bf16 is not supported by torch openvino: this CPU has neither avx512_bf16 nor "
     "amx_bf16: bf16 would be emulated in fp32 instructions, slower than fp32; allowed for it "
     "here: fp32"),
    (dict(runtime="openvino", precision="int8"), BF16,
     "precision: int8 is not supported by torch openvino: OpenVINO's int8 needs weights "
     "quantized by NNCF, which is not installed; the CPU plugin's own "
     "DYNAMIC_QUANTIZATION_GROUP_SIZE quantizes activations only of fully-connected layers "
     "whose weights are already compressed; allowed for it here: fp32, bf16"),
    (dict(runtime="onnxruntime", precision="bf16"), BF16,
     "precision: bf16 is not supported by torch onnxruntime: ONNX Runtime 1.31's CPU execution "
     "provider has no bfloat16 kernel for Conv, MatMul, Relu or Add (NOT_IMPLEMENTED when a "
     "session is made); allowed for it here: fp32, int8"),
    (dict(runtime="torchscript", precision="int8"), BF16,
     "precision: int8 is not supported by torch torchscript: torch's dynamic quantization "
     "(quantize_dynamic) covers Linear layers in eager mode only; allowed for it here: fp32, "
     "bf16"),
    (dict(runtime="libtorch", precision="int8"), BF16,
     "precision: int8 is not supported by torch libtorch: the C++ runner loads the frozen fp32 "
     "TorchScript model; allowed for it here: fp32"),
    (dict(framework="tensorflow", precision="int8"), BF16,
     "precision: int8 is not supported by tensorflow tf_function: tensorflow tf_function has "
     "no int8 path in this project; allowed for it here: fp32, bf16"),
])
def test_each_refused_precision_says_why_and_what_the_runtime_allows(kw, flags, message):
    assert str(refusal(flags, **kw)) == message


def test_bf16_on_a_cpu_with_the_instructions_and_int8_where_a_quantizer_exists():
    ok = [RunSpec("resnet18", fw, 1, 1, runtime=rt, precision=p).validate(cores=2, flags=BF16)
          for fw, rt, p in [("tensorflow", "tf_function", "bf16"), ("tensorflow", "keras", "bf16"),
                            ("torch", "openvino", "bf16"), ("torch", "onnxruntime", "int8"),
                            ("torch", "eager", "int8")]]
    assert [(s.runtime, s.precision) for s in ok] == [
        ("tf_function", "bf16"), ("keras", "bf16"), ("openvino", "bf16"),
        ("onnxruntime", "int8"), ("eager", "int8")]
    # torch's own bf16 ran before the flag check and still runs (emulated) anywhere
    assert RunSpec("resnet18", "torch", 1, 1, precision="bf16").validate(
        cores=2, flags=()).precision == "bf16"


def test_the_openvino_hint_is_checked_and_kept_for_openvino_alone():
    """The hint is a runtime option of OpenVINO's row: checked there, its default filled in,
    and refused, naming the field, on a runtime that has no such option."""
    with pytest.raises(UserError) as info:
        RunSpec("resnet18", "torch", 1, 1, runtime="openvino",
                options={"ov_hint": "fast"}).validate(cores=2)
    assert info.value.field == "ov_hint"
    assert str(info.value) == "ov_hint: 'fast' is not supported; allowed: latency, throughput"
    ov = RunSpec("resnet18", "torch", 1, 1, runtime="openvino",
                 options={"ov_hint": "throughput"}).validate(cores=2)
    plain = RunSpec("resnet18", "torch", 1, 1, runtime="openvino").validate(cores=2)
    eager = RunSpec("resnet18", "torch", 1, 1).validate(cores=2)
    assert (dict(ov.options), dict(plain.options), dict(eager.options)) == (
        {"ov_hint": "throughput"}, {"ov_hint": "latency"}, {})
    # the configuration's identity keeps the hint where it was, default included
    assert (ov.key()[-1], plain.key()[-1], eager.key()[-1]) == ("throughput", "latency",
                                                                "latency")
    with pytest.raises(UserError) as info:
        RunSpec("resnet18", "torch", 1, 1, options={"ov_hint": "throughput"}).validate(cores=2)
    assert (info.value.field, str(info.value)) == (
        "ov_hint", "ov_hint: torch eager has no option ov_hint (it is torch openvino's); "
                   "allowed: none")
    # a sweep hands the hint to the runtimes that have it, and checks it once for all
    specs = expand_sweep(["resnet18"], ["torch"], [1], [1], runtimes=["eager", "openvino"],
                         options={"ov_hint": "throughput"}, cores=2)
    assert [(s.runtime, dict(s.options)) for s in specs] == [
        ("eager", {}), ("openvino", {"ov_hint": "throughput"})]
    for bad, message in (({"ov_hint": "fast"}, "ov_hint: 'fast' is not supported; allowed: "
                                               "latency, throughput"),
                         ({"streams": "4"}, "streams: no runtime has an option streams; "
                                            "allowed: ov_hint")):
        with pytest.raises(UserError) as info:
            expand_sweep(["resnet18"], ["torch"], [1], [1], runtimes=["eager"], options=bad,
                         cores=2)
        assert str(info.value) == message


def test_cpu_flags_are_read_from_cpuinfo_the_worker_way(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor : 0\nflags : fpu avx512f amx_bf16 amx_tile\n")
    assert cpu_flags(str(info)) == ("avx512f", "amx_bf16") == parse_cpu_flags(info.read_text())
    assert cpu_flags(str(tmp_path / "missing")) == ()


def test_a_bf16_tensorflow_run_gets_a_worker_of_its_own_and_int8_no_separate_worker():
    tf = RunSpec("resnet18", "tensorflow", 1, 1).validate(cores=2)
    tf16 = replace(tf, precision="bf16")
    eager = RunSpec("resnet18", "torch", 1, 1).validate(cores=2)
    groups = worker_groups([tf, tf16, tf, eager, replace(eager, precision="int8")])
    assert [[s.precision for s in g] for g in groups] == [["fp32"], ["bf16"], ["fp32"],
                                                          ["fp32", "int8"]]


def test_output_error_on_fixed_arrays():
    ref = np.array([[1.0, 5.0, 2.0], [4.0, -8.0, 0.0], [0.5, 0.2, 0.1], [3.0, 2.0, 1.0]])
    got = np.array([[1.5, 4.0, 2.0], [4.0, -7.0, 3.0], [0.4, 0.6, 0.1], [3.0, 2.0, 1.0]])
    err = output_error(ref, got)
    # max |diff| 3.0 (row 2), over max |ref| 8.0; argmax agrees on rows 1, 2 and 4
    assert err == OutputError(max_abs=3.0, max_rel=0.375, top1_agreement=0.75, inputs=4)
    with pytest.raises(OutputMismatch):
        output_error(ref, got[:, :2])
    assert [error_batches(b) for b in (1, 8, 64, 100)] == [64, 8, 1, 1]


def test_int8_is_gated_on_top1_agreement_and_bf16_is_not():
    low = OutputError(0.1, 0.01, 0.4375, 64)
    check_agreement(low, "bf16")  # bf16's gate is the cosine rule alone
    check_agreement(OutputError(0.1, 0.01, 0.8125, 64), "int8")
    with pytest.raises(OutputMismatch) as info:
        check_agreement(low, "int8")
    assert str(info.value) == ("int8 output's top-1 class agrees with fp32 on 43.8% of 64 "
                               "inputs (tolerance >= 50%)")


def test_speedup_text_from_fixed_rows():
    assert speedup_text(10.0, 19.0, 0.992) == "1.9x faster, top-1 agrees on 99.2 % of inputs"
    assert speedup_text(20.0, 10.0, 1.0) == "2.0x slower, top-1 agrees on 100.0 % of inputs"
    assert speedup_text(10.0, None, 0.5) == ("no fp32 run to compare with, top-1 agrees on "
                                             "50.0 % of inputs")
    assert speedup_text(10.0, 19.0, float("nan")) == "1.9x faster"


def test_stored_runs_give_each_reduced_run_its_fp32_baseline(db_path):
    """The baseline is the same configuration's fp32 runs on the same machine: 2 ms and 4 ms
    medians give 3 ms; an int8 run at 1.5 ms is 2.0x faster."""
    ms = lambda v: tuple(int(v * 1e6) for _ in range(3))  # noqa: E731
    runs = [ok_record("f1", samples=ms(2.0), runtime="onnxruntime"),
            ok_record("f2", samples=ms(4.0), runtime="onnxruntime", minute=1),
            replace(ok_record("q1", samples=ms(1.5), runtime="onnxruntime", precision="int8",
                              minute=2), output_max_abs=0.5, output_max_rel=0.05,
                    top1_agreement=0.984375, top1_inputs=64),
            # another batch size has no fp32 run stored
            replace(ok_record("q2", samples=ms(3.0), runtime="onnxruntime", precision="int8",
                              batch_size=2, minute=3), top1_agreement=1.0, top1_inputs=64)]
    with open_db(db_path) as con:
        for r in runs:
            save_record(con, r, SYSTEM)
        reduced = precision_vs_fp32(con, models=["resnet18"])
    assert list(reduced.run_id) == ["q1", "q2"]
    assert reduced.fp32_p50_ms.iloc[0] == pytest.approx(3.0)
    assert reduced.fp32_runs.tolist() == [2, 0]
    table = pd.DataFrame({"run_id": ["f1", "q1", "q2"]})
    assert with_vs_fp32(table, reduced).vs_fp32.tolist() == [
        "", "2.0x faster, top-1 agrees on 98.4 % of inputs",
        "no fp32 run to compare with, top-1 agrees on 100.0 % of inputs"]
    rows = precision_table(reduced)
    assert rows[["runtime", "precision", "batch_size", "vs_fp32", "top1_inputs"]].values.tolist() \
        == [["onnxruntime", "int8", 1, "2.0x faster, top-1 agrees on 98.4 % of inputs", 64],
            ["onnxruntime", "int8", 2, "no fp32 run to compare with, top-1 agrees on "
                                       "100.0 % of inputs", 64]]


def test_results_and_compare_show_the_speedup_beside_the_agreement(db_path, monkeypatch):
    """The seeded sweep's torch eager b1 t1 rounds have p50 10.1 and 10.2 ms: an int8 run of
    the same configuration at 5.075 ms is 2.0x faster."""
    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT
    from seeds.records import seed_sweep
    from tests.conftest import seed_once

    seed_once(seed_sweep, db_path)
    int8 = replace(ok_record("int8-run", samples=(5_075_000,) * 3, minute=40, precision="int8",
                             model="mobilenet_v3_small"),
                   sweep_id="sweep-seeded", top1_agreement=0.921875, top1_inputs=64,
                   output_max_abs=0.0015, output_max_rel=0.023)
    with open_db(db_path) as con:
        save_record(con, int8, SYSTEM)
    monkeypatch.setenv("BENCH_DB", str(db_path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("views/results.py").run()
    assert not at.exception, [e.value for e in at.exception]
    table = at.dataframe[0].value.set_index("run_id")
    said = "2.0x faster, top-1 agrees on 92.2 % of inputs"
    assert table.loc["int8-run", ["precision", "vs_fp32"]].tolist() == ["int8", said]
    assert set(table.drop(index="int8-run").vs_fp32) == {""}
    at.switch_page("views/compare.py").run()
    assert not at.exception, [e.value for e in at.exception]
    [reduced] = [d.value for d in at.dataframe if "vs_fp32" in d.value.columns]
    assert reduced[["runtime", "precision", "batch_size", "vs_fp32", "top1_inputs"]].values \
        .tolist() == [["eager", "int8", 1, said, 64]]


def test_the_cli_refuses_a_bad_hint_or_precision_and_lists_each_runtimes_precisions(
        capsys, db_path):
    from engine.cli import main

    assert main(["run", "--model", "resnet18", "--framework", "torch", "--runtime", "openvino",
                 "--ov-hint", "fast", "--db", str(db_path)]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: ov_hint: 'fast' is not supported; allowed: latency, throughput")
    assert main(["run", "--model", "resnet18", "--framework", "torch", "--runtime", "openvino",
                 "--precision", "int8", "--db", str(db_path)]) == 2
    assert capsys.readouterr().err.startswith(
        "error: precision: int8 is not supported by torch openvino: OpenVINO's int8 needs "
        "weights quantized by NNCF")
    assert not db_path.exists()
    assert main(["runtimes"]) == 0
    rows = {line.split()[1]: line for line in capsys.readouterr().out.splitlines()
            if line.startswith("torch ")}
    assert "fp32, bf16, int8" in rows["eager"] and "fp32, int8" in rows["onnxruntime"]
    assert "fp32, bf16" in rows["openvino"]


def test_the_run_page_submits_the_openvino_hint_and_explains_a_refused_precision(
        db_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from engine.run.jobs.requests import SweepRequest
    from tests.conftest import ROOT
    from tests.test_pages import FakeManager

    fake = FakeManager()
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: fake)
    monkeypatch.setenv("BENCH_DB", str(db_path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("views/run.py").run()
    at.multiselect(key="frameworks").set_value(["torch"])
    at.multiselect(key="runtimes").set_value(["onnxruntime", "openvino"])
    at.selectbox(key="precision").set_value("int8").run()
    assert [e.value for e in at.error] == [
        "precision: int8 is not supported by torch openvino: OpenVINO's int8 needs weights "
        "quantized by NNCF, which is not installed; the CPU plugin's own "
        "DYNAMIC_QUANTIZATION_GROUP_SIZE quantizes activations only of fully-connected layers "
        "whose weights are already compressed; allowed for it here: fp32" + (
            ", bf16" if any(f in cpu_flags() for f in ("avx512_bf16", "amx_bf16")) else "")]
    assert at.button(key="launch").disabled is True
    at.selectbox(key="precision").set_value("fp32")
    at.selectbox(key="ov_hint").set_value("throughput").run()
    at.button(key="launch").click().run()
    [req] = fake.submitted
    assert isinstance(req, SweepRequest) and (req.precision, req.options) == (
        "fp32", {"ov_hint": "throughput"})
    specs, _ = req._expand()
    assert {(s.runtime, s.options.get("ov_hint")) for s in specs} == {
        ("onnxruntime", None), ("openvino", "throughput")}
