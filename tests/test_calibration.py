"""The machine's measured ceilings (issue 28 parts 1 and 2): a calibration on tiny sizes in a
real worker subprocess through the CLI, what m013 stores, the % of peak and intensity
arithmetic on fixed numbers (a thread count not calibrated included), the theoretical peak,
the CLI's refusals, and the pages and report showing a stored calibration."""

from __future__ import annotations

import importlib.metadata

import duckdb
import pandas as pd
import pytest

from engine.analysis.roofline import Ceilings, intensity, peak_for, percent_of_peak, with_peak
from engine.cli import main
from engine.core.calibration import CalibrationPlan, theoretical_peak
from engine.core.errors import UserError
from engine.core.protocol import Calibrated
from engine.present.report import build_report
from engine.present.roofline import ceiling_lines, ceiling_table
from store.calibrations import CALIBRATION_COLUMNS, latest_calibrations, save_calibration
from store.db import open_db
from seeds.records import SYSTEM, seed_sweep
from tests.conftest import seed_once
from tests.test_pages import page

TINY = ["calibrate", "--threads", "1", "--sizes", "32", "64", "--repeats", "2",
        "--min-repeat-s", "0", "--triad-mib", "2"]


def test_a_tiny_calibration_in_a_real_worker_stores_three_ceilings(db_path, worker_env,
                                                                   capsys):
    assert main([*TINY, "--db", str(db_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("calibrated 1 threads: GEMM fp32 ")
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        rows = {r["kind"]: r for r in con.execute("SELECT * FROM calibrations").df()
                .to_dict("records")}
    finally:
        con.close()
    assert sorted(rows) == ["gemm_bf16", "gemm_fp32", "triad"]
    fp32, bf16, triad = rows["gemm_fp32"], rows["gemm_bf16"], rows["triad"]
    assert list(fp32["sizes"]) == [32, 64] and len(fp32["size_best"]) == 2
    assert fp32["figure"] == max(fp32["size_best"]) > 0
    assert (fp32["threads"], fp32["repeats"], fp32["unit"]) == (1, 2, "GFLOP/s")
    assert len(fp32["cpus"]) == 1  # pinned like a one-thread run
    assert fp32["torch_version"].startswith(importlib.metadata.version("torch"))  # +cu130
    if "avx512_bf16" in fp32["cpu_flags"] or "amx_bf16" in fp32["cpu_flags"]:
        assert bf16["figure"] == max(bf16["size_best"]) > 0
    else:
        assert bf16["figure"] is None or pd.isna(bf16["figure"])
        assert bf16["absent_reason"].startswith("the CPU has none of avx512_bf16, amx_bf16")
    assert (triad["array_bytes"], triad["bytes_per_element"], triad["unit"]) == (
        2 * 2**20, 24, "GB/s")
    assert len(triad["repeat_figures"]) == 10 and triad["figure"] == max(triad["repeat_figures"])
    assert "arrays of 2 MiB as asked" in triad["llc_source"]
    assert len({r["calibration_id"] for r in rows.values()}) == 1
    assert "1 threads GEMM fp32: " in out and "1 threads triad bandwidth: " in out


def test_the_migration_makes_the_table_a_reader_of_the_figure_needs(db_path):
    with open_db(db_path) as con:
        got = [r[0] for r in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = "
            "'calibrations' ORDER BY ordinal_position").fetchall()]
        assert "m013_calibration" in [r[0] for r in con.execute(
            "SELECT name FROM migrations").fetchall()]
    assert got == CALIBRATION_COLUMNS


@pytest.mark.parametrize("argv, message", [
    (["--threads", "0"], "threads: 0 is out of range; allowed: integer 1..any"),
    (["--threads", "two"], "threads: 'two' is not an integer"),
    (["--sizes", "4"], "sizes: 4 is out of range; allowed: integer 8..16384"),
    (["--repeats", "0"], "repeats: 0 is out of range; allowed: integer 1..50"),
])
def test_the_cli_refuses_bad_arguments_naming_the_field(argv, message, db_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", *argv, "--db", str(db_path)])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_more_threads_than_cores_is_a_user_error_before_anything_runs(db_path, capsys):
    assert main(["calibrate", "--threads", "4096", "--db", str(db_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: threads: 4096 is out of range; allowed: integer 1..")
    assert "(the cores this process may use)" in err
    with pytest.raises(UserError, match="min_repeat_s: 11 is out of range"):
        CalibrationPlan(1, min_repeat_s=11).validate(2)


def _calibrated(threads=1, fp32=(100.0, 400.0), bf16=(), absent="no avx512_bf16 here",
                gbs=(18.0, 20.0)) -> Calibrated:
    return Calibrated("c1", threads=threads, cpus=tuple(range(threads)),
                      machine={"cores": threads, "cpu_flags": ["avx2", "fma", "avx512f"],
                               "cpu_mhz": 2500.0, "mhz_source": "test clock"},
                      versions={"torch": "2.14.1"}, sizes=(256, 512), repeats=3,
                      fp32_gflops=fp32, bf16_gflops=bf16, bf16_absent=absent,
                      llc_bytes=32 * 2**20, llc_source="sysfs: L3 unified 32768K",
                      triad_array_bytes=128 * 2**20, triad_gbs=gbs,
                      seconds={"gemm_fp32": 2.0, "triad": 0.5})


def _ceilings() -> Ceilings:
    return Ceilings(pd.DataFrame([
        {"system_id": "s1", "threads": 2, "kind": "gemm_fp32", "figure": 400.0},
        {"system_id": "s1", "threads": 2, "kind": "gemm_bf16", "figure": None,
         "absent_reason": "no avx512_bf16"},
        {"system_id": "s1", "threads": 2, "kind": "triad", "figure": 20.0}]))


def test_percent_of_peak_holds_a_run_against_its_own_threads_and_precision_only():
    c = _ceilings()
    peak = peak_for(c, "s1", 2, "fp32")
    assert (peak.figure, peak.note) == (400.0, "gemm_fp32 at 2 threads")
    assert percent_of_peak(100.0, peak) == 25.0
    one = peak_for(c, "s1", 1, "fp32")  # never the 2-thread peak for a 1-thread run
    assert one.figure is None and percent_of_peak(100.0, one) is None
    assert one.note == "not calibrated at 1 threads (calibrated at 2): none shown rather than mixed"
    assert peak_for(c, "s1", 2, "bf16").note == "gemm_bf16 absent: no avx512_bf16"
    assert peak_for(c, "s2", 2, "fp32").note.startswith("this machine is not calibrated")
    assert peak_for(c, "s1", 2, "int8").note == "no GEMM ceiling is measured for int8"
    assert peak_for(c, "s1", float("nan"), "fp32").note == "the run names no thread count"
    assert peak_for(c, None, 2, "fp32").note == "the run names no machine"
    frame = with_peak(pd.DataFrame({"system_id": ["s1", "s1"], "threads": [2, 1],
                                    "precision": ["fp32", "fp32"],
                                    "gflops_per_s": [300.0, 300.0]}), c)
    assert frame.pct_of_peak.tolist()[0] == 75.0 and pd.isna(frame.pct_of_peak.tolist()[1])
    assert c.bandwidth("s1", 2) == 20.0


def test_intensity_counts_params_and_input_once_as_a_lower_bound_of_bytes():
    # 4 bytes x (1e6 params + 2 x 3 x 32 x 32 input values) = 4,024,576 bytes for 2e9 FLOPs
    assert intensity(1e9, 2, 1_000_000, 32, "fp32") == pytest.approx(2e9 / 4_024_576)
    assert intensity(1e9, 2, 1_000_000, 32, "bf16") == pytest.approx(2e9 / 2_012_288)
    assert intensity(None, 2, 1_000_000, 32, "fp32") is None


def test_theoretical_peak_says_its_assumption_or_unknown():
    t = theoretical_peak("gemm_fp32", 2, 2600.0, "test clock", {"avx2", "avx512f"})
    assert t.figure == pytest.approx(2 * 2.6 * 64)
    assert t.how.startswith("2 cores x 2.60 GHz (test clock) x 64 FLOP/cycle (2 FMA units")
    assert "assumed, not read" in t.how
    assert theoretical_peak("gemm_fp32", 2, None, None, {"avx512f"}).figure is None
    assert theoretical_peak("gemm_bf16", 2, 2600.0, "x", {"avx512f"}).how == (
        "unknown: none of amx_bf16, avx512_bf16 in the CPU flags")
    assert theoretical_peak("triad", 2, 2600.0, "x", {"avx512f"}).how.startswith("unknown")


def test_stored_ceilings_read_back_newest_first_beside_the_theoretical_peak(db_path):
    with open_db(db_path) as con:
        save_calibration(con, _calibrated(fp32=(10.0, 20.0)), CalibrationPlan(1), SYSTEM)
        save_calibration(con, _calibrated(), CalibrationPlan(1), SYSTEM)
        latest = latest_calibrations(con)
    assert latest.kind.tolist() == ["gemm_fp32", "gemm_bf16", "triad"]
    table = ceiling_table(latest).set_index("ceiling")
    assert table.loc["GEMM fp32", "measured"] == 400.0  # the newest, not the first
    assert table.loc["GEMM fp32", "theoretical"] == pytest.approx(1 * 2.5 * 64)
    assert table.loc["GEMM fp32", "per_size"] == "256: 100, 512: 400"
    assert table.loc["triad bandwidth", "per_size"] == "repeats: 18.0, 20.0"
    assert pd.isna(table.loc["GEMM bf16", "measured"])
    lines = ceiling_lines(ceiling_table(latest))
    assert lines[1].startswith("box 1 threads GEMM bf16: absent: no avx512_bf16 here; "
                               "theoretical unknown; measured ")
    assert lines[0].startswith("box 1 threads GEMM fp32: 400.0 GFLOP/s; theoretical 160 "
                               "GFLOP/s (250 % of it; 1 cores x 2.50 GHz (test clock)")


def _frame(at, column: str) -> pd.DataFrame:
    """The page's table that has this column (AppTest finds a dataframe by order only)."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def test_pages_and_report_show_a_stored_calibration(db_path, monkeypatch):
    seed_once(seed_sweep, db_path)  # 1 and 2 threads; FLOPs 1e9 a sample
    with open_db(db_path) as con:
        save_calibration(con, _calibrated(threads=1), CalibrationPlan(1), SYSTEM)
    at = page("views/system.py", db_path, monkeypatch)
    shown = _frame(at, "ceiling").set_index("ceiling")
    assert shown.loc["GEMM fp32", "measured"] == 400.0
    assert shown.loc["GEMM fp32", "theoretical"] == "160"
    assert shown.loc["triad bandwidth", "theoretical"] == "unknown"

    at = page("views/results.py", db_path, monkeypatch)
    runs = at.dataframe[0].value.set_index("run_id")
    one = runs.loc["torch-1-1-1"]  # 1e9 FLOPs at ~10.1 ms: ~99 GFLOP/s of the 400 measured
    assert one.pct_of_peak == pytest.approx(100 * one.gflops_per_s / 400.0)
    assert pd.isna(runs.loc["torch-1-2-1", "pct_of_peak"])  # 2 threads: not calibrated

    at = page("views/compare.py", db_path, monkeypatch, {"threads": "1"})
    table = _frame(at, "peak_note")
    assert set(table[table.threads == 2].peak_note) == {
        "not calibrated at 2 threads (calibrated at 1): none shown rather than mixed"}
    assert table[table.threads == 1].pct_of_peak.notna().all()
    assert any(c.proto.spec and "Roofline at 1 threads" in c.proto.spec
               for c in at.get("plotly_chart"))

    with open_db(db_path) as con:
        md = build_report(con, "sweep-seeded", "md").decode()
    assert "**Against the machine's ceilings:**" in md
    assert "not calibrated at 2 threads (calibrated at 1)" in md


def test_the_run_page_offers_a_calibration_the_sweep_lacks(db_path, monkeypatch):
    from engine.run.jobs.calibrate import CalibrateRequest
    from engine.run.process.machine import system_info
    from tests.test_pages import FakeManager

    fake = FakeManager()
    monkeypatch.setattr("engine.run.jobs.queue.get_manager", lambda db, read_only=False: fake)
    at = page("views/run.py", db_path, monkeypatch)
    at.multiselect(key="threads").set_value([1]).run()
    offer = [i.value for i in at.info if i.value.startswith("This machine has no measured")]
    assert offer and offer[0].startswith("This machine has no measured ceilings at 1 threads")
    at.button(key="calibrate").click().run()
    assert fake.submitted == [CalibrateRequest(threads=(1,))]
    with open_db(db_path) as con:  # calibrated at 1 thread: nothing more to offer
        save_calibration(con, _calibrated(threads=1), CalibrationPlan(1), system_info())
    at = page("views/run.py", db_path, monkeypatch)
    at.multiselect(key="threads").set_value([1]).run()
    assert "calibrate" not in [b.key for b in at.button]
    assert not any(i.value.startswith("This machine has no measured") for i in at.info)


def test_a_calibration_job_runs_in_the_queue_and_says_its_ceilings(db_path, worker_env):
    from engine.run.jobs.calibrate import CalibrateRequest
    from engine.run.jobs.queue import DONE, JobManager

    manager = JobManager(db_path)
    job = manager.submit(CalibrateRequest(threads=(1,), sizes=(32,)))
    assert job.request.label() == "calibration at 1 threads"
    assert manager.wait(lambda m: m.active() is None and not m.queued(), timeout=120)
    [done] = manager.history()
    assert done.state == DONE, done.error
    assert done.result.startswith("calibrated: 1 threads: GEMM fp32 ")
    with open_db(db_path) as con:
        assert latest_calibrations(con).kind.tolist() == ["gemm_fp32", "gemm_bf16", "triad"]
