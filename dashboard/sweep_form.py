"""The Run page's sweep form: the models (the catalog's, or a user's file), frameworks,
runtimes, batch sizes, threads and replicas on the left; precision, image size, the
measurement policy, the round budget, the verdict margin, contention and profiling on the
right. Streamlit widgets; the text boxes are parsed, and the labels and defaults chosen, in
engine/present/run_form.py.

The form is a link (?model=resnet18&framework=torch&batch=1,8&rounds=5): a link opened fills
the widgets through the page's PageLink, a refused value is a note naming the field, what is
allowed and what the form uses instead, and the form writes back the values that differ from
its defaults (a default, such as every core of this machine, stays the opener's).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import streamlit as st

from dashboard.cluster_form import Where
from dashboard.link_state import PageLink
from dashboard.model_form import model_form, source_choice
from dashboard.numbers import Numbers
from dashboard.offered import MAX_VALUE_LEN, offered
from dashboard.session import busy, database
from engine.core.budget import default_max_rounds
from engine.core.catalog import OFFERED_MODELS
from engine.core.errors import UserError
from engine.scenarios.inference.spec import PRECISIONS
from engine.core.model_source import fill_inputs
from engine.core.limits import (BATCH_RANGE, DEFAULT_ENERGY_S, DEFAULT_ROUNDS,
                                DEFAULT_VERDICT_MARGIN,
                                IMAGE_RANGE, PROFILE_RANGE, ROUNDS_RANGE,
                                VERDICT_MARGIN_RANGE, logical_cores)
from engine.core.policy import MeasurementPolicy
from engine.core.runtimes import OPTIONS, RuntimeOptions
from engine.present.run_form import (ALL_RUNTIMES, BATCH_PRESETS, DEFAULT_BATCHES,
                                     DEFAULT_MODELS, FRAMEWORKS, batch_sizes, default_threads,
                                     model_label, option_help, parse_image_size,
                                     parse_time_budget, precision_help, runtime_label,
                                     split_batches)
from engine.run.jobs.estimate import estimate_seconds
from store.queries import flops_for, framework_gflops_per_thread, latest_latency

__all__ = ["SweepForm", "sweep_form", "sweep_seconds"]

MARGIN_PCT = (100 * VERDICT_MARGIN_RANGE[0], 100 * VERDICT_MARGIN_RANGE[1])
DEFAULT_MARGIN_PCT = 100 * DEFAULT_VERDICT_MARGIN
# link parameter -> (widget key, lo, hi, integer, default); the widgets' own bounds
POLICY = MeasurementPolicy()
NUMBERS = {"min_time": ("min_time", 0.0, 3600.0, False, POLICY.min_time_s),
           "min_iters": ("min_iters", 1, 100_000, True, POLICY.min_iters),
           "warmup": ("warmup", 0, 10_000, True, POLICY.warmup_iters),
           "rounds": ("rounds", *ROUNDS_RANGE, True, DEFAULT_ROUNDS),
           "max_rounds": ("max_rounds", *ROUNDS_RANGE, True, default_max_rounds(DEFAULT_ROUNDS)),
           "margin": ("margin", *MARGIN_PCT, False, DEFAULT_MARGIN_PCT),
           "profile": ("profile", *PROFILE_RANGE, True, 0)}


@dataclass
class SweepForm:
    """What the form chose: SweepRequest's keyword arguments (empty while a text box is
    refused), the errors by field, and where each field's error shows."""

    fields: dict = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    slots: dict = field(default_factory=dict)
    image_size: int | None = None  # the batch search measures at the same size
    models: tuple = ()  # the catalog models chosen: the size box is checked against each
    model: object = None  # a user's model file: dashboard.model_form.ModelForm

    def show_errors(self, errors: dict[str, str]) -> None:
        """Each error under its own field; one of the whole sweep under the policy."""
        for name, message in errors.items():
            self.slots.get(name, self.slots["policy"]).error(message, icon=":material/error:")


