"""Which logical CPUs share a physical core (issue 26): a pure function of the (package id,
core id) /sys gives each logical CPU, so tests pass fixed topologies (siblings i and i+N/2,
or i and i+1) without the machine's own.

A topology maps a logical CPU to its (package, core). A CPU it does not name is taken as a
core of its own (what a machine without /sys topology, or a test's made-up CPU numbers,
can say). Workers get whole cores: no two workers share a physical core, and a worker with
no more threads than the cores it can have runs one thread per core, its cores' other
hardware threads left idle, so N threads are N cores on every machine.
"""

from __future__ import annotations

import math

__all__ = ["Topology", "read_topology", "core_of", "whole_cores", "cores_counted",
           "split_whole_cores", "leave_one_core", "cpus_for_workers", "replica_cpus"]

Topology = dict  # logical CPU -> (package id, core id)


def read_topology(cpus, root: str = "/sys/devices/system/cpu") -> Topology:
    """(package, core) of each CPU that /sys describes; the others are left out."""
    out = {}
    for c in cpus:
        try:
            with open(f"{root}/cpu{c}/topology/core_id") as f:
                core = int(f.read())
        except (OSError, ValueError):
            continue
        try:
            with open(f"{root}/cpu{c}/topology/physical_package_id") as f:
                package = int(f.read())
        except (OSError, ValueError):
            package = 0
        out[c] = (package, core)
    return out


def core_of(cpu: int, topology: Topology) -> tuple:
    """A CPU's physical core; one the topology does not name is a core of its own."""
    return topology.get(cpu, ("cpu", cpu))


def whole_cores(cpus, topology: Topology) -> list[tuple[int, ...]]:
    """The CPUs grouped by physical core, each group's CPUs sorted, the groups in the
    order of their lowest CPU."""
    groups: dict = {}
    for c in sorted(cpus):
        groups.setdefault(core_of(c, topology), []).append(c)
    return [tuple(g) for g in sorted(groups.values())]


def cores_counted(cpus, topology: Topology) -> int:
    """How many distinct physical cores these CPUs belong to."""
    return len({core_of(c, topology) for c in cpus})


def _take(cores: list[tuple[int, ...]], threads: int) -> tuple[int, ...]:
    """CPUs for `threads` threads on these whole cores: one per core when there are as
    many cores as threads (each core's last hardware thread, so the machine's last CPU,
    where a contention run's neighbour goes, is one of the last worker's), else every
    hardware thread of each core."""
    if len(cores) >= threads:
        return tuple(sorted(g[-1] for g in cores[:threads]))
    return tuple(sorted(c for g in cores for c in g))


def split_whole_cores(cpus, topology: Topology, replicas: int, threads: int
                      ) -> list[tuple[int, ...]] | None:
    """Each of `replicas` workers of `threads` threads on whole cores of its own, taken
    from the last cores (the first stay for this process): `threads` cores each, one
    thread per core, when replicas x threads cores are there; else the fewest whole cores
    that hold `threads` hardware threads each. None when whole cores cannot hold them."""
    groups = whole_cores(cpus, topology)
    if replicas * threads <= len(groups):
        per = threads
    else:
        smallest = min(len(g) for g in groups)
        per = math.ceil(threads / smallest)
        if replicas * per > len(groups):
            return None
    chosen = groups[len(groups) - replicas * per:]
    return [_take(chosen[i * per:(i + 1) * per], threads) for i in range(replicas)]


def leave_one_core(cpus, topology: Topology) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(the first whole core's CPUs, the others): on a cluster node Ray's own processes (its
    raylet, object store, the host relaying the worker's lines) keep a core that no worker
    is pinned to, so they never share the measured cores. A node of one core keeps it."""
    groups = whole_cores(cpus, topology)
    if len(groups) < 2:
        return (), tuple(sorted(cpus))
    return groups[0], tuple(c for g in groups[1:] for c in g)


def cpus_for_workers(node_cpus: int) -> int:
    """A cluster node's CPUs that a spec's threads x replicas must fit: all but the core left
    to Ray's processes (counted as one CPU before the node's topology is known; where that
    core has two hardware threads, both are kept from workers)."""
    return node_cpus - 1 if node_cpus > 1 else node_cpus


def replica_cpus(cpus, replicas: int, threads: int, topology: Topology
                 ) -> list[tuple[int, ...]]:
    """Each of `replicas` replicas' CPUs: whole cores of its own (split_whole_cores), so no
    two share a physical core; when whole cores cannot hold them (odd threads on hardware
    threads), consecutive CPUs in core order, siblings together. The runner's replica
    workers and a serving worker's replica processes are split alike."""
    split = split_whole_cores(cpus, topology, replicas, threads)
    if split is not None:
        return split
    ordered = [c for g in whole_cores(cpus, topology) for c in g]
    return [tuple(ordered[i * threads:(i + 1) * threads]) for i in range(replicas)]
