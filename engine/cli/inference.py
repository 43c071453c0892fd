"""Inference commands: `run` (a sweep), `batch-search`, `runtimes`, `models`."""

from __future__ import annotations

import sys
from dataclasses import replace

from engine.cli.args import (budget_options, db_arg, energy_options, energy_seconds,
                             float_arg, int_arg,
                             machine_shape_option, memory_cap, memory_cap_option,
                             sweep_options, user_model, user_model_options,
                             executor_options, cluster_runner)
from engine.cli.progress import run_and_summarize
from engine.run.search.batch_search import DEFAULT_MARGIN, FITS, MODES, THROUGHPUT
from engine.run.jobs.requests import SweepRequest, local_runner
from engine.core.catalog import CATALOG, FRAMEWORKS, OFFERED_MODELS, REFERENCE_RUNTIME
from engine.core.errors import UserError
from engine.scenarios.inference.spec import RunSpec, device_choices
from engine.core.precision import PRECISIONS, supported_precisions
from engine.core.runtimes import OPTIONS, ROWS, RuntimeOptions, owners
from engine.core.limits import (BATCH_RANGE, DEFAULT_ROUNDS, IMAGE_RANGE, MARGIN_RANGE,
                                PROFILE_RANGE, SEED_RANGE, float_range, logical_cores)
from engine.core.policy import MeasurementPolicy
from engine.present.outcome import runs_exit, search_outcome

__all__ = ["add_parsers", "COMMANDS"]

USER_FRAMEWORKS = [f for f in FRAMEWORKS if f != "selftest"]


