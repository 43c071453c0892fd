"""What LoadGen writes back, read framework-free: a serving test's live figures (the
worker's `Progress` every LIVE_PROGRESS_S: `LatencyHistogram` keeps the SUT's latencies so
far, `live_text` words them) and its summary and detail logs (`parse_summary`,
`detail_value`), parsed here so the parent derives a run's figures from the logs it stores.
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
    headline figures."""
    out: dict = {"result": None, "rules": {}, "failed_rules": [], "recommendations": [],
                 "early_stopping": {}, "percentiles_ns": {}, "figures": {},
                 "early_stopping_lines": []}
    section = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("Recommendations:"):
            section = "recommendations"
            continue
        if stripped.startswith("Early Stopping Result:"):
            section = "early"
            continue
        if stripped.startswith("====="):
            section = None
            continue
        if section == "recommendations" and stripped.startswith("*"):
            out["recommendations"].append(stripped.lstrip("* ").strip())
            continue
        if section == "early" and stripped:
            out["early_stopping_lines"].append(stripped.lstrip("* ").strip())
            m = _ESTIMATE.search(stripped)
            if m:
                out["early_stopping"][f"{float(m.group(1)):g}"] = int(m.group(2))
            continue
        rule = _RULE.match(line)
        if rule:
            ok = rule.group(2).lower() == "yes"
            out["rules"][rule.group(1).strip()] = ok
            if not ok:
                out["failed_rules"].append(rule.group(1).strip())
            continue
        key, sep, value = (part.strip() for part in line.partition(":"))
        if not sep:
            continue
        if key == "Result is":
            out["result"] = value
        elif key == "Scenario":
            out["scenario"] = value
        elif _PERCENTILE.match(stripped):
            m = _PERCENTILE.match(stripped)
            out["percentiles_ns"][f"{float(m.group(1)):g}"] = int(m.group(2))
        elif key in _FIGURES and _number(value) is not None:
            out["figures"][_FIGURES[key]] = _number(value)
        elif key.endswith("percentile latency (ns)") and _number(value) is not None:
            out["figures"]["scenario_latency_ns"] = _number(value)  # the judged percentile
    return out


_DETAIL = re.compile(r'"key": "([a-z_]+)", "value": ("[^"]*"|[^,]+)')


def detail_value(text: str, key: str):
    """One value of LoadGen's detail log (its :::MLLOG lines): result_query_count,
    generated_samples_per_query, ...; None when absent."""
    for k, v in _DETAIL.findall(text):
        if k == key:
            v = v.strip()
            if v.startswith('"'):
                return v.strip('"')
            return int(float(v)) if _number(v) is not None and float(v).is_integer() \
                else _number(v)
    return None
