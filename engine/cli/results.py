"""Commands that read the store: `runs`, `sweeps`, `compare`, `export`, `import`."""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path

from engine.cli.args import db_arg, int_arg
from engine.cli.generation import COMPARES as GENERATION_COMPARES
from engine.cli.history import cmd_regress, regression_options
from engine.core.record import STATUSES
from engine.scenarios import INFERENCE

__all__ = ["add_parsers", "COMMANDS"]


def add_parsers(sub) -> None:
    ls = sub.add_parser("runs", help="list stored runs, newest first")
    ls.add_argument("--limit", type=int_arg("limit", 1), default=30)
    ls.add_argument("--sweep", metavar="ID")
    ls.add_argument("--status", choices=STATUSES)
    db_arg(ls)

    sw = sub.add_parser("sweeps", help="list stored sweeps, newest first")
    db_arg(sw)

    cp = sub.add_parser("compare", help="the round-aggregated comparison of a stored sweep "
                        "(a generation sweep: its figures and contests per metric); with "
                        "--baseline and --candidate, a regression check of one result set "
                        "against another")
    cp.add_argument("sweep", metavar="SWEEP_ID", help="a sweep id (or a unique prefix); "
                    "default: the newest sweep", nargs="?")
    cp.add_argument("--raw", action="store_true",
                    help="also list each configuration's own round medians (the table shows "
                         "drift-adjusted figures where a row's contenders ran different rounds)")
    regression_options(cp)
    db_arg(cp)

    ex = sub.add_parser("export", help="write runs with raw samples to parquet, csv or json; "
                        "inference runs as PerfZero summaries or pytorch-benchmark YAML")
    ex.add_argument("--format", required=True,
                    choices=["parquet", "csv", "json", "perfzero", "pytorch-benchmark"],
                    help="perfzero: one summary JSON per run, failed ones included; "
                         "pytorch-benchmark: one YAML per configuration and its batch sizes")
    ex.add_argument("--out", metavar="PATH", help="output file, a directory for perfzero and "
                    "pytorch-benchmark (default: ./data/export-<time>[.<ext>])")
    ex.add_argument("--sweep", metavar="ID", help="only this sweep")
    db_arg(ex)

    im = sub.add_parser("import", help="read our export back, or PerfZero summary JSON")
    im.add_argument("file", metavar="FILE")
    db_arg(im)


def cmd_runs(args) -> int:
    from engine.present.tables import format_table, p99_text
    from engine.present.values import missing
    from store.db import open_db
    from store.runs import list_runs

    with open_db(args.db) as con:
        df = list_runs(con, limit=args.limit, sweep_id=args.sweep, status=args.status)
    if df.empty:
        print("no runs stored yet: try `python -m engine run --model mobilenet_v3_small "
              "--framework torch tensorflow --batch 1`")
        return 0

    def f(v, fmt, scale=1):
        return "" if missing(v) else format(v / scale, fmt)
    rows = [[str(r.started_at)[:19], r.run_id[:8], r.model, r.framework, f(r.batch_size, ".0f"),
             f(r.intra_threads, ".0f"), f(r.image_size, ".0f"), r.status,
             r.validity or "", f(r.median_ms, ".3f"), p99_text(r.p99_ms, r.iterations),
             f(r.throughput, ",.1f"), _tokens_s(r), f(r.peak_rss_bytes, ",.0f", 2**20),
             f(r.model_peak_bytes, ",.1f", 2**20), (r.reason or "")[:60]]
            for r in df.itertuples()]
    # the process's peak, and what the model added over that process before it (issue 26)
    print(format_table(["started (UTC)", "run", "model", "framework", "batch", "threads",
                        "size", "status", "validity", "p50 ms", "p99 ms", "samples/s",
                        "tokens/s",
                        "process peak MiB", "model MiB", "reason"], rows))
    return 0


def _tokens_s(r) -> str:
    """A token model's tokens/s (samples/s x its sequence length, the size column); ""
    for an image model."""
    from engine.core.catalog import tokens_per_s
    from engine.present.values import missing

    tps = tokens_per_s(r.model, None if missing(r.image_size) else r.image_size,
                       None if missing(r.throughput) else r.throughput)
    return "" if tps is None else f"{tps:,.0f}"


def cmd_sweeps(args) -> int:
    from engine.present.tables import format_table
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
    if args.baseline or args.candidate:  # engine/cli/history.py: the regression check
        return cmd_regress(args)
    from store.db import open_db
    from store.sweep_ref import resolve_sweep

    with open_db(args.db) as con:
        sweep_id, scenario = resolve_sweep(con, args.sweep, tuple(COMPARES))
    COMPARES[scenario](args, sweep_id)
    return 0


def _compare_inference(args, sweep_id: str) -> None:
    from engine.present.tables import compare_table
    from store.db import open_db
    from store.verdicts import sweep_verdicts

    with open_db(args.db) as con:
        verdict = sweep_verdicts(con, sweep_id)
    print(f"sweep {verdict.sweep_id}: {verdict.runs} runs")
    print(compare_table(verdict, color=sys.stdout.isatty(), raw=args.raw))


# How `compare` prints a stored sweep of each kind it covers: inference's table here, other
# kinds' by their own command family (a generation sweep's figures and per-metric contests)
COMPARES = {INFERENCE: _compare_inference, **GENERATION_COMPARES}


def cmd_export(args) -> int:
    from store.db import open_db
    from store.ingest import export_runs
    from store.export import DIR_FORMATS, export_dir

    stamp = f"export-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}"
    if args.format in DIR_FORMATS:
        out = Path(args.out) if args.out else Path("data") / f"{stamp}-{args.format}"
        with open_db(args.db) as con:
            done = export_dir(con, out, args.format, sweep_id=args.sweep)
        note = f"; {done.left_out} left out ({done.left_out_why})" if done.left_out else ""
        print(f"exported {done.runs} runs to {len(done.files)} {args.format} files in "
              f"{out}{note}")
        return 0
    out = Path(args.out) if args.out else Path("data") / f"{stamp}.{args.format}"
    with open_db(args.db) as con:
        n = export_runs(con, out, args.format, sweep_id=args.sweep)
    print(f"exported {n} runs to {out}")
    return 0


def cmd_import(args) -> int:
    from store.db import open_db
    from store.ingest import import_file

    with open_db(args.db) as con:
        imported, skipped, kind = import_file(con, args.file)
    print(f"imported {imported} runs from {args.file} ({kind}); "
          f"{skipped} already present were skipped")
    return 0

COMMANDS = {"runs": cmd_runs, "sweeps": cmd_sweeps, "compare": cmd_compare,
            "export": cmd_export, "import": cmd_import}
