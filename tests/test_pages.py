"""Every page through AppTest, on an empty and on a seeded database."""

import pytest
from streamlit.testing.v1 import AppTest

from engine.run.jobs.requests import SweepRequest
from tests.conftest import ROOT, seed_once
from seeds.records import seed_sweep, seed_workloads

APP = str(ROOT / "app.py")
PAGES = ["views/run.py", "views/results.py", "views/compare.py", "views/cost.py",
         "views/system.py", "views/training.py", "views/dataload.py", "views/history.py"]


def page(name, db_path, monkeypatch, query=None):
    monkeypatch.setenv("BENCH_DB", str(db_path))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page(name)
    at.query_params.update(query or {})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def opened_from_link(db_path, monkeypatch, query):
    """The Run page as a shared link opens it in a new tab: the address holds the values on
    the first render (page() renders the default page first, before its query is set)."""
    monkeypatch.setenv("BENCH_DB", str(db_path))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(query)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture
def seeded(db_path):
    seed_once(seed_sweep, db_path)
    return db_path


@pytest.mark.parametrize("name, hint", [
    ("views/results.py", "No runs stored yet. Launch a sweep on the **Run** page"),
    ("views/compare.py", "Nothing to compare yet"),
    ("views/system.py", "The database is empty: launch a sweep on the **Run** page"),
    ("views/cost.py", "No measured throughput yet"),
    ("views/training.py", "No training runs stored yet"),
    ("views/dataload.py", "No data-loading runs stored yet"),
])
def test_empty_database_pages_say_what_to_do(name, hint, db_path, monkeypatch):
    at = page(name, db_path, monkeypatch)
    assert any(i.value.startswith(hint) for i in at.info), [i.value for i in at.info]
    assert not at.get("plotly_chart")


def test_run_page_shows_sweep_size_and_launch_on_empty_database(db_path, monkeypatch):
    at = page("views/run.py", db_path, monkeypatch)
    cores = len(at.multiselect(key="threads").options)
    assert at.multiselect(key="models").value == ["efficientnet_b0"]
    assert at.multiselect(key="frameworks").value == ["torch", "tensorflow"]
    assert at.multiselect(key="batch_presets").value == [1, 8]
    info = at.info[0].value
    assert info.startswith("**4 configurations × 3 rounds = 12 runs** (up to 6 rounds for "
                           "undecided contests), rough estimate for the minimum ≈ ")
    assert at.button(key="launch").disabled is False
    assert cores >= 1


def test_run_page_refuses_a_round_budget_it_cannot_keep(db_path, monkeypatch):
    at = page("views/run.py", db_path, monkeypatch)
    at.number_input(key="rounds").set_value(4)
    at.number_input(key="max_rounds").set_value(3)
    at.run()
    assert [e.value.split(";")[0] for e in at.error] == ["max_rounds: 3 is out of range"]
    assert at.button(key="launch").disabled is True
    at.number_input(key="max_rounds").set_value(8)
    for text, message in (("0", "time_budget_s: 0.0 is out of range"),
                          ("-5", "time_budget_s: -5.0 is out of range"),
                          ("soon", "time_budget_s: 'soon' is not a number"),
                          # 4 runs x 2 s min_time + a torch and a TF start: 11 s at least
                          ("10", "time_budget_s: 10 s is too small for one round")):
        at.text_input(key="time_budget").set_value(text)
        at.run()
        assert len(at.error) == 1 and at.error[0].value.startswith(message), text
        assert at.button(key="launch").disabled is True
    at.text_input(key="time_budget").set_value("900")
    at.run()
    assert not at.error and "(up to 8 rounds for undecided contests, within 900 s)" in \
        at.info[0].value


def test_a_bad_link_value_is_named_and_the_page_still_draws(db_path, monkeypatch):
    at = page("views/run.py", db_path, monkeypatch, query={
        "rounds": "lots", "max_rounds": "500", "min_time": "abc", "min_iters": "-3"})
    assert [w.value for w in at.warning] == [
        "link: min_time='abc' is not allowed; allowed: number 0..3600; using 2",
        "link: min_iters='-3' is not allowed; allowed: integer 1..100000; using 30",
        "link: rounds='lots' is not allowed; allowed: integer 1..100; using 3",
        "link: max_rounds='500' is not allowed; allowed: integer 1..100; using 6"]
    assert at.number_input(key="rounds").value == 3 and not at.exception


