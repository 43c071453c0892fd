"""Commands for serving a language model (issue 38): `genserve` runs LoadGen tests in
token-latency mode (Server, Offline, SingleStream) and closed loops of N users against one
engine, and stores each as a row with every request's readings.

It builds the request a page would (engine/run/jobs/genserve_request.py) and goes through
the same sweep driver as `run`, so its rows and failures are stored alike.
"""

from __future__ import annotations

from engine.cli.args import float_arg, int_arg, memory_cap, sweep_options
from engine.cli.progress import run_and_summarize
from engine.core.limits import SEED_RANGE, SERVE_SAMPLES_RANGE, logical_cores
from engine.present.outcome import runs_exit
from engine.scenarios.generation.models import LANGUAGE_MODELS
from engine.scenarios.genserve.engines import DEFAULT_ENGINE, ENGINES, REFUSED
from engine.scenarios.genserve.spec import (BOUND_PRESETS, DEFAULT_PRESET, GENSERVE_SCENARIOS,
                                            MAX_SEQS_RANGE, USERS_RANGE)

__all__ = ["add_parsers", "COMMANDS"]


def add_parsers(sub) -> None:
    g = sub.add_parser("genserve", help="serve a language model: LoadGen Server/Offline/"
                                        "SingleStream with TTFT and TPOT bounds, or a closed "
                                        "loop of N users; every request's readings stored")
    g.add_argument("--model", required=True, choices=list(LANGUAGE_MODELS))
    g.add_argument("--engine", default=DEFAULT_ENGINE, metavar="ENGINE",
                   help="; ".join(f"{e.name}: {e.label}" for e in ENGINES)
                   + f" (default {DEFAULT_ENGINE}); not served: "
                   + ", ".join(REFUSED))
    g.add_argument("--scenarios", nargs="+", required=True, metavar="S",
                   help=f"{', '.join(GENSERVE_SCENARIOS)}")
    g.add_argument("--prompt-len", type=int_arg("prompt_len", 1), default=128)
    g.add_argument("--output-len", type=int_arg("output_len", 2), default=64,
                   help="tokens per request, exactly (end-of-sequence ignored; at least 2)")
    g.add_argument("--threads", type=int_arg("threads", 1, logical_cores()), default=1)
    g.add_argument("--precision", default="fp32", help="fp32, bf16, int8, int4 (the "
                                                       "engine's own list)")
    g.add_argument("--preset", default=DEFAULT_PRESET,
                   choices=[*BOUND_PRESETS, "custom"],
                   help="MLPerf's llama3.1-8b bounds: " + "; ".join(
                       f"{k} TTFT {v[0]:g} ms, TPOT {v[1]:g} ms"
                       for k, v in BOUND_PRESETS.items()) + f" (default {DEFAULT_PRESET})")
    g.add_argument("--ttft-ms", type=float_arg("ttft_bound_ms"), default=None,
                   help="p99 TTFT bound in ms (makes the preset custom)")
    g.add_argument("--tpot-ms", type=float_arg("tpot_bound_ms"), default=None,
                   help="p99 TPOT bound in ms (makes the preset custom)")
    g.add_argument("--target-qps", type=float_arg("target_qps"), default=None,
                   help="Server: requests/s arriving (Poisson); Offline: expected")
    g.add_argument("--query-count", type=int_arg("query_count", 1), default=None,
                   help="Server: exactly this many requests, no minimum duration")
    g.add_argument("--min-duration", type=float_arg("min_duration_s"), default=10.0,
                   help="LoadGen's minimum duration in seconds (default 10)")
    g.add_argument("--min-queries", type=int_arg("min_query_count", 1), default=100,
                   help="LoadGen's minimum query count; closed-loop: requests sent "
                        "(default 100)")
    g.add_argument("--users", nargs="+", type=int_arg("users", *USERS_RANGE), default=[1],
                   help="closed-loop: requests in flight, one test per count (default 1)")
    g.add_argument("--max-num-seqs", type=int_arg("max_num_seqs", *MAX_SEQS_RANGE),
                   default=1, help="continuous batching: sequences in a step at most")
    g.add_argument("--kv-blocks", type=int_arg("kv_blocks", 0), default=0,
                   help="continuous batching: KV-cache blocks of 32 tokens (0: enough for "
                        "max-num-seqs requests at their longest)")
    g.add_argument("--max-batched-tokens", type=int_arg("max_batched_tokens", 0), default=0,
                   help="continuous batching: tokens a step at most (0: the engine's)")
    g.add_argument("--samples", type=int_arg("samples", *SERVE_SAMPLES_RANGE), default=64,
                   help="distinct prompts (LoadGen's performance sample count)")
    g.add_argument("--seed", type=int_arg("seed", *SEED_RANGE), default=0,
                   help="the weights, prompts and LoadGen's schedule (default 0)")
    sweep_options(g, timeout=1800.0, rounds=1, rounds_help="repeat every test this many "
                                                           "times, each in a fresh worker")


def cmd_genserve(args) -> int:
    from engine.run.jobs.genserve_request import GenServeRequest

    request = GenServeRequest(
        scenarios=tuple(args.scenarios), model=args.model, engine=args.engine,
        prompt_len=args.prompt_len, output_len=args.output_len, threads=args.threads,
        precision=args.precision, preset=args.preset, ttft_bound_ms=args.ttft_ms,
        tpot_bound_ms=args.tpot_ms, target_qps=args.target_qps,
        query_count=args.query_count, min_duration_s=args.min_duration,
        min_query_count=args.min_queries, users=tuple(args.users),
        max_num_seqs=args.max_num_seqs, kv_blocks=args.kv_blocks,
        max_batched_tokens=args.max_batched_tokens, samples=args.samples,
        gen_seed=args.seed, rounds=args.rounds, timeout_s=args.timeout,
        memory_cap_bytes=memory_cap(args))
    specs, _ = request.expand()
    records = run_and_summarize(request, specs, args, table=None, noun="serving tests")
    return runs_exit(r.status for r in records)


COMMANDS = {"genserve": cmd_genserve}
