"""A generation run's result on the wire: a Result whose samples are the calls' E2E times,
with each timed call's raw per-token readings, the shape it ran, and the agreement of its
greedy tokens with the reference.

Registered with the protocol's decoder by the registry (engine/scenarios/__init__.py reads
the kind's Scenario.messages); encoded and decoded like every message (engine.core.protocol).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.protocol import Result

__all__ = ["GenResult", "MESSAGES", "calls_of"]


@dataclass(frozen=True)
class GenResult(Result):
    """samples_ns: each timed call's E2E (start to return). token_ns: per timed call, one
    reading per step in ns since that call's start, the calls one after another
    (output_len readings each; flat, as the protocol carries arrays of numbers; empty for a
    one-call runtime); ttft_ns: per timed call, a one-call runtime's separately measured
    TTFT (empty where the readings give it)."""

    kind = "gen_result"
    batch_size: int = 0
    prompt_len: int = 0
    output_len: int = 0
    token_ns: tuple[int, ...] = ()
    ttft_ns: tuple[int, ...] = ()
    timing_source: str = ""  # where the readings come from (the row's, or why none)
    agreement: float | None = None  # share of the compared tokens equal to the reference's
    agreement_tokens: int = 0  # tokens compared (rows x first min(N, 32) positions)
    agreement_reference: str = ""  # what they were compared with
    build_s: float | None = None  # load, export and compile: kept apart from every figure
    kv_cache_bytes: int | None = None  # the KV cache at the end of a call (estimate)
    runtime_versions: dict | None = None  # the runtime's own packages
    # the energy loop's reading per output token (engine.core.energy.EnergyReading as a
    # dict: its samples are output tokens); None: not asked
    energy: dict | None = None


def calls_of(res: GenResult) -> list[tuple[int, ...]]:
    """token_ns split per timed call (empty tuples for a one-call runtime)."""
    n = res.output_len
    if not res.token_ns:
        return [()] * len(res.samples_ns)
    return [tuple(res.token_ns[i:i + n]) for i in range(0, len(res.token_ns), n)]


# The kind's messages, as its Scenario.messages lists them for the registry
MESSAGES = (GenResult,)
