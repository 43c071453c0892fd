"""A stored inference sweep as one document a stakeholder opens without a server.

HTML: a single self-contained file. plotly.js is inlined once (the first figure carries it,
the others reuse it) and the style uses system fonts, so the file opens offline and fetches
nothing. It holds the comparison table with its verdict sentences and the sweep's noise,
the Compare page's charts, the machine and software the runs ran on, the measurement
policy, the cost per 1 M inferences on the Cost page's default shape with each price's
source, date and the provider's own list to check it at (and which prices are older than
six months on the day the report is made), and the command that reproduces the sweep. Markdown: the table, the
sentences, the noise, one machine line and the command, for a pull request or a
wiki page.

Every figure comes from the functions the pages and `python -m engine compare` use
(the verdict from store.verdicts.sweep_verdicts, its words from engine.present), so the
report cannot disagree with them. This module
reads the store and decides what the report says (ReportData); engine/present/report_doc.py
writes it down and escapes what came from the database.
"""

from __future__ import annotations

import shlex
from collections import Counter
from dataclasses import replace
from datetime import date

import pandas as pd

from engine.analysis.cost import cpu_shapes, default_shape, equivalents
from engine.analysis.cost_machines import basis, machine_rows
from engine.analysis.price_age import age_text, stale_prices
from engine.present.charts import (latency_box, latency_vs_batch, scaling_vs_threads,
                                   speedup_heatmap, throughput_vs_batch)
from engine.present.frames import compare_frame, raw_frame, setting_choices
from engine.present.report_board import gather_board
from engine.present.report_ceilings import gather_ceilings
from engine.present.report_doc import CostData, ReportData, to_html, to_markdown
from engine.present.tables import (architecture_notes, compare_grid, contention_lines,
                                   noise_lines, row_text, rule_line)
from engine.scenarios import INFERENCE
from engine.core.budget import default_max_rounds
from engine.core.errors import UserError
from engine.core.limits import DEFAULT_ROUNDS, DEFAULT_VERDICT_MARGIN
from store.prices import effective_catalog
from engine.present.run_detail import energy_lines
from store.provenance import (sweep_configs, sweep_energy, sweep_info, sweep_policy,
                              sweep_software, sweep_user_models, sweep_systems)
from store.queries import (comparable_models, config_samples, config_summary,
                           machine_throughput, settings)
from store.sweep_ref import resolve_inference_sweep
from store.verdicts import sweep_verdicts

__all__ = ["build_report", "check_format", "REPORT_FORMATS"]

# format -> (MIME type, file suffix): what a download button or `--out` default needs.
REPORT_FORMATS = {"html": ("text/html", ".html"), "md": ("text/markdown", ".md")}
_MARKS = ("★ ", "≈ ", "= ")
_CMD_PREFIX = "python -m engine "


def check_format(fmt: str | None) -> str:
    """The format name, or UserError naming the field and the allowed values."""
    if fmt not in REPORT_FORMATS:
        raise UserError(f"format: {fmt!r} is not a report format; allowed: "
                        f"{', '.join(REPORT_FORMATS)}", field="format")
    return fmt


def build_report(con, sweep_id: str | None, fmt: str = "html",
                 today: date | None = None, group: str | None = None) -> bytes:
    """The report of one inference sweep, UTF-8 encoded. sweep_id: a full id or a unique
    prefix (None: the newest inference sweep); fmt: "html" or "md" (REPORT_FORMATS gives
    the MIME type); today: the day prices' ages are judged on (default: today). UserError
    (field "sweep" or "format") on a reference or format that cannot be reported.
    Deterministic: the same database on the same day gives the same bytes. group: also the
    board of this group's benchmark states (UserError, field "group", when it has none)."""
    check_format(fmt)
    board = None if group is None else gather_board(con, group)  # refused before the rest
    rep = _gather(con, resolve_inference_sweep(con, sweep_id), today or date.today())
    rep = rep if board is None else replace(rep, board=board)
    text = to_html(rep) if fmt == "html" else to_markdown(rep)
    return text.encode("utf-8")


