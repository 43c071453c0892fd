"""What an undecided comparison says it would take (issue 35, point 6): the max rounds that
decide it with 80 % probability under the plan that would run, checked against seeded
sweeps that then run that plan. Nothing is timed."""

import math

import numpy as np

from engine.analysis.looks import LookPlan, VerdictRule
from engine.analysis.paired import EQUIVALENT_CODE, WINNER_CODE
from engine.analysis.projection import PLAN_PATHS, candidates, project_many
from engine.analysis.sequential import UNDECIDED, compare_rounds
from engine.analysis.simulate import simulate

RULE = VerdictRule.of(3, 6, 0.02)


def test_an_undecided_comparison_names_the_max_rounds_and_the_probability():
    a = {r: 10.0 for r in range(1, 7)}
    b = dict(zip(range(1, 7), (10.9, 11.6, 10.4, 10.2, 11.1, 10.6)))  # about 1.08x
    cmp = compare_rounds(a, b, RULE)
    assert cmp.state == UNDECIDED and not cmp.futile
    assert (cmp.needed, cmp.projected.probability) == (56, 0.802)
    assert cmp.sentence("A", "B").endswith(
        "at this spread (±4.8 % per round) a sweep of up to 56 rounds would decide it with "
        "80 % probability (--max-rounds 56; the Run page's Max rounds)")
    # three rounds of about 1.10x at 5.6 % say far less: the spread itself is uncertain
    three = compare_rounds({1: 10.0, 2: 10.0, 3: 10.0}, {1: 10.9, 2: 11.6, 3: 10.4}, RULE)
    assert three.needed is None and round(three.projected.probability, 2) == 0.76
    assert "even 100 rounds, the most a sweep runs, would decide it with only 76 % " \
           "probability" in three.sentence("A", "B")
    assert candidates(3)[:8] == [3, 4, 5, 6, 7, 8, 10, 12] and candidates(3)[-1] == 100


def test_the_stated_80_percent_comes_true_80_percent_of_the_time():
    """1.1x at 5 % noise per process (7.1 % on the paired ratio), 10 % drift: 2,000 seeded
    sweeps of rounds 3-6; each one that ends undecided is projected, and a fresh sweep run
    with the max rounds it names (its plan calibrated as the projection's, with
    PLAN_PATHS null sweeps) decides it in 79 % of them, within 5 points of the stated
    80 % (4,000 sweeps: 81.7 %). Where even 100 rounds would not reach 80 % (77 % of
    them here: 6 noisy rounds leave the gap and the spread uncertain) the sentence gives
    the probability at 100 rounds instead."""
    gap, noise = math.log(1.1), 0.05
    s = simulate([0.0, gap], noise, 0.10, RULE, 2000, seed=5)
    f = s.final
    open_ = ~((f.state == WINNER_CODE) | (f.state == EQUIVALENT_CODE)).any(1)
    rows = np.flatnonzero(open_)
    rival = 1 - f.best[rows]
    rounds, _ = project_many(f.stats.n[rows, rival], f.stats.mean[rows, rival],
                             f.stats.sd[rows, rival], RULE.band, 3, 0.05)
    named = rounds > 0
    came = np.zeros(len(rows), dtype=bool)
    for m in np.unique(rounds[named]):
        pick = np.flatnonzero(rounds == m)
        again = VerdictRule(0.02, LookPlan(3, int(m), 0.05, PLAN_PATHS))
        fresh = simulate([0.0, gap], noise, 0.10, again, len(pick), seed=100 + int(m))
        came[pick] = ((fresh.final.state == WINNER_CODE)
                      | (fresh.final.state == EQUIVALENT_CODE)).any(1)
    assert (len(rows), named.sum()) == (1291, 295)
    rate = came[named].mean()
    assert round(rate, 3) == 0.793 and abs(rate - 0.80) <= 0.05
