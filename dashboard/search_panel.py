"""The Deploy page's searches (issue 27): "Find the max QPS under the bound" for the form's
Server configuration and "Tune" (the autotuner), each launched as one job
(engine.run.search.serving_jobs' MaxQpsRequest, TuneRequest), and what stored searches
found, read back from the store by replaying the search over its stored probes (so viewer
mode shows them too): the max, its p99, the bracket, the probes, how its query count was
chosen, the stop reason and the cost at the bound on a catalog shape (an upper bound where
the max is a lower one; a price over 6 months old named with where to check it); the
tuner's recommendation, gain, Pareto front, constraints and pruned candidates. Streamlit
glue; the tables and the chart are engine/present/search_view's, the sentences
engine/present/tune_text's and the figures engine/analysis/serving_cost's.

Every widget here is in the page's link (dashboard/link_state.PageLink): ?shape=,
?qps_precision=, ?max_probes=, ?search_queries=, ?objective=, ?batches=, ?tune_threads=,
?tune_replicas=, ?tune_models=, ?start_qps=, ?search= and ?tuning=
(a sweep id or a unique prefix of one) and ?target_rps= seed them when a link is opened, a
refused value is a note naming the parameter and what is allowed, and each is written back
when it differs from its default (?search_queries=0, the default: chosen from the estimate)."""

from __future__ import annotations

import streamlit as st

from dashboard.job_forms import JobForm, Launcher, plan
from dashboard.link_state import PageLink
from dashboard.cluster_form import executor_choice
from dashboard.fleet_view import fleet_section, group_section, stale_warning
from dashboard.numbers import Numbers
from dashboard.session import read
from engine.analysis.cost import cpu_shapes, default_shape
from engine.core.catalog import CATALOG, DIAGNOSTIC_MODELS
from engine.analysis.serving_cost import choose_flat_out, serving_cost, serving_split
from engine.core.early_stopping import bound_claim, strictness
from engine.core.limits import (QPS_PRECISION_RANGE, QPS_PROBES_RANGE, SEARCH_QUERIES_RANGE,
                                SERVE_QPS_RANGE, SERVE_RATE_RANGE, logical_cores)
from engine.present.search_view import (cost_frame, front_frame, pareto_figure, probe_frame,
                                        pruned_frame, query_count_note)
from engine.present.search_text import qps_summary
from engine.present.tune_text import capped_note, recommendation
from engine.run.search.autotune import OBJECTIVES
from engine.run.search.max_qps import (DEFAULT_QPS_PRECISION, DEFAULT_QPS_PROBES,
                                DEFAULT_SEARCH_QUERIES, MAX_PROBE_S, SPAN_BOUNDS,
                                loadgen_p99_ms, probe_qps_range, replay_max_qps)
from engine.run.search.query_choice import HEADROOM, QueryChoice
from engine.run.search.replays import (MAX_QPS_COMMAND, TUNE_COMMAND, replay_tune,
                                       request_fields, search_limits, stored_probe)
from engine.run.search.serving_jobs import MaxQpsRequest, TuneRequest, tune_price
from engine.scenarios import SERVING
from store.prices import effective_catalog
from store.serving import search_probes, search_sweeps

__all__ = ["shape_choice", "limits_form", "max_qps_launch", "max_qps_results", "tune_launch",
           "tune_results", "BATCH_CHOICES"]

BATCH_CHOICES = [1, 2, 4, 8, 16, 32, 64]
DEFAULT_BATCHES = [1, 2, 4, 8]
OBJECTIVE_LABELS = {"qps": "most QPS", "cost": "least cost per 1 M on the shape"}
DEFAULT_TARGET_RPS = 100.0


def shape_choice(link: PageLink):
    """The catalog's x86 CPU shapes, as the Cost page lists them (and links them, by
    label): the Machine chosen."""
    catalog, _ = read(effective_catalog)
    shapes = cpu_shapes(catalog)
    labels = [m.label for m in shapes]
    first = default_shape(shapes)
    link.choice("shape", "sv_shape", labels, field="machine_shape")
    label = st.selectbox("Machine shape (price catalog)", labels, key="sv_shape",
                         **link.initial("sv_shape", index=first),
                         help="what the cost at the bound and the tuner's cost objective "
                              "price; a shape the search did not run on is an estimate")
    link.put("shape", label, default=labels[first])
    return next(m for m in shapes if m.label == label)


