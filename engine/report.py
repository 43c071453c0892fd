"""Text tables for the terminal, in the spirit of torch.utils.benchmark.Compare."""

from __future__ import annotations

from engine.compare import ConfigResult, compare_rounds, noise_floor

__all__ = ["compare_table", "format_table"]

BOLD_GREEN, RESET = "\033[1;32m", "\033[0m"


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
            text = cell.rjust(w) if ci else cell.ljust(w)
            cells.append(f"{BOLD_GREEN}{text}{RESET}" if (ri, ci) in highlight else text)
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def compare_table(results: list[ConfigResult], *, color: bool = False) -> str:
    """Rows: model / batch / threads; columns: framework (runtime). Values aggregate the
    rounds: median of round medians with the between-round range; the best per row is
    starred, cells not significantly different from the best are marked with '~', and the
    significance of each row's contest is spelled out below the tables."""
    cols = list(dict.fromkeys(r.contender for r in results))
    rows_keys = list(dict.fromkeys(r.row for r in results))
    cell = {(r.row, r.contender): r for r in results}
    rounds = max((r.summary.rounds for r in results if r.summary), default=0)
    out, verdicts = [], []
    blocks = (("median latency per batch [ms], lower is better", False),
              ("throughput [samples/s] from the median, higher is better", True))
    for title, as_throughput in blocks:
        table, marks = [], set()
        for ri, key in enumerate(rows_keys):
            model, size, batch, threads = key
            line = [f"{model} {size}px", str(batch), str(threads)]
            usable = {c: cell[(key, c)] for c in cols
                      if (key, c) in cell and cell[(key, c)].summary is not None}
            best = min(usable, key=lambda c: usable[c].summary.median) if usable else None
            for c in cols:
                r = cell.get((key, c))
                if r is None:
                    line.append("")
                    continue
                if r.summary is None:
                    line.append("/".join(sorted(set(r.failed))))
                    continue
                line.append(_cell(r, batch, as_throughput, rounds))
                if len(usable) > 1 and c == best:
                    line[-1] = "*" + line[-1]
                    if color:
                        marks.add((ri, 3 + cols.index(c)))
                elif len(usable) > 1 and rounds > 1:
                    cmp = compare_rounds(usable[best].round_medians, r.round_medians)
                    if cmp is not None and not cmp.significant:
                        line[-1] = "~" + line[-1]
            table.append(line)
            if not as_throughput and len(usable) > 1:
                for c in usable:
                    if c == best:
                        continue
                    cmp = compare_rounds(usable[best].round_medians, usable[c].round_medians)
                    if cmp is not None:
                        verdicts.append(f"  {model} {size}px b{batch} t{threads}: "
                                        f"{cmp.sentence(best, c)}")
        out.append(title + (f" (median of {rounds} rounds [min-max of round medians])"
                            if rounds > 1 else ""))
        out.append(format_table(["model", "batch", "threads", *cols], table, marks))
        out.append("")
    if verdicts:
        out.append("significance (paired rounds, 95 % Student-t interval on log ratios):")
        out.extend(verdicts)
        out.append("")
    floor = noise_floor([r.summary for r in results if r.summary])
    if floor:
        med, worst, n = floor
        out.append(f"noise floor: rounds of the same configuration landed {med:.1%} apart "
                   f"(median over {n} configurations; worst {worst:.1%}). Differences "
                   "smaller than this are machine mood, not framework.")
    elif rounds <= 1:
        out.append("one round: differences are not tested for significance "
                   "(use --rounds 2 or more)")
    out.append("* best in row   ~ not significantly different from the best   "
               "? noisy (rounds disagree by more than 10 %, or IQR/median above 10 %)   "
               "(n status): rounds left out of the aggregate   a status instead of a value: "
               "no round of it succeeded")
    return "\n".join(out)


def _cell(r: ConfigResult, batch: int, as_throughput: bool, rounds: int) -> str:
    s = r.summary
    noisy = s.flag == "noisy" or r.noisy_rounds > 0
    if as_throughput:
        text = f"{batch / s.median * 1000:,.1f}"
        if rounds > 1:
            text += f" [{batch / s.spread_max * 1000:,.1f}-{batch / s.spread_min * 1000:,.1f}]"
    else:
        text = f"{s.median:,.2f}"
        if rounds > 1:
            text += f" [{s.spread_min:,.2f}-{s.spread_max:,.2f}]"
    if r.failed:  # rounds left out of the aggregate, by status: "(1 invalid)"
        counts = {st: r.failed.count(st) for st in sorted(set(r.failed))}
        text += " (" + ", ".join(f"{n} {st}" for st, n in counts.items()) + ")"
    return text + (" ?" if noisy else "")
