"""The machine's ceilings, measured in a worker (Assign mode CALIBRATE; issue 28 part 1):
a square torch.matmul sweep in fp32 and bf16 and a STREAM-style triad, with the thread
count set the way an inference run sets it (thread environment before import,
configure_threads) on the cores the parent pinned it to. Timed with perf_counter_ns; how
each figure is counted is engine.core.calibration's. Replies with one Calibrated, or Failed
saying why."""

from __future__ import annotations

import glob
import math
import os
import time
import traceback

from engine.core.calibration import BF16_FLAGS, TRIAD_LLC_FACTOR, CalibrationPlan
from engine.core.protocol import Assign, Calibrated, Failed
from engine.worker.machine import _read as read_text
from engine.worker.machine import machine_facts, parse_cpu_flags

__all__ = ["calibrate", "gemm_sweep", "triad", "last_level_cache", "cpu_clock"]

# Flags the theoretical peak reads (engine.core.calibration.theoretical_peak)
_PEAK_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16")
_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30}
# Arrays when sysfs names no cache: 512 MiB each is 4x a last-level cache of up to 128 MiB,
# and the row's llc_source says the size was not read.
_FALLBACK_ARRAY_BYTES = 512 * 2**20
_TRIAD_SCALAR = 3.0


def _read(path: str) -> str | None:
    text = read_text(path)
    return text.strip() if text is not None else None


def last_level_cache(cpu: int, root: str = "/sys/devices/system/cpu") -> tuple[int | None, str]:
    """(bytes, where it was read) of the highest-level data or unified cache of this CPU."""
    best = None
    for d in glob.glob(f"{root}/cpu{cpu}/cache/index*"):
        level, kind, size = (_read(f"{d}/{n}") for n in ("level", "type", "size"))
        if not level or not size or kind == "Instruction":
            continue
        try:
            n = int(size[:-1]) * _UNITS[size[-1]] if size[-1] in _UNITS else int(size)
            key = (int(level), n)
        except ValueError:
            continue
        if best is None or key > best[0]:
            shared = _read(f"{d}/shared_cpu_list") or "?"
            best = (key, f"sysfs: L{level} {kind.lower()} {size}, shared by CPUs {shared}")
    if best is None:
        return None, "no cache sizes in sysfs"
    return best[0][1], best[1]


