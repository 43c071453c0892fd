"""Throughput on each catalog machine: measured where runs name that shape, else estimated.

A run that names its catalog shape (runs.machine_shape, `--machine-shape`) measured that
machine. Its figure there is the best split (intra-op threads x replicas) measured on the
shape, each split the median over its ok rounds on one machine (store.queries.
machine_throughput groups by shape and system), so two machines' runs are never averaged
into one figure.

A shape with no run gets an estimate, labelled as one with its assumption: the selected
(benchmark) machine's best split at the most physical cores it measured, divided by those
cores, times the target's physical cores. Physical cores, not vCPUs: a thread on a host with
2 threads per core is half a core (N threads = N / 2 cores), and a catalog machine's cores are
its vCPUs / its threads per core (threads_per_core).

A hypervisor may hide SMT: a guest can see each hyperthread as a core of its own and report
1 thread per core. An estimate scaled from a host that reported 1 thread per core, and was a
VM (or did not say: runs before workers recorded it), says so and gives the figure it would
be if those cores were hyperthreads, two to a core as on every x86 cloud shape with SMT: the
same throughput on half the cores is twice the throughput per core, so twice the estimate
(at most that on a target shape that runs one thread per core). No framework import here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.analysis.cost import (HOURS_PER_MONTH, Machine, cost_per_million, cpu_shapes,
                                  machines_needed, monthly_cost)

__all__ = ["threads_per_core", "physical_cores", "Split", "Basis", "Figure", "basis",
           "figure", "machine_rows", "fleet_rows", "machine_vs_machine", "contender_rows",
           "training_rows", "priced_shapes", "MEASURE_HINT"]

# How a user adds a measured machine: what the page says when fewer than two shapes have runs.
MEASURE_HINT = "python -m engine run ... --machine-shape NAME"


def threads_per_core(m: Machine) -> int:
    """Hardware threads per physical core of a catalog machine: its catalog row's column
    (prices/instances.csv, imported prices; engine.analysis.cost fills it from the shape's
    family only where a row does not carry it). A machine priced by hand is x86 with SMT."""
    return m.threads_per_core


def physical_cores(m: Machine) -> float:
    """An OCI machine's OCPUs (an OCPU is a physical core on x86 and Arm alike); otherwise
    its vCPUs / threads_per_core. A fraction only for a hand-priced odd vCPU count."""
    return float(m.ocpus) if m.ocpus else m.vcpus / threads_per_core(m)


def _num(value) -> float | None:
    """A database number, None for NULL (pandas hands NULLs over as None, NaN or pd.NA,
    which float() refuses)."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(out) else out


def _plural(n: float, word: str) -> str:
    return f"{n:g} {word}{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class Split:
    """One contender measured on one machine at one split: `replicas` workers of `threads`
    intra-op threads each, the median throughput and p99 over its ok rounds."""
    threads: int
    replicas: int
    throughput: float
    runs: int
    threads_per_core: int | None  # of the host it ran on; None: not recorded
    shape: str | None = None
    system_id: str | None = None
    p99_ms: float | None = None
    p99_samples: int | None = None  # the fewest timed samples behind a round's p99
    machine: str = ""  # the host's CPU model, for labels
    cores_used: int | None = None  # physical cores its workers were pinned to, counted
    arch: str | None = None  # the host's, from its systems row's platform (None: unknown)
    hypervisor: bool | None = None  # the host a VM (x86 cpuinfo flag); None: not recorded

    @property
    def cores(self) -> float:
        """Physical cores the split kept busy: as the worker counted them from /sys (2
        threads on SMT siblings are 1 core, on two cores 2); for runs recorded before it
        counted, threads / threads per core (unknown threads per core: 1 per thread)."""
        if self.cores_used:
            return float(self.cores_used)
        return self.threads * self.replicas / (self.threads_per_core or 1)

    @property
    def config(self) -> str:
        return f"{_plural(self.threads, 'thread')} x {_plural(self.replicas, 'replica')}"


