"""The offline report's content (ReportData, gathered by engine/present/report.py) written
as one self-contained HTML file or as Markdown. Rendering only: no store reads here.

Every text that came from the database is escaped here, in one place per format: model
names, CPU models and stored commands are written by whoever ran or imported the sweep.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

import pandas as pd

from engine.analysis.price_age import MAX_AGE_MONTHS
from engine.present.report_board import BOARD_HEADERS, BoardData
from engine.present.report_ceilings import CEILING_HEADERS, CeilingData, ceiling_cells
from engine.present.tables import FIGURES_NOTE, TOKENS_TITLE, row_label, sentence

__all__ = ["ReportData", "CostData", "to_html", "to_markdown"]


@dataclass(frozen=True)
class CostData:
    """Cost per 1 M inferences of each configuration on the priced machines."""

    machine: str = ""  # the default shape's label
    # analysis.cost_machines.machine_rows rows, with the configuration
    rows: list[dict] = field(default_factory=list)
    prices: list = field(default_factory=list)  # the Machines priced, default shape first
    measured_on: str = ""
    assumptions: list[str] = field(default_factory=list)
    skipped: str = ""  # why no cost is shown, when none is
    stale: list[str] = field(default_factory=list)  # prices priced here over 6 months old
    today: str = ""  # the day their ages were judged on


@dataclass(frozen=True)
class ReportData:
    """Everything one report says, figures already computed and formatted by the functions
    the pages use; the renderers below only lay it out."""

    sweep_id: str
    info: dict
    runs: int
    ok: int
    models: list[str]
    contenders: list[str]
    latency: pd.DataFrame
    best: list[tuple]
    rounds: int
    throughput: tuple[list[str], list]  # compare_grid columns and rows, as throughput
    sentences: list[str]
    notes: list[tuple[str, str]]
    noise: object  # engine.analysis.noise.NoiseModel, or None with fewer than 2 rounds
    noise_lines: list[str]  # the noise pairing leaves and the drift, in words
    rule_text: str  # what the verdicts rest on
    contention: list[str]  # shared versus dedicated, when the sweep measured it
    setting_note: str
    charts: list  # Plotly figures, in the Compare page's order
    chart_note: str
    efficiency: pd.DataFrame
    cost: CostData
    systems: pd.DataFrame
    software: list[dict]
    user_models: pd.DataFrame  # the users' own models measured: format, origin, SHA-256
    policy_lines: list[str]
    command: str
    command_note: str
    # every configuration against its machine's calibrated peak, and the roofline
    ceilings: CeilingData = field(default_factory=CeilingData)
    # issue 28: each configuration's energy reading with its tag, or why it is absent
    energy: tuple[str, ...] = ()
    # each configuration over its own rounds (frames.raw_frame): the cells' raw figures
    raw: pd.DataFrame = field(default_factory=pd.DataFrame)
    # token models' rows as tokens/s (compare_grid per_token): empty without one
    tokens: tuple = ((), ())
    board: BoardData | None = None  # a group's benchmark states, when asked for


ENERGY_NOTE = ("measured in a loop of its own after each timed one, so the latencies above "
               "never shared a second with it; a RAPL package counter counts every process "
               "on the package")


# -- HTML ---------------------------------------------------------------------------------

# auto-fill, not auto-fit: each figure is drawn as soon as it is parsed, when it is the only
# item in the grid, and auto-fit would give it the whole width it then keeps.
_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem auto;
       max-width: 1280px; padding: 0 1rem; color: #1f2328; line-height: 1.45; }
h1 { font-size: 1.7rem; margin-bottom: .2rem; } h2 { margin-top: 2.2rem; border-bottom:
  1px solid #d0d7de; padding-bottom: .2rem; }
.sub { color: #59636e; margin-top: 0; }
table { border-collapse: collapse; margin: .6rem 0; font-size: .92rem; }
th, td { border: 1px solid #d0d7de; padding: .3rem .6rem; text-align: left; vertical-align: top; }
th { background: #f6f8fa; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.best { background-color: #d4f4dd; font-weight: bold; }
.caption { color: #59636e; font-size: .88rem; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 1rem; }
.metric { display: inline-block; margin-right: 2.5rem; }
.metric b { font-size: 1.5rem; display: block; }
pre { background: #f6f8fa; padding: .8rem; overflow-x: auto; white-space: pre-wrap; }
@media print { .charts { display: block; } }
"""


