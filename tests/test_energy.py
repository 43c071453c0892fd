"""Energy, honestly labelled (issue 28 part 3): RAPL read from a fake powercap tree (several
packages, a subzone left out, a counter wrapping, an unreadable counter), NVML through a
fake library and the real one (no GPU here), the loop on an injected clock, and the words
a page shows. Nothing here times anything."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from engine.core.energy import (NVML, RAPL, EnergyAbsent, EnergyReading, RaplMeter,
                                energy_words, rapl_status)
from engine.scenarios.inference.spec import RunSpec
from engine.core.policy import MeasurementPolicy
from engine.worker import energy
from engine.worker.energy import NvmlMeter, energy_loop, measure_energy

MAX = 262_143_328_850  # a package's max_energy_range_uj as Linux reports it


def zone(root: Path, name: str, label: str, uj: int, max_uj: int = MAX) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "name").write_text(f"{label}\n")
    (d / "energy_uj").write_text(f"{uj}\n")
    (d / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return d / "energy_uj"


def add_uj(path: Path, uj: int, max_uj: int = MAX) -> None:
    path.write_text(f"{(int(path.read_text()) + uj) % max_uj}\n")


class Clock:
    """Each read 0.5 s later than the last."""

    def __init__(self):
        self.ticks = itertools.count()

    def __call__(self) -> float:
        return next(self.ticks) * 0.5


def test_packages_are_summed_subzones_left_out_and_a_wrap_undone(tmp_path):
    p0 = zone(tmp_path, "intel-rapl:0", "package-0", MAX - 1_500_000)  # wraps in the loop
    p1 = zone(tmp_path, "intel-rapl:1", "package-1", 10)
    core = zone(tmp_path, "intel-rapl:0:0", "core", 0)  # part of package-0 already
    zone(tmp_path, "intel-rapl-mmio:0", "psys", 0)  # another tree: not a package zone
    meter = RaplMeter(tmp_path)
    assert meter.counters == ("package-0 (intel-rapl:0)", "package-1 (intel-rapl:1)")

    def step():  # each call: 1 J on each package, 5 J on the subzone (never read)
        add_uj(p0, 1_000_000)
        add_uj(p1, 1_000_000)
        add_uj(core, 5_000_000)

    got = energy_loop(step, meter, seconds=2.0, batch_size=4, clock=Clock())
    # 4 calls (0.5 s each to 2.0 s) x 2 packages x 1 J = 8 J over 16 samples
    assert int(p0.read_text()) == 2_500_000  # it did wrap
    assert got == EnergyReading(source=RAPL, j_per_sample=0.5,
                                kwh_per_million=0.5 * 1e6 / 3.6e6, loop_s=2.0, samples=16,
                                counters=meter.counters)


def test_a_counter_that_never_moves_is_absent_not_zero(tmp_path):
    zone(tmp_path, "intel-rapl:0", "package-0", 42)
    got = energy_loop(lambda: None, RaplMeter(tmp_path), seconds=1.0, batch_size=2,
                      clock=Clock())
    assert got.source is None and got.j_per_sample is None and got.kwh_per_million is None
    assert got.absent.startswith("measured (RAPL): the counters read the same before and "
                                 "after 1.0 s")
    assert got.samples == 4 and got.loop_s == 1.0


def test_no_tree_no_zone_and_an_unreadable_counter_each_say_why(tmp_path, monkeypatch):
    with pytest.raises(EnergyAbsent, match=r"no RAPL on this machine: .*missing is absent"):
        RaplMeter(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(EnergyAbsent, match="has no intel-rapl:N package zone"):
        RaplMeter(tmp_path / "empty")
    locked = zone(tmp_path / "locked", "intel-rapl:0", "package-0", 1)
    # root reads any mode, so the permission check is what a non-root worker meets
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != locked and real_access(p, mode))
    with pytest.raises(EnergyAbsent, match=r"energy_uj is not readable \(permission: root "
                                           "only"):
        RaplMeter(tmp_path / "locked")
    monkeypatch.undo()
    stub = tmp_path / "stub"
    zone(stub, "intel-rapl:0", "package-0", 1).unlink()
    (stub / "intel-rapl:0" / "energy_uj").mkdir()  # listed, readable by mode, refuses a read
    with pytest.raises(EnergyAbsent, match="is not readable: "):
        RaplMeter(stub)


def test_the_system_line_says_whether_this_machine_exposes_rapl(tmp_path):
    zone(tmp_path / "tree", "intel-rapl:0", "package-0", 1)
    assert rapl_status(tmp_path / "tree") == ("CPU energy: measured (RAPL) from package-0 "
                                              "(intel-rapl:0)")
    assert rapl_status(tmp_path / "none") == (
        f"CPU energy: absent: no RAPL on this machine: {tmp_path / 'none'} is absent (most "
        "cloud VMs expose no power counters)")


class FakeNvml:
    """pynvml's surface the meter uses; energy in mJ, +250 mJ a read."""

    class NVMLError(Exception):
        pass

    class NVMLError_NotSupported(NVMLError):
        pass

    def __init__(self, supported=True, driver=True):
        self.supported, self.driver, self.mj = supported, driver, 1_000

    def nvmlInit(self):
        if not self.driver:
            raise self.NVMLError("Driver Not Loaded")

    def nvmlDeviceGetHandleByIndex(self, i):
        return ("gpu", i)

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        if not self.supported:
            raise self.NVMLError_NotSupported("Not Supported")
        self.mj += 250
        return self.mj


