"""A contest's figures and its family of verdicts (issue 35, points 3 and 7): the best cell
is the one the sentences name, and a contest of k contenders holds its error rate as a
whole. Fixed numbers, and seeded sweeps run through the rule itself
(engine.analysis.simulate: thousands at once); nothing is timed."""

import math

import numpy as np
import pytest

from engine.analysis.compare import aggregate, contests
from engine.analysis.paired import EQUIVALENT_CODE, WINNER_CODE
from engine.analysis.sequential import EQUIVALENT, UNDECIDED, VerdictRule, compare_rounds
from engine.analysis.simulate import simulate
from engine.analysis.sweep_verdict import judge_sweep
from engine.analysis.verdicts import fit_levels
from engine.present.frames import raw_frame
from engine.present.tables import compare_table

RULE = VerdictRule.of(3, 6, 0.02)


def _runs(**contenders):
    return [dict(model="m", image_size=64, batch_size=1, intra_threads=2, framework=fw,
                 runtime="x", round_no=r, status="ok", validity="valid", median_ms=ms)
            for fw, meds in contenders.items() for r, ms in meds.items()]


def _same(got, want):
    """One comparison from a contest and from compare_rounds (logs of ratios and ratios of
    logs differ in the last bits)."""
    assert (got.state, got.rounds, got.rule, got.futile) == (want.state, want.rounds,
                                                             want.rule, want.futile)
    assert (got.speedup, got.ci_low, got.ci_high) == pytest.approx(
        (want.speedup, want.ci_low, want.ci_high), rel=1e-12)


# The worked example: C decided at round 3 and stopped; A ran on with B, and the
# machine slowed 16 % in rounds 4-6.
A = dict(enumerate((10.0, 10.02, 9.98, 11.6, 11.62, 11.58), 1))
B = dict(enumerate((10.3, 10.1, 10.5, 11.95, 11.72, 12.18), 1))
C = dict(enumerate((10.04, 10.05, 10.03), 1))


def test_the_worked_example_stars_the_contender_the_sentence_names():
    [contest] = contests(aggregate(_runs(a=A, b=B, c=C)), RULE)[1]
    # before: geometric means over own rounds, A 10.77 and C 10.04 ms, the star on C
    raw = {c: round(r.summary.center, 2) for c, r in contest.cells.items()}
    assert raw == {"a (x)": 10.77, "b (x)": 11.09, "c (x)": 10.04}
    # now: A at the rounds every contender ran, C exactly its own geometric mean
    assert {c: round(v, 3) for c, v in contest.figures.items()} == {
        "a (x)": 10.0, "b (x)": 10.299, "c (x)": 10.04}
    assert contest.best == "a (x)" and not contest.balanced
    cmp = contest.comparisons["c (x)"]
    assert cmp.state == EQUIVALENT and round(cmp.speedup, 4) == 1.004
    # the cell ratio is the sentence's (with a third contender the fit may differ a little)
    assert contest.figures["c (x)"] / contest.figures["a (x)"] == pytest.approx(
        cmp.speedup, rel=1e-4)
    assert ("a (x) and c (x) are equivalent within ±2 % (a (x) measured 1.004x faster; "
            "97.5 % sequential interval 0.999-1.009, 3 rounds)") in contest.sentences
    text = compare_table(judge_sweep(_runs(a=A, b=B, c=C), rule=RULE))
    assert "*10.00 [9.98-11.62] ?" in text and "=10.04 [10.03-10.05]" in text
    assert "`python -m engine compare SWEEP --raw`" in text
    # the raw figures, one click (or flag) away
    assert "10.77" in compare_table(judge_sweep(_runs(a=A, b=B, c=C), rule=RULE), raw=True)
    frame = raw_frame([contest])
    assert frame["geometric mean [ms]"].tolist() == ["10.77", "11.09", "10.04"]
    assert frame["round 4 [ms]"].tolist() == ["11.60", "11.95", ""]


def test_with_two_contenders_the_cell_ratio_is_the_paired_ratio_exactly():
    # a round one contender lost (C failed round 4) carries nothing about the difference
    a = {1: 10.0, 2: 12.1, 3: 9.7, 4: 14.0}
    c = {1: 10.3, 2: 12.0, 3: 10.1}
    [contest] = contests(aggregate(_runs(a=a, c=c)), RULE)[1]
    cmp = compare_rounds(a, c, RULE)
    _same(contest.comparisons["c (x)"], cmp)
    assert contest.figures["c (x)"] / contest.figures["a (x)"] == pytest.approx(
        cmp.speedup, rel=1e-12)
    # every round run by both: each figure is its geometric mean
    y = np.log([[[10.0, 12.1, 9.7], [10.3, 12.0, 10.1]]])
    assert np.exp(fit_levels(y)[0][0]) == pytest.approx(
        [(10.0 * 12.1 * 9.7) ** (1 / 3), (10.3 * 12.0 * 10.1) ** (1 / 3)], rel=1e-12)
    # 2,000 seeded sweeps with 10 % drift between rounds: equal in every one
    s = simulate([0.0, 0.01], 0.01, 0.10, RULE, 2000, seed=3)
    rival = 1 - s.final.best
    rows = np.arange(2000)
    gap = s.final.figure[rows, rival] - s.final.figure[rows, s.final.best]
    assert np.abs(gap - s.final.stats.mean[rows, rival]).max() < 1e-9


