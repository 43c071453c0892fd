"""What a serving test of a language model asks for, as `python -m engine genserve` (and the
Deploy page) fill it, and its expansion: one GenServeSpec per scenario (LoadGen's Server,
Offline, SingleStream; our closed loop, once per user count).

Framework- and runner-free; engine/run/jobs/genserve_request.py makes it a `Request`.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.limits import choice, require_values
from engine.scenarios.genserve.hooks import GENSERVING
from engine.scenarios.genserve.spec import (BOUND_PRESETS, DEFAULT_PRESET, GENSERVE_SCENARIOS,
                                            GenServeSpec)

__all__ = ["GenServeJob"]


@dataclass(frozen=True)
class GenServeJob:
    scenario = GENSERVING

    scenarios: tuple[str, ...]
    model: str
    engine: str = "eager"
    prompt_len: int = 128
    output_len: int = 64
    threads: int = 1
    precision: str = "fp32"
    preset: str = DEFAULT_PRESET
    ttft_bound_ms: float | None = None  # None: the preset's
    tpot_bound_ms: float | None = None
    target_qps: float | None = None
    query_count: int | None = None
    min_duration_s: float = 10.0
    min_query_count: int = 100
    users: tuple[int, ...] = (1,)  # closed-loop: one test per count
    max_num_seqs: int = 1
    kv_blocks: int = 0
    max_batched_tokens: int = 0
    replicas: int = 1
    samples: int = 64
    gen_seed: int = 0
    rounds: int = 1
    seed: int | None = None
    timeout_s: float = 1800.0
    memory_cap_bytes: int | None = None
    cores: int | None = None

    def bounds(self) -> tuple[str, float, float]:
        """(preset, TTFT ms, TPOT ms): a bound given by hand makes the preset custom."""
        if self.ttft_bound_ms is None and self.tpot_bound_ms is None:
            choice("preset", self.preset, (*BOUND_PRESETS, "custom"))
            if self.preset in BOUND_PRESETS:
                return (self.preset, *BOUND_PRESETS[self.preset])
        base = BOUND_PRESETS.get(self.preset, BOUND_PRESETS[DEFAULT_PRESET])
        return ("custom", self.ttft_bound_ms if self.ttft_bound_ms is not None else base[0],
                self.tpot_bound_ms if self.tpot_bound_ms is not None else base[1])

    def _expand(self):
        require_values(scenario=self.scenarios)
        preset, ttft, tpot = self.bounds()
        specs = []
        for name in dict.fromkeys(self.scenarios):
            choice("scenario", name, GENSERVE_SCENARIOS)
            for users in (dict.fromkeys(self.users) if name == "closed-loop" else (1,)):
                specs.append(GenServeSpec(
                    self.model, self.engine, name, prompt_len=self.prompt_len,
                    output_len=self.output_len, intra_threads=self.threads,
                    precision=self.precision, ttft_bound_ms=ttft, tpot_bound_ms=tpot,
                    preset=preset,
                    target_qps=self.target_qps if name in ("server", "offline") else None,
                    query_count=self.query_count if name == "server" else None,
                    min_duration_s=self.min_duration_s,
                    min_query_count=(max(self.min_query_count, users)
                                     if name == "closed-loop" else self.min_query_count),
                    users=users, max_num_seqs=self.max_num_seqs, kv_blocks=self.kv_blocks,
                    max_batched_tokens=self.max_batched_tokens, replicas=self.replicas,
                    samples=self.samples,
                    seed=self.gen_seed).validate(self.cores))
        return specs, []

    def label(self) -> str:
        return (f"serve text {', '.join(self.scenarios)}: {self.model} {self.engine} "
                f"p{self.prompt_len} n{self.output_len}")
