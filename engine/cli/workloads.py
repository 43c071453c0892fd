"""Commands for the work beyond inference: `train` and `dataload`.

Both build the request the Run page builds (engine/run/jobs/requests.py) and go through the same
sweep driver as `run`, so their rows, rounds and failures are stored exactly like inference
runs.
"""

from __future__ import annotations

from engine.cli.args import float_arg, int_arg, memory_cap, sweep_options
from engine.cli.progress import run_and_summarize
from engine.present.tables import load_table, train_table
from engine.core.catalog import CATALOG
from engine.scenarios.dataload.spec import DECODERS, FORMATS, NORMALIZERS, PIPELINES
from engine.core.errors import UserError
from engine.core.limits import (BATCH_RANGE, EPOCH_RANGE, IMAGE_RANGE, LOAD_COUNT_RANGE,
                                LOAD_SIZE_RANGE, PROFILE_RANGE, SEED_RANGE, STEPS_RANGE,
                                SYNTHETIC_RANGE, TRAIN_BATCH_RANGE, WARMUP_STEPS_RANGE,
                                WORKERS_RANGE, logical_cores)
from engine.core.policy import MeasurementPolicy
from engine.present.outcome import runs_exit
from engine.scenarios.training.spec import DATASETS, TRAIN_RUNTIMES
from engine.run.jobs.requests import LoadRequest, TrainRequest

__all__ = ["add_parsers", "COMMANDS"]

ROUNDS_HELP = "rounds of the whole sweep, in alternating order (default 1)"


def add_parsers(sub) -> None:
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
    t.add_argument("--epochs", type=int_arg("epochs", *EPOCH_RANGE), default=1)
    t.add_argument("--steps", type=int_arg("steps_per_epoch", *STEPS_RANGE), default=None,
                   help="at most this many steps per epoch (default: a full pass)")
    t.add_argument("--dataset", default="digits",
                   help="; ".join(f"{k}: {v}" for k, v in DATASETS.items()))
    t.add_argument("--image-size", type=int_arg("image_size", *IMAGE_RANGE), default=None,
                   help="synthetic only (digits are 32 px)")
    t.add_argument("--synthetic-samples", type=int_arg("synthetic_samples", *SYNTHETIC_RANGE),
                   default=2048)
    t.add_argument("--lr", type=float_arg("lr"), default=0.01,
                   help="SGD learning rate (default 0.01)")
    t.add_argument("--momentum", type=float_arg("momentum"), default=0.9,
                   help="SGD momentum (default 0.9)")
    t.add_argument("--warmup-steps", type=int_arg("warmup_steps", *WARMUP_STEPS_RANGE),
                   default=5,
                   help="first steps kept apart from the statistics (default 5)")
    t.add_argument("--seed", type=int_arg("seed", *SEED_RANGE), default=0,
                   help="data split, shuffling and weight initialisation (default 0)")
    t.add_argument("--profile", type=int_arg("profile_steps", *PROFILE_RANGE), default=0,
                   metavar="STEPS", help="after training, profile this many more steps in a "
                                         "separate pass (torch.profiler / TF profiler)")
    sweep_options(t, timeout=3600.0, rounds=1, rounds_help=ROUNDS_HELP)

    d = sub.add_parser("dataload", help="read, decode and normalise generated images; "
                                        "batches/s per implementation")
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
    d.add_argument("--workers", nargs="+", type=int_arg("workers", *WORKERS_RANGE), default=[0],
                   metavar="N", help="parallel workers of torch_dataloader / tf_data "
                                     "(the loop runs at 0 only)")
    d.add_argument("--threads", nargs="+", type=int_arg("threads", 1), default=[1],
                   metavar="N", help="intra-op threads of torch / TF / OpenCV")
    d.add_argument("--count", type=int_arg("count", *LOAD_COUNT_RANGE), default=256,
                   help="images in the generated set (default 256)")
    d.add_argument("--size", type=int_arg("image_size", *LOAD_SIZE_RANGE), default=256,
                   help="image height and width in px (default 256)")
    d.add_argument("--seed", type=int_arg("seed", *SEED_RANGE), default=0)
    p = MeasurementPolicy()
    d.add_argument("--min-time", type=float_arg("min_time_s"), default=p.min_time_s)
    d.add_argument("--min-iters", type=int_arg("min_iters", 1), default=p.min_iters)
    d.add_argument("--max-time", type=float_arg("max_time_s"), default=p.max_time_s)
    sweep_options(d, timeout=600.0, rounds=1, rounds_help=ROUNDS_HELP)


def cmd_train(args) -> int:
    request = TrainRequest(
        models=tuple(args.model), frameworks=tuple(args.framework),
        batch_sizes=tuple(args.batch), threads=tuple(args.threads),
        runtimes=tuple(args.runtime or ()), inter_threads=args.inter_threads,
        epochs=args.epochs, steps_per_epoch=args.steps, dataset=args.dataset,
        image_size=args.image_size, synthetic_samples=args.synthetic_samples, lr=args.lr,
        momentum=args.momentum, warmup_steps=args.warmup_steps, data_seed=args.seed,
        profile_steps=args.profile, rounds=args.rounds, timeout_s=args.timeout,
        memory_cap_bytes=memory_cap(args))
    specs, _ = request.expand()
    print(f"training {len(specs)} configurations on {specs[0].dataset}: "
          f"{specs[0].epochs} epochs of {specs[0].steps_in_epoch()} steps")
    records = run_and_summarize(request, specs, args, table=train_table, noun="training runs")
    return runs_exit(r.status for r in records)


def cmd_dataload(args) -> int:
    policy = MeasurementPolicy(min_time_s=args.min_time, min_iters=args.min_iters,
                               max_time_s=args.max_time)
    request = LoadRequest(
        formats=tuple(args.format), decoders=tuple(args.decoder),
        normalizers=tuple(args.normalize), pipelines=tuple(args.pipeline),
        batch_sizes=tuple(args.batch), workers=tuple(args.workers),
        threads=tuple(args.threads), count=args.count, image_size=args.size,
        data_seed=args.seed, policy=policy, rounds=args.rounds, timeout_s=args.timeout,
        memory_cap_bytes=memory_cap(args))
    specs, skipped = request.expand()
    by_reason: dict[str, list[str]] = {}
    for line in skipped:
        what, why = line.split(": ", 1)
        by_reason.setdefault(why, []).append(what)
    for why, whats in by_reason.items():
        print(f"skipped {len(whats)}: {why} ({', '.join(whats[:4])}"
              f"{', ...' if len(whats) > 4 else ''})")

    records = run_and_summarize(request, specs, args, table=load_table,
                                noun="data-loading runs")
    if not records:
        raise UserError("dataload: nothing ran", field="decoder")
    return runs_exit(r.status for r in records)


COMMANDS = {"train": cmd_train, "dataload": cmd_dataload}
