"""The dashboard's tables as DataFrames, with the cells to highlight: built here so the
pages only draw them, and so tests can check them without a browser."""

from __future__ import annotations

import pandas as pd

from engine.analysis.sweep_verdict import SweepVerdict
from engine.present.tables import SEQUENCES_TITLE, TOKENS_TITLE, compare_grid, raw_rows, row_label
from engine.scenarios.inference.spec import CONDITION_LABELS
from engine.present.values import missing

__all__ = ["compare_frame", "token_frames", "raw_frame", "load_grid", "highlight_cells", "setting_choices", "BEST_CSS"]

BEST_CSS = "background-color: #d4f4dd; font-weight: bold"


def compare_frame(verdict: SweepVerdict, marks=("★ ", "≈ ", "= "), models=None):
    """(table, best cells, rounds, contests): one row per contest (model and size, batch,
    threads), one column per contender, cells as the terminal table writes them; best cells
    as (row index, column) pairs; rounds at least 1. models: only these models' rows
    (None: every row), judged as in the whole sweep."""
    cols, grid, rounds = compare_grid(verdict, marks=marks, models=models)
    return _grid_frame(cols, grid, rounds)


def token_frames(verdict: SweepVerdict, marks=("★ ", "≈ ", "= "), models=None):
    """[(title, table, best cells)] of the token models' rows as sequences/s and as tokens/s
    (compare_grid's throughput and per_token grids, the CLI's and the report's figures), to
    stand under the latency table; [] when no token model's rows show. models: as
    compare_frame's (None: every model of the sweep)."""
    _, grid, _ = compare_grid(verdict, as_throughput=True, models=models, per_token=True)
    # the token models' own contenders only: an image model's columns would stand empty
    tokens = list(dict.fromkeys(contest.row[0] for contest, _, _ in grid))
    if not tokens:
        return []
    out = []
    for title, per_token in ((SEQUENCES_TITLE, False), (TOKENS_TITLE, True)):
        cols, grid, _ = compare_grid(verdict, as_throughput=True, marks=marks, models=tokens,
                                     per_token=per_token)
        if grid:
            frame, best, _, _ = _grid_frame(cols, grid, 1)
            out.append((title, frame, best))
    return out


def _grid_frame(cols, grid, rounds):
    rows, best = [], []
    for contest, cells, winner in grid:
        if winner is not None:
            best.append((len(rows), winner))
        rows.append({"model": row_label(contest.row), "batch": contest.row[2],
                     "threads": contest.row[3], **dict(zip(cols, cells))})
    return pd.DataFrame(rows), best, max(rounds, 1), [c for c, _, _ in grid]


def raw_frame(contest_rows) -> pd.DataFrame:
    """Each configuration over its own rounds (tables.raw_rows): the figures the comparison
    table adjusts for drift, as measured, one click from it."""
    headers, rows = raw_rows(contest_rows)
    return pd.DataFrame(rows, columns=headers)


def load_grid(summary: pd.DataFrame, value: str) -> tuple[pd.DataFrame, list[tuple]]:
    """Data loading for one format: rows (workers, threads, batch size), one column per
    implementation, cells the value formatted ('–' where not measured: the plain loop has
    no workers); the best cell of each row (lowest ms per batch, highest rate)."""
    table = summary.pivot_table(index=["workers", "threads", "batch_size"],
                                columns="implementation", values=value).reset_index()
    table.columns.name = None
    impls = [c for c in table.columns if c not in ("workers", "threads", "batch_size")]
    values = table[impls].astype(float)
    best_col = values.idxmin(axis=1) if value == "ms_per_batch" else values.idxmax(axis=1)
    shown = table.copy()
    # Strings, not NaN: Streamlit shows a missing number as "None", which reads as a result.
    shown[impls] = values.map(lambda v: "–" if missing(v) else f"{v:,.2f}")
    return shown, list(best_col.items())


def highlight_cells(df: pd.DataFrame, cells: list[tuple], css: str = BEST_CSS):
    """A Styler that marks the (row index, column) cells."""
    def styles(data):
        out = pd.DataFrame("", index=data.index, columns=data.columns)
        for i, c in cells:
            out.loc[i, c] = css
        return out
    return df.style.apply(styles, axis=None)


def setting_choices(settings: pd.DataFrame) -> tuple[list[tuple], dict]:
    """(settings as tuples in store.queries.SETTING_COLUMNS order, label of each) from
    store.queries.settings rows, most runs first: what a page offers so that one figure
    never blends devices, precisions, inter-op threads or machines."""
    choices, labels = [], {}
    for r in settings.itertuples():
        key = (r.device, r.precision, None if r.inter_threads != r.inter_threads
               else int(r.inter_threads), r.system_id, getattr(r, "machine_shape", "") or "",
               getattr(r, "contention", "none") or "none")
        # A run stored without its machine (NULL system_id) joins no systems row: NaN.
        machine = r.cpu_model if isinstance(r.cpu_model, str) else "unknown CPU"
        if isinstance(r.hostname, str) and r.hostname:
            machine += f" on {r.hostname}"
        shape = getattr(r, "shape", None)
        if isinstance(shape, str) and shape:  # the price catalog's name for this machine
            machine = f"{shape} ({machine})"
        choices.append(key)
        beside = CONDITION_LABELS.get(key[5], "")
        precision = f"{r.precision} · " if isinstance(r.precision, str) else ""  # data loading
        labels[key] = (f"{r.device} · {precision}inter-op {key[2]} · {machine}"
                       + (f" · {beside}" if beside else "") + f" ({r.runs} runs)")
    return choices, labels
