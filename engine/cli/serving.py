"""`python -m engine serve`: MLPerf LoadGen serving scenarios against one model and runtime.

It builds the ServeRequest (engine/run/requests.py) and goes through the same sweep driver
as `run`, so every attempted test is one stored row with its LoadGen verdict, figures,
per-query latencies and logs. Exit statuses as `run`'s (engine/present/outcome.py): a
LoadGen INVALID result is an `invalid` row, so it exits 1.
"""

from __future__ import annotations

from engine.cli.args import (float_arg, int_arg, memory_cap, sweep_options, user_model,
                             user_model_options)
from engine.cli.progress import run_and_summarize
from engine.core.catalog import CATALOG, FRAMEWORKS
from engine.core.limits import (IMAGE_RANGE, SEED_RANGE, SERVE_BATCH_RANGE,
                                SERVE_SAMPLES_RANGE, logical_cores)
from engine.core.serving import (DEFAULT_MIN_DURATION_S, DEFAULT_MIN_QUERIES, DEFAULT_SAMPLES,
                                 DEFAULT_SERVER_BOUND_MS, MULTI_STREAM_SAMPLES,
                                 OFFICIAL_MIN_DURATION_S, SERVE_SCENARIOS)
from engine.present.outcome import runs_exit
from engine.run.requests import ServeRequest

__all__ = ["add_parsers", "COMMANDS"]


def add_parsers(sub) -> None:
    s = sub.add_parser("serve", help="MLPerf LoadGen serving scenarios (single-stream, "
                                     "multi-stream, server, offline) against one model; "
                                     "LoadGen's verdict, figures and logs stored per test")
    s.add_argument("--scenario", nargs="+", required=True, metavar="NAME",
                   help=f"{', '.join(SERVE_SCENARIOS)} (several: one test each)")
    s.add_argument("--model", nargs="+", metavar="NAME",
                   help=f"one catalog name: {', '.join(CATALOG)} (or your own model: see "
                        "below)")
    s.add_argument("--framework", default=None, metavar="FW",
                   help=f"{', '.join(FRAMEWORKS)} (default torch; your model file: its "
                        "format's)")
    user_model_options(s)
    s.add_argument("--runtime", default=None, metavar="RT",
                   help="the framework's runtime (default: its default; `python -m engine "
                        "runtimes`)")
    s.add_argument("--threads", type=int_arg("threads", 1), default=1, metavar="N",
                   help=f"intra-op threads, 1..{logical_cores()} here")
    s.add_argument("--inter-threads", type=int_arg("inter_threads", 1), default=1)
    s.add_argument("--image-size", type=int_arg("image_size", *IMAGE_RANGE), default=None)
    s.add_argument("--precision", default="fp32")
    s.add_argument("--device", default="cpu")
    s.add_argument("--weight-policy", default="bn_calibrated")
    s.add_argument("--min-duration", type=float_arg("min_duration_s"), default=None,
                   metavar="S", help=f"LoadGen's minimum test duration (default "
                                     f"{DEFAULT_MIN_DURATION_S:g} s, LoadGen's; "
                                     f"--official: {OFFICIAL_MIN_DURATION_S:g} s)")
    s.add_argument("--min-queries", type=int, default=DEFAULT_MIN_QUERIES, metavar="N",
                   help=f"LoadGen's minimum query count (default {DEFAULT_MIN_QUERIES})")
    s.add_argument("--official", action="store_true",
                   help=f"MLPerf's official duration, {OFFICIAL_MIN_DURATION_S:g} s "
                        "(--min-duration still wins)")
    s.add_argument("--target-qps", type=float_arg("target_qps"), default=None, metavar="Q",
                   help="server: the Poisson arrival rate (required); offline: the QPS "
                        "LoadGen sizes its one query for (default: from warm-up)")
    s.add_argument("--bound-ms", type=float_arg("bound_ms"), default=None, metavar="MS",
                   help=f"server: the p99 latency bound LoadGen judges (default "
                        f"{DEFAULT_SERVER_BOUND_MS:g}); single-stream: a p90 bound the "
                        "line reports against")
    s.add_argument("--max-batch", type=int, default=1, metavar="N",
                   help=f"server and offline: the largest batch the model is called with "
                        f"({SERVE_BATCH_RANGE[0]}..{SERVE_BATCH_RANGE[1]}; multi-stream "
                        f"always calls it with its {MULTI_STREAM_SAMPLES} samples)")
    s.add_argument("--max-wait-ms", type=float_arg("max_wait_ms"), default=0.0, metavar="MS",
                   help="server: a batch leaves when full or when its oldest query waited "
                        "this long (default 0: whatever is queued)")
    s.add_argument("--replicas", type=int, default=1, metavar="R",
                   help="replicas behind one queue (only 1 is built yet)")
    s.add_argument("--samples", type=int_arg("samples", *SERVE_SAMPLES_RANGE),
                   default=DEFAULT_SAMPLES,
                   help=f"LoadGen's performance_sample_count, inputs kept in memory "
                        f"(default {DEFAULT_SAMPLES})")
    s.add_argument("--loadgen-seed", type=int_arg("loadgen_seed", *SEED_RANGE), default=0,
                   help="LoadGen's qsl, sample-index and schedule seeds (default 0)")
    sweep_options(s, timeout=0.0, rounds=1, rounds_help="tests of each scenario (default 1)")


def serve_request(args) -> ServeRequest:
    src = user_model(args, args.model)
    if src is None and len(args.model) != 1:
        from engine.core.errors import UserError

        raise UserError(f"model: serve runs one model; got {len(args.model)}; allowed: one "
                        "--model NAME", field="model")
    framework = args.framework or (src.framework if src and src.framework else "torch")
    return ServeRequest(
        scenarios=tuple(args.scenario), model=src.name if src else args.model[0],
        framework=framework, runtime=args.runtime, threads=args.threads,
        inter_threads=args.inter_threads, image_size=args.image_size,
        precision=args.precision, device=args.device, weight_policy=args.weight_policy,
        user_model=src, max_batch=args.max_batch, target_qps=args.target_qps,
        bound_ms=args.bound_ms, max_wait_ms=args.max_wait_ms,
        min_duration_s=args.min_duration, min_query_count=args.min_queries,
        official=args.official, samples=args.samples, replicas=args.replicas,
        loadgen_seed=args.loadgen_seed, rounds=args.rounds,
        timeout_s=args.timeout or None, memory_cap_bytes=memory_cap(args))


def cmd_serve(args) -> int:
    request = serve_request(args)
    specs, _ = request.expand()  # every value checked before a worker starts
    records = run_and_summarize(request, specs, args, table=None, noun="serving runs")
    return runs_exit(r.status for r in records)


COMMANDS = {"serve": cmd_serve}
