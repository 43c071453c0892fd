"""Fork servers: workers that start with their framework already imported (issue 39).

A round's worker is a fresh process on purpose (it samples the process-to-process lottery
that one warm process would hide); what it need not redo is the import. One fork server
(engine/worker/zygote.py) per (framework, thread environment) imports the framework once
and forks each worker, handed its three pipes over a socket. `ForkedProc` is what
subprocess.Popen is to a spawned worker, for engine/run/process/executors.py's
WorkerProcess: its pipes, pid, poll/wait and returncode (the fork server reaps the worker
and says how it ended: this process is not its parent).

A framework whose import leaves a thread that a fork would not copy keeps the plain spawn:
the fork server names such threads once imported (less the few known to be fork-safe,
engine/worker/zygote.FORK_SAFE_THREADS). Which frameworks are forked at all is the
executor's choice (executors.FORKED: only those shown to keep the per-process spread).
"""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import tempfile
import threading

from engine.core.paths import PROJECT_ROOT

__all__ = ["ForkServer", "ForkedProc", "ForkServers"]

READY_TIMEOUT_S = 300.0  # an import on a loaded machine; a server that never answers is
SPAWN_TIMEOUT_S = 30.0   # given up, and the worker is spawned instead


class ForkedProc:
    """A forked worker as subprocess.Popen shows a spawned one."""

    def __init__(self, pid: int, stdin_fd: int, stdout_fd: int, stderr_fd: int):
        self.pid = pid
        self.args = ["engine.worker (forked)"]
        self.stdin = os.fdopen(stdin_fd, "wb")
        self.stdout = os.fdopen(stdout_fd, "rb")
        self.stderr = os.fdopen(stderr_fd, "rb")
        self.returncode: int | None = None
        self._ended = threading.Event()
        self.server_import_s: float | None = None  # set by the server for its first fork

    def _exit(self, code: int) -> None:
        self.returncode = code
        self._ended.set()

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode


class ForkServer:
    """One fork server process and the thread that reads what it says."""

    def __init__(self, python: str, framework: str, env: dict):
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        full_env = {**os.environ, **env}
        full_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH")) if p)
        # what it says at import (TensorFlow's notices): a file, never a pipe no one drains
        self._err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [python, "-m", "engine.worker.zygote", str(theirs.fileno()), framework],
            cwd=PROJECT_ROOT, env=full_env, pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._err,
            start_new_session=True)
        theirs.close()
        self.sock = mine
        self.sock.settimeout(READY_TIMEOUT_S)
        try:
            ready = json.loads(self.sock.recv(1 << 16) or b"{}")
        except (OSError, ValueError):
            ready = {}
        self.sock.settimeout(None)
        self.import_s: float | None = ready.get("ready")
        # threads besides its own that a fork would leave behind (engine/worker/zygote.py)
        self.threads: list[str] | None = ready.get("threads")
        self.why_not = (None if self.import_s is not None and not self.threads else
                        f"its fork server did not start: {self._tail()}"
                        if self.import_s is None else
                        f"importing {framework} started {len(self.threads)} thread(s) "
                        f"({', '.join(self.threads)}) that a fork would not copy and that "
                        "do not stop for one")
        self._lock = threading.Lock()
        self._pids: queue.Queue = queue.Queue()
        self.forked = 0  # workers it forked: its first one waited for its import
        self._procs: dict[int, ForkedProc] = {}
        self._exits: dict[int, int] = {}  # exits read before their worker was registered
        if self.why_not is None:
            threading.Thread(target=self._read, daemon=True,
                             name=f"fork-server-{framework}").start()

    def _tail(self) -> str:
        self._err.seek(0)
        return self._err.read()[-2000:].decode("utf-8", "replace").strip()

    @property
    def usable(self) -> bool:
        return self.why_not is None and self.proc.poll() is None

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                break
            msg = json.loads(data)
            if "pid" in msg:
                self._pids.put(msg["pid"])
            elif "exit" in msg:
                with self._lock:
                    proc = self._procs.pop(msg["exit"], None)
                    if proc is None:
                        self._exits[msg["exit"]] = msg["code"]
                if proc is not None:
                    proc._exit(msg["code"])
        # the server is gone: no one can reap or report its workers any more
        self.why_not = self.why_not or "its fork server ended"
        with self._lock:
            orphans, self._procs = list(self._procs.values()), {}
        for proc in orphans:
            proc._exit(-9)
        self._pids.put(None)

    def spawn(self, env: dict, cores, cgroup: str | None) -> ForkedProc:
        """A forked worker with these environment additions, on these cores (None: where the
        fork server is), in this memory cgroup; RuntimeError when the server cannot fork."""
        stdin_r, stdin_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        req = {"env": env, "cores": sorted(cores) if cores else None, "cgroup": cgroup}
        try:
            with self._lock:
                socket.send_fds(self.sock, [json.dumps(req).encode()],
                                [stdin_r, out_w, err_w])
                pid = self._pids.get(timeout=SPAWN_TIMEOUT_S)
                if pid is None:
                    raise RuntimeError("the fork server ended")
                proc = ForkedProc(pid, stdin_w, out_r, err_r)
                # the server's import, paid once while its first worker waited for it
                proc.server_import_s = self.import_s if self.forked == 0 else None
                self.forked += 1
                if pid in self._exits:
                    proc._exit(self._exits.pop(pid))
                else:
                    self._procs[pid] = proc
        except (OSError, queue.Empty) as exc:
            for fd in (stdin_w, out_r, err_r):
                os.close(fd)
            # a pid it sends late would be taken as the next worker's: not used again
            self.why_not = f"it did not fork within {SPAWN_TIMEOUT_S:g} s: {exc!r}"
            raise RuntimeError(f"the fork server did not fork: {exc}") from exc
        finally:
            for fd in (stdin_r, out_w, err_w):
                os.close(fd)
        return proc

    def close(self) -> None:
        try:
            self.sock.close()  # its end reads EOF: it stops (its workers live on)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._err.close()


class ForkServers:
    """The fork servers of one executor, one per (framework, thread environment), started
    when a worker first asks for one and ended by close()."""

    def __init__(self, python: str):
        self.python = python
        self._servers: dict[tuple, ForkServer] = {}
        self._lock = threading.Lock()

    def server(self, framework: str, env: dict) -> ForkServer:
        key = (framework, tuple(sorted(env.items())))
        with self._lock:
            srv = self._servers.get(key)
            # one that started and has since ended (killed) is started again; one that
            # never started, or started threads at import, is kept: its workers spawn
            if srv is None or (srv.import_s is not None and srv.proc.poll() is not None):
                srv = self._servers[key] = ForkServer(self.python, framework, env)
            return srv

    def close(self) -> None:
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
        for srv in servers:
            srv.close()