def _number(link: PageLink, form: SweepForm, col, label: str, param: str, **widget):
    """A number box a link can fill (?rounds=5); a refused link value names the default
    used, a refused box value (dashboard/numbers.py) is the form's error under the policy."""
    key, lo, hi, integer, default = NUMBERS[param]
    link.number(param, key, lo, hi, integer=integer, default=default)
    value = Numbers(form.errors)(col, label, key, param, lo, hi, default=default,
                                 integer=integer, **widget)
    link.put(param, value, lambda v: f"{v:g}", default=default)
    return value


def _catalog_models(link: PageLink, facts: dict, form: SweepForm) -> dict:
    link.choices("model", "models", list(OFFERED_MODELS))
    models = st.multiselect("Models", list(OFFERED_MODELS), key="models",
                            format_func=model_label(facts),
                            help="params and FLOPs appear once counted "
                                 "(`python -m engine models`, or after a first run)",
                            **link.initial("models", default=DEFAULT_MODELS))
    form.slots["model"] = st.empty()
    link.choices("framework", "frameworks", FRAMEWORKS)
    frameworks = st.multiselect("Frameworks", FRAMEWORKS, key="frameworks",
                                **link.initial("frameworks", default=FRAMEWORKS))
    form.slots["framework"] = st.empty()
    link.choices("runtime", "runtimes", ALL_RUNTIMES)
    runtimes = st.multiselect(
        "Runtimes", ALL_RUNTIMES, key="runtimes", format_func=runtime_label,
        placeholder="each framework's default (torch eager, tensorflow tf_function)",
        help="each runtime applies to the frameworks that have it; its output is checked "
             "against the framework's reference before it is timed",
        **link.initial("runtimes", default=[]))
    form.slots["runtime"] = form.slots["profile_steps"] = st.empty()
    link.put("model", models, default=DEFAULT_MODELS)
    link.put("framework", frameworks, default=FRAMEWORKS)
    link.put("runtime", runtimes)
    form.models = tuple(models)
    return dict(models=tuple(models), frameworks=tuple(frameworks), runtimes=tuple(runtimes))


def _file_model(link: PageLink, can_write: bool, form: SweepForm, may_trust: bool) -> dict:
    """A user's model file: the framework follows from the file's format."""
    chosen = model_form(can_write=can_write, link=link, may_trust=may_trust)
    form.errors.update(chosen.errors)
    here = chosen.slots["model_file"]
    form.slots.update({"model": here, "framework": here, "runtime": here,
                       "profile_steps": here, **chosen.slots})
    form.model = chosen
    return dict(models=tuple(chosen.models), frameworks=tuple(chosen.frameworks),
                runtimes=tuple(chosen.runtimes), user_model=chosen.source)


def _declared_inputs(fields: dict, form: "SweepForm") -> None:
    """A user's model's inputs from what its file declares (none typed), or the typed ones
    checked against it, for the batch sizes chosen: refused here, before any launch."""
    src, chosen = fields.get("user_model"), form.model
    if src is None or chosen is None or not fields.get("batch_sizes"):
        return
    try:
        fields["user_model"] = fill_inputs(src, chosen.declared, fields["batch_sizes"],
                                           chosen.input_text or None)
    except UserError as exc:
        form.errors[exc.field or "input"] = str(exc)


