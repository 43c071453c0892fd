"""A generation run's figures, derived from its raw readings (the worker sends readings; the
parent derives everything here, so a stored run can be derived again, differently).

Per timed call (a "rep") of B rows, prompt P, N output tokens, with its start, its end and
one reading per step (token_ns[k]: ns from the call's start until step k's tokens were seen):
- TTFT = first reading - start (a one-call runtime: its separate one-token call's time);
- E2E = end - start;
- TPOT = (E2E - TTFT) / (N - 1), vLLM's definition (the first token excluded);
- ITL = every gap between consecutive readings, pooled over the reps (absent without
  per-token readings);
- prefill tokens/s = B * P / TTFT; decode tokens/s = B * (N - 1) / (E2E - TTFT);
  output tokens/s = B * N / E2E.
Each is a distribution over the reps (ITL over its gaps): p50, p90 and p99 by linear
interpolation (type 7, engine.analysis.stats' percentile, which this package may not
import: engine/analysis reads the kinds), tokens/s as their median.

Framework-free: the parent, the tests and the dashboard derive with the same code.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["RepFigures", "rep_figures", "run_figures", "PERCENTILES"]

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class RepFigures:
    ttft_ns: float
    e2e_ns: float
    tpot_ns: float
    itl_ns: tuple[int, ...]
    prefill_tok_s: float
    decode_tok_s: float
    output_tok_s: float


def rep_figures(token_ns, e2e_ns: int, *, batch: int, prompt_len: int, output_len: int,
                ttft_ns: int | None = None) -> RepFigures:
    """One call's figures from its readings (ns since its start); ttft_ns: a one-call
    runtime's separately measured TTFT, used where token_ns is empty."""
    token_ns = tuple(int(t) for t in token_ns)
    if token_ns:
        ttft = token_ns[0]
    elif ttft_ns is not None:
        ttft = int(ttft_ns)
    else:
        raise ValueError("a call with neither per-token readings nor a measured TTFT")
    # A separately measured TTFT can exceed a short call's E2E on a noisy machine: the
    # decode time is then unknown, never negative.
    decode = max(e2e_ns - ttft, 0)
    gaps = tuple(b - a for a, b in zip(token_ns, token_ns[1:]))
    return RepFigures(
        ttft_ns=float(ttft), e2e_ns=float(e2e_ns), tpot_ns=decode / (output_len - 1),
        itl_ns=gaps, prefill_tok_s=batch * prompt_len / (ttft / 1e9) if ttft else 0.0,
        decode_tok_s=batch * (output_len - 1) / (decode / 1e9) if decode else 0.0,
        output_tok_s=batch * output_len / (e2e_ns / 1e9))


def _percentile(values, q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q, method="linear"))


def _pcts(values, scale: float = 1e6) -> dict:
    xs = list(values)
    return {p: (_percentile(xs, p) / scale if xs else None) for p in PERCENTILES}


def run_figures(reps: list[RepFigures]) -> dict:
    """The run's figures over its reps: {metric}_p{50,90,99}_ms for ttft, tpot, itl and e2e,
    and the median of prefill, decode and output tokens/s (generation_runs' columns)."""
    out = {}
    for name, values in (("ttft", [r.ttft_ns for r in reps]),
                         ("tpot", [r.tpot_ns for r in reps]),
                         ("itl", [g for r in reps for g in r.itl_ns]),
                         ("e2e", [r.e2e_ns for r in reps])):
        for p, v in _pcts(values).items():
            out[f"{name}_p{p}_ms"] = v
    for name in ("prefill_tok_s", "decode_tok_s", "output_tok_s"):
        out[name] = _percentile([getattr(r, name) for r in reps], 50) if reps else None
    return out