def test_with_more_contenders_star_and_sentences_agree_and_cells_stay_close():
    """The issue's setting: 1 % noise, 10 % drift between rounds, three contenders (true
    gaps 0.4 % and 1.5 %), decided ones stopping. Before, the star sat on a different
    contender than the one the sentences favoured in 21 % of sweeps and a cell ratio was
    off its sentence's by over 2 % in 30 %."""
    s = simulate([0.0, 0.015, 0.004], 0.01, 0.10, RULE, 2000, seed=4)
    f, rows = s.final, np.arange(2000)[:, None]
    rivals = ~np.isnan(f.stats.mean) & (f.stats.n >= 2)
    # no winner is named against the star; a sentence may still lean to a rival by a
    # hair where the fit and the pair differ (an equivalence, or no decision)
    lean = rivals & (f.stats.mean < 0)
    assert not (lean & (f.state == WINNER_CODE)).any()
    assert [(lean & (f.state == code)).any(1).mean() for code in (EQUIVALENT_CODE, 0)] == [
        0.008, 0.0105]
    gap = np.abs(f.figure - f.figure[rows, f.best[:, None]] - f.stats.mean)
    off = np.where(rivals, np.expm1(gap), 0.0).max(1)
    unbalanced = (np.isnan(s.y).any(2) & ~np.isnan(s.y).all(2)).any(1)
    assert unbalanced.mean() == 0.916  # decided contenders stopped in most sweeps
    assert (off > 0.02).mean() == 0.0 and (off > 0.005).mean() == 0.0045
    assert round(off.max(), 4) == 0.0088


def test_k_equals_2_is_the_rule_as_it_was():
    a = {1: 10.0, 2: 10.1, 3: 9.9}
    b = {1: 13.0, 2: 12.9, 3: 13.2}
    [contest] = contests(aggregate(_runs(a=a, b=b)), RULE)[1]
    cmp = contest.comparisons["b (x)"]
    _same(cmp, compare_rounds(a, b, RULE))
    assert cmp.rule == RULE
    assert contest.sentences[0] == ("a (x) is 1.30x faster than b (x) (95 % sequential "
                                    "interval 1.22-1.40, 3 rounds)")


def _false_winners(k, margin, sweeps=2000, seed=11):
    s = simulate([0.0] * k, 0.05, 0.20, VerdictRule.of(3, 6, margin), sweeps, seed)
    return (s.final.state == WINNER_CODE).any(1).mean()


def test_a_contest_of_tied_contenders_names_a_false_winner_in_at_most_5_percent():
    """Tied contenders, 5 % noise per process, 20 % drift between rounds, the sweep flow
    (rounds 3-6, decided contests stop, extra rounds only for the undecided): any false
    "X is faster" per contest. Each comparison held to 5 % alone gave 1.5 / 7.6 / 11.1 %
    at k = 2 / 4 / 6 (the issue: 7.1 and 10.5 %)."""
    rates = [_false_winners(k, 0.02) for k in (2, 4, 6)]
    assert rates == [0.015, 0.0225, 0.024]
    assert max(rates) <= 0.05
    # With no margin the interval alone decides; the best is picked from the same rounds,
    # which Holm over k - 1 comparisons does not see: slightly above 5 % (15.7 / 24.6 %
    # before), as the caption says.
    assert [_false_winners(k, 0.0) for k in (2, 4, 6)] == [0.0505, 0.0575, 0.059]


def test_a_real_difference_is_still_decided():
    """One contender truly 1.1x faster than k - 1 tied rivals: the share of its k - 1
    comparisons it wins, at 2 % and 5 % noise per process (before: 98 / 94 / 93 % and
    34 / 33 / 33 % at k = 2 / 4 / 6)."""
    def power(k, noise):
        s = simulate([0.0] + [math.log(1.1)] * (k - 1), noise, 0.20, RULE, 2000, seed=12)
        won = (s.final.state == WINNER_CODE) & (s.final.best == 0)[:, None]
        return round(won[:, 1:].mean(), 3)
    assert [power(k, 0.02) for k in (2, 4, 6)] == [0.97, 0.939, 0.893]
    assert [power(k, 0.05) for k in (2, 4, 6)] == [0.348, 0.176, 0.12]


def test_undecided_sentences_are_shown_at_the_share_the_next_decision_needs():
    [contest] = contests(aggregate(_runs(a=A, b=B, c=C)), RULE)[1]
    b = contest.comparisons["b (x)"]
    # C was decided at alpha / 2; B is what remains, judged at the whole alpha
    assert (b.state, b.rule.plan.alpha, b.family) == (UNDECIDED, 0.05, (2, 2))
    assert contest.comparisons["c (x)"].family == (1, 2)
    assert contest.more == frozenset()  # B is futile: no round would decide it
