"""Cost at a latency bound (issue 27, part 4): per 1 M inferences at the highest rate that
met the bound, beside per 1 M flat out, and the monthly bill for a target request rate.

  cost per 1 M at the bound = hourly price / (max QPS x samples a query x 3600) x 1e6
  cost per 1 M flat out     = hourly price / (flat-out samples/s x 3600) x 1e6
  monthly bill              = ceil(target rate / rate one machine serves within the bound)
                              x hourly price x 730 h (whole machines)

Machines are priced whole: a configuration measured on the priced shape that fills it
(replicas x threads on its physical cores) is that shape's figure; one that used part of it
is scaled to its physical cores, and one from another machine is scaled per core, each an
estimate labelled with its assumption (engine.analysis.cost_machines.figure, the rule every
cost figure follows).

Flat out (choose_flat_out, one rule for the CLI's search and the Deploy page's): the search's own
Offline run, on the machine the search ran on, is measured. Without one, this machine's
best closed-loop run of the configuration (one replica, batch up to the max batch) times
the replicas is an estimate that names its run: a closed loop is not LoadGen's Offline
scenario, and replicas need not scale. A figure from another machine is never used: the
best run of any machine in the store (an import, a fleet node) is not this one's. Pure:
figures in, figures out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from engine.analysis.cost import (HOURS_PER_MONTH, Machine, cost_per_million,
                                  machines_needed, monthly_cost)
from engine.analysis.cost_machines import Basis, Figure, Split, figure
from engine.core.errors import UserError
from engine.core.limits import SERVE_RATE_RANGE, float_range

__all__ = ["ServingCost", "FlatOut", "choose_flat_out", "serving_split", "serving_cost"]


@dataclass(frozen=True)
class ServingCost:
    machine: Machine
    at_bound: Figure  # the rate one whole machine serves within the bound
    flat_out: Figure | None  # its rate with no bound (Offline / closed loop); None: unknown
    per_million_at_bound: float
    per_million_flat_out: float | None
    target_rps: float | None
    machines: int | None  # whole machines serving target_rps within the bound
    monthly: float | None  # their bill (USD) for `hours`
    machines_flat_out: int | None  # the same rate flat out: fewer machines, over the bound
    monthly_flat_out: float | None
    hours: float = HOURS_PER_MONTH


@dataclass(frozen=True)
class FlatOut:
    """The configuration's samples/s with no bound, and where that figure comes from."""
    split: Split  # the whole configuration (every replica), as a split to price
    source: str  # in words: which run, on which machine
    estimate: bool  # False: the search's own Offline run


def choose_flat_out(split: Callable[[float], Split], *, offline: tuple[str, float] | None,
             closed: tuple[str, float, int] | None = None, replicas: int = 1
             ) -> FlatOut | None:
    """The one rule for flat out. offline: (run id, samples/s) of the search's ok Offline
    run; closed: (run id, samples/s, batch) of the best ok closed-loop run of the
    configuration on the machine the search ran on (never another machine's); split: the
    search's configuration at a rate. None when neither exists."""
    if offline is not None and offline[1] and offline[1] > 0:
        return FlatOut(split(offline[1]), f"this search's Offline run {offline[0]} on this "
                                          "machine", False)
    if closed is not None and closed[1] and closed[1] > 0:
        run_id, rate, batch = closed
        times = f" x {replicas} replicas" if replicas > 1 else ""
        return FlatOut(split(rate * replicas),
                       f"estimate: no Offline run in this search; closed-loop run {run_id} on "
                       f"this machine ({rate:,.1f} samples/s at batch {batch}, one replica)"
                       f"{times}", True)
    return None


def serving_split(rate: float, *, threads: int, threads_per_core: int | None,
                  cores_used: int | None, shape: str | None, arch: str | None = "x86_64",
                  replicas: int = 1, machine: str = "",
                  hypervisor: bool | None = None) -> Split:
    """One serving configuration's figure (samples/s) as cost_machines prices a split: its
    threads x replicas, the physical cores its worker was pinned to, the shape it ran on,
    and whether that host was a VM (the x86 `hypervisor` flag its worker recorded; None:
    not recorded), which says whether cores counted at 1 thread per core may be
    hyperthreads."""
    if not rate > 0:
        raise UserError(f"throughput: {rate!r} must be positive to price", field="throughput")
    return Split(threads=threads, replicas=replicas, throughput=rate, runs=1,
                 threads_per_core=threads_per_core, shape=shape, cores_used=cores_used,
                 arch=arch, machine=machine, hypervisor=hypervisor)


def _figure(split: Split, m: Machine) -> Figure | None:
    return figure(Basis(source=(split,), measured=(split,) if split.shape else ()), m)


def _flat_figure(flat: FlatOut, m: Machine) -> Figure | None:
    """The flat-out figure on m, its basis naming the run it comes from; an estimate when
    either the run is not the search's Offline run or m is priced by scaling."""
    f = _figure(flat.split, m)
    if f is None:
        return None
    how = f.assumption.removeprefix("estimate: ")
    if flat.estimate:
        return replace(f, estimate=True, assumption=f"{flat.source}; {how}")
    return replace(f, assumption=("estimate: " if f.estimate else "") + f"{flat.source}, {how}")


def serving_cost(m: Machine, at_bound: Split, flat_out: FlatOut | None = None, *,
                 target_rps: float | None = None,
                 hours: float = HOURS_PER_MONTH) -> ServingCost | None:
    """The bound's cost on machine m; None where m cannot be priced from these figures (an
    Arm shape nobody measured: an x86 per-core figure does not carry over). flat_out: the
    choose_flat_out() figure, or None."""
    if target_rps is not None:
        float_range("target_rps", target_rps, *SERVE_RATE_RANGE)
    bound = _figure(at_bound, m)
    if bound is None:
        return None
    flat = _flat_figure(flat_out, m) if flat_out is not None else None
    n = machines_needed(target_rps, bound.throughput) if target_rps else None
    n_flat = machines_needed(target_rps, flat.throughput) if target_rps and flat else None
    return ServingCost(
        machine=m, at_bound=bound, flat_out=flat,
        per_million_at_bound=cost_per_million(m.usd_per_hour, bound.throughput),
        per_million_flat_out=cost_per_million(m.usd_per_hour, flat.throughput) if flat
        else None,
        target_rps=target_rps, machines=n,
        monthly=monthly_cost(m.usd_per_hour, hours=hours, machines=n) if n else None,
        machines_flat_out=n_flat,
        monthly_flat_out=monthly_cost(m.usd_per_hour, hours=hours, machines=n_flat)
        if n_flat else None, hours=hours)
