"""keras-hub's compiled generate on TensorFlow, from the model folder (never imports torch).

Load: `keras_hub.models.<LanguageModel.keras_class>.from_preset(folder, preprocessor=None)`:
a local folder with a Hugging Face config.json goes through keras-hub's transformers
converters, so the weights are the folder's, the same every runtime loads. No preprocessor:
the model takes token ids. `compile(sampler="greedy")` (the default sampler is top-k).
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
int8 and int4 are refused: keras-hub's own quantize() was not checked against the reference
here.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from engine.scenarios.generation.models import language_model
from engine.worker.generation.common import bf16_refusal, versions
from engine.worker.generation.session import Refused, Timed

__all__ = ["open_session", "PRECISIONS", "NO_STEPS", "PACKAGES"]

PRECISIONS = ("fp32", "bf16")
NO_STEPS = ("keras-hub generates every token in one compiled XLA call: no per-token "
            "readings; time to first token from a separate one-token generate")
PACKAGES = ("keras-hub", "keras", "tensorflow-cpu", "tensorflow")


def open_session(folder: Path, spec, workdir: Path):
    return KerasHubSession(Path(folder), spec)


class KerasHubSession:
    def __init__(self, folder: Path, spec):
        if spec.precision not in PRECISIONS:
            raise Refused(f"keras-hub {spec.precision}: keras-hub's quantize() was not "
                          "checked against the reference here; this runtime runs fp32 and bf16")
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
        self.model.compile(sampler="greedy")
        self.params = int(self.model.count_params())
        self.versions = versions(*PACKAGES)
        self.settings = {"tf_intra_op": threads[0], "tf_inter_op": threads[1],
                         "params": self.params, "dtype_policy": self.model.dtype_policy.name}
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