@dataclass(frozen=True)
class Basis:
    """What one contender's figures come from: the splits of the selected machine (source)
    and the splits measured on catalog shapes (any machine that named its shape)."""
    source: tuple[Split, ...]
    measured: tuple[Split, ...]

    @property
    def best_source(self) -> Split | None:
        """The best split at the most cores the selected machine measured: the figure
        closest to a whole machine, with the replica split that served it best."""
        if not self.source:
            return None
        most = max(s.cores for s in self.source)
        return max((s for s in self.source if s.cores == most), key=_rank)

    @property
    def source_name(self) -> str:
        """The selected machine as labels name it: its catalog shape, else its CPU model."""
        shapes = {s.shape for s in self.source if s.shape}
        if len(shapes) == 1:
            return next(iter(shapes))
        return next((s.machine for s in self.source if s.machine), "the selected machine")

    @property
    def shapes(self) -> list[str]:
        return sorted({s.shape for s in self.measured})


def _rank(s: Split) -> tuple:
    return s.throughput, -s.cores, -s.replicas  # ties: the fewer cores, then fewer workers


def _split(r: dict) -> Split:
    tpc = _num(r.get("threads_per_core"))
    shape = r.get("machine_shape")
    return Split(threads=int(r["threads"]), replicas=int(_num(r.get("replicas")) or 1),
                 throughput=float(r["throughput"]), runs=int(r["runs"]),
                 threads_per_core=int(tpc) if tpc else None,
                 shape=shape if isinstance(shape, str) and shape else None,
                 system_id=r.get("system_id"), p99_ms=_num(r.get("p99_ms")),
                 p99_samples=int(n) if (n := _num(r.get("p99_samples"))) else None,
                 machine=r.get("cpu_model") if isinstance(r.get("cpu_model"), str) else "",
                 cores_used=int(c) if (c := _num(r.get("cores_used"))) else None,
                 arch=_arch(r.get("platform")), hypervisor=_flag(r.get("hypervisor")))


def _flag(value) -> bool | None:
    """A database boolean, None for NULL (pandas: None, NaN or pd.NA)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    try:
        return bool(value)
    except TypeError:  # pd.NA refuses bool()
        return None


def _arch(platform) -> str | None:
    """x86_64 or arm64 from a systems row's platform string (Linux-6.1-x86_64-with-...)."""
    if not isinstance(platform, str):
        return None
    if "x86_64" in platform or "amd64" in platform.lower():
        return "x86_64"
    if "aarch64" in platform or "arm64" in platform:
        return "arm64"
    return None


def basis(rows: list[dict]) -> Basis:
    """rows: store.queries.machine_throughput records of one contender configuration."""
    splits = [(bool(r["selected"]), _split(r)) for r in rows]
    return Basis(source=tuple(s for src, s in splits if src),
                 measured=tuple(s for _, s in splits if s.shape))


@dataclass(frozen=True)
class Figure:
    """A contender's throughput on one machine: measured there, or a labelled estimate."""
    throughput: float
    estimate: bool
    assumption: str  # "measured on <shape> (...)" or "estimate: ..."
    split: Split  # measured: the split on this shape; estimate: the source split scaled
    p99_ms: float | None  # measured only: an estimate says nothing about the tail
    p99_samples: int | None = None  # how many samples it rests on (flagged under 100)
    # an estimate from a host that may have shown hyperthreads as cores: the figure if so
    if_hyperthreads: float | None = None


