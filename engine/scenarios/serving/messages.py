"""A serving run's messages: its result (one LoadGen test, its logs and the SUT's own
latencies) and what a serving worker's replicas say to it (ReplicaWarm, ReplicaDone).

Registered with the protocol's decoder by the registry (engine/scenarios/__init__.py reads
the kind's Scenario.messages); encoded and decoded like every message (engine.core.protocol).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.protocol import Event, Result

__all__ = ["ServeResult", "ReplicaWarm", "ReplicaDone", "MESSAGES"]


@dataclass(frozen=True)
class ServeResult(Result):
    """A serving run: one LoadGen test. samples_ns: every query's latency as the SUT saw it
    (IssueQuery's call to just before QuerySamplesComplete; Offline's one query: each
    sample's): LoadGen's logs, which the parent parses and stores, give percentiles."""

    kind = "serve_result"
    summary_log: str = ""  # mlperf_log_summary.txt
    detail_log: str = ""  # mlperf_log_detail.txt
    loadgen_version: str | None = None
    expected_latency_ns: int | None = None  # the warm call LoadGen's schedule was sized on
    queries: int = 0  # IssueQuery calls the SUT answered
    model_calls: int = 0  # batches the SUT ran (Server's batcher, Offline's chunks)
    replica_cpus: tuple[str, ...] = ()  # R replicas behind the queue: each one's CPUs, "2,3"
    replica_calls: tuple[int, ...] = ()  # and the batches each one answered


@dataclass(frozen=True)
class ReplicaWarm(Result):
    """A serving replica's model built, checked and warm (replica to its front): a Result's
    build, counts (the first replica's alone), memory and digest; nothing timed yet."""
    kind = "replica_warm"


@dataclass(frozen=True)
class ReplicaDone(Event):
    """A serving replica's last word when its front closes it: what it did and held."""
    kind = "replica_done"
    run_id: str
    calls: int
    peak_rss_bytes: int | None


# The kind's messages, as its Scenario.messages lists them for the registry
MESSAGES = (ServeResult, ReplicaWarm, ReplicaDone)
