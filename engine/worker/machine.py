"""The facts of the machine a worker runs on that change what a benchmark measures
(issue #15): threads per core (SMT: whether N threads are N cores or N/2), whether it is a
virtual machine (x86 guests carry the `hypervisor` CPU flag; a hypervisor may show each
hyperthread as a core of its own, so 1 thread per core there is not proof of no SMT), the
CPU flags that change kernel choice (AVX-512, its bf16 and VNNI forms, AMX), and the
frequency governor. Read by the worker and sent with its `ready` event, so a run records the machine
it ran on, wherever that was; /proc and /sys only, no framework."""

from __future__ import annotations

import functools
import os

from engine.core.precision import SPEED_FLAGS, parse_cpu_flags  # one reading, both sides
from engine.core.topology import core_of, read_topology

__all__ = ["SPEED_FLAGS", "machine_facts", "parse_cpu_flags", "parse_siblings",
           "physical_cores_of", "core_ids_of", "hypervisor_of"]


def parse_siblings(text: str) -> int | None:
    """How many logical CPUs a thread_siblings_list names ("0-1", "0,64", "3")."""
    count = 0
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        try:
            count += int(hi) - int(lo) + 1 if hi else 1
        except ValueError:
            return None
    return count or None


def hypervisor_of(cpuinfo: str) -> bool | None:
    """True when /proc/cpuinfo's flags carry `hypervisor` (an x86 guest), False when they
    do not, None without a flags line (Arm's cpuinfo lists Features and says nothing)."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return "hypervisor" in value.split()
    return None


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


@functools.lru_cache(maxsize=1)
def machine_facts() -> dict:
    """threads_per_core (None when unknown), hypervisor (True/False; None when cpuinfo
    does not say), cpu_flags (comma-separated, "" when none of
    SPEED_FLAGS), governor (None when /sys does not say, as in most VMs' guests)."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    siblings = _read(f"/sys/devices/system/cpu/cpu{cpus[0]}/topology/thread_siblings_list")
    per_core = parse_siblings(siblings) if siblings else None
    if per_core is None:
        import psutil

        logical, physical = psutil.cpu_count(logical=True), psutil.cpu_count(logical=False)
        per_core = logical // physical if logical and physical else None
    governor = _read(f"/sys/devices/system/cpu/cpu{cpus[0]}/cpufreq/scaling_governor")
    cpuinfo = _read("/proc/cpuinfo") or ""
    return {"threads_per_core": per_core, "hypervisor": hypervisor_of(cpuinfo),
            "cpu_flags": ",".join(parse_cpu_flags(cpuinfo)),
            "governor": governor.strip() if governor else None,
            "cores_used": physical_cores_of(cpus), "core_ids": core_ids_of(cpus)}


def core_ids_of(cpus, root: str = "/sys/devices/system/cpu") -> list[str] | None:
    """The physical cores ("package:core") the logical CPUs this worker may run on belong
    to, so that replicas' cores are counted once however many of them ran there. None when
    /sys does not say for every CPU."""
    topology = read_topology(cpus, root)
    if len(topology) < len(set(cpus)):
        return None
    return sorted({"%s:%s" % core_of(c, topology) for c in cpus})


def physical_cores_of(cpus, root: str = "/sys/devices/system/cpu") -> int | None:
    """How many physical cores the logical CPUs this worker may run on belong to: 2 pinned
    threads on SMT siblings are 1 core, on two cores 2 (what Cost divides throughput by).
    None when /sys does not say."""
    ids = core_ids_of(cpus, root)
    return len(ids) if ids else None