def limits_form(link: PageLink) -> JobForm:
    """The max-QPS search's bracket precision, probe limit and queries a probe, for both
    searches (each of the tuner's confirmations is one such search): their requests'
    qps_precision, max_probes and search_queries, or the error naming the box and its range
    (shown here, once)."""
    errors: dict[str, str] = {}
    numbers = Numbers(errors)
    c1, c2, c3 = st.columns(3)
    precision = numbers.linked(
        link, "qps_precision", c1, "Bracket precision (fraction)", "sv_qps_precision",
        "qps_precision", *QPS_PRECISION_RANGE, default=DEFAULT_QPS_PRECISION, step=0.005,
        format="%.3f", help="a search stops when [highest VALID, lowest missed) is within "
                            "this fraction of its VALID end")
    probes = numbers.linked(
        link, "max_probes", c2, "Probe limit (LoadGen tests a search)", "sv_qps_probes",
        "max_probes", *QPS_PROBES_RANGE, default=DEFAULT_QPS_PROBES, integer=True,
        help="a search stops after this many Server tests and reports the bracket so far")
    queries = numbers.linked(
        link, "search_queries", c3, "Queries per probe (every probe, every candidate)",
        "sv_search_queries", "search_queries", *SEARCH_QUERIES_RANGE, default=0,
        integer=True, zero="automatic",
        help="LoadGen's early stopping lets more queries over the bound the more a test "
             "runs, so every probe runs this many, whatever its rate, and is held to one "
             f"percentile; a probe at Q QPS runs N / Q s, at most {MAX_PROBE_S:g} s and at "
             f"least {SPAN_BOUNDS}x the bound, so more queries reach higher rates and fewer "
             f"lower ones. 0: chosen from the search's estimate before its first Server "
             f"probe, so that it can reach {HEADROOM}x the estimate (a tuning: the fastest "
             f"candidate's closed loop), at least {strictness(DEFAULT_SEARCH_QUERIES)}")
    for message in errors.values():
        st.error(message, icon=":material/error:")
    return JobForm(errors=errors) if errors else JobForm(
        {"qps_precision": precision, "max_probes": probes, "search_queries": queries or None})


NOT_SERVER = "scenario: the search runs Server tests; allowed: Server (pick it above)"


def _server_only(form: JobForm) -> JobForm:
    if not form.errors and form.fields.get("scenarios") != ("server",):
        return JobForm(errors={"scenario": NOT_SERVER})
    return form


def _with_limits(form: JobForm, limits: JobForm) -> JobForm:
    if form.errors or limits.errors:
        return JobForm(errors={**form.errors, **limits.errors})
    return JobForm({**form.fields, **limits.fields})


def _show(job, above: dict, caption: str) -> None:
    """The search's own refusals (the form's and the limits' are shown above it, once)."""
    if job.errors.get("scenario") == NOT_SERVER:
        st.info(NOT_SERVER, icon=":material/info:")
    elif above:
        st.caption("Fix the value above first: " + next(iter(above.values())))
    else:
        for message in job.errors.values():
            st.error(message, icon=":material/error:")
    if not job.errors:
        st.caption(caption)


def max_qps_launch(form: JobForm, limits: JobForm, launcher: Launcher) -> None:
    job = plan(MaxQpsRequest, _with_limits(_server_only(form), limits))
    r = job.request
    _show(job, {**form.errors, **limits.errors}, "" if job.errors else (
        "An Offline run of this configuration gives the estimate and the flat-out figure; "
        f"then the target doubles while VALID and is bisected to {r.qps_precision:.1%}, at "
        f"most {r.max_probes} probes, each a stored LoadGen Server test of "
        + (f"{strictness(r.search_queries)} (LoadGen's early stopping at 99 % confidence), "
           f"at {_targets(r.search_queries, r.bound_ms)}." if r.search_queries else
           f"one query count, chosen from the Offline run's samples/s so that the targets "
           f"reach {HEADROOM}x it (at least {DEFAULT_SEARCH_QUERIES:,}; LoadGen's early "
           "stopping at 99 % confidence).")))
    launcher.button("Find the max QPS under the bound", "sv_maxqps_launch", job,
                    "Max-QPS search", bool(job.errors))


