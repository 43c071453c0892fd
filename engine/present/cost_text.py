"""What the Cost page says: its sentences, captions and the price catalog's table, built from
engine/analysis/cost*.py's figures so the page only draws them. No Streamlit."""

from __future__ import annotations

from datetime import date

import pandas as pd

from engine.analysis.break_even import Step
from engine.analysis.cost import Machine, equivalents, monthly_cost
from engine.analysis.cost_machines import MEASURE_HINT, Basis, Figure
from engine.analysis.price_age import MAX_AGE_MONTHS, PriceAge, age_text, stale_prices
from engine.present.tables import p99_text

__all__ = ["claim_text", "catalog_frame", "source_caption", "figure_caption",
           "bars_captions", "extras_caption", "not_measured_text", "versus_missing_text",
           "break_even_defaults", "break_even_text", "versus_frame", "stale_text", "stale_note",
           "sources_caption", "threads_text"]

CHANGES_SHOWN = 12  # break-even points listed; a long list says nothing more


def _s(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count > 1 else ''}"


def claim_text(claim: dict, hours: float) -> str | None:
    """oci_vs_aws() in words: the two machines, each with its vCPUs and memory, their
    monthly prices and the ratio; None when the catalog lacks one of them."""
    if claim["ratio"] is None:
        return None
    oci, aws = claim["oci"], claim["aws"]
    flex = oci.pricing == "oci_flex"
    memory = (f"at {oci.memory_gb:g} GB each" if oci.memory_gb == aws.memory_gb else
              f"with OCI's {oci.memory_gb:g} GB against AWS's {aws.memory_gb:g} GB")
    return (f"At catalog list prices, **{oci.label}** ({oci.vcpus} vCPUs, {oci.memory_gb:g} GB) "
            f"costs **${monthly_cost(oci.usd_per_hour, hours=hours):,.2f}/month**; the "
            f"cheapest 32-vCPU x86 AWS machine, **{aws.label}** ({aws.vcpus} vCPUs, "
            f"{aws.memory_gb:g} GB), costs "
            f"**${monthly_cost(aws.usd_per_hour, hours=hours):,.2f}/month** — "
            f"{claim['ratio']:.2f}x {memory}"
            + (" (OCI Flex shapes are priced at the AWS machine's memory from OCI's unit "
               "rates, as in the table)" if flex else "")
            + f"; list prices as of {oci.as_of} (OCI) and {aws.as_of} (AWS, {aws.region})"
            + ". On OCI x86 one OCPU is two vCPUs, so 16 OCPUs match 32 vCPUs; per-inference "
              "cost also depends on the throughput each machine reaches, below.")


def catalog_frame(catalog: list[Machine]) -> pd.DataFrame:
    """The price catalog, one row per machine, with where each price comes from, whether
    that is a third party's copy, and the provider's own list to check it at."""
    return pd.DataFrame([{
        "provider": m.provider, "shape": m.shape, "region": m.region, "vCPUs": m.vcpus,
        "OCPUs": m.ocpus, "threads/core": f"{m.threads_per_core}"
        + (" (inferred)" if m.threads_inferred else ""), "memory GB": m.memory_gb,
        "accelerator": m.accelerator, "USD/hour": m.usd_per_hour, "basis": m.price_basis,
        "source": m.source, "as of": m.as_of, "secondary source": m.secondary,
        "check at (first party)": m.first_party} for m in catalog])


def sources_caption(catalog: list[Machine]) -> str:
    """Where the catalog's prices come from, counted from its rows."""
    copies = sum(m.secondary for m in catalog)
    return (f"{copies} of {len(catalog)} machines' prices come from a third party's copy of "
            "the provider's list (secondary source); each row names the provider's own list "
            "or API to check it at, and says when that was not reached. OCI Flex prices are "
            "derived from unit rates (OCPUs x OCPU rate + GB x memory rate). Refresh from a "
            "saved price list with `python -m engine prices import FILE`.")


