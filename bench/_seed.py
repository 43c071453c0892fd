"""Stored-looking runs built by hand, for benchmarks that need a database to read (no worker
runs). Not a benchmark itself.

Benchmarks keep their own copy rather than import tests/helpers.py: a benchmark must run
from a checkout without the test tree, and what it measures must not move when a test's
data changes. The values are those tests/helpers.py gave the benchmarks when they imported
it, so figures stay comparable with earlier runs.
"""

from dataclasses import replace
from datetime import datetime, timezone

from engine.core import MeasurementPolicy, RunSpec
from engine.core.protocol import InferenceResult
from engine.core.record import RunRecord
from engine.run.process.records import record_from_result

__all__ = ["SYSTEM", "ok_record", "seed_sweep"]

SYSTEM = {"system_id": "sys-test-0001", "hostname": "box", "cpu_model": "Test CPU @ 2 GHz",
          "physical_cores": 1, "logical_cores": 2, "usable_cores": 2, "sockets": 1,
          "memory_bytes": 24 * 2**30, "accelerator": None, "accelerator_count": 0,
          "accelerator_driver": None, "os": "Linux 6.1", "platform": "Linux-6.1-x86_64",
          "python": "3.11.7"}


def _spec(**kw) -> RunSpec:
    base = dict(model="resnet18", framework="torch", batch_size=1, intra_threads=1,
                image_size=64, policy=MeasurementPolicy(warmup_iters=2, min_time_s=0.0,
                                                         min_iters=3))
    return RunSpec(**{**base, **kw}).validate(cores=64)  # as the engine does: runtime resolved


def _fields(s: RunSpec, run_id: str, minute: int) -> dict:
    return dict(run_id=run_id, sweep_id=None, model=s.model, framework=s.framework,
                runtime=s.runtime, batch_size=s.batch_size, intra_threads=s.intra_threads,
                inter_threads=s.inter_threads, precision=s.precision,
                image_size=s.image_size, device=s.device, weight_policy=s.weight_policy,
                warmup_iters=s.policy.warmup_iters, min_time_s=s.policy.min_time_s,
                min_iters=s.policy.min_iters, max_time_s=s.policy.max_time_s,
                started_at=datetime(2026, 11, 21, 12, minute, 0, 123456, tzinfo=timezone.utc),
                ended_at=datetime(2026, 11, 21, 12, minute, 5, tzinfo=timezone.utc),
                import_s=1.5, load_avg_1m=0.25, memory_cap_bytes=2**30, timeout_s=60.0,
                git_commit="abc123", system_id=SYSTEM["system_id"],
                versions={"torch": "2.14.1"}, threads_effective={"torch_intra_op": 1},
                env={"OMP_NUM_THREADS": "1"})


def ok_record(run_id: str, samples: tuple[int, ...], minute: int = 0, **spec) -> RunRecord:
    """A successful run with these raw samples (ns); spec: RunSpec fields (model, framework,
    batch_size, intra_threads, ...)."""
    s = _spec(**spec)
    res = InferenceResult(run_id, samples_ns=tuple(samples), warmup_ns=(9_000_000, 5_000_000),
                          measured_s=0.006, stop_reason="policy met", load_s=0.5,
                          first_forward_s=0.02, warmup_s=0.014, params=11_689_512,
                          params_trainable=11_689_512, flops_per_sample=1_000_000_000,
                          flops_method="FlopCounterMode", rss_before_bytes=100 * 2**20,
                          peak_rss_bytes=300 * 2**20, peak_rss_method="VmHWM",
                          device_peak_bytes=None)
    return record_from_result(_fields(s, run_id, minute), res, s)


def seed_sweep(db_path, sweep_id: str = "sweep-seeded") -> None:
    """Two frameworks x batch {1, 8} x threads {1, 2} x 2 rounds of mobilenet_v3_small, plus
    one run that ran out of memory, with raw samples: something on every dashboard page."""
    from store.db import open_db
    from store.runs import save_record, save_sweep

    with open_db(db_path) as con:
        save_sweep(con, sweep_id, rounds=2, seed=1, plan=[[], []], configurations=8)
        n = 0
        for fw, base in (("torch", 10_000_000), ("tensorflow", 20_000_000)):
            for batch in (1, 8):
                for threads in (1, 2):
                    for rnd in (1, 2):
                        lat = base * batch // threads + rnd * 100_000
                        samples = tuple(lat + d for d in (-20_000, 0, 10_000, 20_000, -10_000))
                        rec = ok_record(f"{fw}-{batch}-{threads}-{rnd}", samples, minute=n,
                                        framework=fw, batch_size=batch, intra_threads=threads,
                                        model="mobilenet_v3_small")
                        save_record(con, replace(rec, sweep_id=sweep_id, round_no=rnd), SYSTEM)
                        n += 1
        s = _spec(model="mobilenet_v3_small", framework="tensorflow", batch_size=32)
        oom = RunRecord(**_fields(s, "tf-oom", 59), status="oom", reason="ValueError: boom",
                        exit_code=None, signal=None,
                        stderr_tail="Traceback ...\nValueError: boom")
        save_record(con, replace(oom, sweep_id=sweep_id, round_no=2), SYSTEM)