def _targets(queries: int, bound_ms: float) -> str:
    """'3.33 to 1,000 QPS (1,000 queries span at most 300 s, at least 20x the 50 ms
    bound)'."""
    lo, hi = probe_qps_range(queries, bound_ms)
    top = f"{hi:,.4g}" if hi < 1000 else f"{hi:,.0f}"
    return (f"{lo:,.3g} to {top} QPS ({queries:,} queries span at most {MAX_PROBE_S:g} s, "
            f"at least {SPAN_BOUNDS}x the {bound_ms:g} ms bound)")


def _chosen(queries) -> bool:
    """A count chosen from the search's estimate (a given one is in the bound's claim)."""
    return queries is not None and queries.estimate_qps is not None


def _sweep_picker(link: PageLink, param: str, prefix: str, key: str, what: str):
    """The stored search shown (newest first; ?param= a sweep id or a unique prefix of
    one): its sweep id and the request fields its command recorded."""
    sweeps = read(search_sweeps, prefix)
    if sweeps.empty:
        st.info(f"No {what} stored yet.", icon=":material/info:")
        return None
    labels = {r.sweep_id: _sweep_label(r) for r in sweeps.itertuples()}
    ids = list(labels)
    link.choice(param, key, ids, prefix_ok=True, field="sweep")
    sid = st.selectbox(what.capitalize(), ids, key=key, format_func=labels.get,
                       **link.initial(key))
    link.put(param, sid, default=ids[0])
    return sid, request_fields(sweeps[sweeps.sweep_id == sid].command.iloc[0])


def _sweep_label(r) -> str:
    """'2026-11-27 10:05 · resnet18 · 14 runs' (a fleet tuning's node: '· on SHAPE')."""
    fields = request_fields(r.command)
    on = f" · on {fields.get('shape') or 'an unpriced node'}" if fields.get("fleet") else ""
    return f"{r.created_at:%Y-%m-%d %H:%M} · {fields.get('model', '?')}{on} · {r.runs} runs"


def max_qps_results(machine, link: PageLink) -> None:
    picked = _sweep_picker(link, "search", MAX_QPS_COMMAND, "sv_maxqps_sweep",
                           "max-QPS search")
    if picked is None:
        return
    sid, fields = picked
    bound = fields.get("bound_ms") or 0.0
    rows = read(search_probes, sid)
    serving = rows[rows.kind == SERVING.kind]
    server = serving[serving.scenario == "server"]
    offline = serving[(serving.scenario == "offline") & (serving.status == "ok")]
    res = replay_max_qps([stored_probe(r) for r in server.itertuples()],
                         **search_limits(fields))
    note = query_count_note(res)
    p99 = loadgen_p99_ms(res.best)
    lo, hi = res.bracket
    c = st.columns(4)
    c[0].metric("max QPS", f"{'≥ ' * res.capped}{res.max_qps:,.1f}" if res.max_qps else
                "none VALID", help="≥: VALID at the highest target a probe of this query "
                                   "count tests; more queries a probe reach higher ones"
                if res.capped else None)
    c[1].metric("p99 at the max", f"{p99:,.3f} ms" if p99 is not None else "-",
                help=f"LoadGen's p99 of that probe; what held: "
                     f"{bound_claim(bound, res.query_count)}")
    c[2].metric("bracket", f"[{lo or 0:,.1f}, {hi:,.1f})" if hi else f"[{lo or 0:,.1f}, -)",
                help="highest VALID target, lowest missed one")
    c[3].metric("probes", len(res.probes))
    st.caption(f"{qps_summary(res, bound)}. Stopped: {res.stop_reason}.")
    if _chosen(queries := QueryChoice.from_fields(fields)):
        st.caption(f"Queries: {queries.text()}.")
    if note:
        st.warning(note, icon=":material/warning:")
    st.dataframe(probe_frame(res, loadgen_p99_ms), hide_index=True, key="sv_maxqps_probes")
    if res.best is None:
        return
    numbers = Numbers(errors := {})
    rate = numbers.linked(link, "target_rps", st, "Target request rate (requests/s)",
                          "sv_target_rps", "target_rps", *SERVE_RATE_RANGE,
                          default=DEFAULT_TARGET_RPS, help="the monthly bill serves this rate")
    for message in errors.values():
        st.error(message, icon=":material/error:")
    best = next(server[server.run_id == res.best.run_id].itertuples())

    def split(r):
        return serving_split(r, threads=int(best.intra_threads or 1),
                             replicas=res.best.replicas,
                             threads_per_core=res.best.threads_per_core,
                             cores_used=res.best.cores_used, shape=best.machine_shape,
                             hypervisor=res.best.hypervisor)
    # the search's own Offline run (the rule the CLI's search follows too)
    flat = choose_flat_out(split, offline=None if offline.empty else (
        offline.run_id.iloc[0], float(offline.throughput.iloc[0])))
    per_query = (res.best.serving or {}).get("samples_per_query") or 1
    cost = serving_cost(machine, split(res.max_qps * per_query), flat,
                        target_rps=None if errors else rate)
    if cost is None:
        st.warning(f"Not priced on {machine.label}: a figure from this machine does not "
                   "carry over to it.")
        return
    st.dataframe(cost_frame(cost, bound, res.capped), hide_index=True, key="sv_maxqps_cost",
                 column_config={"USD per 1 M": st.column_config.NumberColumn(format="$%.4f"),
                                "USD a month": st.column_config.NumberColumn(format="$%.2f")})
    est = "; ".join(f"{n}: estimate" for n, f in (("within the bound", cost.at_bound),
                                                   ("flat out", cost.flat_out))
                    if f is not None and f.estimate)
    st.caption(f"On {machine.label} at ${machine.usd_per_hour:,.4f}/h ({machine.as_of}), "
               f"whole machines, {cost.hours:g} h a month. "
               + (f"{est}: scaled from this machine's cores, as the basis column says."
                  if est else "Measured on this shape."))
    stale_warning([machine])


