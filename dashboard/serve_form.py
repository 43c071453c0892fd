"""The Deploy page's form: one MLPerf LoadGen test (engine.run.jobs.serve_request's
ServeRequest) of a model (the catalog's, the selftest identity, or a user's file as the Run
page's model form picks it), its runtime and threads, the scenario and what the scenario is
judged on (the bound, the target QPS, Server's dynamic batching) and the test's minimum
duration (LoadGen's default 10 s, MLPerf's official 600 s, or a custom one).

Streamlit widgets over the page's PageLink (?scenario=server&target_qps=50&bound_ms=15):
a link opened fills them, a refused link value is a note naming the field, and the form
writes back what differs from its defaults. Every number box checks its own range
(dashboard/numbers.py), every choice what it offered (dashboard/offered.py): a refused value
is the form's error naming the field and the allowed range, and Launch is drawn disabled.
"""

from __future__ import annotations

import streamlit as st

from dashboard.job_forms import JobForm, Plan
from dashboard.link_state import PageLink
from dashboard.model_form import model_form, source_choice
from dashboard.numbers import Numbers
from dashboard.session import read
from engine.core.catalog import IMAGE_MODELS
from engine.core.errors import UserError
from engine.core.limits import (SERVE_BATCH_RANGE, SERVE_BOUND_MS_RANGE, SERVE_DURATION_RANGE,
                                SERVE_QPS_RANGE, SERVE_QUERIES_RANGE, SERVE_WAIT_MS_RANGE,
                                logical_cores)
from engine.core.model_source import fill_inputs
from engine.core.runtimes import rows_of
from engine.scenarios.serving.spec import (DEFAULT_MIN_DURATION_S, DEFAULT_MIN_QUERIES,
                                           DEFAULT_SERVER_BOUND_MS, OFFICIAL_MIN_DURATION_S,
                                           REPLICATED_SCENARIOS, SCENARIO_INPUTS, SERVE_SCENARIOS,
                                           check_reachable, default_min_queries,
                                           fixed_batch_allowed)
from engine.present.run_form import FRAMEWORKS, parse_image_size
from engine.present.serving_text import SCENARIO_HELP, scenario_label
from engine.run.process.machine import system_info
from store.queries import serve_closed_loop

__all__ = ["serve_form", "refuse_unreachable", "SERVE_MODELS", "DURATIONS"]

# The catalog, and the selftest identity: a test of the harness and LoadGen themselves.
SELFTEST_MODEL = "identity"
SERVE_MODELS = [*IMAGE_MODELS, SELFTEST_MODEL]  # serving draws image samples
DURATIONS = {"default": f"LoadGen default ({DEFAULT_MIN_DURATION_S:g} s)",
             "official": f"Official ({OFFICIAL_MIN_DURATION_S:g} s)", "custom": "Custom"}
# link parameter -> (widget key, field, range, integer, default)
NUMBERS = {"bound_ms": ("sv_bound", "bound_ms", SERVE_BOUND_MS_RANGE, False,
                        DEFAULT_SERVER_BOUND_MS),
           "target_qps": ("sv_qps", "target_qps", SERVE_QPS_RANGE, False, 100.0),
           "max_batch": ("sv_max_batch", "max_batch", SERVE_BATCH_RANGE, True, 8),
           "max_wait_ms": ("sv_max_wait", "max_wait_ms", SERVE_WAIT_MS_RANGE, False, 2.0),
           "min_duration_s": ("sv_min_duration", "min_duration_s", SERVE_DURATION_RANGE,
                              False, DEFAULT_MIN_DURATION_S),
           "min_queries": ("sv_min_queries", "min_query_count", SERVE_QUERIES_RANGE, True,
                           DEFAULT_MIN_QUERIES),
           "replicas": ("sv_replicas", "replicas", (1, logical_cores()), True, 1)}


def _runtimes(model: str) -> list[str]:
    frameworks = ["selftest"] if model == SELFTEST_MODEL else FRAMEWORKS
    # a diagnostic that fails on purpose is not offered (its row says so)
    return [f"{r.framework}/{r.name}" for f in frameworks for r in rows_of(f) if r.offered]


