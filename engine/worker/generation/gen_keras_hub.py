"""keras-hub's compiled generate on TensorFlow, from the model folder (never imports torch).

Load: `keras_hub.models.<LanguageModel.keras_class>.from_preset(folder, preprocessor=None)`:
a local folder with a Hugging Face config.json goes through keras-hub's transformers
converters, so the weights are the folder's, the same every runtime loads. No preprocessor:
the model takes token ids. `compile(sampler="greedy")` (the default sampler is top-k).
Llama 3's RoPE: transformers 5 writes the llama3 frequency scaling as `rope_parameters`,
while keras-hub 0.32's Llama converter reads it from the older `rope_scaling` key alone and,
not finding it, builds unscaled rotary frequencies: a different model, which the token check
caught (llama32_1b's greedy tokens agreed with eager's on 2 of 16 positions). So where the
folder's config gives a scaling only as `rope_parameters`, keras-hub loads a folder of its
own (keras_folder: the same weight files linked, config.json with `rope_scaling` added).
Its parameter count equals the row's (the tied embedding counted once; measured: 106,816 for
tiny_llama, 149,248 for tiny_gpt2, LanguageModel.params), recorded in `settings`.

Generation: the backbone's inputs, `token_ids` (B, P+N) int32 with the prompt first and
zeros after and `padding_mask` true on the prompt, with `stop_token_ids=None`: keras-hub
then fills every padded position, N tokens, EOS ignored. The whole decode loop is one XLA
function (`tf.function(jit_compile=True)`), so no per-token reading exists: `token_ns` is
empty, `no_steps` says why, and `ttft_ns` is a separate generate of one new token on the same
prompt (width P+1), timed start to end, right after the timed call. XLA compiles one
function per input width and batch, so the first generate of a shape runs both widths once
untimed first; that compile is added to build_s.

Threads: TensorFlow's intra- and inter-op pools, which the worker sets before TensorFlow runs
(engine.worker.backends.configure_threads); read back here and refused where they differ
from the spec's (a pool set earlier in the process cannot be changed).

bf16: Keras' mixed_bfloat16 policy while the model is built (bf16 compute, fp32 variables),
restored after, refused where the CPU lacks bf16 instructions (common.bf16_refusal).
int8 and int4: Keras' own post-training `model.quantize(mode, config=...)` on the loaded
fp32 model, weight-only (WEIGHT_METHOD says which layers and how): every Dense and
EinsumDense (the attention projections and the MLP) and the token embedding (tied output
projection); norms, rotary and GPT-2's position embedding stay fp32. Keras' int8 default
also quantizes activations (W8A8), so int8 passes `activation_quantizer=None`; int4's
default is weight-only already. The weights are stored as int8 (int4 packed two to a byte)
and each matmul turns them back into fp32 inside the compiled loop: the weights' memory
shrinks, the math stays fp32. Measured on tiny_llama (relative L2 against fp32, 2 prompts of
16): int8's logits 4 %; int4's every quantized layer's output 9-10 % and the logits 52 %, so
a width-64 random model's low agreement at int4 is compounded rounding, not a broken path.
The parameter count in `settings` is the fp32 model's (the row's), taken before quantize()
replaces the variables; `quantized_layers` counts what quantize() changed.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import time
import warnings
from pathlib import Path

import numpy as np

from engine.scenarios.generation.models import language_model
from engine.worker.generation.common import bf16_refusal, cached_export, versions
from engine.worker.generation.session import Refused, Timed

__all__ = ["open_session", "keras_config", "keras_folder", "PRECISIONS", "NO_STEPS",
           "PACKAGES", "WEIGHT_METHOD"]

PRECISIONS = ("fp32", "bf16", "int8", "int4")
# Keras' default int4 block: one scale and zero point per 128 inputs of an output channel
INT4_BLOCK = 128
_LAYERS = ("every Dense and EinsumDense (attention q/k/v/output, MLP) and the token "
           "embedding with its tied output projection; norms and position embeddings fp32")
WEIGHT_METHOD = {
    "int8": f"Keras quantize('int8') weight-only (activation_quantizer=None): {_LAYERS}; "
            "symmetric abs-max, one scale per output channel (per token row for the "
            "embedding); int8 weights cast to fp32 inside each matmul, activations fp32",
    "int4": f"Keras quantize('int4') weight-only (its default): {_LAYERS}; asymmetric, one "
            f"scale and zero point per block of {INT4_BLOCK} inputs per output channel, two "
            "weights a byte; dequantized to an fp32 kernel inside each matmul, activations "
            "fp32"}
NO_STEPS = ("keras-hub generates every token in one compiled XLA call: no per-token "
            "readings; time to first token from a separate one-token generate")
PACKAGES = ("keras-hub", "keras", "tensorflow-cpu", "tensorflow")


def open_session(folder: Path, spec, workdir: Path):
    return KerasHubSession(keras_folder(Path(folder), Path(workdir)), spec)


def keras_config(config: dict) -> dict | None:
    """config.json as keras-hub's converters read it, or None where they read it right as it
    is: a RoPE scaling given only as transformers 5's `rope_parameters` is repeated as
    `rope_scaling` (its keys but rope_theta, which the converter reads from either)."""
    rope = config.get("rope_parameters") or {}
    if config.get("rope_scaling") or rope.get("rope_type", "default") == "default":
        return None
    return {**config, "rope_scaling": {k: v for k, v in rope.items() if k != "rope_theta"}}


def keras_folder(folder: Path, workdir: Path) -> Path:
    """The folder keras-hub loads: the model folder, or an entry in the export cache with
    the same files linked and keras_config's config.json. The entry's name carries a digest
    of that config, so a changed rewrite never reuses an old entry; an entry whose links no
    longer resolve (the model folder moved) is made again beside it."""
    config = keras_config(json.loads((folder / "config.json").read_text()))
    if config is None:
        return folder
    # the links' target is part of what the entry is, beside the config it writes
    blob = json.dumps([config, str(folder.resolve())], sort_keys=True).encode()
    name = f"keras_hub-{folder.name}-{hashlib.sha256(blob).hexdigest()[:12]}"

    def build(tmp: Path) -> None:
        for f in folder.iterdir():
            if f.name != "config.json":
                (tmp / f.name).symlink_to(f.resolve())
        (tmp / "config.json").write_text(json.dumps(config, indent=2))

    return cached_export(workdir, name, build, "config.json")[0]


def _quantize(model, precision: str, keras) -> int:
    """Quantizes the model in place; the number of layers it quantized."""
    config = (keras.quantizers.Int8QuantizationConfig(activation_quantizer=None)
              if precision == "int8" else
              keras.quantizers.Int4QuantizationConfig(block_size=INT4_BLOCK))
    # Keras runs a full gc.collect() as each layer drops its float kernel: 0.67 s each with
    # TensorFlow's heap (10 s of 10.4 for tiny_llama's 15 layers, measured). Frozen, the
    # old objects are skipped; one collection after frees the float kernels before timing.
    gc.freeze()
    try:
        with warnings.catch_warnings():
            # one warning per layer kind with nothing to quantize (norms, rotary, softmax)
            warnings.filterwarnings("ignore", message=r"Layer \w+ does not have a `quantize`")
            model.quantize(precision, config=config)
    finally:
        gc.unfreeze()
    gc.collect()
    return sum(1 for layer in model._flatten_layers()
               if getattr(layer, "quantization_mode", None) == precision)


class KerasHubSession:
    def __init__(self, folder: Path, spec):
        if spec.precision not in PRECISIONS:
            raise Refused(f"keras-hub runs {', '.join(PRECISIONS)} here, "
                          f"not {spec.precision}")
        if spec.precision == "bf16" and bf16_refusal():
            raise Refused(bf16_refusal())
        os.environ.setdefault("KERAS_BACKEND", "tensorflow")
        t0 = time.perf_counter()
        import keras
        import keras_hub
        import tensorflow as tf

        threads = (tf.config.threading.get_intra_op_parallelism_threads(),
                   tf.config.threading.get_inter_op_parallelism_threads())
        if threads != (spec.intra_threads, spec.inter_threads):
            raise Refused(f"TensorFlow's thread pools are {threads[0]} intra-op and "
                          f"{threads[1]} inter-op in this process, not the spec's "
                          f"{spec.intra_threads} and {spec.inter_threads}")
        row = language_model(spec.model)
        cls = getattr(keras_hub.models, row.keras_class)
        policy = keras.mixed_precision.global_policy()
        if spec.precision == "bf16":
            keras.mixed_precision.set_global_policy("mixed_bfloat16")
        try:
            self.model = cls.from_preset(str(folder), preprocessor=None)
        finally:
            keras.mixed_precision.set_global_policy(policy)
        self.params = int(self.model.count_params())  # fp32's: quantize() replaces them
        quantized = 0
        if spec.precision in WEIGHT_METHOD:
            quantized = _quantize(self.model, spec.precision, keras)
        self.model.compile(sampler="greedy")
        self.versions = versions(*PACKAGES)
        self.settings = {"tf_intra_op": threads[0], "tf_inter_op": threads[1],
                         "params": self.params, "dtype_policy": self.model.dtype_policy.name,
                         "weights": WEIGHT_METHOD.get(spec.precision, spec.precision),
                         "quantized_layers": quantized}
        self._warm: set[tuple[int, int, int]] = set()
        self.build_s = time.perf_counter() - t0

    def _call(self, prompt: np.ndarray, new_tokens: int) -> np.ndarray:
        batch, length = prompt.shape
        ids = np.zeros((batch, length + new_tokens), dtype=np.int32)
        ids[:, :length] = prompt
        mask = np.zeros(ids.shape, dtype=bool)
        mask[:, :length] = True
        out = self.model.generate({"token_ids": ids, "padding_mask": mask},
                                  stop_token_ids=None)
        return np.asarray(out["token_ids"])[:, length:]

    def generate(self, prompt: np.ndarray, new_tokens: int) -> Timed:
        shape = (*prompt.shape, new_tokens)
        if shape not in self._warm:  # XLA compiles per width: kept out of every timing
            t0 = time.perf_counter()
            self._call(prompt, new_tokens)
            self._call(prompt, 1)
            self.build_s += time.perf_counter() - t0
            self._warm.add(shape)
        start = time.perf_counter_ns()
        tokens = self._call(prompt, new_tokens)
        end = time.perf_counter_ns()
        first = time.perf_counter_ns()
        self._call(prompt, 1)
        ttft = time.perf_counter_ns() - first
        return Timed(tokens=tokens.astype(np.int64), start_ns=start, end_ns=end,
                     no_steps=NO_STEPS, ttft_ns=ttft)
