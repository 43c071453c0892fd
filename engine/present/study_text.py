"""The Python-vs-C++ study (issue 28 part 8) as one table: per model and training
configuration, a row per language with its training figures (epoch time, samples/s, the last
epoch's train and test loss and accuracy) and the inference latency of the same model from
that language's inference paths. Built from store.study's two frames; no Streamlit.
"""

from __future__ import annotations

import pandas as pd

__all__ = ["LANGUAGES", "STUDY_COLUMNS", "study_table", "study_caption", "STUDY_COMMANDS"]

# language -> (its training runtime, {inference path: runtime}); C++ has no eager mode.
LANGUAGES = {
    "Python": ("eager", {"eager": "eager", "TorchScript": "torchscript",
                         "AOTInductor": "aoti"}),
    "C++ (LibTorch)": ("libtorch", {"TorchScript": "libtorch",
                                    "AOTInductor": "libtorch_aoti"}),
}
_PATHS = ("eager", "TorchScript", "AOTInductor")
_KEY = ["model", "threads", "image_size", "device", "inter_threads", "system_id",
        "machine_shape"]
_TRAIN = ["train_runs", "epochs", "s_per_epoch", "samples_per_s", "train_loss", "train_acc",
          "test_loss", "test_acc"]
STUDY_COLUMNS = ["model", "language", "batch_size", "threads", "image_size", *_TRAIN,
                 *(f"{p} p50 [ms]" for p in _PATHS)]

# The two commands that produce the study's runs (docs/pages/training.md and the page's
# empty state).
STUDY_COMMANDS = (
    "python -m engine train --model resnet18 --framework torch --runtime eager libtorch "
    "--dataset digits --epochs 5 --batch 64 --threads 2",
    "python -m engine run --model resnet18 --framework torch --runtime eager torchscript "
    "aoti libtorch libtorch_aoti --image-size 32 --batch 1 --threads 2",
)


def study_table(training: pd.DataFrame, inference: pd.DataFrame) -> pd.DataFrame:
    """One row per (training configuration, language): store.study.study_training's figures
    for the language's training runtime (NaN where it was not trained) and
    store.study.study_inference's p50 per inference path (NaN where not measured, and for
    eager from C++, which has none). A language with neither is left out."""
    if training.empty:
        return pd.DataFrame(columns=STUDY_COLUMNS)
    p50 = {tuple(r[:-1]): r[-1] for r in
           inference[[*_KEY, "runtime", "p50_ms"]].itertuples(index=False)}
    trained = {tuple(r[k] for k in (*_KEY, "batch_size", "runtime")): r
               for r in training.to_dict("records")}
    rows = []
    for cfg in training[[*_KEY, "batch_size"]].drop_duplicates().to_dict("records"):
        key = tuple(cfg[k] for k in _KEY)
        for language, (train_rt, paths) in LANGUAGES.items():
            run = trained.get((*key, cfg["batch_size"], train_rt), {})
            row = {**cfg, "language": language,
                   **{c: run.get(c, float("nan")) for c in _TRAIN},
                   **{f"{p} p50 [ms]": p50.get((*key, paths[p]), float("nan"))
                      if p in paths else float("nan") for p in _PATHS}}
            if run or any(pd.notna(row[f"{p} p50 [ms]"]) for p in _PATHS):
                rows.append(row)
    return pd.DataFrame(rows, columns=STUDY_COLUMNS)


def study_caption(batch_size: int) -> str:
    return (f"Training: the median over a configuration's runs of its mean epoch time (the "
            f"first epoch's warm-up included) and samples/s (warm-up steps left out), and "
            f"the last epoch's losses and accuracies. Inference: p50 latency of one batch of "
            f"{batch_size} at the training's image size and threads, fp32, the median over "
            f"stored runs of any sweep on the same machine; Python's TorchScript is "
            f"torch.jit.trace + freeze, C++'s the same file in the LibTorch runner; "
            f"AOTInductor is one torch.export + AOTInductor .pt2 package, loaded by "
            f"aoti_load_package from Python and by AOTIModelPackageLoader from C++. C++ has "
            f"no eager mode. Produce the runs with: `{STUDY_COMMANDS[0]}` and "
            f"`{STUDY_COMMANDS[1]}`.")