def _number(link: PageLink, numbers: Numbers, where, label: str, param: str,
            default=None, **widget):
    key, field, (lo, hi), integer, fixed = NUMBERS[param]
    return numbers.linked(link, param, where, label, key, field, lo, hi, integer=integer,
                          default=fixed if default is None else default, **widget)


def _catalog(link: PageLink, errors: dict) -> dict:
    c1, c2, c3 = st.columns(3)
    link.choice("model", "sv_model", SERVE_MODELS)
    model = c1.selectbox("Model", SERVE_MODELS, key="sv_model", **link.initial("sv_model"),
                         help="the catalog's models; identity (selftest) answers with its "
                              "input: a test of the harness and LoadGen themselves")
    runtimes = _runtimes(model)
    link.choice("runtime", "sv_runtime", runtimes)
    if st.session_state.get("sv_runtime") not in runtimes:
        st.session_state.pop("sv_runtime", None)  # another model's runtime: its default
    runtime = c2.selectbox("Runtime", runtimes, key="sv_runtime",
                           **link.initial("sv_runtime"))
    link.text("image_size", "sv_image_size", max_len=8)
    text = c3.text_input("Image size (px)", key="sv_image_size", max_chars=8,
                         **link.initial("sv_image_size", value=""),
                         placeholder="the model's own", help="blank: the model's native size")
    link.put("model", model, default=SERVE_MODELS[0])
    link.put("runtime", runtime, default=runtimes[0])
    link.put("image_size", text or None)
    try:
        image_size = parse_image_size(text or "")
    except UserError as exc:
        errors[exc.field or "image_size"] = str(exc)
        image_size = None
    framework, runtime = runtime.split("/")
    return dict(model=model, framework=framework, runtime=runtime, image_size=image_size)


def _file(link: PageLink, can_write: bool, may_trust: bool, errors: dict) -> tuple[dict, object]:
    chosen = model_form(can_write=can_write, link=link, may_trust=may_trust)
    errors.update(chosen.errors)
    if len(chosen.runtimes) > 1:
        errors["runtime"] = ("runtime: a serving test runs one runtime; allowed: one of "
                             f"{', '.join(chosen.runtimes)}")
    src = chosen.source
    if src is None:
        return {}, chosen
    return dict(model=src.name, framework=src.framework, user_model=src,
                runtime=chosen.runtimes[0] if chosen.runtimes else None), chosen


def _min_queries_default(scenario: str) -> int:
    """The scenario's default minimum queries (engine.scenarios.serving.spec.default_min_queries:
    Server's 459, early stopping's), carried over a change of scenario while the box still
    holds the previous scenario's default; a value the user typed stays."""
    previous = st.session_state.get("sv_min_queries_for")
    if (previous is not None and previous != scenario
            and st.session_state.get("sv_min_queries") == default_min_queries(previous)):
        st.session_state["sv_min_queries"] = default_min_queries(scenario)
    st.session_state["sv_min_queries_for"] = scenario
    return default_min_queries(scenario)


