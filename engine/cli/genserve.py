"""Commands for serving a language model (issue 38): `genserve` runs LoadGen tests in
token-latency mode (Server, Offline, SingleStream) and closed loops of N users against one
engine, and stores each as a row with every request's readings.

It builds the request a page would (engine/run/jobs/genserve_request.py) and goes through
the same sweep driver as `run`, so its rows and failures are stored alike.
"""

from __future__ import annotations

from engine.cli.args import (db_arg, float_arg, int_arg, machine_shape_option, memory_cap,
                             memory_cap_option, sweep_options)
from engine.cli.progress import run_and_summarize
from engine.core.limits import (QPS_PROBES_RANGE, SEARCH_QUERIES_RANGE, SEED_RANGE,
                                SERVE_SAMPLES_RANGE, logical_cores)
from engine.run.search.max_qps import DEFAULT_QPS_PRECISION, DEFAULT_QPS_PROBES
from engine.run.search.gen_max_rate import GEN_MAX_PROBE_S, GEN_QUERIES
from engine.core.errors import UserError
from engine.present.outcome import EXIT_NOT_OK, EXIT_OK, runs_exit
from engine.run.search.max_qps import MISSED
from engine.scenarios import GENSERVING
from engine.scenarios.generation.models import LANGUAGE_MODELS
from engine.scenarios.genserve.engines import DEFAULT_ENGINE, ENGINES, REFUSED
from engine.scenarios.genserve.spec import (BOUND_PRESETS, DEFAULT_PRESET, GENSERVE_SCENARIOS,
                                            MAX_SEQS_RANGE, USERS_RANGE)

__all__ = ["add_parsers", "COMMANDS"]


def _common(g) -> None:
    """What every serving test of a language model takes: the model, engine, shape, bounds
    and the engine's limits."""
    g.add_argument("--model", required=True, choices=list(LANGUAGE_MODELS))
    g.add_argument("--engine", default=DEFAULT_ENGINE, metavar="ENGINE",
                   help="; ".join(f"{e.name}: {e.label}" for e in ENGINES)
                   + f" (default {DEFAULT_ENGINE}); not served: "
                   + ", ".join(REFUSED))
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
    g.add_argument("--max-num-seqs", type=int_arg("max_num_seqs", *MAX_SEQS_RANGE),
                   default=1, help="continuous batching: sequences in a step at most")
    g.add_argument("--kv-blocks", type=int_arg("kv_blocks", 0), default=0,
                   help="continuous batching: KV-cache blocks of 32 tokens (0: enough for "
                        "max-num-seqs requests at their longest)")
    g.add_argument("--max-batched-tokens", type=int_arg("max_batched_tokens", 0), default=0,
                   help="continuous batching: tokens a step at most (0: the engine's)")
    g.add_argument("--replicas", type=int_arg("replicas", 1, logical_cores()), default=1,
                   help="engine processes of --threads each behind one front, each on cores "
                        "of its own (default 1)")
    g.add_argument("--samples", type=int_arg("samples", *SERVE_SAMPLES_RANGE), default=64,
                   help="distinct prompts (LoadGen's performance sample count)")
    g.add_argument("--seed", type=int_arg("seed", *SEED_RANGE), default=0,
                   help="the weights, prompts and LoadGen's schedule (default 0)")


