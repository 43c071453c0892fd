"""Text tables for the terminal, in the spirit of torch.utils.benchmark.Compare."""

from __future__ import annotations

import re

from engine.analysis.compare import ConfigResult, geomean
from engine.analysis.noise import drift_cause
from engine.analysis.sequential import VerdictRule
from engine.analysis.sweep_verdict import SweepVerdict
from engine.analysis.stats import p99_confident
from engine.core.catalog import CATALOG, model_label, tokens_per_sample
from engine.scenarios.inference.spec import CONDITION_LABELS
from engine.present.values import missing

__all__ = ["compare_table", "compare_grid", "format_table", "cell_text", "ms_text",
           "noise_lines", "rule_line", "row_label", "row_text", "contention_lines",
           "MARKS_LEGEND", "sentence", "FIGURES_NOTE", "raw_rows", "raw_lines",
           "interference_text", "p99_text", "architecture_notes", "user_model_line",
           "sweep_labels", "round_sweep_labels", "TOKENS_TITLE", "SEQUENCES_TITLE"]

BOLD_GREEN, RESET = "\033[1;32m", "\033[0m"
# Figures (with their marks) align right; words align left.
_NUMERIC = re.compile(r"^[*~]?-?[\d,.]+( \[[\d,.-]+\])?( \(.*\))?( \?)?$|^$")


def ms_text(ms: float) -> str:
    """A latency with four significant figures (at least 1 decimal): 0.1234 ms, 9.027 ms,
    10.51 ms, 123.5 ms, 1,235.0 ms; short enough for a metric in a sixth of a page."""
    decimals = 4 if ms < 1 else 3 if ms < 10 else 2 if ms < 100 else 1
    return f"{ms:,.{decimals}f} ms"

def architecture_notes(results: list[ConfigResult]) -> list[tuple[str, str]]:
    """(model, note) for each model whose comparison crosses frameworks: the torchvision
    model and its Keras pair differ (parameters counted differently, layers that exist on
    one side only), and a reader must see it beside the figures."""
    frameworks: dict = {}
    for r in results:
        frameworks.setdefault(r.model, set()).add(r.contender.split(" (")[0])
    return [(m, CATALOG[m].note) for m, fws in frameworks.items()
            if len(fws) > 1 and m in CATALOG]


def p99_text(p99_ms: float | None, count: int | None) -> str:
    """p99 with its confidence: marked when from fewer than P99_MIN_SAMPLES samples."""
    if missing(p99_ms):  # None, or NaN / NA from a frame
        return ""
    n = 0 if missing(count) else int(count)
    return f"{p99_ms:.2f}" + ("" if p99_confident(n) else f" (n={n}, low conf.)")


def interference_text(seen: dict) -> str:
    """One line on what else used the worker's cores during the measured window."""
    def pct(v):
        return "not measured" if v is None else f"{v:.1%}"
    cores = ",".join(map(str, seen.get("cores") or []))
    pin = (f"pinned to cores {cores} (parent on {','.join(map(str, seen['parent_cores']))})"
           if seen.get("pinned") else f"not pinned (cores {cores})")
    return (f"During the measured window ({seen.get('window_s', 0):.1f} s): hypervisor steal "
            f"{pct(seen.get('steal_frac'))}, other processes {pct(seen.get('others_cpu_frac'))} "
            f"of the worker's cores; load average {seen.get('load_avg_1m_end', 0):.2f}; {pin}.")


def user_model_line(run, esc=str) -> str:
    """A user's model as a run's detail names it: format, origin, inputs, SHA-256, size.
    esc: applied to the text the user chose (a page passes its Markdown escape)."""
    size = run.get("model_bytes")
    digest = run.get("model_sha256")
    return (f"Your model: {run['model_format']} from {esc(str(run.get('model_origin')))} · "
            f"inputs {esc(str(run.get('model_inputs')))} · SHA-256 "
            + (f"{digest} · {int(size):,} bytes" if isinstance(digest, str) and size == size
               else "not recorded (the run failed before its model was loaded)"))