def figure(b: Basis, m: Machine) -> Figure | None:
    """The best split measured on m's whole shape; else, when runs there used part of it,
    the best of them scaled to the shape's cores (an estimate: a machine is paid for whole);
    else the estimate from the selected machine's throughput per physical core; None when
    neither exists, and for an unmeasured Arm shape (the benchmark machine is x86: its
    per-core figure does not carry over to Arm)."""
    cores = physical_cores(m)
    on_shape = [s for s in b.measured if s.shape == m.shape]
    whole = [s for s in on_shape if s.cores >= cores]
    if whole:
        s = max(whole, key=_rank)
        return Figure(s.throughput, False,
                      f"measured on {m.shape} ({s.config}; median of "
                      f"{_plural(s.runs, 'run')})", s, s.p99_ms, s.p99_samples)
    if on_shape:
        s = max(on_shape, key=lambda s: (s.throughput / s.cores, -s.cores, -s.replicas))
        per_core = s.throughput / s.cores
        # the catalog row saying the shape runs one thread per core settles it
        alt, caveat = _smt_hidden(s, per_core * cores, m) if (
            m.threads_per_core > 1 or m.threads_inferred) else (None, "")
        return Figure(per_core * cores, True,
                      f"estimate: measured on {m.shape} on {s.cores:g} of its {cores:g} "
                      f"cores ({s.config}: {s.throughput:,.1f} samples/s, median of "
                      f"{_plural(s.runs, 'run')}), scaled to the whole machine at "
                      f"{per_core:,.1f} samples/s per core; assumes the other cores serve "
                      f"as many{caveat}", s, None, None, alt)
    s = b.best_source
    if s is None or m.arch != "x86_64" or s.arch not in (None, "x86_64"):
        return None  # per-core figures carry over between x86 machines only
    per_core = s.throughput / s.cores
    unknown = "" if s.threads_per_core else "; threads per core not recorded: 1 per thread"
    alt, caveat = _smt_hidden(s, per_core * cores, m)
    return Figure(per_core * cores, True,
                  f"estimate: {per_core:,.1f} samples/s per core from {b.source_name} "
                  f"(best split {s.config} at {_plural(s.cores, 'core')}{unknown}) scaled "
                  f"to {_plural(cores, 'core')}{caveat}", s, None, None, alt)


def _smt_hidden(s: Split, estimate: float, m: Machine) -> tuple[float | None, str]:
    """(the figure if the split's cores were hyperthreads, the sentence saying so) when its
    x86 host reported 1 thread per core and was a VM or did not say; (None, "") else."""
    if s.threads_per_core != 1 or s.hypervisor is False or s.arch not in (None, "x86_64"):
        return None, ""
    alt = 2 * estimate
    host = "a VM" if s.hypervisor else "a host that did not record whether it is a VM"
    bound = (", at most: this shape runs one thread per core"
             if threads_per_core(m) == 1 and not m.threads_inferred else "")
    return alt, (f"; the {_plural(s.cores, 'core')} counted (1 thread per core on {host}) "
                 f"may be hyperthreads of {_plural(s.cores / 2, 'core')}: if so the figure would be "
                 f"{alt:,.1f} samples/s (twice the throughput per core{bound})")


def _row(m: Machine, f: Figure, hours: float) -> dict:
    """One machine's cost row: the keys engine.present.charts.cost_bars reads, plus the
    split behind the figure."""
    return {"provider": m.provider, "shape": m.shape, "machine": m.label, "vcpus": m.vcpus,
            "cores": physical_cores(m), "memory_gb": m.memory_gb,
            "usd_per_hour": m.usd_per_hour,
            "throughput": f.throughput,
            "cost_per_million": cost_per_million(m.usd_per_hour, f.throughput),
            "monthly": monthly_cost(m.usd_per_hour, hours=hours), "estimate": f.estimate,
            "assumption": f.assumption, "config": f.split.config, "p99_ms": f.p99_ms,
            "secondary": m.secondary, "as_of": m.as_of,
            "threads_inferred": m.threads_inferred, "if_hyperthreads": f.if_hyperthreads}


def machine_rows(machines: list[Machine], b: Basis, *,
                 hours: float = HOURS_PER_MONTH) -> list[dict]:
    """Per machine with a figure: throughput, cost per 1 M inferences, monthly cost, and
    whether it was measured there or estimated (with the assumption)."""
    return [_row(m, f, hours) for m in machines if (f := figure(b, m)) is not None]


