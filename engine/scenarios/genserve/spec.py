"""What to run when serving a language model: a frozen `GenServeSpec` (one test: a LoadGen
scenario in token-latency mode, or a closed loop of N users, against one engine with its
limits) and its validation.

A request is `prompt_len` seeded random tokens (one of `samples` prompts, LoadGen's sample
library) answered with exactly `output_len` greedy tokens, the end-of-sequence token
ignored, so every request's token count is known and LoadGen's TPOT, (E2E - TTFT) /
(tokens - 1), is defined (it counts a request of under 2 tokens as an error).

Bounds. LoadGen judges Server on p99 TTFT and p99 TPOT (both, with early stopping on
each); MLPerf's pairs for llama3.1-8b are the presets: standard 2,000 ms / 100 ms,
interactive 500 ms / 30 ms (loadgen/mlperf.conf). SingleStream is judged on neither and
reported against them; Offline has no latency. The closed loop is ours, not LoadGen's:
LoadGen has no N-user mode (server_max_async_queries ends a test rather than throttling
it), so `users` requests are kept in flight, each next one sent as one finishes.

Framework-free: LoadGen and the engines are imported only in the worker.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from engine.core.errors import UserError
from engine.core.limits import (SEARCH_QUERIES_RANGE, SEED_RANGE, SERVE_BOUND_MS_RANGE,
                                SERVE_DURATION_RANGE, SERVE_QPS_RANGE, SERVE_SAMPLES_RANGE,
                                choice, float_range, int_range, logical_cores)
from engine.core.policy import MeasurementPolicy
from engine.scenarios.generation.models import LANGUAGE_MODELS, language_model
from engine.scenarios.genserve.engines import (ENGINE_NAMES, KV_BLOCK_TOKENS, REFUSED,
                                               engine_row)

__all__ = ["GenServeSpec", "GENSERVE_SCENARIOS", "LOADGEN_SCENARIOS", "BOUND_PRESETS",
           "DEFAULT_PRESET", "MAX_SEQS_RANGE", "USERS_RANGE", "REQUESTS_RANGE",
           "JUDGED_PERCENTILE", "kv_blocks_needed"]

# Our names -> LoadGen's TestScenario names; closed-loop is our own driver
LOADGEN_SCENARIOS = {"single-stream": "SingleStream", "server": "Server",
                     "offline": "Offline"}
GENSERVE_SCENARIOS = (*LOADGEN_SCENARIOS, "closed-loop")
# The TTFT and TPOT percentile each scenario is judged (Server) or reported (SingleStream)
# on, LoadGen's target_latency_percentile
JUDGED_PERCENTILE = {"server": 99.0, "single-stream": 90.0, "offline": None,
                     "closed-loop": 99.0}
# MLPerf Inference's llama3.1-8b bounds (TTFT ms, TPOT ms), loadgen/mlperf.conf
BOUND_PRESETS = {"standard": (2000.0, 100.0), "interactive": (500.0, 30.0)}
DEFAULT_PRESET = "standard"
MAX_SEQS_RANGE = (1, 256)
USERS_RANGE = (1, 256)
REQUESTS_RANGE = (1, 1_000_000)
KV_BLOCKS_RANGE = (0, 1_000_000)
BATCHED_TOKENS_RANGE = (0, 1_000_000)


def kv_blocks_needed(max_num_seqs: int, prompt_len: int, output_len: int) -> int:
    """KV blocks for max_num_seqs requests at their longest (every prompt and output token,
    each request's last block partly filled)."""
    return max_num_seqs * math.ceil((prompt_len + output_len) / KV_BLOCK_TOKENS)


@dataclass(frozen=True)
class GenServeSpec:
    """One serving test of a language model. The record's batch_size is the engine's most
    concurrent sequences (1 for a one-at-a-time engine)."""

    model: str
    runtime: str  # the engine (engines.ENGINES)
    scenario: str
    prompt_len: int = 128
    output_len: int = 64
    intra_threads: int = 1
    inter_threads: int = 1
    precision: str = "fp32"
    ttft_bound_ms: float = BOUND_PRESETS[DEFAULT_PRESET][0]
    tpot_bound_ms: float = BOUND_PRESETS[DEFAULT_PRESET][1]
    preset: str = DEFAULT_PRESET  # standard, interactive, or custom (the bounds as given)
    target_qps: float | None = None  # Server: Poisson arrivals; Offline: expected
    # Server: exactly this many queries (a search's probes), no minimum duration
    query_count: int | None = None
    min_duration_s: float = 10.0
    min_query_count: int = 100  # LoadGen's; closed-loop: the requests it sends
    users: int = 1  # closed-loop: requests kept in flight
    max_num_seqs: int = 1
    kv_blocks: int = 0  # 0: enough for max_num_seqs requests at their longest
    max_batched_tokens: int = 0  # 0: the engine's default
    replicas: int = 1  # engine processes of intra_threads each behind one front
    samples: int = 64  # LoadGen's performance_sample_count: distinct prompts
    seed: int = 0  # the weights, the prompts, LoadGen's schedule
    framework = "torch"  # class constants, not fields: the runs table's columns
    kind = "genserve"
    device = "cpu"
    image_size = None
    weight_policy = "random"
    profile_steps = 0
    user_model = None

    @property
    def batch_size(self) -> int:
        return self.max_num_seqs

    @property
    def loadgen_min_duration_s(self) -> float:
        return 0.0 if self.query_count else self.min_duration_s

    @property
    def loadgen_min_queries(self) -> int:
        return self.query_count or self.min_query_count

    @property
    def policy(self) -> MeasurementPolicy:
        span = self.loadgen_min_duration_s
        return MeasurementPolicy(warmup_iters=1, min_time_s=span,
                                 min_iters=self.loadgen_min_queries,
                                 max_time_s=max(span, 0.001))

    @property
    def kv_blocks_resolved(self) -> int:
        return self.kv_blocks or kv_blocks_needed(self.max_num_seqs, self.prompt_len,
                                                  self.output_len)

    def key(self) -> tuple:
        return (self.model, self.runtime, self.scenario, self.prompt_len, self.output_len,
                self.intra_threads, self.precision, self.ttft_bound_ms, self.tpot_bound_ms,
                self.target_qps, self.query_count, self.users, self.max_num_seqs,
                self.kv_blocks, self.max_batched_tokens, self.replicas, self.seed)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "GenServeSpec":
        return cls(**d)

    def validate(self, cores: int | None = None) -> "GenServeSpec":
        cores = cores or logical_cores()
        if self.model not in LANGUAGE_MODELS:
            raise UserError(f"model: unknown {self.model!r}; allowed: "
                            f"{', '.join(LANGUAGE_MODELS)}", field="model")
        row = engine_row(self.runtime)
        if row is None:
            why = REFUSED.get(self.runtime)
            head = (f"runtime: {self.runtime} does not serve here: {why}" if why
                    else f"runtime: unknown engine {self.runtime!r}")
            raise UserError(f"{head}; allowed: {', '.join(ENGINE_NAMES)}", field="runtime")
        choice("scenario", self.scenario, GENSERVE_SCENARIOS)
        m = language_model(self.model)
        int_range("prompt_len", self.prompt_len, 1, m.max_positions - 2,
                  hint=f" ({self.model} has {m.max_positions} positions)")
        int_range("output_len", self.output_len, 2, m.max_positions - self.prompt_len,
                  hint=" (LoadGen's TPOT needs a second token; prompt and output within "
                       f"{self.model}'s {m.max_positions} positions)")
        for name in ("intra_threads", "inter_threads"):
            int_range(name, getattr(self, name), 1, cores,
                      hint=f" (this machine has {cores} logical cores)")
        choice("precision", self.precision, row.precisions)
        choice("preset", self.preset, (*BOUND_PRESETS, "custom"))
        bounds = BOUND_PRESETS.get(self.preset, (self.ttft_bound_ms, self.tpot_bound_ms))
        if (self.ttft_bound_ms, self.tpot_bound_ms) != bounds:
            raise UserError(f"preset: {self.preset} is TTFT {bounds[0]:g} ms and TPOT "
                            f"{bounds[1]:g} ms, not {self.ttft_bound_ms:g} / "
                            f"{self.tpot_bound_ms:g}; allowed: those bounds, or preset "
                            "custom", field="preset")
        float_range("ttft_bound_ms", self.ttft_bound_ms, *SERVE_BOUND_MS_RANGE)
        float_range("tpot_bound_ms", self.tpot_bound_ms, *SERVE_BOUND_MS_RANGE)
        if self.scenario == "server" and self.target_qps is None:
            raise UserError(f"target_qps: the server scenario needs a target rate (its "
                            f"Poisson arrivals, requests/s); allowed: number "
                            f"{SERVE_QPS_RANGE[0]:g}..{SERVE_QPS_RANGE[1]:g}",
                            field="target_qps")
        if self.target_qps is not None:
            float_range("target_qps", self.target_qps, *SERVE_QPS_RANGE)
        if self.query_count is not None:
            int_range("query_count", self.query_count, *SEARCH_QUERIES_RANGE,
                      hint=" (the fewest LoadGen's early stopping judges a p99 on)")
            if self.scenario != "server":
                raise UserError(f"query_count: a fixed count holds a Server test to one "
                                f"early-stopping strictness; {self.scenario} has none; "
                                "allowed: none, or scenario server", field="query_count")
        float_range("min_duration_s", self.min_duration_s, *SERVE_DURATION_RANGE)
        int_range("min_query_count", self.min_query_count, *REQUESTS_RANGE)
        int_range("users", self.users, *USERS_RANGE)
        if self.scenario != "closed-loop" and self.users != 1:
            raise UserError(f"users: a closed loop's; {self.scenario} takes LoadGen's "
                            "arrivals; allowed: 1, or scenario closed-loop", field="users")
        if self.scenario == "closed-loop" and self.min_query_count < self.users:
            raise UserError(f"min_query_count: a closed loop of {self.users} users sends at "
                            f"least one request each; allowed: {self.users}.."
                            f"{REQUESTS_RANGE[1]:,}", field="min_query_count")
        int_range("max_num_seqs", self.max_num_seqs, *MAX_SEQS_RANGE)
        if not row.continuous and self.max_num_seqs != 1:
            raise UserError(f"max_num_seqs: {self.runtime} answers one request at a time; "
                            "allowed: 1", field="max_num_seqs")
        for name, rng in (("kv_blocks", KV_BLOCKS_RANGE),
                          ("max_batched_tokens", BATCHED_TOKENS_RANGE)):
            int_range(name, getattr(self, name), *rng)
            if getattr(self, name) and name not in row.knobs:
                raise UserError(f"{name}: {self.runtime} has no such limit; allowed: 0",
                                field=name)
        one = kv_blocks_needed(1, self.prompt_len, self.output_len)
        if self.kv_blocks and self.kv_blocks < one:
            raise UserError(f"kv_blocks: one request of {self.prompt_len} + "
                            f"{self.output_len} tokens needs {one} blocks of "
                            f"{KV_BLOCK_TOKENS}; allowed: 0 (enough for max_num_seqs) or "
                            f"{one}..{KV_BLOCKS_RANGE[1]:,}", field="kv_blocks")
        if self.max_batched_tokens and self.max_batched_tokens < self.max_num_seqs:
            raise UserError(f"max_batched_tokens: a step must hold a token of each of the "
                            f"{self.max_num_seqs} sequences; allowed: 0 (the engine's) or "
                            f"{self.max_num_seqs}..{BATCHED_TOKENS_RANGE[1]:,}",
                            field="max_batched_tokens")
        int_range("samples", self.samples, *SERVE_SAMPLES_RANGE)
        int_range("seed", self.seed, *SEED_RANGE)
        int_range("replicas", self.replicas, 1, cores,
                  hint=f" (this machine has {cores} logical cores)")
        if self.replicas > 1 and self.scenario == "single-stream":
            raise UserError("replicas: single-stream issues one request at a time (LoadGen "
                            "waits for each), so a second engine would only wait; allowed: "
                            "1, or another scenario", field="replicas")
        if self.replicas * self.intra_threads > cores:
            raise UserError(f"replicas: {self.replicas} replicas x {self.intra_threads} "
                            f"threads = {self.replicas * self.intra_threads}; allowed: at "
                            f"most {cores} (this machine's logical cores, one a thread)",
                            field="replicas")
        return replace(self)