def serve_form(link: PageLink, *, can_write: bool, may_trust: bool) -> JobForm:
    """ServeRequest's fields, or the errors (by field) that refuse them."""
    errors: dict[str, str] = {}
    numbers = Numbers(errors)
    from_file = source_choice(link)
    fields, chosen = (_file(link, can_write, may_trust, errors) if from_file
                      else (_catalog(link, errors), None))
    cores = logical_cores()
    s1, s2 = st.columns([1, 3])
    link.choice("threads", "sv_threads", list(range(1, cores + 1)))
    threads = s1.selectbox("Threads", list(range(1, cores + 1)), key="sv_threads",
                           **link.initial("sv_threads", index=cores - 1),
                           help=f"intra-op threads of the model: 1..{cores} (this machine's "
                                "logical cores)")
    link.put("threads", threads, default=cores)
    link.choice("scenario", "sv_scenario", list(SERVE_SCENARIOS))
    scenario = s2.radio("Scenario", list(SERVE_SCENARIOS), key="sv_scenario", horizontal=True,
                        format_func=scenario_label, **link.initial("sv_scenario"),
                        help="; ".join(f"{scenario_label(k)}: {v}"
                                       for k, v in SCENARIO_HELP.items()))
    link.put("scenario", scenario, default=SERVE_SCENARIOS[0])
    st.caption(f"{scenario_label(scenario)}: {SCENARIO_HELP[scenario]}.")
    n1, n2, n3, n4, n5 = st.columns(5)
    bound = qps = None
    batch, wait, replicas = 1, 0.0, 1
    if SCENARIO_INPUTS[scenario].bound:
        bound = _number(link, numbers, n1, "p99 bound (ms)" if scenario == "server"
                        else "Latency bound (ms; p90 reported)", "bound_ms",
                        help="server: LoadGen's target latency, the p99 every query is judged "
                             "on; single-stream: the p90 is reported against it")
    if scenario == "server":
        qps = _number(link, numbers, n2, "Target QPS", "target_qps",
                      help="the Poisson arrival rate LoadGen schedules queries at")
        wait = _number(link, numbers, n4, "Max wait (ms)", "max_wait_ms",
                       help="the oldest queued query waits at most this long before its "
                            "batch leaves (0: whatever is queued leaves at once)")
    if scenario in REPLICATED_SCENARIOS:
        batch = _number(link, numbers, n3, "Max batch", "max_batch",
                        help="the largest batch the model is called with")
        replicas = _number(link, numbers, n5, "Replicas", "replicas",
                           help=f"processes of Threads threads each, on cores of their own, "
                                f"behind one queue: whichever is free takes the next batch "
                                f"(replicas x threads <= {cores})")
    else:  # a stream's query: one sample, or MultiStream's 8
        batch = SCENARIO_INPUTS[scenario].query_batch
    d1, d2, d3 = st.columns([2, 1, 1])
    link.choice("duration", "sv_duration", list(DURATIONS))
    preset = d1.radio("Minimum duration", list(DURATIONS), key="sv_duration", horizontal=True,
                      format_func=DURATIONS.get, **link.initial("sv_duration"),
                      help="LoadGen runs at least this long (and at least the minimum "
                           "queries); MLPerf's official results need 600 s")
    link.put("duration", preset, default="default")
    duration = None
    if preset == "custom":
        duration = _number(link, numbers, d2, "Min duration (s)", "min_duration_s")
    queries = _number(link, numbers, d3, "Min queries", "min_queries",
                      default=_min_queries_default(scenario))
    if chosen is not None and fields.get("user_model") is not None:
        try:
            # the batcher calls every batch up to its max: a fixed batch axis takes one
            sizes = list(range(1, batch + 1)) if scenario in REPLICATED_SCENARIOS else [batch]
            fields["user_model"] = fill_inputs(
                fields["user_model"], chosen.declared, sizes, chosen.input_text or None,
                allowed_batch=lambda fixed: fixed_batch_allowed(fixed, "Max batch"))
        except UserError as exc:
            errors[exc.field or "input"] = str(exc)
    if errors or not fields:
        return JobForm(errors=errors or {"model_file": "model_file: pick a model file"})
    return JobForm(dict(
        fields, scenarios=(scenario,), threads=int(threads), max_batch=int(batch),
        replicas=int(replicas),
        target_qps=None if qps is None else float(qps),
        bound_ms=None if bound is None else float(bound), max_wait_ms=float(wait),
        min_duration_s=None if duration is None else float(duration),
        official=preset == "official", min_query_count=int(queries)))


def refuse_unreachable(test: Plan) -> Plan:
    """A Server target over 10x the stored closed loop of its SUT on this machine is the
    form's error under target_qps (engine.scenarios.serving.spec.check_reachable, as the CLI)."""
    if test.errors or not test.specs or test.specs[0].scenario != "server":
        return test
    spec = test.specs[0]
    closed = read(serve_closed_loop, spec.model, spec.framework, spec.runtime,
                  spec.precision, spec.intra_threads, spec.image_size, spec.batch_size,
                  system_info()["system_id"])
    try:
        check_reachable(spec.target_qps, closed, spec.replicas)
    except UserError as exc:
        return Plan(test.request, errors={exc.field or "target_qps": str(exc)})
    return test
