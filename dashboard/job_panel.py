"""The Run page's job panel: the job running (live progress, the run in flight, its
finished runs, Cancel), the queue, and the last finished jobs with a batch search's probes.
Streamlit glue over the job queue's snapshots (engine/run/jobs/queue.py JobView); it reads them,
it decides nothing.

The panel polls only while a job is queued or running, and every 2 s: on a 2-core machine
a dashboard redrawing every second competes with the benchmark it launched.
"""

from __future__ import annotations

import streamlit as st

from engine.analysis.time_split import time_split
from engine.present.charts import search_probes
from engine.present.outcome import split_text, starting_text
from engine.present.tables import sentence
from engine.run.search.batch_search import BatchSearchRequest
from engine.run.jobs.serve_request import ServeRequest

__all__ = ["jobs_section", "in_flight_text", "POLL_S", "IDLE"]

POLL_S = 2.0
FINISHED_SHOWN = 5  # finished jobs listed under the panel
RUN_COLUMNS = ["round", "model", "framework", "runtime", "batch_size", "threads", "status",
               "p50_ms", "reason"]
# A serving test's figures: LoadGen's throughput and the tail it is judged on.
SERVE_COLUMNS = ["round", "scenario", "model", "framework", "runtime", "batch_size", "threads",
                 "status", "throughput", "p99_ms", "reason"]
IDLE = ("No sweep running. Pick models and frameworks above and press Launch; results then "
        "appear on the Results and Compare pages.")


def _active(manager, can_write: bool) -> None:
    active = manager.active()
    if active is None:
        return
    st.subheader(f"Job {active.job_id}: running")
    is_search = isinstance(active.request, BatchSearchRequest)
    st.progress(active.done / max(active.total, 1),
                text=f"{active.done} of {active.total} runs finished" if not is_search
                else f"{active.done} probes so far (at most {active.total})")
    if active.current:
        st.markdown(in_flight_text(active.current, is_search))
    if active.starting:  # before a run of theirs can say a phase: the start and import
        st.markdown(sentence(starting_text(active.starting)))
    if active.timing:
        st.caption(sentence(active.timing))
    if can_write and st.button("Cancel", key=f"cancel_{active.job_id}"):
        manager.cancel(active.job_id)
    if active.finished:
        # a cluster job's runs name the node kind that ran them (a fleet's interleave)
        machine = (["machine_shape"] if any(f.get("machine_shape") and f.get("node_id")
                                            for f in active.finished) else [])
        columns = (SERVE_COLUMNS if isinstance(active.request, ServeRequest)
                   else RUN_COLUMNS[:6] + machine + RUN_COLUMNS[6:])
        # the shown columns only (a run's phase times and worker key are for the split)
        st.dataframe([{k: f.get(k) for k in columns} for f in reversed(active.finished)],
                     hide_index=True, column_order=columns)


def in_flight_text(cur: dict, is_search: bool = False) -> str:
    """The run in flight as the panel says it; a serving test's phase carries its live
    figures ("serve: 1,234 queries, 412 QPS, p99 so far 23.1 ms", scenarios.base.phase_of)."""
    where = f"probe {cur['round']}" if is_search else f"round {cur['round']}"
    scenario = f"{cur['scenario']} · " if cur.get("scenario") else ""
    return (f"In flight: **{where} · {scenario}"
            f"{cur['model']} · {cur['framework']} · batch {cur['batch_size']} · "
            f"{cur['threads']} threads** — {cur['phase']}"
            + (f", {cur['iters']} timed iterations" if cur["iters"] else ""))


def _panel(manager, can_write: bool, polling: bool) -> None:
    queued = manager.queued()
    if polling and manager.active() is None and not queued:
        st.rerun()  # the last job just ended: redraw the page once, then stop polling
    _active(manager, can_write)
    if queued:
        st.subheader("Queue")
        for job in queued:
            c1, c2 = st.columns([4, 1])
            c1.write(f"Job {job.job_id}: {job.request.label()}, {job.total} runs — waiting")
            if can_write and c2.button("Cancel", key=f"cancel_{job.job_id}"):
                manager.cancel(job.job_id)


@st.fragment(run_every=POLL_S)
def _polling_panel(manager, can_write: bool) -> None:
    _panel(manager, can_write, polling=True)


def _history(manager, busy: bool, idle: str) -> None:
    history = manager.history()
    if not history:
        if not busy:
            st.caption(idle)
        return
    st.subheader("Finished jobs")
    for job in history[:FINISHED_SHOWN]:
        ok = sum(f["status"] == "ok" for f in job.finished)
        st.write(f"Job {job.job_id}: **{job.state}** — {job.done}/{job.total} runs, "
                 f"{ok} ok" + (f" — {job.error}" if job.error else "")
                 + (f" — {job.result}" if job.result else "")
                 + (f" — sweep `{job.sweep_id}`" if job.sweep_id else ""))
        if job.finished and job.started_at is not None and job.ended_at is not None:
            # where its time went: the share timing iterations, and each phase before it
            st.caption(split_text(time_split(job.finished, job.ended_at - job.started_at,
                                             worker_of=lambda f: f["worker"])))
    searches = [j for j in history if isinstance(j.request, BatchSearchRequest) and j.finished]
    if searches:
        latest = searches[0]
        st.plotly_chart(search_probes(list(latest.finished), latest.request.p99_bound_ms),
                        key=f"search_{latest.job_id}")


def jobs_section(manager, can_write: bool, idle: str = IDLE) -> None:
    """The panel (polling while a job is queued or running), then the finished jobs (idle:
    what to say when there is none). The Cancel buttons render only for a session that may
    write (the queue refuses the rest)."""
    busy = manager.active() is not None or bool(manager.queued())
    if busy:
        _polling_panel(manager, can_write)
    else:
        _panel(manager, can_write, polling=False)
    _history(manager, busy=manager.active() is not None or bool(manager.queued()), idle=idle)