class FakeManager:
    def __init__(self):
        self.submitted = []

    def submit(self, request):
        self.submitted.append(request)
        from engine.run.jobs.queue import JobView
        return JobView(1, request, "queued", 0, 0, None, None, (), "", 0.0, None, None, ())

    def active(self):
        return None

    def queued(self):
        return []

    def history(self):
        return []


def test_widgets_drive_the_submitted_request(db_path, monkeypatch):
    fake = FakeManager()
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: fake)
    at = page("views/run.py", db_path, monkeypatch)
    at.multiselect(key="models").set_value(["mobilenet_v3_small", "resnet18"])
    at.multiselect(key="frameworks").set_value(["torch"])
    at.multiselect(key="batch_presets").set_value([1])
    at.text_input(key="batch_free").set_value("3, 48")
    at.multiselect(key="threads").set_value([1])
    at.text_input(key="image_size").set_value("64")
    at.number_input(key="rounds").set_value(2)
    at.run()
    assert at.info[0].value.startswith("**6 configurations × 2 rounds = 12 runs**")
    at.button(key="launch").click().run()
    assert len(fake.submitted) == 1
    req = fake.submitted[0]
    assert isinstance(req, SweepRequest)
    assert (req.models, req.frameworks, req.batch_sizes, req.threads, req.image_size,
            req.rounds) == (("mobilenet_v3_small", "resnet18"), ("torch",), (1, 3, 48),
                            (1,), 64, 2)
    assert at.success[0].value == "Sweep job 1 starts now."


@pytest.mark.parametrize("widget, value, message", [
    ("batch_free", "0", "batch_size: 0 is out of range; allowed: integer 1..4096"),
    ("batch_free", "big", "batch_size: 'big' is not an integer; allowed: integer 1..4096"),
    ("image_size", "16", "image_size: 16 is out of range; allowed: integer 32..1024"),
])
def test_invalid_input_is_explained_and_disables_launch(widget, value, message, db_path,
                                                        monkeypatch):
    at = page("views/run.py", db_path, monkeypatch)
    at.text_input(key=widget).set_value(value).run()
    assert [e.value for e in at.error] == [message]
    assert at.button(key="launch").disabled is True


def test_empty_choice_is_explained_and_disables_launch(db_path, monkeypatch):
    at = page("views/run.py", db_path, monkeypatch)
    at.multiselect(key="frameworks").set_value([]).run()
    assert [e.value for e in at.error] == ["framework: pick at least one value"]
    assert at.button(key="launch").disabled is True


def test_results_page_lists_every_run_and_filters(seeded, monkeypatch):
    at = page("views/results.py", seeded, monkeypatch)
    df = at.dataframe[0].value
    assert len(df) == 17 and sorted(set(df.status)) == ["ok", "oom"]
    # the process's peak, and what the model added over that process before it
    ok, oom = df[df.status == "ok"].iloc[0], df[df.status == "oom"].iloc[0]
    assert (ok.peak_rss_mib, ok.model_peak_mib) == (300.0, 50.0)
    assert oom.peak_rss_mib != oom.peak_rss_mib and oom.model_peak_mib != oom.model_peak_mib
    at.multiselect(key="f_status").set_value(["oom"]).run()
    df = at.dataframe[0].value
    assert df.run_id.tolist() == ["tf-oom"] and df.reason.tolist() == ["ValueError: boom"]
    assert not at.get("download_button")
    at.button(key="prepare_download").click().run()
    assert not at.exception
    assert [b.proto.label for b in at.get("download_button")] == ["CSV", "Parquet"]


def test_compare_page_prepares_a_report_of_the_sweep_on_request(seeded, monkeypatch):
    at = page("views/compare.py", seeded, monkeypatch)
    labels = [b.proto.label for b in at.get("download_button")]  # the page's CSV, before
    at.radio(key="report_format").set_value("md").run()
    at.button(key="prepare_report").click().run()
    assert not at.exception
    [new] = [b.proto.label for b in at.get("download_button") if b.proto.label not in labels]
    assert new.startswith("Download (.md, ") and new.endswith(" MiB)")
    at.radio(key="report_format").set_value("html").run()  # another format: prepare again
    assert [b.proto.label for b in at.get("download_button")] == labels


