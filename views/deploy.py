"""Deploy: run an MLPerf LoadGen test of a model (SingleStream, MultiStream, Server,
Offline) through the job queue, watch it, and read stored tests: LoadGen's verdict and why,
the figures, every query's latency, the logs. The Work switch (?work=generate) shows serving a
language model instead: its launch form, its searches as jobs (max rate, users, tuning:
dashboard/genserve_search_form.py), the stored searches with their cost and report
(dashboard/genserve_search_view.py) and the stored tests (dashboard/genserve_view.py)."""

import streamlit as st

from dashboard.genserve_form import genserve_form
from dashboard.genserve_search_form import gen_search_launch
from dashboard.genserve_search_view import gen_search_results
from dashboard.genserve_view import deploy_generation, work_switch
from dashboard.job_forms import Launcher, plan
from dashboard.job_panel import jobs_section
from dashboard.link_state import PageLink
from dashboard.report_panel import report_section
from dashboard.search_panel import (limits_form, max_qps_launch, max_qps_results,
                                    shape_choice, tune_launch, tune_results)
from dashboard.serve_form import refuse_unreachable, serve_form
from dashboard.serving_view import run_detail, run_picker, runs_table
from dashboard.session import access, job_manager, read
from engine.present.serving_report import build_serving_report
from engine.present.genserve_text import launch_plan
from engine.present.serving_text import serve_plan
from engine.run.jobs.genserve_request import GenServeRequest
from engine.run.jobs.serve_request import ServeRequest
from store.serving import serving_runs

WHO = access()
st.title("Deploy: serving tests (MLPerf LoadGen)")
link = PageLink("deploy")
if work_switch(link):  # serving a language model: TTFT, TPOT, goodput, users
    machine = shape_choice(link)  # what the cost and the tuner's cost objective price
    if WHO.viewer:
        st.info(WHO.why_read_only(), icon=":material/visibility:")
    else:
        with st.expander("Serve a language model", expanded=False):
            gen_form = genserve_form()
            test = plan(GenServeRequest, gen_form)
            if test.errors:
                st.error(test.error, icon=":material/error:")
            else:
                st.info(launch_plan(test.specs), icon=":material/schedule:")
            launcher = Launcher(job_manager(), WHO.can_write)
            launcher.button("Launch serving tests", "gsf_launch", test, "Serving test",
                            bool(test.errors), type="primary")
        gen_search_launch(gen_form, launcher, machine)  # the form's model, engine, bounds
        jobs_section(launcher.manager, WHO.can_write)
    gen_search_results(link, machine)
    deploy_generation(link)
    st.stop()

if WHO.viewer:  # results only: no form, no launch
    st.info(WHO.why_read_only(), icon=":material/visibility:")
else:
    if not WHO.can_write:
        st.warning(WHO.why_read_only(), icon=":material/lock:")
    with st.expander("Run a serving test", expanded=True):
        st.caption("One LoadGen test (PerformanceOnly) against the warm model in a worker "
                   "process: LoadGen owns the arrival schedule, the timing and the verdict; "
                   "the model only answers. The result lands below and on the Results page. "
                   "A language model (TTFT, TPOT): the Work switch above.")
        # Letting a file's code run is for a session on this machine only, as on Run.
        form = serve_form(link, can_write=WHO.can_write,
                          may_trust=WHO.can_write and not WHO.remote)
        test = refuse_unreachable(plan(ServeRequest, form))
        if test.errors:
            for message in test.errors.values():
                st.error(message, icon=":material/error:")
        else:
            st.info(serve_plan(test.request, test.specs), icon=":material/schedule:")
        launcher = Launcher(job_manager(), WHO.can_write)
        launcher.button("Launch test", "sv_launch", test, "Serving test", bool(test.errors),
                        type="primary")
    panel = st.container()  # the job panel, filled once every launch button below has run

st.header("Max QPS under the bound, and the tuner")
machine = shape_choice(link)
if not WHO.viewer:
    limits = limits_form(link)
    with st.expander("Find the max QPS under the bound (the form's Server configuration)"):
        max_qps_launch(form, limits, launcher)
    with st.expander("Tune: the configuration with the most QPS or the least cost"):
        tune_launch(form, limits, launcher, machine, link)
    with panel:  # drawn after the searches' buttons: a job launched there shows in this run
        jobs_section(launcher.manager, WHO.can_write,
                     idle="No test running. Fill in the form above and press Launch test; "
                          "the result then appears below.")
st.subheader("Stored max-QPS searches")
max_qps_results(machine, link)
st.subheader("Stored tunings")
tune_results(link)

st.header("Stored serving tests")
runs = read(serving_runs)
if runs.empty:
    link.finish()
    st.info("No serving tests stored yet. Launch one above, or in a terminal: `python -m "
            "engine serve --scenario server --model resnet18 --target-qps 50 --bound-ms 15`; "
            "every test, failed ones included, lands here.", icon=":material/info:")
    st.stop()
runs_table(runs)
row = run_picker(link, runs)
run_detail(row)
st.subheader("Report")
st.caption("Every test of this one's launch (its sweep), for someone without the "
           "dashboard: verdicts and reasons, figures, percentiles and the summary logs.")
report_section(row.sweep_id, build=build_serving_report, prefix="sv_")
link.finish("Link to this view", caption="Opens the Deploy page with this form filled in and "
                                         "this test shown; nothing runs until Launch is "
                                         "pressed.")
