"""A fork server for one framework under one thread environment (issue 39): it imports the
framework once, runs nothing with it (no op, so no OpenMP or intra-op pool exists), and
forks a fresh worker for every request, which then runs engine.worker.main as a spawned
worker would. A round's worker so starts with the framework imported instead of importing
it again (torch ~2 s, TensorFlow ~4 s of CPU on this machine, every process).

Started by the parent (engine/run/process/forkserver.py) as
`python -m engine.worker.zygote FD FRAMEWORK` with the group's thread environment already
set (OMP/MKL/TF read it at import, so one fork server per thread environment), FD one end
of an AF_UNIX SOCK_SEQPACKET pair. Messages, one JSON object each:
- to the parent, once: {"ready": import_s, "threads": [names]}, the threads other than
  its own left once a throwaway fork ran every library's fork handlers, less the few known
  to be safe to leave (FORK_SAFE_THREADS): a thread named there would be missing from
  every child, with whatever it held, so the parent then spawns instead;
- from the parent: {"env": {...}, "cores": [...] | null, "cgroup": path | null} with three
  descriptors attached (the worker's stdin, stdout and stderr); an empty message: stop;
- to the parent: {"pid": n} for each fork, {"exit": n, "code": c} when it ends (c as
  subprocess's returncode: negative for a signal). The parent is not the worker's parent,
  so only the fork server can reap it and say how it ended.
With no worker of its alive and none asked for during IDLE_EXIT_S, it ends on its own.

Single-threaded on purpose: a fork copies only the calling thread, and a lock another
thread held at the fork would stay held in the child for ever. SIGCHLD wakes the select
loop through a pipe (signal.set_wakeup_fd).
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback

from engine.core.policy import WORKER_START_ENV

__all__ = ["main", "PRELOAD"]

# What a worker of each framework imports before its first run, imported here once.
PRELOAD = {"torch": ("torch", "torchvision"), "tensorflow": ("tensorflow", "keras"),
           "selftest": ()}  # the framework-free test backend: the fork path alone

# Threads that survive a fork's prepare handlers and are safe to leave behind: jemalloc's
# background purging thread (pyarrow's jemalloc, which keras -> sklearn -> pandas imports
# with TensorFlow). jemalloc takes every one of its locks in its prefork handler and its
# postfork_child handler marks the background threads stopped and disabled in the child
# (background_thread_postfork_child), so nothing of it is held or awaited in a worker.
FORK_SAFE_THREADS = frozenset({"jemalloc_bg_thd"})

# A fork inherits the fork server's address-space layout, which a spawned process draws
# afresh at exec (ASLR). Each forked worker re-draws it at page grain, as exec would:
# a reserved, never-touched hole of up to this many pages below the mmap area (where
# large tensors are mapped) and a brk heap start moved by up to HEAP_PAGES.
MMAP_PAGES = 1 << 16  # 256 MiB of address space at most, no memory
HEAP_PAGES = 1 << 12  # 16 MiB at most, untouched: no memory
_holes: list = []  # the reservations, kept for the worker's life
# With no worker alive and none asked for this long, the server ends (idle_exit_s): a
# sweep's rounds follow one another within seconds, and a server holds its framework
# imported (TensorFlow's: 642 MB resident here), so one left by an unclosed Runner is
# not kept long. A later request pays one import again, as a spawn would.
IDLE_EXIT_S = 30.0
IDLE_ENV = "BENCH_FORK_SERVER_IDLE_S"


def _die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _send(sock: socket.socket, obj: dict) -> None:
    sock.send(json.dumps(obj).encode())


def _child(sock, wake: tuple[int, int], req: dict, fds: list[int]) -> None:
    """In the forked worker: what subprocess's preexec does for a spawned one (a session
    of its own, death with its parent, its cores, its memory cgroup, its three pipes),
    then the worker's main. Never returns."""
    code = 1
    try:
        sock.close()
        for fd in wake:
            os.close(fd)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        _die_with_parent()
        if req.get("cores"):
            os.sched_setaffinity(0, req["cores"])
        if req.get("cgroup"):
            with open(os.path.join(req["cgroup"], "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.environ.update(req.get("env") or {})
        os.environ[WORKER_START_ENV] = "fork"
        redraw_layout()
        from engine.worker.main import main

        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - the worker's last words go to its stderr
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def redraw_layout(rng=None) -> tuple[int, int]:
    """Move where this process's next mappings and heap land by a random number of pages
    (what exec's ASLR would have drawn): returns (hole pages, heap pages)."""
    import mmap
    import random

    rng = rng or random.SystemRandom()
    page = mmap.PAGESIZE
    hole, heap = rng.randrange(1, MMAP_PAGES), rng.randrange(0, HEAP_PAGES)
    _holes.append(mmap.mmap(-1, hole * page, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                            prot=0))  # PROT_NONE
    if heap:
        libc = ctypes.CDLL(None)
        libc.sbrk.restype = ctypes.c_void_p
        libc.sbrk(ctypes.c_long(heap * page))
    return hole, heap


def _threads_past_a_fork() -> list[str]:
    """The names of this process's threads, other than this one, once a fork's prepare
    handlers have run, less those FORK_SAFE_THREADS names: a library that stops its pool
    for a fork (numpy's OpenBLAS starts OPENBLAS_NUM_THREADS - 1 threads at import and ends
    them in its pthread_atfork handler, to start them again when next needed) leaves none
    behind; a thread still there would be missing from every child, with whatever it
    held. (TensorFlow with keras: 4 besides this one after import, jemalloc's after a
    fork.)"""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    me = str(threading.get_native_id())
    names = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:  # it ended meanwhile
            continue
        if tid != me and name not in FORK_SAFE_THREADS:
            names.append(name)
    return sorted(names)


def _reap(sock, live: set) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        live.discard(pid)
        _send(sock, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def idle_exit_s() -> float:
    """How long the server waits with no worker alive and none asked for before it ends
    on its own: a Runner nobody closed (a test's, a script's) must not keep a framework's
    import resident for the life of its process. Its parent starts another when a worker
    asks again."""
    try:
        return max(0.0, float(os.environ.get(IDLE_ENV, "") or IDLE_EXIT_S))
    except ValueError:
        return IDLE_EXIT_S


def main(fd: int, framework: str) -> None:
    sock = socket.socket(fileno=fd)
    _die_with_parent()
    t0 = time.perf_counter()
    for name in PRELOAD[framework]:
        importlib.import_module(name)
    import_s = time.perf_counter() - t0
    _send(sock, {"ready": import_s, "threads": _threads_past_a_fork()})
    wake = os.pipe()
    for w in wake:
        os.set_blocking(w, False)
    signal.set_wakeup_fd(wake[1])
    signal.signal(signal.SIGCHLD, lambda *a: None)
    live: set[int] = set()  # its workers not yet reaped: it must outlive them to reap them
    idle_s, last = idle_exit_s(), time.monotonic()
    while True:
        wait = None if live else max(0.0, idle_s - (time.monotonic() - last))
        ready, _, _ = select.select([sock, wake[0]], [], [], wait)
        if not ready and not live:
            return  # idle: no worker alive and none asked for
        if wake[0] in ready:
            while True:
                try:
                    if not os.read(wake[0], 512):
                        break
                except BlockingIOError:
                    break
            _reap(sock, live)
            last = time.monotonic()
        if sock in ready:
            msg, fds, _, _ = socket.recv_fds(sock, 1 << 16, 3)
            if not msg:  # the parent closed its end, or asked to stop
                for fd in fds:
                    os.close(fd)
                return
            req = json.loads(msg)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(sock, wake, req, fds)
            for f in fds:
                os.close(f)
            live.add(pid)
            last = time.monotonic()
            _send(sock, {"pid": pid})


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
