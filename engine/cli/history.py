"""History and regressions: `history` (the stored result sets) and the regression check of
`compare --baseline A --candidate B` (the compare command itself is in results.py)."""

from __future__ import annotations

from engine.cli.args import db_arg, float_arg
from engine.core.errors import UserError
from engine.core.limits import FAIL_ABOVE_RANGE, THRESHOLD_RANGE, float_range

__all__ = ["add_parsers", "regression_options", "cmd_regress", "COMMANDS"]

SELECTORS = ("a sweep id or unique prefix (several, comma-separated: the same build on "
             "several days), commit:<prefix>, machine:<system_id prefix>, or "
             "<package>:<version> (torch:2.5.1, tensorflow:2.18)")


def add_parsers(sub) -> None:
    hs = sub.add_parser("history", help="stored inference result sets, newest first: date, "
                        "commit, framework versions, machine (what compare --baseline and "
                        "--candidate select)")
    db_arg(hs)


def regression_options(cp) -> None:
    """compare's options for a baseline set against a candidate set."""
    from engine.analysis.regress import DEFAULT_THRESHOLD

    cp.add_argument("--baseline", metavar="SET", help=f"the reference result set: {SELECTORS}")
    cp.add_argument("--candidate", metavar="SET", help="the result set checked against it "
                    "(same selectors)")
    cp.add_argument("--threshold", type=float_arg("threshold"), default=DEFAULT_THRESHOLD,
                    help=f"a change within ± this fraction is no change (default "
                         f"{DEFAULT_THRESHOLD:g}, as asv; {THRESHOLD_RANGE[0]:g}.."
                         f"{THRESHOLD_RANGE[1]:g})")
    cp.add_argument("--fail-above", type=float_arg("fail_above"), default=None, metavar="RATIO",
                    help="a regression is slower than this latency ratio (candidate / "
                         "baseline), one-sided at 5 %% family-wise over the "
                         "configurations compared (step-down min-p) (default: 1 + threshold). Exit 0: no "
                         "regression; 1: a regression; 2: the data could not be judged "
                         "(missing, failed, incomparable, or one sweep on each side)")
    cp.add_argument("--metric", default=None, metavar="METRIC",
                    help="judge generation sweeps (ids or prefixes, comma-separated) on "
                         "ttft, tpot or output_tok_s instead of inference latency; a "
                         "regression is then a worse figure (output tokens/s judged as ms "
                         "per token)")


def cmd_history(args) -> int:
    from engine.present.history import sets_table
    from store.db import open_db
    from store.history import result_sets

    with open_db(args.db) as con:
        sets = result_sets(con)
    if sets.empty:
        print("no inference sweeps stored yet: `python -m engine run ...` makes one")
        return 0
    print(sets_table(sets))
    print("compare two of them: python -m engine compare --baseline SWEEP --candidate SWEEP "
          "(or commit:<prefix>, machine:<prefix>, torch:<version>, tensorflow:<version>)")
    return 0


def cmd_regress(args) -> int:
    """compare --baseline A --candidate B: the verdict table, then one line saying why the
    gate exits 0 (no regression), 1 (a regression) or 2 (it could not judge)."""
    from engine.analysis.regress import compare_sets
    from engine.present.history import gate_line, verdict_table
    from store.db import open_db
    from store.history import selection_runs

    if args.sweep:
        raise UserError(f"sweep: {args.sweep!r} given with --baseline/--candidate; allowed: "
                        "`compare [SWEEP_ID]` or `compare --baseline SET --candidate SET`",
                        field="sweep")
    for name in ("baseline", "candidate"):
        if not getattr(args, name):
            raise UserError(f"{name}: missing; --baseline and --candidate go together; "
                            f"allowed: {SELECTORS}", field=name)
    float_range("threshold", args.threshold, *THRESHOLD_RANGE)
    fail_above = args.fail_above if args.fail_above is not None else 1 + args.threshold
    float_range("fail_above", fail_above, *FAIL_ABOVE_RANGE)
    if args.metric is not None:
        return _regress_generation(args, fail_above)
    with open_db(args.db) as con:
        base, base_rows = selection_runs(con, args.baseline, "baseline")
        cand, cand_rows = selection_runs(con, args.candidate, "candidate")
    cmp = compare_sets(base_rows, cand_rows, args.threshold, fail_above=fail_above,
                       baseline=f"{base.label} ({len(base_rows)} runs)",
                       candidate=f"{cand.label} ({len(cand_rows)} runs)")
    print(verdict_table(cmp))
    code, line = gate_line(cmp)
    print(line)
    return code


def _regress_generation(args, fail_above: float) -> int:
    """The gate on generation sweeps: --baseline and --candidate name generation sweeps."""
    from engine.analysis.generation_regress import compare_generation_sets, gate_metric
    from engine.present.history import gate_line, verdict_table
    from store.db import open_db
    from store.generation_views import generation_set_runs

    metric = gate_metric(args.metric)
    with open_db(args.db) as con:
        base_rows = generation_set_runs(con, args.baseline, "baseline")
        cand_rows = generation_set_runs(con, args.candidate, "candidate")
    cmp = compare_generation_sets(base_rows, cand_rows, metric, args.threshold,
                                  fail_above=fail_above,
                                  baseline=f"{args.baseline} ({len(base_rows)} runs)",
                                  candidate=f"{args.candidate} ({len(cand_rows)} runs)")
    print(f"generation gate on {metric.name} ({metric.unit}"
          + ("" if metric.lower_is_better else ", judged as ms per token") + ")")
    print(verdict_table(cmp))
    code, line = gate_line(cmp)
    print(line)
    return code


COMMANDS = {"history": cmd_history}
