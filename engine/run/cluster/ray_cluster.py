"""The Ray executor: worker groups on the nodes of a Ray cluster, driven from here.

`connect(address)` joins a running cluster (refusing, within 30 s, an address nothing
answers on); `cluster_nodes()` lists its live nodes with their CPUs and shapes (a node says
which catalog shape it is with a custom resource "shape:<name>"); `place(text, nodes)`
picks the node a `--placement shape=NAME` or `node=ID` names, or refuses with what the
cluster has. A RayExecutor then implements LocalProcesses' `start` on that node: one
NodeHost actor (engine/run/cluster/node_host.py) starts the same worker subprocess there, and a
thread here polls its protocol lines and decodes them into the handle's `events` (so a
node of another checkout is told by its protocol version), and the Runner drives a remote
worker exactly as a local one. Only this process writes the database.

A node that dies (its actor with it) ends every handle on it: the runner records the run in
flight, and each later run sent there, as `killed` with the node named.
"""

from __future__ import annotations

import itertools
import os
import queue
import socket
import threading
import time
from dataclasses import dataclass

from engine.core.protocol import Command, RunOrder, encode
from engine.run.process import pinning
from engine.run.process.executors import classify_exit, read_line
from engine.run.cluster.node_host import SHAPE_PREFIX, NodeHost, node_shape
from engine.scenarios import scenario_of
from engine.core.cluster import check_profile_on_cluster, parse_placement
from engine.core.errors import UserError
from engine.core.topology import cpus_for_workers

__all__ = ["connect", "cluster_nodes", "place", "fleet_nodes", "Node", "RayExecutor",
           "RayWorker", "CONNECT_TIMEOUT_S", "parse_address"]

# The user is promised an answer within 30 s of the command; Python's start and imports
# take a few seconds of that on a loaded machine, so joining gets 20 of them.
CONNECT_TIMEOUT_S = 20.0
POLL_S = 0.2  # how long one poll waits on the node for the worker's next line
# A poll that has not come back in this long means the node is gone even if Ray has not
# declared it dead yet (its health check takes longer).
POLL_DEADLINE_S = 60.0


@dataclass(frozen=True)
class Node:
    node_id: str
    hostname: str
    cpus: int
    shape: str | None
    resources: dict

    @property
    def label(self) -> str:
        return (f"node {self.node_id[:8]} ({self.hostname}"
                + (f", shape {self.shape}" if self.shape else "") + ")")

    def describe(self) -> str:
        """The node and its resources, for a message that lists what the cluster has."""
        custom = sorted(k for k in self.resources
                        if k not in ("CPU", "GPU", "memory", "object_store_memory")
                        and not k.startswith("node:"))
        return f"{self.label}: {self.cpus} CPU" + (f", {', '.join(custom)}" if custom else "")


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = (text or "").strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise UserError(f"address: {text!r} is not HOST:PORT; allowed: a Ray head's address "
                        "such as 10.0.0.5:6379 (port 1..65535), or set RAY_ADDRESS",
                        field="address")
    return host, int(port)


def _ray_env() -> None:
    # No usage reporting from a benchmark tool; Ray's files under $RAY_TMPDIR when set.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Ray's C++ client logs its failed handshakes as warnings on stderr; the refusal this
    # module raises says what went wrong, once.
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "error")


def _no_sigterm_warning(rec) -> bool:
    # Joining runs in a thread so that it can be bounded; Ray then warns that it cannot set
    # its SIGTERM handler there, which is this process's business, not the user's.
    return "SIGTERM handler is not set" not in rec.getMessage()


