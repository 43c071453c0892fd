"""The Run page's other jobs: the batch-size search, training and data loading, each a form
in an expander; and what every form of the page shares: its plan (the request built from the
form and expanded, or the reason it cannot be) and its launch button.

Streamlit widgets; the request classes are the page's (it names each job it offers), the
sentences engine/present/run_form.py's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import streamlit as st

from dashboard.numbers import Numbers
from dashboard.offered import MAX_VALUE_LEN, offered
from engine.core.catalog import IMAGE_MODELS, OFFERED_MODELS, RUNTIMES
from engine.scenarios.dataload.spec import DECODERS, FORMATS, NORMALIZERS, PIPELINES
from engine.core.errors import UserError
from engine.core.limits import (BATCH_RANGE, EPOCH_RANGE, LOAD_COUNT_RANGE, LOAD_SIZE_RANGE,
                                MARGIN_RANGE, MEMORY_CAP_MB_RANGE, P99_BOUND_MS_RANGE,
                                PROFILE_RANGE, STEPS_RANGE, TRAIN_BATCH_RANGE, WORKERS_RANGE,
                                logical_cores, parse_int_list)
from engine.core.paths import data_root
from engine.scenarios.training.spec import DATASETS, TRAIN_RUNTIMES
from engine.present.run_form import FRAMEWORKS, launched
from engine.run.search.batch_search import DEFAULT_MARGIN, FITS, MODES

__all__ = ["JobForm", "Plan", "plan", "Launcher", "batch_search_form", "training_form",
           "data_loading_form"]


@dataclass
class JobForm:
    """A form's choice: the request's keyword arguments, or the errors (by field) that
    refuse it before it is built."""

    fields: dict = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    """A form's request and what it expands to (specs, and a line per combination left out),
    or the errors by field that keep it from launching."""

    request: Any = None
    specs: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    errors: dict = field(default_factory=dict)

    @property
    def error(self) -> str:
        return next(iter(self.errors.values()), "")


def plan(kind: Callable[..., Any], form: JobForm) -> Plan:
    """kind(**form.fields) expanded; a refusal (UserError) is an error under its field."""
    if form.errors:
        return Plan(errors=dict(form.errors))
    request = kind(**form.fields)
    try:
        specs, skipped = request.expand()
    except UserError as exc:
        return Plan(request, errors={exc.field or "sweep": str(exc)})
    return Plan(request, list(specs), list(skipped))


class Launcher:
    """The page's launch buttons over the session's job queue. A request equal to one queued
    or running is explained instead of queued twice. No button for a session that may not
    write (the queue would refuse it anyway)."""

    def __init__(self, manager, can_write: bool) -> None:
        self.manager, self.can_write = manager, can_write

    def button(self, label: str, key: str, job: Plan, what: str, disabled: bool,
               **button) -> None:
        if not self.can_write:
            return
        if st.button(label, key=key, disabled=disabled, **button):
            try:
                view = self.manager.submit(job.request)
                active = self.manager.active()
                st.success(launched(what, view.job_id,
                                    active is None or active.job_id == view.job_id))
            except UserError as exc:
                st.warning(str(exc))


def batch_search_form(image_size: int | None) -> JobForm:
    """BatchSearchRequest's fields; image_size: the sweep form's (None: native)."""
    cores = logical_cores()
    st.caption("Doubles the batch until a probe runs out of memory (the cap), fails, or stops "
               "raising throughput by more than the margin (each doubling judged on 2-3 "
               "paired rounds), then bisects towards the memory limit. \"fits\" asks only "
               "for the largest batch that fits. Every probe is a stored run, all in one "
               "worker kept warm between probes. The cap is the resident memory a probe may "
               "add to its worker: held by the kernel (a memory cgroup) where this machine "
               "allows one, else by a watchdog.")
    b1, b2, b3, b4 = st.columns(4)
    model = b1.selectbox("Model", list(OFFERED_MODELS), key="bs_model",
                         **offered("bs_model", "model", OFFERED_MODELS))
    runtimes = [f"{f}/{r}" for f in FRAMEWORKS for r in RUNTIMES[f]]
    runtime = b2.selectbox("Runtime", runtimes, key="bs_runtime",
                           **offered("bs_runtime", "runtime", runtimes))
    threads = b3.selectbox("Threads", list(range(1, cores + 1)), index=cores - 1,
                           key="bs_threads", **offered("bs_threads", "threads",
                                                       range(1, cores + 1)))
    number = Numbers({})
    p99 = number(b4, "p99 bound (ms, 0 = none)", "bs_p99", "p99_bound_ms",
                 *P99_BOUND_MS_RANGE, default=0.0, step=10.0)
    b5, b6, b7, b8 = st.columns(4)
    margin = number(b5, "Margin", "bs_margin", "margin", *MARGIN_RANGE, default=DEFAULT_MARGIN,
                    help="a doubling must raise throughput by more than this to continue")
    largest = number(b6, "Largest batch", "bs_max", "max_batch", *BATCH_RANGE, default=256,
                     integer=True)
    cap = number(b7, "Memory cap (MB, 0 = 75 % of RAM)", "bs_cap", "memory_cap_mb",
                 *MEMORY_CAP_MB_RANGE, default=0, integer=True, step=512)
    mode = b8.selectbox("Find", list(MODES), key="bs_mode",
                        format_func=lambda m: ("largest batch that fits" if m == FITS
                                               else "throughput-optimal batch"),
                        **offered("bs_mode", "mode", MODES))
    if number.errors:
        return JobForm(errors=number.errors)
    framework, runtime = runtime.split("/")
    return JobForm(dict(model=model, framework=framework, runtime=runtime, mode=mode,
                        threads=int(threads), image_size=image_size, margin=float(margin),
                        max_batch=int(largest), p99_bound_ms=float(p99) or None,
                        memory_cap_bytes=int(cap) * 2**20 if cap else None))


def training_form() -> JobForm:
    """TrainRequest's fields; a bad batch size refuses it."""
    cores = logical_cores()
    st.caption("SGD on the same images in the same order in every framework; each step "
               "timed, each epoch scored on the test split. Results on the Training page.")
    t1, t2, t3, t4 = st.columns(4)
    models = t1.multiselect("Models", list(IMAGE_MODELS), default=["resnet18"],
                            key="tr_models", **offered("tr_models", "model", IMAGE_MODELS))
    frameworks = t2.multiselect("Frameworks", FRAMEWORKS, default=FRAMEWORKS,
                                key="tr_frameworks",
                                **offered("tr_frameworks", "framework", FRAMEWORKS))
    batch = t3.text_input("Batch sizes", "32", key="tr_batch",
                          **offered("tr_batch", "batch_size", max_len=MAX_VALUE_LEN))
    threads = t4.multiselect("Threads", list(range(1, cores + 1)), default=[cores],
                             key="tr_threads",
                             **offered("tr_threads", "threads", range(1, cores + 1)))
    train_runtimes = [r for f in FRAMEWORKS for r in TRAIN_RUNTIMES[f]]
    runtimes = st.multiselect(
        "Training runtimes", train_runtimes,
        **offered("tr_runtimes", "runtime", train_runtimes),
        default=[TRAIN_RUNTIMES[f][0] for f in FRAMEWORKS], key="tr_runtimes",
        help="torch: eager, or libtorch (the same model scripted and trained in C++); "
             "tensorflow: tf_function")
    t5, t6, t7, t8, t9, t10 = st.columns(6)
    dataset = t5.selectbox("Data set", list(DATASETS), key="tr_dataset",
                           **offered("tr_dataset", "dataset", DATASETS),
                           help="; ".join(f"{k}: {v}" for k, v in DATASETS.items()))
    number = Numbers({})
    epochs = number(t6, "Epochs", "tr_epochs", "epochs", *EPOCH_RANGE, default=1, integer=True)
    steps = number(t7, "Steps per epoch (0 = all)", "tr_steps", "steps_per_epoch", 0,
                   STEPS_RANGE[1], default=0, integer=True)
    lr = number(t8, "Learning rate", "tr_lr", "lr", 0.0, 10.0, default=0.01, step=0.005,
                format="%.4f")
    momentum = number(t9, "Momentum", "tr_momentum", "momentum", 0.0, 0.999, default=0.9,
                      step=0.05)
    profile = number(t10, "Profile steps", "tr_profile", "profile_steps", *PROFILE_RANGE,
                     default=0, integer=True)
    try:
        batches = parse_int_list(batch, "batch_size", *TRAIN_BATCH_RANGE)
    except UserError as exc:
        number.errors.setdefault("batch_size", str(exc))
    if number.errors:
        return JobForm(errors=number.errors)
    return JobForm(dict(models=tuple(models), frameworks=tuple(frameworks),
                        batch_sizes=tuple(batches), threads=tuple(sorted(threads)),
                        epochs=int(epochs), steps_per_epoch=int(steps) or None, dataset=dataset,
                        lr=float(lr), momentum=float(momentum), profile_steps=int(profile),
                        runtimes=tuple(runtimes)))


