"""Imported price-list updates, kept in the database beside the results they price."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime, timezone

from engine.analysis.cost import (Machine, UnitRate, load_catalog, load_unit_rates,
                                  machine_from_dict)

__all__ = ["save_price_updates", "price_updates", "effective_catalog"]


def save_price_updates(con, rates: list[UnitRate], machines: list[Machine]) -> int:
    """All or nothing: one transaction for the whole file."""
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    rows = [("unit_rate", r.part, json.dumps(asdict(r)), r.source, r.as_of, now) for r in rates]
    rows += [("machine", f"{m.provider}|{m.region}|{m.shape}", json.dumps(asdict(m)),
              m.source, m.as_of, now) for m in machines]
    con.execute("BEGIN TRANSACTION")
    try:
        for row in rows:
            con.execute("INSERT OR REPLACE INTO price_updates VALUES (?, ?, ?, ?, ?, ?)", row)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return len(rows)


def price_updates(con) -> tuple[list[UnitRate], list[Machine]]:
    rows = con.execute("SELECT kind, data FROM price_updates ORDER BY imported_at").fetchall()
    rates = [UnitRate(**json.loads(d)) for k, d in rows if k == "unit_rate"]
    # updates stored before arch and threads_per_core were columns: filled from the family
    machines = [machine_from_dict(json.loads(d)) for k, d in rows if k == "machine"]
    return rates, machines


def effective_catalog(con) -> tuple[list[Machine], dict[str, UnitRate]]:
    """The shipped catalog with this database's imported updates applied."""
    rate_updates, machine_updates = price_updates(con)
    rates = load_unit_rates(overrides=rate_updates)
    return load_catalog(rates=rates, overrides=machine_updates), rates


def machine_shape(name: str | None, db) -> str | None:
    """A shape name (--machine-shape, else $BENCH_MACHINE_SHAPE) resolved against this
    database's effective catalog (the shipped one when the file does not exist yet, so a
    refused name writes nothing); None when neither names one."""
    import os
    from pathlib import Path

    from engine.analysis.cost import resolve_shape
    from store.db import open_db

    name = name or os.environ.get("BENCH_MACHINE_SHAPE")
    if not name:
        return None
    if db is not None and Path(db).exists():
        with open_db(db, read_only=True) as con:
            machines, _ = effective_catalog(con)
    else:
        machines = load_catalog()
    return resolve_shape(name, machines).shape
