"""Training: time per epoch and samples/s side by side; loss and accuracy curves overlaid."""

from datetime import date

import pandas as pd
import streamlit as st

from engine.analysis.cost import default_shape
from engine.analysis.cost_machines import priced_shapes, training_rows
from engine.analysis.price_age import stale_prices
from engine.present.cost_text import stale_text
from engine.present.charts_workloads import (epoch_time_bars, samples_per_s_bars,
                                             step_loss_chart, train_labels, training_cost_bars,
                                             training_curves)
from engine.present.tables import sweep_labels
from engine.present.training_text import (accuracy_gap_text, accuracy_metrics, cost_caption,
                                          final_epochs, measure_label, priced_machines)
from engine.run.jobs.requests import SweepRequest
from engine.scenarios import TRAINING
from engine.core.errors import UserError
from dashboard.session import access, job_manager, read
from dashboard.link_state import PageLink
from engine.present.links import encode_setting
from store.prices import effective_catalog
from engine.present.frames import setting_choices
from store.queries import inference_for_training, machine_throughput, settings, train_runs
from store.runs import list_sweeps, train_epochs, train_steps
from store.study import study_inference, study_training
from engine.present.study_text import study_caption, study_table

st.title("Training")
link = PageLink("training")
sweeps = read(list_sweeps, kind=TRAINING.kind)
if sweeps.empty:
    st.info("No training runs stored yet. Launch some from the **Run** page (\"Train "
            "models\"), or in a terminal: `python -m engine train --model resnet18 "
            "--framework torch tensorflow --epochs 1 --dataset digits`; every run, failed "
            "ones included, lands here.", icon=":material/info:")
    st.stop()

labels = sweep_labels(sweeps, "all training runs")
link.choice("sweep", "train_sweep", list(labels), encode=lambda s: s or "all", prefix_ok=True)
sweep_id = st.selectbox("Runs", list(labels), format_func=labels.get, key="train_sweep",
                        **link.initial("train_sweep", index=1))
link.put("sweep", sweep_id or "all")
runs = read(train_runs, sweep_id)
ok_ids = runs[runs.status == "ok"].run_id.tolist()
epochs = read(train_epochs, runs.run_id.tolist())
steps = read(train_steps, runs.run_id.tolist())
names = train_labels(runs)

st.dataframe(
    runs.assign(run=runs.run_id.map(names)), hide_index=True, width="stretch",
    column_order=["run", "model", "batch_size", "intra_threads", "dataset", "epochs",
                  "steps_per_epoch", "lr", "momentum", "status", "validity", "throughput",
                  "step_p50_ms", "step_p90_ms", "final_train_loss", "final_test_loss",
                  "final_test_acc", "peak_rss_mib", "reason"],
    column_config={
        "batch_size": st.column_config.NumberColumn("batch"),
        "intra_threads": st.column_config.NumberColumn("threads"),
        "steps_per_epoch": st.column_config.NumberColumn("steps/epoch"),
        "throughput": st.column_config.NumberColumn("samples/s", format="%.1f"),
        "step_p50_ms": st.column_config.NumberColumn("step p50 [ms]", format="%.1f"),
        "step_p90_ms": st.column_config.NumberColumn("step p90 [ms]", format="%.1f"),
        "final_train_loss": st.column_config.NumberColumn("train loss", format="%.3f"),
        "final_test_loss": st.column_config.NumberColumn("test loss", format="%.3f"),
        "final_test_acc": st.column_config.NumberColumn("test acc", format="percent"),
        "peak_rss_mib": st.column_config.NumberColumn("peak RSS [MiB]", format="%.0f"),
    })
failed = runs[runs.status != "ok"]
for r in failed.itertuples():
    st.warning(f"**{names[r.run_id]}**: {r.status} - {r.reason}")
if epochs.empty:
    st.info("No run of this selection finished an epoch.")
    st.stop()

# The accuracy gap between frameworks: the last epoch's test accuracy per run.
last = final_epochs(epochs)
cols = st.columns(min(len(last), 4))
for col, (label, value, why) in zip(cols, accuracy_metrics(last, names)):
    col.metric(label, value, help=why)
shown_bn = runs.set_index("run_id").bn_momentum.reindex(last.run_id)  # as the runs recorded
if gap := accuracy_gap_text(last, shown_bn):
    st.caption(gap)

c1, c2 = st.columns(2)
c1.plotly_chart(epoch_time_bars(epochs, names), key="epoch_time")
c2.plotly_chart(samples_per_s_bars(runs[runs.run_id.isin(ok_ids)], names), key="samples_s")
c3, c4 = st.columns(2)
c3.plotly_chart(training_curves(epochs, names, "loss"), key="loss_curves")
c4.plotly_chart(training_curves(epochs, names, "acc"), key="acc_curves")
if not steps.empty:
    st.plotly_chart(step_loss_chart(steps, names), key="step_loss")
st.caption("Epoch time covers the training steps and the gathering of their batches; the "
           "test-set evaluation is timed apart (eval_s). The first epoch includes warm-up "
           "(graph tracing, allocator growth): step statistics and the run's samples/s leave "
           "out the first steps (warm-up; their time is the run's warm-up and first step), "
           "the per-epoch samples/s chart does not. Per-step times and losses of a run are on the "
           "Results page (select the run).")

choices, setting_labels = setting_choices(read(settings, TRAINING.kind, sweep_id))
link.choice("setting", "train_setting", choices, encode=encode_setting)
setting = st.selectbox("Setting for latency and cost (device · precision · inter-op threads "
                       "· machine)", choices, format_func=setting_labels.get,
                       key="train_setting", **link.initial("train_setting"),
                       help="one setting at a time: runs on another device, precision, "
                            "inter-op thread count or machine are never averaged in"
                       ) if choices else None

