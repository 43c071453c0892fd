"""Data loading: implementations side by side, per batch size, workers and threads."""

import streamlit as st

from engine.present.charts_workloads import load_bars
from engine.present.frames import highlight_cells, load_grid, setting_choices
from engine.present.links import encode_setting
from engine.present.tables import sweep_labels
from engine.scenarios import DATA_LOADING
from dashboard.link_state import PageLink
from dashboard.session import read
from store.queries import load_failures, load_summary, settings
from store.runs import list_sweeps

st.title("Data loading")
link = PageLink("dataload")
sweeps = read(list_sweeps, kind=DATA_LOADING.kind)
if sweeps.empty:
    st.info("No data-loading runs stored yet. Launch some from the **Run** page (\"Measure "
            "data loading\"), or in a terminal: `python -m engine dataload "
            "--format png tiff --decoder pillow opencv skimage --normalize numpy torch "
            "--pipeline loop torch_dataloader --batch 8 32 --workers 0 2`.",
            icon=":material/info:")
    st.stop()

labels = sweep_labels(sweeps, "all data-loading runs")
c1, c2 = st.columns([3, 2])
link.choice("sweep", "load_sweep", list(labels), encode=lambda s: s or "all", prefix_ok=True)
sweep_id = c1.selectbox("Runs", list(labels), format_func=labels.get, key="load_sweep",
                        **link.initial("load_sweep", index=1))
link.put("sweep", sweep_id or "all")
# Figures never blend machines or devices: with more than one setting, the user picks one.
choices, setting_labels = setting_choices(read(settings, DATA_LOADING.kind, sweep_id))
setting = choices[0] if choices else None
if len(choices) > 1:
    link.choice("setting", "load_setting", choices, encode=encode_setting)
    setting = st.selectbox("Setting (device · machine)", choices,
                           format_func=setting_labels.get, key="load_setting",
                               **link.initial("load_setting"),
                           help="runs on another device or machine are a different setting")
    link.put("setting", setting, encode_setting)
summary = read(load_summary, sweep_id, setting)
failures = read(load_failures, sweep_id)
if summary.empty:
    st.warning("No run of this selection succeeded; the failures are listed below.")
else:
    formats = sorted(summary.format.unique())
    link.choice("format", "load_format", formats)
    link.choice("show", "load_value", ["ms_per_batch", "images_per_s", "batches_per_s"])
    fmt = c2.radio("Format", formats, horizontal=True, key="load_format",
                   **link.initial("load_format"))
    value = st.radio("Show", ["ms_per_batch", "images_per_s", "batches_per_s"],
                     horizontal=True, key="load_value", **link.initial("load_value"),
                     format_func={"ms_per_batch": "ms per batch", "images_per_s": "images/s",
                                  "batches_per_s": "batches/s"}.get)
    link.put("format", fmt)
    link.put("show", value)
    d = summary[summary.format == fmt]
    st.subheader(f"{fmt}: rows batch size by workers and threads; columns implementations")
    shown, best = load_grid(d, value)
    st.dataframe(highlight_cells(shown, best), hide_index=True, width="stretch")
    st.caption("ms per batch: median over rounds of each run's median; images/s: median "
               "over rounds of each run's images over its total measured time (batches/s: "
               "that over the batch size); the best of each row is shaded; "
               "– : not measured (the plain loop has no workers). "
               "With workers, a sample times a whole cycle of the workers (2 batches each) "
               "divided by its batch count. Every implementation's first batch was checked "
               "against the generated ground truth before timing (lossless formats exactly, "
               "JPEG by mean error).")
    st.plotly_chart(load_bars(d, value), key="load_chart")
if not failures.empty:
    st.subheader("Runs that did not succeed")
    st.dataframe(failures, hide_index=True, width="stretch")
link.finish()
