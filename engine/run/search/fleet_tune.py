"""The autotuner on every node kind of a Ray cluster (issue 27 part 3): the same search per
machine shape, so the answer can be "ORT, b4, 2 threads x 8 on OCI E5 16 OCPU: 212 QPS at
p99 41 ms, $0.11 per 1 M; best AWS: ...". Each node kind gets its own tuning (its own
candidates, fit to its cores; its own sweep; priced on its own shape, where its figures are
measured, never estimates), all at once, a thread per node; `fleet_best` ranks their
winners by cost per 1 M at the bound, overall and per provider.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

from engine.run.search.autotune import Tuning

__all__ = ["NodeTuning", "fleet_autotune", "FleetBest", "fleet_best"]


@dataclass(frozen=True)
class NodeTuning:
    """One node kind's tuning: where it ran (its shape, the cores its candidates fit), its
    sweep and what it found; `error`: why it could not run (the other nodes go on)."""
    shape: str | None
    cores: int
    label: str
    sweep_id: str | None
    tuning: Tuning | None
    error: str = ""


def fleet_autotune(nodes, tune_one: Callable) -> list[NodeTuning]:
    """tune_one(runner, shape, cores, on_start) -> (sweep_id, Tuning) on each node at once
    (engine.run.cluster.fleet.node_runners: one runner per node kind), a thread each. Each starts
    once the one before it opened its sweep (on_start), so what they first write to the
    store (its tables, the sweep's row) is written one at a time; after that every stored
    run is written under one lock (a systems row two nodes add is written once). A node
    whose tuning raised says why; the others' results stand."""
    lock = threading.Lock()
    out: dict[int, NodeTuning] = {}

    def one(i, node, opened: threading.Event):
        started: list[str] = []

        def on_start(sweep_id):
            started.append(sweep_id)
            opened.set()
        try:
            sweep_id, t = tune_one(_Locked(node.runner, lock), node.shape, node.cores,
                                   on_start)
            out[i] = NodeTuning(node.shape, node.cores, node.label, sweep_id, t)
        except Exception as exc:  # noqa: BLE001 - this node's; the others go on
            out[i] = NodeTuning(node.shape, node.cores, node.label,
                                started[0] if started else None, None,
                                f"{type(exc).__name__}: {str(exc)[:300]}")
        finally:
            opened.set()
    threads = []
    for i, node in enumerate(nodes):
        opened = threading.Event()
        t = threading.Thread(target=one, args=(i, node, opened), daemon=True)
        t.start()
        threads.append(t)
        opened.wait()
    for t in threads:
        t.join()
    return [out[i] for i in range(len(nodes))]


class _Locked:
    """A runner whose records are stored one at a time across the fleet's threads."""

    def __init__(self, runner, lock):
        self.runner, self.lock = runner, lock

    def run(self, specs, *, on_record, **options):
        def record(rec):
            with self.lock:
                on_record(rec)
        return self.runner.run(specs, on_record=record, **options)


@dataclass(frozen=True)
class FleetBest:
    """Across the node kinds: each one's winner, the cheapest per 1 M at the bound among
    them, and the cheapest per provider (the shapes' catalog rows say the provider)."""
    cheapest: NodeTuning | None
    per_provider: tuple[tuple[str, NodeTuning], ...]


def fleet_best(results: list[NodeTuning], provider_of: Callable[[str], str | None]) -> FleetBest:
    """Pure: the node kinds whose winner is priced, ranked by cost per 1 M at the bound on
    their own shape (a shape's figure measured on it, never an estimate from another)."""
    priced = [r for r in results if r.tuning is not None and r.tuning.winner is not None
              and r.tuning.winner.cost is not None and r.shape]
    priced.sort(key=lambda r: r.tuning.winner.cost)
    per: dict[str, NodeTuning] = {}
    for r in priced:
        per.setdefault(provider_of(r.shape) or "?", r)
    return FleetBest(priced[0] if priced else None, tuple(per.items()))
