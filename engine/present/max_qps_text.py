"""What the CLI says after a max-QPS search: its probes as a table and the cost at the bound
(engine.analysis.serving_cost's figures) in sentences. Pure: no store, no Streamlit."""

from __future__ import annotations

from engine.analysis.serving_cost import ServingCost
from engine.core.early_stopping import held_text, probe_counts
from engine.present.tables import format_table

__all__ = ["probe_table", "cost_lines", "LOWER_BOUND"]


def probe_table(search, p99_ms) -> str:
    """One row per probe: its target, status, LoadGen's verdict and failed rules, completed
    samples/s, LoadGen's p99, the queries it ran, how many went over the bound (LoadGen's
    count, from each query's scheduled issue), how many its early stopping allowed and the
    percentile that held the bound to; the max marked. p99_ms(rec) -> ms or None."""
    rows = []
    for q, rec in search.probes:
        s = rec.serving or {}
        figures = s.get("figures") or {}
        done = figures.get("completed_samples_per_s")
        p99 = p99_ms(rec)
        n, over, allowed = probe_counts(s)
        rows.append([f"{q:,.1f}", rec.status, s.get("result") or "",
                     ", ".join(r.lower() for r in s.get("failed_rules") or ()),
                     f"{done:,.1f}" if done else "", f"{p99:,.3f}" if p99 is not None else "",
                     f"{n:,}" if n else "", f"{over:,}" if over is not None else "",
                     f"{allowed:,}" if allowed is not None else "", held_text(n),
                     "*" if search.max_qps is not None and q == search.max_qps
                     and rec is search.best else ""])
    return format_table(["target QPS", "status", "LoadGen", "failed rules",
                         "completed samples/s", "p99 ms", "queries", "over bound",
                         "allowed over", "held to", "max"], rows)


def _usd(x: float) -> str:
    """Cents for a bill, three significant digits for a small cost per 1 M."""
    return f"${x:,.2f}" if x >= 1 else f"${x:.3g}"


LOWER_BOUND = "the max QPS is a lower bound"


def cost_lines(c: ServingCost, bound_ms: float, lower_bound: bool = False) -> list[str]:
    """The cost at the bound, flat out and for the target rate, each with its basis.
    lower_bound: the search was VALID at the highest target it tests (its max is at least
    that), so the cost per 1 M within the bound and the bill are at most these."""
    m = c.machine
    most, least = ("at most ", "at least ") if lower_bound else ("", "")
    why = f": {LOWER_BOUND}" if lower_bound else ""
    lines = [f"cost on {m.label} (${m.usd_per_hour:,.4f}/h, {m.as_of}, whole machines):",
             f"  within p99 {bound_ms:g} ms: {least}{c.at_bound.throughput:,.1f} samples/s a "
             f"machine -> {most}{_usd(c.per_million_at_bound)} per 1 M inferences{why}"
             f" [{'estimate' if c.at_bound.estimate else 'measured'}: "
             f"{c.at_bound.assumption.removeprefix('estimate: ')}]"]
    if c.flat_out is not None:
        lines.append(f"  flat out (no bound): {c.flat_out.throughput:,.1f} samples/s -> "
                     f"{_usd(c.per_million_flat_out)} per 1 M "
                     f"[{'estimate' if c.flat_out.estimate else 'measured'}: "
                     f"{c.flat_out.assumption.removeprefix('estimate: ')}]; the bound costs "
                     f"{c.per_million_at_bound / c.per_million_flat_out:,.2f}x")
    else:
        lines.append("  flat out: no figure (no Offline run in this search and no closed-loop "
                     "run of this configuration on this machine)")
    if c.target_rps:
        lines.append(f"  {c.target_rps:,.6g} requests/s within the bound: {most}{c.machines} "
                     f"machine{'s' * (c.machines != 1)} x ${m.usd_per_hour:,.4f}/h x "
                     f"{c.hours:g} h = {most}{_usd(c.monthly)} a month{why}")
        if c.machines_flat_out is not None:
            lines.append(f"  (flat out, ignoring the bound: {c.machines_flat_out} machine"
                         f"{'s' * (c.machines_flat_out != 1)}, {_usd(c.monthly_flat_out)} a "
                         "month)")
    return lines