def format_table(headers: list[str], rows: list[list[str]], highlight=None) -> str:
    """Left-aligned first columns, right-aligned numbers; highlight[(r, c)] marks cells."""
    highlight = highlight or set()
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    for ri, row in enumerate(rows):
        cells = []
        for ci, (cell, w) in enumerate(zip(row, widths)):
            text = cell.rjust(w) if ci and _NUMERIC.match(cell) else cell.ljust(w)
            cells.append(f"{BOLD_GREEN}{text}{RESET}" if (ri, ci) in highlight else text)
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def _condition(row) -> str:
    cond = CONDITION_LABELS.get(row[4] if len(row) > 4 else "none", "")
    return f" · {cond}" if cond else ""


def row_label(row) -> str:
    """A contest's model column: model and size, and the neighbour it ran beside."""
    return model_label(row[0], row[1]) + _condition(row)


def row_text(row) -> str:
    """A contest in a sentence's prefix: "resnet18 64px b1 t2", and its neighbour."""
    return f"{model_label(row[0], row[1])} b{row[2]} t{row[3]}" + _condition(row)


def rule_line(rule: VerdictRule) -> str:
    """What a verdict sentence rests on, in one line."""
    holm = ("Holm over the k-1 comparisons of a contest: family-wise error ≤ 5 % per "
            "contest" if rule.margin > 0 else
            "Holm over the k-1 comparisons of a contest: family-wise error about 5 % per "
            "contest (up to 7 % for 3-8 tied contenders with no margin: the best is picked "
            "from the same rounds)")
    return (f"verdicts: each rival against the starred best on their paired rounds (log "
            f"ratios), {rule.plan.describe()}; {holm}, so a rival's interval is at the "
            f"confidence its Holm step allows; a winner needs the interval to clear "
            f"±{100 * rule.margin:g} %, and a pair whose interval lies inside it is "
            "equivalent")


def noise_lines(verdict: SweepVerdict) -> list[str]:
    """The sweep's variation split in two (its noise model): the noise pairing leaves,
    which verdicts must beat, and the drift between rounds, which pairing cancels, with its
    likely cause."""
    model = verdict.noise
    if model is None:
        return []
    noise = (f"measurement noise ±{model.residual_pct:.1f} %: what pairing leaves (residual "
             f"of configuration + round on log round medians, {model.configurations} "
             f"configurations x {model.rounds} rounds, {model.df} degrees of freedom)")
    if model.slowest == model.fastest:
        return [noise, "the machine did not drift between rounds"]
    return [noise, f"the machine drifted {model.drift_pct:.1f} % between rounds (round "
                   f"{model.slowest} against round {model.fastest}; pairing cancels it); "
                   f"{drift_cause(verdict.results, model)}"]


def _ratio(c) -> str:
    if c.rounds < 2:
        return f"{c.speedup:.2f}x (one round, no interval)"
    return f"{c.speedup:.2f}x (95 % CI {c.ci_low:.2f}-{c.ci_high:.2f}, {c.rounds} rounds)"


def _beside(condition: str) -> str:
    label = CONDITION_LABELS[condition]
    return f"beside {'an' if label[:1] in 'aeiou' else 'a'} {label}"


def sentence(line: str) -> str:
    """A line as a page or a report shows it on its own: capitalised, ended by a full stop
    (not after a colon, which a list follows)."""
    return line[:1].upper() + line[1:] + ("" if line.endswith((".", ":")) else ".")