def connect(address: str, *, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Join the cluster whose head listens at address (HOST:PORT), or refuse with a clear
    message within timeout_s: first a plain TCP connection (a wrong host or port answers in
    seconds), then Ray's own handshake, bounded."""
    import ray

    host, port = parse_address(address)
    if ray.is_initialized():
        return
    t0 = time.monotonic()
    try:
        socket.create_connection((host, port), timeout=min(5.0, timeout_s)).close()
    except OSError as e:
        raise UserError(f"address: cannot reach a Ray head at {host}:{port} "
                        f"({e.strerror or e}); "
                        "start one there with `ray start --head --port="
                        f"{port}`, or check the host, the port and the firewall or security "
                        "list", field="address") from None
    _ray_env()
    import logging
    logging.getLogger("ray._private.worker").addFilter(_no_sigterm_warning)  # once: a set
    box: dict = {}

    def init():
        try:
            ray.init(address=f"{host}:{port}", logging_level="ERROR", log_to_driver=False,
                     configure_logging=False)
            box["ok"] = True
        except Exception as e:  # noqa: BLE001 - any failure to join is the same answer
            box["error"] = e
    t = threading.Thread(target=init, daemon=True)
    t.start()
    t.join(max(1.0, timeout_s - (time.monotonic() - t0)))
    if "ok" not in box:
        why = (f"{type(box['error']).__name__}: {str(box['error']).splitlines()[0][:200]}"
               if "error" in box else f"no answer within {timeout_s:g} s")
        raise UserError(f"address: {host}:{port} answers but is not a Ray head this driver "
                        f"can join ({why}); check it is the head's GCS port (6379 by "
                        "default), that both run ray 2.58.0, and that this machine is a node "
                        "of the cluster (a driver joins through a local Ray node: `ray start "
                        f"--address={host}:{port}` here first; docs/FLEET.md)",
                        field="address")


def cluster_nodes() -> list[Node]:
    import ray

    out = []
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        res = dict(n.get("Resources") or {})
        out.append(Node(n["NodeID"], n.get("NodeManagerHostname") or "?",
                        int(res.get("CPU", 0)), node_shape(res), res))
    return sorted(out, key=lambda n: (n.shape or "", n.node_id))


def place(text: str, nodes: list[Node]) -> Node:
    """The node `shape=NAME` (its custom resource shape:NAME) or `node=ID` (a Ray node id,
    or its first 8+ characters) names; refused with what the cluster has."""
    key, value = parse_placement(text)
    if key == "shape":
        match = [n for n in nodes if f"{SHAPE_PREFIX}{value}" in n.resources]
    else:
        match = [n for n in nodes if n.node_id == value
                 or (len(value) >= 8 and n.node_id.startswith(value))]
    if not match:
        have = "; ".join(n.describe() for n in nodes) or "no live nodes"
        raise UserError(f"placement: no live node satisfies {key}={value}; the cluster has: "
                        f"{have}", field="placement")
    if match[0].cpus < 1:
        raise UserError(f"placement: {match[0].label} offers 0 CPUs to Ray (started with "
                        "--num-cpus=0): it can run no worker; allowed: a node with CPUs",
                        field="placement")
    return match[0]


def fleet_nodes(nodes: list[Node]) -> list[Node]:
    """One node per shape: the node kinds a fleet sweep runs on (untagged nodes are left
    out, since their runs could not be priced)."""
    kinds: dict[str, Node] = {}
    for n in nodes:
        if n.shape and n.shape not in kinds and n.cpus >= 1:
            kinds[n.shape] = n
    if not kinds:
        have = "; ".join(n.describe() for n in nodes) or "no live nodes"
        raise UserError("placement: no node of the cluster names its shape (start each with "
                        "--resources='{\"shape:NAME\": 1}'); the cluster has: " + have,
                        field="placement")
    return list(kinds.values())


_keys = itertools.count(1)


class RayExecutor:
    """Worker groups on one node of the cluster, through one NodeHost actor there."""

    def __init__(self, node: Node):
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.node = node
        # num_cpus=0: the host only relays; the worker it starts uses the node's cores, and
        # one group at a time runs per node (the sweep's order), so Ray need not count them.
        self.host = ray.remote(NodeHost).options(
            num_cpus=0, max_concurrency=32,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
        ).remote(node.node_id, node.shape)
        # The cores the host may use, read before it pins anything: Ray's CPU count can be
        # set above them (--num-cpus, a cpuset), and replica slots index the real ones.
        try:
            facts = ray.get(self.host.facts.remote(), timeout=POLL_DEADLINE_S)
            # one of the node's cores is left to Ray's processes (engine/run/cluster/node_host.py)
            self.cores = min(cpus_for_workers(node.cpus), facts["cores"])
            # The node's topology by position: replicas get whole cores of their own.
            self.topology = {i: tuple(pc) for i, pc in enumerate(facts.get("topology") or [])
                             if pc and i < self.cores}
        except Exception:  # noqa: BLE001 - a node gone already: its handles say so
            self.cores, self.topology = cpus_for_workers(node.cpus), {}

    def core_ids(self) -> list[int]:
        """Positions of the node's cores (its host maps them to core numbers)."""
        return list(range(self.cores))

    def replica_cores(self, replicas: int, threads: int) -> list[tuple[int, ...]]:
        """Each replica's positions: whole cores of its own on the node's topology."""
        return pinning.replica_cores(self.core_ids(), replicas, threads, self.topology)

    # Blocks of interleaved contenders would each cross the network twice (a command and
    # its report): contests on a node run one contender after the other.
    interleaves = False

    def release(self, handles, window_s: float) -> None:
        """Open one window for these replicas, timed by the node's clock; awaited, so none
        starts its window before every replica has its times."""
        import ray

        ray.get(self.host.release.remote([h.key for h in handles], window_s), timeout=30)

    def start(self, runs: list[RunOrder], first_spec, memory_cap_bytes, *, mode: str = "bench",
              trace_dir: str | None = None, cores: tuple[int, ...] | None = None,
              sync: str | None = None) -> "RayWorker":
        if trace_dir is not None:  # refused at the CLI and the Run page already
            check_profile_on_cluster(first_spec.profile_steps or 1)
        key = f"g{next(_keys)}"
        scenario = scenario_of(first_spec)
        pin = mode == "bench" and scenario.pinnable
        call = self.host.start.remote(
            key, runs, intra=first_spec.intra_threads, inter=first_spec.inter_threads,
            cpus=scenario.worker_cpus(first_spec),
            kind=first_spec.kind, memory_cap_bytes=memory_cap_bytes, mode=mode, pin=pin,
            slots=tuple(cores) if cores is not None else None, sync=sync)
        return RayWorker(self.host, key, self.node, call)

    def shutdown(self) -> None:
        import ray

        try:
            ray.kill(self.host)
        except Exception:  # noqa: BLE001 - already gone with its node
            pass


class RayWorker:
    """A worker subprocess on a node, seen as LocalProcesses' handle: events (None at the
    end), command(cmd), kill(), close() -> exit code, stderr_tail(), classify(exit code)."""

    def __init__(self, host, key: str, node: Node, started):
        self.host, self.key, self.node = host, key, node
        self.events: queue.Queue = queue.Queue()
        self.lost: str | None = None  # why this handle ended without its worker's word
        self._lost_status = "killed"
        self._tail = ""
        self._closed = False
        threading.Thread(target=self._pump, args=(started,), daemon=True).start()

    def _lose(self, e: BaseException) -> None:
        import ray

        if self.lost:
            return
        if isinstance(e, ray.exceptions.RayTaskError):  # the host raised: the node is up
            self._lost_status = "error"
            cause = e.cause if getattr(e, "cause", None) is not None else e
            self.lost = (f"{self.node.label}: its host could not run the worker "
                         f"({type(cause).__name__}: {str(cause).splitlines()[0][:200]})")
        else:  # the actor died (with its node), or it stopped answering
            self.lost = (f"{self.node.label} was lost before the run reported a result "
                         f"({type(e).__name__})")
        # Should the node still be up (a slow answer, not a death), its worker must not
        # go on beside the next group's: stop it, without waiting on a host that is silent.
        try:
            self.host.kill.remote(self.key)
            self.host.close.remote(self.key)
        except Exception:  # noqa: BLE001 - a dead actor takes no calls: nothing runs there
            pass

    def _pump(self, started) -> None:
        import ray

        try:
            ray.get(started, timeout=POLL_DEADLINE_S)
            while True:
                lines, ended = ray.get(self.host.poll.remote(self.key, POLL_S),
                                       timeout=POLL_DEADLINE_S)
                for line in lines:
                    self.events.put(read_line(line))
                if ended:
                    break
        except Exception as e:  # noqa: BLE001 - the actor died, with its node or not
            self._lose(e)
        self.events.put(None)

    def command(self, cmd: Command) -> None:
        """Awaited: a threaded actor does not keep call order, and blocks must not overtake."""
        import ray

        if self.lost:
            return
        try:
            ray.get(self.host.command.remote(self.key, encode(cmd)), timeout=10)
        except Exception as e:  # noqa: BLE001
            self._lose(e)

    def kill(self) -> None:
        import ray

        if self.lost:
            return
        try:
            ray.get(self.host.kill.remote(self.key), timeout=10)
        except Exception as e:  # noqa: BLE001
            self._lose(e)

    def close(self) -> int | None:
        import ray

        if self._closed or self.lost:
            return None
        self._closed = True
        try:
            rc, self._tail = ray.get(self.host.close.remote(self.key), timeout=60)
            return rc
        except Exception as e:  # noqa: BLE001
            self._lose(e)
            return None

    def stderr_tail(self) -> str:
        return self._tail

    def classify(self, returncode: int | None) -> tuple[str, str, str | None]:
        if self.lost:
            return self._lost_status, self.lost, None
        return classify_exit(returncode, self._tail)
