"""Numeric precision as a dimension of a run (issue 28 part 6): which (framework, runtime)
runs fp32, bf16 and int8, why the others are refused, and the CPU flags bf16 needs.

Framework-free: the parent validates a spec here before anything is spawned, and the worker
reads the same flags for its machine facts (engine/worker/machine.py).
"""

from __future__ import annotations

from engine.core.errors import UserError
from engine.core.runtimes import ROWS, row

__all__ = ["TORCH_BF16", "PRECISIONS", "REDUCED", "SPEED_FLAGS", "BF16_FLAGS", "parse_cpu_flags",
           "cpu_flags",
           "precision_refusal", "check_precision", "supported_precisions"]

PRECISIONS = ("fp32", "bf16", "int8")
REDUCED = ("bf16", "int8")  # checked against fp32 by direction, with error figures stored

# The flags whose presence changes which kernels oneDNN, MKL and XNNPACK pick.
SPEED_FLAGS = ("avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16")
# bf16 arithmetic in hardware: without one of these, oneDNN and OpenVINO emulate bf16 with
# fp32 instructions plus conversions, slower than fp32: a bf16 figure would mislead.
BF16_FLAGS = ("avx512_bf16", "amx_bf16")

# torch runtimes that run bf16 on any CPU (AMX-bf16 CPUs natively); which runtime runs which
# precision, and why the others are refused, is each runtime's row (engine.core.runtimes).
TORCH_BF16 = tuple(r.name for r in ROWS if r.framework == "torch" and "bf16" in r.precisions
                   and not r.bf16_needs_flags)


def parse_cpu_flags(cpuinfo: str, wanted=SPEED_FLAGS) -> tuple[str, ...]:
    """The wanted flags (SPEED_FLAGS unless told) present in /proc/cpuinfo's first `flags`
    line, in wanted's order."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            present = set(value.split())
            return tuple(f for f in wanted if f in present)
    return ()


def cpu_flags(path: str = "/proc/cpuinfo") -> tuple[str, ...]:
    """This machine's SPEED_FLAGS (none where cpuinfo cannot be read)."""
    try:
        with open(path) as f:
            return parse_cpu_flags(f.read())
    except OSError:
        return ()


def supported_precisions(framework: str, runtime: str) -> tuple[str, ...]:
    r = row(framework, runtime)
    return r.precisions if r is not None else ("fp32",)


def precision_refusal(framework: str, runtime: str, precision: str, device: str = "cpu",
                      flags: tuple[str, ...] | None = None) -> str:
    """Why this runtime cannot run this precision here, or "" when it can."""
    if precision == "fp32":
        return ""
    r = row(framework, runtime)
    if r is None:
        return f"{framework} {runtime} has no {precision} path in this project"
    if r.refusal(precision):
        return r.refusal(precision)
    # torch's bf16 ran before this check existed, and runs (emulated) anywhere; the
    # runtimes added with it are refused where they would only emulate it.
    if precision == "bf16" and device == "cpu" and r.bf16_needs_flags:
        have = cpu_flags() if flags is None else flags
        if not any(f in have for f in BF16_FLAGS):
            return (f"this CPU has neither {' nor '.join(BF16_FLAGS)}: bf16 would be emulated "
                    "in fp32 instructions, slower than fp32")
    return ""


def check_precision(framework: str, runtime: str, precision: str, device: str = "cpu",
                    flags: tuple[str, ...] | None = None) -> None:
    """UserError naming the field, the reason and what this runtime allows."""
    if precision not in PRECISIONS:
        raise UserError(f"precision: unknown {precision!r}; allowed: {', '.join(PRECISIONS)}",
                        field="precision")
    why = precision_refusal(framework, runtime, precision, device, flags)
    if why:
        ok = [p for p in supported_precisions(framework, runtime)
              if not precision_refusal(framework, runtime, p, device, flags)]
        raise UserError(f"precision: {precision} is not supported by {framework} {runtime}: "
                        f"{why}; allowed for it here: {', '.join(ok)}", field="precision")
