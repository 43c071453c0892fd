"""`python -m engine tune`: the autotuner (issue 27, part 3). For one model, a Server p99
bound and an objective (most QPS, or least cost per 1 M on --machine-shape), the serving
configuration to deploy: closed-loop probes prune, the max-QPS search confirms the best,
every probe stored under one sweep (engine/run/autotune.py); the report is
engine/present/tune_text.py's."""

from __future__ import annotations

from engine.cli.args import (db_arg, float_arg, int_arg, machine_shape_option, memory_cap,
                             memory_cap_option, user_model, user_model_options)
from engine.core.catalog import (CATALOG, DIAGNOSTIC_MODELS, FRAMEWORKS, REFERENCE_RUNTIME,
                                 RUNTIMES)
from engine.core.model_source import FORMAT_RUNTIMES, default_runtime
from engine.core.errors import UserError
from engine.core.inference import runtimes_for
from engine.core.limits import (IMAGE_RANGE, QPS_PRECISION_RANGE, QPS_PROBES_RANGE,
                                SEED_RANGE, SERVE_BATCH_RANGE, SERVE_QPS_RANGE,
                                SERVE_SAMPLES_RANGE, choice, float_range, int_range,
                                logical_cores)
from engine.core.serving import (DEFAULT_MIN_QUERIES, DEFAULT_SAMPLES, UNSERVED_RUNTIMES,
                                 fixed_batch_allowed)
from engine.present.outcome import EXIT_NOT_OK, EXIT_OK

__all__ = ["add_parsers", "COMMANDS"]

# A closed-loop probe only ranks candidates: 1 s and 30 calls put p99 between real samples.
DEFAULT_PROBE_S = 1.0
# A Server test of the search: 2 s (LoadGen's 10 s x 5-9 probes x 3+ candidates is too long
# for a tune); at least 459 queries all the same (max_qps.EARLY_STOPPING_MIN_QUERIES).
DEFAULT_TEST_S = 2.0
DEFAULT_BATCHES = (1, 2, 4, 8)


def add_parsers(sub) -> None:
    from engine.run.autotune import DEFAULT_TUNE_MARGIN, OBJECTIVES, PRUNE_FACTOR, TOP_N
    from engine.run.max_qps import DEFAULT_QPS_PRECISION, DEFAULT_QPS_PROBES

    s = sub.add_parser("tune", help="the serving configuration (runtime x precision x max "
                                    "batch x max wait x threads x replicas) with the most "
                                    "QPS, or the "
                                    "least cost per 1 M, under a p99 bound")
    s.add_argument("--model", default=None, metavar="NAME",
                   help=f"one catalog model: {', '.join([*CATALOG, *DIAGNOSTIC_MODELS])} (or "
                        "your own model: --model-file, below)")
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
    s.add_argument("--min-duration", type=float_arg("min_duration_s"), default=DEFAULT_TEST_S,
                   metavar="S", help=f"each Server test's minimum duration (default "
                                     f"{DEFAULT_TEST_S:g} s)")
    s.add_argument("--min-queries", type=int, default=DEFAULT_MIN_QUERIES, metavar="N")
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
    db_arg(s)


def candidates(args, src=None) -> list:
    """Every candidate the options name; src, a user's model: its framework, and the
    runtimes its format serves (or those named, which its spec then checks)."""
    from engine.run.autotune import Candidate

    for fw in args.framework:
        choice("framework", fw, tuple(FRAMEWORKS))
    if src is not None:
        served = [r for r in (FORMAT_RUNTIMES[src.format][1] if src.format in FORMAT_RUNTIMES
                              else RUNTIMES[src.framework]) if r not in UNSERVED_RUNTIMES]
        per_fw = {src.framework: list(dict.fromkeys(args.runtime or served))}
    else:
        per_fw = runtimes_for(list(dict.fromkeys(args.framework)), args.runtime)
    return [Candidate(fw, rt, p, b, t, w, r) for fw, rts in per_fw.items() for rt in rts
            for p in dict.fromkeys(args.precision) for t, r in splits(args)
            for b in dict.fromkeys(args.batches) for w in dict.fromkeys(args.max_wait_ms)]


def splits(args) -> list[tuple[int, int]]:
    """(threads, replicas) pairs that fit this machine's cores (the others are said, not
    searched); UserError when none does."""
    cores = logical_cores()
    threads = args.threads or sorted({1, cores})
    replicas = args.replicas or sorted({1, cores})
    for r in replicas:
        int_range("replicas", r, 1, cores, hint=f" (this machine has {cores} logical cores)")
    fits = [(t, r) for t in dict.fromkeys(threads) for r in dict.fromkeys(replicas)
            if t * r <= cores]
    if not fits:
        t, r = min(threads), min(replicas)
        raise UserError(f"replicas: no threads x replicas split fits this machine's {cores} "
                        f"logical cores (the smallest: {t} x {r} = {t * r}); allowed: "
                        f"threads x replicas <= {cores}", field="replicas")
    return fits


