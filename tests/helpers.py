"""Records built by hand, for store and interop tests (no worker needed)."""

from datetime import datetime, timezone

from engine.record import RunRecord
from engine.runner import record_from_result
from engine.spec import MeasurementPolicy, RunSpec

SYSTEM = {"system_id": "sys-test-0001", "hostname": "box", "cpu_model": "Test CPU @ 2 GHz",
          "physical_cores": 1, "logical_cores": 2, "usable_cores": 2, "sockets": 1,
          "memory_bytes": 24 * 2**30, "accelerator": None, "accelerator_count": 0,
          "accelerator_driver": None, "os": "Linux 6.1", "platform": "Linux-6.1-x86_64",
          "python": "3.11.7"}


def spec(**kw):
    base = dict(model="resnet18", framework="torch", batch_size=1, intra_threads=1,
                image_size=64, policy=MeasurementPolicy(warmup_iters=2, min_time_s=0.0,
                                                         min_iters=3))
    return RunSpec(**{**base, **kw}).validate(cores=64)  # as the engine does: runtime resolved


def base_fields(s: RunSpec, run_id: str, minute: int = 0) -> dict:
    return dict(run_id=run_id, sweep_id="sweep-1", model=s.model, framework=s.framework,
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


def ok_record(run_id="r-ok", samples=(2_010_000, 1_990_000, 2_000_000), minute=0, **kw) -> RunRecord:
    s = spec(**kw)
    ev = {"samples_ns": list(samples), "warmup_ns": [9_000_000, 5_000_000],
          "measured_s": 0.006, "stop_reason": "policy met", "load_s": 0.5,
          "first_forward_s": 0.02, "warmup_s": 0.014, "params": 11_689_512,
          "params_trainable": 11_689_512, "flops_per_sample": 1_000_000_000,
          "flops_method": "FlopCounterMode", "rss_before_bytes": 100 * 2**20,
          "peak_rss_bytes": 300 * 2**20, "peak_rss_method": "VmHWM", "device_peak_bytes": None}
    return record_from_result(base_fields(s, run_id, minute), ev, s)


def failed_record(run_id="r-err", status="error", minute=1) -> RunRecord:
    s = spec()
    return RunRecord(**base_fields(s, run_id, minute), status=status,
                     reason="ValueError: boom", exit_code=None, signal=None,
                     stderr_tail="Traceback ...\nValueError: boom")


def seed_sweep(db_path, sweep_id="sweep-seeded"):
    """Two frameworks x batch {1, 8} x threads {1, 2} x 2 rounds, plus one failed run, with
    raw samples: enough for every dashboard view. torch is clearly faster at batch 1."""
    from dataclasses import replace

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
                        rec = ok_record(f"{fw}-{batch}-{threads}-{rnd}", samples=samples,
                                        minute=n % 60, framework=fw, batch_size=batch,
                                        intra_threads=threads, model="mobilenet_v3_small")
                        save_record(con, replace(rec, sweep_id=sweep_id, round_no=rnd), SYSTEM)
                        n += 1
        save_record(con, replace(failed_record("tf-oom", status="oom", minute=59),
                                 sweep_id=sweep_id, round_no=2, model="mobilenet_v3_small",
                                 framework="tensorflow", runtime="tf_function",
                                 batch_size=32), SYSTEM)
