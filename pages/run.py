"""Run: pick a sweep, see its size and a rough time, launch it, watch it live."""

import streamlit as st

from engine.core.catalog import CATALOG, RUNTIMES
from engine.core.errors import UserError
from engine.run.estimate import estimate_seconds
from dashboard.cluster_form import executor_choice
from dashboard.job_panel import jobs_section
from engine.present.links import (MAX_VALUE_LEN, note, parse_choice, parse_choices,
                                  parse_number)
from dashboard.model_form import model_form, source_choice
from engine.run.batch_search import DEFAULT_MARGIN, BatchSearchRequest
from engine.run.requests import LoadRequest, SweepRequest, TrainRequest
from engine.core.dataload import DECODERS, FORMATS, NORMALIZERS, PIPELINES
from engine.core.budget import default_max_rounds
from engine.core.limits import (DEFAULT_ROUNDS, DEFAULT_VERDICT_MARGIN, TIME_BUDGET_RANGE,
                                VERDICT_MARGIN_RANGE)
from engine.core.paths import data_root
from engine.core.inference import PRECISIONS
from engine.core.limits import (BATCH_RANGE, EPOCH_RANGE, IMAGE_RANGE, LOAD_COUNT_RANGE,
                                LOAD_SIZE_RANGE, MARGIN_RANGE, PROFILE_RANGE, ROUNDS_RANGE,
                                TRAIN_BATCH_RANGE, WORKERS_RANGE, logical_cores, parse_int_list)
from engine.core.policy import MeasurementPolicy
from engine.core.training import DATASETS, TRAIN_RUNTIMES
from dashboard.session import access, busy, database, job_manager, read
from store.queries import flops_for, framework_gflops_per_thread, latest_latency
from store.runs import model_info

WHO = access()
if WHO.viewer:  # app.py leaves this page out; a deep link on a fresh server still lands here
    st.info(WHO.why_read_only(), icon=":material/visibility:")
    st.stop()
if not WHO.can_write:
    st.warning(WHO.why_read_only(), icon=":material/lock:")

FRAMEWORKS = ["torch", "tensorflow"]
ALL_RUNTIMES = [r for f in FRAMEWORKS for r in RUNTIMES[f]]
BATCH_PRESETS = [1, 2, 4, 8, 16, 32, 64, 128, 256]
CORES = logical_cores()
q = st.query_params  # a sweep can be shared as a link: ?model=...&batch=1,8&...


def _q_list(key, default, options=None, lo=1, hi=BATCH_RANGE[1]):
    """Values from the link: names matched against `options`, or integers in lo..hi. A
    bad value is reported (naming the field and what is allowed) and left out; with nothing
    usable left, the default."""
    raw = q.get(key)
    if not raw:
        return default
    if options is not None:
        values, msg = parse_choices(key, raw, {str(o): o for o in options})
        msgs = [msg]
    else:
        parsed = [parse_number(key, part.strip(), lo, hi, integer=True)
                  for part in raw[:MAX_VALUE_LEN + 1].split(",") if part.strip()]
        values = [v for v, _ in parsed if v is not None]
        msgs = [m for _, m in parsed]
        if len(raw) > MAX_VALUE_LEN:
            msgs.append(note(key, raw, f"at most {MAX_VALUE_LEN} characters"))
    link_errors.extend(m for m in msgs if m)
    return values or default


def _q_int(key, default, lo=ROUNDS_RANGE[0], hi=ROUNDS_RANGE[1], cast=int):
    """A number from the link, within lo..hi; a bad one is reported (naming the field and
    the range) and the default used, so a shared link never breaks the page."""
    value, msg = parse_number(key, q.get(key), lo, hi, integer=cast is int,
                              action=f"using {default:g}")
    if msg:
        link_errors.append(msg)
    return default if value is None else value


def _q_flag(key) -> bool:
    """A switch from the link: 1 or 0; anything else is reported and the switch left off."""
    value, msg = parse_choice(key, q.get(key), {"1": True, "0": False})
    if msg:
        link_errors.append(msg)
    return bool(value)


link_errors: list[str] = []


