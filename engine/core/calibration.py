"""The machine's measured ceilings (issue 28 part 1): what a calibration measures, how its
figures are counted, and the theoretical peak they are shown beside.

A calibration is run by a worker pinned like an inference run (engine/worker/calibrate.py,
Assign mode CALIBRATE) and stored per machine (systems row) and thread count
(store/calibrations.py, table `calibrations`). Three kinds, one stored row each:

- gemm_fp32, gemm_bf16: a square torch.matmul sweep over `sizes`; per size the best of
  `repeats` (a repeat times enough back-to-back calls to last `min_repeat_s`), counted as
  2 n^3 FLOPs a call; the peak is the largest per-size best (PEAK_HOW). bf16 only where the
  CPU has avx512_bf16 or amx_bf16 (BF16_FLAGS): elsewhere the row is stored absent with why.
- triad: STREAM's a = b + s * c over fp64 arrays each at least TRIAD_LLC_FACTOR x the
  last-level cache, best of `repeats`. Bytes are counted as STREAM counts them
  (TRIAD_BYTES_PER_ELEMENT: b and c read, a written; the write-allocate read of a is not
  counted), so the figure is STREAM's and a lower bound of the memory traffic.

Framework-free: the standard library and engine.core only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from engine.core.errors import UserError
from engine.core.limits import int_range

__all__ = ["CalibrationPlan", "KINDS", "GEMM_KINDS", "TRIAD", "UNITS", "BF16_FLAGS",
           "PEAK_HOW", "TRIAD_BYTES_PER_ELEMENT", "TRIAD_LLC_FACTOR", "TRIAD_HOW",
           "DEFAULT_SIZES", "SIZE_RANGE", "REPEATS_RANGE", "TRIAD_MIB_RANGE", "Theoretical",
           "theoretical_peak", "gemm_kind"]

GEMM_FP32, GEMM_BF16, TRIAD = "gemm_fp32", "gemm_bf16", "triad"
KINDS = (GEMM_FP32, GEMM_BF16, TRIAD)
GEMM_KINDS = (GEMM_FP32, GEMM_BF16)
UNITS = {GEMM_FP32: "GFLOP/s", GEMM_BF16: "GFLOP/s", TRIAD: "GB/s"}
# The CPU flags whose presence makes oneDNN run bf16 matmuls natively; without them torch
# emulates bf16 through fp32 and the figure would not be a bf16 ceiling.
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
PEAK_HOW = "largest per-size best of repeats (each repeat: back-to-back calls, 2 n^3 FLOPs each)"
TRIAD_BYTES_PER_ELEMENT = 24  # fp64: 8 bytes each of b and c read, a written (STREAM's count)
TRIAD_LLC_FACTOR = 4  # STREAM's rule: each array at least 4x the caches it could sit in
TRIAD_HOW = ("best of repeats of a = b + s*c on fp64 arrays, 24 bytes per element (STREAM's "
             "count: write-allocate traffic not counted)")
# A sweep that reaches the plateau at 2 threads in a few seconds: 4096^3 x 2 FLOPs is about
# 0.4 s a call at the ~330 GFLOP/s this kind of machine reaches in fp32.
DEFAULT_SIZES = (256, 512, 1024, 2048, 4096)
SIZE_RANGE = (8, 16384)
REPEATS_RANGE = (1, 50)
TRIAD_MIB_RANGE = (1, 65536)  # per array; None in a plan: TRIAD_LLC_FACTOR x the LLC


def gemm_kind(precision: str) -> str | None:
    """The GEMM ceiling a run of this precision is held against (None: none measured)."""
    return {"fp32": GEMM_FP32, "bf16": GEMM_BF16}.get(precision)


@dataclass(frozen=True)
class CalibrationPlan:
    """What one calibration measures. threads: the worker's intra-op threads (pinned to
    that many whole cores where the machine has more). triad_mib: each triad array's size
    (None: TRIAD_LLC_FACTOR x the last-level cache the worker reads from sysfs)."""

    threads: int
    sizes: tuple[int, ...] = DEFAULT_SIZES
    repeats: int = 5
    min_repeat_s: float = 0.05
    triad_mib: int | None = None
    triad_repeats: int = 10

    def validate(self, cores: int) -> "CalibrationPlan":
        """UserError naming the field and its range; the plan itself otherwise."""
        int_range("threads", self.threads, 1, cores, hint=" (the cores this process may use)")
        if not self.sizes:
            raise UserError("sizes: give at least one matrix size", field="sizes")
        for n in self.sizes:
            int_range("sizes", n, *SIZE_RANGE)
        int_range("repeats", self.repeats, *REPEATS_RANGE)
        int_range("triad_repeats", self.triad_repeats, *REPEATS_RANGE)
        if self.triad_mib is not None:
            int_range("triad_mib", self.triad_mib, *TRIAD_MIB_RANGE)
        if not 0 <= self.min_repeat_s <= 10:
            raise UserError(f"min_repeat_s: {self.min_repeat_s!r} is out of range; allowed: "
                            "number 0..10", field="min_repeat_s")
        return self

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "CalibrationPlan":
        return cls(**{**d, "sizes": tuple(d["sizes"])})


@dataclass(frozen=True)
class Theoretical:
    """A theoretical peak, or None with why; `how` states the formula and its assumptions."""

    figure: float | None
    how: str


# FLOPs per cycle per core, by the widest instructions the flags show. The number of FMA
# units per core is not in the flags: two is assumed (Intel Xeon Skylake-SP Gold/Platinum
# and later, AMD Zen 5); AMD Zen 4 runs a 512-bit FMA in two halves (half this), older
# Xeon Silver/Bronze have one 512-bit unit. So the figure is an assumption, stated.
_FP32_PER_CYCLE = (("avx512f", 64, "2 FMA units x 16 fp32 lanes (AVX-512) x 2"),
                   ("avx2", 32, "2 FMA units x 8 fp32 lanes (AVX2) x 2"))
_BF16_PER_CYCLE = (("amx_bf16", 2048, "AMX: 1024 bf16 multiply-adds a cycle (Sapphire "
                                      "Rapids' TMUL) x 2"),
                   ("avx512_bf16", 128, "2 FMA units x 32 bf16 pairs (VDPBF16PS) x 2"))


def theoretical_peak(kind: str, cores: int | None, mhz: float | None, mhz_source: str | None,
                     flags) -> Theoretical:
    """cores x GHz x FLOP per cycle, where the flags and clock allow; "unknown" with why
    otherwise. flags: every CPU flag the worker saw (any iterable of names)."""
    if kind == TRIAD:
        return Theoretical(None, "unknown: memory channels and their speed are not in /proc "
                                 "or /sys inside a guest")
    if not cores:
        return Theoretical(None, "unknown: the cores the calibration ran on are not known")
    if not mhz:
        return Theoretical(None, "unknown: the CPU's clock is not readable here")
    present = set(flags or ())
    table = _FP32_PER_CYCLE if kind == GEMM_FP32 else _BF16_PER_CYCLE
    for flag, per_cycle, why in table:
        if flag in present:
            ghz = mhz / 1000
            return Theoretical(cores * ghz * per_cycle,
                               f"{cores} cores x {ghz:.2f} GHz ({mhz_source}) x {per_cycle} "
                               f"FLOP/cycle ({why}; the FMA-unit count is assumed, not read)")
    return Theoretical(None, f"unknown: none of {', '.join(f for f, _, _ in table)} in the "
                             "CPU flags")