def test_compare_page_draws_every_view_with_significance(seeded, monkeypatch):
    at = page("views/compare.py", seeded, monkeypatch)
    assert at.selectbox(key="sweep").value == "sweep-seeded"
    assert at.multiselect(key="models").value == ["mobilenet_v3_small"]
    charts = at.get("plotly_chart")
    assert len(charts) == 5  # latency, throughput, scaling, distribution, heatmap
    # AppTest: by order, not key; the raw figures (an expander) follow the table
    table, raw, eff = (at.dataframe[i].value for i in range(3))
    assert table.shape == (5, 5)  # 4 configurations, and batch 32 whose only run hit oom
    assert table.iloc[4].tolist() == ["mobilenet_v3_small 64px", 32, 1, "", "oom"]
    assert table.iloc[0, 3].startswith("★ ")  # torch best at batch 1, 1 thread
    assert raw.iloc[0, :6].tolist() == ["mobilenet_v3_small 64px", "1", "1", "torch (eager)",
                                        "2", "10.15"]
    sentences = [m.value for m in at.markdown if m.value.startswith("- ")]
    # round medians torch 10.1/10.2 ms, tensorflow 20.1/20.2 ms, paired by round; the
    # seeded sweep kept no rule: looks at rounds 2-6, so 2 rounds give a wide interval
    assert sentences[0] == ("- mobilenet_v3_small 64px b1 t1: torch (eager) is 1.99x faster "
                            "than tensorflow (tf_function) (95 % sequential interval "
                            "1.85-2.13, 2 rounds)")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics == {"measurement noise (what pairing leaves)": "±0.5 %",
                       "machine drift between rounds": "0.6 %"}
    assert set(eff.contender) == {"torch (eager)", "tensorflow (tf_function)"}
    costs = at.dataframe[3].value  # one-time costs beside p50, at the chosen thread count
    assert sorted(set(costs.contender)) == ["tensorflow (tf_function)", "torch (eager)"]
    assert costs.build_s.tolist() == [0.5] * len(costs)


def test_system_page_shows_machine_and_database(seeded, monkeypatch):
    at = page("views/system.py", seeded, monkeypatch)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["runs"] == "17" and metrics["samples"] == f"{16 * 7:,}"
    assert metrics["sweeps"] == "1"
    pkgs = at.dataframe[0].value
    assert pkgs.set_index("package").loc["torch", "version"] == "2.14.1"


def test_results_page_shows_one_run_from_a_link(seeded, monkeypatch):
    monkeypatch.setenv("BENCH_DB", str(seeded))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["run"] = "torch-1-1-1"
    at.run()
    at.switch_page("views/results.py")
    at.query_params["run"] = "torch-1-1-1"
    at.run()
    assert not at.exception
    assert at.subheader[0].value == ("inference · mobilenet_v3_small · torch (eager) · "
                                     "batch 1 · 1 threads · ok")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["p50"] == "10.10 ms" and metrics["iterations"] == "5"
    assert metrics["p99 (low confidence)"].endswith(" ms")  # 5 samples: far from 100
    assert metrics["samples/s"] == "99.0"
    assert len(at.get("plotly_chart")) == 2  # histogram and iteration trace


def test_results_page_shows_a_failed_run_with_its_reason_and_stderr(seeded, monkeypatch):
    monkeypatch.setenv("BENCH_DB", str(seeded))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/results.py")
    at.query_params["run"] = "tf-oom"
    at.run()
    assert not at.exception
    assert at.error[0].value == "**oom**: ValueError: boom"
    assert any("ValueError: boom" in c.value for c in at.code)


def test_results_page_names_the_bytes_a_users_model_run_measured(db_path, monkeypatch):
    from dataclasses import replace

    from store.db import open_db
    from store.runs import save_record
    from seeds.records import SYSTEM, ok_record

    with open_db(db_path) as con:
        save_record(con, replace(ok_record("mine"), model="my_net", image_size=None,
                                 model_format="onnx", model_origin="/m/3f2a.onnx",
                                 model_inputs="input:1x3x16x16:float32",
                                 model_sha256="c0" * 32, model_bytes=1204), SYSTEM)
    at = page("views/results.py", db_path, monkeypatch, {"run": "mine"})
    assert at.subheader[0].value.startswith("inference · my_net · torch (eager)")
    (line,) = [c.value for c in at.caption if c.value.startswith("Your model")]
    assert line.startswith("Your model: onnx from /m/3f2a.onnx · inputs input")  # escaped ':'
    assert line.endswith(f"float32 · SHA-256 {'c0' * 32} · 1,204 bytes")