def _gather(con, sweep_id: str, today: date) -> ReportData:
    info = sweep_info(con, sweep_id)
    verdict = sweep_verdicts(con, sweep_id)
    latency, best, rounds, contest_rows = compare_frame(verdict, marks=_MARKS)
    tp_cols, tp_grid, _ = compare_grid(verdict, as_throughput=True, marks=_MARKS)
    tok_cols, tok_grid, _ = compare_grid(verdict, as_throughput=True, marks=_MARKS,
                                         per_token=True)
    sentences = [f"{row_text(c.row)}: {s}" for c in contest_rows for s in c.sentences]

    # The charts and the cost read one setting, as the pages do (figures never blend
    # devices, precisions or machines): the one with most runs, which the pages preselect.
    setting_rows = settings(con, INFERENCE.kind, sweep_id)
    choices, labels = setting_choices(setting_rows)
    setting = choices[0] if choices else None
    setting_note = ""
    if len(choices) > 1:
        setting_note = (f"Charts and cost show the setting {labels[setting]}; this sweep "
                        f"holds {len(choices) - 1} other setting(s), each a column of its "
                        "own in the table.")
    models = comparable_models(con, sweep_id)
    summary = config_summary(con, models, sweep_id, setting) if models else pd.DataFrame()
    charts, efficiency, chart_note = _charts(con, summary, models, sweep_id, setting)
    cost = _cost(con, summary, setting,
                 setting_rows.iloc[0] if not setting_rows.empty else None, sweep_id, today)

    configs = sweep_configs(con, sweep_id)
    policy = sweep_policy(con, sweep_id)
    user_models = sweep_user_models(con, sweep_id)
    command, command_note = _command(info, configs, policy, user_models)
    ceilings = gather_ceilings(con, sweep_id, models, setting)
    if ceilings.figure is not None:
        charts = [*charts, ceilings.figure]
    return ReportData(
        sweep_id=sweep_id, info=info, runs=verdict.runs, ok=verdict.ok,
        models=list(verdict.models), contenders=list(verdict.columns),
        latency=latency, best=best, rounds=rounds, raw=raw_frame(contest_rows),
        throughput=(tp_cols, tp_grid), sentences=sentences,
        notes=architecture_notes(verdict.results), noise=verdict.noise,
        noise_lines=noise_lines(verdict), rule_text=rule_line(verdict.rule),
        contention=contention_lines(verdict), setting_note=setting_note,
        charts=charts, chart_note=chart_note, efficiency=efficiency, cost=cost,
        systems=sweep_systems(con, sweep_id), software=sweep_software(con, sweep_id),
        user_models=user_models,
        policy_lines=_policy_lines(info, configs, policy),
        energy=tuple(energy_lines(sweep_energy(con, sweep_id))),
        command=command, command_note=command_note, ceilings=ceilings,
        tokens=(tok_cols, tok_grid))


def _charts(con, summary: pd.DataFrame, models: list[str], sweep_id: str, setting):
    """The Compare page's charts at its defaults: the batch charts at the most threads,
    thread scaling and the distribution at the smallest batch, the speed-up heat map of
    the first two contenders on the first model."""
    if summary.empty:
        return [], pd.DataFrame(), "No successful run with samples: nothing to chart."
    threads = int(summary.threads.max())
    batch = int(summary.batch_size.min())
    figs = [latency_vs_batch(summary, threads), throughput_vs_batch(summary, threads)]
    efficiency = pd.DataFrame()
    if summary.threads.nunique() > 1:  # one thread count has no scaling to show
        fig, efficiency = scaling_vs_threads(summary, batch)
        figs.append(fig)
    samples = config_samples(con, models, batch, threads, sweep_id, setting=setting)
    if not samples.empty:
        figs.append(latency_box(samples, "box"))
    contenders = sorted(summary.contender.unique())
    if len(contenders) >= 2:
        heat = speedup_heatmap(summary, models[0], contenders[0], contenders[1])
        if heat is not None:
            figs.append(heat)
    note = (f"Batch charts at {threads} thread(s); thread scaling and the distribution at "
            f"batch {batch}. Figures per configuration are medians over its successful "
            "rounds.")
    return figs, efficiency, note


