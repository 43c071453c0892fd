"""What LoadGen writes back, read framework-free: a serving test's live figures (the
worker's `Progress` every LIVE_PROGRESS_S: `LatencyHistogram` keeps the SUT's latencies so
far, `live_text` words them) and its summary and detail logs (`parse_summary`,
`detail_value`), parsed here so the parent derives a run's figures from the logs it stores.

LoadGen's token-latency mode (TestSettings.use_token_latencies, 6.0.17) prints more lines:
first-token (TTFT) and time-per-output-token (TPOT) statistics, token rates, its two bounds
and an early-stopping section per bound. parse_summary reads them by their exact wording,
matched before the generic "... percentile latency (ns)" fallback, since SingleStream's
judged first-token line ends the same way; a log without them parses as before.
"""

from __future__ import annotations

import collections
import math
import re

__all__ = ["LatencyHistogram", "rate_text", "live_text", "parse_summary", "detail_value"]


# -- a test's live figures (the worker's Progress every LIVE_PROGRESS_S) --------------------

class LatencyHistogram:
    """Latencies in log-spaced buckets (BUCKETS_PER_OCTAVE a doubling, each about 4.4 %
    wide): adding n latencies costs O(n) and a percentile O(buckets), whatever the count so
    far, so a report every second stays cheap in a test of millions of queries. A
    percentile is its bucket's upper edge: at most one bucket (4.4 %) over the exact one."""

    BUCKETS_PER_OCTAVE = 16

    def __init__(self) -> None:
        self.counts: collections.Counter = collections.Counter()
        self.n = 0

    def add(self, values_ns) -> None:
        k = self.BUCKETS_PER_OCTAVE
        self.counts.update(int(math.log2(max(v, 1)) * k) for v in values_ns)
        self.n = sum(self.counts.values())

    def percentile_ns(self, pct: float) -> float | None:
        if not self.n:
            return None
        rank, seen = math.ceil(pct / 100 * self.n), 0
        for bucket in sorted(self.counts):
            seen += self.counts[bucket]
            if seen >= rank:
                return 2 ** ((bucket + 1) / self.BUCKETS_PER_OCTAVE)
        return None  # not reached: the last bucket holds rank n


