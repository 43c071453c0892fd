"""Energy of an inference run, measured in a loop of its own after the timed one (issue 28
part 3): CPU package energy from RAPL's powercap counters, GPU energy from NVML. Never a
zero, never a guess: where no counter can be read the reading is absent, with the reason.

The loop runs the run's own step for at least `MeasurementPolicy.energy_s` seconds (10 s
by default, as optimum-benchmark's energy tracker does: RAPL counters tick about every
millisecond but are read through sysfs in microjoules, and NVML's energy counter updates
every ~20-100 ms, so a short loop reads mostly granularity) once the latency samples are
taken, so it never disturbs them. A package counter counts the whole package: every
process on it, not only this one.

Worker side, but framework-free: RAPL's counters are files (engine/core/energy.py) and
NVML a C library (pynvml), so tests read a fake powercap tree (`root`) and a fake NVML.
"""

from __future__ import annotations

import os
import time

from engine.core.energy import (J_PER_KWH, NVML, POWERCAP_ENV, POWERCAP_ROOT, READ_EVERY_S,
                                EnergyAbsent, EnergyReading, RaplMeter)

__all__ = ["NvmlMeter", "meter_for", "energy_loop", "measure_energy", "absent", "cuda_index"]


class NvmlMeter:
    """GPU energy: NVML's total energy counter (mJ since the driver loaded; Volta and later)
    of the run's device."""

    source = NVML

    def __init__(self, index: int, nvml=None):
        if nvml is None:
            try:
                import pynvml as nvml  # nvidia-ml-py: a ctypes binding, no framework
            except ImportError:
                raise EnergyAbsent("NVML: the nvidia-ml-py package is not installed") from None
        self.nvml = nvml
        try:
            nvml.nvmlInit()
            self.handle = nvml.nvmlDeviceGetHandleByIndex(index)
            self.name = _text(nvml.nvmlDeviceGetName(self.handle))
            nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)
        except nvml.NVMLError_NotSupported:
            raise EnergyAbsent(f"NVML: no energy counter on GPU {index} (needs Volta or "
                               "later)") from None
        except nvml.NVMLError as exc:
            raise EnergyAbsent(f"NVML: {type(exc).__name__}: {exc}") from None
        self.counters = (f"{self.name} (NVML device {index})",)

    def read(self) -> tuple[int, ...]:
        return (int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)),)

    def joules(self, before, after) -> float:
        return (after[0] - before[0]) / 1e3  # a 64-bit mJ counter: it does not wrap


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def cuda_index() -> int:
    """The NVML index of the run's device: torch's cuda:0 is the first of
    CUDA_VISIBLE_DEVICES where that names an index (NVML ignores that variable)."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


def meter_for(device: str, root=POWERCAP_ROOT, nvml=None):
    """The meter of a run's device, or EnergyAbsent saying why there is none."""
    if device == "cuda":
        return NvmlMeter(cuda_index(), nvml)
    return RaplMeter(root)


def energy_loop(step, meter, seconds: float, batch_size: int,
                clock=time.monotonic) -> EnergyReading:
    """Call step for at least `seconds` (at least once) and read the meter around it."""
    t0 = clock()
    last = t0
    before = first = meter.read()
    joules, calls = 0.0, 0
    while True:
        step()
        calls += 1
        now = clock()
        if now - last >= READ_EVERY_S or now - t0 >= seconds:
            after = meter.read()
            joules += meter.joules(before, after)
            before, last = after, now
            if now - t0 >= seconds:
                break
    samples = calls * batch_size
    if joules <= 0:  # a counter that never moved is no measurement: never a zero
        return absent(f"{meter.source}: the counters read the same before and after "
                      f"{now - t0:.1f} s ({first} -> {before}): no update seen",
                      meter.counters, now - t0, samples)
    per_sample = joules / samples
    return EnergyReading(source=meter.source, j_per_sample=per_sample,
                         kwh_per_million=per_sample * 1e6 / J_PER_KWH, loop_s=now - t0,
                         samples=samples, counters=meter.counters)


def absent(reason: str, counters=(), loop_s=None, samples=None) -> EnergyReading:
    return EnergyReading(source=None, absent=reason, counters=tuple(counters),
                         loop_s=loop_s, samples=samples)


def measure_energy(step, spec, root=None, nvml=None,
                   per_call: int | None = None) -> EnergyReading | None:
    """A run's reading when its policy asks for one (energy_s > 0), else None. Never
    raises: a meter that fails is the run's absent reading, not a failed run. per_call:
    the units a call makes, which the reading is per (default the batch size: samples;
    generation's B x N output tokens)."""
    if not spec.policy.energy_s:
        return None
    root = root or os.environ.get(POWERCAP_ENV) or POWERCAP_ROOT
    try:
        meter = meter_for(spec.device, root, nvml)
        return energy_loop(step, meter, spec.policy.energy_s, per_call or spec.batch_size)
    except EnergyAbsent as exc:
        return absent(str(exc))
    except OSError as exc:  # a counter that went away mid-loop
        return absent(f"counter read failed: {exc}")
