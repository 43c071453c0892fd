"""What every generation runtime implements, and the prompts they are all given.

A runtime module (engine/worker/generation/gen_<runtime>.py) has one function,
`open_session(folder, spec, workdir) -> Session`: it loads or exports the model folder
(engine/worker/generation/models.py) its own way, and raises `Refused` with the measured
reason when it cannot run the spec here. A Session's `generate(prompt, new_tokens)` runs
greedy decoding of exactly `new_tokens` tokens for every row of `prompt` (no
end-of-sequence stop) and returns a `Timed`: the tokens and the clock readings the runtime
let us take. The worker, not the runtime, turns readings into TTFT, TPOT and ITL.

Clock readings are time.perf_counter_ns() taken in this process: `start_ns` just before
the runtime is handed the prompt, `token_ns[k]` as step k's tokens became visible to us
(a streamer's call, or the return of a step), `end_ns` when generate returned. A runtime
that runs the whole loop as one call (Keras' compiled generate) has no per-token readings:
`token_ns` is empty and `no_steps` says why.

Prompts are random token ids (no tokenizer in the timed path), ids 3 and up (0-2 are the
folder's pad, begin and unknown tokens), drawn from the run's seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

__all__ = ["Timed", "Session", "Refused", "prompts", "FIRST_ID"]

FIRST_ID = 3  # ids below are the folder's special tokens (engine/worker/generation/models.py)


class Refused(Exception):
    """This runtime cannot run this spec here; the message is the row's measured reason."""


@dataclass(frozen=True)
class Timed:
    tokens: np.ndarray  # (batch, new_tokens) int64, the generated ids only
    start_ns: int
    end_ns: int
    token_ns: tuple[int, ...] = ()  # one reading per step (all rows of the batch at once)
    no_steps: str = ""  # why token_ns is empty
    # Only where token_ns is empty: the time to first token of a separate generate of one
    # token on the same prompt (its start to its end), so TTFT and TPOT still exist
    ttft_ns: int | None = None


class Session(Protocol):
    build_s: float  # load, export and compile time, kept apart from every timed figure
    versions: dict  # package -> version, as a run stores them

    def generate(self, prompt: np.ndarray, new_tokens: int) -> Timed: ...


def prompts(seed: int, batch: int, length: int, vocab_size: int) -> np.ndarray:
    """(batch, length) int64 token ids from `seed`: the same prompt for every runtime."""
    rng = np.random.Generator(np.random.PCG64(seed))
    return rng.integers(FIRST_ID, vocab_size, size=(batch, length), dtype=np.int64)