def tune_launch(form: JobForm, limits: JobForm, launcher: Launcher, machine,
                link: PageLink) -> None:
    where = executor_choice(launcher.can_write)  # only when the server names a Ray cluster
    cores = where.cores or logical_cores()  # on a cluster, its smallest chosen node's
    t1, t2, t3, t4 = st.columns([1, 2, 2, 2])
    link.choice("objective", "sv_tune_objective", list(OBJECTIVES))
    objective = t1.radio("Objective", list(OBJECTIVES), key="sv_tune_objective",
                         format_func=OBJECTIVE_LABELS.get, **link.initial("sv_tune_objective"))
    link.put("objective", objective, default=OBJECTIVES[0])
    link.choices("batches", "sv_tune_batches", BATCH_CHOICES)
    batches = t2.multiselect("Max batches", BATCH_CHOICES, key="sv_tune_batches",
                             **link.initial("sv_tune_batches", default=DEFAULT_BATCHES))
    link.put("batches", batches, default=DEFAULT_BATCHES)
    options, default_threads = list(range(1, cores + 1)), sorted({1, cores})
    # ?threads= is the form's (the model's threads): the tuner's choices are its own.
    link.choices("tune_threads", "sv_tune_threads", options, field="threads")
    threads = t3.multiselect("Threads", options, key="sv_tune_threads",
                             **link.initial("sv_tune_threads", default=default_threads))
    link.put("tune_threads", threads, default=default_threads)
    link.choices("tune_replicas", "sv_tune_replicas", options, field="replicas")
    replicas = t4.multiselect("Replicas", options, key="sv_tune_replicas",
                              **link.initial("sv_tune_replicas", default=default_threads),
                              help="processes of the threads chosen, behind one queue; "
                                   f"only splits with threads x replicas <= {cores} run")
    link.put("tune_replicas", replicas, default=default_threads)
    others, start, refused = _models_and_start(form, link)
    above = {**form.errors, **limits.errors}
    tune = _with_limits(_server_only(form), limits)
    if not tune.errors and not threads:
        tune = JobForm(errors={"threads": f"threads: pick at least one; allowed: 1..{cores}"})
    if not tune.errors and not replicas:
        tune = JobForm(errors={"replicas": f"replicas: pick at least one; allowed: "
                                           f"1..{cores}"})
    if not tune.errors and where.error:
        tune = JobForm(errors={where.field: where.error})
    if not tune.errors and refused:
        tune = JobForm(errors=refused)
    if not tune.errors:
        tune = JobForm(dict(tune.fields, objective=objective, batches=tuple(batches),
                            thread_choices=tuple(threads), replica_choices=tuple(replicas),
                            machine_shape=machine.shape, executor=where.executor,
                            placements=where.placements, cores=where.cores,
                            models=tuple(others), start_qps=start))
    job = plan(TuneRequest, tune)
    _show(job, above, "Closed-loop probes prune (a failed probe, a p99 over the bound, a figure "
                      "over 2x worse than the best); the best survivors and the default get a "
                      "max-QPS search each, every Server test of every candidate "
                      + (strictness(job.request.search_queries) if not job.errors
                         and job.request.search_queries else "the same query count"
                         + ("" if job.errors else ", chosen from the fastest surviving "
                            "candidate's closed loop")) + ".")
    launcher.button("Tune", "sv_tune_launch", job, "Tuning", bool(job.errors))


