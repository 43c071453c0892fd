"""What the pages say of a reduced-precision run (issue 28 part 6): its speed-up over the
fp32 baseline beside how far its outputs moved, "1.9x faster, top-1 agrees on 99.2 % of
inputs". Pure: DataFrames in, text and DataFrames out."""

from __future__ import annotations

import pandas as pd

from engine.present.values import missing

__all__ = ["speedup_text", "with_vs_fp32", "precision_table", "ERROR_NOTE"]

ERROR_NOTE = ("Error against the fp32 reference on generated inputs (at least 64: whole batches "
              "of the run's size), counted in the worker: max |diff|, that over the "
              "reference's largest magnitude, and the share of inputs whose top-1 class agrees. "
              "The models carry seeded random weights (BatchNorm calibrated), whose logits lie "
              "close together, so top-1 agreement here is a harsher test than on trained "
              "weights.")


def _num(v) -> float | None:
    return None if missing(v) else float(v)


def speedup_text(p50_ms, fp32_p50_ms, top1_agreement) -> str:
    """ "1.9x faster, top-1 agrees on 99.2 % of inputs"; each half left out when unknown."""
    parts = []
    p50, base, top1 = _num(p50_ms), _num(fp32_p50_ms), _num(top1_agreement)
    if p50 and base:
        ratio = base / p50
        parts.append(f"{ratio:.1f}x faster" if ratio >= 1 else f"{1 / ratio:.1f}x slower")
    elif p50:
        parts.append("no fp32 run to compare with")
    if top1 is not None:
        parts.append(f"top-1 agrees on {top1 * 100:.1f} % of inputs")
    return ", ".join(parts)


def with_vs_fp32(table: pd.DataFrame, reduced: pd.DataFrame) -> pd.DataFrame:
    """The Results table with a "vs fp32" column: the sentence for each reduced-precision
    run (by run_id), empty for the others."""
    text = {r.run_id: speedup_text(r.p50_ms, r.fp32_p50_ms, r.top1_agreement)
            for r in reduced.itertuples()}
    out = table.copy()
    out["vs_fp32"] = [text.get(rid, "") for rid in out["run_id"]] if len(out) else []
    return out


def precision_table(reduced: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration (runs of it: median p50, worst error, least agreement),
    with its sentence; what Compare and the report show."""
    if reduced.empty:
        return pd.DataFrame(columns=["model", "framework", "runtime", "precision", "batch_size",
                                     "threads", "p50_ms", "fp32_p50_ms", "vs_fp32",
                                     "output_max_abs", "output_max_rel", "top1_agreement",
                                     "top1_inputs", "runs"])
    keys = ["model", "framework", "runtime", "precision", "batch_size", "threads"]
    g = reduced.groupby(keys, sort=True, dropna=False).agg(
        p50_ms=("p50_ms", "median"), fp32_p50_ms=("fp32_p50_ms", "median"),
        output_max_abs=("output_max_abs", "max"), output_max_rel=("output_max_rel", "max"),
        top1_agreement=("top1_agreement", "min"), top1_inputs=("top1_inputs", "max"),
        runs=("run_id", "count")).reset_index()
    g["vs_fp32"] = [speedup_text(r.p50_ms, r.fp32_p50_ms, r.top1_agreement)
                    for r in g.itertuples()]
    return g[["model", "framework", "runtime", "precision", "batch_size", "threads", "p50_ms",
              "fp32_p50_ms", "vs_fp32", "output_max_abs", "output_max_rel", "top1_agreement",
              "top1_inputs", "runs"]]
