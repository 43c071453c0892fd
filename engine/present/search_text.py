"""A search's conclusion in words: the line the job queue shows when a dashboard search ends
(a batch search's, a max-QPS search's, a tuning's), and the max-QPS search's headline the CLI
prints and the Deploy page captions. Pure: the searches' typed results in (engine/run/
search: SearchResult, QpsSearch, Tuning, read by their fields), text out.
"""

from __future__ import annotations

from engine.core.early_stopping import bound_claim
from engine.present.tune_text import recommendation

__all__ = ["batch_conclusion", "qps_summary", "qps_conclusion", "tune_conclusion"]


def _q(qps: float) -> str:
    return f"{qps:,.1f}" if qps < 100 else f"{qps:,.0f}"


def batch_conclusion(res, p99_bound_ms: float | None) -> str:
    """'optimal batch 16 (1,234.5 samples/s); largest batch with p99 <= 20 ms: 8; stopped:
    ...', or in fits mode 'largest batch that fits 5; stopped: ...'."""
    if res.fits_only:
        summary = (f"largest batch that fits {res.largest_fit}" if res.largest_fit
                   else "no batch size succeeded")
    else:
        summary = (f"optimal batch {res.best_batch} ({res.best_throughput:,.1f} samples/s)"
                   if res.best_batch else "no batch size succeeded")
    if p99_bound_ms is not None:
        summary += f"; largest batch with p99 <= {p99_bound_ms:g} ms: {res.p99_batch}"
    return f"{summary}; stopped: {res.stop_reason}"


def qps_summary(search, bound_ms: float) -> str:
    """'max 212 QPS: p99 ≤ 50 ms at 99 % confidence (LoadGen early stopping, 1,000 queries
    per probe, up to 2 over allowed); LoadGen's p99 there 41 ms; bracket [212, 223) after 7
    probes'."""
    n = len(search.probes)
    lo, hi = search.bracket
    bracket = f"[{_q(lo) if lo else '-'}, {_q(hi) if hi else '-'})"
    claim = bound_claim(bound_ms, search.query_count)
    if search.max_qps is None:
        return (f"no target QPS met {claim}; bracket {bracket} "
                f"after {n} probe{'s' * (n != 1)}")
    p99 = search.p99_ms
    at = f"; LoadGen's p99 there {p99:,.3g} ms" if p99 is not None else ""
    most = (" (the highest target a probe tests: the max is at least this)"
            if search.capped else "")
    return (f"max {'≥ ' * search.capped}{_q(search.max_qps)} QPS{most}: {claim}{at}; "
            f"bracket {bracket} after {n} probe{'s' * (n != 1)}")


def qps_conclusion(search, bound_ms: float) -> str:
    """The max-QPS search job's line: its summary and why it stopped."""
    return f"{qps_summary(search, bound_ms)}; stopped: {search.stop_reason}"


def tune_conclusion(t, shape: str | None) -> str:
    """A tuning job's line: the recommendation, the winner's gain over the default, why it
    stopped."""
    gain = f"; {t.gain_pct:,.1f}% over the default" if t.gain_pct is not None else ""
    return f"{recommendation(t, shape)}{gain}; stopped: {t.stop_reason}"