def _e(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _gib(memory_bytes) -> str:
    return "" if memory_bytes is None or pd.isna(memory_bytes) else \
        f"{memory_bytes / 2**30:.1f}"


def _is_number(text: str) -> bool:
    """A figure (aligned right), marks, range and percent aside: "★ 10.15 [10.1-10.2]"."""
    t = text.lstrip("★≈= ").replace(",", "").split(" ")[0].rstrip("%")
    try:
        float(t)
        return True
    except ValueError:
        return False


def _table(headers: list[str], rows: list[list], best: set | None = None,
           text_cols: tuple[int, ...] = ()) -> str:
    """An escaped HTML table; best: (row, column) cells to mark; numbers align right but in
    text_cols (a price's date reads as a number)."""
    best = best or set()
    out = ["<table><thead><tr>", *(f"<th>{_e(h)}</th>" for h in headers), "</tr></thead><tbody>"]
    for ri, row in enumerate(rows):
        out.append("<tr>")
        for ci, cell in enumerate(row):
            text = "" if cell is None or (isinstance(cell, float) and cell != cell) else str(cell)
            number = ci and ci not in text_cols and _is_number(text)
            cls = [c for c, on in (("num", number), ("best", (ri, ci) in best)) if on]
            out.append(f"<td class=\"{' '.join(cls)}\">{_e(text)}</td>" if cls
                       else f"<td>{_e(text)}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _title(rep: ReportData) -> str:
    models = ", ".join(rep.models) or "no runs"
    fws = " vs ".join(rep.contenders)
    return f"{models}: {fws}" if fws else models


def _date(rep: ReportData) -> str:
    return str(rep.info["created_at"])[:16] + " UTC"


def _noise_text(rep: ReportData) -> list[str]:
    if not rep.noise_lines:
        return ["One round per configuration, or one configuration: differences are not "
                "tested for significance (run at least 2 rounds of 2 configurations)."]
    return [sentence(line) for line in rep.noise_lines]


def _latency_rows(rep: ReportData) -> tuple[list[str], list[list], set]:
    df = rep.latency
    headers = list(df.columns)
    cells = {(ri, headers.index(col)) for ri, col in rep.best}
    return headers, df.astype(object).values.tolist(), cells


def _throughput_rows(rep: ReportData, grid=None) -> tuple[list[str], list[list], set]:
    cols, grid = grid or rep.throughput
    rows, best = [], set()
    for ri, (contest, cells, winner) in enumerate(grid):
        rows.append([row_label(contest.row), contest.row[2], contest.row[3], *cells])
        if winner in cols:
            best.add((ri, 3 + cols.index(winner)))
    return ["model", "batch", "threads", *cols], rows, best


def _machine_line(rep: ReportData) -> str:
    """One line per machine: CPU, cores, memory, OS, Python; then software and commit."""
    parts = []
    for s in rep.systems.itertuples():
        mem = f"{_gib(s.memory_bytes)} GiB" if _gib(s.memory_bytes) else "memory unknown"
        parts.append(f"{s.cpu_model} ({s.physical_cores} physical / {s.logical_cores} "
                     f"logical cores, {s.usable_cores} usable), {mem}, {s.os}, "
                     f"Python {s.python}")
    # Two frameworks' workers report shared packages (numpy) alike: each version once.
    software = ", ".join(dict.fromkeys(
        f"{p} {'/'.join(v)}" for sw in rep.software for p, v in sw["versions"].items()))
    commits = sorted({c for sw in rep.software for c in sw["commits"]})
    line = "; ".join(parts) or "machine not recorded"
    if software:
        line += f"; {software}"
    if commits:
        line += f"; commit {', '.join(commits)}"
    return line


def to_html(rep: ReportData) -> str:
    out = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
           "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
           f"<title>{_e(_title(rep))} · benchmark report</title>",
           f"<style>{_CSS}</style></head><body>",
           f"<h1>{_e(_title(rep))}</h1>",
           f"<p class=\"sub\">Inference benchmark · sweep <code>{_e(rep.sweep_id)}</code> · "
           f"{_e(_date(rep))} · {rep.runs} runs ({rep.ok} successful) over {rep.info['rounds']} "
           "round(s)</p>"]

    out.append("<h2>Comparison</h2>")
    headers, rows, best = _latency_rows(rep)
    out.append(f"<h3>Median latency per batch [ms], lower is better</h3>"
               f"{_table(headers, rows, best)}")
    headers, rows, best = _throughput_rows(rep)
    out.append("<h3>Throughput [samples/s] over the measured time, higher is better</h3>"
               f"{_table(headers, rows, best)}")
    if rep.tokens[1]:
        headers, rows, best = _throughput_rows(rep, rep.tokens)
        out.append(f"<h3>{_e(TOKENS_TITLE[0].upper() + TOKENS_TITLE[1:])}</h3>"
                   f"{_table(headers, rows, best)}")
    out.append(f"<p class=\"caption\">Cells over up to {rep.rounds} rounds: "
               f"{_e(FIGURES_NOTE)}. ★ best in row (by latency) · ≈ no decision against the "
               "best · = equivalent to the best within the margin · ? noisy: rounds disagree "
               "by over 10 % or a round's IQR/median or tail was high; noisy rounds are kept "
               "· (n status) rounds that broke a rule or failed, left out.</p>")
    if not rep.raw.empty:
        out.append("<details><summary>Raw figures: each configuration over its own rounds "
                   "(geometric mean and every round's median, not drift-adjusted)</summary>"
                   + _table(list(rep.raw.columns), rep.raw.values.tolist()) + "</details>")
    if rep.sentences:
        out.append("<h3>Verdicts</h3><ul>"
                   + "".join(f"<li>{_e(s)}</li>" for s in rep.sentences) + "</ul>"
                   + f"<p class=\"caption\">{_e(sentence(rep.rule_text))}"
                   "</p>")
    for model, note in rep.notes:
        out.append(f"<p class=\"caption\"><b>{_e(model)}</b> across frameworks: "
                   f"{_e(note)}</p>")
    if rep.noise is not None:
        out.append(f"<div class=\"metric\">measurement noise (what pairing leaves)"
                   f"<b>±{rep.noise.residual_pct:.1f} %</b></div>"
                   f"<div class=\"metric\">machine drift between rounds"
                   f"<b>{rep.noise.drift_pct:.1f} %</b></div>")
    out += [f"<p>{_e(line)}</p>" for line in _noise_text(rep)]
    if rep.contention:
        out.append("<h3>Shared versus dedicated</h3><p class=\"caption\">"
                   f"{_e(rep.contention[0])}</p><ul>"
                   + "".join(f"<li>{_e(line.strip())}</li>" for line in rep.contention[1:])
                   + "</ul>")

    out.append("<h2>Charts</h2>")
    if rep.setting_note:
        out.append(f"<p class=\"caption\">{_e(rep.setting_note)}</p>")
    out.append(f"<p class=\"caption\">{_e(rep.chart_note)}</p><div class=\"charts\">")
    for i, fig in enumerate(rep.charts):
        # plotly.js once, with the first figure: the file stays self-contained and the
        # others reuse it. Fixed div ids keep the file byte-for-byte reproducible.
        out.append("<div>" + fig.to_html(full_html=False, include_plotlyjs=i == 0,
                                         div_id=f"chart-{i + 1}",
                                         config={"displaylogo": False}) + "</div>")
    out.append("</div>")
    if not rep.efficiency.empty:
        eff = rep.efficiency
        out.append("<h3>Thread scaling efficiency</h3>" + _table(
            list(eff.columns),  # its throughput column names samples or sequences
            [[model, contender, threads, f"{tp:,.1f}", f"{share:.0%}"]
             for model, contender, threads, tp, share in eff.values.tolist()]))

    if rep.board is not None:
        b = rep.board
        out.append(f"<h2>Benchmark states: {_e(b.group)}</h2><p class=\"caption\">"
                   f"{_e(b.policy)}</p>" + _table(list(BOARD_HEADERS), list(b.rows),
                                                  text_cols=(1, 2, 5, 6))
                   + f"<p class=\"caption\">{_e(b.caption)}</p>")
    if rep.ceilings.rows:
        out.append("<h2>Against the machine's ceilings</h2>"
                   + _table(CEILING_HEADERS, ceiling_cells(rep.ceilings), text_cols=(7,))
                   + f"<p class=\"caption\">{_e(rep.ceilings.caption)}</p>")

    out.append("<h2>Cost per 1 M inferences</h2>")
    c = rep.cost
    if c.skipped:
        out.append(f"<p>{_e(c.skipped)}</p>")
    else:
        out.append(f"<p>Priced on <b>{_e(c.machine)}</b>, the catalog shape the Cost page "
                   "preselects (OCI with 16 OCPUs, the size users compare with AWS's "
                   "32-vCPU machines), and on the closest-size x86 machine of each other "
                   "provider; their memory differs, and each price includes its machine's "
                   f"(memory column below). {_e(c.measured_on)}</p>")
        out.append(_table(
            ["model", "framework (runtime)", "batch", "machine", "throughput [samples/s]",
             "USD per 1 M inferences", "monthly USD (730 h)"],
            [[r["model"], r["contender"], r["batch_size"], r["machine"],
              f"{r['throughput']:,.1f}" + (" (est.)" if r["estimate"] else ""),
              f"{r['cost_per_million']:,.4f}", f"{r['monthly']:,.2f}"] for r in c.rows]))
        if c.assumptions:
            out.append("<p class=\"caption\">Assumption (est.): "
                       + _e(c.assumptions[0].removeprefix("estimate: "))
                       + (" (and likewise for the other configurations and sizes, each from "
                          "its own measured figure)." if len(c.assumptions) > 1 else ".")
                       + "</p>")
        out.append("<h3>Prices: sources and dates</h3>" + _table(
            ["machine", "vCPUs", "memory [GB]", "USD/hour", "basis", "source", "as of",
             "secondary source", "check at (first party)"],
            [[m.label, m.vcpus, f"{m.memory_gb:g}", f"{m.usd_per_hour:.4f}", m.price_basis,
              m.source, m.as_of, "yes" if m.secondary else "no", m.first_party]
             for m in c.prices],
            text_cols=(6,)))
        if c.stale:
            out.append(f"<p class=\"caption\"><b>Older than {MAX_AGE_MONTHS} months on "
                       f"{_e(c.today)} or "
                       "undated:</b> " + "; ".join(_e(s) for s in c.stale) + ". Check them "
                       "at the provider's own list (\"check at\") before a budget rests on "
                       "them.</p>")

    out.append("<h2>Machine and software</h2>")
    if rep.systems.empty:
        out.append("<p>No machine was recorded for these runs.</p>")
    out.append(_table(
        ["host", "CPU model", "sockets", "cores physical", "logical", "usable",
         "memory [GiB]", "accelerator", "OS", "platform", "Python", "runs"],
        [[s.hostname, s.cpu_model, s.sockets, s.physical_cores, s.logical_cores,
          s.usable_cores, _gib(s.memory_bytes), s.accelerator or "none", s.os, s.platform,
          s.python, s.runs] for s in rep.systems.itertuples()]))
    out.append(_table(
        ["framework", "package versions", "git commit", "runs"],
        [[sw["framework"], ", ".join(f"{p} {'/'.join(v)}" for p, v in sw["versions"].items()),
          ", ".join(sw["commits"]) or "not recorded", sw["runs"]] for sw in rep.software]))

    if not rep.user_models.empty:
        out.append("<h2>Your models</h2>")
        out.append(_table(["model", "format", "from", "inputs", "SHA-256", "bytes", "runs"],
                          _user_model_rows(rep), text_cols=(2, 4)))

    out.append("<h2>Measurement policy</h2><ul>"
               + "".join(f"<li>{_e(line)}</li>" for line in rep.policy_lines) + "</ul>")
    if rep.energy:
        out.append(f"<h2>Energy</h2><p>{_e(ENERGY_NOTE)}</p><ul>"
                   + "".join(f"<li>{_e(line)}</li>" for line in rep.energy) + "</ul>")

    out.append("<h2>Reproduce</h2>")
    if rep.command:
        out.append(f"<pre><code>{_e(rep.command)}</code></pre>")
    out.append(f"<p class=\"caption\">{_e(rep.command_note)}. Add <code>--db PATH</code> to "
               "store the new runs elsewhere; compare them with <code>python -m engine "
               "compare</code>.</p>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


# -- Markdown -----------------------------------------------------------------------------

def _md(value) -> str:
    """Text from the database inside Markdown: HTML special characters escaped (GitHub
    renders inline HTML), pipes (they would split a table cell) and backticks (a code
    span) escaped, one line."""
    text = "" if value is None else str(value)
    return (html.escape(text, quote=False).replace("|", "\\|").replace("`", "\\`")
            .replace("\n", " "))


def _md_table(headers: list[str], rows: list[list], best: set) -> list[str]:
    lines = ["| " + " | ".join(_md(h) for h in headers) + " |",
             "|" + "|".join("---" if i < 1 else "---:" for i in range(len(headers))) + "|"]
    for ri, row in enumerate(rows):
        cells = []
        for ci, cell in enumerate(row):
            text = _md(cell)
            cells.append(f"**{text}**" if (ri, ci) in best and text else text)
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in the text, so it cannot end early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _user_model_rows(rep: ReportData) -> list[list]:
    return [[m.model, m.model_format, m.model_origin, m.model_inputs,
             m.model_sha256 if isinstance(m.model_sha256, str) else "not loaded",
             "" if m.model_bytes != m.model_bytes or m.model_bytes is None
             else f"{int(m.model_bytes):,}", m.runs] for m in rep.user_models.itertuples()]


def to_markdown(rep: ReportData) -> str:
    out = [f"## Benchmark: {_md(_title(rep))}", "",
           f"Inference sweep {_md(rep.sweep_id)} · {_date(rep)} · "
           f"{rep.runs} runs ({rep.ok} successful) over {rep.info['rounds']} round(s)", "",
           f"Median latency per batch [ms], lower is better, over up to {rep.rounds} "
           f"rounds: {FIGURES_NOTE}; ★ best in row (bold), ≈ no decision against the best, "
           "= equivalent within the margin, ? noisy.", ""]
    headers, rows, best = _latency_rows(rep)
    out += _md_table(headers, rows, best) + [""]
    if rep.tokens[1]:
        headers, rows, best = _throughput_rows(rep, rep.tokens)
        out += [_md(TOKENS_TITLE[0].upper() + TOKENS_TITLE[1:]) + ":", ""]
        out += _md_table(headers, rows, best) + [""]
    if not rep.raw.empty:  # plain Markdown (a wiki may not render <details>)
        out += ["Raw figures: each configuration over its own rounds (geometric mean and "
                "every round's median, not drift-adjusted):", ""]
        out += _md_table(list(rep.raw.columns), rep.raw.values.tolist(), set()) + [""]
    if rep.sentences:
        out += [f"- {_md(s)}" for s in rep.sentences] + [""]
        out += [_md(sentence(rep.rule_text)), ""]
    out += [_md(line) for line in _noise_text(rep)] + [""]
    if rep.contention:
        out += [_md(rep.contention[0]), ""] + [f"- {_md(line.strip())}"
                                               for line in rep.contention[1:]] + [""]
    if rep.board is not None:
        out += [f"**Benchmark states: {_md(rep.board.group)}** ({_md(rep.board.policy)})", ""]
        out += _md_table(list(BOARD_HEADERS), list(rep.board.rows), set()) + [""]
        out += [_md(rep.board.caption), ""]
    if rep.ceilings.rows:
        out += ["**Against the machine's ceilings:**", ""]
        out += _md_table(CEILING_HEADERS, ceiling_cells(rep.ceilings), set()) + [""]
        out += [_md(rep.ceilings.caption), ""]
    out += [f"**Machine:** {_md(_machine_line(rep))}", ""]
    if rep.energy:
        out += [f"**Energy** ({_md(ENERGY_NOTE)}):", ""]
        out += [f"- {_md(line)}" for line in rep.energy] + [""]
    if not rep.user_models.empty:
        out += ["**Your models:**", ""]
        out += _md_table(["model", "format", "from", "inputs", "SHA-256", "bytes", "runs"],
                         _user_model_rows(rep), set()) + [""]
    if rep.command:
        fence = _fence(rep.command)
        out += [f"**Reproduce** ({_md(rep.command_note)}):", "", f"{fence}bash", rep.command,
                fence, ""]
    return "\n".join(out)
