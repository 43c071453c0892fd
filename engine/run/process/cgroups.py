"""A memory cgroup for one worker, where this machine lets us make one (issue 26 part 4).

A cap on address space (RLIMIT_AS) says nothing of the memory a run holds: TensorFlow and
CUDA reserve large ranges they never touch, and a forked child (the LibTorch runner) has a
limit of its own. The kernel's memory controller counts what is resident, for the worker
and every process it starts, and ends the group with its OOM killer past the limit, before
the machine swaps. The parent makes the group (a child of its own), the worker joins it
between fork and exec, and the worker sets the limit at each run's start to what it holds
then plus the cap (engine/worker/memcap.py), so a held worker's earlier runs are not
charged to the next. Where no group can be made (no controller mounted, not writable,
cgroup v2 without the memory controller delegated), the worker's own RSS watchdog holds
the cap instead, and the run row says which one did.

cgroup v2 (memory.max, memory.events' oom_kill) and v1 (memory.limit_in_bytes,
memory.oom_control's oom_kill) are both read; the root is found from /proc/self/mountinfo
and /proc/self/cgroup, never assumed.
"""

from __future__ import annotations

import os
import uuid

__all__ = ["WorkerCgroup", "make_worker_cgroup", "own_memory_cgroup"]

_MOUNTINFO, _CGROUP = "/proc/self/mountinfo", "/proc/self/cgroup"


def own_memory_cgroup(mountinfo: str = _MOUNTINFO, cgroup: str = _CGROUP) -> str | None:
    """The directory of this process's memory cgroup (v1 memory controller, else v2 with
    memory enabled for its children), or None."""
    try:
        with open(mountinfo) as f:
            mounts = [line.split() for line in f]
        with open(cgroup) as f:
            lines = [line.rstrip("\n").split(":", 2) for line in f]
    except OSError:
        return None
    paths = {c: p for _, controllers, p in (x for x in lines if len(x) == 3)
             for c in controllers.split(",")}
    for m in mounts:
        sep = m.index("-")
        fstype, options = m[sep + 1], m[sep + 3].split(",") if len(m) > sep + 3 else []
        root, point = m[3], m[4]
        if fstype == "cgroup" and "memory" in options and "memory" in paths:
            rel = paths["memory"]
        elif fstype == "cgroup2" and "" in paths:
            rel = paths[""]
        else:
            continue
        if root != "/" and rel.startswith(root):
            rel = rel[len(root):]
        path = os.path.join(point, rel.lstrip("/"))
        if fstype == "cgroup2":
            try:
                with open(os.path.join(path, "cgroup.subtree_control")) as f:
                    if "memory" not in f.read().split():
                        continue  # its children get no memory controller
            except OSError:
                continue
        if os.path.isdir(path):
            return path
    return None


class WorkerCgroup:
    """One worker's memory cgroup: join() between fork and exec, oom_kills() after it ends,
    remove() when it is closed."""

    def __init__(self, path: str):
        self.path = path
        self.v2 = os.path.exists(os.path.join(path, "memory.max"))

    def join(self) -> None:  # in the child, before exec: its memory is charged here from then on
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    def limit_bytes(self) -> int | None:
        """The limit the worker set last (None: none)."""
        name = "memory.max" if self.v2 else "memory.limit_in_bytes"
        try:
            with open(os.path.join(self.path, name)) as f:
                text = f.read().strip()
        except OSError:
            return None
        return None if text == "max" or int(text) >= 2**62 else int(text)

    def oom_kills(self) -> int:
        """How many of the group's processes the kernel's OOM killer ended."""
        name = "memory.events" if self.v2 else "memory.oom_control"
        try:
            with open(os.path.join(self.path, name)) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self) -> None:
        try:
            os.rmdir(self.path)  # empty once its processes are gone
        except OSError:
            pass


def make_worker_cgroup(parent: str | None = None) -> WorkerCgroup | None:
    """A fresh child of this process's memory cgroup, or None where none can be made."""
    parent = parent if parent is not None else own_memory_cgroup()
    if parent is None:
        return None
    path = os.path.join(parent, f"bench-worker-{uuid.uuid4().hex[:12]}")
    try:
        os.mkdir(path)
    except OSError:
        return None
    group = WorkerCgroup(path)
    limit = "memory.max" if group.v2 else "memory.limit_in_bytes"
    if not os.access(os.path.join(path, limit), os.W_OK):
        group.remove()
        return None
    return group