def rate_text(value: float) -> str:
    """A rate as the pages and errors print it: whole above 100, three figures below."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _ms(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}" if value >= 1 else f"{value:.3f}"


def live_text(phase: str, completed: int, per_s: float | None, unit: str = "query",
              tail_pct: float | None = None, tail_ms: float | None = None) -> str:
    """'serve: 1,234 queries, 412 QPS, p99 so far 23.1 ms' (Offline: samples, samples/s)."""
    noun = {"query": "queries", "sample": "samples"}.get(unit, unit + "s")
    parts = [f"{phase}: {completed:,} {noun if completed != 1 else unit}"]
    if per_s is not None:
        parts.append(f"{rate_text(per_s)} {'QPS' if unit == 'query' else noun + '/s'}")
    if tail_pct is not None and tail_ms is not None:
        parts.append(f"p{tail_pct:g} so far {_ms(tail_ms)} ms")
    return ", ".join(parts)


# -- LoadGen's summary log (mlperf_log_summary.txt), as it prints it -------------------------

_RULE = re.compile(r"^\s+(.+?) satisfied\s*:\s*(\S+)\s*$")
_ESTIMATE = re.compile(r"Early stopping ([\d.]+)th percentile estimate\s*:\s*(\d+)")
_PERCENTILE = re.compile(r"^([\d.]+) percentile latency \(ns\)\s*:\s*(\d+)")
_FIGURES = {
    "Completed samples per second": "completed_samples_per_s",
    "Scheduled samples per second": "scheduled_samples_per_s",
    "Samples per second": "samples_per_s",
    "QPS w/ loadgen overhead": "qps_with_loadgen_overhead",
    "QPS w/o loadgen overhead": "qps_without_loadgen_overhead",
    "Min latency (ns)": "min_latency_ns", "Max latency (ns)": "max_latency_ns",
    "Mean latency (ns)": "mean_latency_ns", "target_qps": "target_qps",
    "target_latency (ns)": "target_latency_ns", "min_duration (ms)": "min_duration_ms",
    "min_query_count": "min_query_count", "samples_per_query": "samples_per_query",
    "performance_sample_count": "performance_sample_count",
}
# -- token mode (use_token_latencies): lines only that mode prints, in LoadGen's wording
_TOKEN_FIGURES = {
    "Tokens per second": "tokens_per_s",  # Offline: tokens / the query's latency
    "Completed tokens per second": "completed_tokens_per_s",  # Server (printed twice)
    "TPS w/ loadgen overhead": "tps_with_loadgen_overhead",  # SingleStream
    "TPS w/o loadgen overhead": "tps_without_loadgen_overhead",
    "Min First Token latency (ns)": "ttft_min_ns", "Max First Token latency (ns)":
    "ttft_max_ns", "Mean First Token latency (ns)": "ttft_mean_ns",
    "Min Time per Output Token (ns)": "tpot_min_ns", "Max Time per Output Token (ns)":
    "tpot_max_ns", "Mean Time per Output Token (ns)": "tpot_mean_ns",
    "ttft_latency (ns)": "ttft_latency_ns", "tpot_latency (ns)": "tpot_latency_ns",
}
_TTFT_PERCENTILE = re.compile(r"^([\d.]+) percentile first token latency \(ns\)\s*:\s*(-?\d+)")
# LoadGen says "time to output token" in the percentiles, "Time per Output Token" above them
_TPOT_PERCENTILE = re.compile(r"^([\d.]+) percentile time to output token \(ns\)\s*:\s*(-?\d+)")
# SingleStream's (and MultiStream's) judged first-token percentile: "90.0th first token
# percentile latency (ns)", which the generic fallback would take for scenario_latency_ns
_JUDGED_TTFT = re.compile(r"^[\d.]+th first token percentile latency \(ns\)\s*:\s*(-?\d+)")
# LoadGen counts the SUT's errors (n_tokens < 2, a first token after completion, ...) but
# they do not make the result INVALID; the summary ends with how many
_ERRORS = re.compile(r"^(No|\d+) errors? encountered", re.IGNORECASE)
_SECTIONS = {"Early Stopping Result:": "early_stopping",
             "TTFT Early Stopping Result:": "early_stopping_ttft",
             "TPOT Early Stopping Result:": "early_stopping_tpot"}


def _number(text: str):
    try:
        return float(text)
    except ValueError:
        return None


def parse_summary(text: str) -> dict:
    """What LoadGen's summary says: its scenario, result (VALID/INVALID), every rule with
    its outcome (and the failed ones' names as printed: "Min duration", "Performance
    constraints", "Early stopping"), its recommendations, the early-stopping percentile
    estimates and the latency percentiles (ns, keyed "90", "99.9": JSON keeps them) and the
    headline figures.

    A token-mode log adds, and only it (today's logs parse to the same dict as before, so
    read `s.get("token_mode", False)`): token_mode True; ttft_percentiles_ns and
    tpot_percentiles_ns keyed as percentiles_ns (empty for Offline, which has no first
    token); early_stopping_ttft / early_stopping_tpot and their _lines, each bound's section
    apart (early_stopping stays empty); errors, LoadGen's error count; and in figures the
    _TOKEN_FIGURES (min/max/mean TTFT and TPOT, token rates, the two bounds) and
    SingleStream's judged first-token percentile as scenario_first_token_latency_ns."""
    out: dict = {"result": None, "rules": {}, "failed_rules": [], "recommendations": [],
                 "early_stopping": {}, "percentiles_ns": {}, "figures": {},
                 "early_stopping_lines": []}
    tokens: dict = {"ttft_percentiles_ns": {}, "tpot_percentiles_ns": {},
                    "early_stopping_ttft": {}, "early_stopping_ttft_lines": [],
                    "early_stopping_tpot": {}, "early_stopping_tpot_lines": []}
    token_mode, errors = False, None
    section = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("Recommendations:"):
            section = "recommendations"
            continue
        if stripped in _SECTIONS:
            section = _SECTIONS[stripped]
            token_mode |= section != "early_stopping"
            continue
        if stripped.startswith("====="):
            section = None
            continue
        if section == "recommendations" and stripped.startswith("*"):
            out["recommendations"].append(stripped.lstrip("* ").strip())
            continue
        if section is not None and section.startswith("early_stopping") and stripped:
            into = out if section == "early_stopping" else tokens
            into[section + "_lines"].append(stripped.lstrip("* ").strip())
            m = _ESTIMATE.search(stripped)
            if m:
                into[section][f"{float(m.group(1)):g}"] = int(m.group(2))
            continue
        rule = _RULE.match(line)
        if rule:
            ok = rule.group(2).lower() == "yes"
            out["rules"][rule.group(1).strip()] = ok
            if not ok:
                out["failed_rules"].append(rule.group(1).strip())
            continue
        m = _ERRORS.match(stripped)
        if m:
            errors = 0 if m.group(1).lower() == "no" else int(m.group(1))
            continue
        key, sep, value = (part.strip() for part in line.partition(":"))
        if not sep:
            continue
        token = (_TTFT_PERCENTILE.match(stripped), _TPOT_PERCENTILE.match(stripped))
        if key == "Result is":
            out["result"] = value
        elif key == "Scenario":
            out["scenario"] = value
        elif _PERCENTILE.match(stripped):
            m = _PERCENTILE.match(stripped)
            out["percentiles_ns"][f"{float(m.group(1)):g}"] = int(m.group(2))
        elif key in _FIGURES and _number(value) is not None:
            out["figures"][_FIGURES[key]] = _number(value)
        elif any(token):
            m = token[0] or token[1]
            name = "ttft_percentiles_ns" if token[0] else "tpot_percentiles_ns"
            tokens[name][f"{float(m.group(1)):g}"] = int(m.group(2))
            token_mode = True
        elif key in _TOKEN_FIGURES and _number(value) is not None:
            out["figures"][_TOKEN_FIGURES[key]] = _number(value)
            token_mode = True
        elif _JUDGED_TTFT.match(stripped):  # before the fallback, which it would match
            out["figures"]["scenario_first_token_latency_ns"] = _number(value)
            token_mode = True
        elif key.endswith("percentile latency (ns)") and _number(value) is not None:
            out["figures"]["scenario_latency_ns"] = _number(value)  # the judged percentile
    if token_mode:
        out.update(tokens, token_mode=True, errors=errors)
    return out


# keys with a percentile in them too: result_first_token_99.00_percentile_latency_ns
_DETAIL = re.compile(r'"key": "([a-z0-9_.]+)", "value": ("[^"]*"|[^,]+)')


def detail_value(text: str, key: str):
    """One value of LoadGen's detail log (its :::MLLOG lines): result_query_count,
    generated_samples_per_query, result_99.00_percentile_latency_ns, num_errors, ...; None
    when absent."""
    for k, v in _DETAIL.findall(text):
        if k == key:
            v = v.strip()
            if v.startswith('"'):
                return v.strip('"')
            return int(float(v)) if _number(v) is not None and float(v).is_integer() \
                else _number(v)
    return None