def stale_text(ages: list[PriceAge], today: date, *, shown: int = 4,
               where: bool = False) -> str | None:
    """engine.analysis.price_age.stale_prices() of the prices a view uses, in words; None
    when none is stale. where: each price names where to check it (its first-party source),
    for a view without the price catalog's "check at" column (Deploy, the CLI)."""
    if not ages:
        return None
    more = len(ages) - shown
    check = ("Check them there" if where else
             "Check them against the provider's list (the catalog's \"check at\" column)")
    return (f"{len(ages)} price{'s' if len(ages) > 1 else ''} used here "
            f"{'are' if len(ages) > 1 else 'is'} older than {MAX_AGE_MONTHS} months on "
            f"{today.isoformat()} or undated: "
            + "; ".join(age_text(a, today) + (f" (check it at {a.first_party or 'its source'})"
                                              if where else "") for a in ages[:shown])
            + (f"; and {more} more" if more > 0 else "")
            + f". {check} before signing a budget, or import a current one: "
              "`python -m engine prices import FILE`.")


def stale_note(machines, today: date) -> str | None:
    """The stale_text, with where to check each, of the machines a serving cost priced (a
    max-QPS search's shape, a tuning's, a fleet's node shapes); None when none is stale."""
    return stale_text(stale_prices([m for m in machines if m is not None], today=today),
                      today, where=True)


def threads_text(m: Machine) -> str:
    """A machine's threads per core and where the figure comes from."""
    n = f"{m.threads_per_core} thread{'' if m.threads_per_core == 1 else 's'} per core"
    if m.provider == "custom":
        return f"{n}, assumed for a price entered by hand"
    if m.threads_inferred:
        return f"{n}, inferred from the shape's name (its catalog row does not say)"
    return f"{n}, from its catalog row"


def source_caption(base: Basis) -> str | None:
    """The selected machine's splits the estimates start from; None without any."""
    if not base.source:
        return None
    first = base.source[0]
    tpc = first.threads_per_core
    per_core = _s(tpc, "thread") + " per core" if tpc else "threads per core not recorded"
    if tpc == 1 and first.hypervisor is not False and first.arch in (None, "x86_64"):
        per_core += (" on a VM" if first.hypervisor else "") + ": its cores may be hyperthreads"
    splits = ", ".join(f"{s.config}: {s.throughput:,.1f} samples/s"
                       for s in sorted(base.source, key=lambda s: (s.cores, s.replicas)))
    shapes = (f". Measured on catalog shapes: {', '.join(base.shapes)}." if base.shapes
              else ".")
    return f"Selected machine: {base.source_name} ({per_core}): {splits}{shapes}"


def figure_caption(proj: Figure, machine: Machine) -> str:
    """How the figure for this machine came about: the estimate's assumption, or where it
    was measured."""
    if proj.estimate:
        return (f"Assumption: {proj.assumption.removeprefix('estimate: ')} "
                f"({machine.shape}: {threads_text(machine)}).")
    return f"{proj.assumption[0].upper()}{proj.assumption[1:]}."


def bars_captions(table: list[dict]) -> list[str]:
    """What the hatched (estimated) and solid (measured) bars of machine_rows() stand for."""
    notes = sorted({r["assumption"] for r in table if r["estimate"]})
    measured_on = [f"{r['shape']} ({r['config']})" for r in table if not r["estimate"]]
    inferred = [r["shape"] for r in table if r["estimate"] and r.get("threads_inferred")
                and r["provider"] != "custom"]
    out = []
    if notes:
        out.append("Hatched bars are estimates (no run on the shape, or runs on part of it "
                   "scaled to the whole machine): "
                   + notes[0].removeprefix("estimate: ")
                   + (" (and likewise for the other sizes)" if len(notes) > 1 else "")
                   + ". Cores: vCPUs / each shape's threads per core from its catalog row (an "
                     "OCI OCPU is one core)"
                   + (f"; inferred from the shape's name for {', '.join(inferred)}"
                      if inferred else "") + ".")
    if measured_on:
        out.append("Solid bars were measured on their shape: " + "; ".join(measured_on) + ".")
    return out


def extras_caption(extras: dict[str, float]) -> str:
    return ("Included per month: " + ", ".join(f"{p} ${v:,.2f} storage and egress"
                                               for p, v in extras.items())
            + " (GCP and Azure extras not modelled).")