def _cost(con, summary: pd.DataFrame, setting, host, sweep_id: str,
          today: date) -> CostData:
    """Cost per 1 M inferences as the Cost page computes it (engine.analysis.cost_machines):
    on the catalog shape the page preselects and on the closest-size x86 machine of every
    other provider, each configuration's best split measured on that shape by this sweep,
    else the estimate from the selected machine's throughput per physical core. host: the
    setting's store.queries.settings row (its machine)."""
    if summary.empty:
        return CostData(skipped="No successful run: no throughput to price.")
    if setting is not None and setting[0] != "cpu":
        return CostData(skipped=f"The runs ran on {setting[0]}: the catalog prices CPU "
                                "machines, so no cost is shown.")
    catalog, _ = effective_catalog(con)
    cpu = cpu_shapes(catalog)
    if not cpu:
        return CostData(skipped="The price catalog has no x86 CPU machine.")
    machine = cpu[default_shape(cpu)]
    machines = [machine] + [m for m in equivalents(cpu, machine.vcpus)
                            if m.provider != machine.provider]
    rows = []
    by_machine = machine_throughput(con, INFERENCE.kind, setting, sweep_id)
    for (model, contender, batch, _size), g in by_machine.groupby(
            ["model", "contender", "batch_size", "image_size"], sort=True):
        for row in machine_rows(machines, basis(g.to_dict("records"))):
            rows.append({"model": model, "contender": contender, "batch_size": int(batch),
                         **row})
    measured = sorted(int(t) for t in summary.threads.unique())
    where = "an unrecorded machine"
    if host is not None and host.cpu_model:
        where = f"{host.cpu_model} ({host.cores} vCPUs)"
    measured_on = (f"Throughput measured on {where} at {', '.join(map(str, measured))} "
                   "thread(s): the median over the sweep's successful rounds.")
    on_shape = sorted({r["assumption"] for r in rows if not r["estimate"]})
    if on_shape:
        measured_on += " Figures without (est.) were " + "; ".join(on_shape) + "."
    return CostData(machine=machine.label, rows=rows, prices=machines,
                    measured_on=measured_on,
                    assumptions=sorted({r["assumption"] for r in rows if r["estimate"]}),
                    stale=[age_text(a, today) for a in stale_prices(machines, today=today)],
                    today=today.isoformat())


def _tokens(command: str | None) -> list[str]:
    try:
        return shlex.split(command or "")
    except ValueError:  # unbalanced quotes in a stored command: read it as words
        return (command or "").split()


def _option(tokens: list[str], name: str) -> str | None:
    for i, t in enumerate(tokens):
        if t == name and i + 1 < len(tokens):
            return tokens[i + 1]
        if t.startswith(name + "="):
            return t.split("=", 1)[1]
    return None


def _min_rounds(configs: pd.DataFrame) -> int | None:
    """The minimum rounds every configuration got: the most common per-configuration count
    (only undecided contests get more), the smaller on a tie."""
    if configs.empty:
        return None
    counts = Counter(int(n) for n in configs.rounds)
    return min(counts, key=lambda n: (-counts[n], n))


