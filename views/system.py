"""System: this machine and its frameworks (what runs record as provenance), the database."""

import streamlit as st

from engine.present.system_text import (database_line, machine_line, metric_label,
                                        package_versions, status_line)
from engine.core.energy import rapl_status
from engine.run.process.machine import git_commit, system_info
from dashboard.ceilings_panel import system_ceilings
from dashboard.session import database, read
from store.queries import overview

st.title("System")
info = system_info()
c1, c2, c3, c4 = st.columns(4)
c1.metric("logical cores", info["logical_cores"], help=f"usable here: {info['usable_cores']}")
c2.metric("physical cores", info["physical_cores"])
c3.metric("memory", f"{info['memory_bytes'] / 2**30:.1f} GiB")
c4.metric("accelerator", info["accelerator"] or "none")
st.markdown(machine_line(info, git_commit()))
# issue 28: whether an inference run's energy loop (run --energy) can read this machine's CPU
st.caption(rapl_status())
st.caption("Framework versions below are read from package metadata: the dashboard process "
           "never imports torch or TensorFlow; each run stores the versions its worker saw.")
st.dataframe(package_versions(), hide_index=True, key="packages")
system_ceilings()  # the machines' calibrated GEMM and bandwidth ceilings

st.subheader("Database")
db = database()
ov = read(overview)
st.markdown(database_line(str(db.path.resolve()), db.size_bytes(), ov["migrations"]))
cols = st.columns(len(ov["counts"]))
for col, (name, n) in zip(cols, ov["counts"].items()):
    col.metric(metric_label(name), f"{n:,}")
if ov["counts"]["runs"] == 0:
    st.info("The database is empty: launch a sweep on the **Run** page, or from a terminal "
            "`python -m engine run --model mobilenet_v3_small --batch 1 8`.",
            icon=":material/info:")
else:
    st.markdown(status_line(ov["status"]))
    st.markdown("**Machines seen in the stored runs**")
    st.dataframe(ov["systems"], hide_index=True, key="systems")