def _model_label(facts):
    def label(name):
        t, k = facts.get((name, "torch")), facts.get((name, "tensorflow"))
        parts = [f"{CATALOG[name].native_size}px"]
        if t is not None:
            parts.append(f"{t[0] / 1e6:.1f}M params, {t[1] / 1e9:.2f} GFLOPs (torch)")
        if k is not None:
            parts.append(f"{k[0] / 1e6:.1f}M params (keras)")
        return f"{name}  ·  " + ", ".join(parts)
    return label


st.title("Run a benchmark sweep")
info = read(model_info)
facts = {(r.model, r.framework): (r.params, r.flops_per_sample)
         for r in info.itertuples()
         if r.model in CATALOG and r.image_size == CATALOG[r.model].native_size}

errors: dict[str, str] = {}
where = executor_choice(WHO.can_write)  # only when the server names a Ray cluster
slot_where = st.empty()
if where.error:
    errors[where.field] = where.error
SWEEP_CORES = where.cores or CORES  # what threads x replicas must fit: the nodes, or here
LINK_BATCHES = _q_list("batch", [])  # once: presets take theirs, the free field the rest
from_file = source_choice(q.get("source"), link_errors)  # ?source=file
left, right = st.columns(2)
with left:
    if from_file:  # the framework follows from the file's format
        form = model_form(can_write=WHO.can_write, link_file=q.get("model_file"),
                          notes=link_errors, link=q)
        errors.update(form.errors)
        models, frameworks, runtimes = form.models, form.frameworks, form.runtimes
        slot_models = slot_frameworks = slot_runtimes = form.slots["model_file"]
    else:
        models = st.multiselect("Models", list(CATALOG), key="models",
                                default=_q_list("model", ["efficientnet_b0"], list(CATALOG)),
                                format_func=_model_label(facts),
                                help="params and FLOPs appear once counted "
                                     "(`python -m engine models`, or after a first run)")
        slot_models = st.empty()
        frameworks = st.multiselect("Frameworks", FRAMEWORKS, key="frameworks",
                                    default=_q_list("framework", FRAMEWORKS, FRAMEWORKS))
        slot_frameworks = st.empty()
        runtimes = st.multiselect(
            "Runtimes", ALL_RUNTIMES, key="runtimes",
            default=_q_list("runtime", [], ALL_RUNTIMES),
            placeholder="each framework's default (torch eager, tensorflow tf_function)",
            format_func=lambda r: f"{r} ({', '.join(f for f in FRAMEWORKS if r in RUNTIMES[f])})",
            help="each runtime applies to the frameworks that have it; its output is checked "
                 "against the framework's reference before it is timed")
        slot_runtimes = st.empty()
    presets = st.multiselect("Batch sizes", BATCH_PRESETS, key="batch_presets",
                             default=[b for b in LINK_BATCHES if b in BATCH_PRESETS]
                             if LINK_BATCHES else [1, 8])
    batch_free = st.text_input("More batch sizes", key="batch_free",
                               value=",".join(str(b) for b in LINK_BATCHES
                                              if b not in BATCH_PRESETS),
                               placeholder="e.g. 3, 48",
                               help=f"comma-separated integers {BATCH_RANGE[0]}..{BATCH_RANGE[1]}")
    slot_batch = st.empty()
    cores_are = ("the chosen nodes' fewest CPUs" if where.cores
                 else "this machine's logical cores")
    threads = st.multiselect("Intra-op threads", list(range(1, SWEEP_CORES + 1)),
                             key="threads",
                             default=[t for t in _q_list("threads", [CORES], hi=SWEEP_CORES)
                                      if 1 <= t <= SWEEP_CORES] or [SWEEP_CORES],
                             help=f"1..{SWEEP_CORES} ({cores_are})")
    replicas = st.multiselect(
        "Replicas", list(range(1, SWEEP_CORES + 1)), key="replicas",
        default=_q_list("replicas", [1], hi=SWEEP_CORES),
        help=f"R identical workers per configuration, each with its threads on cores of its "
             f"own, timed over one window (the throughput of R streams at once); threads x "
             f"replicas must fit {SWEEP_CORES} cores ({cores_are}), other splits are left out")
    slot_threads = st.empty()