def _policy_lines(info: dict, configs: pd.DataFrame, policy: pd.DataFrame) -> list[str]:
    lines = []
    for p in policy.itertuples():
        if any(pd.isna(v) for v in p[1:5]):  # e.g. imported PerfZero runs
            lines.append(f"measurement policy not recorded for {p.runs} runs")
            continue
        lines.append(f"warm-up {p.warmup_iters} iterations, then timing until both "
                     f"{p.min_time_s:g} s and {p.min_iters} iterations are reached (at most "
                     f"{p.max_time_s:g} s per run)"
                     + (f" — {p.runs} runs" if len(policy) > 1 else ""))
    tokens = _tokens(info.get("command"))
    is_cli_run = tokens[:4] == ["python", "-m", "engine", "run"]
    minimum = _option(tokens, "--rounds") if is_cli_run else None
    minimum = int(minimum) if minimum and minimum.isdigit() else (
        DEFAULT_ROUNDS if is_cli_run else _min_rounds(configs))
    max_rounds = _option(tokens, "--max-rounds") if is_cli_run else None
    if max_rounds is None and is_cli_run:
        max_rounds = str(default_max_rounds(minimum))
    if info.get("min_rounds") is not None:  # the rule the sweep kept, wherever it ran
        minimum, max_rounds = int(info["min_rounds"]), str(int(info["max_rounds"]))
        lines.append(f"verdict margin: ±{100 * info['margin']:g} %")
    lines.append(f"rounds: {minimum} minimum, each in fresh worker processes; "
                 f"{info['rounds']} ran; max rounds: "
                 + (max_rounds if max_rounds else
                    "not recorded (the sweep was not launched by `python -m engine run`)"))
    budget = _option(tokens, "--time-budget") if is_cli_run else None
    if budget:
        lines.append(f"time budget: {budget} s")
    lines.append(f"seed (order of rounds 3 and later): {info['seed']}")
    return lines


def _command(info: dict, configs: pd.DataFrame, policy: pd.DataFrame,
             user_models: pd.DataFrame | None = None) -> tuple[str, str]:
    """(command, note): the stored command line, or one rebuilt from the stored runs when
    the sweep was launched elsewhere (the dashboard stores "dashboard")."""
    stored = (info.get("command") or "").strip()
    if stored.startswith(_CMD_PREFIX):
        return stored, "as recorded when the sweep ran"
    if configs.empty:
        return "", "no runs stored: nothing to rebuild a command from"

    def values(col):
        return [str(v) for v in sorted(configs[col].dropna().unique())]
    q = shlex.quote
    if user_models is not None and not user_models.empty:
        # a user's model: its file (or factory) and inputs, as `run` takes them
        m = user_models.iloc[0]
        source = (["--model-factory", q(m.model_origin)] if m.model_format == "factory"
                  else ["--model-file", q(m.model_origin)])
        model_part = [*source, "--name", q(m.model),
                      *(a for i in m.model_inputs.split() for a in ("--input", q(i)))]
    else:
        model_part = ["--model", *map(q, values("model"))]
    parts = ["python -m engine run", *model_part,
             "--framework", *map(q, values("framework")), "--runtime",
             *map(q, values("runtime")), "--batch", *values("batch_size"),
             "--threads", *values("intra_threads")]
    for col, flag, default in (("image_size", "--image-size", None),
                               ("inter_threads", "--inter-threads", "1"),
                               ("precision", "--precision", "fp32"),
                               ("device", "--device", "cpu"),
                               ("weight_policy", "--weight-policy", "bn_calibrated")
                               if user_models is None or user_models.empty else
                               ("weight_policy", "--weight-policy", "as_given")):
        vs = values(col)
        if len(vs) == 1 and vs[0] != default:
            parts += [flag, q(vs[0])]
    if not policy.empty and not policy.iloc[0].isna().any():
        p = policy.iloc[0]
        parts += ["--warmup", str(int(p.warmup_iters)), "--min-time", f"{p.min_time_s:g}",
                  "--min-iters", str(int(p.min_iters)), "--max-time", f"{p.max_time_s:g}"]
    kept = info.get("min_rounds") is not None  # the sweep's own rule, where it kept one
    minimum = int(info["min_rounds"]) if kept else _min_rounds(configs)
    parts += ["--rounds", str(minimum)]
    most = int(info["max_rounds"]) if kept else info["rounds"]
    if most > minimum:
        parts += ["--max-rounds", str(most)]
    if kept and info["margin"] != DEFAULT_VERDICT_MARGIN:
        parts += ["--margin", f"{info['margin']:g}"]
    if configs.replicas.sum():  # an A/A test's copies ran beside the originals
        parts.append("--aa-test")
    if configs.contention_runs.sum():  # every configuration also beside the neighbour
        parts.append("--contention")
    parts += ["--seed", str(info["seed"])]
    origin = f"stored as {stored!r}" if stored else "no command stored"
    return " ".join(parts), (f"rebuilt from the stored runs ({origin}): every combination "
                             "of the values the sweep measured")

