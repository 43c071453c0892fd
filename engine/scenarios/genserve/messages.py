"""A serving test of a language model on the wire: a Result whose samples are the requests'
E2E times, with every request's raw readings (its sample, issue, first token, completion
and token count on this worker's clock), LoadGen's logs where LoadGen ran the test, and
what the engine says of itself.

Registered with the protocol's decoder by the registry (engine/scenarios/__init__.py)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.protocol import Result

__all__ = ["GenServeResult", "MESSAGES"]


@dataclass(frozen=True)
class GenServeResult(Result):
    """samples_ns: each request's E2E, in the order they completed. req_*: per request, in
    the same order: the sample (prompt) it asked for, and ns since the test's start at which
    it was issued (LoadGen's IssueQuery call, or the closed loop's send), its first token
    was reported and it completed, and its output tokens."""

    kind = "genserve_result"
    # what the test was (the figures' derivation needs them; the record's extra has them too)
    scenario: str = ""
    prompt_len: int = 0
    output_len: int = 0
    ttft_bound_ms: float = 0.0
    tpot_bound_ms: float = 0.0
    target_qps: float | None = None
    users: int = 1
    req_sample: tuple[int, ...] = ()
    req_issue_ns: tuple[int, ...] = ()
    req_first_ns: tuple[int, ...] = ()
    req_done_ns: tuple[int, ...] = ()
    req_tokens: tuple[int, ...] = ()
    summary_log: str = ""  # mlperf_log_summary.txt (LoadGen scenarios)
    detail_log: str = ""  # mlperf_log_detail.txt
    loadgen_version: str | None = None
    build_s: float | None = None  # the engine's load, export and compile
    engine_settings: dict | None = None  # every limit as applied, and read back
    engine_stats: dict | None = None  # the engine's own counters (cache use, dropped, steps)
    runtime_versions: dict | None = None
    agreement: float | None = None  # the check request's tokens against the reference
    agreement_tokens: int = 0
    # CPU seconds the front used over the test (LoadGen's threads, the readers, the live
    # report): what serving under LoadGen and our reporting cost beside the engine's work
    front_cpu_s: float | None = None


MESSAGES = (GenServeResult,)