def test_run_page_estimate_uses_stored_latency_on_a_seeded_database(seeded, monkeypatch):
    at = page("views/run.py", seeded, monkeypatch)
    at.multiselect(key="models").set_value(["mobilenet_v3_small"])
    at.multiselect(key="frameworks").set_value(["torch"])
    at.multiselect(key="batch_presets").set_value([1])
    at.multiselect(key="threads").set_value([1])
    at.text_input(key="image_size").set_value("64")
    at.number_input(key="rounds").set_value(1)
    at.run()
    # stored p50 10.2 ms (newest round): import 5 s + build 0.6 s + first call 0.0102 s +
    # warm-up 0.102 s + timed max(2 s, 30 x 0.0102 s) = 7.71 s
    assert at.info[0].value == ("**1 configuration × 1 round = 1 run** (up to 6 rounds for "
                                "undecided contests), rough estimate for the minimum ≈ 0.1 min")


def test_cost_page_on_an_empty_database_still_compares_oci_with_aws(db_path, monkeypatch):
    at = page("views/cost.py", db_path, monkeypatch)
    assert at.subheader[0].value == ("OCI vs AWS: a 16-OCPU OCI machine against the 32-vCPU "
                                     "AWS machines, per month, at the same memory")
    claim = [m.value for m in at.markdown if m.value.startswith("At catalog list prices")][0]
    assert claim.startswith("At catalog list prices, **OCI VM.Standard.E3.Flex 16 OCPU/64 GB** "
                            "(32 vCPUs, 64 GB) costs **$362.08/month**; the cheapest 32-vCPU "
                            "x86 AWS machine, **AWS c6i.8xlarge** (32 vCPUs, 64 GB), costs "
                            "**$992.80/month** — 2.74x at 64 GB each")
    table = at.dataframe[0].value
    assert table["memory GB"].tolist()[:2] == [64.0, 64.0]
    # The x86 shapes priced here include undated (GCP) and 2025 (Azure) prices, stale on
    # any day: the page says which and where to check them.
    [stale] = [w.value for w in at.warning if "older than 6 months" in w.value]
    assert ("Azure Standard_D16s_v5: as of 2025 (read as 2025-01-01, the earliest it can "
            "mean)") in stale and "and " in stale and "more." in stale  # oldest four named
    assert any(c.value.startswith("40 of 42 machines' prices come from a third party's copy")
               for c in at.caption)


def test_cost_page_prices_measured_throughput(seeded, monkeypatch):
    at = page("views/cost.py", seeded, monkeypatch)
    assert at.selectbox(key="model").value == "mobilenet_v3_small"
    at.selectbox(key="contender").set_value("torch (eager)")
    at.selectbox(key="batch").set_value(1)
    at.radio(key="machine_mode").set_value("Enter a price")
    at.run()
    at.number_input(key="custom_price").set_value(0.36)
    at.number_input(key="custom_vcpus").set_value(2)
    at.run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    # torch batch 1 at 2 threads: round medians 5.1 and 5.2 ms -> 196.1 and 192.3 samples/s,
    # median 194.19, on a host with 2 threads per core: 1 core. 2 vCPUs priced by hand are
    # 1 core too; $0.36/h / (194.19 x 3600) x 1e6 = $0.51496
    assert metrics["throughput on this machine (estimate)"] == "194.2 samples/s"
    assert metrics["cost per 1 M inferences"] == "$0.5150"
    assert metrics["monthly cost (730 h)"] == "$262.80"
    assert len(at.get("plotly_chart")) == 4  # by shape, by framework, fleet, break-even
    # Break-even against torch on c6i.8xlarge (16 cores x 194.19 = 3,107.1/s at $1.36/h):
    # above 3 x 194.19 = 582.6/s the hand-priced machine needs 4 ($1,051.20) against 1.
    assert any(m.value.startswith(
        "From 0 to 582.6 samples/s **A** is cheaper (A 1 machine $262.80, B 1 machine "
        "$992.80).  \nAbove 582.6 samples/s → B (A 4 machines $1,051.20, B 1 machine "
        "$992.80)") for m in at.markdown)
    # No run names a catalog shape: no machine-vs-machine view, and how to get one.
    assert any(i.value.startswith("0 shapes measured for torch (eager) at batch 1: a "
                                  "side-by-side comparison needs two.") and
               "`python -m engine run ... --machine-shape NAME`" in i.value for i in at.info)
    at.number_input(key="hours").set_value(720.0).run()
    assert {m.label: m.value for m in at.metric}["monthly cost (720 h)"] == "$259.20"