def add_parsers(sub) -> None:
    g = sub.add_parser("genserve", help="serve a language model: LoadGen Server/Offline/"
                                        "SingleStream with TTFT and TPOT bounds, or a closed "
                                        "loop of N users; every request's readings stored")
    _common(g)
    g.add_argument("--scenarios", nargs="+", required=True, metavar="S",
                   help=f"{', '.join(GENSERVE_SCENARIOS)}")
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
    sweep_options(g, timeout=1800.0, rounds=1, rounds_help="repeat every test this many "
                                                           "times, each in a fresh worker")

    m = sub.add_parser("genserve-search", help="the highest request rate whose LoadGen Server "
                                               "test keeps p99 TTFT and p99 TPOT within "
                                               "their bounds, goodput there, and the cost "
                                               "per 1 M tokens")
    _common(m)
    m.add_argument("--target-qps", type=float_arg("target_qps"), default=None,
                   help="the first probe's rate (default: an Offline test's requests/s)")
    m.add_argument("--search-queries", type=int_arg("search_queries", *SEARCH_QUERIES_RANGE),
                   default=GEN_QUERIES, help=f"requests every probe runs, exactly (default "
                                             f"{GEN_QUERIES}: the fewest LoadGen's early "
                                             "stopping judges a p99 on)")
    m.add_argument("--qps-precision", type=float_arg("precision"),
                   default=DEFAULT_QPS_PRECISION, help="stop when the bracket is within "
                                                       "this fraction (default 0.05)")
    m.add_argument("--max-probes", type=int_arg("max_probes", *QPS_PROBES_RANGE),
                   default=DEFAULT_QPS_PROBES)
    m.add_argument("--target-tok-s", type=float_arg("target_tok_s"), default=None,
                   help="price a month of this many output tokens/s in whole machines")
    m.add_argument("--target-rps", type=float_arg("target_rps"), default=None,
                   help="price a month of this many requests/s in whole machines")
    m.add_argument("--timeout", type=float_arg("timeout"), default=GEN_MAX_PROBE_S + 1800.0,
                   help="wall-time limit per probe in seconds, load included")
    memory_cap_option(m)
    machine_shape_option(m)
    db_arg(m)

    t = sub.add_parser("genserve-tune", help="engine x precision x max sequences x threads "
                                             "under the TTFT and TPOT bounds: the most "
                                             "requests/s or the least cost per 1 M tokens")
    _common(t)
    t.add_argument("--engines", nargs="+", default=["eager", "openvino_genai_cb"],
                   help="engines to try (default eager openvino_genai_cb)")
    t.add_argument("--precisions", nargs="+", default=["fp32"],
                   help="precisions to try, each engine its own (default fp32)")
    t.add_argument("--seqs", nargs="+", type=int_arg("max_num_seqs", *MAX_SEQS_RANGE),
                   default=[1, 2, 4, 8], help="max concurrent sequences to try "
                                              "(continuous batching; default 1 2 4 8)")
    t.add_argument("--threads-list", nargs="+", type=int_arg("threads", 1, logical_cores()),
                   default=None, help="threads to try (default: --threads)")
    t.add_argument("--replicas-list", nargs="+", type=int_arg("replicas", 1, logical_cores()),
                   default=None, help="replicas to try (default: --replicas)")
    t.add_argument("--objective", choices=["qps", "cost"], default="qps")
    t.add_argument("--closed-requests", type=int_arg("closed_requests", 1), default=16,
                   help="requests each candidate's closed loop sends (default 16)")
    t.add_argument("--search-queries", type=int_arg("search_queries", *SEARCH_QUERIES_RANGE),
                   default=GEN_QUERIES, help=f"requests every probe runs (default "
                                             f"{GEN_QUERIES})")
    t.add_argument("--timeout", type=float_arg("timeout"), default=GEN_MAX_PROBE_S + 1800.0)
    memory_cap_option(t)
    machine_shape_option(t)
    db_arg(t)

    u = sub.add_parser("genserve-users", help="closed loops of 1, 2, 4, ... users until "
                                              "output tokens/s stops rising: the Pareto of "
                                              "tokens/s per user against per machine")
    _common(u)
    u.add_argument("--requests", type=int_arg("requests", 1), default=16,
                   help="requests a point sends at least (4 x its users at least; "
                        "default 16)")
    u.add_argument("--max-users", type=int_arg("max_users", *USERS_RANGE), default=64,
                   help="the sweep stops before passing this many users (default 64)")
    u.add_argument("--timeout", type=float_arg("timeout"), default=1800.0,
                   help="wall-time limit per point in seconds, load included")
    memory_cap_option(u)
    machine_shape_option(u)
    db_arg(u)


