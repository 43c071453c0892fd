"""What `python -m engine tune` says: the recommendation in one sentence with its figures,
the default and the winner's gain over it, the Pareto front as a table, the constraints,
and every pruned candidate with why. Pure: a Tuning (engine.run.search.autotune's, read by its
fields) in, lines out."""

from __future__ import annotations

from engine.core.early_stopping import bound_claim, bound_short
from engine.present.tables import format_table

__all__ = ["recommendation", "query_count", "capped_note", "tune_lines", "fleet_lines", "fleet_best_lines",
           "models_lines", "fleet_conclusion"]


def _usd(x: float) -> str:
    return f"${x:,.2f}" if x >= 1 else f"${x:.3g}"


def _qps(q: float) -> str:
    return f"{q:,.1f}" if q < 100 else f"{q:,.0f}"


def _figures(c, bound_ms: float, shape: str | None) -> str:
    p99 = f" (LoadGen's p99 {c.p99_ms:,.3g} ms)" if c.p99_ms is not None else ""
    cost = ""
    if c.cost is not None and shape:
        cost = (f", {'at most ' * _capped(c)}{_usd(c.cost)} per 1 M on {shape}"
                f"{' (estimate)' if c.cost_note else ''}"
                + (": the max QPS is a lower bound" if _capped(c) else ""))
    return f"{_max(c)} QPS: {bound_short(bound_ms)}{p99}{cost}"


def _capped(c) -> bool:
    """VALID at the highest target a probe of its query count tests: a lower-bound max QPS,
    so an upper-bound cost per 1 M."""
    return c.search is not None and getattr(c.search, "capped", False)


def _max(c) -> str:
    """A confirmation's max QPS; '≥ ' before one VALID at the highest target a probe of its
    query count tests (engine/run/search/max_qps.py: its max is a lower bound)."""
    return f"{'≥ ' * _capped(c)}{_qps(c.qps)}"


def query_count(t) -> int | None:
    """The queries every Server test of the tuning ran (None: stored before it was fixed)."""
    return next((x.search.query_count for x in (*t.confirmed, t.default)
                 if x.search is not None and x.search.query_count), None)


def capped_note(t) -> str | None:
    """Confirmations VALID at the highest target a probe of the tuning's query count tests
    (engine/run/search/max_qps.py): their max QPS is a lower bound, so a ranking among them is
    not settled; None when none was."""
    capped = [x for x in (*t.confirmed, t.default)
              if x.search is not None and getattr(x.search, "capped", False)]
    if not capped:
        return None
    n, count = len(dict.fromkeys(x.candidate for x in capped)), query_count(t)
    probe = f"a probe of {count:,} queries" if count else "a probe"
    return (f"{n} confirmation{'s were' if n != 1 else ' was'} VALID at the highest target "
            f"{probe} tests under the bound ({_qps(capped[0].qps)} QPS): such a max QPS is "
            "at least that, and no ranking among such is settled; more queries a probe "
            "(--search-queries) reach higher rates")


def recommendation(t, shape: str | None) -> str:
    """'torch onnxruntime fp32, max batch 4, 2 threads: 212 QPS: p99 ≤ 50 ms at 99 %
    confidence (LoadGen's p99 41 ms), $0.11 per 1 M on c6i.4xlarge'."""
    if t.winner is None:
        return (f"no configuration met the p99 bound of {t.bound_ms:g} ms"
                + ("" if shape or t.objective == "qps" else " on a priced shape"))
    return f"{t.winner.candidate.label()}: {_figures(t.winner, t.bound_ms, shape)}"


def _default_line(t, shape: str | None) -> str:
    d = t.default
    head = f"default ({d.candidate.label()}): "
    if d.search is None and d.closed.status == "ok":
        return head + (f"closed-loop p99 {d.closed.p99_ms:,.3g} ms at batch "
                       f"{d.candidate.max_batch}, already over the {t.bound_ms:g} ms bound: "
                       "no Server test could meet it")
    if d.search is None:
        return head + f"its closed-loop probe ended {d.closed.status}: {d.closed.reason[:120]}"
    if d.qps is None:
        return head + f"no target QPS met the p99 bound of {t.bound_ms:g} ms"
    line = head + _figures(d, t.bound_ms, shape)
    if t.gain_pct is not None:
        what = "more QPS" if t.objective == "qps" else "cheaper per 1 M"
        line += f"; the winner is {t.gain_pct:,.1f}% {what}"
    return line


