"""A serving test's figures, derived in the parent from its requests' raw readings
(GenServeResult.req_*), so a stored test can be derived again.

Per request (on the SUT's clock, from the moment it was handed the request: LoadGen counts
from its scheduled time, so these are lower bounds on LoadGen's own figures):
- TTFT = first token - issue; E2E = completion - issue;
- TPOT = (E2E - TTFT) / (tokens - 1), LoadGen's and vLLM's definition.
Over the test (its span: the first issue to the last completion):
- requests/s, output tokens/s (the machine's), input (prompt) tokens/s;
- goodput: requests that met both bounds (TTFT and TPOT) per second of the span, vLLM's
  `bench serve` goodput, and their share;
- tokens/s per user: the median request's decode rate, 1 / TPOT (what one user watching a
  stream sees), the x axis of a concurrency Pareto;
- p50/p90/p99 of TTFT, TPOT and E2E by LoadGen's own rule: of N sorted values, the one at
  index floor(N * p) (results.cc), not an interpolation. On a test's 459 requests the
  interpolated p99 sat between the 5th and 6th largest TTFT and read 2.9 % under LoadGen's
  (439.6 against 452.5 ms); by LoadGen's rule ours read 452.3 ms, so the two columns side
  by side differ only by what they measure (ours from the front's receipt, LoadGen's from
  its schedule).

Framework-free (numpy).
"""

from __future__ import annotations

import numpy as np

__all__ = ["request_figures", "test_figures", "PERCENTILES"]

PERCENTILES = (50, 90, 99)


def request_figures(issue, first, done, tokens) -> dict[str, np.ndarray]:
    """Per request: ttft_ns, e2e_ns, tpot_ns (NaN for a request of under 2 tokens)."""
    issue, first, done = (np.asarray(a, dtype=float) for a in (issue, first, done))
    n = np.asarray(tokens, dtype=float)
    ttft, e2e = first - issue, done - issue
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(n > 1, (e2e - ttft) / (n - 1), np.nan)
    return {"ttft_ns": ttft, "e2e_ns": e2e, "tpot_ns": tpot}


def _pct(values: np.ndarray, p: float) -> float | None:
    """LoadGen's percentile: the sorted value at index floor(N * p / 100)."""
    v = np.sort(values[~np.isnan(values)])
    return float(v[min(v.size - 1, int(v.size * p / 100))]) if v.size else None


def test_figures(issue, first, done, tokens, *, prompt_len: int, ttft_bound_ms: float,
                 tpot_bound_ms: float) -> dict:
    """The test's figures (keys as genserve_results' columns); {} for no request."""
    if len(issue) == 0:
        return {}
    r = request_figures(issue, first, done, tokens)
    span_s = (float(np.max(done)) - float(np.min(issue))) / 1e9
    good = ((r["ttft_ns"] <= ttft_bound_ms * 1e6)
            & (np.nan_to_num(r["tpot_ns"], nan=np.inf) <= tpot_bound_ms * 1e6))
    n, out_tokens = len(issue), float(np.sum(tokens))
    tpot50 = _pct(r["tpot_ns"], 50)
    figures = {"requests": n, "span_s": span_s,
               "requests_per_s": n / span_s if span_s > 0 else None,
               "output_tok_s": out_tokens / span_s if span_s > 0 else None,
               "input_tok_s": n * prompt_len / span_s if span_s > 0 else None,
               "good_requests": int(good.sum()), "good_share": float(good.mean()),
               "goodput_req_s": float(good.sum()) / span_s if span_s > 0 else None,
               "ttft_over": int(np.sum(r["ttft_ns"] > ttft_bound_ms * 1e6)),
               "tpot_over": int(np.sum(np.nan_to_num(r["tpot_ns"], nan=np.inf)
                                       > tpot_bound_ms * 1e6)),
               "user_tok_s": 1e9 / tpot50 if tpot50 else None}
    for name in ("ttft", "tpot", "e2e"):
        for p in PERCENTILES:
            v = _pct(r[f"{name}_ns"], p)
            figures[f"{name}_p{p}_ms"] = v / 1e6 if v is not None else None
    return figures
