"""The Run page's forms, the pure part: their defaults, labels, the text boxes parsed into
values, and the sentences that say what a form will run. No Streamlit (dashboard/sweep_form.py
and dashboard/job_forms.py draw the widgets); every function is text or numbers in and out.
"""

from __future__ import annotations

from typing import Callable

import pandas as pd

from engine.core.catalog import CATALOG, RUNTIMES, check_size
from engine.core.errors import UserError
from engine.core.limits import BATCH_RANGE, IMAGE_RANGE, TIME_BUDGET_RANGE, parse_int_list
from engine.core.precision import BF16_FLAGS
from engine.core.runtimes import ROWS, RuntimeOption, owners

__all__ = ["FRAMEWORKS", "ALL_RUNTIMES", "BATCH_PRESETS", "DEFAULT_MODELS", "DEFAULT_BATCHES",
           "model_facts", "model_label", "runtime_label", "split_batches", "batch_sizes",
           "parse_time_budget", "parse_image_size", "default_threads", "sweep_summary",
           "train_summary", "load_summary", "launched", "precision_help", "option_help"]

FRAMEWORKS = ["torch", "tensorflow"]
ALL_RUNTIMES = [r for f in FRAMEWORKS for r in RUNTIMES[f]]
BATCH_PRESETS = [1, 2, 4, 8, 16, 32, 64, 128, 256]
DEFAULT_MODELS = ["efficientnet_b0"]  # small and quick: a first sweep finishes in minutes
DEFAULT_BATCHES = [1, 8]  # latency (one sample) and a batch that shows the throughput gain


def _s(count: int) -> str:
    return "s" if count > 1 else ""


def model_facts(info: pd.DataFrame) -> dict[tuple[str, str], tuple[int, int]]:
    """(model, framework) -> (params, FLOPs per sample) from store.runs.model_info, counted
    at the catalog model's native size (a count at another size is another model's)."""
    return {(r.model, r.framework): (r.params, r.flops_per_sample)
            for r in info.itertuples()
            if r.model in CATALOG and r.image_size == CATALOG[r.model].native_size}


def model_label(facts: dict) -> Callable[[str], str]:
    """The Models box's label for a catalog model: its native size, then what is counted."""
    def label(name: str) -> str:
        t, k = facts.get((name, "torch")), facts.get((name, "tensorflow"))
        info = CATALOG[name]
        parts = [f"{info.native_size}px" if info.size_unit == "px"
                 else f"{info.native_size} tokens"]
        if t is not None:
            parts.append(f"{t[0] / 1e6:.1f}M params, {t[1] / 1e9:.2f} GFLOPs (torch)")
        if k is not None:
            parts.append(f"{k[0] / 1e6:.1f}M params (keras)")
        return f"{name}  ·  " + ", ".join(parts)
    return label


def runtime_label(runtime: str) -> str:
    """A runtime with the frameworks that have it: 'xla (tensorflow)'."""
    return f"{runtime} ({', '.join(f for f in FRAMEWORKS if runtime in RUNTIMES[f])})"


def _by_framework(rows) -> str:
    """'torch eager, channels_last; tensorflow keras'."""
    return "; ".join(f"{f} {', '.join(r.name for r in rows if r.framework == f)}"
                     for f in dict.fromkeys(r.framework for r in rows))


def precision_help() -> str:
    """The Precision box's help: which runtime runs which precision, from their rows."""
    rows = [r for r in ROWS if r.framework in FRAMEWORKS]
    anywhere = [r for r in rows if "bf16" in r.precisions and not r.bf16_needs_flags]
    flagged = [r for r in rows if "bf16" in r.precisions and r.bf16_needs_flags]
    return (f"bf16: {_by_framework(anywhere)}; {_by_framework(flagged)} where the CPU has "
            f"{' or '.join(BF16_FLAGS)}. int8: "
            f"{_by_framework([r for r in rows if 'int8' in r.precisions])}. Other runtimes "
            "are refused with the reason")


def option_help(option: RuntimeOption) -> str:
    """A runtime option's box help: 'OpenVINO's performance hint (the runtime openvino
    only); the streams it chose are stored with each run'."""
    return f"{option.what} ({owners(option)} only)" + (f"; {option.stored}" if option.stored
                                                       else "")


def split_batches(batches: list[int]) -> tuple[list[int], str]:
    """Batch sizes as the form holds them: the presets picked, and the rest as the text of
    the "More batch sizes" box."""
    return ([b for b in batches if b in BATCH_PRESETS],
            ",".join(str(b) for b in batches if b not in BATCH_PRESETS))


def batch_sizes(presets: list[int], more: str) -> list[int]:
    """The presets picked, then the box's others not already picked (UserError naming
    batch_size for a bad entry)."""
    chosen = list(presets)
    return chosen + [b for b in parse_int_list(more, "batch_size", *BATCH_RANGE)
                     if b not in chosen]


def parse_time_budget(text: str) -> float | None:
    """The "Time budget (s)" box: blank is no limit; the range is the request's to check."""
    if not text.strip():
        return None
    try:
        return float(text)
    except ValueError:
        raise UserError(f"time_budget_s: {text.strip()!r} is not a number; allowed: number "
                        f"{TIME_BUDGET_RANGE[0]:g}..{TIME_BUDGET_RANGE[1]:g}",
                        field="time_budget_s") from None


def parse_image_size(text: str, models=()) -> int | None:
    """The "Image size (px)" box, which is a token model's sequence length too: blank is
    each model's native size; else within every chosen catalog model's range
    (catalog.check_size: 32..1024 px, whole patches, or 1..512 tokens)."""
    if not text.strip():
        return None
    size = parse_int_list(text, "image_size", 1, IMAGE_RANGE[1])[0]
    for m in models:
        if m in CATALOG:
            check_size(m, size)
    return size


def default_threads(cores: int, sweep_cores: int) -> list[int]:
    """Every core of this machine, or of the chosen nodes when they have fewer."""
    return [min(cores, sweep_cores)]


def sweep_summary(configurations: int, budget, width: int, seconds: float) -> str:
    """What a sweep will run: configurations × rounds (× node kinds, each at once) = runs,
    the extra rounds its budget allows, and a rough time for the minimum. budget: the
    request's RoundBudget (rounds, max_rounds, time_budget_s)."""
    more = (f" (up to {budget.max_rounds} rounds for undecided contests"
            + (f", within {budget.time_budget_s:g} s" if budget.time_budget_s else "") + ")"
            if budget.max_rounds > budget.rounds else "")
    kinds = f" × {width} node kinds" if width > 1 else ""
    runs = configurations * budget.rounds * width
    return (f"**{configurations} configuration{_s(configurations)} × {budget.rounds} "
            f"round{_s(budget.rounds)}{kinds} = {runs} run{_s(runs)}**{more}, rough estimate "
            f"for the minimum ≈ {seconds / 60:.1f} min")


def train_summary(specs: list) -> str:
    """What a training request will run (TrainSpecs, all of one length)."""
    return (f"**{len(specs)} training run{_s(len(specs))}** of {specs[0].epochs} epoch(s) × "
            f"{specs[0].steps_in_epoch()} steps")


def load_summary(specs: list) -> str:
    """What a data-loading request will run (LoadSpecs)."""
    return (f"**{len(specs)} data-loading run{_s(len(specs))}** of "
            f"{len({s.runtime for s in specs})} implementation(s)")


def launched(what: str, job_id: int, starts_now: bool) -> str:
    return f"{what} job {job_id} {'starts now' if starts_now else 'is queued'}."