def _batches_and_threads(link: PageLink, where: Where, form: SweepForm) -> dict:
    presets = st.multiselect("Batch sizes", BATCH_PRESETS, key="batch_presets",
                             **offered("batch_presets", "batch_size", BATCH_PRESETS),
                             **link.initial("batch_presets", default=DEFAULT_BATCHES))
    more = st.text_input("More batch sizes", key="batch_free", placeholder="e.g. 3, 48",
                         **offered("batch_free", "batch_size", max_len=MAX_VALUE_LEN),
                         help=f"comma-separated integers {BATCH_RANGE[0]}..{BATCH_RANGE[1]}",
                         **link.initial("batch_free", value=""))
    form.slots["batch_size"] = st.empty()
    try:
        batches = batch_sizes(presets, more)
    except UserError as exc:
        form.errors["batch_size"] = str(exc)
        batches = list(presets)
    cores = where.cores or logical_cores()  # threads x replicas must fit: the nodes, or here
    cores_are = ("the chosen nodes' fewest CPUs" if where.cores
                 else "this machine's logical cores")
    default = default_threads(logical_cores(), cores)
    link.integers("threads", 1, cores, lambda values: {"threads": values})
    threads = st.multiselect("Intra-op threads", list(range(1, cores + 1)), key="threads",
                             **offered("threads", "threads", range(1, cores + 1)),
                             help=f"1..{cores} ({cores_are})",
                             **link.initial("threads", default=default))
    link.integers("replicas", 1, cores, lambda values: {"replicas": values})
    replicas = st.multiselect(
        "Replicas", list(range(1, cores + 1)), key="replicas",
        **offered("replicas", "replicas", range(1, cores + 1)),
        help=f"R identical workers per configuration, each with its threads on cores of its "
             f"own, timed over one window (the throughput of R streams at once); threads x "
             f"replicas must fit {cores} cores ({cores_are}), other splits are left out",
        **link.initial("replicas", default=[1]))
    form.slots["intra_threads"] = form.slots["threads"] = form.slots["replicas"] = st.empty()
    link.put("batch", sorted(batches), default=DEFAULT_BATCHES)
    link.put("threads", sorted(threads), default=default)
    link.put("replicas", sorted(replicas), default=[1])
    return dict(batch_sizes=tuple(sorted(batches)), threads=tuple(sorted(threads)),
                replicas=tuple(sorted(replicas)))


def _policy(link: PageLink, from_file: bool, form: SweepForm) -> dict:
    p1, *boxes = st.columns(1 + len(OPTIONS))
    precision = p1.selectbox("Precision", list(PRECISIONS), key="precision",
                             **offered("precision", "precision", PRECISIONS),
                             help=precision_help())
    # each runtime option (its row's: OpenVINO's hint), a box keyed by its name
    options = RuntimeOptions({o.name: box.selectbox(o.label, list(o.choices), key=o.name,
                                                    **offered(o.name, o.name, o.choices),
                                                    help=option_help(o))
                              for o, box in zip(OPTIONS, boxes)})
    image_text = ""
    if not from_file:  # a file's input says its size
        link.text("image_size", "image_size")
        image_text = st.text_input(
            "Image size (px)", key="image_size", placeholder="native size of each model",
            help=f"blank: each model's native size; else {IMAGE_RANGE[0]}..{IMAGE_RANGE[1]} px, "
                 "or a token model's (bert_base) sequence length, 1..512 tokens",
            **link.initial("image_size", value=""))
    form.slots |= dict.fromkeys(("image_size", "precision", *(o.name for o in OPTIONS)),
                                st.empty())
    c1, c2, c3 = st.columns(3)
    min_time = _number(link, form, c1, "Min time (s)", "min_time", step=0.5)
    min_iters = _number(link, form, c2, "Min iterations", "min_iters", step=5)
    warmup = _number(link, form, c3, "Warm-up iterations", "warmup", step=1)
    r1, r2, r3 = st.columns(3)
    rounds = _number(link, form, r1, "Rounds", "rounds",
                     help="the minimum: each round runs the whole sweep in fresh processes, "
                          "in alternating order; comparisons pair rounds and test "
                          "significance across them")
    max_rounds = _number(
        link, form, r2, "Max rounds", "max_rounds",
        help="rounds until decided: a contest still undecided after the minimum gets more "
             "rounds, for its configurations only, up to this many (equal to Rounds: none)")
    link.text("time_budget", "time_budget")
    budget_text = r3.text_input("Time budget (s)", key="time_budget", placeholder="no limit",
                                help="no extra round starts once the sweep would pass this "
                                     "many seconds", **link.initial("time_budget", value=""))
    v1, v2 = st.columns([1, 2])
    margin_pct = _number(
        link, form, v1, "Verdict margin (%)", "margin", step=0.5,
        help="a winner is named only when the 95 % sequential interval clears ± this; a "
             "contest whose interval lies inside it stops early as equivalent")
    link.choice("contention", "contention", [True, False], encode=lambda on: "1" if on else "0")
    contention = v2.checkbox(
        "Also measure beside a noisy neighbour (shared vs dedicated)", key="contention",
        help="every configuration also runs beside a busy process the engine starts on one "
             "of its cores (steady, and on/off), and torch also with OpenMP's passive wait "
             "policy: each a setting of its own; Compare shows each contender's slowdown and "
             "whether the verdict changes. Each configuration runs 3 times per round, torch's "
             "3 more with passive waits", **link.initial("contention", value=False))
    link.choice("energy", "energy", [True, False], encode=lambda on: "1" if on else "0")
    energy = st.checkbox(
        f"Measure energy ({DEFAULT_ENERGY_S:g} s loop after each timed pass)", key="energy",
        help="joules per sample and kWh per 1 M inferences from RAPL (CPU package) or NVML "
             "(GPU), measured in a loop of its own after the latency samples, tagged with "
             "the source; absent with the reason where the machine exposes no counter (most "
             "cloud VMs). Contenders then run one after another, and each run takes "
             f"{DEFAULT_ENERGY_S:g} s more", **link.initial("energy", value=False))
    profile = _number(link, form, st, "Profile iterations (0 = off)", "profile",
                      help="after each timed pass, profile this many more iterations "
                           "(torch.profiler / TF profiler) in a separate pass; top operators "
                           "and the Chrome trace appear on Results")
    form.slots["policy"] = st.empty()
    link.put("image_size", image_text.strip() or None)
    link.put("time_budget", budget_text.strip() or None)
    link.put("contention", "1" if contention else None)
    link.put("energy", "1" if energy else None)
    parsed = {}
    for name, parse, text in (("time_budget_s", parse_time_budget, budget_text),
                              ("image_size", lambda t: parse_image_size(t, form.models),
                               image_text)):
        try:
            parsed[name] = parse(text)
        except UserError as exc:
            form.errors[name] = str(exc)
    form.image_size = parsed.get("image_size")
    return dict(precision=precision, options=options, rounds=int(rounds),
                max_rounds=int(max_rounds),
                policy=MeasurementPolicy(warmup_iters=int(warmup), min_time_s=float(min_time),
                                         min_iters=int(min_iters),
                                         energy_s=DEFAULT_ENERGY_S if energy else 0.0),
                margin=float(margin_pct) / 100, contention=bool(contention),
                profile_steps=int(profile), **parsed)