def test_cost_page_prices_measured_shapes_from_their_runs(db_path, monkeypatch):
    from seeds.records import seed_machines
    seed_machines(db_path)
    at = page("views/cost.py", db_path, monkeypatch,
              query={"setting": "cpu_fp32_1_sys-local"})
    assert at.selectbox(key="setting").value == ("cpu", "fp32", 1, "sys-local", "", "none")
    at.selectbox(key="shape").set_value("AWS c6i.8xlarge").run()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["throughput on this machine (measured)"] == "236.0 samples/s"
    assert any(c.value == "Measured on c6i.8xlarge (16 threads x 2 replicas; median of 3 runs)."
               for c in at.caption)
    [versus] = [d.value for d in at.dataframe if "configuration" in d.value.columns]
    assert versus.machine.tolist() == ["OCI VM.Standard.E4.Flex 16 OCPU/32 GB",
                                       "AWS c6i.8xlarge"]
    assert versus["samples/s"].tolist() == [160.0, 236.0]
    # Each round timed 3 samples (ok_record): a p99 from so few is flagged, as Compare does.
    assert versus["p99 ms"].tolist() == ["21.00 (n=3, low conf.)", "41.00 (n=3, low conf.)"]
    at.selectbox(key="shape").set_value("OCI VM.Standard.E5.Flex 16 OCPU/32 GB").run()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["throughput on this machine (estimate)"] == "227.2 samples/s"


def test_run_page_runtimes_expand_the_sweep_and_bad_pairs_are_explained(db_path, monkeypatch):
    at = page("views/run.py", db_path, monkeypatch)
    at.multiselect(key="runtimes").set_value(["eager", "onnxruntime", "xla"]).run()
    assert at.info[0].value.startswith("**6 configurations × 3 rounds = 18 runs**")
    at.multiselect(key="frameworks").set_value(["tensorflow"])
    at.multiselect(key="runtimes").set_value(["onnxruntime"]).run()
    assert [e.value for e in at.error] == [
        "runtime: 'onnxruntime' is not available for tensorflow; allowed: tensorflow: keras, "
        "tf_function, xla"]
    assert at.button(key="launch").disabled is True


def test_run_page_submits_a_batch_search(db_path, monkeypatch):
    from engine.run.search.batch_search import BatchSearchRequest

    fake = FakeManager()
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: fake)
    at = page("views/run.py", db_path, monkeypatch)
    at.selectbox(key="bs_model").set_value("resnet18")
    at.selectbox(key="bs_runtime").set_value("torch/onnxruntime")
    at.selectbox(key="bs_threads").set_value(1)
    at.number_input(key="bs_p99").set_value(50.0)
    at.number_input(key="bs_max").set_value(64)
    at.run()
    at.button(key="bs_launch").click().run()
    assert not at.exception
    [req] = fake.submitted
    assert isinstance(req, BatchSearchRequest)
    assert (req.model, req.framework, req.runtime, req.threads, req.p99_bound_ms,
            req.max_batch, req.margin, req.mode) == ("resnet18", "torch", "onnxruntime", 1,
                                                     50.0, 64, 0.05, "throughput")
    assert at.success[0].value == "Search job 1 starts now."
    at.selectbox(key="bs_mode").set_value("fits")
    at.run()
    at.button(key="bs_launch").click().run()
    assert not at.exception and fake.submitted[-1].mode == "fits"


