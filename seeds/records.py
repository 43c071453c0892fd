"""Stored-looking runs built by hand, with raw samples and fixed numbers (no worker runs):
the one builder of test data, for tests/ and for the benchmarks in bench/ that need a
database to read. It lives outside both because neither may import the other (a benchmark
runs from a checkout without the test tree).

Records go through the engine's own record_from_result, so their statistics are derived
from their raw samples as a real run's are. Tests assert figures worked out from these
values and the benchmarks compare runs over time, so change a value only with both in
mind; a new case is a new builder.
"""

from datetime import datetime, timezone

from engine.core import MeasurementPolicy
from engine.scenarios.inference.spec import RunSpec
from engine.scenarios.inference.messages import InferenceResult
from engine.scenarios.training.messages import TrainResult
from engine.core.record import RunRecord
from engine.run.process.records import config_extra, record_from_result
from engine.scenarios import DATA_LOADING, TRAINING

__all__ = ["SYSTEM", "LOCAL", "MACHINES", "spec", "base_fields", "ok_record", "failed_record",
           "seed_sweep", "train_spec", "train_record", "load_record", "seed_workloads",
           "seed_machines", "TOKEN_SWEEP", "seed_tokens", "GEN_SWEEP", "GEN_RUNTIMES", "gen_record", "seed_generation",
           "GS_SWEEP", "GS_USERS_SWEEP", "GS_USERS", "gs_record", "gs_test", "gs_summary",
           "seed_genserve"]

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
    res = InferenceResult(run_id, samples_ns=tuple(samples), warmup_ns=(9_000_000, 5_000_000),
                          measured_s=0.006, stop_reason="policy met", load_s=0.5,
                          first_forward_s=0.02, warmup_s=0.014, params=11_689_512,
                          params_trainable=11_689_512, flops_per_sample=1_000_000_000,
                          flops_method="FlopCounterMode", rss_before_bytes=100 * 2**20,
                          peak_rss_bytes=300 * 2**20, peak_rss_method="VmHWM",
                          device_peak_bytes=None, model_baseline_bytes=240 * 2**20,
                          reference_bytes=10 * 2**20, model_peak_bytes=50 * 2**20)
    return record_from_result(base_fields(s, run_id, minute), res, s)


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


TOKEN_SWEEP = "sweep-tokens"


def seed_tokens(db_path, sweep_id=TOKEN_SWEEP):
    """bert_base at 128 tokens, batch 1, 1 thread, torch and tensorflow x 2 identical
    rounds: torch 10 ms a batch (5 samples summing to 50 ms: 100.0 sequences/s, 12,800
    tokens/s), tensorflow 20 ms (50.0 and 6,400)."""
    from dataclasses import replace

    from store.db import open_db
    from store.runs import save_record, save_sweep

    with open_db(db_path) as con:
        save_sweep(con, sweep_id, rounds=2, seed=1, plan=[[], []], configurations=2)
        for n, (fw, lat) in enumerate((("torch", 10_000_000), ("tensorflow", 20_000_000))):
            for rnd in (1, 2):
                samples = tuple(lat + d for d in (-20_000, 0, 10_000, 20_000, -10_000))
                rec = ok_record(f"bert-{fw}-{rnd}", samples=samples, minute=2 * n + rnd,
                                model="bert_base", framework=fw, image_size=128)
                save_record(con, replace(rec, sweep_id=sweep_id, round_no=rnd), SYSTEM)


def train_spec(**kw):
    from engine.scenarios.training.spec import TrainSpec
    return TrainSpec(**{"model": "resnet18", "framework": "torch", "batch_size": 32,
                        "intra_threads": 1, **kw}).validate(cores=4)


