"""Machine provenance: what PerfZero's system_info carries, plus OS, Python and git commit.

No framework import here (framework versions come from the worker that imported them).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import socket
import subprocess

import psutil

from engine.core.paths import PROJECT_ROOT

__all__ = ["system_info", "git_commit", "default_memory_cap"]


def _cpuinfo() -> tuple[str, int]:
    model, sockets = platform.processor() or "unknown", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name":
                    model = value.strip()
                elif key == "physical id":
                    sockets.add(value.strip())
    except OSError:
        pass
    return model, max(1, len(sockets))


def _accelerator() -> tuple[str | None, int, str | None]:
    """NVIDIA GPUs via nvidia-smi, without importing a framework into this process."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return None, 0, None
    if not out:
        return None, 0, None
    name, _, driver = out[0].partition(",")
    return name.strip(), len(out), driver.strip() or None


@functools.lru_cache(maxsize=1)
def git_commit() -> str | None:
    """The project's commit, with '-dirty' when the tree has uncommitted changes."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT,
                              capture_output=True, text=True, timeout=10, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


@functools.lru_cache(maxsize=1)
def system_info() -> dict:
    """Static facts of this machine; system_id is a hash of them (same machine, same id)."""
    cpu_model, sockets = _cpuinfo()
    accel, accel_count, driver = _accelerator()
    info = {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model,
        "physical_cores": psutil.cpu_count(logical=False) or 0,
        "logical_cores": psutil.cpu_count(logical=True) or 0,
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "sockets": sockets,
        "memory_bytes": psutil.virtual_memory().total,
        "accelerator": accel,
        "accelerator_count": accel_count,
        "accelerator_driver": driver,
        "os": f"{platform.system()} {platform.release()}",
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    info["system_id"] = hashlib.sha256(json.dumps(info, sort_keys=True).encode()).hexdigest()[:16]
    return info


def default_memory_cap() -> int:
    """The resident memory a run may add to its worker when none is given: 75 % of this
    machine's memory (a cluster node computes its own, engine/run/cluster/node_host.py)."""
    return int(psutil.virtual_memory().total * 0.75)
