"""The price catalog's commands: `prices list|check|import`."""

from __future__ import annotations

from engine.cli.args import db_arg
from engine.core.errors import UserError

__all__ = ["add_parsers", "COMMANDS"]


def add_parsers(sub) -> None:
    pr = sub.add_parser("prices", help="the cloud price catalog: list, check, import")
    psub = pr.add_subparsers(dest="prices_command", required=True)
    pl = psub.add_parser("list", help="machines and their hourly prices")
    pl.add_argument("--provider", choices=["OCI", "AWS", "GCP", "Azure"])
    db_arg(pl)
    pc = psub.add_parser("check", help="validate the catalog (prices, sources, dates)")
    db_arg(pc)
    pi = psub.add_parser("import", help="refresh from a saved OCI price list API response "
                                        "or an AWS Price List offer file")
    pi.add_argument("file", metavar="FILE")
    pi.add_argument("--as-of", metavar="YYYY-MM-DD",
                    help="date of the figures (default: the file's own date, else today)")
    db_arg(pi)



def cmd_prices(args) -> int:
    from engine.analysis.cost import validate_catalog
    from engine.analysis.price_import import parse_price_file
    from engine.present.tables import format_table
    from store.db import open_db
    from store.prices import effective_catalog, save_price_updates

    if args.prices_command == "import":
        kind, rates, machines = parse_price_file(args.file, as_of=args.as_of)
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
        print(f"imported {n} price updates from {args.file} ({kind}: {len(rates)} unit "
              f"rates, {len(machines)} machines)")
        return 0
    with open_db(args.db) as con:
        catalog, rates = effective_catalog(con)
    if args.prices_command == "check":
        problems = validate_catalog(catalog, rates)
        for p in problems:
            print(f"problem: {p}")
        print(f"{len(catalog)} machines, {len(rates)} unit rates: "
              f"{'ok' if not problems else f'{len(problems)} problems'}")
        return 1 if problems else 0
    rows = [[m.provider, m.shape[:48], m.arch, str(m.vcpus), str(m.threads_per_core),
             f"{m.memory_gb:g}", f"{m.usd_per_hour:.4f}", m.as_of, "yes" if m.secondary else ""]
            for m in catalog if not args.provider or m.provider == args.provider]
    print(format_table(["provider", "shape", "arch", "vCPUs", "threads/core", "GB",
                        "USD/hour", "as of", "secondary"], rows))
    return 0



COMMANDS = {"prices": cmd_prices}
