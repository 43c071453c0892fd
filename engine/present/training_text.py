"""What the Training page says beside its charts: the last epoch's accuracy per run and the
gap between frameworks, which machines a training run is priced on, and the cost caption.
Built from store.queries' frames and engine/analysis/cost_machines.py's rows; no Streamlit."""

from __future__ import annotations

import pandas as pd

from engine.analysis.cost import Machine, equivalents

__all__ = ["final_epochs", "accuracy_metrics", "accuracy_gap_text", "priced_machines",
           "measure_label", "cost_caption"]


def final_epochs(epochs: pd.DataFrame) -> pd.DataFrame:
    """Each run's last epoch (store.runs.train_epochs rows)."""
    return epochs.sort_values("epoch").groupby("run_id").tail(1)


def accuracy_metrics(last: pd.DataFrame, names: dict) -> list[tuple[str, str, str]]:
    """(label, test accuracy, help with the epoch and train accuracy) per run."""
    return [(f"test accuracy · {names[r.run_id]}", f"{r.test_acc:.1%}",
             f"epoch {r.epoch}; train accuracy {r.train_acc:.1%}") for r in last.itertuples()]


def accuracy_gap_text(last: pd.DataFrame, bn_momentum: pd.Series | None = None) -> str | None:
    """The test-accuracy gap between the runs shown and why frameworks part; None for one
    framework (no gap to explain). bn_momentum: the shown runs' recorded BatchNorm momentum
    (store.queries.train_runs; NaN where a run predates matching it)."""
    if last.framework.nunique() < 2:
        return None
    gap = last.test_acc.max() - last.test_acc.min()
    recorded = set() if bn_momentum is None else set(bn_momentum.dropna())
    if bn_momentum is not None and len(recorded) == 1 and not bn_momentum.isna().any():
        (m,) = recorded
        bn = (f"BatchNorm momentum is matched: torchvision's {m:g} (Keras' {1 - m:g}) in "
              "both; other BatchNorm defaults (epsilon) stay each framework's")
    else:
        bn = ("so do BatchNorm defaults for runs recorded before its momentum was matched "
              "(Keras' 0.99 or 0.999 against torchvision's 0.9 or 0.99, in Keras' terms)")
    return (f"Test-accuracy gap between the runs shown: **{gap * 100:.1f} points**. "
            "Initialisations differ by framework (Kaiming in torchvision, Glorot or variance "
            f"scaling in Keras); {bn}, so the curves can part even on identical data and "
            "order.")


def priced_machines(cpu: list[Machine], machine: Machine, on_shapes: set[str]) -> list[Machine]:
    """The chosen machine, the closest-sized x86 machine of every other provider, and every
    shape the runs were measured on."""
    out = [machine] + [m for m in equivalents(cpu, machine.vcpus)
                       if m.provider != machine.provider]
    return out + [m for m in cpu if m.shape in on_shapes and m not in out]


def measure_label(missing: int, runs: int) -> str:
    """The button that measures inference for the configurations the table lacks."""
    return (f"Measure inference for the {missing} configuration(s) without it "
            f"({runs} runs)")


def cost_caption(measured: pd.DataFrame, rows: list[dict]) -> str:
    """What the training cost figures are (store.queries.machine_throughput rows of the
    training kind, and training_rows() built from them)."""
    host = measured.iloc[0]
    own = measured[measured.selected]
    notes = sorted({r["assumption"] for r in rows if r["estimate"]})
    shown = sorted({f"{r['shape']} ({r['config']})" for r in rows if not r["estimate"]})
    threads = ", ".join(sorted({f"{int(t)} thread{'s' if t > 1 else ''}" for t in own.threads}))
    return ("Training samples/s over whole epochs (first epoch included)"
            + (f", on the selected machine ({own.iloc[0].cpu_model}) at {threads}"
               if not own.empty else "")
            + f"; an epoch here is {int(host.samples_per_epoch):,} samples of this run's data "
            "set and image size, so USD per 1 M samples is the figure to scale to your own "
            "data set. "
            + ("Measured on their shape: " + "; ".join(shown) + ". " if shown else "")
            + ("Hatched bars are estimates (no run on the shape, or runs on part of it "
               "scaled to the whole machine): "
               + notes[0].removeprefix("estimate: ") + "." if notes else ""))
