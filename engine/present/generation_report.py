"""A stored generation sweep as a document for someone without the dashboard (issue 37): the
command, every configuration with TTFT, TPOT and E2E p50/p90/p99, tokens/s and agreement
(a refused or invalid configuration with its reason, never left out), the verdicts per
metric with the rule they rest on, and the glossary of metric names; HTML (self-contained,
TPOT and output tokens/s charts inlined) or Markdown. The frames and sentences are the
Compare page's (engine/present/generation_frames.py), so the report says what it says.
"""

from __future__ import annotations

import html

import pandas as pd

from engine.core.errors import UserError
from engine.present.generation_charts import metric_vs
from engine.present.generation_frames import config_frame, glossary_frame, verdict_lines
from engine.present.report import check_format
from engine.present.tables import rule_line, sentence
from store.generation import generation_contests, generation_runs, generation_sweeps

__all__ = ["build_generation_report", "report_rows", "HEADERS"]

HEADERS = ["model", "runtime", "prompt", "output", "batch", "threads", "status",
           "TTFT ms p50 / p90 / p99", "TPOT ms p50 / p90 / p99", "E2E ms p50 / p90 / p99",
           "output tok/s", "prefill tok/s", "agreement", "reason"]


def _pct(r, m: str, fmt: str) -> str:
    vals = [r[f"{m}_p{p}_ms"] for p in (50, 90, 99)]
    return "-" if any(v is None or pd.isna(v) for v in vals) else \
        " / ".join(format(v, fmt) for v in vals)


def _num(v, fmt: str) -> str:
    return "-" if v is None or pd.isna(v) else format(v, fmt)


def report_rows(configs: pd.DataFrame) -> list[list[str]]:
    """config_frame rows as the report's table cells (HEADERS order)."""
    return [[r["model"], r["contender"], f"{r['prompt_len']:.0f}", f"{r['output_len']:.0f}",
             f"{r['batch_size']:.0f}", f"{r['intra_threads']:.0f}", r["status"],
             _pct(r, "ttft", ".2f"), _pct(r, "tpot", ".3f"), _pct(r, "e2e", ".1f"),
             _num(r["output_tok_s"], ",.1f"), _num(r["prefill_tok_s"], ",.0f"),
             _num(r["agreement"], ".1%"), r["reason"]]
            for r in configs.to_dict("records")]


def _md_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    cell = lambda t: str(t).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    return ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers),
            *("| " + " | ".join(cell(c) for c in row) + " |" for row in rows)]


def _html_table(headers: list[str], rows: list[list[str]]) -> str:
    esc = html.escape
    return ("<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in headers) + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{esc(str(c))}</td>" for c in row) + "</tr>"
                      for row in rows) + "</table>")


def _charts(configs: pd.DataFrame) -> str:
    """TPOT against prompt length at the smallest batch, output tokens/s against batch at
    the smallest prompt, for the first model, output length and thread count with figures."""
    ok = configs[configs.output_tok_s.notna()]
    if ok.empty:
        return ""
    first = ok.iloc[0]
    fixed = {"model": first.model, "output_len": first.output_len,
             "intra_threads": first.intra_threads}
    at = ok[(ok.model == first.model) & (ok.output_len == first.output_len)
            & (ok.intra_threads == first.intra_threads)]
    a = metric_vs(configs, "TPOT", "prompt_len", {**fixed, "batch_size": at.batch_size.min()})
    b = metric_vs(configs, "output tokens/s", "batch_size",
                  {**fixed, "prompt_len": at.prompt_len.min()})
    return (a.to_html(full_html=False, include_plotlyjs=True)
            + b.to_html(full_html=False, include_plotlyjs=False))


def build_generation_report(con, sweep_id: str, fmt: str = "html") -> bytes:
    """The generation sweep `sweep_id`, UTF-8 encoded; UserError (field "sweep") when it
    holds no generation run."""
    check_format(fmt)
    runs = generation_runs(con, sweep_id)
    if runs.empty:
        raise UserError(f"sweep: {sweep_id!r} holds no generation run; allowed: a sweep of "
                        "`python -m engine generate` or the Run page's Generate text",
                        field="sweep")
    sweeps = generation_sweeps(con)
    command = next((c for s, c in zip(sweeps.sweep_id, sweeps.command) if s == sweep_id), "")
    configs = config_frame(runs)
    rule, contests = generation_contests(con, sweep_id)
    lines = verdict_lines(contests)
    rows = report_rows(configs)
    gloss = glossary_frame()
    title = f"Text generation report: sweep {sweep_id}"
    note = ("Figures: medians over each configuration's ok rounds of its runs' percentiles "
            "(each over that run's timed calls). A round that failed or whose tokens "
            "disagreed with the reference is counted in status and never averaged in.")
    if fmt == "md":
        return "\n".join([
            f"# {title}", "", f"`{command}`" if command else "", "", note, "",
            *_md_table(HEADERS, rows), "", "## Verdicts per metric", "",
            *(f"- {line}" for line in lines), "", sentence(rule_line(rule)), "",
            "## Glossary", "", *_md_table(list(gloss.columns), gloss.values.tolist()),
            ""]).encode("utf-8")
    esc = html.escape
    return ("<!doctype html><html><head><meta charset='utf-8'>"
            f"<title>{esc(title)}</title><style>body{{font-family:system-ui,sans-serif;"
            "max-width:90em;margin:2em auto}td,th{padding:0 0.6em;text-align:left}</style>"
            f"</head><body><h1>{esc(title)}</h1><pre>{esc(command)}</pre><p>{esc(note)}</p>"
            + _html_table(HEADERS, rows) + _charts(configs)
            + "<h2>Verdicts per metric</h2><ul>"
            + "".join(f"<li>{esc(line)}</li>" for line in lines)
            + f"</ul><p>{esc(sentence(rule_line(rule)))}</p><h2>Glossary</h2>"
            + _html_table(list(gloss.columns), gloss.values.tolist())
            + "</body></html>").encode("utf-8")
