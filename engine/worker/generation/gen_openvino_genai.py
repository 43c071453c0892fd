"""OpenVINO GenAI's LLMPipeline on the CPU, from the model folder exported by optimum-intel.

Export: `optimum.exporters.openvino.main_export(folder, task="text-generation-with-past")`
writes the stateful IR LLMPipeline takes (the KV cache held as the model's state), with
`OVConfig(dtype="fp32")`: without an OVConfig optimum-intel compresses the weights of a
model over 1 B parameters to int8 on its own, which would make an "fp32" Llama-3.2-1B row
int8. int8 and int4 are weight-only compressions of that fp32 IR by NNCF's
`compress_weights` (the API optimum-intel's OVWeightQuantizationConfig calls): WEIGHT_METHOD
says how. Each export is cached under the workdir (engine/worker/generation/common.py).

Settings: ATTENTION_BACKEND "SDPA" (the stateful pipeline; the spec's option
`attention_backend` may ask for "PA", paged attention, the continuous-batching pipeline
OpenVINO GenAI picks by default on x86; both give the reference's tokens at batch 1 and 2), INFERENCE_NUM_THREADS = the spec's intra threads,
and INFERENCE_PRECISION_HINT and KV_CACHE_PRECISION pinned (f32 for fp32, int8 and int4;
bf16 for bf16), because on a CPU with bf16 instructions the plugin picks bf16 for an fp32
model by default, and it keeps the KV cache in u8 or f16 unless told (read back here from a
compiled IR: f16 under an f32 hint). The plugin's dynamic quantization of the inputs of
compressed-weight MatMuls (DYNAMIC_QUANTIZATION_GROUP_SIZE, 32 by default, read back) is
left as deployed: WEIGHT_METHOD says so. bf16 is refused where the CPU lacks bf16 instructions (common.bf16_refusal).

Fixed length, greedy: GenerationConfig(max_new_tokens=N, ignore_eos=True), no sampling. The
folder has no end-of-sequence id, which the pipeline reads as -1 and then rejects ("stop
token ids must be non-negative"), so the config names the pad id as EOS; ignore_eos makes
generation run past it, as every runtime here ignores EOS (min_new_tokens is not set: it
would mask that id instead, and pick a different token where it is the argmax).

Per-token clock readings: at batch 1 a StreamerBase subclass stamps time.perf_counter_ns()
in each write (one per token, synchronously, measured). OpenVINO GenAI refuses a streamer at
batch > 1 ("Currently streaming is possible only with batch size=1", both backends,
measured), so there the readings are the pipeline's own per-step timestamps
(PerfMetrics.raw_metrics.m_new_token_times, milliseconds of std::chrono::steady_clock, which
on Linux is CLOCK_MONOTONIC, perf_counter's clock: checked per call, the readings must lie
between our start and end or none are kept). `last_metrics` keeps the pipeline's own TTFT,
TPOT and throughput of the last generate (means, ms and tokens/s; its TPOT divides a step
by the batch size) for the bench's comparison with ours.

Imports torch (through optimum-intel) and OpenVINO: worker side, framework "torch".
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import numpy as np

from engine.worker.generation.common import (bf16_refusal, cached_export, entry_name,
                                             versions)
from engine.worker.generation.session import Refused, Timed

__all__ = ["open_session", "PRECISIONS", "BACKENDS", "WEIGHT_METHOD", "PACKAGES"]

PRECISIONS = ("fp32", "bf16", "int8", "int4")
BACKENDS = ("SDPA", "PA")
# group size 64 divides every width of the catalog (64, 576, 768, 1536, 2048, 3072, 8192)
INT4_GROUP = 64
WEIGHT_METHOD = {
    "int8": "NNCF compress_weights INT8_ASYM: every MatMul's and the embedding's weights "
            "int8, per output channel; activations fp32 but for the CPU plugin's default "
            "dynamic quantization of those MatMuls' inputs (group size 32)",
    "int4": f"NNCF compress_weights INT4_ASYM, group size {INT4_GROUP}, ratio 1.0: the "
            "MatMuls' weights int4; the embedding (tied output layer) int8 per channel, "
            "NNCF's default backup; activations fp32 but for the CPU plugin's default "
            "dynamic quantization of those MatMuls' inputs (group size 32)"}
PACKAGES = ("openvino", "openvino-genai", "openvino-tokenizers", "optimum-intel", "optimum",
            "nncf", "transformers", "torch")
XML = "openvino_model.xml"
_HINT = {"fp32": "f32", "int8": "f32", "int4": "f32", "bf16": "bf16"}
# The KV cache, pinned: the CPU plugin's own default is u8 (f16 with an f32 hint, read back
# from a compiled model here), which an fp32 row must not hide
_KV = {"fp32": "f32", "int8": "f32", "int4": "f32", "bf16": "bf16"}


def open_session(folder: Path, spec, workdir: Path):
    return OpenVinoGenAISession(Path(folder), spec, Path(workdir))


class OpenVinoGenAISession:
    def __init__(self, folder: Path, spec, workdir: Path):
        precision = spec.precision
        if precision not in PRECISIONS:
            raise Refused(f"OpenVINO GenAI runs {', '.join(PRECISIONS)} here, not {precision}")
        if precision == "bf16" and bf16_refusal():
            raise Refused(bf16_refusal())
        backend = str(dict(spec.options).get("attention_backend", "SDPA")).upper()
        if backend not in BACKENDS:
            raise Refused(f"attention_backend {backend!r}: OpenVINO GenAI offers "
                          f"{' or '.join(BACKENDS)}")
        t0 = time.perf_counter()
        self.versions = versions(*PACKAGES)
        path, self.exported = _ir(folder, precision, workdir, self.versions)
        import openvino_genai as og

        self._og = og
        self.pipe = og.LLMPipeline(str(path), "CPU", ATTENTION_BACKEND=backend,
                                   INFERENCE_NUM_THREADS=int(spec.intra_threads),
                                   INFERENCE_PRECISION_HINT=_HINT[precision],
                                   KV_CACHE_PRECISION=_KV[precision])
        self.pad_id = int(json.loads((folder / "config.json").read_text())["pad_token_id"])
        self.build_s = time.perf_counter() - t0
        self.settings = {"attention_backend": backend,
                         "inference_num_threads": int(spec.intra_threads),
                         "inference_precision_hint": _HINT[precision],
                         "kv_cache_precision": _KV[precision],
                         "weights": WEIGHT_METHOD.get(precision, precision), "ir": str(path)}
        self.last_metrics: dict = {}

    def _config(self, new_tokens: int):
        cfg = self._og.GenerationConfig()
        cfg.max_new_tokens = new_tokens
        cfg.ignore_eos = True
        cfg.eos_token_id = self.pad_id  # module docstring: any valid id; EOS is ignored
        cfg.do_sample = False
        return cfg

    def generate(self, prompt: np.ndarray, new_tokens: int) -> Timed:
        import openvino as ov

        og = self._og
        batch = prompt.shape[0]
        ids = np.ascontiguousarray(prompt, dtype=np.int64)
        # with its mask: the paged-attention pipeline refuses a bare (B>1, P) tensor ("Use
        # multiple tensors to pass a batch", measured) and takes TokenizedInputs
        x = og.TokenizedInputs(ov.Tensor(ids), ov.Tensor(np.ones_like(ids)))
        cfg = self._config(new_tokens)
        stamps: list[int] = []
        streamer = None
        if batch == 1:
            class _Stamps(og.StreamerBase):
                def write(self, token):
                    stamps.append(time.perf_counter_ns())
                    return og.StreamingStatus.RUNNING

                def end(self):
                    pass

            streamer = _Stamps()
        start = time.perf_counter_ns()
        result = self.pipe.generate(x, cfg, streamer)
        end = time.perf_counter_ns()
        tokens = np.asarray(result.tokens, dtype=np.int64).reshape(batch, -1)
        if tokens.shape[1] != new_tokens:
            raise RuntimeError(f"OpenVINO GenAI returned {tokens.shape[1]} tokens per row, "
                               f"asked for {new_tokens}")
        pm = result.perf_metrics
        source, no_steps = "streamer", ""
        if streamer is None:
            source = "perf_metrics"
            stamps = [round(t * 1e6) for t in pm.raw_metrics.m_new_token_times]
            if not _on_our_clock(stamps, start, end, new_tokens):
                no_steps = ("OpenVINO GenAI streams only at batch 1, and its own step "
                            "timestamps did not fall between this call's start and end")
                stamps = []
        elif len(stamps) != new_tokens:
            raise RuntimeError(f"the streamer was called {len(stamps)} times for "
                               f"{new_tokens} tokens")
        self.last_metrics = {"ttft_ms": float(pm.get_ttft().mean),
                             "tpot_ms": float(pm.get_tpot().mean),
                             "throughput_tps": float(pm.get_throughput().mean),
                             "generate_ms": float(pm.get_generate_duration().mean),
                             "token_times": source if stamps else "none"}
        return Timed(tokens=tokens, start_ns=start, end_ns=end, token_ns=tuple(stamps),
                     no_steps=no_steps)


def _on_our_clock(stamps: list[int], start: int, end: int, n: int) -> bool:
    return (len(stamps) == n and all(start < t <= end for t in stamps)
            and all(a <= b for a, b in zip(stamps, stamps[1:])))


def _ir(folder: Path, precision: str, workdir: Path, vers: dict) -> tuple[Path, bool]:
    """The IR for precision (bf16 runs the fp32 IR: precision is the plugin's hint)."""
    fp32, built = cached_export(workdir, entry_name("openvino_genai", folder, "fp32", vers),
                                lambda tmp: _export(folder, tmp), XML)
    if precision in ("fp32", "bf16"):
        return fp32, built
    path, built_q = cached_export(
        workdir, entry_name("openvino_genai", folder, precision, vers,
                            {"method": WEIGHT_METHOD[precision]}),
        lambda tmp: _compress(fp32, tmp, precision), XML)
    return path, built or built_q


def _export(folder: Path, out: Path) -> None:
    from optimum.exporters.openvino import main_export
    from optimum.intel.openvino.configuration import OVConfig

    main_export(str(folder), output=str(out), task="text-generation-with-past",
                ov_config=OVConfig(dtype="fp32"))


def _compress(fp32: Path, out: Path, precision: str) -> None:
    import nncf
    import openvino as ov

    model = ov.Core().read_model(str(fp32 / XML))
    if precision == "int8":
        model = nncf.compress_weights(model, mode=nncf.CompressWeightsMode.INT8_ASYM)
    else:
        model = nncf.compress_weights(model, mode=nncf.CompressWeightsMode.INT4_ASYM,
                                      group_size=INT4_GROUP, ratio=1.0)
    ov.save_model(model, str(out / XML), compress_to_fp16=False)
    for f in fp32.iterdir():  # config, generation config, tokenizer files
        if not f.name.startswith("openvino_model"):
            shutil.copy(f, out / f.name)
