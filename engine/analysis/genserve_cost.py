"""What a token costs when a language model is served (issue 38): USD per 1 M output tokens
and per 1 M input tokens at the highest request rate that met both bounds (p99 TTFT and p99
TPOT, LoadGen VALID) and flat out (the same engine's Offline test: no bound), and the
monthly bill in whole machines for a target of output tokens/s or requests/s, on every
priced machine.

  per 1 M output tokens at the bound = hourly price / (output tokens/s at the max rate x
                                       3600) x 1e6
  per 1 M input tokens at the bound  = hourly price / (prompt tokens/s at the max rate x
                                       3600) x 1e6 (the same machine-hours, counted per
                                       prompt token: not to be added to the output figure)
  machines for a target              = ceil(target / what one machine serves at the bound)

Machines are priced whole, by the rule every cost figure follows
(engine.analysis.cost_machines.figure through serving_cost.serving_split): measured on the
priced shape when the test ran there and filled it, else scaled per physical core from the
machine it ran on, an estimate that says so. Pure: figures in, rows out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.analysis.cost import HOURS_PER_MONTH, Machine, cost_per_million, monthly_cost
from engine.analysis.cost_machines import Basis, figure, physical_cores
from engine.analysis.generation_cost import per_token_assumption
from engine.analysis.serving_cost import serving_split

__all__ = ["TokenRates", "token_serving_rows", "cheapest_per_provider"]


@dataclass(frozen=True)
class TokenRates:
    """One configuration's rates on the machine it ran on: at the bound (the search's max
    rate's test) and flat out (None: no Offline test), and how it ran (to price it)."""
    output_tok_s: float
    input_tok_s: float
    requests_per_s: float
    threads: int
    threads_per_core: int | None
    cores_used: int | None
    shape: str | None
    arch: str | None = "x86_64"
    hypervisor: bool | None = None
    flat_output_tok_s: float | None = None
    flat_input_tok_s: float | None = None
    replicas: int = 1


def _on(rate: float, r: TokenRates, m: Machine):
    split = serving_split(rate, threads=r.threads, threads_per_core=r.threads_per_core,
                          cores_used=r.cores_used, shape=r.shape, arch=r.arch,
                          replicas=r.replicas, hypervisor=r.hypervisor)
    return figure(Basis(source=(split,), measured=(split,) if split.shape else ()), m)


def token_serving_rows(machines: list[Machine], r: TokenRates, *,
                       target_tok_s: float | None = None, target_rps: float | None = None,
                       hours: float = HOURS_PER_MONTH) -> list[dict]:
    """Per machine that can be priced from r: its figures at the bound and flat out, USD per
    1 M output and input tokens, and the bill for the target (output tokens/s, else
    requests/s) in whole machines."""
    rows = []
    for m in machines:
        out = _on(r.output_tok_s, r, m)
        if out is None:
            continue
        scale = out.throughput / r.output_tok_s  # the machine's share of this one's
        flat = (_on(r.flat_output_tok_s, r, m) if r.flat_output_tok_s else None)
        per_machine_rps = r.requests_per_s * scale
        machines_n = (math.ceil(target_tok_s / out.throughput) if target_tok_s else
                      math.ceil(target_rps / per_machine_rps) if target_rps else None)
        rows.append({
            "provider": m.provider, "shape": m.shape, "machine": m.label,
            "vcpus": m.vcpus, "cores": physical_cores(m), "usd_per_hour": m.usd_per_hour,
            "as_of": m.as_of, "output_tok_s": out.throughput,
            "input_tok_s": r.input_tok_s * scale, "requests_per_s": per_machine_rps,
            "usd_per_m_output": cost_per_million(m.usd_per_hour, out.throughput),
            "usd_per_m_input": cost_per_million(m.usd_per_hour, r.input_tok_s * scale),
            "flat_output_tok_s": flat.throughput if flat else None,
            "usd_per_m_output_flat": (cost_per_million(m.usd_per_hour, flat.throughput)
                                      if flat else None),
            "usd_per_m_input_flat": (cost_per_million(
                m.usd_per_hour, r.flat_input_tok_s * flat.throughput / r.flat_output_tok_s)
                if flat and r.flat_input_tok_s else None),
            "machines": machines_n,
            "monthly": (monthly_cost(m.usd_per_hour, hours=hours, machines=machines_n)
                        if machines_n else None),
            "estimate": out.estimate,
            "assumption": per_token_assumption(out, "output tokens/s"),
            "secondary": m.secondary})
    return rows


def cheapest_per_provider(rows: list[dict]) -> list[dict]:
    """The row with the lowest USD per 1 M output tokens at the bound, per provider,
    cheapest first (a provider's secondary-source prices only where it has no other)."""
    best: dict[str, dict] = {}
    for row in sorted(rows, key=lambda r: (r["secondary"], r["usd_per_m_output"])):
        best.setdefault(row["provider"], row)
    return sorted(best.values(), key=lambda r: r["usd_per_m_output"])
