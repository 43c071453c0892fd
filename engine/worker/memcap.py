"""A run's cap on resident memory, inside the worker (issue 26 part 4).

Each run may add `cap` bytes of resident memory (the worker's and its children's: the
LibTorch runner, DataLoader workers) over what the worker held when the run began, so a held
worker's earlier runs are not charged to the next one. Two ways to hold it:

- the worker's own memory cgroup, made by the parent (engine/run/process/cgroups.py): the limit is
  set to the group's usage at the run's start plus the cap, and lifted after it; past it
  the kernel's OOM killer ends the worker before the machine swaps, and the parent reads
  the group's oom_kill count to call the run "oom" (engine/run/process/executors.py);
- else a watchdog thread that reads the resident size of the worker and its children every
  WATCH_S; past the cap it writes the sizes it saw to stderr on a line of its own (MARKER,
  which the parent's exit classification reads: engine/run/process/executors.py) and ends the
  worker's process group (a run's C++ call cannot be interrupted any other way). It sees
  a spike shorter than WATCH_S late or not at all: the reason says the watchdog held it.

No address-space limit: TensorFlow and CUDA reserve ranges they never touch, so such a
limit fails runs that fit and is no measure of what a run holds.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Callable

from engine.core.record import MEMORY_CAP_MARKER

__all__ = ["ResidentCap", "tree_rss_bytes", "WATCH_S"]

WATCH_S = 0.05  # the watchdog's period: 20 reads a second of /proc, on the run's own cores
_UNLIMITED_V1 = "-1"


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _rss_kb(pid: int | str) -> int:
    text = _read(f"/proc/{pid}/statm")
    if not text:
        return 0
    return int(text.split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)


def _children(pid: int) -> list[int]:
    # The children its main thread started (the LibTorch runner, DataLoader workers): a
    # framework's thread pools start none, and reading every thread's list (dozens under
    # TensorFlow) twenty times a second would cost the run's own cores.
    text = _read(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in (text or "").split()]


def tree_rss_bytes(pid: int | None = None) -> int:
    """Resident bytes of a process and all its descendants."""
    pid = pid or os.getpid()
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += _rss_kb(p) * 1024
        todo += _children(p)
    return total


class ResidentCap:
    """The cap for each run: `with cap.run():` around the run's body.

    on_over(text): what the watchdog (never a cgroup's) does when a run went over, with
    the reason to store: by default, say it on stderr and end the worker."""

    def __init__(self, cap_bytes: int | None, cgroup: str | None, *,
                 rss: Callable[[], int] = tree_rss_bytes, watch_s: float = WATCH_S,
                 on_over: Callable[[str], None] | None = None):
        self.cap, self.cgroup, self.rss, self.watch_s = cap_bytes, cgroup, rss, watch_s
        self.on_over = on_over or _report_and_end
        self.v2 = bool(cgroup) and os.path.exists(os.path.join(cgroup, "memory.max"))
        self.method = ("cgroup memory.max" if self.v2 else "cgroup memory.limit_in_bytes"
                       if cgroup else "RSS watchdog") if cap_bytes else None

    def _write(self, name: str, value) -> bool:
        try:
            with open(os.path.join(self.cgroup, name), "w") as f:
                f.write(str(value))
            return True
        except OSError:
            return False

    def _set_limit(self, limit: int | None) -> None:
        if self.v2:
            self._write("memory.max", "max" if limit is None else limit)
            if os.path.exists(os.path.join(self.cgroup, "memory.swap.max")):
                self._write("memory.swap.max", "max" if limit is None else 0)
            return
        # v1: memory+swap may never be below memory alone, so lift in that order and
        # lower in the other; with no swap accounting the second write is absent
        value = _UNLIMITED_V1 if limit is None else limit
        memsw = os.path.exists(os.path.join(self.cgroup, "memory.memsw.limit_in_bytes"))
        if limit is None:
            if memsw:
                self._write("memory.memsw.limit_in_bytes", value)
            self._write("memory.limit_in_bytes", value)
        else:
            self._write("memory.limit_in_bytes", value)
            if memsw:
                self._write("memory.memsw.limit_in_bytes", value)

    def usage_bytes(self) -> int:
        name = "memory.current" if self.v2 else "memory.usage_in_bytes"
        text = _read(os.path.join(self.cgroup, name)) if self.cgroup else None
        return int(text) if text and text.isdigit() else self.rss()

    def run(self):
        return _Held(self)


class _Held:
    def __init__(self, cap: ResidentCap):
        self.cap = cap
        self._stop = threading.Event()

    def __enter__(self):
        cap = self.cap
        if not cap.cap:
            return self
        if cap.cgroup:
            cap._set_limit(cap.usage_bytes() + cap.cap)
            return self
        base = cap.rss()
        threading.Thread(target=self._watch, args=(base,), daemon=True).start()
        return self

    def _watch(self, base: int) -> None:
        cap = self.cap
        while not self._stop.wait(cap.watch_s):
            now = cap.rss()
            if now - base > cap.cap:
                cap.on_over(
                    f"resident memory {now / 2**20:,.0f} MiB, "
                    f"{(now - base) / 2**20:,.0f} MiB over the {base / 2**20:,.0f} MiB the "
                    f"worker held when the run began; the cap is {cap.cap / 2**20:,.0f} MiB "
                    f"per run (RSS watchdog, read every {cap.watch_s * 1000:.0f} ms)")
                return

    def __exit__(self, *exc):
        self._stop.set()
        if self.cap.cap and self.cap.cgroup:
            self.cap._set_limit(None)
        return False


def _report_and_end(text: str) -> None:
    """Say why on stderr (its tail reaches the parent), then end this worker and every
    process it started: it leads its own process group."""
    sys.stderr.write(f"\n{MEMORY_CAP_MARKER}{text}\n")
    sys.stderr.flush()
    os.killpg(os.getpgid(0), signal.SIGKILL)
