"""`python -m engine tune`: the autotuner (issue 27, part 3). For each model, a Server p99
bound and an objective (most QPS, or least cost per 1 M on --machine-shape), the serving
configuration to deploy: closed-loop probes prune, the max-QPS search confirms the best,
every probe stored under one sweep per model (engine/run/search/autotune.py); the report is
engine/present/tune_text.py's, and with several models their winners side by side."""

from __future__ import annotations

import argparse

from engine.cli.args import (db_arg, executor_options, float_arg, int_arg,
                             machine_shape_option, memory_cap, memory_cap_option, user_model,
                             user_model_options)
from engine.core.catalog import (CATALOG, DIAGNOSTIC_MODELS, FRAMEWORKS, REFERENCE_RUNTIME,
                                 RUNTIMES)
from engine.core.model_source import FORMAT_RUNTIMES, default_runtime
from engine.core.errors import UserError
from engine.scenarios.inference.expand import runtimes_for
from engine.core.limits import (IMAGE_RANGE, QPS_PRECISION_RANGE, QPS_PROBES_RANGE,
                                SEARCH_QUERIES_RANGE, SEED_RANGE, SERVE_BATCH_RANGE,
                                SERVE_SAMPLES_RANGE, choice, float_range, int_range,
                                logical_cores)
from engine.scenarios.serving.spec import DEFAULT_SAMPLES, UNSERVED_RUNTIMES, fixed_batch_allowed
from engine.present.outcome import EXIT_NOT_OK, EXIT_OK

__all__ = ["add_parsers", "COMMANDS"]

# A closed-loop probe only ranks candidates: 1 s and 30 calls put p99 between real samples.
DEFAULT_PROBE_S = 1.0
# A Server test of a confirmation runs --search-queries queries (default: chosen from the
# fastest surviving candidate's closed loop, engine/run/search/query_choice.py), the same for every
# candidate: a duration would give a fast candidate more queries, and early stopping more
# of them over the bound.
DEFAULT_BATCHES = (1, 2, 4, 8)
# Options a tuning had before its Server tests ran a fixed query count: refused, naming it.
DROPPED = {"min_duration": "min_duration_s", "min_queries": "min_query_count"}