def tune_lines(t, *, shape: str | None, space: str) -> list[str]:
    """The whole report. space: the search space in words (the CLI's lists)."""
    lines = [f"recommendation: {recommendation(t, shape)}", _default_line(t, shape)]
    w = t.winner
    if w is not None and w.cost is not None and shape:
        lines.append("its cost: " + (w.cost_note or f"measured on {shape}'s whole machine"))
    lines.append("")
    if t.front:
        lines.append("Pareto front (p99 low, QPS high, cost low; none beats these on all "
                     "three):")
        rows = [[x.candidate.label(), _max(x),
                 f"{x.p99_ms:,.3f}" if x.p99_ms is not None else "",
                 ("≤ " * _capped(x) + _usd(x.cost) + (" est." if x.cost_note else ""))
                 if x.cost is not None else "",
                 "winner" if x is t.winner else "default" if x is t.default else ""]
                for x in t.front]
        lines += [format_table(["configuration", "max QPS", "p99 ms", "$ per 1 M", ""], rows),
                  ""]
    pruned = {c for c, _ in t.pruned}
    confirmed = {x.candidate for x in t.confirmed}
    rows = [[c.label(), f"{f.throughput:,.1f}" if f.throughput else "",
             f"{f.p99_ms:,.3g}" if f.p99_ms is not None else "",
             f.status if f.source == "measured" else f"stored {f.run_id[:8]}",
             "pruned" if c in pruned else "confirmed" if c in confirmed else "unconfirmed"]
            for c, f in t.closed]
    lines += ["closed-loop probes (each at its max batch):",
              format_table(["configuration", "samples/s", "p99 ms", "run", "then"], rows), ""]
    lines.append("confirmed with the max-QPS search:")
    for x in t.confirmed:
        lines.append(f"  {x.candidate.label()}: " + (
            _figures(x, t.bound_ms, shape) if x.qps is not None else
            f"no target met the bound ({x.search.stop_reason})" if x.search is not None
            else f"closed-loop probe ended {x.closed.status}"))
    lines.append(f"stopped: {t.stop_reason}")
    if getattr(t, "queries", None) is not None:  # engine/run/query_choice.QueryChoice
        lines.append(f"queries: {t.queries.text()}")
    if capped_note(t):
        lines.append(f"note: {capped_note(t)}")
    lines += ["", "constraints: " + "; ".join([
        f"Server {bound_claim(t.bound_ms, query_count(t))}",
        "objective: " + ("most QPS" if t.objective == "qps" else
                         f"least cost per 1 M on {shape}"),
        f"margin {t.margin:.1%}", space])]
    if t.pruned:
        lines.append(f"pruned ({len(t.pruned)}):")
        lines += [f"  {c.label()}: {why}" for c, why in t.pruned]
    else:
        lines.append("pruned: none")
    return lines


def fleet_lines(results, best) -> list[str]:
    """A fleet tuning's conclusion (engine.run.search.fleet_tune): each node kind's recommendation
    on its own shape, the cheapest per 1 M at the bound among them, and the cheapest per
    provider. results: NodeTuning each; best: their FleetBest."""
    lines = ["every node kind (each tuned on its own cores, priced on its own shape):"]
    for r in results:
        where = r.shape or f"{r.label} (no shape: not priced)"
        if r.tuning is None:
            lines.append(f"  {where}: not tuned: {r.error}")
        else:
            lines.append(f"  {where}: {recommendation(r.tuning, r.shape)}")
    return lines + fleet_best_lines(best)


def fleet_best_lines(best) -> list[str]:
    """The fleet's conclusion alone (the page shows the node kinds as a table above it):
    the cheapest per 1 M at the bound, and the cheapest per provider."""
    if best.cheapest is None:
        return ["cheapest per 1 M at the bound: none (no node kind's winner was priced)"]
    c = best.cheapest
    lines = [f"cheapest per 1 M at the bound: {c.shape}: "
             f"{recommendation(c.tuning, c.shape)}"]
    if len(best.per_provider) > 1:
        lines.append("best per provider: " + "; ".join(
            f"{provider}: {r.shape}, {'at most ' * _capped(r.tuning.winner)}"
            f"{_usd(r.tuning.winner.cost)} per 1 M"
            for provider, r in best.per_provider))
    return lines


def models_lines(tunings, shape: str | None) -> list[str]:
    """Several models tuned alike, side by side: each one's recommendation, then the model
    the objective prefers (most QPS; or least cost per 1 M among the priced). tunings:
    (model, Tuning) pairs, in the order tuned, all of one objective."""
    lines = ["every model (each tuned alone, same bound, objective and search space):"]
    lines += [f"  {m}: {recommendation(t, shape)}" for m, t in tunings]
    by_qps = tunings[0][1].objective == "qps"
    ranked = [(m, t.winner) for m, t in tunings if t.winner is not None
              and (by_qps or t.winner.cost is not None)]
    if not ranked:
        return lines + ["no model has a winner the objective can rank"]
    m, w = (max(ranked, key=lambda x: x[1].qps or 0.0) if by_qps else
            min(ranked, key=lambda x: x[1].cost))
    return lines + [f"{'most QPS' if by_qps else 'least cost per 1 M'} under the bound: "
                    f"{m}, {w.candidate.label()}"]


def fleet_conclusion(results, best) -> str:
    """A fleet tuning in one line, as a job's result says it: the cheapest per 1 M at the
    bound, and how many node kinds were tuned."""
    tuned = sum(1 for r in results if r.tuning is not None)
    head = f"{tuned} of {len(results)} node kinds tuned"
    if best.cheapest is None:
        return f"{head}; none has a priced winner under the bound"
    c = best.cheapest
    return f"{head}; cheapest per 1 M at the bound: {c.shape}: {recommendation(c.tuning, c.shape)}"