def _request(args, scenarios, cls=None, **given):
    """The request a page would build (cls: GenServeRequest, or one of the searches of
    engine/run/search/genserve_jobs.py)."""
    from engine.run.jobs.genserve_request import GenServeRequest

    return (cls or GenServeRequest)(
        scenarios=tuple(scenarios), model=args.model, engine=args.engine,
        prompt_len=args.prompt_len, output_len=args.output_len, threads=args.threads,
        precision=args.precision, preset=args.preset, ttft_bound_ms=args.ttft_ms,
        tpot_bound_ms=args.tpot_ms, max_num_seqs=args.max_num_seqs,
        kv_blocks=args.kv_blocks, max_batched_tokens=args.max_batched_tokens,
        replicas=args.replicas, samples=args.samples, gen_seed=args.seed, timeout_s=args.timeout,
        memory_cap_bytes=memory_cap(args), **given)


def cmd_genserve(args) -> int:
    request = _request(args, args.scenarios, target_qps=args.target_qps,
                       query_count=args.query_count, min_duration_s=args.min_duration,
                       min_query_count=args.min_queries, users=tuple(args.users),
                       rounds=args.rounds)
    specs, _ = request.expand()
    records = run_and_summarize(request, specs, args, table=None, noun="serving tests")
    return runs_exit(r.status for r in records)


def _table(rows: list[dict]) -> str:
    import pandas as pd

    return pd.DataFrame(rows).to_string(index=False) if rows else "(none)"


def _stored_line(rec) -> None:
    print(f"stored {rec.run_id} {GENSERVING.describe_record(rec)}", flush=True)


def cmd_genserve_search(args) -> int:
    """The max-rate search on this machine (the Deploy page's job, GenMaxRateRequest), its
    probes, the max, goodput there, and the cost per 1 M tokens on every priced machine
    (the cheapest per provider)."""
    from engine.analysis.genserve_cost import cheapest_per_provider, token_serving_rows
    from engine.present.genserve_search_text import (BOUNDS_TEXT, cost_rows_text, probe_rows,
                                                     rate_summary)
    from engine.run.search.gen_max_rate import figures_of, gen_rate_range
    from engine.run.search.gen_replays import token_rates
    from engine.run.search.genserve_jobs import GenMaxRateRequest
    from store.db import open_db, resolve_db_path
    from store.prices import effective_catalog

    request = _request(args, ["server"], GenMaxRateRequest, target_qps=args.target_qps,
                       search_queries=args.search_queries, qps_precision=args.qps_precision,
                       max_probes=args.max_probes)
    specs, _ = request.expand()  # every field checked before anything runs
    base = specs[0]
    lo, hi = gen_rate_range(args.search_queries, base.ttft_bound_ms)
    db = resolve_db_path(args.db)
    runner = request.runner(db=db, shape=args.machine_shape)
    print(f"max-rate search: {base.model} {base.runtime} seqs{base.max_num_seqs} "
          f"t{base.intra_threads} p{base.prompt_len} n{base.output_len}, bounds TTFT "
          f"{base.ttft_bound_ms:g} ms / TPOT {base.tpot_bound_ms:g} ms ({base.preset}); "
          f"{BOUNDS_TEXT}; targets {lo:.3g}..{hi:.3g} req/s -> {db}", flush=True)
    sweep_id, res, offline, why = request.stored(specs, db=db, runner=runner,
                                                 on_stored=_stored_line)
    if why:
        print(f"estimate from {why}")
    print()
    print(_table(probe_rows(res, figures_of)))
    print(f"\n{rate_summary(res, figures_of, base.ttft_bound_ms, base.tpot_bound_ms)}"
          f"\nstopped: {res.stop_reason}\nprobes stored in {db} as sweep {sweep_id}")
    if res.best is not None:
        with open_db(db, read_only=True) as con:
            catalog, _ = effective_catalog(con)
        rows = token_serving_rows(catalog, token_rates(res.best, offline),
                                  target_tok_s=args.target_tok_s, target_rps=args.target_rps)
        shown = cheapest_per_provider(rows)
        if args.machine_shape:
            shown = [r for r in rows if r["shape"] == args.machine_shape] + [
                r for r in shown if r["shape"] != args.machine_shape]
        print("\ncost per 1 M tokens, whole machines (the cheapest per provider"
              + (", and the shape given" if args.machine_shape else "") + "):")
        print("\n".join(cost_rows_text(shown, res.capped)))
    failed = [rec.status for _, rec in res.probes if rec.status not in ("ok", *MISSED)]
    return EXIT_OK if res.max_qps is not None and not failed else EXIT_NOT_OK


