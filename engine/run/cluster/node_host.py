"""The parent's side of a worker group, run on a cluster node (a Ray actor's body).

The driver (engine/run/cluster/ray_cluster.py) places one NodeHost per node; it starts the same
`python -m engine.worker` subprocess a local run starts, with the same thread environment
and pinning, but on the node's cores, and hands the worker's protocol lines back when the
driver polls. It imports no framework and writes no database: the driver alone stores.
Its `ready` events carry the node's identity (Ray node id, hostname, its system facts and
checkout), because the record must name the machine that ran it, not the driver's.
"""

from __future__ import annotations

import os
import queue
import socket
import sys
import time
from dataclasses import replace
from types import SimpleNamespace

from engine.core.protocol import Go, ProtocolError, Ready, RunOrder, encode
from engine.scenarios import decode
from engine.core.topology import leave_one_core, read_topology
from engine.run.process import pinning
from engine.run.process.executors import WorkerProcess, thread_env, window_times

__all__ = ["NodeHost", "SHAPE_PREFIX", "node_shape"]

# A node says which catalog shape it is with a custom resource of this name:
# `ray start ... --resources='{"shape:c6i.8xlarge": 1}'`.
SHAPE_PREFIX = "shape:"


def node_shape(resources: dict) -> str | None:
    shapes = sorted(k[len(SHAPE_PREFIX):] for k in resources if k.startswith(SHAPE_PREFIX))
    return shapes[0] if shapes else None


class NodeHost:
    """Worker subprocesses of this node, by the driver's key (one per group or replica)."""

    def __init__(self, node_id: str, shape: str | None):
        from engine.run.process.machine import git_commit, system_info  # psutil only, no framework

        self.node_id, self.shape = node_id, shape
        self.workers: dict[str, WorkerProcess] = {}
        self.ended: set[str] = set()  # keys killed or closed, perhaps before their start
        self.memory_cap_bytes = None  # the last group's, reported with `ready`
        # Read before any worker is pinned: pinning moves this process off the worker's
        # cores, and the systems row (its id hashes the usable cores) must not vary with
        # the first group's threads.
        every = sorted(os.sched_getaffinity(0))
        self.topology = read_topology(every)
        # One core left to Ray's processes; workers and replica slots use the others.
        self.ray_cpus, cores = leave_one_core(every, self.topology)
        self.cores = list(cores)
        self.system, self.commit = system_info(), git_commit()

    def facts(self) -> dict:
        return {"node_id": self.node_id, "hostname": socket.gethostname(),
                "shape": self.shape, "system": self.system, "git_commit": self.commit,
                "cores": len(self.cores), "memory_cap_bytes": self.memory_cap_bytes,
                "ray_cpus": list(self.ray_cpus),
                # (package, core) per position in `cores`: the driver splits replicas
                # into whole cores by position (None where /sys does not say)
                "topology": [list(self.topology[c]) if c in self.topology else None
                             for c in self.cores]}

    def start(self, key: str, runs: list[RunOrder], *, intra: int, inter: int, kind: str,
              memory_cap_bytes, mode: str, pin: bool, slots: tuple[int, ...] | None,
              sync: str | None, cpus: int | None = None) -> None:
        """slots: a replica's cores as positions in this node's sorted affinity (the driver
        cannot know the node's core numbers); None: pinned as a local worker is, on cpus
        CPUs (its scenario's worker_cpus; None: intra)."""
        if key in self.ended:  # killed or closed before this call arrived (a threaded
            return             # actor does not keep call order)
        if memory_cap_bytes is None:  # the driver's RAM says nothing of this node's
            from engine.run.process.machine import default_memory_cap
            memory_cap_bytes = default_memory_cap()
        if slots is not None:
            pins = (tuple(self.cores[i] for i in slots), tuple(self.cores))
        else:
            pins = pinning.plan(cpus or intra, self.cores, self.topology) if pin else None
            if pin and pins is None and self.ray_cpus:  # every core but Ray's: kept off it
                pins = (tuple(self.cores), tuple(self.cores))
        self.memory_cap_bytes = memory_cap_bytes
        env = thread_env(SimpleNamespace(intra_threads=intra, inter_threads=inter))
        self.workers[key] = WorkerProcess(sys.executable, runs, env, memory_cap_bytes,
                                          kind=kind, mode=mode, pins=pins, sync=sync,
                                          relay=True)

    def poll(self, key: str, wait_s: float) -> tuple[list[str], bool]:
        """The worker's lines so far (waiting up to wait_s for the first), and whether its
        stream has ended. The driver decodes them: a node of another checkout speaks
        another protocol version, and the driver's decode says so."""
        w = self.workers[key]
        out: list[str] = []
        try:
            line = w.events.get(timeout=wait_s)
            while True:
                if line is None:
                    return out, True
                out.append(self._named(line))
                line = w.events.get_nowait()
        except queue.Empty:
            return out, False

    def _named(self, line: str) -> str:
        """A Ready line with this node's identity; any other line as it came."""
        try:
            msg = decode(line)
        except ProtocolError:
            return line  # the driver reads it too, and fails the run
        return encode(replace(msg, node=self.facts())) if isinstance(msg, Ready) else line

    def command(self, key: str, line: str) -> None:
        """An encoded command from the driver."""
        self.workers[key].write_line(line)

    def release(self, keys: list[str], window_s: float) -> None:
        """Open one window for these replicas on this node's own clock (the driver's clock
        is another machine's)."""
        start, end = window_times(window_s, time.monotonic_ns())
        for key in keys:
            self.workers[key].command(Go(start, end))

    def kill(self, key: str) -> None:
        self.ended.add(key)
        if key in self.workers:
            self.workers[key].kill()

    def close(self, key: str) -> tuple[int | None, str]:
        """(exit code, stderr tail); the worker is forgotten."""
        self.ended.add(key)
        w = self.workers.pop(key, None)
        if w is None:
            return None, ""
        rc = w.close()
        return rc, w.stderr_tail()