def train_record(run_id, framework, walls, tests, **kw):
    s = train_spec(framework=framework, epochs=len(walls), steps_per_epoch=4)
    epochs = [dict(epoch=i + 1, steps=4, samples=128, wall_s=w, samples_per_s=128 / w,
                   train_loss=2.0 - i * 0.5, train_acc=0.2 + 0.3 * i, test_loss=2.1 - i * 0.4,
                   test_acc=t, eval_s=0.1) for i, (w, t) in enumerate(zip(walls, tests))]
    res = TrainResult(run_id,
                      samples_ns=tuple(100_000_000 + 1000 * i for i in range(4 * len(walls) - 2)),
                      warmup_ns=(900_000_000, 150_000_000), measured_s=1.0, stop_reason="steps",
                      load_s=0.5, first_forward_s=0.9, warmup_s=1.05, params=11_181_642,
                      params_trainable=11_181_642, flops_per_sample=None,
                      flops_method="not counted for training", rss_before_bytes=1,
                      peak_rss_bytes=2, peak_rss_method="VmHWM", device_peak_bytes=None,
                      epochs=tuple(epochs),
                      step_losses=tuple(2.3 - 0.1 * i for i in range(4 * len(walls))),
                      data_description="digits", feed_sha256="abc", **kw)
    base = {**base_fields(s, run_id), "kind": TRAINING.kind, "dataset": "digits",
            "extra": config_extra(s)}
    return record_from_result(base, res, s)



def load_record(run_id, fmt, runtime, batch, workers, ms, status="ok"):
    """A stored-looking data-loading run (no worker needed)."""
    pipeline, rest = runtime.split(":")
    decoder, normalize = rest.split("+")
    return RunRecord(run_id=run_id, sweep_id="sweep-load", model=fmt, framework="numpy",
                     runtime=runtime, batch_size=batch, intra_threads=1, inter_threads=1,
                     precision=None, image_size=64, device="cpu", weight_policy=None,
                     warmup_iters=10, min_time_s=2.0, min_iters=30, max_time_s=60.0,
                     status=status, reason="" if status == "ok" else
                     "only 3 of the required 30 iterations ran before max_time",
                     median_ms=ms, throughput=batch * 1000 / ms, validity="valid",
                     kind=DATA_LOADING.kind, workers=workers, dataset=f"{fmt}-64x64px-seed0",
                     system_id=SYSTEM["system_id"],
                     round_no=1, started_at=datetime(2026, 11, 21, 13, 0, tzinfo=timezone.utc),
                     extra={"decoder": decoder, "normalize": normalize, "pipeline": pipeline},
                     samples_ns=(int(ms * 1e6),) * 5)


def seed_workloads(db_path):
    """A training sweep (torch profiled, TensorFlow) and a data-loading sweep."""
    from dataclasses import replace

    from store.db import open_db
    from store.runs import save_record, save_sweep

    with open_db(db_path) as con:
        save_sweep(con, "sweep-train", rounds=1, seed=1, plan=[[]], configurations=2)
        save_sweep(con, "sweep-load", rounds=1, seed=1, plan=[[]], configurations=6)
        torch_rec = train_record("t-torch", "torch", [1.6, 1.0], [0.5, 0.8],
                                 profile_ops=({"op": "aten::convolution_backward",
                                               "device": "cpu", "calls": 40,
                                               "self_ms": 120.5, "total_ms": 130.0},
                                              {"op": "aten::mkldnn_convolution",
                                               "device": "cpu", "calls": 40,
                                               "self_ms": 60.0, "total_ms": 61.0}),
                                 profile_step_s=0.2)
        import gzip
        trace = gzip.compress(b'{"traceEvents": [{"name": "aten::conv", "ph": "X"}]}')
        save_record(con, replace(torch_rec, sweep_id="sweep-train", round_no=1,
                                 trace_gz=trace), SYSTEM)
        save_record(con, replace(train_record("t-tf", "tensorflow", [3.0, 2.0], [0.3, 0.7]),
                                 sweep_id="sweep-train", round_no=1), SYSTEM)
        n = 0
        for impl, base in (("loop:pillow+numpy", 4.0), ("loop:opencv+numpy", 2.0),
                           ("torch_dataloader:opencv+torch", 1.5)):
            for batch in (8, 32):
                for workers in ((0, 2) if impl.startswith("torch") else (0,)):
                    n += 1
                    save_record(con, load_record(f"l-{n}", "png", impl, batch, workers,
                                                 base * batch / 8 / (1 + workers)), SYSTEM)
        save_record(con, load_record("l-bad", "png", "loop:pillow+numpy", 64, 0, 40.0,
                                     status="invalid"), SYSTEM)