def _models_and_start(form: JobForm, link: PageLink):
    """The other catalog models to tune the same way (each alone, in turn) and each max-QPS
    search's first target (0: the candidate's closed-loop samples/s; a model of microseconds
    would otherwise start LoadGen at millions of QPS): (models, start QPS or None, refusals)."""
    fields = form.fields
    named = DIAGNOSTIC_MODELS if fields.get("framework") == "selftest" else CATALOG
    options = [m for m in named if m != fields.get("model")]
    c1, c2 = st.columns([3, 1])
    link.choices("tune_models", "sv_tune_models", options, field="models")
    others = c1.multiselect(
        "Also tune (catalog models)", options, key="sv_tune_models",
        **link.initial("sv_tune_models", default=[]),
        disabled=fields.get("user_model") is not None,
        help="each tuned alone after the form's model, with the same bound, objective and "
             "search space; the stored tunings show them side by side")
    link.put("tune_models", others, default=[])
    errors: dict[str, str] = {}
    start = Numbers(errors).linked(
        link, "start_qps", c2, "First target QPS", "sv_tune_start", "start_qps", 0.0,
        SERVE_QPS_RANGE[1], default=0.0, step=10.0,
        help="each max-QPS search's first Server target; 0: the candidate's closed-loop "
             "samples/s")
    if fields.get("user_model") is not None and others:
        errors["models"] = ("models: a model file is tuned alone; allowed: other catalog "
                            "models only beside a catalog model")
    return others, (start or None), errors


def tune_results(link: PageLink) -> None:
    picked = _sweep_picker(link, "tuning", TUNE_COMMAND, "sv_tune_sweep", "tuning")
    if picked is None:
        return
    sid, fields = picked
    if not fields.get("candidates"):
        st.warning("This tuning's sweep does not say what it searched.")
        return
    shape = fields.get("machine_shape")
    catalog, _ = read(effective_catalog)
    t = replay_tune(fields, list(read(search_probes, sid).itertuples()),
                    tune_price(None, shape, catalog))
    if fields.get("fleet"):
        fleet_section(fields["fleet"], catalog)
    if fields.get("group"):
        group_section(fields["group"], catalog, shape)
    shown = shape if t.objective == "cost" else None
    (st.success if t.winner is not None else st.error)(
        f"Recommendation: {recommendation(t, shape)}")
    if capped_note(t):
        st.warning(capped_note(t) + ".", icon=":material/warning:")
    if any(x.cost is not None for x in (*t.confirmed, t.default)):
        stale_warning([m for m in catalog if m.shape == shape])
    if t.gain_pct is not None:
        st.metric("gain over the default", f"{t.gain_pct:+,.1f} %",
                  help=f"default: {t.default.candidate.label()}; "
                       + ("more QPS" if t.objective == "qps" else "cheaper per 1 M"))
    if t.front:
        st.plotly_chart(pareto_figure(t, shape=shape), key="sv_tune_chart")
        st.dataframe(front_frame(t), hide_index=True, key="sv_tune_front")
    st.caption("Constraints: " + "; ".join([
        f"Server {bound_claim(t.bound_ms, fields.get('search_queries'))}",
        "objective: " + ("most QPS" if t.objective == "qps" else
                         f"least cost per 1 M on {shown}"),
        f"margin {t.margin:.1%}", f"{len(t.closed)} candidates", f"stopped: {t.stop_reason}"]
        + ([f"queries: {t.queries.text()}"] if _chosen(t.queries) else [])))
    if t.pruned:
        st.markdown(f"**Pruned ({len(t.pruned)})**")
        st.dataframe(pruned_frame(t), hide_index=True, key="sv_tune_pruned")
    else:
        st.caption("Pruned: none.")
