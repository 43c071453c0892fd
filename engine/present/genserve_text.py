"""What the Deploy page says of a language-model serving test (issue 38), built without a
browser: a test's label and verdict (LoadGen's VALID/INVALID with a reason per failed rule
from the test's own figures, its error count, and what our readings are), its figures
beside LoadGen's, a concurrency sweep's Pareto of tokens/s per user against tokens/s per
machine (the front by engine/analysis/pareto.py) and its sentence, a max-rate search's
probes and its sentence, and a glossary line per metric.

Input is a row of store/genserve.py (a dict or a namedtuple-like object read by name);
figures stay numbers (None where absent), formatted only in sentences.

Why the SUT's readings are lower bounds: LoadGen times a request from its scheduled issue
time, the SUT from when IssueQuery handed it over (later, by LoadGen's own delay), so the
SUT's TTFT and E2E can only be shorter than LoadGen's; TPOT is a difference of two of the
SUT's readings and does not carry that offset.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import pandas as pd

from engine.analysis.pareto import pareto_front
from engine.scenarios.genserve.metrics import request_figures

__all__ = ["SCENARIO_LABELS", "GLOSSARY", "LOWER_BOUNDS", "scenario_label", "test_label",
           "verdict", "figures_frame", "headline", "request_frame", "pareto_frame",
           "pareto_sentence", "probes_frame", "max_rate_sentence", "glossary_frame", "launch_plan"]

SCENARIO_LABELS = {"server": "Server", "offline": "Offline", "single-stream": "SingleStream",
                   "closed-loop": "Closed loop"}
LOWER_BOUNDS = ("Our readings (TTFT, E2E) are lower bounds on LoadGen's: the SUT times each "
                "request from when LoadGen handed it over, LoadGen from its scheduled issue "
                "time, so LoadGen's own p99, beside them, is the one it judged.")
GLOSSARY = (
    ("TTFT", "time to first token: first token - issue, per request (ms)"),
    ("TPOT", "time per output token: (E2E - TTFT) / (n - 1), n the request's output "
             "tokens: LoadGen's and vLLM's definition (ms)"),
    ("E2E", "end to end: completion - issue, per request (ms)"),
    ("goodput", "requests meeting both bounds (TTFT and TPOT, each request judged on its "
                "own) per second of the test's span, vLLM's bench-serve goodput"),
    ("tokens/s per user", "1 / the median request's TPOT: the decode rate one user watching "
                          "a stream sees"),
    ("tokens/s per machine", "output tokens of every request / the test's span (first issue "
                             "to last completion)"),
    ("span", "the first request's issue to the last one's completion"),
)
# LoadGen's rules as its summary names them -> what it means when not satisfied
_RULES = {
    "min duration": "the test ran for less than its minimum duration",
    "min queries": "fewer requests completed than its minimum query count",
    "early stopping": "too few requests for LoadGen to be sure the percentile is within the "
                      "bound (its early-stopping estimate passed a bound): more requests, or "
                      "a lower rate",
}


def _get(row: Any, name: str) -> Any:
    value = row.get(name) if isinstance(row, Mapping) else getattr(row, name, None)
    if value is None or value is pd.NA:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _ms(v: float | None) -> str:
    return "n/a" if v is None else f"{v:,.1f} ms" if v >= 10 else f"{v:,.2f} ms"


def scenario_label(scenario: str | None) -> str:
    return SCENARIO_LABELS.get(scenario or "", scenario or "unknown")


def _who(row) -> str:
    """The load: N users, a rate, or none."""
    if _get(row, "scenario") == "closed-loop":
        n = _get(row, "users") or 1
        return f"{n} user{'s' if n != 1 else ''}"
    qps = _get(row, "target_qps")
    return f"{qps:g} req/s" if qps is not None else ""


def test_label(row) -> str:
    """'Server at 5 req/s · tiny_llama (eager) · prompt 16, output 8 · ok · 2026-11-21 12:01'."""
    who = _who(row)
    when = _get(row, "started_at")
    return " · ".join(p for p in (
        scenario_label(_get(row, "scenario")) + (f" at {who}" if who else ""),
        f"{_get(row, 'model')} ({_get(row, 'runtime')})",
        f"prompt {_get(row, 'prompt_len')}, output {_get(row, 'output_len')}",
        str(_get(row, "status")),
        pd.Timestamp(when).strftime("%Y-%m-%d %H:%M") if when is not None else "",
        str(_get(row, "run_id"))[:8]) if p)


def _rule_reason(rule: str, row) -> str:
    """Why one LoadGen rule failed, from the test's own figures."""
    if rule.lower() != "performance constraints":
        return f"{rule}: {_RULES.get(rule.lower(), 'not satisfied')}"
    over = []
    for name in ("ttft", "tpot"):
        p99, bound = _get(row, f"loadgen_{name}_p99_ms"), _get(row, f"{name}_bound_ms")
        if p99 is not None and bound is not None and p99 > bound:
            over.append(f"p99 {name.upper()} {_ms(p99)} over its {bound:,g} ms bound")
    return f"{rule}: " + ("; ".join(over) if over else
                          "a latency percentile passed its bound")


