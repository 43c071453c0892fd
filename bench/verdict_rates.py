"""The verdicts' error rates, power and figures in seeded simulated sweeps, through the
public rule only (contests, undecided, compare_rounds, compare_grid), so the same script
measures an older checkout on the same random draws (run it there with PYTHONPATH set to
that checkout): the before and after figures of issue 35 come from it. Slow (a Python loop
per sweep); tests/test_verdicts.py and tests/test_projection.py check the same rates on
arrays in seconds.

    .venv/bin/python bench/verdict_rates.py {fwer,power,star,proj} [--sweeps 2000]

- fwer: tied contenders (k = 2, 4, 6; 5 % noise per process, 20 % drift), the share of
  contests naming any false winner, at margins 0 and 2 %;
- power: one contender 1.1x faster than k - 1 tied rivals at 2 and 5 % noise: the share of
  its comparisons it wins, of contests it wins outright, and wrong winners named;
- star: three contenders, 1 % noise, 10 % drift: the star on a truly slower contender, a
  sentence leaning against the star, a cell ratio off its sentence's by over 2 %, and
  sweeps whose contenders ran different rounds;
- proj: two contenders; of contests undecided after rounds 3-6, the share whose projected
  max rounds M came true (a fresh sweep with max rounds M decided it; or this one
  continued to M).
"""

import argparse
import math
import re
import time

import numpy as np

from engine.analysis.compare import ConfigResult, contests, summarize_rounds, undecided
from engine.analysis.sequential import WINNER, VerdictRule, compare_rounds


def results_of(meds):
    return [ConfigResult("m", 64, 1, 1, n, dict(v), (), summarize_rounds(list(v.values())))
            for n, v in meds.items()]


def sweep(levels, noise, drift, rng, rule, trend=None):
    names = [f"c{i}" for i in range(len(levels))]
    meds = {n: {} for n in names}
    running = set(names)
    for r in range(1, rule.plan.last + 1):
        day = rng.normal(0, drift) if trend is None else trend(r)
        for i, n in enumerate(names):
            if n in running:
                meds[n][r] = 10 * math.exp(levels[i] + day + rng.normal(0, noise))
        if r < rule.plan.first:
            continue
        res = results_of(meds)
        keys = undecided(res, rule)
        if not keys:
            break
        running = {k[-1] for k in keys}
    res = results_of(meds)
    return contests(res, rule)[1][0], meds


def claims(contest):
    """(winner claims: list of (faster, slower)), from the comparisons."""
    out = []
    for rival, cmp in contest.comparisons.items():
        if cmp.state == WINNER:
            fast = contest.best if cmp.speedup >= 1 else rival
            slow = rival if fast == contest.best else contest.best
            out.append((fast, slow))
    return out


def fwer(k, S, seed, margin, noise=0.05, drift=0.2):
    rule = VerdictRule.of(3, 6, margin)
    rng = np.random.default_rng(seed)
    false = 0
    for _ in range(S):
        c, _ = sweep([0.0] * k, noise, drift, rng, rule)
        false += bool(claims(c))
    return false / S


def power(k, S, seed, noise, gap=math.log(1.1), margin=0.02, drift=0.2):
    """the first contender truly `gap` faster than each of k-1 tied rivals: share of
    comparisons that named it the winner, and share of contests fully decided right."""
    rule = VerdictRule.of(3, 6, margin)
    rng = np.random.default_rng(seed)
    right = allright = total = wrong = 0
    for _ in range(S):
        c, _ = sweep([0.0] + [gap] * (k - 1), noise, drift, rng, rule)
        cl = claims(c)
        ok = sum(1 for f, s in cl if f == "c0")
        wrong += len(cl) - ok
        right += ok
        total += k - 1
        allright += ok == k - 1
    return right / total, allright / S, wrong


def cell_value(text):
    return float(re.match(r"[*~=]?([\d,.]+)", text).group(1).replace(",", ""))


