"""Command line for the workloads beyond inference: `python -m engine train|dataload`.

Both go through the same sweep driver as `run` (engine/sweep.py), so their rows, rounds
and failures are stored exactly like inference runs.
"""

from __future__ import annotations

import random
import sys

from engine.catalog import CATALOG
from engine.errors import UserError
from engine.spec import (BATCH_RANGE, DATASETS, MeasurementPolicy, PROFILE_RANGE,
                         TRAIN_BATCH_RANGE, TRAIN_RUNTIMES, expand_load, expand_train,
                         logical_cores)

__all__ = ["add_parsers", "cmd_train", "cmd_dataload", "run_with_progress", "memory_cap"]


def add_parsers(sub, *, db_arg, int_arg, float_arg) -> None:
    t = sub.add_parser("train", help="train models with SGD, every step timed; per-epoch "
                                     "time, samples/s, loss and accuracy stored")
    t.add_argument("--model", nargs="+", required=True, metavar="NAME",
                   help=f"catalog names: {', '.join(CATALOG)}")
    t.add_argument("--framework", nargs="+", default=list(TRAIN_RUNTIMES), metavar="FW",
                   help="torch, tensorflow (default: both)")
    t.add_argument("--runtime", nargs="+", default=None, metavar="RT",
                   help="; ".join(f"{f}: {', '.join(r)}" for f, r in TRAIN_RUNTIMES.items())
                   + " (default: the first of each; libtorch = the same model scripted "
                     "and trained by the LibTorch C++ trainer)")
    t.add_argument("--batch", nargs="+", type=int_arg("batch_size", *TRAIN_BATCH_RANGE),
                   default=[32], metavar="N", help="batch sizes (default 32)")
    t.add_argument("--threads", nargs="+", type=int_arg("threads", 1), default=[1],
                   metavar="N", help=f"intra-op threads, 1..{logical_cores()} here")
    t.add_argument("--inter-threads", type=int_arg("inter_threads", 1), default=1)
    t.add_argument("--epochs", type=int_arg("epochs", 1, 1000), default=1)
    t.add_argument("--steps", type=int_arg("steps_per_epoch", 1), default=None,
                   help="at most this many steps per epoch (default: a full pass)")
    t.add_argument("--dataset", default="digits",
                   help="; ".join(f"{k}: {v}" for k, v in DATASETS.items()))
    t.add_argument("--image-size", type=int_arg("image_size", 32, 1024), default=None,
                   help="synthetic only (digits are 32 px)")
    t.add_argument("--synthetic-samples", type=int_arg("synthetic_samples", 16),
                   default=2048)
    t.add_argument("--lr", type=float_arg("lr"), default=0.01,
                   help="SGD learning rate (default 0.01)")
    t.add_argument("--momentum", type=float_arg("momentum"), default=0.9,
                   help="SGD momentum (default 0.9)")
    t.add_argument("--warmup-steps", type=int_arg("warmup_steps", 0, 100), default=5,
                   help="first steps kept apart from the statistics (default 5)")
    t.add_argument("--seed", type=int_arg("seed", 0), default=0,
                   help="data split, shuffling and weight initialisation (default 0)")
    t.add_argument("--profile", type=int_arg("profile_steps", *PROFILE_RANGE), default=0,
                   metavar="STEPS", help="after training, profile this many more steps in a "
                                         "separate pass (torch.profiler / TF profiler)")
    _common(t, db_arg, int_arg, float_arg, timeout=3600.0)

    d = sub.add_parser("dataload", help="read, decode and normalise generated images; "
                                        "batches/s per implementation")
    from engine.dataload import DECODERS, FORMATS, NORMALIZERS, PIPELINES
    d.add_argument("--format", nargs="+", default=["png"], metavar="FMT",
                   help="; ".join(f"{k}: {v}" for k, v in FORMATS.items()))
    d.add_argument("--decoder", nargs="+", default=["pillow", "opencv"], metavar="DEC",
                   help=", ".join(DECODERS))
    d.add_argument("--normalize", nargs="+", default=["numpy", "torch"], metavar="LIB",
                   help=", ".join(NORMALIZERS))
    d.add_argument("--pipeline", nargs="+", default=["loop"], metavar="PIPE",
                   help="; ".join(f"{k}: {v}" for k, v in PIPELINES.items()))
    d.add_argument("--batch", nargs="+", type=int_arg("batch_size", *BATCH_RANGE),
                   default=[16], metavar="N")
    d.add_argument("--workers", nargs="+", type=int_arg("workers", 0, 64), default=[0],
                   metavar="N", help="parallel workers of torch_dataloader / tf_data "
                                     "(the loop runs at 0 only)")
    d.add_argument("--threads", nargs="+", type=int_arg("threads", 1), default=[1],
                   metavar="N", help="intra-op threads of torch / TF / OpenCV")
    d.add_argument("--count", type=int_arg("count", 8, 100_000), default=256,
                   help="images in the generated set (default 256)")
    d.add_argument("--size", type=int_arg("image_size", 16, 4096), default=256,
                   help="image height and width in px (default 256)")
    d.add_argument("--seed", type=int_arg("seed", 0), default=0)
    p = MeasurementPolicy()
    d.add_argument("--min-time", type=float_arg("min_time_s"), default=p.min_time_s)
    d.add_argument("--min-iters", type=int_arg("min_iters", 1), default=p.min_iters)
    d.add_argument("--max-time", type=float_arg("max_time_s"), default=p.max_time_s)
    _common(d, db_arg, int_arg, float_arg, timeout=600.0)


