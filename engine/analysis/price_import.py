"""Parse saved price lists into catalog updates; nothing is written until all of it parses.

- OCI price list API response: items[].partNumber with
  currencyCodeLocalizations[].prices[] {model, value} (and, for tiered parts, rangeMin):
  updates unit rates by part number, which reprices every OCI Flex shape built on them.
- AWS Price List offer file (AmazonEC2): products{sku: {productFamily, attributes{
  instanceType, vcpu, memory, regionCode, operatingSystem, tenancy, preInstalledSw, ...}}}
  and terms.OnDemand[sku][offer].priceDimensions[*].pricePerUnit.USD: one machine per
  Linux, shared-tenancy, no-preinstalled-software instance type and region; its
  architecture from physicalProcessor/processorArchitecture (Graviton, Arm), else from the
  shape's family.
- Threads per core: the offer's attributes name vCPUs, processor, clock and memory but no
  core count (vcpu, physicalProcessor, processorArchitecture "64-bit", clockSpeed, ...), so
  they come from EC2's own description of the instance types: a saved
  `aws ec2 describe-instance-types` response (InstanceTypes[].VCpuInfo {DefaultVCpus,
  DefaultCores, DefaultThreadsPerCore}, ProcessorInfo.SupportedArchitectures), passed
  beside the offer. An hpc6a.48xlarge is 96 vCPUs, 96 cores, 1 thread per core there. A
  machine the description does not name gets its threads per core from its family (1 on
  Arm, AWS's 7th-generation AMD and HPC shapes, else 2) and is marked threads_inferred.
Both keep the file's own source and date.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from engine.analysis.cost import Machine, UnitRate, infer_arch, infer_threads_per_core
from engine.core.errors import UserError

__all__ = ["parse_price_file", "parse_instance_types", "InstanceCpu"]


@dataclass(frozen=True)
class InstanceCpu:
    """One instance type's CPU as EC2 describes it (DescribeInstanceTypes' VCpuInfo)."""
    vcpus: int
    cores: int
    threads_per_core: int
    arch: str | None  # x86_64 or arm64 when SupportedArchitectures names one


def _fail(path, why):
    raise UserError(f"file: {path} is not a usable price list: {why}; the catalog is "
                    "unchanged", field="file")


def parse_price_file(path: str | Path, *, as_of: str | None = None,
                     instance_types: dict[str, InstanceCpu] | None = None
                     ) -> tuple[str, list[UnitRate], list[Machine]]:
    """(kind, unit-rate updates, machine updates) or UserError naming what is wrong.
    instance_types: parse_instance_types() of the AWS machines' description, if saved."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"file: {path} does not exist", field="file")
    try:
        doc = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        _fail(path, f"not JSON ({exc})")
    if isinstance(doc, dict) and isinstance(doc.get("items"), list):
        return "OCI price list", _parse_oci(path, doc, as_of), []
    if isinstance(doc, dict) and isinstance(doc.get("products"), dict) and "terms" in doc:
        return "AWS offer file", [], _parse_aws(path, doc, as_of, instance_types or {})
    _fail(path, "neither an OCI price list (items[]) nor an AWS offer file "
                "(products{} and terms{})")


def _date(text) -> str | None:
    m = re.match(r"(\d{4}-\d{2}-\d{2})", str(text or ""))
    return m.group(1) if m else None


def _parse_oci(path: Path, doc: dict, as_of: str | None) -> list[UnitRate]:
    when = as_of or _date(doc.get("lastUpdated")) or date.today().isoformat()
    out = []
    for i, item in enumerate(doc["items"]):
        part = item.get("partNumber") if isinstance(item, dict) else None
        if not part:
            _fail(path, f"items[{i}] has no partNumber")
        usd = [loc for loc in item.get("currencyCodeLocalizations") or []
               if loc.get("currencyCode") == "USD"]
        if not usd:
            continue  # another currency only: nothing to update
        prices = [p for p in usd[0].get("prices") or [] if p.get("model") == "PAY_AS_YOU_GO"]
        if not prices:
            _fail(path, f"items[{i}] ({part}) has no USD PAY_AS_YOU_GO price")
        # Tiered parts (egress: 0 for the free allowance, then a rate) are priced at their
        # highest tier, which is what the free allowance in engine.analysis.cost leaves to pay.
        price = max(prices, key=lambda p: float(p.get("rangeMin") or 0))
        try:
            value = float(price["value"])
        except (KeyError, TypeError, ValueError):
            _fail(path, f"items[{i}] ({part}) has no numeric value")
        if value < 0:
            _fail(path, f"items[{i}] ({part}) has a negative price {value}")
        out.append(UnitRate("OCI", item.get("displayName") or part, part,
                            item.get("metricName") or "", value,
                            f"OCI price list ({path.name})", when))
    if not out:
        _fail(path, "no item carries a USD price")
    return out


_MEM = re.compile(r"([\d.,]+)\s*GiB")


