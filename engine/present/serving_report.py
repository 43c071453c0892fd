"""A stored serving sweep (one Deploy launch, or one `python -m engine serve`) as a document
for someone without the dashboard: per LoadGen test its verdict with a reason per failed
rule, its figures, its percentiles and LoadGen's summary log; HTML (self-contained, the
latency distribution inlined, opens offline) or Markdown. The sentences and the chart are
engine/present/serving_text.py's, so the report says what the Deploy page says."""

from __future__ import annotations

import html

from engine.core.errors import UserError
from engine.present.report import check_format
from engine.present.serving_text import (failed_rule_reasons, headline, latency_distribution,
                                         percentile_table, run_label, verdict_text)
from engine.scenarios.serving.spec import SCENARIO_PERCENTILE
from store.runs import loadgen_log, run_samples
from store.serving import serving_runs

__all__ = ["build_serving_report"]


def _plain(markdown: str) -> str:
    return markdown.replace("**", "")


def build_serving_report(con, sweep_id: str, fmt: str = "html") -> bytes:
    """Every serving test of `sweep_id`, UTF-8 encoded; UserError (field "sweep") when the
    sweep holds none."""
    check_format(fmt)
    runs = serving_runs(con, sweep_id)
    if runs.empty:
        raise UserError(f"sweep: {sweep_id!r} holds no serving run; allowed: a sweep of the "
                        "Deploy page or of `python -m engine serve`", field="sweep")
    parts, first_chart = [], True
    for row in runs.sort_values("started_at").itertuples():
        _, verdict = verdict_text(row)
        reasons = failed_rule_reasons(row)
        figures = [f"{label}: {value}" for label, value, _ in headline(row)]
        pcts = percentile_table(row.summary)
        log = loadgen_log(con, row.run_id, "mlperf_log_summary.txt") or ""
        if fmt == "md":
            parts.append("\n".join([
                f"## {run_label(row)}", "", verdict, "",
                *(f"- {r}" for r in reasons), *([""] if reasons else []),
                *(f"- {f}" for f in figures), "",
                "| latency | ms |", "|---|---:|",
                *(f"| {p.latency} | {p.ms:.4f} |" for p in pcts.itertuples()), "",
                "```", log.strip(), "```", ""]))
            continue
        chart = ""
        if row.summary is not None:
            samples = run_samples(con, row.run_id)
            fig = latency_distribution(
                samples[samples.phase == "measure"].latency_ns, title="latency per query",
                percentile=SCENARIO_PERCENTILE.get(row.scenario),
                bound_ms=row.bound_ms if row.bound_ms == row.bound_ms else None)
            chart = fig.to_html(full_html=False, include_plotlyjs=first_chart)
            first_chart = False
        esc = lambda t: html.escape(_plain(t))  # noqa: E731
        parts.append("\n".join([
            f"<h2>{esc(run_label(row))}</h2>", f"<p>{esc(verdict)}</p>",
            "<ul>" + "".join(f"<li>{esc(r)}</li>" for r in reasons + figures) + "</ul>",
            "<table><tr><th>latency</th><th>ms</th></tr>" + "".join(
                f"<tr><td>{esc(p.latency)}</td><td>{p.ms:.4f}</td></tr>"
                for p in pcts.itertuples()) + "</table>",
            chart, f"<pre>{html.escape(log)}</pre>"]))
    title = f"Serving report: sweep {sweep_id[:8]}"
    if fmt == "md":
        return (f"# {title}\n\n" + "\n".join(parts)).encode("utf-8")
    return ("<!doctype html><html><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}</title><style>body{{font-family:system-ui,sans-serif;"
            "max-width:70em;margin:2em auto}}td,th{padding:0 1em;text-align:right}</style>"
            f"</head><body><h1>{html.escape(title)}</h1>" + "\n".join(parts)
            + "</body></html>").encode("utf-8")
