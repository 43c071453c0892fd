"""Many readers, one writer: eight real browser sessions read the dashboard while a CLI
sweep writes to the same DuckDB file, and every page load is checked for an exception.

Starts `streamlit run app.py` on a seeded temporary database, starts a CLI sweep of the
diagnostic `identity` model (many short runs: a write every fraction of a second, the
hardest case for the file lock), and drives eight chromium sessions (Debian's chromium via
Playwright) round Results, Compare, Cost and System until the sweep ends. Prints page
loads, page exceptions (target 0), pages that said results were being written, and whether
the sweep stored every run (target: exit 0 and one row per attempted run).

    .venv/bin/python bench/readers.py [--sessions 8] [--rounds 12] [--hold S] [--app-root PATH]

--hold S adds a second writer that holds the file for S seconds every 15 s, committing
every 0.5 s, as a long `python -m engine import` of a big export does: longer than a page's
5 s wait.

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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from store.db import open_db  # noqa: E402
from bench._seed import seed_sweep  # noqa: E402

PAGES = ["results", "compare", "cost", "system"]
HOLD = """
import os, time
from store.db import open_db
time.sleep(5)
while True:
    try:
        os.kill({pid}, 0)
    except ProcessLookupError:
        break
    with open_db({db!r}) as con:  # one connection, a commit every 0.5 s: the file changes
        end = time.time() + {hold}
        while time.time() < end:
            # columns named: sweeps has grown since (m009's rule), and a bare VALUES list
            # stops binding, which killed this holder at its first insert
            con.execute("INSERT INTO sweeps (sweep_id, created_at, rounds, seed, "
                        "configurations, plan, command) VALUES (gen_random_uuid()::VARCHAR, "
                        "now(), 1, 0, 0, '[]', 'bench/readers.py holder')")
            time.sleep(0.5)
    time.sleep(15)
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


async def session(browser, base: str, i: int, writer: subprocess.Popen, tally: dict):
    page = await (await browser.new_context()).new_page()
    n = i  # sessions start on different pages
    while writer.poll() is None:
        name = PAGES[n % len(PAGES)]
        n += 1
        await page.goto(f"{base}/{name}", wait_until="domcontentloaded")
        try:
            await page.wait_for_selector("h1, [data-testid=stException], "
                                         "[data-testid=stAlert]", timeout=30_000)
        except Exception:  # noqa: BLE001 - a page that never drew counts as a failure
            tally["stuck"] += 1
            continue
        # Longer than a page's 5 s wait for the file: an exception or a "being written"
        # notice has been drawn by then (Streamlit's running indicator can lag a load).
        await page.wait_for_timeout(6500)
        tally["loads"] += 1
        exc = await page.locator("[data-testid=stException]").count()
        if exc:
            tally["exceptions"] += 1
            text = (await page.locator("[data-testid=stException]").first.inner_text())[:160]
            tally["messages"].append(f"{name}: {text!r}")
        if await page.get_by_text("results are being written").count():
            tally["busy"] += 1


async def drive(base: str, sessions: int, writer: subprocess.Popen) -> dict:
    from playwright.async_api import async_playwright

    tally = {"loads": 0, "exceptions": 0, "busy": 0, "stuck": 0, "messages": []}
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=[
            "--disable-background-networking", "--disable-component-update"])
        await asyncio.gather(*(session(browser, base, i, writer, tally)
                               for i in range(sessions)))
        await browser.close()
    return tally


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--app-root", type=Path, default=ROOT)
    ap.add_argument("--hold", type=float, default=0.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.duckdb"
        seed_sweep(db)
        port = free_port()
        server = start_server(args.app_root.resolve(), db, port)
        try:
            t0 = time.monotonic()
            writer = subprocess.Popen(
                [sys.executable, "-m", "engine", "run", "--model", "identity",
                 "--framework", "selftest", "--batch", "1", "2", "4", "8", "--threads", "1",
                 "--rounds", str(args.rounds), "--max-rounds", str(args.rounds),
                 "--warmup", "2", "--min-time", "0.05", "--min-iters", "10", "--no-table",
                 "--db", str(db)],
                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            holder = subprocess.Popen([sys.executable, "-c", HOLD.format(
                db=str(db), hold=args.hold, pid=writer.pid)], cwd=ROOT) if args.hold else None
            tally = asyncio.run(drive(f"http://127.0.0.1:{port}", args.sessions, writer))
            out = writer.communicate()[0]
            if holder:
                holder.wait(timeout=60)
            wall = time.monotonic() - t0
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
        with open_db(db) as con:
            stored = con.execute(
                "SELECT count(*), count(*) FILTER (status = 'ok') FROM runs "
                "WHERE model = 'identity'").fetchone()
    expected = 4 * args.rounds
    print(f"dashboard from {args.app_root.resolve()}; {args.sessions} browser sessions; "
          f"writer: CLI sweep of {expected} runs, {wall:.0f} s"
          + (f"; another writer holds the file {args.hold:g} s every 15 s" if args.hold
             else ""))
    print(f"page loads: {tally['loads']}   page exceptions: {tally['exceptions']}   "
          f"'being written' notices: {tally['busy']}   pages that never drew: "
          f"{tally['stuck']}")
    print(f"writer exit code: {writer.returncode}   runs stored: {stored[0]} of {expected} "
          f"({stored[1]} ok)")
    for m in tally["messages"][:10]:
        print("  exception:", m)
    if writer.returncode:
        print(out[-1500:])
    return 0 if (tally["exceptions"] == 0 and writer.returncode == 0
                 and stored[0] == expected) else 1


if __name__ == "__main__":
    sys.exit(main())
