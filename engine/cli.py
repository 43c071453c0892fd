"""Command line: `python -m engine run|models|runs|export|import`.

Three layers, as asv has them: argparse here, the work in engine/ and store/ functions,
and tests that call those functions (or this main()) directly.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path

from engine.catalog import CATALOG, FRAMEWORKS
from engine.cli_workloads import cmd_dataload, cmd_train, memory_cap
from engine.errors import UserError
from engine.rounds import DEFAULT_ROUNDS
from engine.spec import (BATCH_RANGE, PROFILE_RANGE, MeasurementPolicy, RunSpec, expand_sweep,
                         logical_cores)

__all__ = ["main"]

USER_FRAMEWORKS = [f for f in FRAMEWORKS if f != "selftest"]


def _db_arg(p):
    p.add_argument("--db", metavar="PATH",
                   help="DuckDB file (default: $BENCH_DB, else ./data/bench.duckdb)")


def _int(name, lo, hi=None):
    """An integer within lo..hi (hi None: no upper bound), refused naming field and range."""
    allowed = f"allowed: integer {lo}..{hi if hi is not None else 'any'}"

    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name}: {text!r} is not an integer; {allowed}")
        if v < lo or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"{name}: {v} is out of range; {allowed}")
        return v
    return parse


def _float(name):
    def parse(text):
        try:
            return float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name}: {text!r} is not a number")
    return parse


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m engine",
                                 description="Benchmark deep-learning inference, training "
                                             "and data loading; store results in DuckDB; "
                                             "compare frameworks.")
    sub = ap.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run a sweep of benchmarks and store every result")
    r.add_argument("--model", nargs="+", required=True, metavar="NAME",
                   help=f"catalog names: {', '.join(CATALOG)}")
    r.add_argument("--framework", nargs="+", default=["torch", "tensorflow"], metavar="FW",
                   help=f"{', '.join(USER_FRAMEWORKS)} (default: both)")
    r.add_argument("--runtime", nargs="+", metavar="RT", default=None,
                   help="runtimes to measure, each applied to the frameworks that have it "
                        "(default: eager for torch, tf_function for tensorflow); see "
                        "`python -m engine runtimes`")
    r.add_argument("--batch", nargs="+", type=_int("batch_size", *BATCH_RANGE), default=[1],
                   metavar="N", help=f"batch sizes, {BATCH_RANGE[0]}..{BATCH_RANGE[1]}")
    r.add_argument("--threads", nargs="+", type=_int("threads", 1), default=[1], metavar="N",
                   help=f"intra-op threads, 1..{logical_cores()} here")
    r.add_argument("--inter-threads", type=_int("inter_threads", 1), default=1,
                   help="inter-op threads (default 1)")
    r.add_argument("--image-size", type=_int("image_size", 32, 1024), default=None,
                   help="input height and width (default: each model's native size)")
    r.add_argument("--precision", default="fp32",
                   help="fp32 (default) or bf16 (torch eager, channels_last, torchscript, "
                        "compile; see `python -m engine runtimes`)")
    r.add_argument("--device", default="cpu")
    r.add_argument("--weight-policy", default="bn_calibrated",
                   help="bn_calibrated (default) or random")
    d = MeasurementPolicy()
    r.add_argument("--warmup", type=_int("warmup_iters", 0), default=d.warmup_iters,
                   help=f"warm-up iterations (default {d.warmup_iters})")
    r.add_argument("--warmup-max-time", type=_float("warmup_max_s"), default=d.warmup_max_s,
                   help=f"end warm-up early after this many seconds (default {d.warmup_max_s:g})")
    r.add_argument("--min-time", type=_float("min_time_s"), default=d.min_time_s,
                   help=f"minimum timed seconds (default {d.min_time_s:g})")
    r.add_argument("--min-iters", type=_int("min_iters", 1), default=d.min_iters,
                   help=f"minimum timed iterations (default {d.min_iters})")
    r.add_argument("--max-time", type=_float("max_time_s"), default=d.max_time_s,
                   help=f"stop timing after this many seconds (default {d.max_time_s:g})")
    r.add_argument("--timeout", type=_float("timeout"), default=600.0,
                   help="wall-time limit per run in seconds, load included (default 600)")
    r.add_argument("--memory-cap-mb", type=_int("memory_cap_mb", 64), default=None,
                   help="address space one run may add to its worker (default: 75%% of RAM)")
    r.add_argument("--rounds", type=_int("rounds", 1, 100), default=DEFAULT_ROUNDS,
                   help=f"rounds of the whole sweep, each in fresh worker processes and in "
                        f"alternating order (default {DEFAULT_ROUNDS}; see docs)")
    r.add_argument("--seed", type=_int("seed", 0), default=None,
                   help="seed for the shuffled order of rounds 3+ (default: random, stored)")
    r.add_argument("--profile", type=_int("profile_steps", *PROFILE_RANGE), default=0,
                   metavar="STEPS", help="after timing, profile this many more iterations in "
                                         "a separate pass (torch.profiler / TF profiler); "
                                         "top operators and the Chrome trace are stored")
    r.add_argument("--process-per-run", action="store_true",
                   help="a fresh worker process for every run (default: one per "
                        "framework/threads group, so imports are paid once)")
    r.add_argument("--no-table", action="store_true", help="skip the comparison table")
    _db_arg(r)

    m = sub.add_parser("models", help="list the catalog with params and FLOPs per framework")
    m.add_argument("--no-count", action="store_true",
                   help="show only figures already counted (no workers are started)")
    m.add_argument("--model", nargs="+", metavar="NAME", help="only these models")
    _db_arg(m)

    ls = sub.add_parser("runs", help="list stored runs, newest first")
    ls.add_argument("--limit", type=_int("limit", 1), default=30)
    ls.add_argument("--sweep", metavar="ID")
    ls.add_argument("--status", choices=["ok", "error", "timeout", "oom", "killed", "invalid"])
    _db_arg(ls)

    sub.add_parser("runtimes", help="the runtimes of each framework and what they support")

    bs = sub.add_parser("batch-search", help="find the throughput-optimal batch size "
                                             "(doubling, then bisecting after out-of-memory)")
    bs.add_argument("--model", required=True)
    bs.add_argument("--framework", default="torch")
    bs.add_argument("--runtime", default=None)
    bs.add_argument("--threads", type=_int("threads", 1), default=1)
    bs.add_argument("--image-size", type=_int("image_size", 32, 1024), default=None)
    bs.add_argument("--precision", default="fp32")
    bs.add_argument("--start", type=_int("start", *BATCH_RANGE), default=1)
    bs.add_argument("--max-batch", type=_int("max_batch", *BATCH_RANGE), default=BATCH_RANGE[1])
    bs.add_argument("--margin", type=_float("margin"), default=0.05,
                    help="a doubling must raise throughput by more than this (default 0.05)")
    bs.add_argument("--p99-ms", type=_float("p99_ms"), default=None,
                    help="also report the largest batch whose p99 latency stays under this")
    bs.add_argument("--memory-cap-mb", type=_int("memory_cap_mb", 64), default=None,
                    help="address space a run may add (default: 75%% of RAM)")
    bs.add_argument("--min-time", type=_float("min_time_s"), default=1.0)
    bs.add_argument("--min-iters", type=_int("min_iters", 1), default=10)
    bs.add_argument("--timeout", type=_float("timeout"), default=600.0)
    _db_arg(bs)

    sw = sub.add_parser("sweeps", help="list stored sweeps, newest first")
    _db_arg(sw)

    cp = sub.add_parser("compare", help="the round-aggregated comparison of a stored sweep")
    cp.add_argument("sweep", metavar="SWEEP_ID", help="a sweep id (or a unique prefix); "
                    "default: the newest sweep", nargs="?")
    _db_arg(cp)

    pr = sub.add_parser("prices", help="the cloud price catalog: list, check, import")
    psub = pr.add_subparsers(dest="prices_command", required=True)
    pl = psub.add_parser("list", help="machines and their hourly prices")
    pl.add_argument("--provider", choices=["OCI", "AWS", "GCP", "Azure"])
    _db_arg(pl)
    pc = psub.add_parser("check", help="validate the catalog (prices, sources, dates)")
    _db_arg(pc)
    pi = psub.add_parser("import", help="refresh from a saved OCI price list API response "
                                        "or an AWS Price List offer file")
    pi.add_argument("file", metavar="FILE")
    pi.add_argument("--as-of", metavar="YYYY-MM-DD",
                    help="date of the figures (default: the file's own date, else today)")
    _db_arg(pi)

    ex = sub.add_parser("export", help="write runs with raw samples to parquet, csv or json")
    ex.add_argument("--format", required=True, choices=["parquet", "csv", "json"])
    ex.add_argument("--out", metavar="PATH", help="output file (default: ./data/export-<time>)")
    ex.add_argument("--sweep", metavar="ID", help="only this sweep")
    _db_arg(ex)

    im = sub.add_parser("import", help="read our export back, or PerfZero summary JSON")
    im.add_argument("file", metavar="FILE")
    _db_arg(im)
    from engine.cli_workloads import add_parsers
    add_parsers(sub, db_arg=_db_arg, int_arg=_int, float_arg=_float)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # What the sweep records as its command: the arguments this call received.
    args.argv = list(argv) if argv is not None else sys.argv[1:]
    try:
        return {"run": cmd_run, "models": cmd_models, "runs": cmd_runs,
                "sweeps": cmd_sweeps, "compare": cmd_compare, "prices": cmd_prices,
                "runtimes": cmd_runtimes, "batch-search": cmd_batch_search,
                "export": cmd_export, "import": cmd_import, "train": cmd_train,
                "dataload": cmd_dataload}[args.command](args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: every run that finished is stored", file=sys.stderr)
        return 130


def cmd_run(args) -> int:
    from engine.cli_workloads import run_with_progress
    from engine.compare import aggregate
    from engine.report import compare_table

    policy = MeasurementPolicy(warmup_iters=args.warmup, warmup_max_s=args.warmup_max_time,
                               min_time_s=args.min_time, min_iters=args.min_iters,
                               max_time_s=args.max_time)
    specs = expand_sweep(args.model, args.framework, args.batch, args.threads,
                         inter_threads=args.inter_threads, precision=args.precision,
                         image_size=args.image_size, device=args.device,
                         weight_policy=args.weight_policy, policy=policy,
                         runtimes=args.runtime, profile_steps=args.profile)

    def describe_event(spec, ev):
        iters = f" {ev['iters']} it" if ev.get("iters") else ""
        return (f"{spec.model} {spec.framework} b{spec.batch_size} t{spec.intra_threads}: "
                f"{ev.get('phase', 'start')}{iters}")

    def describe_record(rec):
        figure = (f"p50 {rec.median_ms:.3f} ms, {rec.throughput:,.1f} samples/s, "
                  f"{rec.validity}" if rec.median_ms is not None else rec.reason[:160])
        return (f"{rec.model} {rec.framework} ({rec.runtime}) b{rec.batch_size} "
                f"t{rec.intra_threads}: {rec.status} - {figure}")

    records, db = run_with_progress(specs, args, describe_event=describe_event,
                                    describe_record=describe_record, unit="run",
                                    total_units=len(specs), seed=args.seed,
                                    process_per_run=args.process_per_run)
    if not args.no_table:
        print()
        print(compare_table(aggregate([vars(r) for r in records]), color=sys.stdout.isatty()))
    failed = sum(r.status != "ok" for r in records)
    print(f"\n{len(records)} runs stored in {db}; {failed} not ok")
    return 0


def cmd_models(args) -> int:
    from engine.report import format_table
    from engine.runner import count_model_stats
    from store.db import open_db
    from store.runs import model_info, save_model_stats

    names = args.model or list(CATALOG)
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
            if ev["event"] == "stats":
                with open_db(args.db) as con:
                    save_model_stats(con, ev["model"], ev["framework"], ev["image_size"], ev)
            else:
                bar.write(f"could not count {ev['run_id']}: {ev['reason']}")
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
          "activations and other elementwise ops).\nWhy the parameter counts differ:")
    for note in dict.fromkeys(CATALOG[n].note for n in names):
        fams = [n for n in names if CATALOG[n].note == note]
        print(f"  {', '.join(fams)}: {note}")
    return 0


def cmd_runs(args) -> int:
    from engine.report import format_table
    from store.db import open_db
    from store.runs import list_runs

    with open_db(args.db) as con:
        df = list_runs(con, limit=args.limit, sweep_id=args.sweep, status=args.status)
    if df.empty:
        print("no runs stored yet: try `python -m engine run --model mobilenet_v3_small "
              "--framework torch tensorflow --batch 1`")
        return 0

    def f(v, fmt):
        return "" if v is None or v != v else format(v, fmt)
    rows = [[str(r.started_at)[:19], r.run_id[:8], r.model, r.framework, f(r.batch_size, ".0f"),
             f(r.intra_threads, ".0f"), f(r.image_size, ".0f"), r.status,
             r.validity or "", f(r.median_ms, ".3f"), f(r.p99_ms, ".3f"),
             f(r.throughput, ",.1f"), f(r.peak_rss_bytes / 2**20 if r.peak_rss_bytes == r.peak_rss_bytes and r.peak_rss_bytes is not None else None, ",.0f"),
             (r.reason or "")[:60]] for r in df.itertuples()]
    print(format_table(["started (UTC)", "run", "model", "framework", "batch", "threads",
                        "size", "status", "validity", "p50 ms", "p99 ms", "samples/s",
                        "peak MiB", "reason"], rows))
    return 0


def cmd_batch_search(args) -> int:
    from engine.batch_search import stored_batch_search
    from engine.report import format_table
    from engine.runner import Runner
    from store.db import resolve_db_path

    if not 0 <= args.margin <= 1:
        raise UserError(f"margin: {args.margin} is out of range; allowed: number 0..1",
                        field="margin")
    base = RunSpec(args.model, args.framework, args.start, args.threads,
                   image_size=args.image_size, precision=args.precision, runtime=args.runtime,
                   policy=MeasurementPolicy(min_time_s=args.min_time, min_iters=args.min_iters,
                                            warmup_iters=3)).validate()
    db = resolve_db_path(args.db)

    def started(sweep_id):
        print(f"batch search {sweep_id}: {base.model} {base.framework} ({base.runtime}), "
              f"{base.intra_threads} threads, from batch {args.start}")

    def stored(rec):
        figure = (f"{rec.throughput:,.1f} samples/s, p99 {rec.p99_ms:.2f} ms"
                  if rec.throughput else rec.reason[:120])
        print(f"probe batch {rec.batch_size:>5}: {rec.status:7} {figure}", flush=True)

    runner = Runner(timeout_s=args.timeout, memory_cap_bytes=memory_cap(args))
    sweep_id, res = stored_batch_search(
        base, db=db, runner=runner, command=" ".join(["python -m engine", *args.argv]),
        on_start=started, on_stored=stored, start=args.start, max_batch=args.max_batch,
        margin=args.margin, p99_bound_ms=args.p99_ms)
    rows = [[str(r.batch_size), r.status, f"{r.throughput:,.1f}" if r.throughput else "",
             f"{r.median_ms:.2f}" if r.median_ms else "", f"{r.p99_ms:.2f}" if r.p99_ms else "",
             "*" if r.batch_size == res.best_batch else ""] for r in res.probes]
    print()
    print(format_table(["batch", "status", "samples/s", "p50 ms", "p99 ms", "best"], rows))
    print(f"\nstopped: {res.stop_reason}")
    if res.best_batch:
        print(f"throughput-optimal batch: {res.best_batch} ({res.best_throughput:,.1f} samples/s)")
    if args.p99_ms is not None:
        print(f"largest batch with p99 <= {args.p99_ms:g} ms: {res.p99_batch or 'none probed'}")
    print(f"probes stored in {db} as sweep {sweep_id} (see Compare: throughput vs batch)")
    return 0


def cmd_runtimes(args) -> int:
    from engine.catalog import REFERENCE_RUNTIME, RUNTIMES
    from engine.report import format_table
    from engine.spec import BF16_RUNTIMES, CPU_ONLY_RUNTIMES, DEVICES

    rows = []
    for fw, runtimes in RUNTIMES.items():
        if fw == "selftest":
            continue
        for rt, what in runtimes.items():
            devices = ("cpu" if fw == "tensorflow" or (fw, rt) in CPU_ONLY_RUNTIMES
                       else ", ".join(DEVICES))
            rows.append([fw, rt + (" (default)" if FRAMEWORKS[fw] == rt else ""),
                         "fp32, bf16" if (fw, rt) in BF16_RUNTIMES else "fp32", devices,
                         "reference" if REFERENCE_RUNTIME[fw] == rt
                         else f"checked against {REFERENCE_RUNTIME[fw]}", what])
    print(format_table(["framework", "runtime", "precision", "device", "output", "what"], rows))
    print("\nEvery non-reference runtime's output is compared with its reference on the same "
          "input before timing; beyond 0.1 % of the output's magnitude the run is invalid. "
          "bf16 runs are compared with fp32 eager by direction: cosine similarity >= 0.98.")
    return 0


def cmd_sweeps(args) -> int:
    from engine.report import format_table
    from store.db import open_db
    from store.runs import list_sweeps

    with open_db(args.db) as con:
        df = list_sweeps(con)
    if df.empty:
        print("no sweeps stored yet: `python -m engine run ...` makes one")
        return 0
    print(format_table(["created (UTC)", "sweep", "rounds", "configs", "runs", "ok", "seed"],
                       [[str(r.created_at)[:19], r.sweep_id, str(r.rounds),
                         str(r.configurations), str(r.runs), str(r.ok), str(r.seed)]
                        for r in df.itertuples()]))
    return 0


def cmd_compare(args) -> int:
    from engine.compare import aggregate
    from engine.report import compare_table
    from store.db import open_db
    from store.runs import list_sweeps, sweep_rounds

    with open_db(args.db) as con:
        sweeps = list_sweeps(con, kind=None if args.sweep else "inference")
        ids = sweeps.sweep_id.tolist()
        match = [i for i in ids if i.startswith(args.sweep or "")]
        if not ids:
            raise UserError("sweep: none stored yet; run `python -m engine run ...` first",
                            field="sweep")
        if args.sweep and len(match) != 1:
            raise UserError(f"sweep: {args.sweep!r} matches {len(match)} sweeps; allowed: a "
                            "unique id prefix (see `python -m engine sweeps`)", field="sweep")
        sweep_id = match[0]
        kind = sweeps.set_index("sweep_id").kind.get(sweep_id)
        if kind not in (None, "inference"):
            raise UserError(f"sweep: {sweep_id[:8]} holds {kind} runs, which this comparison "
                            "does not cover; allowed: an inference sweep (see `python -m "
                            f"engine runs --sweep {sweep_id}` or the dashboard's "
                            f"{'Training' if kind == 'train' else 'Data loading'} page)",
                            field="sweep")
        rows = sweep_rounds(con, sweep_id)
    print(f"sweep {sweep_id}: {len(rows)} runs")
    print(compare_table(aggregate(rows), color=sys.stdout.isatty()))
    return 0


def cmd_prices(args) -> int:
    from engine.cost import validate_catalog
    from engine.price_import import parse_price_file
    from engine.report import format_table
    from store.db import open_db
    from store.prices import effective_catalog, save_price_updates

    if args.prices_command == "import":
        kind, rates, machines = parse_price_file(args.file, as_of=args.as_of)
        with open_db(args.db) as con:
            # Validate the catalog as it would be, before anything is written.
            from engine.cost import load_catalog, load_unit_rates
            from store.prices import price_updates
            old_rates, old_machines = price_updates(con)
            new_rates = load_unit_rates(overrides=old_rates + rates)
            problems = validate_catalog(
                load_catalog(rates=new_rates, overrides=old_machines + machines), new_rates)
            if problems:
                raise UserError(f"file: {args.file} would make the catalog invalid: "
                                f"{problems[0]}; the catalog is unchanged", field="file")
            n = save_price_updates(con, rates, machines)
        print(f"imported {n} price updates from {args.file} ({kind}: {len(rates)} unit "
              f"rates, {len(machines)} machines)")
        return 0
    with open_db(args.db) as con:
        catalog, rates = effective_catalog(con)
    if args.prices_command == "check":
        problems = validate_catalog(catalog, rates)
        for p in problems:
            print(f"problem: {p}")
        print(f"{len(catalog)} machines, {len(rates)} unit rates: "
              f"{'ok' if not problems else f'{len(problems)} problems'}")
        return 1 if problems else 0
    rows = [[m.provider, m.shape[:48], str(m.vcpus), f"{m.memory_gb:g}",
             f"{m.usd_per_hour:.4f}", m.as_of, "yes" if m.secondary else ""]
            for m in catalog if not args.provider or m.provider == args.provider]
    print(format_table(["provider", "shape", "vCPUs", "GB", "USD/hour", "as of",
                        "secondary"], rows))
    return 0


def cmd_export(args) -> int:
    from store.db import open_db
    from store.interop import export_runs

    ext = {"parquet": "parquet", "csv": "csv", "json": "json"}[args.format]
    out = Path(args.out) if args.out else Path("data") / (
        f"export-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}.{ext}")
    with open_db(args.db) as con:
        n = export_runs(con, out, args.format, sweep_id=args.sweep)
    print(f"exported {n} runs to {out}")
    return 0


def cmd_import(args) -> int:
    from store.db import open_db
    from store.interop import import_file

    with open_db(args.db) as con:
        imported, skipped, kind = import_file(con, args.file)
    print(f"imported {imported} runs from {args.file} ({kind}); "
          f"{skipped} already present were skipped")
    return 0