def test_training_page_shows_epochs_side_by_side_and_the_accuracy_gap(db_path, monkeypatch):
    seed_once(seed_workloads, db_path)
    seed_once(seed_sweep, db_path)  # inference runs must not leak into the training views
    at = page("views/training.py", db_path, monkeypatch)
    table = at.dataframe[0].value
    assert table.run.tolist() == ["tensorflow (tf_function)", "torch (eager)"]
    assert table.final_test_acc.tolist() == [0.7, 0.8]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics == {"test accuracy · tensorflow (tf_function)": "70.0%",
                       "test accuracy · torch (eager)": "80.0%"}
    assert any("gap between the runs shown: **10.0 points**" in c.value for c in at.caption)
    charts = at.get("plotly_chart")
    assert len(charts) == 6  # epoch time, samples/s, loss, accuracy, per-step loss, cost
    titles = [__import__("json").loads(c.proto.spec)["layout"]["title"]["text"]
              for c in charts]
    assert titles == ["Time per epoch", "Samples per second (all epochs)",
                      "Loss per epoch (test dashed)", "Accuracy per epoch (test dashed)",
                      "Training loss per step (moving average of 10)",
                      "Cost per 1 M training samples (hatched: estimate)"]
    # Priced like inference: torch at 1 thread on a host with 2 threads per core (half a
    # core) scaled to the 16 cores of OCI's 16-OCPU machine, beside the closest machine of
    # each provider.
    cost = at.dataframe[3].value  # after the runs, inference-latency and Python-vs-C++ tables
    torch_rows = cost[cost.contender == "torch (eager)"]
    assert torch_rows.machine.tolist() == ["OCI VM.Standard.E3.Flex 16 OCPU/32 GB",
                                           "AWS c6i.8xlarge", "Azure Standard_D32s_v5",
                                           "GCP n2-standard-32"]
    oci = torch_rows.iloc[0]
    from engine.analysis.cost import load_catalog
    price = next(m.usd_per_hour for m in load_catalog() if m.label == oci.machine)
    assert oci.usd_per_hour == price
    rate = 32 * 6 / 0.600015
    assert oci.throughput == pytest.approx(rate * 32)
    assert oci.cost_per_million == pytest.approx(price / (rate * 32 * 3600) * 1e6)
    assert oci.usd_per_epoch == pytest.approx(oci.cost_per_million * 128 / 1e6)
    assert oci.s_per_epoch == pytest.approx(128 / (rate * 32))
    assert torch_rows.estimate.all()
    assert any("an epoch here is 128 samples" in c.value and "(best split 1 thread x 1 "
               "replica at 0.5 cores) scaled to 16 cores" in c.value for c in at.caption)
    # Azure's 2025 and GCP's undated prices are among them: named as stale on any day
    [stale] = [w.value for w in at.warning if "older than 6 months" in w.value]
    assert "GCP n2-standard-32: undated" in stale and "Azure Standard_D32s_v5: as of 2025" \
        in stale



def test_training_page_shows_inference_latency_of_the_same_configurations(db_path,
                                                                           monkeypatch):
    from engine.run.jobs.requests import SweepRequest
    from store.db import open_db
    from store.runs import save_record
    from seeds.records import SYSTEM, ok_record

    seed_once(seed_workloads, db_path)  # resnet18 b32 t1 at 32 px: torch eager and tf_function
    with open_db(db_path) as con:  # torch's latency is known (at 32 px; 64 px must not count)
        save_record(con, ok_record("i-32", model="resnet18", batch_size=32, image_size=32,
                                   samples=(40_000_000, 42_000_000, 44_000_000)), SYSTEM)
        save_record(con, ok_record("i-64", model="resnet18", batch_size=32, image_size=64,
                                   minute=1, samples=(400_000_000,) * 3), SYSTEM)
    fake = FakeManager()
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: fake)
    at = page("views/training.py", db_path, monkeypatch)
    latency = at.dataframe[1].value
    assert latency[["framework", "runtime", "image_size", "runs"]].values.tolist() == [
        ["tensorflow", "tf_function", 32, 0], ["torch", "eager", 32, 1]]
    assert latency.p50_ms.tolist()[1] == pytest.approx(42.0)
    # the Python-vs-C++ study: torch's training row; at batch 1 no inference was measured,
    # at the training's batch 32 eager's p50 is the stored one
    study = at.dataframe[2].value
    assert study[["language", "batch_size", "s_per_epoch"]].values.tolist() == [
        ["Python", 32, 1.3]]
    assert at.selectbox(key="train_study_batch").options == ["1", "32"]
    assert study["eager p50 [ms]"].isna().all()
    at.selectbox(key="train_study_batch").set_value(32).run()
    assert at.dataframe[2].value["eager p50 [ms]"].tolist() == [pytest.approx(42.0)]
    assert at.query_params["study_batch"] == "32"
    button = at.button(key="train_measure_inference")
    assert button.proto.label == ("Measure inference for the 1 configuration(s) without it "
                                  "(3 runs)")
    button.click().run()
    assert not at.exception
    assert fake.submitted == [SweepRequest(models=("resnet18",), frameworks=("tensorflow",),
                                           batch_sizes=(32,), threads=(1,), image_size=32,
                                           runtimes=("tf_function",))]


