"""The generation runtimes, for real, on the tiny Llama (2 layers, width 64; issue 37 part 4):
keras-hub's compiled generate, OpenVINO GenAI (SDPA and paged attention) and ONNX Runtime
GenAI each give Hugging Face eager fp32 greedy's tokens on the same seeded prompts at batch 1
and 2, with clock readings that fit the Timed contract; the weight-only int8/int4 exports
and Keras' quantize() run and agree with the reference on a share fixed by the seed; GPT-2
on ONNX Runtime GenAI is refused with the measured reason; Keras' parameter counts equal
the rows'.

Every framework runs in a subprocess (tests/generation_probe.py): this process imports none,
and the Keras one never imports torch. The probes start together, sharing one model folder
and one export workdir, and each reuses its session across batch sizes (P 16, N 8). Nothing
here asserts a duration: only the order of the readings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.scenarios.generation.models import language_model
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

P, N, SEED, BATCHES = 16, 8, 0, ("1", "2")
RUNTIMES = ("keras_hub", "openvino_genai", "onnxruntime_genai")
NO_STEPS = ("keras-hub generates every token in one compiled XLA call: no per-token "
            "readings; time to first token from a separate one-token generate")
# The share of (row, position) tokens that agree with the reference, at this seed and these
# shapes, over both batch sizes (24 tokens), measured here with the pinned versions. A tiny
# random model (width 64) has close logits, so one flipped argmax changes the rest of its
# row: the shares are low, and they are what the seed gives, not a quality figure.
# OpenVINO's weight-only kernels differ by instruction set, and so do its tokens: with AMX
# (Intel, where these were first measured) 16 and 5 of 24; without it (AMD EPYC with
# AVX-512 VNNI, 2026-11-29, the same on every run there) 14 and 3 of 24.
AMX = bool({"amx_tile", "amx_bf16", "amx_int8"} & set(Path("/proc/cpuinfo").read_text().split()))
WEIGHT_ONLY_SHARE = {("openvino_genai", "int8"): (16 if AMX else 14) / 24,
                     ("openvino_genai", "int4"): (5 if AMX else 3) / 24,
                     ("onnxruntime_genai", "int8"): 14 / 24,
                     ("onnxruntime_genai", "int4"): 9 / 24}
# Keras' weight-only int8/int4 at batch 2 only (its row 0 is batch 1's prompt: measured, the
# same tokens at batch 1), so 16 tokens; one process after fp32 keeps the added time small
KERAS_WEIGHT_ONLY_SHARE = {"int8": 9 / 16, "int4": 2 / 16}
GPT2_REFUSAL = ("ONNX Runtime GenAI 0.18.0's model builder has no GPT2LMHeadModel among its "
                "38 architectures")


def _start(*args: str) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TF_CPP_MIN_LOG_LEVEL": "2",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                         if p)}
    return subprocess.Popen([sys.executable, "-m", "tests.generation_probe", *map(str, args)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _result(proc: subprocess.Popen, timeout: int = 600) -> dict:
    out, err = proc.communicate(timeout=timeout)
    lines = [ln for ln in out.splitlines() if ln.startswith("PROBE ")]
    assert proc.returncode == 0 and lines, f"{proc.args}: {err[-3000:]}"
    return json.loads(lines[-1][len("PROBE "):])


@pytest.fixture(scope="module")
def probes(tmp_path_factory):
    root, work = tmp_path_factory.mktemp("models"), tmp_path_factory.mktemp("exports")
    procs = {}
    try:
        procs = {m: _start("folder", m, SEED, root) for m in ("tiny_llama", "tiny_gpt2")}
        llama, gpt2 = (_result(procs.pop(m))["folder"] for m in ("tiny_llama", "tiny_gpt2"))

        def runtime(rt, prec):
            return _start("run", rt, llama, work, prec, SEED, P, N, *BATCHES)

        procs = {"reference": _start("reference", llama, SEED, P, N, *BATCHES),
                 "params": _start("params", llama, gpt2),
                 "keras_hub": runtime("keras_hub", "fp32,int8@2,int4@2"),
                 "openvino_genai": runtime("openvino_genai", "fp32,int8,int4"),
                 "onnxruntime_genai": runtime("onnxruntime_genai", "fp32,bf16"),
                 "ort_int8": runtime("onnxruntime_genai", "int8"),
                 "ort_int4": runtime("onnxruntime_genai", "int4"),
                 "gpt2": _start("run", "onnxruntime_genai", gpt2, work, "fp32", SEED, P, N, 1)}
        out = {k: _result(p) for k, p in procs.items()}
        # paged attention, on the IR the first OpenVINO probe exported
        procs = {"pa": _start("run", "openvino_genai", llama, work, "fp32", SEED, P, N,
                              *BATCHES, "--opt", "attention_backend=PA")}
        out["openvino_genai_pa"] = _result(procs["pa"])
    finally:  # a failed probe leaves none of the others running
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    for k in ("ort_int8", "ort_int4"):
        out["onnxruntime_genai"].update(out.pop(k))
    return out


def share(tokens, reference) -> float:
    pairs = [(a, b) for row, ref in zip(tokens, reference) for a, b in zip(row, ref)]
    return sum(a == b for a, b in pairs) / len(pairs)


@pytest.mark.parametrize("rt", RUNTIMES + ("openvino_genai_pa",))
def test_fp32_tokens_equal_eager_reference(probes, rt):
    for b in BATCHES:
        got = probes[rt]["fp32"]["runs"][b]
        assert got["dtype"] == "int64"
        assert got["tokens"] == probes["reference"][b]
        assert len(got["tokens"]) == int(b) and {len(r) for r in got["tokens"]} == {N}


@pytest.mark.parametrize("rt", ("openvino_genai", "openvino_genai_pa", "onnxruntime_genai"))
def test_stepped_runtimes_read_one_increasing_time_per_token(probes, rt):
    for b in BATCHES:
        got = probes[rt]["fp32"]["runs"][b]
        t = got["token_ns"]
        assert len(t) == N and got["no_steps"] == "" and got["ttft_ns"] is None
        assert got["start_ns"] < t[0] and t[-1] <= got["end_ns"]
        assert all(a < c for a, c in zip(t, t[1:]))


def test_openvino_readings_come_from_its_streamer_at_batch_1_and_its_metrics_after(probes):
    runs = probes["openvino_genai"]["fp32"]["runs"]
    assert runs["1"]["metrics"]["token_times"] == "streamer"
    assert runs["2"]["metrics"]["token_times"] == "perf_metrics"
    for b in BATCHES:
        m = runs[b]["metrics"]
        assert m["ttft_ms"] > 0 and m["tpot_ms"] > 0 and m["throughput_tps"] > 0
    for prec in ("fp32", "int8", "int4"):  # the plugin's defaults would be bf16 / f16 / u8
        settings = probes["openvino_genai"][prec]["settings"]
        assert (settings["inference_precision_hint"], settings["kv_cache_precision"]) == (
            "f32", "f32")
    assert probes["openvino_genai"]["fp32"]["settings"]["attention_backend"] == "SDPA"
    assert probes["openvino_genai_pa"]["fp32"]["settings"]["attention_backend"] == "PA"


def test_keras_reports_its_first_token_from_a_one_token_call(probes):
    got = probes["keras_hub"]["fp32"]
    assert got["torch_imported"] is False
    for b in BATCHES:
        run = got["runs"][b]
        assert run["token_ns"] == [] and run["no_steps"] == NO_STEPS
        assert run["ttft_ns"] > 0 and run["start_ns"] < run["end_ns"]


def test_keras_parameter_counts_equal_the_rows(probes):
    assert probes["params"] == {"tiny_llama": language_model("tiny_llama").params,
                                "tiny_gpt2": language_model("tiny_gpt2").params,
                                "torch_imported": False}
    assert probes["keras_hub"]["fp32"]["settings"]["params"] == 106_816


@pytest.mark.parametrize("prec", sorted(KERAS_WEIGHT_ONLY_SHARE))
def test_keras_weight_only_runs_and_agrees_by_a_share_fixed_by_the_seed(probes, prec):
    got = probes["keras_hub"][prec]
    assert got["torch_imported"] is False and list(got["runs"]) == ["2"]
    assert share(got["runs"]["2"]["tokens"], probes["reference"]["2"]) == (
        KERAS_WEIGHT_ONLY_SHARE[prec])
    assert got["runs"]["2"]["no_steps"] == NO_STEPS
    settings = got["settings"]
    # 2 blocks x (q, k, v, attention output, 3 MLP dense) + the tied token embedding
    assert settings["quantized_layers"] == 15 and settings["params"] == 106_816
    assert settings["weights"].startswith(f"Keras quantize('{prec}') weight-only")
    assert probes["keras_hub"]["fp32"]["settings"]["quantized_layers"] == 0


@pytest.mark.parametrize("rt, prec", sorted(WEIGHT_ONLY_SHARE))
def test_weight_only_exports_run_and_agree_by_a_share_fixed_by_the_seed(probes, rt, prec):
    runs = probes[rt][prec]["runs"]
    tokens = [row for b in BATCHES for row in runs[b]["tokens"]]
    reference = [row for b in BATCHES for row in probes["reference"][b]]
    assert share(tokens, reference) == WEIGHT_ONLY_SHARE[(rt, prec)]
    assert all(len(runs[b]["token_ns"]) == N for b in BATCHES)
    assert "weight-only" in probes[rt][prec]["settings"]["weights"] or rt == "openvino_genai"


def test_gpt2_on_onnxruntime_genai_is_refused_with_the_builders_reason(probes):
    assert probes["gpt2"] == {"fp32": {"refused": GPT2_REFUSAL, "torch_imported": False}}


def test_bf16_on_onnxruntime_genai_is_refused_with_the_measured_reason(probes):
    assert probes["onnxruntime_genai"]["bf16"] == {
        "refused": "ONNX Runtime 1.31's CPU execution provider has no bfloat16 kernel for the "
                   "model builder's bf16 model (measured: \"Could not find an implementation "
                   "for Where(16) node with name '/model/attn_mask_reformat/input_ids_subgraph/"
                   "Where_2'\")", "torch_imported": False}


def test_share_counts_every_row_and_position():
    assert share([[1, 2, 3], [4, 5, 6]], [[1, 2, 0], [4, 0, 0]]) == 0.5