def _common(p, db_arg, int_arg, float_arg, *, timeout: float) -> None:
    p.add_argument("--rounds", type=int_arg("rounds", 1, 100), default=1,
                   help="rounds of the whole sweep, in alternating order (default 1)")
    p.add_argument("--timeout", type=float_arg("timeout"), default=timeout,
                   help=f"wall-time limit per run in seconds (default {timeout:g})")
    p.add_argument("--memory-cap-mb", type=int_arg("memory_cap_mb", 64), default=None,
                   help="address space one run may add (default: 75%% of RAM)")
    db_arg(p)


def memory_cap(args) -> int:
    """--memory-cap-mb, else 75 % of this machine's memory."""
    import psutil
    return (args.memory_cap_mb * 2**20 if args.memory_cap_mb
            else int(psutil.virtual_memory().total * 0.75))


def run_with_progress(specs, args, *, describe_event, describe_record, unit: str,
                      total_units: int, units_of=lambda ev: None, seed: int | None = None,
                      process_per_run: bool = False):
    """Run a sweep with a progress bar, a line per round and one printed line per stored
    run: the one terminal driver of `run`, `train` and `dataload`. The bar counts `unit`s
    (runs, or training steps when units_of tells them from progress events)."""
    from tqdm import tqdm

    from engine.rounds import order_name
    from engine.runner import Runner
    from engine.sweep import run_sweep
    from store.db import resolve_db_path

    db = resolve_db_path(args.db)
    seed = seed if seed is not None else random.randrange(2**31)
    state = {"bar": None, "run_units": 0}

    def on_start(sweep_id):
        print(f"sweep {sweep_id}: {len(specs)} configurations x {args.rounds} rounds = "
              f"{len(specs) * args.rounds} runs (seed {seed}) -> {db}", flush=True)
        state["bar"] = tqdm(total=total_units * args.rounds, unit=unit, file=sys.stderr,
                            dynamic_ncols=True)

    def on_round(r):
        state["bar"].write(f"round {r}/{args.rounds}: {order_name(r)} order", file=sys.stdout)

    def on_event(ev, r):
        spec, bar = ev.get("spec"), state["bar"]
        if spec is None or ev["event"] not in ("started", "progress"):
            return
        n = units_of(ev)
        if n is not None and n > state["run_units"]:
            bar.update(n - state["run_units"])
            state["run_units"] = n
        bar.set_postfix_str(f"round {r}/{args.rounds} {describe_event(spec, ev)}",
                            refresh=True)

    def on_stored(rec):
        bar = state["bar"]
        if unit == "run":
            bar.update(1)
        state["run_units"] = 0
        bar.write(f"stored {rec.run_id} round {rec.round_no} {describe_record(rec)}",
                  file=sys.stdout)
        sys.stdout.flush()

    runner = Runner(timeout_s=args.timeout, memory_cap_bytes=memory_cap(args),
                    process_per_run=process_per_run)
    try:
        return run_sweep(specs, db=db, rounds=args.rounds, seed=seed, runner=runner,
                         command=" ".join(["python -m engine", *args.argv]),
                         on_start=on_start, on_round=on_round, on_stored=on_stored,
                         on_event=on_event), db
    finally:
        if state["bar"] is not None:
            state["bar"].close()