def not_measured_text(contender: str, batch: int, machine: Machine, base: Basis) -> str:
    return (f"{contender} at batch {batch} was not measured on {machine.shape}, and the "
            "selected machine has no run of it to estimate from: pick a shape it was "
            f"measured on ({', '.join(base.shapes)}) or another setting.")


def versus_missing_text(versus: list[dict], contender: str, batch: int) -> str:
    """Fewer than two measured shapes: what there is, and how to measure another."""
    return (f"{len(versus)} shape{'' if len(versus) == 1 else 's'} measured for "
            f"{contender} at batch {batch}"
            + (f" ({versus[0]['machine']})" if versus else "")
            + ": a side-by-side comparison needs two. Measure on another machine and name "
            f"its catalog shape: `{MEASURE_HINT}` (`python -m engine prices list` prints "
            "the names).")


def break_even_defaults(contenders: list[str], contender: str, cpu: list[Machine],
                        shape_labels: list[str], vcpus: int) -> tuple[int, int]:
    """Indexes of B's preselected contender and shape: the other contender (if any) on the
    AWS machine of A's size (if priced), so the comparison starts as a question."""
    others = [c for c in contenders if c != contender]
    aws = next((m.label for m in equivalents(cpu, vcpus) if m.provider == "AWS"), None)
    return (contenders.index(others[0]) if others else 0,
            shape_labels.index(aws) if aws in shape_labels else 0)


def _rate(r: float) -> str:
    """A rate as people write it: thousands separated, a tenth of a sample/s from 100 up
    (3,107.1), four significant digits below (0.25; float noise 0.8999999999999999: 0.9)."""
    if r >= 100:
        return f"{r:,.1f}".removesuffix(".0")
    return f"{float(f'{r:.4g}'):f}".rstrip("0").rstrip(".")


def _fleet(n: int, usd_per_hour: float, hours: float) -> str:
    return f"{_s(n, 'machine')} ${monthly_cost(usd_per_hour, hours=hours):,.2f}"


def break_even_text(steps: list[Step], hours: float) -> str:
    """engine.analysis.break_even's steps in words: which choice is cheaper from 0, then
    each rate above which the other one is, with both fleets' size and monthly cost there
    (the change points break_even_rates gives, from the same steps the chart draws)."""
    def who(s: Step) -> str:
        return "both cost the same" if s.cheaper == "equal" else f"**{s.cheaper}** is cheaper"

    def fleets(s: Step) -> str:
        return (f"A {_fleet(s.machines[0], s.usd_per_hour[0], hours)}, "
                f"B {_fleet(s.machines[1], s.usd_per_hour[1], hours)}")

    first, changes = steps[0], [s for p, s in zip(steps, steps[1:]) if s.cheaper != p.cheaper]
    end = _rate(steps[-1].end)
    if not changes:
        return (f"Up to {end} samples/s the cheaper choice never changes: {who(first)} "
                f"({fleets(first)} up to {_rate(first.end)} samples/s).")
    lines = [f"From 0 to {_rate(changes[0].start)} samples/s {who(first)} "
             f"({fleets(first)})."]
    lines += [f"Above {_rate(s.start)} samples/s → "
              f"{'same cost' if s.cheaper == 'equal' else s.cheaper} ({fleets(s)})"
              for s in changes[:CHANGES_SHOWN]]
    more = len(changes) - CHANGES_SHOWN
    tail = (f"… and {more} more change{'s' * (more > 1)} up to {end} samples/s."
            if more > 0 else f"(Up to {end} samples/s.)")
    return ("  \n".join(lines) + "  \n" + tail + " A change at a rate holds just above it: "
            "at that rate itself the fleet before the change still serves it; monthly costs "
            f"at {hours:g} h.")


def versus_frame(versus: list[dict]) -> pd.DataFrame:
    """Machine vs machine (engine.analysis.cost_machines.machine_vs_machine rows) as the page
    shows it: the p99 as text, flagged "(n=30, low conf.)" when it comes from fewer than
    P99_MIN_SAMPLES samples, as Compare flags it; the sample count is in that flag."""
    frame = pd.DataFrame(versus)
    frame["p99 ms"] = [p99_text(p, n) for p, n in zip(frame["p99 ms"], frame.pop("p99 samples"))]
    return frame
