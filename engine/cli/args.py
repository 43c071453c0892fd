"""Argument helpers every command family shares: typed, range-checked values (the ranges
come from engine.spec.limits), the database option and the options of a stored sweep."""

from __future__ import annotations

import argparse

from engine.spec.limits import MEMORY_CAP_MB_MIN, ROUNDS_RANGE

__all__ = ["db_arg", "int_arg", "float_arg", "sweep_options", "memory_cap_option",
           "memory_cap"]


def db_arg(p) -> None:
    p.add_argument("--db", metavar="PATH",
                   help="DuckDB file (default: $BENCH_DB, else ./data/bench.duckdb)")


def int_arg(name, lo, hi=None):
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


def float_arg(name):
    def parse(text):
        try:
            return float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name}: {text!r} is not a number")
    return parse


def sweep_options(p, *, timeout: float, rounds: int, rounds_help: str) -> None:
    """--rounds, --timeout and --memory-cap-mb, and --db: what every stored sweep takes."""
    p.add_argument("--rounds", type=int_arg("rounds", *ROUNDS_RANGE), default=rounds,
                   help=rounds_help)
    p.add_argument("--timeout", type=float_arg("timeout"), default=timeout,
                   help=f"wall-time limit per run in seconds, load included (default "
                        f"{timeout:g})")
    memory_cap_option(p)
    db_arg(p)


def memory_cap_option(p) -> None:
    p.add_argument("--memory-cap-mb", type=int_arg("memory_cap_mb", MEMORY_CAP_MB_MIN),
                   default=None,
                   help="address space one run may add to its worker (default: 75%% of RAM)")


def memory_cap(args) -> int:
    """--memory-cap-mb, else 75 % of this machine's memory."""
    import psutil
    return (args.memory_cap_mb * 2**20 if args.memory_cap_mb
            else int(psutil.virtual_memory().total * 0.75))