def cmd_train(args) -> int:
    from engine.report import train_table

    specs = expand_train(args.model, args.framework, args.batch, args.threads,
                         runtimes=args.runtime, inter_threads=args.inter_threads, epochs=args.epochs,
                         steps_per_epoch=args.steps, dataset=args.dataset,
                         image_size=args.image_size, synthetic_samples=args.synthetic_samples,
                         lr=args.lr, momentum=args.momentum, warmup_steps=args.warmup_steps,
                         seed=args.seed, profile_steps=args.profile)
    steps = sum(s.steps_in_epoch() * s.epochs for s in specs)

    def describe_event(spec, ev):
        return (f"{spec.model} {spec.framework} ({spec.runtime}) b{spec.batch_size} "
                f"t{spec.intra_threads}: {ev.get('phase', 'start')}")

    def describe_record(rec):
        if rec.status in ("ok", "invalid") and rec.epochs:
            last = rec.epochs[-1]
            figure = (f"{rec.throughput:,.1f} samples/s, step p50 {rec.median_ms:.1f} ms, "
                      f"test acc {last['test_acc']:.1%}")
        else:
            figure = rec.reason[:160]
        return (f"{rec.model} {rec.framework} ({rec.runtime}) b{rec.batch_size} "
                f"t{rec.intra_threads}: {rec.status} - {figure}")

    print(f"training {len(specs)} configurations on {specs[0].dataset}: "
          f"{specs[0].epochs} epochs of {specs[0].steps_in_epoch()} steps")
    records, db = run_with_progress(
        specs, args, describe_event=describe_event, describe_record=describe_record,
        unit="step", total_units=steps,
        units_of=lambda ev: ev.get("iters") if ev["event"] == "progress" else None)
    print()
    print(train_table(records))
    failed = sum(r.status != "ok" for r in records)
    print(f"\n{len(records)} training runs stored in {db}; {failed} not ok")
    return 0


def cmd_dataload(args) -> int:
    from engine.report import load_table

    policy = MeasurementPolicy(min_time_s=args.min_time, min_iters=args.min_iters,
                               max_time_s=args.max_time)
    specs, skipped = expand_load(args.format, args.decoder, args.normalize, args.pipeline,
                                 args.batch, args.workers, args.threads, count=args.count,
                                 image_size=args.size, seed=args.seed, policy=policy)
    by_reason: dict[str, list[str]] = {}
    for line in skipped:
        what, why = line.split(": ", 1)
        by_reason.setdefault(why, []).append(what)
    for why, whats in by_reason.items():
        print(f"skipped {len(whats)}: {why} ({', '.join(whats[:4])}"
              f"{', ...' if len(whats) > 4 else ''})")

    def describe_event(spec, ev):
        return (f"{spec.fmt} {spec.runtime} b{spec.batch_size} w{spec.workers} "
                f"t{spec.intra_threads}: {ev.get('phase', 'start')}")

    def describe_record(rec):
        figure = (f"p50 {rec.median_ms:.2f} ms/batch, {rec.throughput:,.0f} images/s, "
                  f"{rec.validity}" if rec.median_ms is not None else rec.reason[:160])
        return (f"{rec.model} {rec.runtime} b{rec.batch_size} w{rec.workers} "
                f"t{rec.intra_threads}: {rec.status} - {figure}")

    records, db = run_with_progress(specs, args, describe_event=describe_event,
                                    describe_record=describe_record, unit="run",
                                    total_units=len(specs))
    print()
    print(load_table(records))
    failed = sum(r.status != "ok" for r in records)
    print(f"\n{len(records)} data-loading runs stored in {db}; {failed} not ok")
    if not records:
        raise UserError("dataload: nothing ran", field="decoder")
    return 0