with right:
    precision = st.selectbox("Precision", list(PRECISIONS), key="precision",
                             help="bf16 runs on torch eager, channels_last, torchscript and "
                                  "compile; other runtimes are refused with the reason")
    image_text = "" if from_file else st.text_input(  # a file's input says its size
        "Image size (px)", key="image_size", value=q.get("image_size", ""),
        placeholder="native size of each model",
        help=f"blank: each model's native size; else {IMAGE_RANGE[0]}..{IMAGE_RANGE[1]}")
    slot_image = st.empty()
    d = MeasurementPolicy()
    c1, c2, c3 = st.columns(3)
    min_time = c1.number_input("Min time (s)", key="min_time", min_value=0.0,
                               value=_q_int("min_time", d.min_time_s, 0.0, 3600.0, float),
                               step=0.5)
    min_iters = c2.number_input("Min iterations", key="min_iters", min_value=1,
                                value=_q_int("min_iters", d.min_iters, 1, 100_000), step=5)
    warmup = c3.number_input("Warm-up iterations", key="warmup", min_value=0,
                             value=_q_int("warmup", d.warmup_iters, 0, 10_000), step=1)
    r1, r2, r3 = st.columns(3)
    rounds = r1.number_input("Rounds", key="rounds", min_value=ROUNDS_RANGE[0],
                             max_value=ROUNDS_RANGE[1],
                             value=_q_int("rounds", DEFAULT_ROUNDS),
                             help="the minimum: each round runs the whole sweep in fresh "
                                  "processes, in alternating order; comparisons pair rounds "
                                  "and test significance across them")
    max_rounds = r2.number_input(
        "Max rounds", key="max_rounds", min_value=ROUNDS_RANGE[0], max_value=ROUNDS_RANGE[1],
        value=_q_int("max_rounds", default_max_rounds(DEFAULT_ROUNDS)),
        help="rounds until decided: a contest still undecided after the minimum gets more "
             "rounds, for its configurations only, up to this many (equal to Rounds: none)")
    budget_text = r3.text_input("Time budget (s)", key="time_budget",
                                value=q.get("time_budget", ""), placeholder="no limit",
                                help="no extra round starts once the sweep would pass this "
                                     "many seconds")
    v1, v2 = st.columns([1, 2])
    margin_pct = v1.number_input(
        "Verdict margin (%)", key="margin", min_value=100 * VERDICT_MARGIN_RANGE[0],
        max_value=100 * VERDICT_MARGIN_RANGE[1], step=0.5,
        value=_q_int("margin", 100 * DEFAULT_VERDICT_MARGIN, 100 * VERDICT_MARGIN_RANGE[0],
                     100 * VERDICT_MARGIN_RANGE[1], float),
        help="a winner is named only when the 95 % sequential interval clears ± this; a "
             "contest whose interval lies inside it stops early as equivalent")
    contention = v2.checkbox(
        "Also measure beside a noisy neighbour (shared vs dedicated)", key="contention",
        value=_q_flag("contention"),
        help="every configuration also runs beside a busy process the engine starts on one "
             "of its cores (steady, and on/off), and torch also with OpenMP's passive wait "
             "policy: each a setting of its own; Compare shows each contender's slowdown and "
             "whether the verdict changes. Each configuration runs 3 times per round, torch's "
             "3 more with passive waits")
    profile = st.number_input("Profile iterations (0 = off)", key="profile", min_value=0,
                              max_value=PROFILE_RANGE[1],
                              value=_q_int("profile", 0, *PROFILE_RANGE),
                              help="after each timed pass, profile this many more "
                                   "iterations (torch.profiler / TF profiler) in a separate "
                                   "pass; top operators and the Chrome trace appear on "
                                   "Results")
    slot_policy = st.empty()

batch_sizes = list(presets)
try:
    batch_sizes += [b for b in parse_int_list(batch_free, "batch_size", *BATCH_RANGE)
                    if b not in batch_sizes]
except UserError as exc:
    errors["batch_size"] = str(exc)