def add_parsers(sub) -> None:
    from engine.run.search.autotune import DEFAULT_TUNE_MARGIN, OBJECTIVES, PRUNE_FACTOR, TOP_N
    from engine.core.early_stopping import strictness
    from engine.run.search.max_qps import DEFAULT_QPS_PRECISION, DEFAULT_QPS_PROBES
    from engine.run.search.query_choice import DEFAULT_SEARCH_QUERIES, HEADROOM, ROOM_BELOW

    s = sub.add_parser("tune", help="the serving configuration (runtime x precision x max "
                                    "batch x max wait x threads x replicas) with the most "
                                    "QPS, or the "
                                    "least cost per 1 M, under a p99 bound")
    s.add_argument("--model", nargs="+", default=None, metavar="NAME",
                   help=f"catalog models, each tuned alone in turn: "
                        f"{', '.join([*CATALOG, *DIAGNOSTIC_MODELS])} (or your own model: "
                        "--model-file, below)")
    user_model_options(s)
    s.add_argument("--bound-ms", type=float_arg("bound_ms"), default=None, metavar="MS",
                   help="the Server p99 bound (required)")
    s.add_argument("--objective", default="qps", metavar="NAME",
                   help=f"{', '.join(OBJECTIVES)}: most QPS under the bound, or least cost "
                        "per 1 M inferences on --machine-shape (default qps)")
    s.add_argument("--framework", nargs="+", default=["torch"], metavar="FW",
                   help=f"{', '.join(FRAMEWORKS)} (default torch)")
    s.add_argument("--runtime", nargs="+", default=None, metavar="RT",
                   help="runtimes to search (default: each framework's default)")
    s.add_argument("--precision", nargs="+", default=["fp32"], metavar="P")
    s.add_argument("--threads", nargs="+", type=int_arg("threads", 1), default=None,
                   metavar="N", help=f"intra-op threads (default 1 and {logical_cores()}, "
                                     "all of this machine's)")
    s.add_argument("--batches", nargs="+", type=int_arg("max_batch", *SERVE_BATCH_RANGE),
                   default=list(DEFAULT_BATCHES), metavar="N",
                   help=f"the dynamic batcher's max batch (default "
                        f"{' '.join(map(str, DEFAULT_BATCHES))})")
    s.add_argument("--max-wait-ms", nargs="+", type=float_arg("max_wait_ms"), default=[0.0],
                   metavar="MS", help="the batcher's max wait (default 0: whatever is queued)")
    s.add_argument("--replicas", nargs="+", type=int, default=None,
                   metavar="R", help=f"replicas behind one queue, processes of --threads "
                                     f"threads each (default 1 and {logical_cores()}; only "
                                     "splits with threads x replicas <= the cores are searched)")
    s.add_argument("--margin", type=float_arg("margin"), default=DEFAULT_TUNE_MARGIN,
                   metavar="F", help=f"after the top {TOP_N}, go on while a confirmation "
                                     f"gains at least this fraction (default "
                                     f"{DEFAULT_TUNE_MARGIN:g}); closed-loop figures worse "
                                     f"than the best by over {PRUNE_FACTOR:g}x are pruned")
    s.add_argument("--image-size", type=int_arg("image_size", *IMAGE_RANGE), default=None)
    s.add_argument("--probe-s", type=float_arg("probe_s"), default=DEFAULT_PROBE_S,
                   metavar="S", help=f"a closed-loop probe's timed seconds (default "
                                     f"{DEFAULT_PROBE_S:g})")
    s.add_argument("--search-queries", type=int_arg("search_queries", *SEARCH_QUERIES_RANGE),
                   default=None, metavar="N",
                   help=f"the queries of every Server test of every candidate, so each is held "
                        f"to one early-stopping strictness ({SEARCH_QUERIES_RANGE[0]}.."
                        f"{SEARCH_QUERIES_RANGE[1]}; default: chosen before the first "
                        f"confirmation so that the searches reach {HEADROOM}x the fastest "
                        f"surviving candidate's closed loop and 1/{ROOM_BELOW} of the slowest's, "
                        f"at least {strictness(DEFAULT_SEARCH_QUERIES)})")
    for name in DROPPED:
        s.add_argument("--" + name.replace("_", "-"), default=None, help=argparse.SUPPRESS)
    s.add_argument("--samples", type=int_arg("samples", *SERVE_SAMPLES_RANGE),
                   default=DEFAULT_SAMPLES)
    s.add_argument("--loadgen-seed", type=int_arg("loadgen_seed", *SEED_RANGE), default=0)
    s.add_argument("--qps-precision", type=float_arg("qps_precision"),
                   default=DEFAULT_QPS_PRECISION, metavar="F")
    s.add_argument("--start-qps", type=float_arg("start_qps"), default=None, metavar="Q",
                   help="each max-QPS search's first target (default: the candidate's "
                        "closed-loop samples/s)")
    s.add_argument("--max-probes", type=int_arg("max_probes", *QPS_PROBES_RANGE),
                   default=DEFAULT_QPS_PROBES, metavar="N",
                   help="LoadGen tests per confirmed candidate")
    memory_cap_option(s)
    machine_shape_option(s)
    executor_options(s)
    db_arg(s)


def candidates(args, src=None, cores: int | None = None) -> list:
    """Every candidate the options name; src, a user's model: its framework, and the
    runtimes its format serves (or those named, which its spec then checks); cores: the
    machine's the splits must fit (a cluster node's; None: this machine's)."""
    from engine.run.search.autotune import Candidate

    for fw in args.framework:
        choice("framework", fw, tuple(FRAMEWORKS))
    if src is not None:
        served = [r for r in (FORMAT_RUNTIMES[src.format][1] if src.format in FORMAT_RUNTIMES
                              else RUNTIMES[src.framework]) if r not in UNSERVED_RUNTIMES]
        per_fw = {src.framework: list(dict.fromkeys(args.runtime or served))}
    else:
        per_fw = runtimes_for(list(dict.fromkeys(args.framework)), args.runtime)
    return [Candidate(fw, rt, p, b, t, w, r) for fw, rts in per_fw.items() for rt in rts
            for p in dict.fromkeys(args.precision) for t, r in splits(args, cores)
            for b in dict.fromkeys(args.batches) for w in dict.fromkeys(args.max_wait_ms)]