def cmd_tune(args) -> int:
    import platform

    from engine.analysis.cost import load_catalog
    from engine.analysis.serving_cost import serving_cost, serving_split
    from engine.core.policy import MeasurementPolicy
    from engine.present.tune_text import tune_lines
    from engine.run.autotune import Candidate, check_tune, stored_autotune
    from engine.run.requests import SERVE_TIMEOUT_MARGIN_S, local_runner
    from engine.scenarios import scenario_of
    from store.db import open_db, resolve_db_path
    from store.prices import effective_catalog, machine_shape

    db = resolve_db_path(args.db)
    shape = machine_shape(args.machine_shape, db)  # a shape not in the catalog: refused
    check_tune(bound_ms=args.bound_ms, objective=args.objective, margin=args.margin,
               shape=shape)
    if args.model is not None and args.model not in CATALOG \
            and args.model not in DIAGNOSTIC_MODELS:
        raise UserError(f"model: {args.model!r} is not in the catalog; allowed: "
                        f"{', '.join([*CATALOG, *DIAGNOSTIC_MODELS])}", field="model")
    if args.start_qps is not None:
        float_range("start_qps", args.start_qps, *SERVE_QPS_RANGE)
    float_range("qps_precision", args.qps_precision, *QPS_PRECISION_RANGE)
    # A user's file must take every batch the batcher may make (1 .. the largest max batch):
    # a fixed batch axis is refused here, naming it, before anything runs.
    src = user_model(args, [args.model] if args.model else [],
                     batch_sizes=tuple(range(1, max(args.batches) + 1)),
                     allowed_batch=lambda fixed: fixed_batch_allowed(fixed, "--batches"))
    if src is not None:
        args.framework = [src.framework or args.framework[0]]
    model = src.name if src is not None else args.model
    cands = candidates(args, src)
    fw = "torch" if "torch" in args.framework else args.framework[0]
    runtime = (default_runtime(src.format, fw) if src is not None else
               REFERENCE_RUNTIME[fw] if fw in REFERENCE_RUNTIME else fw)
    default = Candidate(fw, runtime, args.precision[0], 1, logical_cores())
    machine = None
    if shape:
        if db.exists():
            with open_db(db, read_only=True) as con:
                catalog, _ = effective_catalog(con)
        else:
            catalog = load_catalog()
        machine = next(m for m in catalog if m.shape == shape)
    arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64",
            "arm64": "arm64"}.get(platform.machine().lower())

    def price(c, fig, rate):
        if machine is None:
            return None
        cost = serving_cost(machine, serving_split(
            rate, threads=c.threads, replicas=c.replicas, threads_per_core=fig.threads_per_core,
            cores_used=fig.cores_used, shape=fig.shape or shape, arch=arch))
        return cost.per_million_at_bound if cost is not None else None

    runner = local_runner(timeout_s=args.min_duration + SERVE_TIMEOUT_MARGIN_S,
                          memory_cap_bytes=memory_cap(args), db=db, shape=shape)
    policy = MeasurementPolicy(min_time_s=args.probe_s, max_time_s=max(10 * args.probe_s, 5),
                               warmup_max_s=min(1.0, args.probe_s))
    space = (f"{len(cands)} candidates: runtimes {' '.join(dict.fromkeys(c.runtime for c in cands))}"
             f" x precision {' '.join(args.precision)} x max batch "
             f"{' '.join(map(str, dict.fromkeys(args.batches)))} x max wait "
             f"{' '.join(f'{w:g}' for w in dict.fromkeys(args.max_wait_ms))} ms x threads x "
             f"replicas {' '.join(dict.fromkeys(f'{c.threads}x{c.replicas}' for c in cands))}")
    sweep_id, t = stored_autotune(
        cands, default=default, model=model, image_size=args.image_size, user_model=src,
        bound_ms=args.bound_ms, objective=args.objective, margin=args.margin, db=db,
        runner=runner, command=" ".join(["python -m engine", *args.argv]),
        probe_policy=policy, price=price, max_probes=args.max_probes,
        precision=args.qps_precision, start_qps=args.start_qps,
        serve={"min_duration_s": args.min_duration, "min_query_count": args.min_queries,
               "samples": args.samples, "seed": args.loadgen_seed},
        on_start=lambda sid: print(f"tune {sid}: {model}, p99 under {args.bound_ms:g} "
                                   f"ms, objective {args.objective}; {space} -> {db}",
                                   flush=True),
        on_stored=lambda rec: print(f"stored {rec.run_id} "
                                    f"{scenario_of(rec).describe_record(rec)}", flush=True))
    print()
    print("\n".join(tune_lines(t, shape=shape, space=space)))
    print(f"every probe stored in {db} as sweep {sweep_id}")
    return EXIT_OK if t.winner is not None else EXIT_NOT_OK


COMMANDS = {"tune": cmd_tune}