# Three machines for the Cost page (issue 15): the benchmark machine, which names no catalog
# shape, and two that do. Each split is three rounds, as (threads, replicas, throughputs,
# p99s); the round medians are the figures the tests expect.
LOCAL = {**SYSTEM, "system_id": "sys-local", "hostname": "bench", "logical_cores": 4,
         "physical_cores": 2, "usable_cores": 4}
MACHINES = {
    "sys-local": (None, [(2, 1, (15.0, 16.0, 17.0), (90.0, 95.0, 99.0)),
                         (4, 1, (25.0, 26.0, 27.0), (80.0, 85.0, 88.0)),
                         (2, 2, (28.0, 28.4, 29.0), (70.0, 72.0, 75.0)),
                         (1, 4, (26.5, 27.0, 27.5), (60.0, 62.0, 66.0))]),
    "sys-c6i": ("c6i.8xlarge", [(32, 1, (200.0, 210.0, 205.0), (30.0, 31.0, 32.0)),
                                (16, 2, (230.0, 236.0, 240.0), (40.0, 41.0, 44.0))]),
    # A second c6i.8xlarge, slower: its runs are its own figure, never averaged with the first.
    "sys-c6i-b": ("c6i.8xlarge", [(16, 2, (100.0, 100.0, 100.0), (50.0, 50.0, 50.0))]),
    "sys-e4": ("VM.Standard.E4.Flex 16 OCPU/32 GB",
               [(32, 1, (150.0, 160.0, 170.0), (20.0, 21.0, 23.0))]),
}


def seed_machines(db_path):
    """resnet18 torch (eager) batch 8 fp32 on the three machines above (2 threads per core
    each), plus a bf16 run on the first c6i that no fp32 figure may include."""
    from dataclasses import replace

    from store.db import open_db
    from store.runs import save_record

    n = 0
    with open_db(db_path) as con:
        for system_id, (shape, splits) in MACHINES.items():
            system = {**LOCAL, "system_id": system_id, "hostname": system_id,
                      "cpu_model": f"CPU of {system_id}"}
            for threads, replicas, throughputs, p99s in splits:
                for rnd, (tp, p99) in enumerate(zip(throughputs, p99s), start=1):
                    n += 1
                    rec = ok_record(f"m-{n}", minute=n % 60, batch_size=8,
                                    intra_threads=threads)
                    save_record(con, replace(rec, sweep_id=None, round_no=rnd,
                                             system_id=system_id, machine_shape=shape,
                                             threads_per_core=2, replicas=replicas,
                                             throughput=tp, p99_ms=p99), system)
        rec = ok_record("m-bf16", batch_size=8, intra_threads=32, precision="bf16")
        save_record(con, replace(rec, sweep_id=None, system_id="sys-c6i",
                                 machine_shape="c6i.8xlarge", threads_per_core=2,
                                 replicas=1, throughput=999.0), None)


# A generation sweep (issue 37): smollm2_135m on torch eager, torch compile and OpenVINO
# GenAI, prompt 128 and 512, 32 tokens out, batch 1 and 4, 2 threads, 2 rounds, 3 timed calls
# each with a reading per token; plus a run refused by its runtime and one whose tokens
# disagreed with the reference (invalid, as the agreement check words it).
GEN_SWEEP = "sweep-generate"
# runtime -> (TTFT ms per prompt token at batch 1, TPOT ms at batch 1, drift per round)
GEN_RUNTIMES = {"eager": (0.10, 20.0, 0.02), "compile": (0.08, 12.0, 0.05),
                "openvino_genai": (0.05, 8.0, 0.0)}