def splits(args, cores: int | None = None) -> list[tuple[int, int]]:
    """(threads, replicas) pairs that fit the cores (this machine's, or a cluster node's:
    the others are left out, not searched); UserError when none does."""
    cores = cores or logical_cores()
    threads = args.threads or sorted({1, cores})
    replicas = args.replicas or sorted({1, cores})
    for r in replicas:
        int_range("replicas", r, 1, cores, hint=f" (the machine has {cores} logical cores)")
    fits = [(t, r) for t in dict.fromkeys(threads) for r in dict.fromkeys(replicas)
            if t * r <= cores]
    if not fits:
        t, r = min(threads), min(replicas)
        raise UserError(f"replicas: no threads x replicas split fits the machine's {cores} "
                        f"logical cores (the smallest: {t} x {r} = {t * r}); allowed: "
                        f"threads x replicas <= {cores}", field="replicas")
    return fits


def cmd_tune(args) -> int:
    from engine.cli.args import cluster_runner
    from engine.core.policy import MeasurementPolicy
    from engine.present.tune_text import models_lines, tune_lines
    from engine.run.search.autotune import Candidate, check_tune
    from engine.run.search.autotune_runs import stored_autotune
    from engine.run.search.max_qps import check_first_target, search_timeout_s
    from engine.run.jobs.requests import local_runner
    from engine.run.search.serving_jobs import tune_price
    from engine.scenarios import scenario_of
    from store.db import resolve_db_path
    from store.prices import machine_shape

    db = resolve_db_path(args.db)
    shape = machine_shape(args.machine_shape, db)  # a shape not in the catalog: refused
    check_tune(bound_ms=args.bound_ms, objective=args.objective, margin=args.margin,
               shape=shape if args.executor == "local" else "each node's")
    for name in args.model or ():
        if name not in CATALOG and name not in DIAGNOSTIC_MODELS:
            raise UserError(f"model: {name!r} is not in the catalog; allowed: "
                            f"{', '.join([*CATALOG, *DIAGNOSTIC_MODELS])}", field="model")
    for name, field in DROPPED.items():
        if getattr(args, name) is not None:
            raise UserError(f"{field}: a tuning's Server tests run a fixed query count, the "
                            f"same for every candidate; allowed: --search-queries N "
                            f"({SEARCH_QUERIES_RANGE[0]}..{SEARCH_QUERIES_RANGE[1]})",
                            field=field)
    check_first_target(args.start_qps, args.search_queries, args.bound_ms, "start_qps")
    float_range("qps_precision", args.qps_precision, *QPS_PRECISION_RANGE)
    # A user's file must take every batch the batcher may make (1 .. the largest max batch):
    # a fixed batch axis is refused here, naming it, before anything runs.
    src = user_model(args, args.model or [],
                     batch_sizes=tuple(range(1, max(args.batches) + 1)),
                     allowed_batch=lambda fixed: fixed_batch_allowed(fixed, "--batches"))
    if src is not None:
        args.framework = [src.framework or args.framework[0]]
    models = [src.name] if src is not None else list(dict.fromkeys(args.model))
    # every choice refused here, before a cluster is joined; on a cluster the splits are
    # fit to each node's cores once it is known, so none is refused for this machine's
    candidates(args, src, None if args.executor == "local" else
               max(args.threads or [1]) * max(args.replicas or [1]))
    fw = "torch" if "torch" in args.framework else args.framework[0]
    runtime = (default_runtime(src.format, fw) if src is not None else
               REFERENCE_RUNTIME[fw] if fw in REFERENCE_RUNTIME else fw)
    catalog = _catalog(db)
    args.timeout, args.process_per_run = search_timeout_s(), False
    cluster = cluster_runner(args)  # None on this machine
    runner = (cluster.runner if cluster is not None else
              local_runner(timeout_s=args.timeout, memory_cap_bytes=memory_cap(args), db=db,
                           shape=shape))
    policy = MeasurementPolicy(min_time_s=args.probe_s, max_time_s=max(10 * args.probe_s, 5),
                               warmup_max_s=min(1.0, args.probe_s))

    def command(choice):  # the stored command states the query count, a chosen one too
        said = ([] if args.search_queries or choice is None else
                ["--search-queries", str(choice.query_count)])
        return " ".join(["python -m engine", *args.argv, *said])

    def tune_one(model, r, node_shape, cores, on_start):
        cands = candidates(args, src, cores)
        where = f" on {node_shape or 'an unpriced node'}" if cluster is not None else ""
        space = _space(cands, args)
        sweep_id, t = stored_autotune(
            cands, default=Candidate(fw, runtime, args.precision[0], 1, cores), model=model,
            image_size=args.image_size, user_model=src, bound_ms=args.bound_ms,
            objective=args.objective, margin=args.margin, db=db, runner=r,
            command=command, probe_policy=policy,
            price=tune_price(db, node_shape, catalog), max_probes=args.max_probes,
            precision=args.qps_precision, start_qps=args.start_qps, cores=cores,
            here=cluster is None,
            serve={"query_count": args.search_queries, "samples": args.samples,
                   "seed": args.loadgen_seed},
            on_start=lambda sid: (on_start(sid), print(
                f"tune {sid}{where}: {model}, p99 under {args.bound_ms:g} ms, objective "
                f"{args.objective}; {space} -> {db}", flush=True)),
            on_stored=lambda rec: print(f"stored {rec.run_id} "
                                        f"{scenario_of(rec).describe_record(rec)}", flush=True),
            on_queries=lambda choice: print(f"queries{where}: {choice.text()}", flush=True))
        return sweep_id, t, space

    ok, winners = True, []
    try:
        for model in models:
            if len(models) > 1:
                print(f"\n=== {model}", flush=True)
            if cluster is None:
                sweep_id, t, space = tune_one(model, runner, shape, logical_cores(),
                                              lambda sid: None)
                print()
                print("\n".join(tune_lines(t, shape=shape, space=space)))
                _stale(catalog, [shape] if _priced(t) else [])
                print(f"every probe stored in {db} as sweep {sweep_id}")
                ok &= t.winner is not None
                winners.append((model, t))
                continue
            ok &= _fleet(model, tune_one, runner, catalog)
    finally:
        if cluster is not None:
            cluster.close()
    if len(winners) > 1:
        print()
        print("\n".join(models_lines(winners, shape)))
    return EXIT_OK if ok else EXIT_NOT_OK


