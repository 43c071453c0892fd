"""The machine's CPU energy counters (RAPL, read through Linux's powercap tree): what a
worker's energy loop reads (engine/worker/energy.py) and what the System page says of this
machine. Framework-free: files only, so tests read a fake tree (`root`).

A reading is never a zero and never a guess: where no counter can be read it is absent,
with the reason (most cloud VMs expose no powercap tree at all).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["POWERCAP_ROOT", "POWERCAP_ENV", "RAPL", "NVML", "J_PER_KWH", "READ_EVERY_S",
           "EnergyAbsent", "EnergyReading", "RaplMeter", "rapl_status", "energy_words"]

POWERCAP_ROOT = "/sys/class/powercap"
# Where a worker reads the powercap tree instead (tests: a fake tree, or none at all)
POWERCAP_ENV = "BENCH_POWERCAP_ROOT"
# The tags a reading carries beside its figure
RAPL, NVML = "measured (RAPL)", "measured (NVML)"
# Counters are read at least this often inside the loop, so a package counter that wraps
# (at max_energy_range_uj, ~262 kJ: minutes at a server's power) wraps at most once
# between two reads, which the delta can undo.
READ_EVERY_S = 1.0
J_PER_KWH = 3.6e6


@dataclass(frozen=True)
class EnergyReading:
    """What an energy loop found: a figure with its source tag, or absent with the reason.
    Travels as a dict (InferenceResult.energy) and is stored as the m014 columns."""

    source: str | None  # RAPL or NVML; None: absent
    absent: str | None = None  # why there is no figure
    j_per_sample: float | None = None
    kwh_per_million: float | None = None  # kWh per 1 M inferences (samples)
    loop_s: float | None = None
    samples: int | None = None  # inferences the loop ran (calls x batch size)
    counters: tuple[str, ...] = ()  # the zones or devices read

    @classmethod
    def from_dict(cls, d: dict) -> "EnergyReading":
        return cls(**{**d, "counters": tuple(d.get("counters") or ())})


class EnergyAbsent(Exception):
    """No counter to read here; the message is the reason a row shows."""


@dataclass(frozen=True)
class _Zone:
    name: str  # "package-0 (intel-rapl:0)"
    energy: Path
    max_range_uj: int


class RaplMeter:
    """CPU package energy: the sum over the top-level zones intel-rapl:N (one per package).
    Their subzones (intel-rapl:N:M: core, uncore, dram) are parts of a package already
    counted, so they are left out. AMD's recent kernels expose the same tree under the
    intel-rapl name."""

    source = RAPL

    def __init__(self, root: str | os.PathLike = POWERCAP_ROOT):
        root = Path(root)
        if not root.is_dir():
            raise EnergyAbsent(f"no RAPL on this machine: {root} is absent (most cloud VMs "
                               "expose no power counters)")
        zones = sorted((d for d in root.iterdir()
                        if d.name.startswith("intel-rapl:") and d.name.count(":") == 1),
                       key=lambda d: int(d.name.split(":")[1]))
        if not zones:
            raise EnergyAbsent(f"no RAPL on this machine: {root} has no intel-rapl:N "
                               "package zone")
        self.zones = tuple(_zone(d) for d in zones)

    @property
    def counters(self) -> tuple[str, ...]:
        return tuple(z.name for z in self.zones)

    def read(self) -> tuple[int, ...]:
        return tuple(_read_int(z.energy) for z in self.zones)

    def joules(self, before: tuple[int, ...], after: tuple[int, ...]) -> float:
        """Energy between two reads, each counter's wrap at its max_energy_range_uj undone."""
        total = 0
        for z, b, a in zip(self.zones, before, after):
            total += a - b if a >= b else a + z.max_range_uj - b
        return total / 1e6


def _zone(d: Path) -> _Zone:
    energy = d / "energy_uj"
    if not energy.exists():
        raise EnergyAbsent(f"RAPL zone {d.name} has no energy_uj counter")
    if not os.access(energy, os.R_OK):
        # since 2020 (CVE-2020-8694, PLATYPUS) energy_uj is readable by root only
        raise EnergyAbsent(f"powercap present but {energy} is not readable (permission: "
                           "root only since the PLATYPUS fix; a run as root, or a udev rule "
                           "making it readable, measures it)")
    try:
        name = (d / "name").read_text().strip()
        max_range = _read_int(d / "max_energy_range_uj")
    except (OSError, ValueError) as exc:
        raise EnergyAbsent(f"RAPL zone {d.name}: {exc}") from None
    try:
        _read_int(energy)
    except PermissionError:
        raise EnergyAbsent(f"powercap present but {energy} is not readable (permission)") \
            from None
    except (OSError, ValueError) as exc:  # listed readable, yet refused (a VM's stub)
        raise EnergyAbsent(f"powercap present but {energy} is not readable: {exc}") from None
    return _Zone(f"{name} ({d.name})", energy, max_range)


def _read_int(p: Path) -> int:
    return int(p.read_text().strip())




def rapl_status(root=None) -> str:
    """One line for the System page: whether this machine exposes RAPL, and why not (read
    where the workers read it)."""
    root = root or os.environ.get(POWERCAP_ENV) or POWERCAP_ROOT
    try:
        meter = RaplMeter(root)
    except EnergyAbsent as exc:
        return f"CPU energy: absent: {exc}"
    return f"CPU energy: measured (RAPL) from {', '.join(meter.counters)}"


def energy_words(source: str | None, absent: str | None, j_per_sample: float | None,
                 kwh_per_million: float | None) -> str:
    """A stored reading in words, its tag beside the figure: "0.412 J/sample, 0.114 kWh per
    1 M inferences, measured (RAPL)", "energy absent: <reason>", or "" when none was asked."""
    if source and j_per_sample is not None:
        return (f"{j_per_sample:.4g} J/sample, {kwh_per_million:.4g} kWh per 1 M inferences, "
                f"{source}")
    if absent:
        return f"energy absent: {absent}"
    return ""
