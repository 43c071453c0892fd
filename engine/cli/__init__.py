"""Command line: `python -m engine COMMAND`. One module per command family, sharing the
argument helpers of engine/cli/args.py:

- engine/cli/inference.py: run, batch-search, runtimes, models
- engine/cli/workloads.py: train, dataload
- engine/cli/generation.py: generate, generations (text generation, issue 37)
- engine/cli/serving.py: serve (MLPerf LoadGen scenarios)
- engine/cli/genserve.py: genserve (serving a language model, issue 38)
- engine/cli/tune.py: tune (the serving configuration under a p99 bound)
- engine/cli/results.py: runs, sweeps, compare, export, import
- engine/cli/prices.py: prices list|check|import
- engine/cli/report.py: report (one sweep as offline HTML or Markdown)
- engine/cli/history.py: history, and compare's regression check (--baseline/--candidate)
- engine/cli/calibrate.py: calibrate (the machine's GEMM and bandwidth ceilings)
- engine/cli/watch.py: watch (a saved sweep run again, its group's states, alerts)

Three layers, as asv has them: argparse here, the work in engine/ and store/ functions,
and tests that call those functions (or this main()) directly.
"""

from __future__ import annotations

import argparse
import sys

from engine.cli import (calibrate, generation, genserve, history, inference, prices, report,
                        results, serving, tune, watch, workloads)
from engine.core.errors import UserError

__all__ = ["main", "build_parser", "GUIDES"]

_FAMILIES = (inference, results, prices, workloads, serving, tune, report, history,
             calibrate, generation, genserve, watch)
COMMANDS = {name: cmd for family in _FAMILIES for name, cmd in family.COMMANDS.items()}
# Where each command is explained (its --help ends with it): one hop from the command to
# its guide. docs/CLI.md lists every command and flag and where each flag is explained.
GUIDES = {"run": "docs/CLI.md", "models": "docs/CLI.md", "runtimes": "docs/RUNTIMES.md",
          "batch-search": "docs/RUNTIMES.md", "runs": "docs/CLI.md", "sweeps": "docs/CLI.md",
          "compare": "docs/CLI.md", "export": "docs/CLI.md", "import": "docs/CLI.md",
          "prices": "docs/COST.md", "train": "docs/pages/training.md",
          "dataload": "docs/pages/dataload.md", "serve": "docs/SERVING.md",
          "tune": "docs/SERVING.md", "report": "docs/CLI.md", "history": "docs/CLI.md",
          "calibrate": "docs/CEILINGS.md",
          "generate": "docs/CLI.md", "generations": "docs/CLI.md",
          "genserve": "docs/SERVING.md",
          "genserve-search": "docs/SERVING.md", "genserve-users": "docs/SERVING.md",
          "genserve-tune": "docs/SERVING.md", "watch": "docs/CLI.md"}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m engine",
                                 description="Benchmark deep-learning inference, training "
                                             "and data loading; store results in DuckDB; "
                                             "compare frameworks.",
                                 epilog="Every command and flag: docs/CLI.md; start with "
                                        "README.md.")
    sub = ap.add_subparsers(dest="command", required=True)
    for family in _FAMILIES:
        family.add_parsers(sub)
    for name, parser in sub.choices.items():
        parser.epilog = f"Guide: {GUIDES[name]}" + (
            "" if GUIDES[name] == "docs/CLI.md" else " (every flag: docs/CLI.md)")
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