def contention_lines(verdict: SweepVerdict) -> list[str]:
    """Shared versus dedicated: each contender's slowdown beside the neighbour, whether a
    verdict changes, and what torch's passive wait policy does (empty without contention)."""
    slow = verdict.slowdowns
    if not slow:
        return []
    out = ["shared versus dedicated (a neighbour busy on one of the run's cores; paired by "
           "round against the same configuration quiet):"]
    for s in slow:
        out.append(f"  {row_text(s.row)} · {s.contender}: {_ratio(s.paired)} slower "
                   f"{_beside(s.condition)} ({s.quiet_ms:,.2f} -> "
                   f"{s.busy_ms:,.2f} ms)")
    for ch in verdict.changes:
        beside = _beside(ch.condition)
        if ch.changed:
            text = f"the verdict changes {beside}: {ch.quiet} wins quietly, {ch.busy} {beside}"
        elif ch.quiet and ch.busy:
            text = f"the same winner quietly and {beside}: {ch.quiet}"
        else:
            text = (f"no decided winner to compare ({ch.quiet or 'undecided'} quietly, "
                    f"{ch.busy or 'undecided'} {beside})")
        out.append(f"  {row_text(ch.row)}: {text}")
    for row, contender, condition, default, passive, paired in verdict.wait_effects:
        where = _beside(condition) if condition != "none" else "on a dedicated machine"
        faster = paired.speedup >= 1
        _, _, factor, lo, hi = paired.leaning("passive", "default")  # the side it leans to
        out.append(f"  {row_text(row)} · {contender} {where}: OMP_WAIT_POLICY=PASSIVE is "
                   f"{factor:.2f}x {'faster' if faster else 'slower'} ({default:,.2f} -> "
                   f"{passive:,.2f} ms" + (f", 95 % CI {lo:.2f}-{hi:.2f}" if paired.rounds > 1
                                           else "") + ")")
    return out


MARKS_LEGEND = ("* best in row   ~ no decision against the best   = equivalent to the best "
                "within the margin   ? noisy (rounds disagree by more than 10 %, or a "
                "round's IQR/median above 10 % or its tail long; noisy rounds are kept)   "
                "(n status): rounds that broke a rule or failed, left out   a status instead "
                "of a value: no round of it succeeded")


# What a comparison cell's figure is, for captions (the page, the report, the terminal).
# A token model's sample is one sequence: its samples/s, under the name its users know.
SEQUENCES_TITLE = ("throughput [sequences/s] over the measured time, token models, higher is "
                   "better")
TOKENS_TITLE = ("throughput [tokens/s] = samples/s x sequence length, token models, higher "
                "is better")
FIGURES_NOTE = ("drift-adjusted figures: a configuration + round fit over each row's rounds, "
                "each contender at the rounds every contender of the row ran (its geometric "
                "mean of round medians where all ran the same rounds; ranked by it, and with "
                "two contenders their ratio is the verdict's paired speed-up); [min-max] of "
                "its own round medians")


def compare_grid(verdict: SweepVerdict, *, as_throughput: bool = False,
                 marks: tuple[str, ...] = ("*", "~", "="), models=None,
                 per_token: bool = False):
    """(columns, rows, rounds) of the comparison, for the terminal and the dashboard alike.
    columns: the contenders (framework (runtime)); rows: per contest (model, size, batch,
    threads), (contest, one text per column, the best column). A cell is the contender's
    drift-adjusted figure (Contest.figures; for throughput SweepVerdict.throughputs) with
    the min-max over its own rounds (cell_text), prefixed with marks[0] when it is the
    row's best, marks[1] when its gap to the best is not decided and marks[2] when it is
    equivalent to the best within the margin; a contender with no successful round shows
    its statuses; an empty string means not measured. models: only these models' rows and
    their contenders (None: every row). per_token: throughput in tokens/s (samples/s x the
    sequence length), token models' rows only (catalog.tokens_per_sample)."""
    results = verdict.results_for(models)
    cols = list(dict.fromkeys(r.contender for r in results))
    rounds = max((r.summary.rounds for r in results if r.summary), default=0)
    grid = []
    for contest in verdict.contests_for(models):
        tokens = tokens_per_sample(contest.row[0], contest.row[1])
        if per_token and not tokens:
            continue
        figures = verdict.throughputs[contest.row] if as_throughput else contest.figures
        cells = []
        for c in cols:
            r = contest.cells.get(c)
            if r is None:
                cells.append("")
            elif r.summary is None:
                cells.append("/".join(sorted(set(r.failed))))
            else:
                mark = (marks[0] if c == contest.best else
                        marks[2] if c in contest.equivalent else
                        marks[1] if c in contest.undecided else "")
                cells.append(mark + cell_text(r, as_throughput, rounds, figures.get(c),
                                              scale=tokens if per_token else 1))
        grid.append((contest, cells, contest.best))
    return cols, grid, rounds


