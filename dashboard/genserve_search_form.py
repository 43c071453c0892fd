"""The Deploy page's searches of serving a language model (issue 38): "Find the max rate
under the TTFT and TPOT bounds", "Sweep users" and "Tune", each launched as one job
(engine/run/search/genserve_jobs.py's GenMaxRateRequest, GenUsersRequest, GenTuneRequest)
for the model, engine, lengths and bounds of the launch form above them
(dashboard/genserve_form.py), as `python -m engine genserve-search / -users / -tune` takes
them.

Every widget carries its check (dashboard/offered.py: a value the page did not offer, sent
in a crafted rerun, stops the page naming the field); number boxes are range-checked by
dashboard/numbers.py; what depends on more than one value (a first target within the
probes' range, candidates that exist) is the request's own refusal, shown under its form.
"""

from __future__ import annotations

import streamlit as st

from dashboard.job_forms import JobForm, Launcher, plan
from dashboard.numbers import Numbers
from dashboard.offered import offered
from engine.core.limits import (QPS_PRECISION_RANGE, QPS_PROBES_RANGE, SEARCH_QUERIES_RANGE,
                                SERVE_QPS_RANGE, logical_cores)
from engine.run.search.autotune import OBJECTIVES
from engine.run.search.gen_max_rate import GEN_QUERIES, RISE_STOP, gen_rate_range
from engine.run.search.genserve_jobs import (TUNE_PRECISIONS, GenMaxRateRequest,
                                             GenTuneRequest, GenUsersRequest)
from engine.run.search.max_qps import DEFAULT_QPS_PRECISION, DEFAULT_QPS_PROBES
from engine.scenarios.genserve.engines import ENGINE_NAMES
from engine.scenarios.genserve.spec import REQUESTS_RANGE, USERS_RANGE

__all__ = ["gen_search_launch", "BASE_FIELDS", "SEQ_CHOICES"]

# the launch form's fields a search takes (its scenarios, users and rates are its own)
BASE_FIELDS = ("model", "engine", "prompt_len", "output_len", "threads", "precision",
               "preset", "ttft_bound_ms", "tpot_bound_ms", "max_num_seqs")
SEQ_CHOICES = [1, 2, 4, 8, 16, 32, 64]
OBJECTIVE_LABELS = {"qps": "most requests/s", "cost": "least USD per 1 M output tokens"}


def _base(form: JobForm, scenario: str) -> JobForm:
    if form.errors:
        return form
    return JobForm({"scenarios": (scenario,), **{k: form.fields[k] for k in BASE_FIELDS}})


def _join(form: JobForm, own: dict, errors: dict) -> JobForm:
    if form.errors or errors:
        return JobForm(errors={**form.errors, **errors})
    return JobForm({**form.fields, **own})


def _show(job, form: JobForm, caption: str) -> None:
    """The search's own refusals (the form's are shown above it, once)."""
    if form.errors:
        st.caption("Fix the launch form above first: " + next(iter(form.errors.values())))
    else:
        for message in job.errors.values():
            st.error(message, icon=":material/error:")
    if not job.errors:
        st.caption(caption)


def gen_search_launch(form: JobForm, launcher: Launcher, machine) -> None:
    """The three searches' expanders, each with its own boxes and launch button. machine:
    the shape chosen above (the tuner's cost objective prices it)."""
    with st.expander("Find the max rate under the TTFT and TPOT bounds"):
        _rate(form, launcher)
    with st.expander("Sweep users: tokens/s per user against tokens/s per machine"):
        _users(form, launcher)
    with st.expander("Tune: engine x precision x sequences x threads"):
        _tune(form, launcher, machine)