def cuda_spec(**kw) -> RunSpec:
    return RunSpec("resnet18", "torch", 2, 1, device="cuda",
                   policy=MeasurementPolicy(energy_s=1.0), **kw)


def test_nvml_reads_the_runs_gpu_and_says_why_when_it_cannot(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    meter = NvmlMeter(energy.cuda_index(), FakeNvml())
    assert meter.counters == ("NVIDIA H100 80GB HBM3 (NVML device 3)",)
    got = energy_loop(lambda: None, meter, seconds=1.0, batch_size=2, clock=Clock())
    # reads at 1.0 s: 250 mJ from the opening read; 2 calls x batch 2
    assert (got.source, got.j_per_sample, got.samples) == (NVML, 0.25 / 4, 4)
    no_counter = measure_energy(lambda: None, cuda_spec(), nvml=FakeNvml(supported=False))
    assert no_counter.absent == "NVML: no energy counter on GPU 3 (needs Volta or later)"
    no_driver = measure_energy(lambda: None, cuda_spec(), nvml=FakeNvml(driver=False))
    assert no_driver.absent == "NVML: NVMLError: Driver Not Loaded"


def test_the_real_nvml_without_a_gpu_is_absent_with_its_reason():
    pytest.importorskip("pynvml", reason="nvidia-ml-py is not installed")
    try:
        NvmlMeter(0)
    except EnergyAbsent as exc:
        assert str(exc).startswith("NVML: NVMLError")
    else:
        pytest.skip("this machine has an NVIDIA GPU with an energy counter")


def test_no_energy_asked_reads_nothing_and_a_cpu_run_reads_rapl(tmp_path):
    assert measure_energy(lambda: 1 / 0, RunSpec("resnet18", "torch", 1, 1)) is None
    got = measure_energy(lambda: None, RunSpec("resnet18", "torch", 1, 1, policy=
                                               MeasurementPolicy(energy_s=0.1)),
                         root=tmp_path / "none")
    assert got.absent.startswith("no RAPL on this machine")


def test_words_put_the_tag_beside_the_figure_and_never_a_zero():
    assert energy_words(RAPL, None, 0.41234, 0.1145) == ("0.4123 J/sample, 0.1145 kWh per 1 M "
                                                         "inferences, measured (RAPL)")
    assert energy_words(None, "no RAPL on this machine", None, None) == (
        "energy absent: no RAPL on this machine")
    assert energy_words(None, None, None, None) == ""


@pytest.mark.parametrize("seconds", [0.05, 301, float("nan"), True, "10"])
def test_an_energy_loop_out_of_range_is_refused_naming_the_field(seconds):
    from engine.core.errors import UserError

    with pytest.raises(UserError, match=r"energy_s: .* allowed: 0 \(no energy loop\) or "
                                        r"0\.1\.\.300 seconds"):
        RunSpec("resnet18", "torch", 1, 1, policy=MeasurementPolicy(energy_s=seconds)).validate(2)


def test_tf32_and_energy_with_replicas_are_refused_with_the_reason():
    from engine.core.errors import UserError

    with pytest.raises(UserError, match="tf32: .* this run is on cpu; allowed here: off"):
        RunSpec("resnet18", "torch", 1, 1, tf32=True).validate(2)
    with pytest.raises(UserError, match="tf32: .* this run is bf16"):
        RunSpec("resnet18", "torch", 1, 1, tf32=True, device="cuda",
                precision="bf16").validate(2)
    with pytest.raises(UserError, match="replicas: 2 replicas cannot take an energy reading"):
        RunSpec("resnet18", "torch", 1, 1, replicas=2,
                policy=MeasurementPolicy(energy_s=1.0)).validate(2)
    assert RunSpec("resnet18", "torch", 1, 1, tf32=True, device="cuda").validate(2).tf32


@pytest.mark.parametrize("flags, message", [
    (["--energy-s", "0.01"], "error: energy_s: 0.01 is out of range; allowed: 0 (no energy "
                             "loop) or 0.1..300 seconds"),
    (["--energy", "--replicas", "2"], "error: replicas: 2 replicas cannot take an energy "
                                      "reading"),
    (["--tf32"], "error: tf32: TF32 is a CUDA tensor-core mode for torch's fp32 matmuls and "
                 "convolutions; this run is on cpu; allowed here: off"),
])
def test_the_cli_refuses_bad_energy_and_tf32_before_anything_runs(flags, message, db_path,
                                                                   capsys):
    from engine.cli import main

    rc = main(["run", "--model", "resnet18", "--framework", "torch", "--threads", "1",
               *flags, "--db", str(db_path)])
    assert rc == 2
    assert message in capsys.readouterr().err
    assert not db_path.exists()  # refused before a sweep was opened