def raw_rows(contest_rows) -> tuple[list[str], list[list[str]]]:
    """(headers, rows): each configuration's own figures, one row per contender of each
    contest: rounds run, geometric mean of its round medians (not drift-adjusted) and the
    median of every round, '' where it did not run."""
    numbers = sorted({n for c in contest_rows for r in c.cells.values()
                      for n in r.round_medians})
    rows = []
    for c in contest_rows:
        for name, r in c.cells.items():
            if r.summary is None:
                continue
            rows.append([row_label(c.row), str(c.row[2]), str(c.row[3]), name,
                         str(r.summary.rounds), f"{r.summary.center:,.2f}",
                         *(f"{r.round_medians[n]:,.2f}" if n in r.round_medians else ""
                           for n in numbers)])
    return (["model", "batch", "threads", "contender", "rounds", "geometric mean [ms]",
             *(f"round {n} [ms]" for n in numbers)], rows)


def raw_lines(contest_rows) -> list[str]:
    """The raw block of the terminal table: raw_rows as a text table."""
    headers, rows = raw_rows(contest_rows)
    return (["each configuration over its own rounds (raw round medians [ms], not "
             "drift-adjusted):", format_table(headers, rows)] if rows else [])


def compare_table(verdict: SweepVerdict, *, color: bool = False, raw: bool = False) -> str:
    """Rows: model / batch / threads; columns: framework (runtime). Values aggregate the
    rounds: drift-adjusted figures with the min-max over each configuration's own rounds;
    the best per row is starred, cells whose gap to the best is undecided are marked '~'
    and equivalent ones '=', and each row's verdict is spelled out below the tables with
    the sweep's noise. raw: each configuration's own round medians follow."""
    out = []
    for title, as_throughput, per_token in (
            ("median latency per batch [ms], lower is better", False, False),
            ("throughput [samples/s] over the measured time, higher is better", True, False),
            (TOKENS_TITLE, True, True)):
        cols, grid, rounds = compare_grid(verdict, as_throughput=as_throughput,
                                          per_token=per_token)
        if per_token and not grid:  # no token model in the sweep
            continue
        table, highlight = [], set()
        for ri, (contest, cells, best) in enumerate(grid):
            table.append([row_label(contest.row), str(contest.row[2]), str(contest.row[3]),
                          *cells])
            if color and best in cols:
                highlight.add((ri, 3 + cols.index(best)))
        out.append(title + (f" (up to {rounds} rounds)" if rounds > 1 else ""))
        out.append(format_table(["model", "batch", "threads", *cols], table, highlight))
        out.append("")
        if not as_throughput:  # every contest, in the tables' order
            rows = [contest for contest, _, _ in grid]
    if rounds > 1:
        out.append(FIGURES_NOTE + ("; the star is the latency's best" if len(cols) > 1
                                   else ""))
        if raw:
            out.extend(raw_lines(rows))
        elif not all(c.balanced for c in rows):
            out.append("contenders of a row ran different rounds (decided ones stop): "
                       "`python -m engine compare SWEEP --raw` lists each configuration's "
                       "own round medians")
        out.append("")
    verdicts = [f"  {row_text(c.row)}: {s}" for c in rows for s in c.sentences]
    if verdicts:
        out.append(rule_line(verdict.rule) + ":")
        out.extend(verdicts)
        out.append("")
    notes = architecture_notes(verdict.results)
    if notes:
        out.append("architectures compared across frameworks (not identical graphs):")
        out.extend(f"  {m}: {note}" for m, note in notes)
        out.append("")
    noise = noise_lines(verdict)
    out.extend(noise)
    out.extend(contention_lines(verdict))
    if not noise and rounds <= 1:
        out.append("one round: differences are not tested for significance "
                   "(use --rounds 2 or more)")
    out.append(MARKS_LEGEND)
    return "\n".join(out)