def _fleet(model, tune_one, runner, catalog) -> bool:
    """One model tuned on each node kind of the cluster at once; whether every kind has a
    winner under the bound."""
    from engine.present.tune_text import fleet_lines, tune_lines
    from engine.run.cluster.fleet import node_runners
    from engine.run.search.fleet_tune import fleet_autotune, fleet_best

    spaces: dict = {}

    def one(r, node_shape, cores, on_start):
        sweep_id, t, spaces[node_shape] = tune_one(model, r, node_shape, cores, on_start)
        return sweep_id, t
    results = fleet_autotune(node_runners(runner), one)
    providers = {m.shape: m.provider for m in catalog}
    for res in results:
        print(f"\n== {res.label}: {res.cores} core(s) for workers")
        if res.tuning is not None:
            print("\n".join(tune_lines(res.tuning, shape=res.shape,
                                       space=spaces.get(res.shape, ""))))
        print(f"stored as sweep {res.sweep_id}" if res.sweep_id else "")
    print()
    print("\n".join(fleet_lines(results, fleet_best(results, providers.get))))
    _stale(catalog, [r.shape for r in results if r.tuning is not None and _priced(r.tuning)])
    return all(r.tuning is not None and r.tuning.winner is not None for r in results)


def _priced(t) -> bool:
    """Whether the tuning's report shows a cost (a confirmation priced on its shape)."""
    return any(x.cost is not None for x in (*t.confirmed, t.default))


def _stale(catalog, shapes) -> None:
    """A note naming the stale prices among the shapes the report priced, and where to
    check them."""
    from datetime import date

    from engine.present.cost_text import stale_note

    machines = [m for m in catalog if m.shape in set(shapes)]
    if said := stale_note(machines, date.today()):
        print(f"note: {said}")


def _space(cands, args) -> str:
    """The search space in words: the CLI's lists, as the candidates took them."""
    return (f"{len(cands)} candidates: runtimes "
            f"{' '.join(dict.fromkeys(c.runtime for c in cands))} x precision "
            f"{' '.join(args.precision)} x max batch "
            f"{' '.join(map(str, dict.fromkeys(args.batches)))} x max wait "
            f"{' '.join(f'{w:g}' for w in dict.fromkeys(args.max_wait_ms))} ms x threads x "
            f"replicas {' '.join(dict.fromkeys(f'{c.threads}x{c.replicas}' for c in cands))}")


def _catalog(db):
    from engine.analysis.cost import load_catalog
    from store.db import open_db
    from store.prices import effective_catalog

    if not db.exists():
        return load_catalog()
    with open_db(db, read_only=True) as con:
        return effective_catalog(con)[0]


COMMANDS = {"tune": cmd_tune}