time_budget = None
if budget_text.strip():
    try:
        time_budget = float(budget_text)
    except ValueError:
        errors["time_budget_s"] = (f"time_budget_s: {budget_text.strip()!r} is not a number; "
                                   f"allowed: number {TIME_BUDGET_RANGE[0]:g}.."
                                   f"{TIME_BUDGET_RANGE[1]:g}")
image_size = None
if image_text.strip():
    try:
        image_size = parse_int_list(image_text, "image_size", *IMAGE_RANGE)[0]
    except UserError as exc:
        errors["image_size"] = str(exc)

request, specs, left_out = None, [], []
if not errors:
    request = SweepRequest(
        models=tuple(models), frameworks=tuple(frameworks), batch_sizes=tuple(sorted(batch_sizes)),
        threads=tuple(sorted(threads)), image_size=image_size, precision=precision,
        policy=MeasurementPolicy(warmup_iters=int(warmup), min_time_s=float(min_time),
                                 min_iters=int(min_iters)),
        rounds=int(rounds), max_rounds=int(max_rounds), time_budget_s=time_budget,
        margin=float(margin_pct) / 100, contention=bool(contention),
        runtimes=tuple(runtimes), profile_steps=int(profile), replicas=tuple(sorted(replicas)),
        executor=where.executor, placements=where.placements, cores=where.cores,
        **({"user_model": form.source} if from_file else {}))
    try:
        specs, left_out = request.expand()
    except UserError as exc:
        errors[exc.field or "sweep"] = str(exc)

for message in link_errors:
    st.warning(message, icon=":material/link_off:")
slots = {"model": slot_models, "framework": slot_frameworks, "runtime": slot_runtimes,
         "batch_size": slot_batch,
         "intra_threads": slot_threads, "threads": slot_threads, "replicas": slot_threads,
         "address": slot_where, "placement": slot_where, "executor": slot_where,
         "image_size": slot_image,
         "precision": slot_image, "profile_steps": slot_runtimes, **(form.slots if from_file else {})}
for field, message in errors.items():
    slots.get(field, slot_policy).error(message, icon=":material/error:")

manager = job_manager()
if specs:
    try:
        with database().connect() as con:
            seconds = estimate_seconds(
                specs, request.rounds, known_latency_s=lambda s: latest_latency(con, s),
                flops_per_sample=lambda s: flops_for(con, s.model, s.framework, s.image_size),
                gflops_per_thread=lambda f: framework_gflops_per_thread(con, f))
    except UserError as exc:  # another process holds the file past the wait
        busy(str(exc))
    budget = request.budget()
    more = (f" (up to {budget.max_rounds} rounds for undecided contests"
            + (f", within {budget.time_budget_s:g} s" if budget.time_budget_s else "") + ")"
            if budget.max_rounds > budget.rounds else "")
    kinds = f" × {where.width} node kinds" if where.width > 1 else ""  # at once, each
    runs = len(specs) * request.rounds * where.width
    st.info(f"**{len(specs)} configuration{'s' if len(specs) > 1 else ''} × {request.rounds} "
            f"round{'s' if request.rounds > 1 else ''}{kinds} = "
            f"{runs} run{'s' if runs > 1 else ''}"
            f"**{more}, rough estimate for the minimum ≈ "
            f"{seconds / 60:.1f} min", icon=":material/schedule:")
    if left_out:
        st.caption("Left out (more threads than cores): " + "; ".join(left_out))

def launch(label: str, key: str, request, what: str, disabled: bool, **button) -> None:
    """One form's launch button: disabled while its input is refused; a request equal to
    one queued or running is explained instead of queued twice. Absent for a session that
    may not write (the queue would refuse it anyway)."""
    if not WHO.can_write:
        return
    if st.button(label, key=key, disabled=disabled, **button):
        try:
            view = manager.submit(request)
            active = manager.active()
            where = ("starts now" if active is None or active.job_id == view.job_id
                     else "is queued")
            st.success(f"{what} job {view.job_id} {where}.")
        except UserError as exc:
            st.warning(str(exc))

launch("Launch", "launch", request, "Sweep", bool(errors) or not specs, type="primary")