def _parse_aws(path: Path, doc: dict, as_of: str | None,
               described: dict[str, InstanceCpu]) -> list[Machine]:
    when = as_of or _date(doc.get("publicationDate")) or date.today().isoformat()
    version = doc.get("version", "?")
    on_demand = (doc.get("terms") or {}).get("OnDemand")
    if not isinstance(on_demand, dict):
        _fail(path, "terms.OnDemand is missing")
    out = []
    for sku, prod in doc["products"].items():
        a = (prod or {}).get("attributes") or {}
        if not a.get("instanceType") or (prod.get("productFamily") not in
                                         (None, "Compute Instance")):
            continue
        if a.get("operatingSystem", "Linux") != "Linux" or \
                a.get("tenancy", "Shared") != "Shared" or \
                a.get("preInstalledSw", "NA") != "NA" or \
                a.get("capacitystatus", "Used") != "Used":
            continue
        usd = None
        for offer in (on_demand.get(sku) or {}).values():
            for dim in (offer.get("priceDimensions") or {}).values():
                usd = (dim.get("pricePerUnit") or {}).get("USD")
        if usd is None:
            _fail(path, f"product {sku} ({a['instanceType']}) has no OnDemand USD price")
        try:
            price, vcpus = float(usd), int(a["vcpu"])
            mem = float(_MEM.search(a.get("memory", "")).group(1).replace(",", ""))
        except (KeyError, ValueError, AttributeError):
            _fail(path, f"product {sku} ({a['instanceType']}) lacks a numeric price, vcpu "
                        "or memory")
        if price <= 0:
            _fail(path, f"product {sku} ({a['instanceType']}) has price {price}")
        gpus = int(a.get("gpu") or 0) if str(a.get("gpu") or "0").isdigit() else 0
        cpu = described.get(a["instanceType"])
        if cpu is not None and cpu.vcpus != vcpus:
            _fail(path, f"product {sku} ({a['instanceType']}) has {vcpus} vCPUs but the "
                        f"instance types' description says {cpu.vcpus}")
        arch = (cpu.arch if cpu is not None and cpu.arch else None) or _aws_arch(a)
        out.append(Machine(
            provider="AWS", region=a.get("regionCode") or a.get("location") or "?",
            shape=a["instanceType"], vcpus=vcpus, ocpus=None, memory_gb=mem,
            accelerator=a.get("gpuModel") or ("GPU" if gpus else "none"),
            accelerator_count=gpus, usd_per_hour=price, pricing="fixed", ocpu_part="",
            memory_part="", price_basis="on-demand Linux shared",
            source=f"AWS Price List offer {version} ({path.name})", as_of=when,
            secondary=False, arch=arch,
            threads_per_core=cpu.threads_per_core if cpu is not None else
            infer_threads_per_core("AWS", a["instanceType"], arch),
            threads_inferred=cpu is None))
    if not out:
        _fail(path, "no Linux, shared-tenancy compute instance with an OnDemand price")
    return out


def _aws_arch(a: dict) -> str:
    """arm64 when the offer names a Graviton or Arm processor, else the shape's family."""
    named = f"{a.get('physicalProcessor', '')} {a.get('processorArchitecture', '')}".lower()
    if "graviton" in named or "arm" in named:
        return "arm64"
    return infer_arch("AWS", a["instanceType"])


def parse_instance_types(path: str | Path) -> dict[str, InstanceCpu]:
    """instance type -> its CPU, from a saved `aws ec2 describe-instance-types` response
    ({"InstanceTypes": [...]}, or the list itself); UserError naming what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"instance_types: {path} does not exist", field="instance_types")

    def fail(why):
        raise UserError(f"instance_types: {path} is not a describe-instance-types response: "
                        f"{why}; the catalog is unchanged", field="instance_types")

    try:
        doc = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        fail(f"not JSON ({exc})")
    items = doc.get("InstanceTypes") if isinstance(doc, dict) else doc
    if not isinstance(items, list) or not items:
        fail("no InstanceTypes[]")
    out = {}
    for i, it in enumerate(items):
        name = it.get("InstanceType") if isinstance(it, dict) else None
        v = (it or {}).get("VCpuInfo") if isinstance(it, dict) else None
        try:
            vcpus, cores, tpc = (int(v["DefaultVCpus"]), int(v["DefaultCores"]),
                                 int(v["DefaultThreadsPerCore"]))
        except (KeyError, TypeError, ValueError):
            fail(f"InstanceTypes[{i}] ({name}) lacks VCpuInfo DefaultVCpus, DefaultCores "
                 "and DefaultThreadsPerCore")
        if not name or vcpus != cores * tpc or tpc < 1:
            fail(f"InstanceTypes[{i}] ({name}): {vcpus} vCPUs is not {cores} cores x {tpc} "
                 "threads per core")
        archs = set(((it.get("ProcessorInfo") or {}).get("SupportedArchitectures")) or ())
        arch = "arm64" if "arm64" in archs else "x86_64" if "x86_64" in archs else None
        out[name] = InstanceCpu(vcpus, cores, tpc, arch)
    return out
