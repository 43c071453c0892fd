"""`report`: a stored inference sweep as one file a stakeholder opens without a server
(self-contained HTML) or pastes into a pull request (Markdown)."""

from __future__ import annotations

from pathlib import Path

from engine.cli.args import db_arg
from engine.core.errors import UserError

__all__ = ["add_parsers", "COMMANDS"]


def add_parsers(sub) -> None:
    rp = sub.add_parser("report", help="write a stored inference (or, named by id, "
                                       "generation) sweep as one offline HTML file (charts "
                                       "inlined) or as Markdown")
    rp.add_argument("sweep", metavar="SWEEP_ID", nargs="?",
                    help="a sweep id (or a unique prefix); default: the newest inference "
                         "sweep")
    rp.add_argument("--out", metavar="PATH",
                    help="output file (default: ./report-<sweep>.html or .md)")
    # Checked by the report, not by argparse choices: a bad value is a UserError naming
    # the field and the allowed values, like every other refusal.
    rp.add_argument("--format", metavar="FORMAT", default=None,
                    help="html or md (default: md when --out ends in .md, else html)")
    rp.add_argument("--group", metavar="NAME", default=None,
                    help="also the board of this group's benchmark states: every "
                         "configuration's state, worst first, with the policy (see `watch`)")
    db_arg(rp)


def _format(fmt: str | None, out: str | None) -> str:
    from engine.present.report import check_format

    if fmt is None:
        fmt = "md" if out and Path(out).suffix.lower() in (".md", ".markdown") else "html"
    return check_format(fmt)


def _out_path(out: str | None) -> Path | None:
    """--out as a writable file path (None: the default, named after the sweep)."""
    if out is None:
        return None
    path = Path(out)
    if path.is_dir():
        raise UserError(f"out: {out} is a folder; allowed: a file path in an existing "
                        "folder, e.g. report.html", field="out")
    if not path.parent.is_dir():
        raise UserError(f"out: folder {path.parent} does not exist; allowed: a file path "
                        "in an existing folder (create it first)", field="out")
    return path


def cmd_report(args) -> int:
    from engine.present.generation_report import build_generation_report
    from engine.present.report import REPORT_FORMATS, build_report
    from store.db import open_db
    from store.generation_views import generation_sweep_ref
    from store.sweep_ref import resolve_inference_sweep

    fmt = _format(args.format, args.out)
    out = _out_path(args.out)  # refused before the database is opened
    with open_db(args.db) as con:
        # a generation sweep named by id (or prefix) gets its own report (issue 37)
        generation = generation_sweep_ref(con, args.sweep)
        sweep_id = generation or resolve_inference_sweep(con, args.sweep)
        if generation and args.group:
            raise UserError("group: a generation sweep's report has no board; allowed: "
                            "--group with an inference sweep", field="group")
        doc = build_generation_report(con, sweep_id, fmt) if generation else build_report(
            con, sweep_id, fmt, group=args.group)
    out = out or Path(f"report-{sweep_id[:8]}{REPORT_FORMATS[fmt][1]}")
    out.write_bytes(doc)
    print(f"wrote {out} ({len(doc):,} bytes, {fmt}) for sweep {sweep_id}")
    return 0


COMMANDS = {"report": cmd_report}