def verdict(row) -> tuple[str, str]:
    """(ok, invalid or failed; the sentence): LoadGen's result and a reason per failed rule,
    its error count, and the bounds each request was held to; a closed loop, which LoadGen
    does not judge, by its share of requests within both bounds."""
    status = _get(row, "status") or "failed"
    reason = _get(row, "reason") or ""
    if not _get(row, "requests"):
        return "failed", f"The test measured nothing ({status}): {reason or 'no reason stored'}"
    bounds = (f"TTFT {_get(row, 'ttft_bound_ms'):,g} ms and TPOT "
              f"{_get(row, 'tpot_bound_ms'):,g} ms")
    good = (f"{_get(row, 'good_requests')} of {_get(row, 'requests')} requests "
            f"({_get(row, 'good_share'):.0%}) met both bounds ({bounds})")
    result = _get(row, "loadgen_result")
    if result is None:
        head = (f"{scenario_label(_get(row, 'scenario'))} of {_who(row) or 'its load'}: ours, "
                f"not LoadGen's, so no LoadGen verdict. {good}; p99 TTFT "
                f"{_ms(_get(row, 'ttft_p99_ms'))}, p99 TPOT {_ms(_get(row, 'tpot_p99_ms'))}.")
    else:
        failed = _get(row, "failed_rules") or []
        head = f"LoadGen: {result}"
        if failed:
            head += " — " + "; ".join(_rule_reason(r, row) for r in failed) + "."
        elif result == "VALID":
            head += (f": p99 TTFT {_ms(_get(row, 'loadgen_ttft_p99_ms'))} and p99 TPOT "
                     f"{_ms(_get(row, 'loadgen_tpot_p99_ms'))} within {bounds}.")
        errors = _get(row, "loadgen_errors")
        if errors:
            head += (f" LoadGen counted {errors} SUT error{'s' if errors != 1 else ''} (its "
                     "detail log lists them), so the test is not ok.")
        head += f" {good}. {LOWER_BOUNDS}"
    # What else made it invalid (short requests, dropped ones): LoadGen's parts said above
    rest = [p for p in reason.split("; ") if p and not p.startswith("LoadGen")]
    if status != "ok" and rest:
        head += " Also: " + "; ".join(rest) + "."
    return ("ok" if status == "ok" else "invalid" if status == "invalid" else "failed"), head


def figures_frame(row) -> pd.DataFrame:
    """figure, ours (the SUT's readings, from the stored requests), LoadGen's (where it
    reports the same figure), unit: numbers, not text."""
    lg = _get(row, "loadgen_result") is not None
    rows = [("requests", _get(row, "requests"), None, ""),
            ("span", _get(row, "span_s"), None, "s"),
            ("requests/s", _get(row, "requests_per_s"), None, "req/s"),
            ("output tokens/s (per machine)", _get(row, "output_tok_s"),
             _get(row, "loadgen_tok_s") if lg else None, "tok/s"),
            ("input tokens/s", _get(row, "input_tok_s"), None, "tok/s"),
            ("goodput", _get(row, "goodput_req_s"), None, "req/s"),
            ("good share", _get(row, "good_share"), None, "of requests"),
            ("tokens/s per user", _get(row, "user_tok_s"), None, "tok/s")]
    for name in ("ttft", "tpot", "e2e"):
        for p in (50, 90, 99):
            theirs = (_get(row, f"loadgen_{name}_p99_ms") if lg and p == 99
                      and name != "e2e" else None)
            rows.append((f"{name.upper()} p{p}", _get(row, f"{name}_p{p}_ms"), theirs, "ms"))
    return pd.DataFrame(rows, columns=["figure", "ours", "LoadGen", "unit"])


def headline(row) -> list[tuple[str, str, str]]:
    """(label, value, help) for the page's metric tiles."""
    def fmt(v, spec, unit=""):
        return "n/a" if v is None else f"{v:{spec}}{unit}"
    share = _get(row, "good_share")
    return [
        ("output tok/s", fmt(_get(row, "output_tok_s"), ",.1f"),
         "per machine: every request's output tokens over the span"),
        ("tok/s per user", fmt(_get(row, "user_tok_s"), ",.1f"),
         "1 / the median request's TPOT"),
        ("goodput", fmt(_get(row, "goodput_req_s"), ",.3g", " req/s"),
         f"requests within both bounds per second ({fmt(share, '.0%')} of requests)"),
        ("TTFT p99", _ms(_get(row, "ttft_p99_ms")), "ours, a lower bound on LoadGen's"),
        ("TPOT p99", _ms(_get(row, "tpot_p99_ms")), "ours: (E2E - TTFT) / (n - 1)")]


