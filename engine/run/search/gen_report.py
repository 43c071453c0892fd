"""A stored sweep of serving a language model (issue 38) as a document for someone without
the dashboard, HTML (self-contained, charts inlined, opens offline) or Markdown, saying what
the Deploy page's generation mode says of it:

- a max-rate search: its conclusion (the max rate under both bounds, goodput there), the
  probes, why it stopped, and what a token costs (USD per 1 M output and input tokens at the
  max and flat out, the cheapest per provider, measured or estimate with its assumption);
- a concurrency sweep: its conclusion, its points and the Pareto chart;
- a tuning: the recommendation, its gain over the default, every candidate with its outcome,
  the pruned ones with why, the Pareto front;
- any other sweep of genserve tests (a `genserve` launch): each test's verdict and figures;

and for a search the command that reproduces it. The search is replayed from its stored
tests (engine/run/search/gen_replays.py), as the page does: it lives beside the replays,
since engine/present imports nothing of engine/run; its words and chart are
engine/present's.
"""

from __future__ import annotations

import html

import pandas as pd

from engine.analysis.cost import resolve_shape
from engine.analysis.genserve_cost import cheapest_per_provider, token_serving_rows
from engine.core.errors import UserError
from engine.present.genserve_charts import pareto_chart
from engine.present.genserve_search_text import (BOUNDS_TEXT, concurrency_rows,
                                                 concurrency_summary, cost_rows_text,
                                                 front_rows, probe_rows, pruned_rows,
                                                 rate_summary, reproduce_command, tuning_rows,
                                                 tuning_summary)
from engine.present.genserve_text import headline, pareto_frame, test_label, verdict
from engine.present.report import check_format
from engine.run.search.gen_max_rate import figures_of
from engine.run.search.gen_replays import (estimate_source, gen_probes, replay_gen_rate,
                                           replay_gen_tune, replay_users, token_rates)
from engine.run.search.replays import (GEN_RATE_COMMAND, GEN_TUNE_COMMAND,
                                       GEN_USERS_COMMAND, request_fields)

__all__ = ["build_genserve_report"]


class _Doc:
    """Headings, paragraphs, tables and charts, written as Markdown or HTML."""

    def __init__(self, fmt: str):
        self.fmt, self.parts, self.first_chart = fmt, [], True

    def head(self, text: str, level: int = 2) -> None:
        self.parts.append(f"{'#' * level} {text}\n" if self.fmt == "md" else
                          f"<h{level}>{html.escape(text)}</h{level}>")

    def para(self, text: str) -> None:
        self.parts.append(f"{text}\n" if self.fmt == "md" else
                          f"<p>{html.escape(text)}</p>")

    def items(self, lines: list[str]) -> None:
        if self.fmt == "md":
            self.parts.append("\n".join(f"- {x.strip()}" for x in lines) + "\n")
        else:
            self.parts.append("<ul>" + "".join(f"<li>{html.escape(x.strip())}</li>"
                                               for x in lines) + "</ul>")

    def table(self, rows: list[dict]) -> None:
        if not rows:
            return
        df = pd.DataFrame(rows)
        if self.fmt == "md":
            cols = list(df.columns)
            lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
            lines += ["| " + " | ".join(str(v).replace("|", "/") for v in r) + " |"
                      for r in df.itertuples(index=False)]
            self.parts.append("\n".join(lines) + "\n")
        else:
            self.parts.append(df.to_html(index=False, escape=True, border=0))

    def chart(self, fig) -> None:
        if self.fmt == "html":
            self.parts.append(fig.to_html(full_html=False, include_plotlyjs=self.first_chart))
            self.first_chart = False

    def code(self, text: str) -> None:
        self.parts.append(f"```\n{text}\n```\n" if self.fmt == "md" else
                          f"<pre>{html.escape(text)}</pre>")

    def render(self, title: str) -> bytes:
        if self.fmt == "md":
            return (f"# {title}\n\n" + "\n".join(self.parts)).encode("utf-8")
        return ("<!doctype html><html><head><meta charset='utf-8'>"
                f"<title>{html.escape(title)}</title><style>body{{font-family:system-ui,"
                "sans-serif;max-width:80em;margin:2em auto}}td,th{{padding:0 .6em}}</style>"
                f"</head><body><h1>{html.escape(title)}</h1>" + "\n".join(self.parts)
                + "</body></html>").encode("utf-8")


def _asked(fields: dict) -> str:
    return (f"{fields['model']} on {fields['engine']} ({fields['precision']}, "
            f"{fields['threads']} thread(s), max {fields['max_num_seqs']} sequence(s)), "
            f"prompt {fields['prompt_len']} and output {fields['output_len']} tokens, bounds "
            f"p99 TTFT {fields['ttft_bound_ms']:g} ms and p99 TPOT "
            f"{fields['tpot_bound_ms']:g} ms ({fields['preset']}).")


