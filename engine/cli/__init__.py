"""Command line: `python -m engine COMMAND`. One module per command family, sharing the
argument helpers of engine/cli/args.py:

- engine/cli/inference.py: run, batch-search, runtimes, models
- engine/cli/workloads.py: train, dataload
- engine/cli/serving.py: serve (MLPerf LoadGen scenarios)
- engine/cli/tune.py: tune (the serving configuration under a p99 bound)
- engine/cli/results.py: runs, sweeps, compare, export, import
- engine/cli/prices.py: prices list|check|import
- engine/cli/report.py: report (one sweep as offline HTML or Markdown)
- engine/cli/history.py: history, and compare's regression check (--baseline/--candidate)
- engine/cli/calibrate.py: calibrate (the machine's GEMM and bandwidth ceilings)

Three layers, as asv has them: argparse here, the work in engine/ and store/ functions,
and tests that call those functions (or this main()) directly.
"""

from __future__ import annotations

import argparse
import sys

from engine.cli import (calibrate, history, inference, prices, report, results, serving,
                        tune, workloads)
from engine.core.errors import UserError

__all__ = ["main", "build_parser"]

_FAMILIES = (inference, results, prices, workloads, serving, tune, report, history,
             calibrate)
COMMANDS = {name: cmd for family in _FAMILIES for name, cmd in family.COMMANDS.items()}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m engine",
                                 description="Benchmark deep-learning inference, training "
                                             "and data loading; store results in DuckDB; "
                                             "compare frameworks.")
    sub = ap.add_subparsers(dest="command", required=True)
    for family in _FAMILIES:
        family.add_parsers(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # What the sweep records as its command: the arguments this call received.
    args.argv = list(argv) if argv is not None else sys.argv[1:]
    try:
        return COMMANDS[args.command](args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: every run that finished is stored", file=sys.stderr)
        return 130