def gen_record(run_id, runtime, prompt_len, batch, rnd, output_len=32, minute=0):
    """A stored-looking generation run: readings built from fixed per-token times (the
    round adds the runtime's drift, the calls 0, 1 and 2 %), figures derived by the
    engine."""
    from engine.scenarios import GENERATION
    from engine.scenarios.generation.agreement import REFERENCE_TEXT
    from engine.scenarios.generation.messages import GenResult
    from engine.scenarios.generation.spec import GenSpec

    s = GenSpec("smollm2_135m", "torch", runtime, batch, prompt_len, output_len, 2,
                policy=MeasurementPolicy(warmup_iters=1, min_time_s=0.0,
                                         min_iters=3)).validate(cores=64)
    per_token, tpot, drift = GEN_RUNTIMES[runtime]
    tokens, samples = [], []
    for call in range(3):
        f = (1 + drift * (rnd - 1)) * (1 + 0.01 * call)
        ttft = int(per_token * prompt_len * batch * f * 1e6)
        step = int(tpot * (1 + 0.1 * (batch - 1)) * f * 1e6)
        tokens.append(tuple(ttft + k * step for k in range(output_len)))
        samples.append(tokens[-1][-1] + 200_000)
    res = GenResult(run_id, load_s=1.2, first_forward_s=0.9, warmup_ns=(samples[0],),
                    samples_ns=tuple(samples), warmup_s=samples[0] / 1e9,
                    measured_s=sum(samples) / 1e9, stop_reason="policy met",
                    params=134_515_008, rss_before_bytes=400 * 2**20,
                    peak_rss_bytes=900 * 2**20, peak_rss_method="VmHWM",
                    model_baseline_bytes=380 * 2**20, model_peak_bytes=520 * 2**20,
                    batch_size=batch, prompt_len=prompt_len, output_len=output_len,
                    token_ns=tuple(t for call in tokens for t in call), timing_source="a transformers BaseStreamer",
                    agreement=1.0, agreement_tokens=batch * output_len,
                    agreement_reference=REFERENCE_TEXT,
                    build_s={"compile": 38.0, "openvino_genai": 25.0}.get(runtime, 1.2),
                    kv_cache_bytes=s.kv_cache_bytes)
    base = {**base_fields(s, run_id, minute), "kind": GENERATION.kind,
            "extra": config_extra(s)}
    return record_from_result(base, res, s)


def seed_generation(db_path, sweep_id=GEN_SWEEP):
    """The generation sweep above, with its refused and its invalid run (round 2)."""
    from dataclasses import replace

    from engine.scenarios import GENERATION
    from engine.scenarios.generation.spec import GenSpec
    from store.db import open_db
    from store.runs import save_record, save_sweep

    with open_db(db_path) as con:
        save_sweep(con, sweep_id, rounds=2, seed=1, plan=[[], []], configurations=12,
                   command="python -m engine generate --models smollm2_135m --runtimes "
                           "eager,compile,openvino_genai --prompt-lens 128,512 "
                           "--output-lens 32 --batches 1,4 --threads 2 --rounds 2")
        n = 0
        for rnd in (1, 2):
            for runtime in GEN_RUNTIMES:
                for prompt_len in (128, 512):
                    for batch in (1, 4):
                        n += 1
                        rec = gen_record(f"g-{runtime}-{prompt_len}-{batch}-{rnd}", runtime,
                                         prompt_len, batch, rnd, minute=n % 60)
                        save_record(con, replace(rec, sweep_id=sweep_id, round_no=rnd),
                                    SYSTEM)
        for run_id, runtime, status, reason in (
                ("g-ort-refused", "onnxruntime_genai", "error",
                 "Refused: ONNX Runtime GenAI's builder has no GPT-2 architecture"),
                ("g-keras-invalid", "keras_hub", "invalid",
                 "OutputMismatch: greedy tokens agree with the reference (torch eager fp32 "
                 "greedy on the same prompts) on 41.0% of 32 positions (rows x first 32 "
                 "tokens), under the 90% threshold for fp32")):
            s = GenSpec("smollm2_135m", "tensorflow" if runtime == "keras_hub" else "torch",
                        runtime, 1, 128, 32, 2).validate(cores=64)
            save_record(con, RunRecord(**{**base_fields(s, run_id, 59), "kind": GENERATION.kind,
                                          "extra": config_extra(s), "sweep_id": sweep_id,
                                          "round_no": 2, "status": status,
                                          "reason": reason}), SYSTEM)