def test_dataload_page_tabulates_batch_by_workers_against_implementations(db_path,
                                                                         monkeypatch):
    seed_once(seed_workloads, db_path)
    at = page("views/dataload.py", db_path, monkeypatch)
    table = at.dataframe[0].value
    assert list(table.columns) == ["workers", "threads", "batch_size", "loop:opencv+numpy",
                                   "loop:pillow+numpy", "torch_dataloader:opencv+torch"]
    assert table.values.tolist() == [
        [0, 1, 8, "2.00", "4.00", "1.50"], [0, 1, 32, "8.00", "16.00", "6.00"],
        [2, 1, 8, "–", "–", "0.50"], [2, 1, 32, "–", "–", "2.00"]]
    assert at.dataframe[1].value.status.tolist() == ["invalid"]  # the failure is listed
    assert len(at.get("plotly_chart")) == 1
    at.radio(key="load_value").set_value("images_per_s").run()
    assert at.dataframe[0].value.values.tolist()[0] == [0, 1, 8, "4,000.00", "2,000.00",
                                                         "5,333.33"]
    assert "load_setting" not in [b.key for b in at.selectbox]  # one machine: none to pick


def test_dataload_page_never_blends_two_machines(db_path, monkeypatch):
    from dataclasses import replace

    from store.db import open_db
    from store.runs import save_record
    from seeds.records import SYSTEM, load_record
    seed_once(seed_workloads, db_path)
    other = {**SYSTEM, "system_id": "sys-other", "hostname": "cloud", "cpu_model": "Other CPU"}
    with open_db(db_path) as con:  # the same configuration, ten times faster elsewhere
        save_record(con, replace(load_record("l-far", "png", "loop:opencv+numpy", 8, 0, 0.2),
                                 system_id="sys-other"), other)
    at = page("views/dataload.py", db_path, monkeypatch)
    box = at.selectbox(key="load_setting")
    assert box.options == ["cpu · inter-op 1 · Test CPU @ 2 GHz on box (8 runs)",
                           "cpu · inter-op 1 · Other CPU on cloud (1 runs)"]
    assert at.dataframe[0].value.values.tolist()[0] == [0, 1, 8, "2.00", "4.00", "1.50"]
    assert box.value == ("cpu", None, 1, "sys-test-0001", "", "none")
    box.set_value(("cpu", None, 1, "sys-other", "", "none")).run()
    assert not at.exception
    assert at.dataframe[0].value.values.tolist() == [[0, 1, 8, "0.20"]]


def test_results_page_shows_a_profiled_run_with_its_trace(db_path, monkeypatch):
    seed_once(seed_workloads, db_path)
    monkeypatch.setenv("BENCH_DB", str(db_path))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/results.py")
    at.query_params["run"] = "t-torch"
    at.run()
    assert not at.exception
    assert [s.value for s in at.subheader][:2] == [
        "train · resnet18 · torch (eager) · batch 32 · 1 threads · ok", "Profile"]
    ops = at.dataframe[1].value
    assert ops.op.tolist() == ["aten::convolution_backward", "aten::mkldnn_convolution"]
    assert any("200.00 ms per profiled step" in c.value for c in at.caption)
    assert len(at.get("plotly_chart")) == 3  # histogram, trace, operators
    assert len(at.get("download_button")) == 1


def test_run_page_takes_a_verdict_margin_and_contention_from_the_form_and_the_link(
        db_path, monkeypatch):
    from engine.run.jobs.requests import SweepRequest

    fake = FakeManager()
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: fake)
    at = opened_from_link(db_path, monkeypatch, {"margin": "5", "contention": "1"})
    assert at.number_input(key="margin").value == 5.0 and at.checkbox(key="contention").value
    # 4 configurations, each quiet and beside 2 neighbours, torch's also with passive waits
    assert at.info[0].value.startswith("**18 configurations × 3 rounds = 54 runs**")
    at.button(key="launch").click().run()
    [req] = fake.submitted
    assert isinstance(req, SweepRequest) and (req.margin, req.contention) == (0.05, True)
    assert req.budget().margin == 0.05
    bad = opened_from_link(db_path, monkeypatch, {"margin": "80", "contention": "yes"})
    assert [w.value for w in bad.warning] == [
        "link: margin='80' is not allowed; allowed: number 0..50; using 2",
        "link: contention='yes' is not allowed; allowed: one of 1, 0; ignored"]
    assert bad.number_input(key="margin").value == 2.0 and not bad.checkbox(key="contention").value


