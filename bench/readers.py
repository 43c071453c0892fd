"""Many readers, two writers, a long run: 32 real browser sessions read the dashboard for
5 minutes while CLI sweeps write to the same DuckDB file and another writer holds it at
intervals; every page load is checked for an exception, and the dashboard's memory is
sampled throughout.

Starts `streamlit run app.py` on a seeded temporary database, runs CLI sweeps of the
diagnostic `identity` model back to back until the duration ends (many short runs: a write
every fraction of a second, the hardest case for the file lock), and drives the chromium
sessions (Debian's chromium via Playwright) round Results, Compare, Cost and History. Prints
page loads, page exceptions (target 0), pages that said results were being written, whether
the sweeps stored every run (target: each exit 0 and one row per attempted run), and the
dashboard process's resident memory when the sessions start, once every session has drawn
a page, at its peak and at the end (target: flat after warm-up).

    .venv/bin/python bench/readers.py [--sessions 32] [--duration 300] [--rounds 12]
                                      [--hold 8] [--hold-every 15] [--app-root PATH]

--hold S: a second writer holds the file for S seconds every --hold-every seconds,
committing every 0.5 s, as a long `python -m engine import` of a big export does: longer
than a page's 5 s wait (0: no second writer). A sweep under way when the duration ends is
let finish and counted; the sessions stop at the duration.

--app-root serves the dashboard from another checkout (an older commit, for a before/after
figure); the sweep and the database always come from this one.
"""

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from store.db import open_db  # noqa: E402
from seeds.records import seed_sweep  # noqa: E402

PAGES = ["results", "compare", "cost", "history"]
HOLD = """
import time
from store.db import open_db
time.sleep(5)
while time.time() < {until}:
    with open_db({db!r}) as con:  # one connection, a commit every 0.5 s: the file changes
        end = time.time() + {hold}
        while time.time() < end:
            # columns named: sweeps has grown since (m009's rule), and a bare VALUES list
            # stops binding, which killed this holder at its first insert
            con.execute("INSERT INTO sweeps (sweep_id, created_at, rounds, seed, "
                        "configurations, plan, command) VALUES (gen_random_uuid()::VARCHAR, "
                        "now(), 1, 0, 0, '[]', 'bench/readers.py holder')")
            time.sleep(0.5)
    time.sleep({every})
"""
CHROMIUM = "/usr/bin/chromium"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(app_root: Path, db: Path, port: int) -> subprocess.Popen:
    env = {**os.environ, "BENCH_DB": str(db), "PYTHONPATH": str(app_root)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true",
         "--browser.gatherUsageStats", "false"],
        cwd=app_root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    for line in proc.stdout:
        if f"127.0.0.1:{port}" in line:
            return proc
    raise SystemExit("streamlit exited before listening")


