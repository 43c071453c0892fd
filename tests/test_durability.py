"""kill -9 the CLI during a sweep: every run it reported finished is in the database, and
its worker does not outlive it."""

import os
import signal
import subprocess
import sys

import psutil

from store.db import open_db
from tests.conftest import ROOT


def test_kill_9_of_the_cli_loses_no_finished_run(db_path, worker_env):
    cli = subprocess.Popen(
        [sys.executable, "-m", "engine", "run", "--framework", "selftest",
         "--model", "fault_raise", "identity", "fault_hang", "--min-time", "0.05",
         "--min-iters", "5", "--warmup", "1", "--timeout", "600", "--rounds", "1",
         "--db", str(db_path)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    stored = []
    try:
        for line in cli.stdout:  # blocks on the CLI's own output; no sleeping
            if line.startswith("stored "):
                stored.append(line.split()[1])
                if len(stored) == 2:
                    break
        workers = psutil.Process(cli.pid).children(recursive=True)
        assert workers, "the hanging run's worker should be alive"
        os.kill(cli.pid, signal.SIGKILL)
        cli.wait(timeout=30)
        # The worker notices its parent is gone (PR_SET_PDEATHSIG, stdin EOF) and dies.
        gone, alive = psutil.wait_procs(workers, timeout=30)
        assert alive == []
    finally:
        if cli.poll() is None:
            cli.kill()
    with open_db(db_path) as con:
        rows = con.execute("SELECT run_id, model FROM runs ORDER BY started_at").fetchall()
    assert sorted(r[0] for r in rows) == sorted(stored)
    assert [r[1] for r in rows] == ["fault_raise", "identity"]