def test_run_page_submits_training_and_profiled_sweeps(db_path, monkeypatch):
    from engine.run.jobs.requests import SweepRequest, TrainRequest

    fake = FakeManager()
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: fake)
    at = page("views/run.py", db_path, monkeypatch)
    at.text_input(key="tr_batch").set_value("16, 32")
    at.number_input(key="tr_steps").set_value(5)
    at.number_input(key="tr_profile").set_value(2)
    at.run()
    assert any(i.value.startswith("**4 training runs** of 1 epoch(s) × 5 steps")
               for i in at.info), [i.value for i in at.info]
    at.button(key="tr_launch").click().run()
    assert not at.exception
    [req] = fake.submitted
    assert isinstance(req, TrainRequest)
    assert [(s.kind, s.framework, s.batch_size, s.profile_steps) for s in req.specs()] == [
        ("train", "torch", 16, 2), ("train", "torch", 32, 2),
        ("train", "tensorflow", 16, 2), ("train", "tensorflow", 32, 2)]
    at.text_input(key="tr_batch").set_value("0").run()
    assert "batch_size: 0 is out of range; allowed: integer 1..1024" in at.error[0].value
    assert at.button(key="tr_launch").disabled is True

    at.multiselect(key="models").set_value(["resnet18"])
    at.multiselect(key="frameworks").set_value(["torch"])
    at.number_input(key="profile").set_value(3)
    at.run()
    at.button(key="launch").click().run()
    sweep = fake.submitted[-1]
    assert isinstance(sweep, SweepRequest) and sweep.profile_steps == 3
    assert {s.profile_steps for s in sweep.specs()} == {3}


def test_run_page_submits_a_data_loading_sweep_and_says_what_it_skips(db_path, monkeypatch):
    from engine.run.jobs.requests import LoadRequest

    fake = FakeManager()
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: fake)
    at = page("views/run.py", db_path, monkeypatch)
    at.multiselect(key="dl_formats").set_value(["png", "tiff"])
    at.multiselect(key="dl_decoders").set_value(["pillow", "opencv"])
    at.multiselect(key="dl_normalizers").set_value(["numpy"])
    at.multiselect(key="dl_pipelines").set_value(["loop", "torch_dataloader"])
    at.text_input(key="dl_batch").set_value("4")
    at.text_input(key="dl_workers").set_value("0, 2")
    at.number_input(key="dl_count").set_value(16)
    at.number_input(key="dl_size").set_value(32)
    at.run()
    # png: 2 decoders x (loop at 0 workers + dataloader at 0 and 2) = 6; tiff: opencv only = 3
    assert any(i.value.startswith("**9 data-loading runs** of 4 implementation(s)")
               for i in at.info), [i.value for i in at.info]
    assert any("pillow cannot decode 4-band 16-bit TIFF" in c.value for c in at.caption)
    at.button(key="dl_launch").click().run()
    assert not at.exception
    [req] = fake.submitted
    assert isinstance(req, LoadRequest)
    assert sorted((s.fmt, s.runtime, s.workers) for s in req.specs()) == [
        ("png", "loop:opencv+numpy", 0), ("png", "loop:pillow+numpy", 0),
        ("png", "torch_dataloader:opencv+numpy", 0), ("png", "torch_dataloader:opencv+numpy", 2),
        ("png", "torch_dataloader:pillow+numpy", 0), ("png", "torch_dataloader:pillow+numpy", 2),
        ("tiff", "loop:opencv+numpy", 0), ("tiff", "torch_dataloader:opencv+numpy", 0),
        ("tiff", "torch_dataloader:opencv+numpy", 2)]
    assert {(s.count, s.image_size, s.batch_size) for s in req.specs()} == {(16, 32, 4)}
    at.text_input(key="dl_workers").set_value("65").run()
    assert "workers: 65 is out of range; allowed: integer 0..64" in at.error[0].value
    assert at.button(key="dl_launch").disabled is True
