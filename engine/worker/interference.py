"""What else used the CPUs while a run was timed: read, not guessed.

A window is two snapshots around the measured loop, of the cores this worker may run on:
the hypervisor's steal time and every process's CPU time from the kernel's per-CPU counters
(/proc/stat, through psutil), this worker's own CPU time (its threads, and children it has
waited for, such as the LibTorch runner), and the load average. From their differences:

- steal: the share of those cores' time the hypervisor gave to other guests;
- others: the share of those cores' time other processes of this machine used.

Both are fractions of the cores' capacity over the window (cores x wall time), so 0.12
reads "12 % of the run". Runs in the worker only.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import psutil

from engine.core.policy import PARENT_CORES_ENV

__all__ = ["Snapshot", "snapshot", "interference", "interference_over", "pinning"]


@dataclass(frozen=True)
class Snapshot:
    wall: float
    cores: tuple[int, ...]
    busy: float  # non-idle seconds on those cores, steal included, guest time not twice
    total: float  # busy + idle + iowait
    steal: float
    own: float  # this process's CPU seconds, waited-for children included


def _own_cpu() -> float:
    t = psutil.Process().cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def snapshot() -> Snapshot:
    cores = tuple(sorted(os.sched_getaffinity(0)))
    per_cpu = psutil.cpu_times(percpu=True)
    busy = total = steal = 0.0
    for c in cores:
        if c >= len(per_cpu):
            continue
        t = per_cpu[c]
        # /proc/stat's user already includes guest time: summing every field counts it twice.
        b = (t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)
             + getattr(t, "steal", 0.0))
        busy += b
        total += b + t.idle + getattr(t, "iowait", 0.0)
        steal += getattr(t, "steal", 0.0)
    return Snapshot(time.monotonic(), cores, busy, total, steal, _own_cpu())


def interference(a: Snapshot, b: Snapshot) -> dict:
    """Steal and other processes' CPU over the window a..b, as fractions of the cores'
    capacity; the affinity the worker had; the load average at the window's end."""
    return interference_over([(a, b)])


def interference_over(windows: list[tuple[Snapshot, Snapshot]]) -> dict:
    """The same over several windows taken together (an interleaved contender's blocks:
    what its rivals' blocks in between took is theirs, not interference)."""
    capacity = sum(b.total - a.total for a, b in windows)
    if capacity <= 0:  # windows shorter than the counters' tick (10 ms)
        steal = others = None
    else:
        stolen = sum(b.steal - a.steal for a, b in windows)
        busy = sum(b.busy - a.busy for a, b in windows)
        own = sum(b.own - a.own for a, b in windows)
        steal = max(0.0, stolen / capacity)
        others = max(0.0, (busy - stolen - own) / capacity)
    last = windows[-1][1]
    return {"steal_frac": steal, "others_cpu_frac": others,
            "window_s": sum(b.wall - a.wall for a, b in windows), "cores": list(last.cores),
            "load_avg_1m_end": os.getloadavg()[0], **pinning()}


def pinning() -> dict:
    """Whether the parent pinned this worker to its cores (and kept itself on the others):
    it says so in the worker's environment (engine/run/process/pinning.py)."""
    parent = os.environ.get(PARENT_CORES_ENV)
    return {"pinned": parent is not None,
            "parent_cores": [int(c) for c in parent.split(",") if c] if parent else None}