def _rate(doc: _Doc, con, fields: dict, probes) -> None:
    res, offline = replay_gen_rate(fields, probes)
    doc.para(rate_summary(res, figures_of, fields["ttft_bound_ms"], fields["tpot_bound_ms"]))
    doc.para(f"Estimate from {estimate_source(fields)}. Stopped: {res.stop_reason}. "
             f"{BOUNDS_TEXT[0].upper()}{BOUNDS_TEXT[1:]}.")
    doc.head("Probes", 3)
    doc.table(probe_rows(res, figures_of))
    if res.best is None:
        return
    from store.prices import effective_catalog

    catalog, _ = effective_catalog(con)
    rows = token_serving_rows(catalog, token_rates(res.best, offline))
    doc.head("Cost per 1 M tokens (whole machines; the cheapest per provider)", 3)
    doc.items(cost_rows_text(cheapest_per_provider(rows), res.capped)
              or ["not priced: a figure from this machine carries over to no shape"])
    doc.para("Per 1 M input tokens counts the same machine-hours per prompt token: not to "
             "be added to the output figure.")


def _users(doc: _Doc, fields: dict, probes, tests) -> None:
    c = replay_users(fields, probes)
    doc.para(concurrency_summary(c, figures_of))
    doc.table(concurrency_rows(c.points, figures_of, c.front))
    points = pareto_frame(tests)
    if len(points) >= 2:
        doc.chart(pareto_chart(points, "tokens/s per user against tokens/s per machine"))


def _tune(doc: _Doc, con, fields: dict, probes) -> None:
    from store.prices import effective_catalog

    catalog, _ = effective_catalog(con)
    try:
        machine = (resolve_shape(fields["machine_shape"], catalog)
                   if fields.get("machine_shape") else None)
    except UserError:
        machine = None
        doc.para(f"{fields['machine_shape']} is no longer in the price catalog: no cost.")
    t = replay_gen_tune(fields, probes, machine)
    doc.para(tuning_summary(t, fields["ttft_bound_ms"], fields["tpot_bound_ms"]))
    if t.gain_pct is not None:
        doc.para(f"Gain over the default ({t.default.candidate.label()}): "
                 f"{t.gain_pct:+,.1f} %.")
    doc.head("Candidates", 3)
    doc.table(tuning_rows(t))
    if t.pruned:
        doc.head(f"Pruned ({len(t.pruned)})", 3)
        doc.table(pruned_rows(t))
    if t.front:
        doc.head("Pareto front" + (f" (priced on {machine.label})" if machine else ""), 3)
        doc.table(front_rows(t))


def _tests(doc: _Doc, tests) -> None:
    for row in tests.to_dict("records"):
        doc.head(test_label(row), 3)
        doc.para(verdict(row)[1])
        if row.get("requests"):
            doc.items([f"{label}: {value}" for label, value, _ in headline(row)])


def build_genserve_report(con, sweep_id: str, fmt: str = "html") -> bytes:
    """The sweep's search or tests, UTF-8 encoded; UserError (field "sweep") when it holds
    no genserve test."""
    from store.genserve import sweep_tests

    check_format(fmt)
    tests = sweep_tests(con, sweep_id)
    if tests.empty:
        raise UserError(f"sweep: {sweep_id!r} holds no serving test of a language model; "
                        "allowed: a sweep of the Deploy page's generation mode or of "
                        "`python -m engine genserve*`", field="sweep")
    row = con.execute("SELECT command FROM sweeps WHERE sweep_id = ?", [sweep_id]).fetchone()
    command = (row[0] if row else "") or ""
    fields = request_fields(command)
    doc = _Doc(fmt)
    kind = next((p for p in (GEN_RATE_COMMAND, GEN_USERS_COMMAND, GEN_TUNE_COMMAND)
                 if command.startswith(p + " {")), None)
    if kind is None or not fields:
        _tests(doc, tests)
        if command:
            doc.head("Command", 2)
            doc.code(command)
        return doc.render(f"Serving a language model: sweep {sweep_id[:8]}")
    what = {GEN_RATE_COMMAND: "Max-rate search", GEN_USERS_COMMAND: "Concurrency sweep",
            GEN_TUNE_COMMAND: "Tuning"}[kind]
    doc.para(f"What was asked: {_asked(fields)} {len(tests)} stored tests (sweep "
             f"{sweep_id}).")
    probes = gen_probes(tests)
    if kind == GEN_RATE_COMMAND:
        _rate(doc, con, fields, probes)
    elif kind == GEN_USERS_COMMAND:
        _users(doc, fields, probes, tests)
    else:
        _tune(doc, con, fields, probes)
    doc.head("Reproduce", 2)
    doc.code(reproduce_command(kind, fields))
    return doc.render(f"{what}: {fields['model']}, sweep {sweep_id[:8]}")
