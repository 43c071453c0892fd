"""A controlled noisy neighbour: another process's busy thread on one core, as on a shared VM.

`Neighbour` starts `python -m engine.run.process.neighbour` pinned to one core. "steady" keeps that
core busy throughout; "onoff" is busy for a few seconds, then idle for a few, in durations
drawn from a seeded generator (another tenant's work coming and going). The process stops by
itself after its lifetime, and with its parent (PDEATHSIG and its stdin's end), so a crashed
sweep leaves nothing spinning. It imports no framework: a pure Python busy loop, the kind of
load a neighbour's interpreter or a build puts on a core.

Used by `run --contention` (a sweep's contention settings) and bench/verdicts.py.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import random
import select
import signal
import subprocess
import sys
import threading
import time

__all__ = ["Neighbour", "MODES", "ONOFF_BUSY_S", "ONOFF_IDLE_S", "main"]

MODES = ("steady", "onoff")
# An on/off neighbour's busy and idle phases, in seconds (uniform between the bounds): a
# phase lasts as long as a run or two, so it hits one contender of a round and not the other
# unless they are timed close together.
ONOFF_BUSY_S = (3.0, 8.0)
ONOFF_IDLE_S = (4.0, 12.0)
LIFETIME_S = 3600.0
READY_TIMEOUT_S = 10.0


def _pdeathsig() -> None:  # in the child, between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except OSError:
        pass


class Neighbour:
    """A context manager: the neighbour runs inside the block, on `core`."""

    def __init__(self, core: int, mode: str = "onoff", seed: int = 0,
                 busy_s: tuple[float, float] = ONOFF_BUSY_S,
                 idle_s: tuple[float, float] = ONOFF_IDLE_S, lifetime_s: float = LIFETIME_S):
        if mode not in MODES:
            raise ValueError(f"neighbour mode {mode!r}; allowed: {', '.join(MODES)}")
        self.core, self.mode, self.seed = core, mode, seed
        self.busy_s, self.idle_s, self.lifetime_s = busy_s, idle_s, lifetime_s
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "Neighbour":
        args = [sys.executable, "-m", "engine.run.process.neighbour", "--core", str(self.core),
                "--mode", self.mode, "--seed", str(self.seed), "--lifetime",
                str(self.lifetime_s), "--busy", *map(str, self.busy_s),
                "--idle", *map(str, self.idle_s)]
        from engine.core.paths import PROJECT_ROOT

        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH")) if p)}
        self.proc = subprocess.Popen(args, cwd=PROJECT_ROOT, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     start_new_session=True, preexec_fn=_pdeathsig)
        # The run starts once the neighbour is on its core (its interpreter's start-up
        # would otherwise be a quiet first part of the run), or when it failed to start.
        ready, _, _ = select.select([self.proc.stdout], [], [], READY_TIMEOUT_S)
        if not ready or self.proc.stdout.readline().strip() != b"ready":
            self.__exit__(None, None, None)
            raise RuntimeError(f"the controlled neighbour did not start on core {self.core} "
                               f"within {READY_TIMEOUT_S:g} s")
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.proc = None


def _phases(mode: str, seed: int, busy_s, idle_s):
    """(busy, seconds) phases, forever: steady is one long busy phase."""
    rng = random.Random(seed)
    while True:
        if mode == "steady":
            yield True, 3600.0
            continue
        yield True, rng.uniform(*busy_s)
        yield False, rng.uniform(*idle_s)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--core", type=int, required=True)
    p.add_argument("--mode", choices=MODES, default="onoff")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lifetime", type=float, default=LIFETIME_S)
    p.add_argument("--busy", type=float, nargs=2, default=ONOFF_BUSY_S)
    p.add_argument("--idle", type=float, nargs=2, default=ONOFF_IDLE_S)
    args = p.parse_args(argv)
    os.sched_setaffinity(0, {args.core})
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    # Our stdin is the parent's pipe: its end means the parent is gone.
    threading.Thread(target=lambda: (sys.stdin.buffer.read(), os._exit(0)),
                     daemon=True).start()
    end = time.monotonic() + args.lifetime
    for busy, seconds in _phases(args.mode, args.seed, args.busy, args.idle):
        until = min(time.monotonic() + seconds, end)
        if busy:
            while time.monotonic() < until:
                pass
        else:
            time.sleep(max(0.0, until - time.monotonic()))
        if time.monotonic() >= end:
            return


if __name__ == "__main__":
    main()