def fleet_rows(machines: list[Machine], b: Basis, request_rate: float, *,
               hours: float = HOURS_PER_MONTH, extras: dict[str, float] | None = None
               ) -> list[dict]:
    """Monthly cost of serving request_rate samples/s on each machine type, with optional
    per-provider extras (storage, egress) added, and each machine's memory: the closest
    vCPU counts of each provider differ in memory, and the price includes it."""
    extras = extras or {}
    rows = []
    for m in machines:
        f = figure(b, m)
        if f is None:
            continue
        n = machines_needed(request_rate, f.throughput)
        compute = monthly_cost(m.usd_per_hour, hours=hours, machines=n)
        extra = extras.get(m.provider, 0.0)
        rows.append({"machine": m.label, "provider": m.provider, "machines": n,
                     "memory_gb": m.memory_gb,
                     "compute": compute, "extras": extra, "total": compute + extra,
                     "estimate": f.estimate, "assumption": f.assumption})
    return rows


def machine_vs_machine(catalog: list[Machine], b: Basis, request_rate: float, *,
                       hours: float = HOURS_PER_MONTH) -> list[dict]:
    """The catalog machines this contender was measured on, side by side, cheapest per
    1 M inferences first: the best split's throughput and p99, cost per 1 M, and the
    monthly cost of serving request_rate samples/s. A shape measured on part of its cores
    only is scaled to the whole machine, and its configuration says so."""
    rows = []
    for m in catalog:
        if m.shape not in b.shapes:
            continue
        f = figure(b, m)
        n = machines_needed(request_rate, f.throughput)
        part = physical_cores(m)  # a split on part of the shape says so: scaled, an estimate
        config = f.split.config + (f" ({f.split.cores:g} of {part:g} cores; estimate "
                                   "scaled to the whole machine)" if f.estimate else "")
        rows.append({"machine": m.label, "configuration": config,
                     "runs": f.split.runs, "samples/s": f.throughput, "p99 ms": f.p99_ms,
                     "p99 samples": f.p99_samples,
                     "USD per 1 M": cost_per_million(m.usd_per_hour, f.throughput),
                     "machines": n,
                     "USD/month": monthly_cost(m.usd_per_hour, hours=hours, machines=n)})
    return sorted(rows, key=lambda r: (r["USD per 1 M"], r["machine"]))


def contender_rows(rows: list[dict], machine: Machine, *,
                   hours: float = HOURS_PER_MONTH) -> list[dict]:
    """Each contender (framework and runtime) on one machine, from machine_throughput
    records of one model and batch size; the row's machine is the contender's name."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["contender"], []).append(r)
    out = []
    for c, rs in sorted(groups.items()):
        f = figure(basis(rs), machine)
        if f is not None:
            out.append({**_row(machine, f, hours), "machine": c})
    return out


def training_rows(rows: list[dict], machines: list[Machine]) -> list[dict]:
    """Training priced like inference: per training configuration (model, contender, batch,
    data set) and machine, samples/s measured there or estimated, the seconds and USD of one
    of its epochs, and USD per 1 M training samples.

    rows: store.queries.machine_throughput records of the training kind."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:  # the image size too: a figure never takes its best from another size
        groups.setdefault((r["model"], r["contender"], r["batch_size"], r["dataset"],
                           r.get("image_size")), []).append(r)
    out = []
    for (model, contender, batch, dataset, _size), rs in groups.items():
        b = basis(rs)
        epoch = next((int(v) for r in rs if (v := _num(r["samples_per_epoch"]))), None)
        if epoch is None:  # runs that did not record their epoch's length: no epoch cost
            continue
        for row in machine_rows(machines, b):
            out.append({"model": model, "contender": contender, "batch_size": int(batch),
                        "dataset": dataset, "samples_per_epoch": epoch, **row,
                        "s_per_epoch": epoch / row["throughput"],
                        "usd_per_epoch": row["cost_per_million"] * epoch / 1e6})
    return out


def priced_shapes(catalog: list[Machine], measured: set[str]) -> list[Machine]:
    """What the pages price: the catalog's x86 CPU machines (an estimate from an x86
    benchmark machine carries over to them), then any other catalog machine that runs
    were measured on (an Arm shape with runs has a figure of its own)."""
    cpu = cpu_shapes(catalog)
    return cpu + [m for m in catalog if m not in cpu and m.shape in measured]
