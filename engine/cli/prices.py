"""The price catalog's commands: `prices list|check|import`.

`prices check` exits 1 when a figure is unusable (a missing or negative price, no source, no
date, no first-party source to check it in, a third party's copy not marked secondary), as
every check command here does. A price older than six months is still the provider's last
known list price: it gets a `stale:` line each (and a count in the summary) but exits 0, so
a catalog does not turn from passing to failing by the calendar alone; `--strict` makes
stale prices fail too, for a gate before a budget is signed.
"""

from __future__ import annotations

import argparse
from datetime import date

from engine.cli.args import db_arg
from engine.core.errors import UserError

__all__ = ["add_parsers", "COMMANDS"]


def _day(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"on: {text!r} is not a date; allowed: YYYY-MM-DD")


def add_parsers(sub) -> None:
    pr = sub.add_parser("prices", help="the cloud price catalog: list, check, import")
    psub = pr.add_subparsers(dest="prices_command", required=True)
    pl = psub.add_parser("list", help="machines and their hourly prices")
    pl.add_argument("--provider", choices=["OCI", "AWS", "GCP", "Azure"])
    db_arg(pl)
    pc = psub.add_parser("check", help="validate the catalog (prices, sources, dates) and "
                                       "name the prices older than 6 months")
    pc.add_argument("--on", metavar="YYYY-MM-DD", type=_day, default=None,
                    help="judge ages on this day (default: today), e.g. a budget's sign-off")
    pc.add_argument("--strict", action="store_true",
                    help="exit 1 when a price is stale, not only when one is unusable")
    db_arg(pc)
    pi = psub.add_parser("import", help="refresh from a saved OCI price list API response "
                                        "or an AWS Price List offer file")
    pi.add_argument("file", metavar="FILE")
    pi.add_argument("--as-of", metavar="YYYY-MM-DD",
                    help="date of the figures (default: the file's own date, else today)")
    pi.add_argument("--instance-types", metavar="FILE", default=None,
                    help="with an AWS offer: a saved `aws ec2 describe-instance-types` "
                         "response, whose DefaultThreadsPerCore gives each machine's threads "
                         "per core (else they are inferred from the shape's family)")
    db_arg(pi)


def _threads(m) -> str:
    return f"{m.threads_per_core}{' (inferred)' if m.threads_inferred else ''}"


def cmd_prices(args) -> int:
    from engine.analysis.cost import validate_catalog
    from engine.analysis.price_age import MAX_AGE_MONTHS, age_text, stale_prices
    from engine.analysis.price_import import parse_instance_types, parse_price_file
    from engine.present.tables import format_table
    from store.db import open_db
    from store.prices import effective_catalog, save_price_updates

    if args.prices_command == "import":
        described = (parse_instance_types(args.instance_types) if args.instance_types
                     else None)
        kind, rates, machines = parse_price_file(args.file, as_of=args.as_of,
                                                 instance_types=described)
        with open_db(args.db) as con:
            # Validate the catalog as it would be, before anything is written.
            from engine.analysis.cost import load_catalog, load_unit_rates
            from store.prices import price_updates
            old_rates, old_machines = price_updates(con)
            new_rates = load_unit_rates(overrides=old_rates + rates)
            problems = validate_catalog(
                load_catalog(rates=new_rates, overrides=old_machines + machines), new_rates)
            if problems:
                raise UserError(f"file: {args.file} would make the catalog invalid: "
                                f"{problems[0]}; the catalog is unchanged", field="file")
            n = save_price_updates(con, rates, machines)
        inferred = sum(m.threads_inferred for m in machines)
        print(f"imported {n} price updates from {args.file} ({kind}: {len(rates)} unit "
              f"rates, {len(machines)} machines"
              + (f"; threads per core of {inferred} inferred from the shape's family: pass "
                 "--instance-types to read EC2's own" if inferred else "") + ")")
        return 0
    with open_db(args.db) as con:
        catalog, rates = effective_catalog(con)
    if args.prices_command == "check":
        today = args.on or date.today()
        problems = validate_catalog(catalog, rates)
        for p in problems:
            print(f"problem: {p}")
        stale = stale_prices(catalog, rates.values(), today=today)
        for a in stale:
            print(f"stale: {age_text(a, today)}; check it at {a.first_party or 'its source'}")
        secondary = (sum(m.secondary for m in catalog)
                     + sum(r.secondary for r in rates.values()))
        print(f"{len(catalog)} machines, {len(rates)} unit rates: "
              f"{'ok' if not problems else f'{len(problems)} problems'}; "
              f"{len(stale)} older than {MAX_AGE_MONTHS} months or undated on "
              f"{today.isoformat()}; {secondary} from a third party's copy (secondary)")
        return 1 if problems or (args.strict and stale) else 0
    rows = [[m.provider, m.shape[:48], m.arch, str(m.vcpus), _threads(m),
             f"{m.memory_gb:g}", f"{m.usd_per_hour:.4f}", m.as_of, "yes" if m.secondary else ""]
            for m in catalog if not args.provider or m.provider == args.provider]
    print(format_table(["provider", "shape", "arch", "vCPUs", "threads/core", "GB",
                        "USD/hour", "as of", "secondary"], rows))
    return 0


COMMANDS = {"prices": cmd_prices}