def add_parsers(sub) -> None:
    r = sub.add_parser("run", help="run a sweep of benchmarks and store every result")
    r.add_argument("--model", nargs="+", metavar="NAME",
                   help=f"catalog names: {', '.join(OFFERED_MODELS)} (or your own model: "
                        "see below)")
    r.add_argument("--framework", nargs="+", default=None, metavar="FW",
                   help=f"{', '.join(USER_FRAMEWORKS)} (default: both; your model file: "
                        "its format's)")
    user_model_options(r)
    r.add_argument("--runtime", nargs="+", metavar="RT", default=None,
                   help="runtimes to measure, each applied to the frameworks that have it "
                        "(default: eager for torch, tf_function for tensorflow); see "
                        "`python -m engine runtimes`")
    r.add_argument("--batch", nargs="+", type=int_arg("batch_size", *BATCH_RANGE), default=[1],
                   metavar="N", help=f"batch sizes, {BATCH_RANGE[0]}..{BATCH_RANGE[1]}")
    r.add_argument("--threads", nargs="+", type=int_arg("threads", 1), default=[1], metavar="N",
                   help=f"intra-op threads, 1..{logical_cores()} here")
    r.add_argument("--inter-threads", type=int_arg("inter_threads", 1), default=1,
                   help="inter-op threads (default 1)")
    r.add_argument("--replicas", nargs="+", type=int_arg("replicas", 1), default=[1],
                   metavar="R", help="identical workers at once, each with --threads threads "
                                     "on cores of its own, timed over one window; "
                                     "throughput is their sum (default 1)")
    # one flag for both kinds of input: RunSpec checks each model's own range
    r.add_argument("--image-size", "--seq-len", dest="image_size",
                   type=int_arg("image_size", 1, IMAGE_RANGE[1]), default=None,
                   help="input height and width in px; a token model's (bert_base) sequence "
                        "length in tokens (default: each model's native size)")
    r.add_argument("--precision", default="fp32",
                   help=f"{', '.join(PRECISIONS)} (default fp32); which runtime runs which: "
                        "`python -m engine runtimes`")
    for o in OPTIONS:  # each runtime's own (--ov-hint), from its row
        r.add_argument(o.flag, default=o.default,
                       help=f"{o.what}: {' or '.join(o.choices)} (default {o.default}; "
                            f"{owners(o)} only)")
    r.add_argument("--device", default="cpu")
    r.add_argument("--weight-policy", default="bn_calibrated",
                   help="bn_calibrated (default) or random")
    d = MeasurementPolicy()
    r.add_argument("--warmup", type=int_arg("warmup_iters", 0), default=d.warmup_iters,
                   help=f"warm-up iterations (default {d.warmup_iters})")
    r.add_argument("--warmup-max-time", type=float_arg("warmup_max_s"), default=d.warmup_max_s,
                   help=f"end warm-up early after this many seconds (default {d.warmup_max_s:g})")
    r.add_argument("--min-time", type=float_arg("min_time_s"), default=d.min_time_s,
                   help=f"minimum timed seconds (default {d.min_time_s:g})")
    r.add_argument("--min-iters", type=int_arg("min_iters", 1), default=d.min_iters,
                   help=f"minimum timed iterations (default {d.min_iters})")
    r.add_argument("--max-time", type=float_arg("max_time_s"), default=d.max_time_s,
                   help=f"stop timing after this many seconds (default {d.max_time_s:g})")
    r.add_argument("--seed", type=int_arg("seed", *SEED_RANGE), default=None,
                   help="seed for the shuffled order of rounds 3+ (default: random, stored)")
    r.add_argument("--profile", type=int_arg("profile_steps", *PROFILE_RANGE), default=0,
                   metavar="STEPS", help="after timing, profile this many more iterations in "
                                         "a separate pass (torch.profiler / TF profiler); "
                                         "top operators and the Chrome trace are stored")
    energy_options(r, figures="joules per sample and kWh per 1 M inferences",
                   note="; contenders then run one after another")
    r.add_argument("--tf32", action="store_true",
                   help="allow TF32 for this fp32 run's CUDA matmuls and convolutions (torch "
                        "on cuda only; default off, recorded either way)")
    r.add_argument("--process-per-run", action="store_true",
                   help="a fresh worker process for every run (default: one per "
                        "framework/threads group, so imports are paid once)")
    r.add_argument("--no-table", action="store_true", help="skip the comparison table")
    executor_options(r)
    r.add_argument("--aa-test", action="store_true",
                   help="also run every configuration a second time under a second name "
                        "(\"#2\", in a worker of its own): an A/A test, whose true answer is "
                        "a tie, shows what the machine's noise alone makes of a comparison")
    sweep_options(r, timeout=600.0, rounds=DEFAULT_ROUNDS,
                  rounds_help=f"the minimum rounds of the whole sweep, each in fresh worker "
                              f"processes and in alternating order (default {DEFAULT_ROUNDS}; "
                              f"see docs)")
    budget_options(r)
    r.add_argument("--contention", action="store_true",
                   help="also measure every configuration beside a controlled neighbour on "
                        "one of its cores (steady, and on/off), and torch also with OpenMP's "
                        "passive wait policy: each a setting of its own; the table shows each "
                        "contender's slowdown and whether a verdict changes")

    m = sub.add_parser("models", help="list the catalog with params and FLOPs per framework")
    m.add_argument("--no-count", action="store_true",
                   help="show only figures already counted (no workers are started)")
    m.add_argument("--model", nargs="+", metavar="NAME", help="only these models")
    db_arg(m)

    sub.add_parser("runtimes", help="the runtimes of each framework and what they support")

    bs = sub.add_parser("batch-search", help="find the throughput-optimal batch size, or the "
                                             "largest that fits (doubling, then bisecting "
                                             "after out-of-memory)")
    bs.add_argument("--mode", choices=MODES, default=THROUGHPUT,
                    help="throughput (default): the throughput-optimal batch; fits: the "
                         "largest batch that fits in memory, no throughput rule")
    bs.add_argument("--model")
    bs.add_argument("--framework", default=None, help="torch (default) or tensorflow; your "
                                                      "model file: its format's")
    user_model_options(bs)
    bs.add_argument("--runtime", default=None)
    bs.add_argument("--threads", type=int_arg("threads", 1), default=1)
    bs.add_argument("--image-size", "--seq-len", dest="image_size",
                    type=int_arg("image_size", 1, IMAGE_RANGE[1]), default=None)
    bs.add_argument("--precision", default="fp32")
    bs.add_argument("--start", type=int_arg("start", *BATCH_RANGE), default=1)
    bs.add_argument("--max-batch", type=int_arg("max_batch", *BATCH_RANGE), default=BATCH_RANGE[1])
    bs.add_argument("--margin", type=float_arg("margin"), default=DEFAULT_MARGIN,
                    help=f"a doubling must raise throughput by more than this (default "
                         f"{DEFAULT_MARGIN:g})")
    bs.add_argument("--p99-ms", type=float_arg("p99_ms"), default=None,
                    help="also report the largest batch whose p99 latency stays under this")
    memory_cap_option(bs)
    machine_shape_option(bs)
    bs.add_argument("--min-time", type=float_arg("min_time_s"), default=1.0)
    bs.add_argument("--min-iters", type=int_arg("min_iters", 1), default=10)
    bs.add_argument("--timeout", type=float_arg("timeout"), default=600.0)
    db_arg(bs)



def _frameworks(given, src, default) -> list[str]:
    """--framework as given; else a model file's format's framework, or the default. A
    factory's model belongs to one framework, which the user names."""
    if given:
        return given
    if src is None:
        return default
    if src.framework is None:
        raise UserError("framework: a factory's model belongs to one framework; allowed: "
                        "--framework torch or --framework tensorflow", field="framework")
    return [src.framework]