# Serving a language model (issue 38): tiny_llama, prompt 16, output 8, standard bounds
# (TTFT 2,000 ms, TPOT 100 ms). GS_SWEEP: a VALID Server test at 5 req/s (10 requests, TTFT
# 40..120 ms and one of 310, TPOT 10 ms: a span of exactly 2 s) and an INVALID one at 20
# req/s (TTFT 100 + 300 i ms: 3 over the bound, 1 SUT error). GS_USERS_SWEEP: closed loops
# of 1, 2, 4 and 8 users on OpenVINO's continuous batching (TTFT 30 ms, TPOT 10, 12.5, 20
# ms; 8 users TTFT 200 ms, TPOT 45 ms, dominated by 4), 4 requests a user back to back.
GS_SWEEP, GS_USERS_SWEEP = "sweep-genserve", "sweep-genserve-users"
GS_USERS = {1: (30, 10.0), 2: (30, 12.5), 4: (30, 20.0), 8: (200, 45.0)}


def gs_summary(result: str, failed: tuple[str, ...], ttft99_ns: int, tpot99_ns: int,
                tok_s: float, qps: float, errors: int) -> str:
    """A token-mode summary as LoadGen 6.0.17 prints one (the lines parse_summary reads)."""
    rules = "".join(f"  {r} satisfied : {'NO' if r in failed else 'Yes'}\n" for r in (
        "Performance constraints", "Min duration", "Min queries", "Early stopping"))
    return ("MLPerf Results Summary\nScenario : Server\nMode     : PerformanceOnly\n"
            f"Completed tokens per second: {tok_s:.2f}\nResult is : {result}\n{rules}"
            "TTFT Early Stopping Result:\n * Run successful.\n"
            "TPOT Early Stopping Result:\n * Run successful.\n"
            "================================================\n"
            f"99.00 percentile first token latency (ns)   : {ttft99_ns}\n"
            f"99.00 percentile time to output token (ns)   : {tpot99_ns}\n"
            f"target_qps : {qps:g}\nttft_latency (ns): 2000000000\n"
            f"tpot_latency (ns): 100000000\n\n"
            + (f"{errors} ERROR encountered. See detailed log.\n" if errors
               else "No errors encountered during test.\n"))


def gs_record(run_id, scenario, issue_ms, ttft_ms, tpot_ms, *, engine="eager", users=1,
              qps=None, summary="", minute=0):
    """A stored-looking genserve test: every request of 8 tokens from fixed times (ms),
    figures and verdict derived by the engine."""
    from engine.scenarios.genserve.spec import GenServeSpec

    seqs = 1 if engine == "eager" else 8
    s = GenServeSpec("tiny_llama", engine, scenario, prompt_len=16, output_len=8,
                     target_qps=qps, users=users, max_num_seqs=seqs,
                     min_query_count=max(len(issue_ms), users)).validate(cores=64)
    return gs_test(s, run_id, issue_ms, ttft_ms, tpot_ms, summary=summary, minute=minute)


