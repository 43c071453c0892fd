"""Cloud cost from measured throughput, on a price catalog shipped as data (prices/*.csv).

Formulas (all in USD):
  cost per 1 M inferences = hourly price / (throughput [samples/s] x 3600) x 1e6
                            (training: per 1 M training samples, from samples/s per epoch)
  monthly cost            = hourly price x hours per month (730 by default) x machines
  machines for a rate     = ceil(request rate / throughput per machine), at least 1
                            (machines_needed: every bill, the Cost page's fleets and
                            break-even, the Deploy bills; engine.analysis.break_even builds
                            two choices' cost steps from it)
OCI Flex shapes are priced from unit rates: OCPUs x OCPU rate + GB x memory rate, so any
OCPU/memory combination can be priced. An OCPU is 2 vCPUs on OCI x86 and 1 vCPU on Ampere
A1. Which throughput a machine gets (measured on its shape, or an estimate scaled by
physical cores with its assumption stated) is engine.analysis.cost_machines. No framework
import here.
"""

from __future__ import annotations

import difflib

import csv
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

from engine.analysis.price_age import UNDATED, oldest
from engine.core.errors import UserError
from engine.core.paths import PRICES_DIR

__all__ = ["Machine", "UnitRate", "load_catalog", "validate_catalog", "cost_per_million",
           "monthly_cost", "machines_needed", "oci_flex_price", "vcpus_per_ocpu",
           "infer_arch", "infer_threads_per_core", "machine_from_dict",
           "egress_cost", "HOURS_PER_MONTH", "PRICES_DIR", "equivalents",
           "storage_egress", "cpu_shapes", "default_shape", "resolve_shape", "custom_machine",
           "oci_vs_aws", "at_memory", "FIRST_PARTY", "storage_egress_rates"]

HOURS_PER_MONTH = 730  # the providers' own convention (8,760 h / 12)
_DATE = re.compile(r"^(20\d{2}(-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?)?|undated)$")
# A source a buyer can read the figure in himself: the provider's own price list, page or
# API, named first (a saved offer file or price list imported with `prices import` is named
# so). Any other source is a third party's copy, and its row must say secondary.
FIRST_PARTY = re.compile(
    r"^(?:AWS Price List|OCI price list|(?:https?://)?(?:[\w-]+\.)*(?:oracle\.com|"
    r"amazonaws\.com|aws\.amazon\.com|azure\.microsoft\.com|prices\.azure\.com|"
    r"cloud\.google\.com|googleapis\.com)\b)", re.IGNORECASE)
# Free outbound transfer per month before the first priced tier, in GB.
EGRESS_FREE_GB = {"OCI": 10 * 1024, "AWS": 100, "Azure": 100, "GCP": 0}


@dataclass(frozen=True)
class UnitRate:
    provider: str
    item: str
    part: str
    unit: str
    usd: float
    source: str
    as_of: str
    note: str = ""
    secondary: bool = False  # taken from a third party's copy of the provider's list
    first_party: str = ""  # the provider's own list or API to check it in, and what we saw


@dataclass(frozen=True)
class Machine:
    provider: str
    region: str
    shape: str
    vcpus: int
    ocpus: int | None
    memory_gb: float
    accelerator: str
    accelerator_count: int
    usd_per_hour: float
    pricing: str  # "fixed" or "oci_flex" (derived from the unit rates below)
    ocpu_part: str
    memory_part: str
    price_basis: str
    source: str
    as_of: str
    secondary: bool  # taken from a third party's copy, not from the provider's own list
    arch: str  # "x86_64" or "arm64": a figure measured on one does not carry over to the other
    threads_per_core: int  # hardware threads per physical core its vCPUs count (1: no SMT)
    note: str = ""
    first_party: str = ""  # the provider's own list or API to check it in, and what we saw
    threads_inferred: bool = False  # threads_per_core guessed from the shape's name

    @property
    def label(self) -> str:
        return f"{self.provider} {self.shape}"