def sweep_request(args) -> SweepRequest:
    """The request `run`'s flags describe: the same SweepRequest the Run page builds."""
    policy = MeasurementPolicy(warmup_iters=args.warmup, warmup_max_s=args.warmup_max_time,
                               min_time_s=args.min_time, min_iters=args.min_iters,
                               max_time_s=args.max_time, energy_s=energy_seconds(args))
    src = user_model(args, args.model, args.batch)
    return SweepRequest(
        models=tuple([src.name] if src else args.model),
        frameworks=tuple(_frameworks(args.framework, src, ["torch", "tensorflow"])),
        batch_sizes=tuple(args.batch), threads=tuple(args.threads),
        runtimes=tuple(args.runtime or ()), inter_threads=args.inter_threads,
        precision=args.precision, image_size=args.image_size,
        options=RuntimeOptions({o.name: getattr(args, o.name) for o in OPTIONS}),
        device=args.device, weight_policy=args.weight_policy, policy=policy,
        profile_steps=args.profile,
        user_model=src, replicas=tuple(args.replicas), aa_test=args.aa_test,
        contention=args.contention, rounds=args.rounds, max_rounds=args.max_rounds,
        time_budget_s=args.time_budget, margin=args.margin, seed=args.seed,
        timeout_s=args.timeout, memory_cap_bytes=memory_cap(args), executor=args.executor,
        placements=tuple(args.placement or ()), tf32=args.tf32)


def cmd_run(args) -> int:
    from engine.analysis.sweep_verdict import judge_sweep
    from engine.present.tables import compare_table
    from engine.run.jobs.sweep import verdict_rule

    request = sweep_request(args)
    # On a cluster: its nodes are chosen (and an unreachable address refused) before any
    # spec is built, because threads x replicas must fit the nodes' cores, not this one's;
    # what a cluster refuses anyway is refused before joining it.
    request.check_where()
    cluster = cluster_runner(args)
    try:
        if cluster:
            request = replace(request, cores=cluster.plan.cores)
        specs, left_out = request.expand()
        for split in left_out:
            print(f"left out: {split}")

        def table(records):
            verdict = judge_sweep(map(vars, records), rule=verdict_rule(request.budget()))
            return compare_table(verdict, color=sys.stdout.isatty())
        records = run_and_summarize(
            request, specs, args, table=None if args.no_table else table, noun="runs",
            seed=args.seed, process_per_run=args.process_per_run,
            runner=cluster.runner if cluster else None)
    finally:
        if cluster:
            cluster.close()
    return runs_exit(r.status for r in records)


def cmd_models(args) -> int:
    from engine.present.tables import format_table
    from engine.core.protocol import Stats
    from engine.run.process.worker_steps import count_model_stats
    from store.db import open_db
    from store.runs import model_info, save_model_stats

    names = args.model or list(OFFERED_MODELS)
    for n in names:
        if n not in CATALOG:
            raise UserError(f"model: unknown {n!r}; allowed: {', '.join(CATALOG)}",
                            field="model")
    with open_db(args.db) as con:
        known = model_info(con)
    have = {(r.model, r.framework, r.image_size) for r in known.itertuples()}
    missing = [RunSpec(n, fw, 1, 1, weight_policy="random").validate()
               for fw in USER_FRAMEWORKS for n in names
               if (n, fw, CATALOG[n].native_size) not in have]
    if missing and not args.no_count:
        from tqdm import tqdm
        bar = tqdm(total=len(missing), unit="model", file=sys.stderr,
                   desc="counting params and FLOPs (once; cached in the database)")

        def on_stats(ev):
            bar.update(1)
            if isinstance(ev, Stats):
                with open_db(args.db) as con:
                    save_model_stats(con, ev.model, ev.framework, ev.image_size, vars(ev))
            else:
                bar.write(f"could not count {ev.run_id}: {ev.reason}")
        count_model_stats(missing, on_stats=on_stats)
        bar.close()
        with open_db(args.db) as con:
            known = model_info(con)
    facts = {(r.model, r.framework, r.image_size): r for r in known.itertuples()}
    rows = []
    for n in names:
        info = CATALOG[n]
        t = facts.get((n, "torch", info.native_size))
        k = facts.get((n, "tensorflow", info.native_size))
        rows.append([n, str(info.native_size),
                     f"{t.params:,}" if t else "?", f"{k.params:,}" if k else "?",
                     f"{k.params_trainable:,}" if k else "?",
                     f"{t.flops_per_sample / 1e9:.3f}" if t else "?",
                     f"{k.flops_per_sample / 1e9:.3f}" if k else "?"])
    print(format_table(["model", "size", "torch params", "keras params",
                        "keras trainable", "torch GFLOPs", "keras GFLOPs"], rows))
    print("\nGFLOPs: floating-point operations (not MACs; 1 MAC = 2 FLOPs) for one "
          "forward of one image at the native size.\n  torch: "
          "torch.utils.flop_counter.FlopCounterMode (convolutions, matmuls).\n  keras: "
          "TensorFlow's graph profiler on the frozen graph (also counts BatchNorm, "
          "activations and other elementwise ops).\n  transformer encoders (bert, vit): "
          "both frameworks from the configuration (engine/core/encoders.py), bert at its "
          "native 128 tokens.\nWhy the parameter counts differ:")
    for note in dict.fromkeys(CATALOG[n].note for n in names):
        fams = [n for n in names if CATALOG[n].note == note]
        print(f"  {', '.join(fams)}: {note}")
    return 0