def cpu_clock(cpu: int) -> tuple[float | None, str | None]:
    """(MHz, where it came from): cpufreq's maximum where the kernel exposes it, else
    /proc/cpuinfo's "cpu MHz", which in a VM's guest is the host's nominal clock at best."""
    khz = _read(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/cpuinfo_max_freq")
    if khz and khz.isdigit():
        return int(khz) / 1000, "cpufreq cpuinfo_max_freq"
    for line in (_read("/proc/cpuinfo") or "").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "cpu MHz":
            try:
                return float(value), "/proc/cpuinfo cpu MHz: a guest's nominal clock at best"
            except ValueError:
                break
    return None, None


def _flags() -> tuple[str, ...]:
    return parse_cpu_flags(_read("/proc/cpuinfo") or "", _PEAK_FLAGS)


def gemm_sweep(torch, sizes, dtype, repeats: int, min_repeat_s: float,
               clock=time.perf_counter_ns) -> list[float]:
    """Per size n, the best of `repeats` GFLOP/s (2 n^3 FLOPs a call): each repeat times
    back-to-back calls lasting about min_repeat_s, so a small size is not one timer read."""
    out = []
    for n in sizes:
        a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
        c = torch.empty(n, n, dtype=dtype)
        torch.matmul(a, b, out=c)  # first call: oneDNN's kernel choice, pages touched
        t = clock()
        torch.matmul(a, b, out=c)
        one = max(clock() - t, 1)
        calls = max(1, math.ceil(min_repeat_s * 1e9 / one))
        best = 0.0
        for _ in range(repeats):
            t = clock()
            for _ in range(calls):
                torch.matmul(a, b, out=c)
            best = max(best, 2 * n ** 3 * calls / max(clock() - t, 1))  # FLOP/ns = GFLOP/s
        out.append(best)
        del a, b, c
    return out


def triad(torch, array_bytes: int, repeats: int, clock=time.perf_counter_ns) -> list[float]:
    """Each repeat's GB/s of a = b + s*c over fp64 arrays of array_bytes each (24 bytes an
    element: engine.core.calibration.TRIAD_BYTES_PER_ELEMENT), on the run's threads."""
    n = max(1, array_bytes // 8)
    a = torch.zeros(n, dtype=torch.float64)  # written, so every page is touched before timing
    b = torch.full((n,), 1.0, dtype=torch.float64)
    c = torch.full((n,), 2.0, dtype=torch.float64)
    torch.add(b, c, alpha=_TRIAD_SCALAR, out=a)
    out = []
    for _ in range(repeats):
        t = clock()
        torch.add(b, c, alpha=_TRIAD_SCALAR, out=a)
        out.append(24 * n / max(clock() - t, 1))  # bytes/ns = GB/s
    want = 1.0 + _TRIAD_SCALAR * 2.0
    if not (a[0].item() == a[n // 2].item() == a[-1].item() == want):  # as STREAM checks
        raise RuntimeError(f"triad: a = b + s*c gave {a[0].item()}, not {want}")
    return out


def _seconds(fn):
    t = time.perf_counter()
    return fn(), time.perf_counter() - t


def calibrate(assign: Assign, emit) -> None:
    """Measure per the Assign's plan and emit Calibrated (Failed with why on any error)."""
    run_id = assign.runs[0].run_id
    try:
        emit(_measure(run_id, CalibrationPlan.from_dict(assign.calibration)))
    except Exception as exc:  # a failure is data: the parent stores nothing and says why
        emit(Failed(run_id, "error", f"{type(exc).__name__}: {exc}", ended_at=time.time(),
                    traceback=traceback.format_exc()))


def _measure(run_id: str, plan: CalibrationPlan) -> Calibrated:
    import torch

    cpus = tuple(sorted(os.sched_getaffinity(0)))
    flags = _flags()
    mhz, mhz_source = cpu_clock(cpus[0])
    seconds = {}
    fp32, seconds["gemm_fp32"] = _seconds(lambda: gemm_sweep(
        torch, plan.sizes, torch.float32, plan.repeats, plan.min_repeat_s))
    bf16: list[float] = []
    absent = None
    if not any(f in flags for f in BF16_FLAGS):
        absent = (f"the CPU has none of {', '.join(BF16_FLAGS)}: torch would emulate bf16 "
                  "through fp32, which is no bf16 ceiling")
    else:
        bf16, seconds["gemm_bf16"] = _seconds(lambda: gemm_sweep(
            torch, plan.sizes, torch.bfloat16, plan.repeats, plan.min_repeat_s))
    llc, llc_source = last_level_cache(cpus[0])
    if plan.triad_mib is not None:
        array_bytes = plan.triad_mib * 2**20
        llc_source += f"; arrays of {plan.triad_mib} MiB as asked"
    elif llc:
        array_bytes = TRIAD_LLC_FACTOR * llc
    else:
        array_bytes = _FALLBACK_ARRAY_BYTES
    gbs, seconds["triad"] = _seconds(lambda: triad(torch, array_bytes, plan.triad_repeats))
    facts = machine_facts()
    return Calibrated(
        run_id, threads=torch.get_num_threads(), cpus=cpus,
        machine={"cores": facts.get("cores_used"), "cpu_flags": list(flags),
                 "cpu_mhz": mhz, "mhz_source": mhz_source},
        versions={"torch": torch.__version__}, sizes=tuple(plan.sizes), repeats=plan.repeats,
        fp32_gflops=tuple(fp32), bf16_gflops=tuple(bf16), bf16_absent=absent, llc_bytes=llc,
        llc_source=llc_source, triad_array_bytes=(array_bytes // 8) * 8,
        triad_gbs=tuple(gbs), seconds=seconds)