# Where a price row does not say (an older catalog file, an import that names no processor,
# a stored update from before these columns), its shape's family does: Arm families run one
# thread per core, and so do AWS's 7th-generation AMD shapes (m7a, c7a, r7a, hpc7a) and
# GCP's Tau T2D; every other x86 cloud shape exposes a core's two hardware threads as two
# vCPUs (on OCI one OCPU is one core, two vCPUs), except AWS's HPC shapes (hpc6a, hpc6id,
# hpc7a), which run with SMT off. A row filled this way says so (threads_inferred).
_ARM_SHAPE = re.compile(
    r"Graviton|Ampere|Axion|\.A[12]\.|"                        # named, OCI Ampere A1/A2
    r"^(?:[a-z]+\d+g[a-z]*|a1)\.|"                              # AWS: m6gd, c7gn, r8g, a1
    r"^(?:t2a|c4a|n4a)-|"                                       # GCP Arm: Tau T2A, Axion
    r"^Standard_[A-Z]+\d+[a-z]*p[a-z]*_v\d", re.IGNORECASE)     # Azure Cobalt/Ampere: D8ps_v5
_ONE_THREAD_X86 = re.compile(r"^(?:[a-z]+7a\.|hpc\d+[a-z]*\.|t2d-)")


def infer_arch(provider: str, shape: str) -> str:
    """x86_64 or arm64 from a shape's family, for a row that does not say."""
    return "arm64" if _ARM_SHAPE.search(shape) else "x86_64"


def infer_threads_per_core(provider: str, shape: str, arch: str) -> int:
    """Hardware threads per core from a shape's family, for a row that does not say."""
    return 1 if arch == "arm64" or _ONE_THREAD_X86.match(shape) else 2


def machine_from_dict(d: dict) -> Machine:
    """A Machine from a stored or parsed row, arch and threads per core filled from the
    shape's family where the row does not carry them (updates stored before the columns)."""
    arch = d.get("arch") or infer_arch(d["provider"], d["shape"])
    inferred = d.get("threads_inferred", False) or not d.get("threads_per_core")
    tpc = d.get("threads_per_core") or infer_threads_per_core(d["provider"], d["shape"], arch)
    return Machine(**{**d, "arch": arch, "threads_per_core": int(tpc),
                      "threads_inferred": bool(inferred)})


def vcpus_per_ocpu(shape: str) -> int:
    """Ampere A1 OCPUs are single-threaded cores; x86 OCPUs are two hardware threads."""
    return 1 if ".A1." in shape or "Ampere" in shape else 2


def oci_flex_price(ocpu_rate: float, memory_rate: float, ocpus: float, memory_gb: float) -> float:
    return ocpus * ocpu_rate + memory_gb * memory_rate