def sweep_form(link: PageLink, where: Where, can_write: bool, facts: dict, *,
               may_trust: bool = False) -> SweepForm:
    """Draw the form and say what it chose. where: the executor choice (its error is the
    form's, shown under it); facts: model_facts() for the Models box's labels; may_trust:
    the session may let a model file's code run (model_form)."""
    where_slot = st.empty()  # under the executor choice
    form = SweepForm(slots={"address": where_slot, "placement": where_slot,
                            "executor": where_slot})
    if where.error:
        form.errors[where.field] = where.error
    # The link's batch sizes fill two widgets: the presets, and the box for the others.
    link.integers("batch", 1, BATCH_RANGE[1],
                  lambda values: dict(zip(("batch_presets", "batch_free"),
                                          split_batches(values))))
    from_file = source_choice(link)  # ?source=file
    fields: dict = {}
    left, right = st.columns(2)
    with left:
        fields |= (_file_model(link, can_write, form, may_trust) if from_file
                   else _catalog_models(link, facts, form))
        fields |= _batches_and_threads(link, where, form)
    with right:
        fields |= _policy(link, from_file, form)
    if from_file:
        _declared_inputs(fields, form)
    if not form.errors:
        form.fields |= fields | dict(executor=where.executor, placements=where.placements,
                                     cores=where.cores)
    return form


def sweep_seconds(specs: list, rounds: int) -> float:
    """A rough time for the sweep's minimum rounds, from what the database knows (earlier
    latencies, FLOP counts, this machine's GFLOP/s); while another process holds the file,
    the page says so and refreshes."""
    try:
        with database().connect() as con:
            return estimate_seconds(
                specs, rounds, known_latency_s=lambda s: latest_latency(con, s),
                flops_per_sample=lambda s: flops_for(con, s.model, s.framework, s.image_size),
                gflops_per_thread=lambda f: framework_gflops_per_thread(con, f))
    except UserError as exc:  # another process holds the file past the wait
        busy(str(exc))