def data_loading_form() -> JobForm:
    """LoadRequest's fields; a bad batch size or worker count refuses it."""
    cores = logical_cores()
    st.caption(f"Reads a generated, deterministic image set from disk (made once under "
               f"`{data_root()}`); every implementation's first batch is checked against the "
               "ground truth before timing. Results on the Data loading page.")
    d1, d2, d3, d4 = st.columns(4)
    formats = d1.multiselect("Formats", list(FORMATS), default=["png"], key="dl_formats",
                             **offered("dl_formats", "format", FORMATS),
                             help="; ".join(f"{k}: {v}" for k, v in FORMATS.items()))
    decoders = d2.multiselect("Decoders", list(DECODERS), default=["pillow", "opencv"],
                              key="dl_decoders", **offered("dl_decoders", "decoder", DECODERS))
    normalizers = d3.multiselect("Normalise with", list(NORMALIZERS),
                                 default=["numpy", "torch"], key="dl_normalizers",
                                 **offered("dl_normalizers", "normalizer", NORMALIZERS))
    pipelines = d4.multiselect("Pipelines", list(PIPELINES), default=["loop"],
                               key="dl_pipelines",
                               **offered("dl_pipelines", "pipeline", PIPELINES),
                               help="; ".join(f"{k}: {v}" for k, v in PIPELINES.items()))
    d5, d6, d7, d8, d9 = st.columns(5)
    batch = d5.text_input("Batch sizes", "8, 32", key="dl_batch",
                          **offered("dl_batch", "batch_size", max_len=MAX_VALUE_LEN))
    workers = d6.text_input("Workers", "0", key="dl_workers",
                            **offered("dl_workers", "workers", max_len=MAX_VALUE_LEN),
                            help="parallel workers of torch_dataloader / tf_data; the plain "
                                 "loop always runs at 0")
    threads = d7.multiselect("Threads", list(range(1, cores + 1)), default=[1],
                             key="dl_threads",
                             **offered("dl_threads", "threads", range(1, cores + 1)))
    number = Numbers({})
    count = number(d8, "Images", "dl_count", "count", *LOAD_COUNT_RANGE, default=256,
                   integer=True)
    size = number(d9, "Image size [px]", "dl_size", "image_size", *LOAD_SIZE_RANGE,
                  default=256, integer=True)
    try:
        batches = parse_int_list(batch, "batch_size", *BATCH_RANGE)
        worker_counts = parse_int_list(workers, "workers", *WORKERS_RANGE)
    except UserError as exc:
        number.errors.setdefault(exc.field or "batch_size", str(exc))
    if number.errors:
        return JobForm(errors=number.errors)
    return JobForm(dict(formats=tuple(formats), decoders=tuple(decoders),
                        normalizers=tuple(normalizers), pipelines=tuple(pipelines),
                        batch_sizes=tuple(batches), workers=tuple(worker_counts),
                        threads=tuple(sorted(threads)), count=int(count), image_size=int(size)))
