"""Parse saved price lists into catalog updates; nothing is written until all of it parses.

- OCI price list API response: items[].partNumber with
  currencyCodeLocalizations[].prices[] {model, value} (and, for tiered parts, rangeMin):
  updates unit rates by part number, which reprices every OCI Flex shape built on them.
- AWS Price List offer file (AmazonEC2): products{sku: {productFamily, attributes{
  instanceType, vcpu, memory, regionCode, operatingSystem, tenancy, preInstalledSw, ...}}}
  and terms.OnDemand[sku][offer].priceDimensions[*].pricePerUnit.USD: one machine per
  Linux, shared-tenancy, no-preinstalled-software instance type and region; its
  architecture from physicalProcessor/processorArchitecture (Graviton, Arm), else from the
  shape's family, and its threads per core from the family (the offer file has no such
  attribute: 1 on Arm and on AWS's 7th-generation AMD shapes, else 2).
Both keep the file's own source and date.
"""

from __future__ import annotations

import json
import re
from datetime import date
from pathlib import Path

from engine.analysis.cost import Machine, UnitRate, infer_arch, infer_threads_per_core
from engine.core.errors import UserError

__all__ = ["parse_price_file"]


def _fail(path, why):
    raise UserError(f"file: {path} is not a usable price list: {why}; the catalog is "
                    "unchanged", field="file")


def parse_price_file(path: str | Path, *, as_of: str | None = None
                     ) -> tuple[str, list[UnitRate], list[Machine]]:
    """(kind, unit-rate updates, machine updates) or UserError naming what is wrong."""
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
        return "AWS offer file", [], _parse_aws(path, doc, as_of)
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


def _parse_aws(path: Path, doc: dict, as_of: str | None) -> list[Machine]:
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
        arch = _aws_arch(a)
        out.append(Machine(
            provider="AWS", region=a.get("regionCode") or a.get("location") or "?",
            shape=a["instanceType"], vcpus=vcpus, ocpus=None, memory_gb=mem,
            accelerator=a.get("gpuModel") or ("GPU" if gpus else "none"),
            accelerator_count=gpus, usd_per_hour=price, pricing="fixed", ocpu_part="",
            memory_part="", price_basis="on-demand Linux shared",
            source=f"AWS Price List offer {version} ({path.name})", as_of=when,
            secondary=False, arch=arch,
            threads_per_core=infer_threads_per_core("AWS", a["instanceType"], arch)))
    if not out:
        _fail(path, "no Linux, shared-tenancy compute instance with an OnDemand price")
    return out


def _aws_arch(a: dict) -> str:
    """arm64 when the offer names a Graviton or Arm processor, else the shape's family."""
    named = f"{a.get('physicalProcessor', '')} {a.get('processorArchitecture', '')}".lower()
    if "graviton" in named or "arm" in named:
        return "arm64"
    return infer_arch("AWS", a["instanceType"])