def request_frame(requests: pd.DataFrame) -> pd.DataFrame:
    """Per stored request: seq, n_tokens, ttft_ms, tpot_ms (NaN under 2 tokens), e2e_ms."""
    r = request_figures(requests["issue_ns"], requests["first_ns"], requests["done_ns"],
                        requests["n_tokens"])
    return pd.DataFrame({"seq": requests["seq"].to_numpy(),
                         "n_tokens": requests["n_tokens"].to_numpy(),
                         **{f"{k[:-3]}_ms": v / 1e6 for k, v in r.items()}})


def pareto_frame(tests: pd.DataFrame) -> pd.DataFrame:
    """A concurrency sweep's points (its ok closed-loop tests with figures), by users:
    users, user_tok_s, output_tok_s, run_id, front (no other point beats it on both)."""
    cols = ["users", "user_tok_s", "output_tok_s", "run_id"]
    ok = tests[(tests.scenario == "closed-loop") & (tests.status == "ok")
               & tests.output_tok_s.notna() & tests.user_tok_s.notna()]
    points = ok[cols].sort_values("users").reset_index(drop=True)
    # pareto_front minimises each axis: both figures are better higher
    front = {p["run_id"] for p in pareto_front(points.to_dict("records"), key=lambda p: (
        -p["user_tok_s"], -p["output_tok_s"]))}
    return points.assign(users=points.users.astype(int), front=points.run_id.isin(front))


def pareto_sentence(points: pd.DataFrame) -> str:
    """'On the front: at 1 user: 100.0 tok/s per user, 80.0 tok/s per machine; ...' and the
    points off it, each with the point that beats it on both."""
    if points.empty:
        return "No ok closed-loop test with figures in this sweep."
    def one(p) -> str:
        return (f"at {p.users} user{'s' if p.users != 1 else ''}: {p.user_tok_s:,.1f} tok/s "
                f"per user, {p.output_tok_s:,.1f} tok/s per machine")
    on = [one(p) for p in points.itertuples() if p.front]
    text = "On the Pareto front: " + "; ".join(on) + "."
    off = []
    for p in points.itertuples():
        if p.front:
            continue
        by = next(q for q in points.itertuples() if q.front and q.user_tok_s >= p.user_tok_s
                  and q.output_tok_s >= p.output_tok_s)
        off.append(f"{one(p)} ({by.users} users beat it on both)")
    return text + (" Off it: " + "; ".join(off) + "." if off else "")


def probes_frame(tests: pd.DataFrame) -> pd.DataFrame:
    """A sweep's Server tests (a max-rate search's probes) in the order they ran."""
    server = tests[tests.scenario == "server"]
    return server[["target_qps", "status", "loadgen_result", "loadgen_ttft_p99_ms",
                   "loadgen_tpot_p99_ms", "requests_per_s", "goodput_req_s", "good_share",
                   "loadgen_errors", "run_id"]].reset_index(drop=True)


def max_rate_sentence(tests: pd.DataFrame) -> str | None:
    """The highest target LoadGen judged VALID with no error (ok) among a sweep's Server
    tests, and the lowest it did not; None for under two Server tests."""
    probes = probes_frame(tests)
    if len(probes) < 2:
        return None
    ok = probes[probes.status == "ok"]
    miss = probes[probes.status != "ok"]
    if ok.empty:
        return (f"No rate met both bounds: the lowest tried, {probes.target_qps.min():g} "
                "req/s, was not ok.")
    best = ok.loc[ok.target_qps.idxmax()]
    text = (f"Highest rate LoadGen judged VALID here: {best.target_qps:g} req/s (goodput "
            f"{best.goodput_req_s:,.3g} req/s, {best.good_share:.0%} of requests within both "
            "bounds)")
    above = miss[miss.target_qps > best.target_qps]
    if not above.empty:
        text += f"; the lowest above it that was not: {above.target_qps.min():g} req/s"
    return text + f" ({len(probes)} Server tests in this sweep)."


def glossary_frame() -> pd.DataFrame:
    return pd.DataFrame(GLOSSARY, columns=["metric", "meaning"])



def launch_plan(specs) -> str:
    """'**3 tests** of gpt2 on eager, prompt 128, output 64, bounds TTFT 2,000 ms and TPOT
    100 ms: Server at 1 req/s; Closed loop of 1 user; ...' for a form's expanded specs."""
    if not specs:
        return "Nothing to run: pick at least one scenario."
    s = specs[0]
    parts = []
    for spec in specs:
        who = (f" of {spec.users} user{'s' if spec.users != 1 else ''}"
               if spec.scenario == "closed-loop" else
               f" at {spec.target_qps:g} req/s" if spec.scenario == "server" else "")
        parts.append(scenario_label(spec.scenario) + who)
    return (f"**{len(specs)} test{'s' if len(specs) != 1 else ''}** of {s.model} on "
            f"{s.runtime} ({s.precision}, {s.intra_threads} thread(s), max {s.max_num_seqs} "
            f"sequence(s)), prompt {s.prompt_len}, output {s.output_len}, bounds TTFT "
            f"{s.ttft_bound_ms:,g} ms and TPOT {s.tpot_bound_ms:,g} ms: " + "; ".join(parts)
            + ". Each is a stored row; the result appears below.")
