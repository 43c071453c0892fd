"""Text tables for the terminal, in the spirit of torch.utils.benchmark.Compare."""

from __future__ import annotations

from engine.record import RunRecord

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


def compare_table(records: list[RunRecord], *, color: bool = False) -> str:
    """Rows: model / batch / threads; columns: framework (runtime). Two blocks: median
    latency (lower is better) and throughput (higher is better); best per row starred."""
    cols = list(dict.fromkeys(f"{r.framework} ({r.runtime})" for r in records))
    keys = list(dict.fromkeys((r.model, r.image_size, r.batch_size, r.intra_threads)
                              for r in records))
    cell = {((r.model, r.image_size, r.batch_size, r.intra_threads),
             f"{r.framework} ({r.runtime})"): r for r in records}
    out = []
    for title, attr, better in (
            ("median latency per batch [ms], lower is better", "median_ms", min),
            ("throughput [samples/s] from the median, higher is better", "throughput", max)):
        rows, marks = [], set()
        for ri, key in enumerate(keys):
            model, size, batch, threads = key
            row = [f"{model} {size}px", str(batch), str(threads)]
            values = {}
            for c in cols:
                r = cell.get((key, c))
                if r is None:
                    row.append("")
                elif r.status != "ok" or getattr(r, attr) is None:
                    row.append(r.status)
                else:
                    v = getattr(r, attr)
                    values[c] = v
                    row.append(f"{v:,.2f}" + (" ?" if r.validity == "noisy" else ""))
            if len(values) > 1:
                best = better(values, key=values.get)
                ci = 3 + cols.index(best)
                row[ci] = "*" + row[ci]
                if color:
                    marks.add((ri, ci))
            rows.append(row)
        out.append(title)
        out.append(format_table(["model", "batch", "threads", *cols], rows, marks))
        out.append("")
    out.append("* best in row   ? noisy (IQR/median above 10 %)   "
               "a status instead of a value: that run failed (see `python -m engine runs`)")
    return "\n".join(out)
