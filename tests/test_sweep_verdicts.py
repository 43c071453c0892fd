"""One way to a verdict (issue 36 point 4): store.verdicts.sweep_verdicts reads a stored
sweep and judges it once; the Compare page, the report and `compare` only word it."""

import ast
import pickle
from dataclasses import replace

import pytest

from engine.analysis.sequential import VerdictRule
from engine.analysis.sweep_verdict import judge_sweep
from engine.present.frames import compare_frame
from store.db import open_db
from store.runs import save_record, save_sweep, sweep_rounds
from store.verdicts import sweep_verdicts
from tests.conftest import ROOT, seed_once
from seeds.records import SYSTEM, ok_record, seed_sweep


def test_a_seeded_sweep_is_judged_once_with_its_counts_rule_and_noise(db_path):
    seed_once(seed_sweep, db_path)
    with open_db(db_path) as con:
        verdict = sweep_verdicts(con, "sweep-seeded")
    assert (verdict.sweep_id, verdict.runs, verdict.ok, verdict.models) == (
        "sweep-seeded", 17, 16, ("mobilenet_v3_small",))
    assert verdict.columns == ("torch (eager)", "tensorflow (tf_function)")
    assert verdict.rule == VerdictRule.of(2, 6, 0.02)  # none kept: looks at rounds 2-6
    assert [c.row[2:4] for c in verdict.contests] == [(1, 1), (1, 2), (8, 1), (8, 2), (32, 1)]
    assert [c.best for c in verdict.contests] == ["torch (eager)"] * 4 + [None]
    assert (round(verdict.noise.residual_pct, 1), round(verdict.noise.drift_pct, 1)) == (0.5,
                                                                                        0.6)
    # batch 1, 1 thread: torch's round medians 10.1 and 10.2 ms, 1 sample of 1 per 10.15 ms
    assert verdict.throughputs[verdict.contests[0].row]["torch (eager)"] == pytest.approx(
        1000 / (10.1 * 10.2) ** 0.5)
    assert verdict.rounds == 2 and verdict.slowdowns == verdict.changes == ()


def test_a_cached_verdict_keeps_its_sentences(db_path):
    """The dashboard caches it by pickling (st.cache_data): the words travel with it."""
    seed_once(seed_sweep, db_path)
    with open_db(db_path) as con:
        verdict = sweep_verdicts(con, "sweep-seeded")
    back = pickle.loads(pickle.dumps(verdict))
    assert "sentences" in vars(back.contests[0])  # worded before it was cached
    assert back.contests[0].sentences == verdict.contests[0].sentences == (
        "torch (eager) is 1.99x faster than tensorflow (tf_function) (95 % sequential "
        "interval 1.85-2.13, 2 rounds)",)


def test_the_rule_a_sweep_kept_judges_it(db_path):
    with open_db(db_path) as con:
        save_sweep(con, "kept", rounds=2, seed=1, plan=[[], []], configurations=2,
                   rule={"min_rounds": 2, "max_rounds": 8, "margin": 0.05, "alpha": 0.05})
        for n, (fw, ms) in enumerate((("torch", 10.0), ("tensorflow", 20.0)) * 2):
            rec = ok_record(f"k-{n}", samples=(int(ms * 1e6),) * 3, minute=n, framework=fw)
            save_record(con, replace(rec, sweep_id="kept", round_no=1 + n // 2), SYSTEM)
        verdict = sweep_verdicts(con, "kept")
        empty = sweep_verdicts(con, "no-such-sweep")
    assert verdict.rule == VerdictRule.of(2, 8, 0.05, 0.05)
    assert (empty.runs, empty.contests, empty.noise) == (0, (), None)


def test_a_models_rows_say_the_same_whichever_other_models_are_shown(db_path):
    seed_once(seed_sweep, db_path)
    with open_db(db_path) as con:
        rows = sweep_rounds(con, "sweep-seeded")
    # another model, slower, whose torch ran TorchScript: a column of its own
    other = [dict(r, model="resnet18", median_ms=r["median_ms"] and r["median_ms"] * 3,
                  runtime="torchscript" if r["framework"] == "torch" else r["runtime"])
             for r in rows]
    both = judge_sweep(rows + other)
    alone = judge_sweep(rows, rule=both.rule)
    shown, best, rounds, contests = compare_frame(both, models=["mobilenet_v3_small"])
    want, want_best, want_rounds, _ = compare_frame(alone)
    assert shown.equals(want) and (best, rounds) == (want_best, want_rounds)
    assert [c.row[0] for c in contests] == ["mobilenet_v3_small"] * 5
    assert compare_frame(both)[0].shape == (10, 6)  # every row, and torch (torchscript)


def test_the_page_the_report_and_the_cli_only_present_it():
    """None of the three reads the runs or judges them itself: each calls sweep_verdicts."""
    judging = {"aggregate", "stored_rule", "contests", "noise_model", "sweep_rounds",
               "sweep_rule", "judge_sweep", "verdict_of", "slowdowns", "verdict_changes"}
    for path in ("views/compare.py", "engine/present/report.py", "engine/cli/results.py"):
        tree = ast.parse((ROOT / path).read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                 for a in n.names}
        assert "sweep_verdicts" in names and not names & judging, path
