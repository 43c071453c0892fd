"""Energy on the pages (issue 28 part 3): the Run page's checkbox (and its link), Results
showing a figure with its tag and an absent one with its reason, System's RAPL line read
where the workers read it. Stored records and a fake powercap tree; no worker runs."""

from __future__ import annotations

from dataclasses import replace

from engine.core.energy import POWERCAP_ENV, RAPL
from store.db import open_db
from store.runs import save_record
from seeds.records import SYSTEM, ok_record
from tests.test_energy import zone
from tests.test_pages import FakeManager, opened_from_link, page


def test_the_run_page_asks_for_energy_from_its_checkbox_and_its_link(db_path, monkeypatch):
    fake = FakeManager()
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: fake)
    at = opened_from_link(db_path, monkeypatch, {"energy": "1"})
    assert at.checkbox(key="energy").value
    at.button(key="launch").click().run()
    [req] = fake.submitted
    assert req.policy.energy_s == 10.0
    assert dict(at.query_params) == {"energy": "1"}
    bad = opened_from_link(db_path, monkeypatch, {"energy": "yes"})
    assert [w.value for w in bad.warning] == [
        "link: energy='yes' is not allowed; allowed: one of 1, 0; ignored"]
    assert not bad.checkbox(key="energy").value


def test_results_show_the_figure_with_its_tag_and_an_absent_one_with_its_reason(
        db_path, monkeypatch):
    measured = replace(ok_record("r-rapl"), energy_source=RAPL, energy_j_per_sample=0.41234,
                       energy_kwh_per_million=0.11454, energy_loop_s=10.02,
                       energy_samples=1234, energy_counters="package-0 (intel-rapl:0)",
                       numerics={"policy": "flush to zero (FTZ/DAZ) in both frameworks",
                                 "denormals_flushed": True, "tf32_asked": False,
                                 "cuda_matmul_fp32_precision": "ieee",
                                 "cudnn_conv_fp32_precision": "ieee", "cudnn_benchmark": True,
                                 "tf32_scope": "CUDA only: this run is on cpu, where it "
                                               "changes nothing"})
    absent = replace(ok_record("r-none", minute=1),
                     energy_absent="no RAPL on this machine: /sys/class/powercap is absent")
    with open_db(db_path) as con:
        for rec in (measured, absent):
            save_record(con, rec, SYSTEM)
    at = page("views/results.py", db_path, monkeypatch, {"run": "r-rapl"})
    table = at.dataframe[0].value.set_index("run_id")
    assert table.loc["r-rapl", "energy_source"] == RAPL
    assert table.loc["r-rapl", "energy_j_per_sample"] == 0.41234
    assert table.loc["r-none", "energy_source"] == ("absent: no RAPL on this machine: "
                                                    "/sys/class/powercap is absent")
    assert "Energy: 0.4123 J/sample, 0.1145 kWh per 1 M inferences, measured (RAPL) (a loop " \
           "of its own after the timed one: 10.0 s, 1,234 inferences; read package-0 " \
           "(intel-rapl:0))" in [c.value for c in at.caption]
    assert ("Numerics: denormals flushed (flush to zero (FTZ/DAZ) in both frameworks); fp32 "
            "CUDA matmul ieee, convolution ieee (TF32 not asked; CUDA only: this run is on "
            "cpu, where it changes nothing), cudnn.benchmark on") in [c.value for c in
                                                                    at.caption]


def test_system_says_whether_this_machine_exposes_rapl(db_path, monkeypatch, tmp_path):
    zone(tmp_path / "powercap", "intel-rapl:0", "package-0", 5)
    monkeypatch.setenv(POWERCAP_ENV, str(tmp_path / "powercap"))
    at = page("views/system.py", db_path, monkeypatch)
    assert "CPU energy: measured (RAPL) from package-0 (intel-rapl:0)" in [
        c.value for c in at.caption]