link.put("setting", setting, encode_setting)
st.subheader("Inference latency of the same models")
latency = read(inference_for_training, sweep_id, setting)
if not latency.empty:
    st.dataframe(latency, hide_index=True, width="stretch", key="train_latency",
                 column_config={
                     "batch_size": st.column_config.NumberColumn("batch"),
                     "image_size": st.column_config.NumberColumn("image [px]"),
                     "p50_ms": st.column_config.NumberColumn("inference p50 [ms]", format="%.2f"),
                     "p99_ms": st.column_config.NumberColumn("inference p99 [ms]", format="%.2f"),
                     "throughput": st.column_config.NumberColumn("samples/s", format="%.1f"),
                     "runs": st.column_config.NumberColumn("inference runs")})
    missing = latency[latency.runs == 0]
    st.caption("Stored fp32 inference runs of the same architecture, runtime, batch size, "
               "threads and image size (weights do not change the work, so the trained "
               "weights need not be the ones measured).")
    if not missing.empty and access().can_write:  # viewer mode: no write controls
        requests = SweepRequest.covering(missing.to_dict("records"))
        total = sum(len(r.specs()) * r.rounds for r in requests)
        if st.button(measure_label(len(missing), total), key="train_measure_inference"):
            manager = job_manager()
            try:
                ids = [manager.submit(r).job_id for r in requests]
                st.success(f"Inference job(s) {', '.join(map(str, ids))} queued: progress on "
                           "the **Run** page; the latency appears here when they finish.")
            except UserError as exc:
                st.warning(str(exc))

st.subheader("Python vs C++: training and inference in one table")
study_batches = sorted({1, *map(int, runs[runs.framework == "torch"].batch_size)})
link.choice("study_batch", "train_study_batch", study_batches, encode=str)
study_batch = st.selectbox("Inference batch", study_batches, key="train_study_batch",
                           **link.initial("train_study_batch"))
link.put("study_batch", study_batch, str)
study = study_table(read(study_training, sweep_id, setting),
                    read(study_inference, sweep_id, setting, study_batch))
if study.empty:
    st.info("No successful torch training run (eager or libtorch) in this selection.",
            icon=":material/info:")
else:
    st.dataframe(study, hide_index=True, width="stretch", key="train_study", column_config={
        "batch_size": st.column_config.NumberColumn("train batch"),
        "image_size": st.column_config.NumberColumn("image [px]"),
        "train_runs": st.column_config.NumberColumn("runs"),
        "s_per_epoch": st.column_config.NumberColumn("s per epoch", format="%.2f"),
        "samples_per_s": st.column_config.NumberColumn("samples/s", format="%.1f"),
        "train_loss": st.column_config.NumberColumn("train loss", format="%.3f"),
        "train_acc": st.column_config.NumberColumn("train acc", format="percent"),
        "test_loss": st.column_config.NumberColumn("test loss", format="%.3f"),
        "test_acc": st.column_config.NumberColumn("test acc", format="percent"),
        **{c: st.column_config.NumberColumn(c, format="%.2f")
           for c in study.columns if c.endswith("p50 [ms]")}})
st.caption(study_caption(study_batch))

st.subheader("What training costs")
catalog, _ = read(effective_catalog)
measured = read(machine_throughput, TRAINING.kind, setting, sweep_id)
if measured.empty:
    link.finish()
    st.info("Pricing needs a successful training run in this selection.",
            icon=":material/info:")
    st.stop()
on_shapes = set(measured.machine_shape.dropna())  # shapes that runs name: measured there
cpu = priced_shapes(catalog, on_shapes)
link.choice("shape", "train_shape", list(range(len(cpu))), encode=lambda i: cpu[i].label)
machine = cpu[st.selectbox("Machine", range(len(cpu)), key="train_shape",
                           **link.initial("train_shape", index=default_shape(cpu)),
                           format_func=lambda i: f"{cpu[i].label} ({cpu[i].vcpus} vCPUs, "
                                                 f"${cpu[i].usd_per_hour:.4f}/h)")]
priced = priced_machines(cpu, machine, on_shapes)
rows = training_rows(measured.to_dict("records"), priced)
if not rows:
    link.finish()
    st.info(f"No figure for {machine.label}: the selected machine has no successful "
            "training run to estimate from, and none was measured on these shapes.",
            icon=":material/info:")
    st.stop()
st.plotly_chart(training_cost_bars(rows), key="train_cost")
st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key="train_cost_table",
             column_order=["model", "contender", "batch_size", "machine",
                           "cost_per_million", "usd_per_epoch", "s_per_epoch", "throughput",
                           "usd_per_hour", "cores", "estimate", "assumption"],
             column_config={
                 "batch_size": st.column_config.NumberColumn("batch"),
                 "cores": st.column_config.NumberColumn("cores", format="%g"),
                 "usd_per_hour": st.column_config.NumberColumn("USD/hour", format="$%.4f"),
                 "throughput": st.column_config.NumberColumn("samples/s", format="%.1f"),
                 "s_per_epoch": st.column_config.NumberColumn("s per epoch", format="%.2f"),
                 "usd_per_epoch": st.column_config.NumberColumn("USD per epoch",
                                                                format="$%.6f"),
                 "cost_per_million": st.column_config.NumberColumn("USD per 1 M samples",
                                                                   format="$%.4f")})
st.caption(cost_caption(measured, rows))
if said := stale_text(stale_prices(priced, today=date.today()), date.today()):
    st.warning(said, icon=":material/schedule:")  # prices over 6 months old, by name
link.put("shape", machine.label)
link.finish()
