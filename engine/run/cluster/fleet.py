"""A sweep on a Ray cluster: one node, or every node kind at once (a fleet sweep).

`cluster_plan` turns `--executor ray --address ... --placement ... | --fleet` into the nodes
to run on, each with its catalog shape, refusing before anything runs: an address nothing
answers on, a placement no node satisfies (naming what the cluster has), a node whose shape
the price catalog does not know (with the close matches). `FleetRunner` has the Runner's
`run`/`cancel`, so run_sweep drives it unchanged: each round runs on every node at the same
time, in that round's alternating order, so drift over the sweep's time falls on every
machine alike and a machine comparison is paired by round as a framework comparison is.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

from engine.run.process.runner import Runner
from engine.core.errors import UserError
from engine.core.topology import cpus_for_workers

__all__ = ["ClusterPlan", "cluster_plan", "FleetRunner", "ray_runner", "NodeRunner",
           "node_runners"]


@dataclass(frozen=True)
class ClusterPlan:
    nodes: tuple  # engine.run.cluster.ray_cluster.Node, one per placement (or per node kind)
    shapes: tuple  # each node's catalog shape, resolved (None: untagged node)

    @property
    def cores(self) -> int:
        """The fewest CPUs among the nodes, less the one left on each to Ray's processes
        (engine/run/cluster/node_host.py): what a spec's threads x replicas must fit."""
        return min(cpus_for_workers(n.cpus) for n in self.nodes)


def cluster_plan(address: str | None, placements: list[str] | None, fleet: bool, *,
                 resolve_shape: Callable[[str], str]) -> ClusterPlan:
    """resolve_shape(name) -> the catalog's name (UserError with close matches)."""
    from engine.run.cluster.ray_cluster import cluster_nodes, connect, fleet_nodes, place

    if not address:
        raise UserError("address: --executor ray needs the cluster's head, HOST:PORT "
                        "(--address, or RAY_ADDRESS)", field="address")
    if fleet and placements:
        raise UserError("placement: give --placement or --fleet, not both", field="placement")
    connect(address)
    nodes = cluster_nodes()
    if fleet:
        chosen = fleet_nodes(nodes)
    elif placements:
        chosen = [place(p, nodes) for p in placements]
    else:
        raise UserError("placement: say where the sweep runs: --placement shape=NAME or "
                        "node=ID (several: one sweep on each, side by side), or --fleet for "
                        "every node kind; the cluster has: "
                        + "; ".join(n.describe() for n in nodes), field="placement")
    ids = [n.node_id for n in chosen]
    if len(set(ids)) < len(ids):
        raise UserError("placement: two placements name the same node; each node kind once",
                        field="placement")
    shapes = []
    for n in chosen:
        try:
            shapes.append(resolve_shape(n.shape) if n.shape else None)
        except UserError as e:  # the node's tag, not an option the user typed
            raise UserError(f"placement: {n.label} is tagged shape:{n.shape}: "
                            f"{str(e).split(': ', 1)[1]}; retag it with `ray start ... "
                            "--resources='{\"shape:NAME\": 1}'` using a name `python -m "
                            "engine prices list` prints", field="placement") from None
    tagged = [x for x in shapes if x]
    if len(set(tagged)) < len(tagged):
        # Runs are told apart by machine (systems row and shape): two nodes of one shape
        # in one sweep would be averaged as one machine. One per shape, as a fleet takes.
        raise UserError("placement: two of the chosen nodes have the same shape; allowed: "
                        "one node per shape in a sweep (a second one in a sweep of its "
                        "own)", field="placement")
    return ClusterPlan(tuple(chosen), tuple(shapes))


def ray_runner(plan: ClusterPlan, *, timeout_s: float, memory_cap_bytes,
               cancel: threading.Event | None = None, process_per_run: bool = False):
    """A Runner on the plan's one node, or a FleetRunner over several."""
    from engine.run.cluster.ray_cluster import RayExecutor

    cancel = cancel or threading.Event()
    runners = [Runner(timeout_s=timeout_s, memory_cap_bytes=memory_cap_bytes,
                      executor=RayExecutor(node), machine_shape=shape, cancel=cancel,
                      process_per_run=process_per_run)
               for node, shape in zip(plan.nodes, plan.shapes)]
    return runners[0] if len(runners) == 1 else FleetRunner(runners, cancel)


class FleetRunner:
    """Runner's interface over several nodes: run() runs the same specs on each node at
    once (one thread per node, each node one worker group at a time) and returns every
    record. on_record and on_event are called under one lock, so a caller that is not
    thread-safe (a progress bar, the store) sees them one at a time."""

    def __init__(self, runners: list[Runner], cancel: threading.Event):
        self.runners, self.cancel = runners, cancel

    @property
    def width(self) -> int:
        return len(self.runners)

    def run(self, specs, *, on_record, on_event=None, sweep_id=None, round_no=None,
            known_stats=None) -> list:
        lock = threading.Lock()
        on_event = on_event or (lambda e: None)
        results: dict[int, list] = {}
        errors: list[BaseException] = []

        def locked(fn):
            def call(x):
                with lock:
                    fn(x)
            return call

        def one(i, runner):
            try:
                results[i] = runner.run(specs, on_record=locked(on_record),
                                        on_event=locked(on_event), sweep_id=sweep_id,
                                        round_no=round_no, known_stats=known_stats)
            except BaseException as e:  # noqa: BLE001 - re-raised below, after the others
                errors.append(e)
                why = (f"stopped: the sweep on another node failed ({type(e).__name__}: "
                       f"{str(e).splitlines()[0][:160] if str(e) else ''})")
                for other in self.runners:
                    if other is not runner:  # their runs in flight say why, not "user"
                        other.cancel_reason = why
                self.cancel.set()
        threads = [threading.Thread(target=one, args=(i, r), daemon=True)
                   for i, r in enumerate(self.runners)]
        for t in threads:
            t.start()
        try:
            for t in threads:
                t.join()
        except BaseException:  # Ctrl-C here: the nodes' runs stop and record as cancelled
            self.cancel.set()  # before the caller releases the cluster under them
            for t in threads:
                t.join()
            raise
        if errors:
            raise errors[0]
        return [rec for i in sorted(results) for rec in results[i]]


@dataclass(frozen=True)
class NodeRunner:
    """One node kind's runner of a fleet (or the one runner on one node or this machine):
    the shape it is priced as, the cores its workers may use, and its name in words."""

    runner: object
    shape: str | None
    cores: int
    label: str


def node_runners(runner) -> list[NodeRunner]:
    """Each node's runner of a FleetRunner, or the one runner: a cluster node's cores are
    the ones its host may pin (less the one left to Ray), this machine's its logical cores."""
    from engine.core.limits import logical_cores

    out = []
    for r in getattr(runner, "runners", [runner]):
        node = getattr(r.executor, "node", None)
        out.append(NodeRunner(r, r.machine_shape, getattr(r.executor, "cores", None)
                              or logical_cores(), node.label if node else "this machine"))
    return out
