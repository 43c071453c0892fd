"""Energy and numerics through the real CLI, real workers of both frameworks and a real
DuckDB (issue 28 parts 3 and 7): this machine has no RAPL, so a run that asks for energy
ends ok with the figure NULL and the reason stored; each run stores the numerics its
worker read back, and denormals are flushed alike in torch and TensorFlow."""

from __future__ import annotations

import json

import pytest

from engine.cli import main
from engine.core.energy import POWERCAP_ENV
from engine.present.report import build_report
from engine.present.run_detail import energy_text, numerics_text, run_provenance
from store.db import open_db
from store.queries import results_table, run_detail

pytestmark = pytest.mark.slow


def test_energy_asked_on_a_machine_without_rapl_stores_the_reason_and_the_numerics(
        db_path, worker_env, tmp_path, monkeypatch, capsys):
    # No powercap tree, as on this VM; named explicitly so a machine with RAPL says the same
    monkeypatch.setenv(POWERCAP_ENV, str(tmp_path / "powercap"))
    rc = main(["run", "--model", "mobilenet_v3_small", "--framework", "torch", "tensorflow",
               "--batch", "1", "--threads", "1", "--image-size", "32", "--rounds", "1",
               "--max-rounds", "1", "--min-time", "0.02", "--min-iters", "3", "--warmup", "1",
               "--energy-s", "0.2", "--db", str(db_path)])
    assert rc == 0
    out = capsys.readouterr().out
    reason = (f"no RAPL on this machine: {tmp_path / 'powercap'} is absent (most cloud VMs "
              "expose no power counters)")
    assert out.count(f"energy absent: {reason}") == 2  # each stored run's line says so
    # an energy loop reads the whole package: contenders were not interleaved
    assert "an energy loop follows each timed one" in out
    with open_db(db_path) as con:
        rows = con.execute(
            "SELECT framework, status, energy_source, energy_absent, energy_j_per_sample, "
            "energy_kwh_per_million, energy_loop_s, energy_samples, numerics, run_id "
            "FROM runs ORDER BY framework DESC").fetchall()
        table = results_table(con)
        detail = run_detail(con, rows[0][-1])
        report = build_report(con, None, "md").decode()
        html = build_report(con, None, "html").decode()
    assert [r[:8] for r in rows] == [("torch", "ok", None, reason, None, None, None, None),
                                     ("tensorflow", "ok", None, reason, None, None, None,
                                      None)]
    torch_n, tf_n = (json.loads(r[8]) for r in rows)
    assert torch_n == {
        "policy": "flush to zero (FTZ/DAZ) in both frameworks", "denormals_flushed": True,
        "tf32_asked": False, "cuda_matmul_fp32_precision": "ieee",
        "cudnn_conv_fp32_precision": "ieee", "cudnn_benchmark": True,
        "tf32_scope": "CUDA only: this run is on cpu, where it changes nothing"}
    assert tf_n == {
        "policy": "flush to zero (FTZ/DAZ) in both frameworks", "denormals_flushed": True,
        "tf32_asked": False, "tf32_enabled": False,
        "tf32_scope": "CUDA only: this run is on cpu, where it changes nothing"}
    assert list(table.energy_source) == [f"absent: {reason}"] * 2
    assert table.energy_j_per_sample.isna().all()
    assert energy_text(detail) == f"Energy: energy absent: {reason}"
    assert run_provenance(detail)["numerics"] == torch_n
    assert numerics_text(detail).startswith("Numerics: denormals flushed (flush to zero")
    assert (f"\n- energy, mobilenet_v3_small torch (eager) b1 t1 fp32 cpu: energy absent: "
            f"{reason}\n") in report
    assert "\n**Energy** (measured in a loop of its own after each timed one" in report
    assert "<h2>Energy</h2>" in html and "energy absent: no RAPL on this machine" in html
