"""Dashboard render time and memory on a large database.

Generates 5,000 runs with 200 raw samples each (1 M samples; 10 models x 2 frameworks x
5 batch sizes x 2 thread counts x 25 sweeps of one round... shaped like real sweeps), then
renders each page through Streamlit's AppTest in this process and reports the process's
resident memory. Each page is rendered cold (query caches cleared: what the first visit
after a write costs) and then twice from the cache (what an unchanged rerun costs), side by
side. Targets: every page <= 1.5 s cold, RSS <= 400 MB.

    .venv/bin/python bench/dashboard.py [--runs 5000] [--samples 200]
"""

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from engine.core.catalog import CATALOG  # noqa: E402
from store.db import open_db  # noqa: E402
from store.runs import save_record, save_sweep  # noqa: E402
from seeds.records import SYSTEM, ok_record  # noqa: E402

PAGES = ["views/run.py", "views/results.py", "views/compare.py", "views/system.py"]


def generate(db: Path, runs: int, n_samples: int) -> float:
    rng = random.Random(0)
    models = list(CATALOG)[:10]
    configs = [(m, f, b, t) for m in models for f in ("torch", "tensorflow")
               for b in (1, 2, 8, 32, 64) for t in (1, 2)]
    t0 = time.perf_counter()
    with open_db(db) as con:
        made, sweep_no = 0, 0
        while made < runs:
            sweep = f"sweep-{sweep_no:03d}"
            save_sweep(con, sweep, rounds=2, seed=sweep_no, plan=[[], []],
                       configurations=len(configs))
            for rnd in (1, 2):
                for m, f, b, t in configs:
                    if made >= runs:
                        break
                    base = 5e6 * b / t * (1.3 if f == "tensorflow" else 1.0)
                    samples = tuple(int(base * rng.lognormvariate(0, 0.05))
                                    for _ in range(n_samples))
                    rec = ok_record(f"r{made:05d}", samples=samples, minute=made % 60,
                                    model=m, framework=f, batch_size=b, intra_threads=t)
                    save_record(con, replace(rec, sweep_id=sweep, round_no=rnd,
                                             runtime="eager" if f == "torch" else "tf_function"),
                                SYSTEM)
                    made += 1
            sweep_no += 1
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5000)
    ap.add_argument("--samples", type=int, default=200)
    args = ap.parse_args()
    import logging
    logging.getLogger("streamlit").setLevel(logging.ERROR)  # AppTest's bare-mode warnings
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "big.duckdb"
        secs = generate(db, args.runs, args.samples)
        size = db.stat().st_size / 2**20
        print(f"generated {args.runs:,} runs x {args.samples} samples in {secs:.1f} s "
              f"({size:.0f} MiB)")
        os.environ["BENCH_DB"] = str(db)
        import streamlit as st
        from streamlit.testing.v1 import AppTest

        views = [(page, page, None) for page in PAGES]
        # The heaviest view: Compare over all stored runs of a model (quantiles of 500
        # runs' samples computed in DuckDB), not just the newest sweep.
        views.append(("compare (all runs)", "views/compare.py",
                      lambda at: at.selectbox(key="sweep").set_value(None)))
        worst = 0.0
        for label, page, adjust in views:
            times = []
            for i in range(3):
                at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
                at.run()
                at.switch_page(page)
                if adjust is not None:
                    at.run()
                    adjust(at)
                if i == 0:
                    st.cache_data.clear()  # the first render reads everything afresh
                t = time.perf_counter()
                at.run()
                times.append(time.perf_counter() - t)
                assert not at.exception, [e.value for e in at.exception]
            cold, warm = times[0], statistics.median(times[1:])
            worst = max(worst, cold)
            print(f"{label:20} render cold {cold:6.3f} s, cached {warm:6.3f} s "
                  f"({cold / warm:.1f}x)")
        rss = psutil.Process().memory_info().rss / 2**20
        print(f"slowest page, cold {worst:.3f} s ({'meets' if worst <= 1.5 else 'MISSES'} "
              f"<= 1.5 s); "
              f"resident memory {rss:.0f} MB ({'meets' if rss <= 400 else 'MISSES'} <= 400 MB)")


if __name__ == "__main__":
    main()
