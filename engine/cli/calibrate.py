"""`python -m engine calibrate`: this machine's measured ceilings (GEMM fp32 and bf16
GFLOP/s, triad GB/s) per thread count, stored for Results, Compare, System and the report
to hold every run against (engine/run/jobs/calibrate.py)."""

from __future__ import annotations

from engine.cli.args import db_arg, int_arg
from engine.core.calibration import (DEFAULT_SIZES, REPEATS_RANGE, SIZE_RANGE, TRIAD_MIB_RANGE,
                                     CalibrationPlan)
from engine.core.limits import logical_cores

__all__ = ["add_parsers", "COMMANDS"]


def add_parsers(sub) -> None:
    c = sub.add_parser("calibrate", help="measure this machine's ceilings (GEMM GFLOP/s in "
                                         "fp32 and bf16, triad GB/s) per thread count")
    c.add_argument("--threads", nargs="+", type=int_arg("threads", 1), default=None,
                   metavar="N", help=f"thread counts, 1..{logical_cores()} here (default: 1 "
                                     "and all cores); each pinned as a run of that many is")
    c.add_argument("--sizes", nargs="+", type=int_arg("sizes", *SIZE_RANGE), metavar="N",
                   default=list(DEFAULT_SIZES),
                   help=f"square matmul sizes (default {' '.join(map(str, DEFAULT_SIZES))})")
    c.add_argument("--repeats", type=int_arg("repeats", *REPEATS_RANGE), default=5,
                   help="repeats per size, the best kept (default 5)")
    c.add_argument("--min-repeat-s", type=float, default=0.05,
                   help="each repeat's calls last at least this long (default 0.05 s)")
    c.add_argument("--triad-mib", type=int_arg("triad_mib", *TRIAD_MIB_RANGE), default=None,
                   help="each triad array's size (default: 4x the last-level cache)")
    c.add_argument("--list", action="store_true", help="only show the stored ceilings")
    db_arg(c)


def cmd_calibrate(args) -> int:
    from engine.present.roofline import ceiling_lines, ceiling_table
    from engine.run.jobs.calibrate import calibration_line, run_calibrations
    from store.calibrations import latest_calibrations
    from store.db import open_db

    failed = 0
    if not args.list:
        plan = CalibrationPlan(1, sizes=tuple(args.sizes), repeats=args.repeats,
                               min_repeat_s=args.min_repeat_s, triad_mib=args.triad_mib)
        # 1 and every core: the two ends of a sweep, without a calibration per count on a
        # large machine (each is about 20 s); --threads names others
        threads = args.threads or sorted({1, logical_cores()})

        def said(got):
            nonlocal failed
            if hasattr(got, "fp32_gflops"):
                print(f"calibrated {calibration_line(got)}", flush=True)
            else:
                failed += 1
                print(f"not ok: calibration failed: {got.reason}", flush=True)
        run_calibrations(threads, db=args.db, plan=plan, on_done=said)
    with open_db(args.db) as con:  # migrated: a database older than m013 gains the table
        latest = latest_calibrations(con)
    lines = ceiling_lines(ceiling_table(latest))
    print("\n".join(lines) if lines else "no calibration stored: python -m engine calibrate")
    return 1 if failed else 0


COMMANDS = {"calibrate": cmd_calibrate}