def cmd_genserve_users(args) -> int:
    """The concurrency sweep on this machine (the Deploy page's job, GenUsersRequest)."""
    from engine.present.genserve_search_text import concurrency_rows, concurrency_summary
    from engine.run.search.gen_max_rate import figures_of
    from engine.run.search.genserve_jobs import GenUsersRequest
    from store.db import resolve_db_path

    request = _request(args, ["closed-loop"], GenUsersRequest, min_query_count=args.requests,
                       max_users=args.max_users)
    specs, _ = request.expand()
    base = specs[0]
    db = resolve_db_path(args.db)
    print(f"concurrency sweep: {base.model} {base.runtime} seqs{base.max_num_seqs} "
          f"t{base.intra_threads} p{base.prompt_len} n{base.output_len}, users 1, 2, 4, ... "
          f"up to {args.max_users} -> {db}", flush=True)
    sweep_id, c = request.stored(specs, db=db,
                                 runner=request.runner(db=db, shape=args.machine_shape),
                                 on_stored=_stored_line)
    print()
    print(_table(concurrency_rows(c.points, figures_of, c.front)))
    print(f"\n{concurrency_summary(c, figures_of)}\npoints stored in {db} as sweep "
          f"{sweep_id}")
    return runs_exit(rec.status for _, rec in c.points)


def cmd_genserve_tune(args) -> int:
    """The tuner on this machine (the Deploy page's job, GenTuneRequest)."""
    from engine.present.genserve_search_text import tuning_rows, tuning_summary
    from engine.run.search.genserve_jobs import GenTuneRequest
    from store.db import resolve_db_path

    request = _request(args, ["closed-loop"], GenTuneRequest,
                       min_query_count=args.closed_requests, engines=tuple(args.engines),
                       precisions=tuple(args.precisions), seqs=tuple(args.seqs),
                       thread_choices=tuple(args.threads_list or ()),
                       replica_choices=tuple(args.replicas_list or ()),
                       objective=args.objective, closed_requests=args.closed_requests,
                       search_queries=args.search_queries, machine_shape=args.machine_shape)
    specs, _ = request.expand()  # engines, precisions, objective and shape checked here
    base = specs[0]
    db = resolve_db_path(args.db)
    print(f"tuning {base.model} p{base.prompt_len} n{base.output_len} under TTFT "
          f"{base.ttft_bound_ms:g} ms / TPOT {base.tpot_bound_ms:g} ms for "
          f"{'the most requests/s' if args.objective == 'qps' else 'the least cost'}: "
          f"{len(request.candidates())} candidates -> {db}", flush=True)
    sweep_id, tuning, _ = request.stored(
        specs, db=db, runner=request.runner(db=db, shape=args.machine_shape),
        on_stored=_stored_line)
    print()
    print(_table(tuning_rows(tuning)))
    print(f"\n{tuning_summary(tuning, base.ttft_bound_ms, base.tpot_bound_ms)}\n"
          f"tests stored in {db} as sweep {sweep_id}")
    return EXIT_OK if tuning.winner is not None else EXIT_NOT_OK


COMMANDS = {"genserve": cmd_genserve, "genserve-search": cmd_genserve_search,
            "genserve-tune": cmd_genserve_tune, "genserve-users": cmd_genserve_users}