with st.expander("Find the optimal batch size"):
    st.caption("Doubles the batch until a probe runs out of memory (the cap), fails, or stops "
               "raising throughput by more than the margin, then bisects towards the memory "
               "limit. Every probe is a stored run.")
    b1, b2, b3, b4 = st.columns(4)
    bs_model = b1.selectbox("Model", list(CATALOG), key="bs_model")
    bs_rt = b2.selectbox("Runtime", [f"{f}/{r}" for f in FRAMEWORKS for r in RUNTIMES[f]],
                         key="bs_runtime")
    bs_threads = b3.selectbox("Threads", list(range(1, CORES + 1)), index=CORES - 1,
                              key="bs_threads")
    bs_p99 = b4.number_input("p99 bound (ms, 0 = none)", key="bs_p99", min_value=0.0,
                             value=0.0, step=10.0)
    b5, b6, b7 = st.columns(3)
    bs_margin = b5.number_input("Margin", key="bs_margin", min_value=MARGIN_RANGE[0],
                                max_value=MARGIN_RANGE[1], value=DEFAULT_MARGIN, step=0.01, help="a doubling must raise "
                                "throughput by more than this to continue")
    bs_max = b6.number_input("Largest batch", key="bs_max", min_value=BATCH_RANGE[0],
                             max_value=BATCH_RANGE[1],
                             value=256)
    bs_cap = b7.number_input("Memory cap (MB, 0 = 75 % of RAM)", key="bs_cap", min_value=0,
                             value=0, step=512)
    framework, runtime = bs_rt.split("/")
    search = BatchSearchRequest(
        model=bs_model, framework=framework, runtime=runtime, threads=int(bs_threads),
        image_size=image_size, margin=float(bs_margin), max_batch=int(bs_max),
        p99_bound_ms=float(bs_p99) or None,
        memory_cap_bytes=int(bs_cap) * 2**20 if bs_cap else None)
    try:
        search.specs()
        search_error = ""
    except UserError as exc:
        search_error = str(exc)
        st.error(search_error)
    launch("Start search", "bs_launch", search, "Search", bool(search_error))


with st.expander("Train models (time per epoch, loss, accuracy)"):
    st.caption("SGD on the same images in the same order in every framework; each step "
               "timed, each epoch scored on the test split. Results on the Training page.")
    t1, t2, t3, t4 = st.columns(4)
    tr_models = t1.multiselect("Models", list(CATALOG), default=["resnet18"], key="tr_models")
    tr_fw = t2.multiselect("Frameworks", FRAMEWORKS, default=FRAMEWORKS, key="tr_frameworks")
    tr_batch = t3.text_input("Batch sizes", "32", key="tr_batch")
    tr_threads = t4.multiselect("Threads", list(range(1, CORES + 1)), default=[CORES],
                                key="tr_threads")
    tr_runtimes = st.multiselect(
        "Training runtimes", [r for f in FRAMEWORKS for r in TRAIN_RUNTIMES[f]],
        default=[TRAIN_RUNTIMES[f][0] for f in FRAMEWORKS], key="tr_runtimes",
        help="torch: eager, or libtorch (the same model scripted and trained in C++); "
             "tensorflow: tf_function")
    t5, t6, t7, t8, t9, t10 = st.columns(6)
    tr_dataset = t5.selectbox("Data set", list(DATASETS), key="tr_dataset",
                              help="; ".join(f"{k}: {v}" for k, v in DATASETS.items()))
    tr_epochs = t6.number_input("Epochs", key="tr_epochs", min_value=EPOCH_RANGE[0],
                                max_value=EPOCH_RANGE[1], value=1)
    tr_steps = t7.number_input("Steps per epoch (0 = all)", key="tr_steps", min_value=0,
                               value=0)
    tr_lr = t8.number_input("Learning rate", key="tr_lr", min_value=0.0, max_value=10.0,
                            value=0.01, step=0.005, format="%.4f")
    tr_mom = t9.number_input("Momentum", key="tr_momentum", min_value=0.0, max_value=0.999,
                             value=0.9, step=0.05)
    tr_prof = t10.number_input("Profile steps", key="tr_profile", min_value=0,
                               max_value=PROFILE_RANGE[1], value=0)
    train, train_error = None, ""
    try:
        train = TrainRequest(
            models=tuple(tr_models), frameworks=tuple(tr_fw),
            batch_sizes=tuple(parse_int_list(tr_batch, "batch_size", *TRAIN_BATCH_RANGE)),
            threads=tuple(sorted(tr_threads)), epochs=int(tr_epochs),
            steps_per_epoch=int(tr_steps) or None, dataset=tr_dataset, lr=float(tr_lr),
            momentum=float(tr_mom), profile_steps=int(tr_prof), runtimes=tuple(tr_runtimes))
        train_specs = train.specs()
        st.info(f"**{len(train_specs)} training run{'s' if len(train_specs) > 1 else ''}** of "
                f"{train_specs[0].epochs} epoch(s) × {train_specs[0].steps_in_epoch()} steps",
                icon=":material/schedule:")
    except UserError as exc:
        train_error = str(exc)
        st.error(train_error, icon=":material/error:")
    launch("Start training", "tr_launch", train, "Training", bool(train_error))


