"""ONNX Runtime GenAI on the CPU, from the model folder exported by its own model builder.

Export: `python -m onnxruntime_genai.models.builder -i <folder> -o <out> -p <precision> -e cpu
-c <cache>` in a subprocess (it imports torch and transformers; a failed build leaves this
process clean), cached under the workdir (engine/worker/generation/common.py). The builder
refuses a folder with no end-of-sequence id ("Could not resolve eos_token_id", measured), so
it reads a staging copy of the folder (links to the same files) whose config.json names the
pad id as EOS; at load the EOS list is overlaid empty (`"eos_token_id": []`, accepted; an id
outside the vocabulary is not: "eos_token_id (512) must be in range [0, 512)"), so every run
generates exactly its length with no id stopping a row or masked (EOS ignored, as every
runtime here; a min_length would instead mask the EOS id, and pick another token where it is
the argmax). int8 and int4 are the builder's weight-only MatMulNBits
quantization (its defaults: block size 32, accuracy_level 4 on the CPU, i.e. activations
quantized to int8 inside those MatMuls); WEIGHT_METHOD says so. bf16 is refused with the
reason measured here (BF16_REFUSAL). An architecture the builder
lacks (GPT-2 in 0.18.0) is refused before any export: the architectures are read from the
installed builder's source (its `config.architectures[0] == "..."` branches); one it names
and still fails on is refused with the builder's own words, cached beside the exports.

Threads: the decoder's session options overlaid on the folder's genai_config.json at load
(og.Config.overlay, with the EOS list): intra_op_num_threads and inter_op_num_threads from
the spec.

Generation: GeneratorParams with max_length = P + N, greedy (do_sample False, one beam),
batch_size B; Generator.append_tokens(prompt as int32) runs the prefill, then each
generate_next_token() is one step (the first gives the first token), stamped as it returns.
The tokens are read back with get_sequence after the loop, outside the timed steps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from engine.worker.generation.common import (cached_export, entry_name, refusal_file,
                                             versions)
from engine.scenarios.generation.runtimes import gen_row
from engine.worker.generation.session import Refused, Timed

__all__ = ["open_session", "builder_architectures", "PRECISIONS", "BF16_REFUSAL",
           "WEIGHT_METHOD", "PACKAGES"]

PRECISIONS = ("fp32", "int8", "int4")
# The row's measured reason (engine/scenarios/generation/runtimes.py): one text for the
# refusal before launch and this one, for a spec that reaches the worker anyway
BF16_REFUSAL = gen_row("onnxruntime_genai").refusals["bf16"]
WEIGHT_METHOD = {
    "int8": "model builder MatMulNBits int8 weight-only, block size 32, accuracy_level 4 "
            "(the CPU default: activations quantized to int8 inside those MatMuls)",
    "int4": "model builder MatMulNBits int4 weight-only, block size 32, accuracy_level 4 "
            "(the CPU default: activations quantized to int8 inside those MatMuls)"}
PACKAGES = ("onnxruntime-genai", "onnxruntime", "onnx", "onnx-ir", "transformers", "torch")
CONFIG = "genai_config.json"
BUILD_TIMEOUT_S = 3600


def open_session(folder: Path, spec, workdir: Path):
    return OrtGenAISession(Path(folder), spec, Path(workdir))


class OrtGenAISession:
    def __init__(self, folder: Path, spec, workdir: Path):
        precision = spec.precision
        if precision == "bf16":
            raise Refused(BF16_REFUSAL)
        if precision not in PRECISIONS:
            raise Refused(f"ONNX Runtime GenAI runs {', '.join(PRECISIONS)} here, "
                          f"not {precision}")
        t0 = time.perf_counter()
        self.versions = versions(*PACKAGES)
        name = entry_name("onnxruntime_genai", folder, precision, self.versions)
        arch = _architecture(folder)
        known = builder_architectures()
        if known and arch not in known:
            raise Refused(f"ONNX Runtime GenAI {self.versions['onnxruntime-genai']}'s model "
                          f"builder has no {arch} among its {len(known)} architectures")
        refused = refusal_file(workdir, name)
        if refused.exists():
            raise Refused(refused.read_text())
        try:
            path, self.exported = cached_export(
                workdir, name, lambda tmp: _build(folder, tmp, precision, workdir), CONFIG)
        except Refused as exc:
            refused.write_text(str(exc))
            raise
        import onnxruntime_genai as og

        self._og = og
        config = og.Config(str(path))
        threads = {"intra_op_num_threads": int(spec.intra_threads),
                   "inter_op_num_threads": int(spec.inter_threads)}
        config.overlay(json.dumps({"model": {"eos_token_id": [],
                                             "decoder": {"session_options": threads}}}))
        self.model = og.Model(config)
        self.build_s = time.perf_counter() - t0
        self.settings = {**threads, "weights": WEIGHT_METHOD.get(precision, precision),
                         "folder": str(path)}

    def generate(self, prompt: np.ndarray, new_tokens: int) -> Timed:
        og = self._og
        batch, length = prompt.shape
        params = og.GeneratorParams(self.model)
        params.set_search_options(max_length=length + new_tokens, do_sample=False,
                                  num_beams=1, batch_size=batch)
        ids = np.ascontiguousarray(prompt, dtype=np.int32)
        generator = og.Generator(self.model, params)
        stamps = []
        start = time.perf_counter_ns()
        generator.append_tokens(ids)
        while not generator.is_done():
            generator.generate_next_token()
            stamps.append(time.perf_counter_ns())
        end = time.perf_counter_ns()
        tokens = np.stack([np.asarray(generator.get_sequence(i))[length:]
                           for i in range(batch)]).astype(np.int64)
        if tokens.shape[1] != new_tokens or len(stamps) != new_tokens:
            raise RuntimeError(f"ONNX Runtime GenAI gave {tokens.shape[1]} tokens in "
                               f"{len(stamps)} steps, asked for {new_tokens}")
        return Timed(tokens=tokens, start_ns=start, end_ns=end, token_ns=tuple(stamps))


def _architecture(folder: Path) -> str:
    archs = json.loads((folder / "config.json").read_text()).get("architectures") or ["?"]
    return archs[0]


def builder_architectures() -> frozenset[str]:
    """The architectures the installed model builder branches on (empty if unreadable)."""
    import importlib.util
    import re

    spec = importlib.util.find_spec("onnxruntime_genai.models.builder")
    try:
        text = Path(spec.origin).read_text()
    except (AttributeError, TypeError, OSError):
        return frozenset()
    return frozenset(re.findall(r'architectures\[0\] == "(\w+)"', text))


def _build(folder: Path, out: Path, precision: str, workdir: Path) -> None:
    """Run the builder on a staging copy of folder whose EOS is outside the vocabulary."""
    stage = out / "_source"
    stage.mkdir()
    for f in folder.iterdir():
        if f.name != "config.json":
            os.symlink(f.resolve(), stage / f.name)
    config = json.loads((folder / "config.json").read_text())
    config["eos_token_id"] = int(config["pad_token_id"])  # overlaid away at load
    (stage / "config.json").write_text(json.dumps(config, indent=2))
    cmd = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(stage),
           "-o", str(out), "-p", precision, "-e", "cpu", "-c", str(out / "_cache")]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env,
                          timeout=BUILD_TIMEOUT_S)
    if done.returncode:
        lines = [ln.strip() for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
        last = lines[-1] if lines else f"exit status {done.returncode}"
        if "is not currently supported" in last:
            arch = _architecture(folder)
            said = last.replace(f"The {stage} model", "The model")
            raise Refused(f"ONNX Runtime GenAI {versions('onnxruntime-genai')['onnxruntime-genai']}"
                          f"'s model builder has no {arch} among its architectures ({said})")
        raise RuntimeError(f"the ONNX Runtime GenAI model builder failed: {last}")
    for scratch in ("_source", "_cache"):
        _remove(out / scratch)


def _remove(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