def gs_test(s, run_id, issue_ms, ttft_ms, tpot_ms, *, summary="", minute=0):
    """A stored-looking genserve test of spec s (a validated GenServeSpec of prompt 16 and
    output 8, standard bounds): every request of 8 tokens from fixed times (ms)."""
    from engine.scenarios import GENSERVING
    from engine.scenarios.genserve.messages import GenServeResult

    ns = [int(round(t * 1e6)) for t in issue_ms]
    first = [a + int(round(t * 1e6)) for a, t in zip(ns, ttft_ms)]
    done = [f + int(round(7 * p * 1e6)) for f, p in zip(first, tpot_ms)]
    res = GenServeResult(
        run_id, load_s=1.0, first_forward_s=0.1, warmup_ns=(100_000_000,),
        samples_ns=tuple(d - a for a, d in zip(ns, done)), warmup_s=0.1,
        measured_s=(max(done) - min(ns)) / 1e9, stop_reason="LoadGen's test ended",
        scenario=s.scenario, prompt_len=16, output_len=8, ttft_bound_ms=2000.0,
        tpot_bound_ms=100.0, target_qps=s.target_qps, users=s.users,
        req_sample=tuple(i % 4 for i in range(len(ns))), req_issue_ns=tuple(ns),
        req_first_ns=tuple(first), req_done_ns=tuple(done), req_tokens=(8,) * len(ns),
        summary_log=summary, detail_log="detail of " + run_id if summary else "",
        loadgen_version="6.0.17" if summary else None, build_s=1.5,
        engine_settings={"max_num_seqs": s.max_num_seqs}, engine_stats={"ignored": 0},
        agreement=1.0, agreement_tokens=8)
    base = {**base_fields(s, run_id, minute), "kind": GENSERVING.kind,
            "extra": config_extra(s)}
    return record_from_result(base, res, s)


def seed_genserve(db_path):
    """GS_SWEEP's two Server tests and GS_USERS_SWEEP's four closed loops."""
    from dataclasses import replace

    from store.db import open_db
    from store.runs import save_record, save_sweep

    valid_ttft = (40, 50, 60, 70, 80, 90, 100, 110, 120, 310)
    bad_ttft = tuple(100 + 300 * i for i in range(10))
    tests = [(GS_SWEEP, gs_record(
        "gs-valid", "server", [180 * i for i in range(10)], valid_ttft, [10.0] * 10, qps=5.0,
        summary=gs_summary("VALID", (), 310_000_000, 10_000_000, 40.0, 5, 0), minute=1)),
        (GS_SWEEP, gs_record(
            "gs-invalid", "server", [50 * i for i in range(10)], bad_ttft, [20.0] * 10,
            qps=20.0, summary=gs_summary("INVALID", ("Performance constraints",
                                                      "Early stopping"),
                                          2_775_000_000, 20_000_000, 23.6, 20, 1),
            minute=2))]
    for n, (users, (ttft, tpot)) in enumerate(GS_USERS.items()):
        e2e = ttft + 7 * tpot
        issue = [k * e2e for _ in range(users) for k in range(4)]
        tests.append((GS_USERS_SWEEP, gs_record(
            f"gs-users-{users}", "closed-loop", issue, [ttft] * len(issue),
            [tpot] * len(issue), engine="openvino_genai_cb", users=users, minute=3 + n)))
    with open_db(db_path) as con:
        save_sweep(con, GS_SWEEP, rounds=1, seed=1, plan=[[]], configurations=2,
                   command="python -m engine genserve --model tiny_llama --scenarios server")
        save_sweep(con, GS_USERS_SWEEP, rounds=1, seed=1, plan=[[]], configurations=4,
                   command="python -m engine genserve --model tiny_llama --engine "
                           "openvino_genai_cb --scenarios closed-loop --users 1 2 4 8")
        for sweep_id, rec in tests:
            save_record(con, replace(rec, sweep_id=sweep_id, round_no=1), SYSTEM)