def rss_mb(pid: int) -> float | None:
    """The process's resident memory (VmRSS), MB; None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except FileNotFoundError:
        return None
    return None


async def session(browser, base: str, i: int, deadline: float, tally: dict):
    page = await (await browser.new_context()).new_page()
    n = i  # sessions start on different pages
    first = True
    while time.monotonic() < deadline:
        name = PAGES[n % len(PAGES)]
        n += 1
        try:
            await page.goto(f"{base}/{name}", wait_until="domcontentloaded")
            await page.wait_for_selector("h1, [data-testid=stException], "
                                         "[data-testid=stAlert]", timeout=30_000)
        except Exception:  # noqa: BLE001 - a page that never drew counts as a failure
            tally["stuck"] += 1
            continue
        # Longer than a page's 5 s wait for the file: an exception or a "being written"
        # notice has been drawn by then (Streamlit's running indicator can lag a load).
        await page.wait_for_timeout(6500)
        tally["loads"] += 1
        if first:
            first = False
            tally["drawn"] += 1
        exc = await page.locator("[data-testid=stException]").count()
        if exc:
            tally["exceptions"] += 1
            text = (await page.locator("[data-testid=stException]").first.inner_text())[:160]
            tally["messages"].append(f"{name}: {text!r}")
        if await page.get_by_text("results are being written").count():
            tally["busy"] += 1


async def watch_memory(pid: int, sessions: int, deadline: float, tally: dict) -> None:
    """The dashboard's RSS every 5 s: at the start, once every session has drawn a page
    (warm), at its peak and at the end."""
    rss = tally["rss"]
    rss["start"] = rss_mb(pid)
    while time.monotonic() < deadline:
        await asyncio.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
        now = rss_mb(pid)
        if now is None:
            break
        if "warm" not in rss and tally["drawn"] >= sessions:
            rss["warm"] = now
        rss["peak"] = max(rss.get("peak") or 0.0, now)
        rss["end"] = now


async def drive(base: str, sessions: int, deadline: float, server_pid: int) -> dict:
    from playwright.async_api import async_playwright

    tally = {"loads": 0, "exceptions": 0, "busy": 0, "stuck": 0, "drawn": 0,
             "messages": [], "rss": {}}
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=[
            "--disable-background-networking", "--disable-component-update"])
        await asyncio.gather(watch_memory(server_pid, sessions, deadline, tally),
                             *(session(browser, base, i, deadline, tally)
                               for i in range(sessions)))
        await browser.close()
    return tally


def sweep_command(db: Path, rounds: int) -> list[str]:
    return [sys.executable, "-m", "engine", "run", "--model", "identity",
            "--framework", "selftest", "--batch", "1", "2", "4", "8", "--threads", "1",
            "--rounds", str(rounds), "--max-rounds", str(rounds), "--warmup", "2",
            "--min-time", "0.05", "--min-iters", "10", "--no-table", "--db", str(db)]


def write_until(deadline: float, db: Path, rounds: int, done: list) -> None:
    """CLI sweeps back to back until the deadline; done gets (exit code, runs it attempts,
    its output's tail) per sweep. The last one started is let finish."""
    while time.monotonic() < deadline:
        out = subprocess.run(sweep_command(db, rounds), cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        done.append((out.returncode, 4 * rounds, out.stdout[-1500:]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=32)
    ap.add_argument("--duration", type=float, default=300.0,
                    help="seconds the sessions read (default 300)")
    ap.add_argument("--rounds", type=int, default=12, help="rounds of each sweep")
    ap.add_argument("--app-root", type=Path, default=ROOT)
    ap.add_argument("--hold", type=float, default=8.0,
                    help="seconds the second writer holds the file (0: none)")
    ap.add_argument("--hold-every", type=float, default=15.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.duckdb"
        seed_sweep(db)
        port = free_port()
        server = start_server(args.app_root.resolve(), db, port)
        try:
            t0 = time.monotonic()
            deadline = t0 + args.duration
            sweeps: list = []
            writer = threading.Thread(target=write_until,
                                      args=(deadline, db, args.rounds, sweeps))
            writer.start()
            holder = subprocess.Popen([sys.executable, "-c", HOLD.format(
                db=str(db), hold=args.hold, every=args.hold_every,
                until=time.time() + args.duration)], cwd=ROOT) if args.hold else None
            tally = asyncio.run(drive(f"http://127.0.0.1:{port}", args.sessions, deadline,
                                      server.pid))
            writer.join()
            if holder:
                holder.wait(timeout=60 + args.hold)
            wall = time.monotonic() - t0
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
        with open_db(db) as con:
            stored = con.execute(
                "SELECT count(*), count(*) FILTER (status = 'ok') FROM runs "
                "WHERE model = 'identity'").fetchone()
    expected = sum(n for _, n, _ in sweeps)
    failed = [(code, tail) for code, _, tail in sweeps if code]
    print(f"dashboard from {args.app_root.resolve()}; {args.sessions} browser sessions on "
          f"{', '.join(PAGES)} for {args.duration:g} s; writer: {len(sweeps)} CLI sweeps of "
          f"{4 * args.rounds} runs back to back, {wall:.0f} s in all"
          + (f"; another writer holds the file {args.hold:g} s every {args.hold_every:g} s"
             if args.hold else ""))
    print(f"page loads: {tally['loads']}   page exceptions: {tally['exceptions']}   "
          f"'being written' notices: {tally['busy']}   pages that never drew: "
          f"{tally['stuck']}")
    print(f"sweeps that exited non-zero: {len(failed)}   runs stored: {stored[0]} of "
          f"{expected} expected ({stored[1]} ok)")
    rss = tally["rss"]
    print("dashboard RSS [MB]: " + "   ".join(
        f"{k} {rss[k]:.0f}" if rss.get(k) is not None else f"{k} -"
        for k in ("start", "warm", "peak", "end")))
    for m in tally["messages"][:10]:
        print("  exception:", m)
    for code, tail in failed[:2]:
        print(f"sweep exit code {code}:\n{tail}")
    return 0 if (tally["exceptions"] == 0 and not failed and sweeps
                 and stored[0] == expected) else 1


if __name__ == "__main__":
    sys.exit(main())
