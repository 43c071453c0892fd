"""System: this machine and its frameworks (what runs record as provenance), the database."""

import importlib.metadata
from pathlib import Path

import streamlit as st

from engine.run.machine import git_commit, system_info
from dashboard.session import database, read
from store.queries import overview

PACKAGES = ("torch", "torchvision", "tensorflow-cpu", "keras", "numpy", "duckdb",
            "streamlit", "plotly", "pandas", "pyarrow")


def version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


st.title("System")
info = system_info()
c1, c2, c3, c4 = st.columns(4)
c1.metric("logical cores", info["logical_cores"], help=f"usable here: {info['usable_cores']}")
c2.metric("physical cores", info["physical_cores"])
c3.metric("memory", f"{info['memory_bytes'] / 2**30:.1f} GiB")
c4.metric("accelerator", info["accelerator"] or "none")
st.markdown(f"**CPU** {info['cpu_model']} · {info['sockets']} socket(s) · **OS** "
            f"{info['platform']} · **Python** {info['python']} · **host** {info['hostname']} "
            f"· **project commit** `{git_commit() or 'unknown'}`")
st.caption("Framework versions below are read from package metadata: the dashboard process "
           "never imports torch or TensorFlow; each run stores the versions its worker saw.")
st.dataframe([{"package": p, "version": version(p)} for p in PACKAGES], hide_index=True,
             key="packages")

st.subheader("Database")
path = database().path
size = sum(p.stat().st_size for p in (path, Path(str(path) + ".wal")) if p.exists())
ov = read(overview)
st.markdown(f"`{path.resolve()}` · {size / 2**20:.1f} MiB on disk · migrations: "
            f"{', '.join(ov['migrations'])}")
cols = st.columns(len(ov["counts"]))
for col, (name, n) in zip(cols, ov["counts"].items()):
    col.metric(name.replace("_", " "), f"{n:,}")
if ov["counts"]["runs"] == 0:
    st.info("The database is empty: launch a sweep on the **Run** page, or from a terminal "
            "`python -m engine run --model mobilenet_v3_small --batch 1 8`.",
            icon=":material/info:")
else:
    st.markdown("Runs by status: " + " · ".join(f"**{k}** {v}" for k, v in ov["status"].items()))
    st.markdown("**Machines seen in the stored runs**")
    st.dataframe(ov["systems"], hide_index=True, key="systems")
