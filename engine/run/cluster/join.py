"""The dashboard's Ray cluster (issue 15): where its address comes from, the node kinds it
offers the Run page, and a queued job's runner on the nodes the job names.

The address is the server's setting, never a page's input: $BENCH_RAY_ADDRESS, else
$RAY_ADDRESS; without one the Run page offers no executor choice. The dashboard process
joins the cluster once (engine.run.cluster.ray_cluster.connect is a no-op when already joined) and
stays joined between jobs: a job ends by killing its NodeHost actors, not the connection.
Which nodes a request's placements choose is engine.run.cluster.ray_cluster's `place` and
`fleet_nodes`, the same functions the job's engine.run.cluster.fleet.cluster_plan uses, so the
cores the page validated a sweep against are the cores the job runs on.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from engine.core.errors import UserError
from engine.core.topology import cpus_for_workers

__all__ = ["ADDRESS_ENV", "cluster_address", "NodeKinds", "list_nodes", "job_runner",
           "plan_and_runner", "release"]

ADDRESS_ENV = ("BENCH_RAY_ADDRESS", "RAY_ADDRESS")  # the first one set wins


def cluster_address(environ=os.environ) -> str | None:
    """The Ray head the dashboard may send sweeps to, or None (this machine only)."""
    for name in ADDRESS_ENV:
        value = (environ.get(name) or "").strip()
        if value:
            return value
    return None


@dataclass(frozen=True)
class NodeKinds:
    """The live nodes of the cluster at `address` (engine.run.cluster.ray_cluster.Node), or why
    they could not be listed (`error`, a sentence naming the address)."""

    address: str
    nodes: tuple = ()
    error: str = ""

    @property
    def shapes(self) -> tuple[str, ...]:
        """The node kinds: each tagged shape once, in the cluster's order."""
        return tuple(dict.fromkeys(n.shape for n in self.nodes if n.shape))

    def describe(self, shape: str) -> str:
        same = [n for n in self.nodes if n.shape == shape]
        return (f"{shape} ({len(same)} node{'s' if len(same) > 1 else ''}, "
                f"{same[0].cpus} CPU)") if same else shape

    @property
    def untagged(self) -> int:
        """Nodes without a shape:NAME resource: a fleet leaves them out (unpriced)."""
        return sum(1 for n in self.nodes if not n.shape)

    def cores(self, placements: tuple[str, ...]) -> int:
        """The fewest CPUs among the nodes these placements choose (none: one node of every
        kind, a fleet), less the core each leaves to Ray's processes: what each spec's
        threads x replicas must fit. UserError naming `placement` when no live node answers
        one."""
        from engine.run.cluster.ray_cluster import fleet_nodes, place

        nodes = list(self.nodes)
        chosen = [place(p, nodes) for p in placements] if placements else fleet_nodes(nodes)
        return min(cpus_for_workers(n.cpus) for n in chosen)


def list_nodes(address: str) -> NodeKinds:
    """Join the cluster at `address` (once per process) and list its live nodes; a refusal
    (an address that is not HOST:PORT, nothing answering, not a Ray head) comes back as
    NodeKinds.error, for the page to show, never as an exception."""
    from engine.run.cluster.ray_cluster import cluster_nodes, connect

    try:
        connect(address)
        return NodeKinds(address, tuple(cluster_nodes()))
    except UserError as exc:
        return NodeKinds(address, error=str(exc))
    except Exception as exc:  # noqa: BLE001 - a joined cluster that fails to answer
        return NodeKinds(address, error=(
            f"address: the Ray cluster at {address} did not list its nodes "
            f"({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}); "
            "check that its head is running"))


def job_runner(request, *, db: str | Path, cancel: threading.Event):
    """(plan, runner) for a request whose executor is "ray": the nodes its placements name
    (none: every node kind, a fleet), each node's shape resolved against the price
    catalog of `db`, and a Runner (one node) or FleetRunner (several) that stops when
    `cancel` is set. UserError naming the field when the cluster cannot run it."""
    address = cluster_address()
    if not address:
        raise UserError("executor: a Ray job needs the cluster's head, HOST:PORT, in "
                        "$BENCH_RAY_ADDRESS (or $RAY_ADDRESS) of the dashboard's server; "
                        "allowed without it: local", field="executor")
    return plan_and_runner(address, list(request.placements) or None,
                           not request.placements, db=db, timeout_s=request.timeout_s,
                           memory_cap_bytes=request.memory_cap_bytes, cancel=cancel)


def plan_and_runner(address: str | None, placements, fleet: bool, *, db, timeout_s: float,
                    memory_cap_bytes, cancel: threading.Event | None = None,
                    process_per_run: bool = False):
    """(plan, runner) for the CLI and the dashboard alike: join the cluster, choose the
    nodes (each node's shape resolved against the price catalog of `db`), and a Runner on
    one node or a FleetRunner on several. Refused before anything runs, leaving the
    cluster as found (a refusal after joining disconnects)."""
    import ray

    from engine.run.cluster.fleet import cluster_plan, ray_runner
    from store.prices import machine_shape

    joined = ray.is_initialized()
    try:
        plan = cluster_plan(address, placements, fleet,
                            resolve_shape=lambda name: machine_shape(name, db))
    except BaseException:
        if not joined:
            ray.shutdown()
        raise
    return plan, ray_runner(plan, timeout_s=timeout_s, memory_cap_bytes=memory_cap_bytes,
                            cancel=cancel, process_per_run=process_per_run)


def release(runner) -> None:
    """After a job: end each executor's resources on the cluster (its NodeHost actor); the
    process stays joined for the next job. A local executor ends its fork servers (each
    holds a framework imported: the dashboard lives on between jobs)."""
    for r in getattr(runner, "runners", [runner]):
        shutdown = getattr(r.executor, "shutdown", None)
        if shutdown is not None:
            shutdown()
        close = getattr(r.executor, "close", None)
        if close is not None:
            close()