def star(S, seed, levels, noise, drift, margin=0.02):
    """star on a truly slower contender; a sentence leaning against the star; a cell ratio off
    the sentence's by over 2 %; over sweeps whose contest ended unbalanced too."""
    from engine.present.tables import compare_grid  # noqa: PLC0415 (older checkouts too)
    try:  # the grid of one judged sweep (issue 36); an older checkout's took the results
        from engine.analysis.sweep_verdict import verdict_of  # noqa: PLC0415
    except ImportError:
        verdict_of = None
    rule = VerdictRule.of(3, 6, margin)
    rng = np.random.default_rng(seed)
    wrong = lean = off = unbalanced = 0
    for _ in range(S):
        c, meds = sweep(levels, noise, drift, rng, rule)
        res = results_of(meds)
        cols, grid, _ = (compare_grid(verdict_of(res, rule)) if verdict_of else
                         compare_grid(res, rule=rule))
        contest, cells, best = grid[0]
        vals = dict(zip(cols, (cell_value(t) for t in cells)))
        truth = dict(zip([f"c{i}" for i in range(len(levels))], levels))
        wrong += truth[best] > min(levels) + 1e-12
        unbalanced += len({len(v) for v in meds.values()}) > 1
        bad = False
        for rival, cmp in contest.comparisons.items():
            if cmp.speedup < 1:
                lean += 1
                break
        for rival, cmp in contest.comparisons.items():
            if abs((vals[rival] / vals[best]) / cmp.speedup - 1) > 0.02:
                bad = True
        off += bad
    return wrong / S, lean / S, off / S, unbalanced / S


def projection_truth(S, seed, ratio=1.1, noise=0.05, fresh=True, margin=0.02):
    """k = 2; paired spread `noise` per round. Contests undecided at the end of 3-6: the
    projection's M, then whether M rounds decide it (fresh: a new sweep with max rounds M;
    else this sweep continued to M under its 3-6 plan)."""
    rule = VerdictRule.of(3, 6, margin)
    rng = np.random.default_rng(seed)
    came = n = 0
    ms = []
    for _ in range(S):
        a, b = {}, {}
        cmp = None
        for r in range(1, 7):
            a[r] = 10.0
            b[r] = 10.0 * ratio * math.exp(rng.normal(0, noise))
            if r >= 3:
                cmp = compare_rounds(a, b, rule)
                if cmp.done:
                    break
        if cmp.decided:
            continue
        text = cmp.projection()
        m = re.search(r"\((\d+) in all\)", text) or re.search(r"--max-rounds (\d+)", text)
        if not m:
            continue
        M = int(m.group(1))
        ms.append(M)
        n += 1
        if fresh:
            rule2 = VerdictRule.of(3, M, margin)
            a2, b2 = {}, {}
            ok = False
            for r in range(1, M + 1):
                a2[r] = 10.0
                b2[r] = 10.0 * ratio * math.exp(rng.normal(0, noise))
                if r >= 3:
                    c2 = compare_rounds(a2, b2, rule2)
                    if c2.done:
                        ok = c2.decided
                        break
            came += ok
        else:
            ok = False
            r = max(a)
            while r < M:
                r += 1
                a[r] = 10.0
                b[r] = 10.0 * ratio * math.exp(rng.normal(0, noise))
                c2 = compare_rounds(a, b, VerdictRule.of(3, max(M, 6), margin))
                if c2.decided:
                    ok = True
                    break
            came += ok
    return came / max(n, 1), n, (np.median(ms) if ms else None)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["fwer", "power", "star", "proj"])
    p.add_argument("--sweeps", type=int, default=2000)
    args = p.parse_args()
    t, n = time.time(), args.sweeps
    if args.what == "fwer":
        for margin in (0.0, 0.02):
            for k in (2, 4, 6):
                print(f"false winner, margin {margin}, k {k}: {fwer(k, n, 11, margin):.4f}")
    elif args.what == "power":
        for noise in (0.02, 0.05):
            for k in (2, 4, 6):
                print(f"1.1x at noise {noise}, k {k}: (comparisons won, contests won, wrong "
                      f"winners) {power(k, n, 12, noise)}")
    elif args.what == "star":
        for levels in ([0.0, 0.015, 0.004], [0.0, 0.01, 0.03]):
            print(f"levels {levels}: (star on a slower one, a sentence leaning against it, "
                  f"a cell ratio off by > 2 %, unbalanced) {star(n, 13, levels, 0.01, 0.10)}")
    else:
        for ratio, noise in ((1.1, 0.05), (1.1, 0.0707), (1.05, 0.02), (1.2, 0.10)):
            for fresh in (True, False):
                print(f"{ratio}x, paired noise {noise}, {'fresh' if fresh else 'continued'}: "
                      f"(came true, projections, median M) "
                      f"{projection_truth(n, 14, ratio, noise, fresh)}")
    print(f"took {time.time() - t:.0f} s")


if __name__ == "__main__":
    main()