def cmd_batch_search(args) -> int:
    from engine.run.search.batch_search import stored_batch_search
    from engine.present.tables import format_table, p99_text
    from store.db import resolve_db_path

    float_range("margin", args.margin, *MARGIN_RANGE)
    src = user_model(args, [args.model] if args.model else [], (args.start,))
    (framework,) = _frameworks([args.framework] if args.framework else None, src, ["torch"])
    base = RunSpec(src.name if src else args.model, framework, args.start, args.threads,
                   image_size=args.image_size, precision=args.precision, runtime=args.runtime,
                   user_model=src,
                   policy=MeasurementPolicy(min_time_s=args.min_time, min_iters=args.min_iters,
                                            warmup_iters=3)).validate()
    db = resolve_db_path(args.db)

    def started(sweep_id):
        print(f"batch search {sweep_id}: {base.model} {base.framework} ({base.runtime}), "
              f"{base.intra_threads} threads, from batch {args.start}")

    def stored(rec):
        figure = (f"{rec.throughput:,.1f} samples/s, p99 {p99_text(rec.p99_ms, rec.iterations)} ms"
                  if rec.throughput else rec.reason[:120])
        print(f"probe batch {rec.batch_size:>5}: {rec.status:7} {figure}", flush=True)

    runner = local_runner(timeout_s=args.timeout, memory_cap_bytes=memory_cap(args), db=db,
                          shape=args.machine_shape)
    sweep_id, res = stored_batch_search(
        base, db=db, runner=runner, command=" ".join(["python -m engine", *args.argv]),
        on_start=started, on_stored=stored, start=args.start, max_batch=args.max_batch,
        margin=args.margin, p99_bound_ms=args.p99_ms, mode=args.mode)
    rows = [[str(r.batch_size), r.status, f"{r.throughput:,.1f}" if r.throughput else "",
             f"{r.median_ms:.2f}" if r.median_ms else "", p99_text(r.p99_ms, r.iterations),
             "*" if r.batch_size == (res.largest_fit if args.mode == FITS else res.best_batch)
             else ""] for r in res.probes]
    print()
    print(format_table(["batch", "status", "samples/s", "p50 ms", "p99 ms",
                        "largest fit" if args.mode == FITS else "best"], rows))
    print(f"\nstopped: {res.stop_reason}")
    if args.mode == FITS and res.largest_fit:
        print(f"largest batch that fits: {res.largest_fit}")
    elif res.best_batch:
        print(f"throughput-optimal batch: {res.best_batch} ({res.best_throughput:,.1f} samples/s)")
    if args.p99_ms is not None:
        print(f"largest batch with p99 <= {args.p99_ms:g} ms: {res.p99_batch or 'none probed'}")
    print(f"probes stored in {db} as sweep {sweep_id} (see Compare: throughput vs batch)")
    code, line = search_outcome([r.status for r in res.probes], res.largest_fit)
    print(line)
    return code


def cmd_runtimes(args) -> int:
    from engine.present.tables import format_table

    rows = []
    for r in ROWS:  # every runtime's row (engine/core/runtimes.py)
        if r.framework == "selftest":
            continue
        fw, rt = r.framework, r.name
        rows.append([fw, rt + (" (default)" if r.default else ""),
                     ", ".join(supported_precisions(fw, rt)), ", ".join(device_choices(fw, rt)),
                     "reference" if r.reference else f"checked against {REFERENCE_RUNTIME[fw]}",
                     ", ".join(r.formats) or "-",
                     ", ".join(f"{o.flag} {'|'.join(o.choices)}" for o in r.options) or "-",
                     r.label])
    print(format_table(["framework", "runtime", "precision", "device", "output", "files",
                        "options", "what"], rows))
    print("\nEvery non-reference runtime's output is compared with its reference on the same "
          "input before timing; beyond 0.1 % of the output's magnitude the run is invalid. "
          "bf16 runs are compared with fp32 eager by direction: cosine similarity >= 0.98. "
          "A user's file is checked against its format's first runtime (an ONNX file's: "
          "onnxruntime).")
    return 0



COMMANDS = {"run": cmd_run, "models": cmd_models, "batch-search": cmd_batch_search,
            "runtimes": cmd_runtimes}