with st.expander("Measure data loading (decoders, normalisation, pipelines)"):
    st.caption(f"Reads a generated, deterministic image set from disk (made once under "
               f"`{data_root()}`); every implementation's first batch is checked against the "
               "ground truth before timing. Results on the Data loading page.")
    d1, d2, d3, d4 = st.columns(4)
    dl_formats = d1.multiselect("Formats", list(FORMATS), default=["png"], key="dl_formats",
                                help="; ".join(f"{k}: {v}" for k, v in FORMATS.items()))
    dl_decoders = d2.multiselect("Decoders", list(DECODERS), default=["pillow", "opencv"],
                                 key="dl_decoders")
    dl_norms = d3.multiselect("Normalise with", list(NORMALIZERS), default=["numpy", "torch"],
                              key="dl_normalizers")
    dl_pipes = d4.multiselect("Pipelines", list(PIPELINES), default=["loop"], key="dl_pipelines",
                              help="; ".join(f"{k}: {v}" for k, v in PIPELINES.items()))
    d5, d6, d7, d8, d9 = st.columns(5)
    dl_batch = d5.text_input("Batch sizes", "8, 32", key="dl_batch")
    dl_workers = d6.text_input("Workers", "0", key="dl_workers",
                               help="parallel workers of torch_dataloader / tf_data; the plain "
                                    "loop always runs at 0")
    dl_threads = d7.multiselect("Threads", list(range(1, CORES + 1)), default=[1],
                                key="dl_threads")
    dl_count = d8.number_input("Images", key="dl_count", min_value=LOAD_COUNT_RANGE[0],
                               max_value=LOAD_COUNT_RANGE[1], value=256)
    dl_size = d9.number_input("Image size [px]", key="dl_size", min_value=LOAD_SIZE_RANGE[0],
                              max_value=LOAD_SIZE_RANGE[1], value=256)
    load, load_error = None, ""
    try:
        load = LoadRequest(
            formats=tuple(dl_formats), decoders=tuple(dl_decoders),
            normalizers=tuple(dl_norms), pipelines=tuple(dl_pipes),
            batch_sizes=tuple(parse_int_list(dl_batch, "batch_size", *BATCH_RANGE)),
            workers=tuple(parse_int_list(dl_workers, "workers", *WORKERS_RANGE)),
            threads=tuple(sorted(dl_threads)), count=int(dl_count), image_size=int(dl_size))
        load_specs, load_skipped = load.expand()
        st.info(f"**{len(load_specs)} data-loading run{'s' if len(load_specs) > 1 else ''}** "
                f"of {len({s.runtime for s in load_specs})} implementation(s)",
                icon=":material/schedule:")
        if load_skipped:
            st.caption("Not run: " + "; ".join(load_skipped))
    except UserError as exc:
        load_error = str(exc)
        st.error(load_error, icon=":material/error:")
    launch("Start data loading", "dl_launch", load, "Data-loading", bool(load_error))


jobs_section(manager, WHO.can_write)
