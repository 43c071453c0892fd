"""Run: pick a sweep, see its size and a rough time, launch it, watch it live."""

import streamlit as st

from dashboard.ceilings_panel import calibrate_offer
from dashboard.cluster_form import executor_choice
from dashboard.job_forms import (Launcher, batch_search_form, data_loading_form, plan,
                                 training_form)
from dashboard.generation_form import generation_form
from dashboard.job_panel import jobs_section
from dashboard.link_state import PageLink
from dashboard.session import access, job_manager, read
from dashboard.sweep_form import sweep_form, sweep_seconds
from engine.present.generation_frames import generation_plan
from engine.present.run_form import load_summary, model_facts, sweep_summary, train_summary
from engine.run.jobs.generation_request import GenRequest
from engine.run.search.batch_search import BatchSearchRequest
from engine.run.process.machine import system_info
from engine.run.jobs.requests import LoadRequest, SweepRequest, TrainRequest
from store.runs import model_info

WHO = access()
if WHO.viewer:  # app.py leaves this page out; a deep link on a fresh server still lands here
    st.info(WHO.why_read_only(), icon=":material/visibility:")
    st.stop()
if not WHO.can_write:
    st.warning(WHO.why_read_only(), icon=":material/lock:")

st.title("Run a benchmark sweep")
link = PageLink("run")  # a sweep can be shared as a link: ?model=...&batch=1,8&...
where = executor_choice(WHO.can_write)  # only when the server names a Ray cluster
# Letting a file's code run (TorchScript, SavedModel) is for a session on this machine only:
# a remote session, even an admin's, never may.
form = sweep_form(link, where, WHO.can_write, model_facts(read(model_info)),
                  may_trust=WHO.can_write and not WHO.remote)
sweep = plan(SweepRequest, form)
form.show_errors(sweep.errors)
link.finish("Link to this sweep", caption="Opens the Run page with this form filled in; "
                                          "nothing runs until Launch is pressed.")

launcher = Launcher(job_manager(), WHO.can_write)
if sweep.specs:
    seconds = sweep_seconds(sweep.specs, sweep.request.rounds)
    st.info(sweep_summary(len(sweep.specs), sweep.request.budget(), where.width, seconds),
            icon=":material/schedule:")
    if sweep.skipped:
        st.caption("Left out (more threads than cores): " + "; ".join(sweep.skipped))
launcher.button("Launch", "launch", sweep, "Sweep", not sweep.specs, type="primary")
if sweep.specs and where.executor == "local" and WHO.can_write:  # runs on this machine
    calibrate_offer(launcher, system_info()["system_id"], {s.intra_threads for s in sweep.specs})

with st.expander("Find the optimal batch size"):
    search = plan(BatchSearchRequest, batch_search_form(form.image_size))
    if search.errors:
        st.error(search.error)
    launcher.button("Start search", "bs_launch", search, "Search", bool(search.errors))

with st.expander("Train models (time per epoch, loss, accuracy)"):
    train = plan(TrainRequest, training_form())
    if train.errors:
        st.error(train.error, icon=":material/error:")
    else:
        st.info(train_summary(train.specs), icon=":material/schedule:")
    launcher.button("Start training", "tr_launch", train, "Training", bool(train.errors))

with st.expander("Measure data loading (decoders, normalisation, pipelines)"):
    load = plan(LoadRequest, data_loading_form())
    if load.errors:
        st.error(load.error, icon=":material/error:")
    else:
        st.info(load_summary(load.specs), icon=":material/schedule:")
        if load.skipped:
            st.caption("Not run: " + "; ".join(load.skipped))
    launcher.button("Start data loading", "dl_launch", load, "Data-loading", bool(load.errors))

with st.expander("Generate text (TTFT, TPOT, tokens/s per runtime)"):
    gen = plan(GenRequest, generation_form())
    if gen.errors:
        st.error(gen.error, icon=":material/error:")
    else:
        st.info(generation_plan(gen.specs, gen.request.rounds), icon=":material/schedule:")
        if gen.skipped:
            st.caption("Not run: " + "; ".join(gen.skipped))
    launcher.button("Start generation", "gen_launch", gen, "Generation", bool(gen.errors))

jobs_section(launcher.manager, WHO.can_write)
