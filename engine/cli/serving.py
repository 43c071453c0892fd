"""`python -m engine serve`: MLPerf LoadGen serving scenarios against one model and runtime.

It builds the ServeRequest (engine/run/jobs/serve_request.py) and goes through the same sweep driver
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
from engine.scenarios.serving.spec import (DEFAULT_MIN_DURATION_S, DEFAULT_MIN_QUERIES,
                                           DEFAULT_SAMPLES, DEFAULT_SERVER_BOUND_MS,
                                           MULTI_STREAM_SAMPLES, OFFICIAL_MIN_DURATION_S,
                                           SCENARIO_INPUTS, SERVE_SCENARIOS, default_min_queries,
                                           early_stopping_note, fixed_batch_allowed)
from engine.core.errors import UserError
from engine.core.early_stopping import strictness
from engine.core.limits import (QPS_PRECISION_RANGE, QPS_PROBES_RANGE, SEARCH_QUERIES_RANGE,
                                SERVE_BOUND_MS_RANGE, SERVE_QPS_RANGE, SERVE_RATE_RANGE,
                                float_range)
from engine.present.outcome import EXIT_NOT_OK, EXIT_OK, runs_exit
from engine.run.search.max_qps import (DEFAULT_QPS_PRECISION, DEFAULT_QPS_PROBES,
                                DEFAULT_SEARCH_QUERIES, MAX_PROBE_S, MISSED, SPAN_BOUNDS)
from engine.run.search.query_choice import HEADROOM
from engine.run.jobs.serve_request import ServeRequest
from engine.scenarios import SERVING

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
                                     f"--official: {OFFICIAL_MIN_DURATION_S:g} s; "
                                     "--find-max-qps: the Offline estimate's)")
    s.add_argument("--min-queries", type=int, default=None, metavar="N",
                   help=f"LoadGen's minimum query count (default {DEFAULT_MIN_QUERIES}; "
                        f"server {default_min_queries('server')}, the fewest its early "
                        "stopping judges p99 on)")
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
                   help="server and offline: R processes of --threads threads each, "
                        "on cores of their own, behind one queue (replicas x threads <= "
                        f"{logical_cores()} here; default 1)")
    s.add_argument("--samples", type=int_arg("samples", *SERVE_SAMPLES_RANGE),
                   default=DEFAULT_SAMPLES,
                   help=f"LoadGen's performance_sample_count, inputs kept in memory "
                        f"(default {DEFAULT_SAMPLES})")
    s.add_argument("--loadgen-seed", type=int_arg("loadgen_seed", *SEED_RANGE), default=0,
                   help="LoadGen's qsl, sample-index and schedule seeds (default 0)")
    m = s.add_argument_group("the max QPS under a bound (server)")
    m.add_argument("--find-max-qps", action="store_true",
                   help="with --scenario server and --bound-ms: the highest target QPS whose "
                        "LoadGen run is VALID (double, then bisect; every probe stored under "
                        "one sweep), then its cost. Starts at --target-qps, else this "
                        "machine's closed-loop figure, else an Offline run's samples/s "
                        "(then flat out is measured; otherwise it is an estimate from this "
                        "machine's closed loop)")
    m.add_argument("--qps-precision", type=float_arg("qps_precision"),
                   default=DEFAULT_QPS_PRECISION, metavar="F",
                   help=f"stop when the bracket [VALID, missed) is within this fraction of "
                        f"its VALID end, {QPS_PRECISION_RANGE[0]:g}..{QPS_PRECISION_RANGE[1]:g}"
                        f" (default {DEFAULT_QPS_PRECISION:g}; --precision is the model's "
                        "numeric precision)")
    m.add_argument("--max-probes", type=int_arg("max_probes", *QPS_PROBES_RANGE),
                   default=DEFAULT_QPS_PROBES, metavar="N",
                   help=f"LoadGen tests the search may run (default {DEFAULT_QPS_PROBES})")
    m.add_argument("--search-queries", type=int_arg("search_queries", *SEARCH_QUERIES_RANGE),
                   default=None, metavar="N",
                   help=f"the queries every probe runs, whatever its rate, so every probe is "
                        f"held to one early-stopping strictness ({SEARCH_QUERIES_RANGE[0]}.."
                        f"{SEARCH_QUERIES_RANGE[1]}); a probe at Q QPS runs N / Q s, at most "
                        f"{MAX_PROBE_S:g} s and at least {SPAN_BOUNDS}x the bound, so more "
                        f"queries reach higher rates (default: chosen from the estimate, before "
                        f"the first Server probe, so that the search can reach {HEADROOM}x it; "
                        f"at least {DEFAULT_SEARCH_QUERIES:,}, "
                        f"{strictness(DEFAULT_SEARCH_QUERIES)})")
    m.add_argument("--target-rps", type=float_arg("target_rps"), default=None, metavar="N",
                   help="the monthly bill for serving N requests/s within the bound, on "
                        "--machine-shape (whole machines x hourly price x 730 h)")
    sweep_options(s, timeout=0.0, rounds=1, rounds_help="tests of each scenario (default 1)")


def serve_request(args) -> ServeRequest:
    # A user's file must take every batch its scenarios make: a Server or Offline batcher
    # calls 1 .. max batch (a fixed batch axis is refused here, naming it), MultiStream 8.
    sizes = set()
    for name in args.scenario:
        takes = SCENARIO_INPUTS.get(name)  # an unknown name: refused with the request
        sizes |= ({takes.query_batch} if takes and takes.query_batch is not None
                  else set(range(1, max(args.max_batch, 1) + 1)))
    src = user_model(args, args.model, batch_sizes=tuple(sorted(sizes)),
                     allowed_batch=fixed_batch_allowed)
    if src is None and len(args.model) != 1:
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
    if args.find_max_qps:
        return cmd_find_max_qps(args)
    for name in ("target_rps", "search_queries"):
        if getattr(args, name) is not None:
            raise UserError(f"{name}: belongs to a max-QPS search; allowed: with "
                            "--find-max-qps", field=name)
    from store.db import resolve_db_path

    request = serve_request(args)
    specs, _ = request.expand()  # every value checked before a worker starts
    request.check_stored(specs, db=resolve_db_path(args.db))  # an unreachable target
    for spec in specs:
        note = early_stopping_note(spec.scenario, spec.min_query_count)
        if note:
            print(f"note: {spec.scenario}: {note}", flush=True)
    records = run_and_summarize(request, specs, args, table=None, noun="serving runs")
    return runs_exit(r.status for r in records)


def _check_search(args) -> None:
    """Everything a max-QPS search needs, refused before anything runs."""
    if list(args.scenario) != ["server"]:
        raise UserError(f"scenario: --find-max-qps searches LoadGen's Server target QPS; "
                        f"got {' '.join(args.scenario)}; allowed: server", field="scenario")
    if args.bound_ms is None:
        raise UserError(f"bound_ms: --find-max-qps searches under a p99 bound; allowed: "
                        f"--bound-ms number {SERVE_BOUND_MS_RANGE[0]:g}.."
                        f"{SERVE_BOUND_MS_RANGE[1]:g}", field="bound_ms")
    float_range("bound_ms", args.bound_ms, *SERVE_BOUND_MS_RANGE)
    float_range("qps_precision", args.qps_precision, *QPS_PRECISION_RANGE)
    if args.target_rps is not None:
        float_range("target_rps", args.target_rps, *SERVE_RATE_RANGE)
    if args.rounds != 1:
        raise UserError("rounds: a search is one pass; allowed: 1", field="rounds")
    from engine.run.search.max_qps import check_first_target

    check_first_target(args.target_qps, args.search_queries, args.bound_ms)
    if args.min_queries is not None:  # every probe runs --search-queries, no more, no fewer
        raise UserError(f"min_query_count: a search's probes run a fixed query count; "
                        f"allowed: --search-queries N ({SEARCH_QUERIES_RANGE[0]}.."
                        f"{SEARCH_QUERIES_RANGE[1]})", field="min_query_count")


def cmd_find_max_qps(args) -> int:
    """The max-QPS search on this machine, its probes, the max and bracket, and the cost at
    the bound on --machine-shape (else the catalog's default shape, an estimate)."""
    import platform
    from dataclasses import replace
    from datetime import date

    from engine.analysis.cost import cpu_shapes, default_shape, load_catalog
    from engine.analysis.serving_cost import choose_flat_out, serving_cost, serving_split
    from engine.present.cost_text import stale_note
    from engine.present.max_qps_text import cost_lines, probe_table
    from engine.present.search_text import qps_summary
    from engine.run.process.machine import system_info
    from engine.run.search.max_qps import (loadgen_p99_ms, search_timeout_s,
                                           stored_max_qps_search)
    from store.db import open_db, resolve_db_path
    from store.prices import effective_catalog
    from store.serving import closed_loop_run

    _check_search(args)
    request = serve_request(args)
    # the first probe's target stands in until the estimate is known (validated here)
    [base], _ = replace(request, target_qps=args.target_qps or SERVE_QPS_RANGE[0]).expand()
    db = resolve_db_path(args.db)
    if args.target_qps is not None:  # the first probe's rate: unreachable is refused
        request.check_stored([base], db=db)
    queries = args.search_queries  # None: chosen from the estimate
    runner = replace(request, timeout_s=args.timeout or search_timeout_s(
        request.duration_s())).runner(db=db, shape=args.machine_shape)  # shape checked here
    # This machine's closed loop only, for the first target and (without an Offline run in
    # the search) flat out: another machine's best run (an import, a fleet node) says
    # nothing of what this one serves.
    closed_run, closed = None, None
    if db.exists():
        with open_db(db, read_only=True) as con:
            closed_run = closed_loop_run(con, base.sut, base.batch_size,
                                         system_info()["system_id"])
    if closed_run and args.target_qps is None:  # each replica serves at most one closed loop
        closed = closed_run[1] * base.replicas

    def started(sweep_id):
        reps = f" x {base.replicas} replicas" if base.replicas > 1 else ""
        print(f"max-QPS search {sweep_id}: {base.model} {base.framework} ({base.runtime}), "
              f"{base.intra_threads} threads{reps}, max batch {base.batch_size}, p99 bound "
              f"{args.bound_ms:g} ms, precision {args.qps_precision:.1%}, each probe "
              + (strictness(queries) if queries else "of a query count chosen from the "
                 "estimate") + f" -> {db}", flush=True)

    def stored(rec):
        print(f"stored {rec.run_id} {SERVING.describe_record(rec)}", flush=True)

    def estimate(q, why, choice):
        print(f"estimate {q:,.1f} QPS ({why}{_closed_note(closed, closed_run, base.replicas)})"
              f"\nqueries: {choice.text()}; each probe {strictness(choice.query_count)}",
              flush=True)

    # the stored command states the query count, a chosen one too: the search it names
    def command(choice):
        said = ([] if queries or choice is None else
                ["--search-queries", str(choice.query_count)])
        return " ".join(["python -m engine", *args.argv, *said])
    sweep_id, res, offline, _ = stored_max_qps_search(
        base, db=db, runner=runner, command=command, start_qps=args.target_qps,
        closed_loop=closed, precision=args.qps_precision, max_probes=args.max_probes,
        query_count=queries, on_start=started, on_stored=stored, on_estimate=estimate)
    if res.probes:
        print()
        print(probe_table(res, loadgen_p99_ms))
    print(f"\n{qps_summary(res, args.bound_ms)}\nstopped: {res.stop_reason}")
    if res.queries is not None:
        print(f"queries: {res.queries.text()}")
    print(f"probes stored in {db} as sweep {sweep_id}")
    if res.best is not None:
        if db.exists():
            with open_db(db, read_only=True) as con:
                catalog, _ = effective_catalog(con)
        else:
            catalog = load_catalog()
        shape = runner.machine_shape
        machine = next((m for m in catalog if m.shape == shape), None)
        if machine is None:
            shapes = cpu_shapes(catalog)
            machine = shapes[default_shape(shapes)]
        rec = res.best
        arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64",
                "arm64": "arm64"}.get(platform.machine().lower())

        def split(rate):
            return serving_split(rate, threads=rec.intra_threads or 1,
                                 replicas=rec.replicas or 1,
                                 threads_per_core=rec.threads_per_core,
                                 cores_used=(rec.extra or {}).get("cores_used"),
                                 shape=rec.machine_shape, arch=arch,
                                 hypervisor=(rec.extra or {}).get("hypervisor"))
        ran = offline is not None and offline.status == "ok" and offline.throughput
        flat = choose_flat_out(split, offline=(offline.run_id, offline.throughput) if ran
                               else None, closed=closed_run, replicas=rec.replicas or 1)
        per_query = (rec.serving or {}).get("samples_per_query") or 1  # Server: 1
        cost = serving_cost(machine, split(res.max_qps * per_query), flat,
                            target_rps=args.target_rps)
        print()
        print("\n".join(cost_lines(cost, args.bound_ms, res.capped)) if cost is not None else
              f"not priced on {machine.label}: a figure from this machine does not carry "
              "over to it")
        if cost is not None and (said := stale_note([machine], date.today())):
            print(f"note: {said}")
    statuses = [rec.status for _, rec in res.probes]
    failed = [s for s in statuses if s not in ("ok", *MISSED)]
    return EXIT_OK if res.max_qps is not None and not failed else EXIT_NOT_OK


def _closed_note(closed, run, replicas: int) -> str:
    """Which run the closed-loop estimate is, when the search started from one."""
    if not closed:
        return ""
    times = f" x {replicas} replicas" if replicas > 1 else ""
    return f": run {run[0]} on this machine, {run[1]:,.1f} samples/s at batch {run[2]}{times}"


COMMANDS = {"serve": cmd_serve}