def _rate(form: JobForm, launcher: Launcher) -> None:
    errors: dict[str, str] = {}
    number = Numbers(errors)
    c = st.columns(4)
    queries = number(c[0], "Requests a probe", "gss_queries", "search_queries",
                     *SEARCH_QUERIES_RANGE, default=GEN_QUERIES, integer=True,
                     help="every probe runs exactly this many (LoadGen's early stopping "
                          f"judges a p99 on {GEN_QUERIES} at the fewest)")
    precision = number(c[1], "Bracket precision", "gss_precision", "qps_precision",
                       *QPS_PRECISION_RANGE, default=DEFAULT_QPS_PRECISION, step=0.005,
                       format="%.3f")
    probes = number(c[2], "Probe limit", "gss_probes", "max_probes", *QPS_PROBES_RANGE,
                    default=DEFAULT_QPS_PROBES, integer=True)
    start = number(c[3], "First target req/s", "gss_start", "target_qps", 0.0,
                   SERVE_QPS_RANGE[1], default=0.0, zero="an Offline test's requests/s",
                   help="0: an Offline test of the same engine gives the estimate and the "
                        "flat-out cost")
    job = plan(GenMaxRateRequest, _join(_base(form, "server"), {
        "search_queries": queries, "qps_precision": precision, "max_probes": probes,
        "target_qps": start or None}, errors))
    caption = ""
    if not job.errors:
        r = job.request
        lo, hi = gen_rate_range(r.search_queries, job.specs[0].ttft_bound_ms)
        caption = (("An Offline test gives the first target; then" if not start else
                    "Then") + f" the target doubles while LoadGen says VALID and is "
                   f"bisected to {r.qps_precision:.1%}, at most {r.max_probes} Server "
                   f"tests of {r.search_queries} requests each, targets {lo:.3g} to "
                   f"{hi:.3g} req/s. Each is a stored test.")
    _show(job, form, caption)
    launcher.button("Find the max rate", "gss_launch", job, "Max-rate search",
                    bool(job.errors))


def _users(form: JobForm, launcher: Launcher) -> None:
    errors: dict[str, str] = {}
    number = Numbers(errors)
    c = st.columns(2)
    cap = number(c[0], "Most users", "gsu_max_users", "max_users", *USERS_RANGE, default=64,
                 integer=True, help="the sweep stops before passing this many users")
    requests = number(c[1], "Requests a point", "gsu_requests", "min_query_count",
                      *REQUESTS_RANGE, default=16, integer=True,
                      help="at least 4 x its users")
    job = plan(GenUsersRequest, _join(_base(form, "closed-loop"), {
        "max_users": cap, "min_query_count": requests}, errors))
    _show(job, form, "" if job.errors else (
        f"Closed loops of {', '.join(str(s.users) for s in job.specs)} users until output "
        f"tokens/s rises by under {RISE_STOP:.0%}; each point a stored test."))
    launcher.button("Sweep users", "gsu_launch", job, "Concurrency sweep", bool(job.errors))


def _tune(form: JobForm, launcher: Launcher, machine) -> None:
    cores = logical_cores()
    c = st.columns(4)
    engines = c[0].multiselect("Engines", list(ENGINE_NAMES), default=list(ENGINE_NAMES),
                               key="gst_engines",
                               **offered("gst_engines", "engines", ENGINE_NAMES))
    precisions = c[1].multiselect("Precisions", list(TUNE_PRECISIONS), default=["fp32"],
                                  key="gst_precisions",
                                  **offered("gst_precisions", "precisions", TUNE_PRECISIONS))
    seqs = c[2].multiselect("Max sequences", SEQ_CHOICES, default=[1, 2, 4, 8],
                            key="gst_seqs", **offered("gst_seqs", "seqs", SEQ_CHOICES))
    threads_offered = list(range(1, cores + 1))
    threads = c[3].multiselect("Threads", threads_offered, default=[1], key="gst_threads",
                               **offered("gst_threads", "threads", threads_offered))
    c = st.columns(3)
    objective = c[0].radio("Objective", list(OBJECTIVES), key="gst_objective",
                           format_func=OBJECTIVE_LABELS.get,
                           **offered("gst_objective", "objective", OBJECTIVES))
    errors: dict[str, str] = {}
    number = Numbers(errors)
    closed = number(c[1], "Requests a closed loop", "gst_closed", "closed_requests",
                    *REQUESTS_RANGE, default=16, integer=True)
    queries = number(c[2], "Requests a probe", "gst_queries", "search_queries",
                     *SEARCH_QUERIES_RANGE, default=GEN_QUERIES, integer=True)
    for name, picked in (("engines", engines), ("precisions", precisions), ("seqs", seqs),
                         ("threads", threads)):
        if not picked:
            errors.setdefault(name, f"{name}: pick at least one")
    job = plan(GenTuneRequest, _join(_base(form, "closed-loop"), {
        "engines": tuple(engines), "precisions": tuple(precisions), "seqs": tuple(seqs),
        "thread_choices": tuple(threads), "objective": objective,
        "closed_requests": closed, "search_queries": queries,
        "machine_shape": machine.shape if machine is not None else None}, errors))
    _show(job, form, "" if job.errors else (
        f"{len(job.request.candidates())} candidates: a closed loop each prunes (failed, "
        "over a bound, over 2x worse than the best); the best survivors and the default "
        "(eager, fp32, one request at a time) get a max-rate search each"
        + (f", priced on {machine.label}" if machine is not None else "") + "."))
    launcher.button("Tune", "gst_launch", job, "Tuning", bool(job.errors))