def _read(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def load_unit_rates(path: Path | None = None, overrides: list[UnitRate] = ()) -> dict[str, UnitRate]:
    rates = {}
    for r in _read(path or PRICES_DIR / "unit_rates.csv"):
        rates[r["part"] + "|" + r["item"]] = UnitRate(
            r["provider"], r["item"], r["part"], r["unit"], float(r["usd"]), r["source"],
            r["as_of"], r.get("note", ""), secondary=r.get("secondary") == "yes",
            first_party=r.get("first_party", ""))
    by_part = {}
    for key, rate in rates.items():
        by_part.setdefault(rate.part, rate)
    for o in overrides:  # imported price lists replace the shipped figure for their part
        by_part[o.part] = o
    return by_part


def load_catalog(path: Path | None = None, *, rates: dict[str, UnitRate] | None = None,
                 overrides: list[Machine] = ()) -> list[Machine]:
    """Shipped machines, OCI Flex prices derived from the unit rates, imported rows last
    (an imported row replaces the shipped one with the same provider, region and shape)."""
    rates = rates if rates is not None else load_unit_rates()
    machines: dict[tuple, Machine] = {}
    for r in _read(path or PRICES_DIR / "instances.csv"):
        m = Machine(
            provider=r["provider"], region=r["region"], shape=r["shape"], vcpus=int(r["vcpus"]),
            ocpus=int(r["ocpus"]) if r["ocpus"] else None, memory_gb=float(r["memory_gb"]),
            accelerator=r["accelerator"], accelerator_count=int(r["accelerator_count"]),
            usd_per_hour=float(r["usd_per_hour"]), pricing=r["pricing"],
            ocpu_part=r["ocpu_part"], memory_part=r["memory_part"],
            price_basis=r["price_basis"], source=r["source"], as_of=r["as_of"],
            secondary=r["secondary"] == "yes", note=r.get("note", ""),
            arch=r.get("arch") or infer_arch(r["provider"], r["shape"]),
            threads_per_core=int(r.get("threads_per_core") or 0),
            first_party=r.get("first_party", ""))
        if not m.threads_per_core:
            m = replace(m, threads_per_core=infer_threads_per_core(m.provider, m.shape, m.arch),
                        threads_inferred=True)
        if m.pricing == "oci_flex":
            o, g = rates.get(m.ocpu_part), rates.get(m.memory_part)
            if o is None or g is None:
                raise UserError(f"price catalog: {m.shape} needs unit rates {m.ocpu_part} and "
                                f"{m.memory_part}; prices/unit_rates.csv lacks one",
                                field="catalog")
            m = replace(m, usd_per_hour=round(oci_flex_price(o.usd, g.usd, m.ocpus, m.memory_gb), 6),
                        price_basis=f"list PAYG: {m.ocpus} OCPU x {o.usd:g} + {m.memory_gb:g} GB "
                                    f"x {g.usd:g} (parts {o.part}/{g.part})",
                        source=o.source if o.source == g.source else f"{o.source}; {g.source}",
                        # as old as its older rate: an OCPU rate refreshed yesterday does
                        # not make last year's memory rate new
                        as_of=oldest(o.as_of, g.as_of), secondary=o.secondary or g.secondary,
                        first_party=o.first_party if o.first_party == g.first_party
                        else f"{o.first_party}; {g.first_party}")
        machines[(m.provider, m.region, m.shape)] = m
    for m in overrides:
        machines[(m.provider, m.region, m.shape)] = m
    return list(machines.values())


def validate_catalog(machines: list[Machine], rates: dict[str, UnitRate]) -> list[str]:
    """Problems that make a figure unusable: missing or negative prices, no source or date
    (a date the source does not give is written "undated"), no first-party source to check
    it against, or a third party's copy not marked secondary."""
    problems = []
    for m in machines:
        if not (m.usd_per_hour > 0) or math.isnan(m.usd_per_hour):
            problems.append(f"{m.label}: usd_per_hour {m.usd_per_hour!r} must be positive")
        if m.vcpus <= 0:
            problems.append(f"{m.label}: vcpus {m.vcpus} must be positive")
        if not m.source.strip():
            problems.append(f"{m.label}: no source")
        if not _DATE.match(m.as_of or ""):
            problems.append(f"{m.label}: as_of {m.as_of!r} is not a date (YYYY[-MM[-DD]] "
                            f"or {UNDATED!r})")
        problems += _provenance(m.label, m.source, m.secondary, m.first_party)
    for r in rates.values():
        if not (r.usd >= 0):
            problems.append(f"unit rate {r.part} ({r.item}): usd {r.usd!r} must be >= 0")
        if not r.source.strip() or not _DATE.match(r.as_of or ""):
            problems.append(f"unit rate {r.part} ({r.item}): needs a source and a date")
        problems += _provenance(f"unit rate {r.part} ({r.item})", r.source, r.secondary,
                                r.first_party)
    return problems


def _provenance(label: str, source: str, secondary: bool, first_party: str) -> list[str]:
    out = []
    if not first_party.strip() and not FIRST_PARTY.search(source):
        out.append(f"{label}: names no first-party source (the provider's price list or "
                   "API) to check the price against")
    if not secondary and not FIRST_PARTY.search(source):
        out.append(f"{label}: source {source!r} is a third party's copy; mark it secondary")
    return out


def cost_per_million(usd_per_hour: float, throughput: float) -> float:
    if throughput <= 0:
        raise UserError(f"throughput: {throughput} must be positive", field="throughput")
    return usd_per_hour / (throughput * 3600.0) * 1e6


def monthly_cost(usd_per_hour: float, *, hours: float = HOURS_PER_MONTH, machines: int = 1) -> float:
    return usd_per_hour * hours * machines


def machines_needed(request_rate: float, throughput_per_machine: float) -> int:
    """Whole machines serving request_rate: k for any rate in ((k-1) x, k x] of a
    machine's throughput x. A billionth of a machine is forgiven, so float noise (3 x 0.1
    samples/s over 0.1 a machine) does not buy a machine."""
    if throughput_per_machine <= 0:
        raise UserError("throughput: must be positive to size a fleet", field="throughput")
    return max(1, math.ceil(request_rate / throughput_per_machine - 1e-9))


def equivalents(catalog: list[Machine], vcpus: int, *, arch: str = "x86_64",
                cpu_only: bool = True) -> list[Machine]:
    """Per provider, the machine of the same architecture whose vCPU count is closest to
    `vcpus` (cheapest on ties). Memory is not matched: each price includes its machine's
    own memory, which the views that compare them show beside each figure."""
    best: dict[str, Machine] = {}
    for m in catalog:
        if (cpu_only and m.accelerator_count) or m.arch != arch:
            continue
        cur = best.get(m.provider)
        key = (abs(m.vcpus - vcpus), m.usd_per_hour)
        if cur is None or key < (abs(cur.vcpus - vcpus), cur.usd_per_hour):
            best[m.provider] = m
    return [best[p] for p in sorted(best)]


def egress_cost(provider: str, gb_per_month: float, usd_per_gb: float) -> float:
    """Outbound transfer per month after the provider's free allowance (first tier price)."""
    return max(0.0, gb_per_month - EGRESS_FREE_GB.get(provider, 0)) * usd_per_gb


def storage_egress_rates(rates: dict[str, UnitRate], *, storage_gb: float,
                         egress_gb: float) -> list[UnitRate]:
    """The unit rates storage_egress() uses for these amounts (what a view that shows its
    figure must date)."""
    parts = (["B91961", "B91962", "JG3KUJMBRGHV3N8G"] if storage_gb else []) + \
        (["B88327"] if egress_gb else [])
    used = [rates[p] for p in parts if p in rates]
    return used + [r for r in rates.values() if egress_gb and r.provider == "AWS"
                   and r.item.startswith("Data transfer out to internet")][:1]


def storage_egress(rates: dict[str, UnitRate], *, storage_gb: float,
                   egress_gb: float) -> dict[str, float]:
    """Monthly block storage and outbound transfer for OCI and AWS, from the unit rates
    (OCI: Block Volume + Balanced performance units, first 10 TB egress free; AWS: EBS gp3,
    first 100 GB egress free)."""
    def usd(part):
        r = rates.get(part)
        return r.usd if r is not None else 0.0
    aws_egress = next((r.usd for r in rates.values() if r.provider == "AWS" and
                       r.item.startswith("Data transfer out to internet")), 0.0)
    oci = storage_gb * (usd("B91961") + 10 * usd("B91962")) + \
        egress_cost("OCI", egress_gb, usd("B88327"))
    aws = storage_gb * usd("JG3KUJMBRGHV3N8G") + egress_cost("AWS", egress_gb, aws_egress)
    return {"OCI": oci, "AWS": aws}


# -- what the Cost and Training pages show, computed here so the pages only draw ----------

def resolve_shape(name: str, machines: list[Machine]) -> Machine:
    """The catalog machine a shape name names, as `prices list` prints it (case and spacing
    aside; a parenthesised note may be left off when that leaves one machine). A name the
    catalog does not know is refused with the closest names it does."""
    def norm(text: str) -> str:
        return " ".join(text.lower().split())

    want = norm(name)
    for key in (lambda m: norm(m.shape), lambda m: norm(m.shape).split(" (")[0]):
        found = {m.shape: m for m in machines if key(m) == want}
        if len(found) == 1:
            return next(iter(found.values()))
    close = difflib.get_close_matches(name.strip(), [m.shape for m in machines], n=4,
                                      cutoff=0.4)
    raise UserError(f"machine_shape: {name.strip()!r} is not a shape of the price catalog; "
                    + (f"closest: {'; '.join(close)}; " if close else "")
                    + "allowed: a shape as `python -m engine prices list` prints it",
                    field="machine_shape")


def cpu_shapes(catalog: list[Machine]) -> list[Machine]:
    """The catalog's x86 CPU machines: what a measurement on this (x86) machine prices."""
    return [m for m in catalog if not m.accelerator_count and m.arch == "x86_64"]


def default_shape(shapes: list[Machine]) -> int:
    """Index of the machine the pages preselect: OCI with 16 OCPUs (the size users compare
    with AWS's 32-vCPU machines), else the first."""
    return next((i for i, m in enumerate(shapes) if m.provider == "OCI" and m.ocpus == 16), 0)


def custom_machine(usd_per_hour: float, vcpus: int) -> Machine:
    """A machine the user prices by hand: no provider, no source but the user."""
    return Machine(provider="custom", region="-", shape=f"custom {vcpus} vCPUs",
                   vcpus=int(vcpus), ocpus=None, memory_gb=0.0, accelerator="none",
                   accelerator_count=0, usd_per_hour=float(usd_per_hour), pricing="fixed",
                   ocpu_part="", memory_part="", price_basis="entered by you", source="you",
                   as_of="", secondary=False, arch="x86_64", threads_per_core=2,
                   threads_inferred=True)


def at_memory(m: Machine, memory_gb: float, rates: dict[str, UnitRate]) -> Machine:
    """An OCI Flex machine priced at memory_gb (its OCPUs kept) from the unit rates, its shape
    name saying the memory; any other machine (a fixed shape bundles its memory), or a Flex
    row whose rates are missing, as it is."""
    if m.pricing != "oci_flex" or m.memory_gb == memory_gb or not m.ocpus:
        return m
    o, g = rates.get(m.ocpu_part), rates.get(m.memory_part)
    if o is None or g is None:
        return m
    named = _MEMORY_IN_SHAPE.sub(f"/{memory_gb:g} GB", m.shape, count=1)
    return replace(m, memory_gb=float(memory_gb),
                   shape=named if named != m.shape else f"{m.shape} at {memory_gb:g} GB",
                   usd_per_hour=round(oci_flex_price(o.usd, g.usd, m.ocpus, memory_gb), 6),
                   price_basis=f"list PAYG: {m.ocpus} OCPU x {o.usd:g} + {memory_gb:g} GB x "
                               f"{g.usd:g} (parts {o.part}/{g.part}; memory matched)")


_MEMORY_IN_SHAPE = re.compile(r"/\d+(?:\.\d+)? GB")


def oci_vs_aws(shapes: list[Machine], rates: dict[str, UnitRate],
               hours: float = HOURS_PER_MONTH) -> dict:
    """The question users start from: a 16-OCPU OCI x86 machine (32 vCPUs) against the
    32-vCPU AWS x86 machines, per month at catalog prices, like with like: each OCI Flex
    shape priced at the memory of the cheapest AWS machine (the unit rates price any
    memory), a fixed OCI shape only when it has at least that memory. rows: one per
    machine; cheapest OCI and AWS machine, the memory they are compared at, and the ratio
    of their prices when both exist."""
    aws = [m for m in shapes if m.provider == "AWS" and m.vcpus == 32]
    pick = min(aws, key=lambda m: m.usd_per_hour) if aws else None
    oci = [m for m in shapes if m.provider == "OCI" and m.ocpus == 16]
    if pick is not None:
        oci = [at_memory(m, pick.memory_gb, rates) for m in oci]
    rows = [{"machine": m.label, "vCPUs": m.vcpus, "memory GB": m.memory_gb,
             "USD/hour": m.usd_per_hour, "USD/month": monthly_cost(m.usd_per_hour, hours=hours),
             "price as of": m.as_of} for m in oci + aws]
    out = {"rows": rows, "oci": None, "aws": pick, "memory_gb": None, "ratio": None}
    like = [m for m in oci if pick is not None and m.memory_gb >= pick.memory_gb]
    if like and pick is not None:
        out["oci"] = min(like, key=lambda m: m.usd_per_hour)
        out["memory_gb"] = pick.memory_gb
        out["ratio"] = pick.usd_per_hour / out["oci"].usd_per_hour
    return out
