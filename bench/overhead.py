"""Per-iteration harness overhead, on an identity model that does nothing.

(a) in-process: what the timing loop records for a no-op step (two perf_counter_ns reads,
    the call, the append and the stop checks) and its full per-iteration cost, against a
    bare loop calling the same no-op;
(b) through the real path: a `selftest identity` run in a worker subprocess, as a user's
    run would go, its stored median.
Target: <= 2 us per iteration.

    .venv/bin/python bench/overhead.py
"""

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.worker.measure import time_loop  # noqa: E402
from engine.run.process.runner import Runner  # noqa: E402
from engine.core import MeasurementPolicy  # noqa: E402
from engine.scenarios.inference.spec import RunSpec


def noop():
    return None


def main():
    n = 200_000
    policy = MeasurementPolicy(warmup_iters=1000, min_time_s=0.0, min_iters=n, max_iters=n)
    rows = []
    for r in range(5):
        t = time.perf_counter_ns()
        res = time_loop(noop, policy)
        harness = (time.perf_counter_ns() - t) / (n + 1000)
        t = time.perf_counter_ns()
        for _ in range(n + 1000):
            noop()
        bare = (time.perf_counter_ns() - t) / (n + 1000)
        rows.append((statistics.median(res.samples_ns), harness, bare))
        print(f"round {r + 1}: recorded no-op median {rows[-1][0]:6.0f} ns   loop cost "
              f"{harness:6.0f} ns/iter   bare call {bare:5.0f} ns/iter")
    rec = statistics.median(x[0] for x in rows)
    extra = statistics.median(x[1] - x[2] for x in rows)
    print(f"in-process: a no-op is recorded as {rec / 1000:.3f} us (median); the harness adds "
          f"{extra / 1000:.3f} us per iteration beyond the call itself")

    spec = RunSpec("identity", "selftest", 1, 1, policy=MeasurementPolicy(
        warmup_iters=1000, min_time_s=0.5, min_iters=1000)).validate()
    out = []
    Runner(timeout_s=120).run([spec], on_record=out.append)
    r = out[0]
    print(f"worker subprocess: identity median {r.median_ms * 1000:.3f} us, p99 "
          f"{r.p99_ms * 1000:.3f} us over {r.iterations:,} iterations ({r.status})")
    worst = max(rec, r.median_ms * 1e6, extra)
    print(f"overhead {worst / 1000:.3f} us per iteration: "
          f"{'meets' if worst <= 2000 else 'MISSES'} the <= 2 us target")


if __name__ == "__main__":
    main()