def cell_text(r: ConfigResult, as_throughput: bool, rounds: int,
              figure: float | None = None, scale: int = 1) -> str:
    """The cell of one contender: `figure` (the contest's drift-adjusted one; None: the
    geometric mean over its rounds, of round medians or of round throughputs: samples over
    measured time), with the min-max over its own rounds. scale: throughput's unit per
    sample (a token model's sequence length, for tokens/s)."""
    s = r.summary
    noisy = s.flag == "noisy" or r.noisy_rounds > 0
    if as_throughput:
        tp = [v * scale for v in r.throughputs.values()]
        figure = None if figure is None else figure * scale
        text = f"{geomean(tp) if figure is None else figure:,.1f}"
        if len(tp) > 1:
            text += f" [{min(tp):,.1f}-{max(tp):,.1f}]"
    else:
        text = f"{s.center if figure is None else figure:,.2f}"
        if rounds > 1:
            text += f" [{s.spread_min:,.2f}-{s.spread_max:,.2f}]"
    if r.failed:  # rounds left out of the aggregate, by status: "(1 invalid)"
        counts = {st: r.failed.count(st) for st in sorted(set(r.failed))}
        text += " (" + ", ".join(f"{n} {st}" for st, n in counts.items()) + ")"
    return text + (" ?" if noisy else "")


def train_table(records) -> str:
    """One row per training run: time per epoch, samples/s, step latency, final scores."""
    rows = []
    for r in records:
        ep = list(r.epochs)
        if not ep:
            rows.append([r.model, f"{r.framework} ({r.runtime})", str(r.batch_size),
                         str(r.intra_threads), r.status, "-", "-", "-", "-", "-", "-",
                         (r.reason or "")[:60]])
            continue
        last = ep[-1]
        walls = [e["wall_s"] for e in ep]
        rows.append([r.model, f"{r.framework} ({r.runtime})", str(r.batch_size),
                     str(r.intra_threads), r.status,
                     f"{walls[0]:.2f}" + (f" / {sum(walls[1:]) / len(walls[1:]):.2f}"
                                          if len(walls) > 1 else ""),
                     f"{r.throughput:,.1f}", f"{r.median_ms:.1f} [{r.p90_ms:.1f}]",
                     f"{last['train_loss']:.3f} / {last['train_acc']:.1%}",
                     f"{last['test_loss']:.3f} / {last['test_acc']:.1%}",
                     str(len(ep)), r.validity or ""])
    return format_table(["model", "framework", "batch", "threads", "status",
                         "s/epoch (1st / rest)", "samples/s", "step p50 [p90] ms",
                         "train loss / acc", "test loss / acc", "epochs", "verdict"], rows)


def load_table(records) -> str:
    """Rows: format, batch size, workers, threads; columns: implementations (ms/batch)."""
    impls = list(dict.fromkeys(r.runtime for r in records))
    cells: dict = {}
    for r in records:
        key = (r.model, r.batch_size, r.workers, r.intra_threads)
        cells.setdefault(key, {})[r.runtime] = (
            f"{r.median_ms:.2f} ({r.throughput:,.0f}/s)" if r.median_ms is not None
            else r.status)
    rows = [[fmt, str(b), str(w), str(t)] + [cells[(fmt, b, w, t)].get(i, "") for i in impls]
            for fmt, b, w, t in sorted(cells)]
    return ("ms per batch, median (images/s)\n"
            + format_table(["format", "batch", "workers", "threads", *impls], rows))


def sweep_labels(sweeps, everything: str) -> dict:
    """Selectbox labels for stored sweeps (store.runs.list_sweeps rows), newest first,
    after an entry (None) for all of them."""
    labels = {None: everything}
    for s in sweeps.itertuples():
        labels[s.sweep_id] = (f"sweep {s.sweep_id[:8]} · {str(s.created_at)[:16]} · "
                              f"{', '.join(s.models)} · {s.runs} runs")
    return labels


def round_sweep_labels(sweeps, everything: str) -> dict:
    """As sweep_labels, naming each sweep's rounds before its models: what Compare's
    significance tests are run over."""
    labels = {None: everything}
    for s in sweeps.itertuples():
        labels[s.sweep_id] = (f"sweep {s.sweep_id[:8]} · {str(s.created_at)[:16]} · "
                              f"{s.rounds} round{'s' if s.rounds > 1 else ''} · "
                              f"{', '.join(s.models)}")
    return labels
