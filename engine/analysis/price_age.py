"""How old a price is, and which of the prices a figure uses a buyer should check first.

A catalog row's as_of is the date its source gives for the figure: YYYY-MM-DD, YYYY-MM,
YYYY, or "undated" where the source gives none. A partial date is read as its earliest
possible day (2025 -> 2025-01-01, 2026-03 -> 2026-03-01): the oldest the figure could be,
so a warning is never late, and the text says the date was read that way. An undated
figure has no age and is always warned about.

A figure is stale when it is more than MAX_AGE_MONTHS calendar months older than `today`
(2026-05-27 is not stale on 2026-11-27, 2026-05-26 is). `today` is always passed in: the
pages, the report and `prices check` pass date.today(), tests a fixed day. Providers change
list prices a few times a year (AWS cut its P4/P5 prices in June 2025), so six months is
as long as a list price is worth signing off without looking at the provider's list again.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date

__all__ = ["MAX_AGE_MONTHS", "UNDATED", "PriceAge", "read_as_of", "months_old",
           "price_age", "cutoff", "oldest", "stale_prices", "age_text"]

MAX_AGE_MONTHS = 6
UNDATED = "undated"
_AS_OF = re.compile(r"^(20\d{2})(?:-(0[1-9]|1[0-2])(?:-(0[1-9]|[12]\d|3[01]))?)?$")


@dataclass(frozen=True)
class PriceAge:
    """One price's age on a given day."""
    label: str  # what is priced: "AWS c6i.8xlarge", "unit rate B91961 (Block Volume ...)"
    as_of: str  # as the row writes it
    read_as: date | None  # the day it is read as (None: undated)
    partial: bool  # as_of named a year or a month only
    months: int | None  # whole calendar months between read_as and today (None: undated)
    stale: bool
    first_party: str = ""  # where a buyer checks it (the row's first-party source)


def read_as_of(text: str | None) -> tuple[date | None, bool]:
    """(the earliest day the as_of can mean, whether it was partial); (None, False) for
    "undated" or empty. ValueError on anything else (validate_catalog refuses it first)."""
    text = (text or "").strip()
    if not text or text.lower() == UNDATED:
        return None, False
    m = _AS_OF.match(text)
    if not m:
        raise ValueError(f"as_of {text!r} is not YYYY[-MM[-DD]] or {UNDATED!r}")
    year, month, day = int(m.group(1)), int(m.group(2) or 1), int(m.group(3) or 1)
    return date(year, month, day), m.group(3) is None


def months_old(then: date, today: date) -> int:
    """Whole calendar months from then to today (a month counts once its day is reached)."""
    months = (today.year - then.year) * 12 + today.month - then.month
    return months - (today.day < then.day)


def cutoff(today: date, max_months: int = MAX_AGE_MONTHS) -> date:
    """The oldest day a price may be from and not be stale: today less max_months calendar
    months (the day clamped to the month's end: 2026-08-31 less 6 months is 2026-02-28)."""
    y, m = divmod(today.year * 12 + today.month - 1 - max_months, 12)
    return date(y, m + 1, min(today.day, calendar.monthrange(y, m + 1)[1]))


def price_age(label: str, as_of: str, today: date, *, first_party: str = "",
              max_months: int = MAX_AGE_MONTHS) -> PriceAge:
    read_as, partial = read_as_of(as_of)
    if read_as is None:
        return PriceAge(label, as_of or UNDATED, None, False, None, True, first_party)
    return PriceAge(label, as_of, read_as, partial, months_old(read_as, today),
                    read_as < cutoff(today, max_months), first_party)


def oldest(*as_of: str) -> str:
    """The as_of of a figure built from several prices (an OCI Flex shape: OCPU and memory
    rates): as old as its oldest part; undated when any part is."""
    read = [(read_as_of(a)[0], a) for a in as_of]
    if any(d is None for d, _ in read):
        return UNDATED
    return min(read)[1]


def stale_prices(machines, rates=(), *, today: date,
                 max_months: int = MAX_AGE_MONTHS) -> list[PriceAge]:
    """The stale prices among the machines (engine.analysis.cost.Machine) and unit rates
    (UnitRate) a figure uses, each once, oldest first, undated last. A price entered by
    hand (provider "custom") is the user's own and has no age to check."""
    out, seen = [], set()
    for m in machines:
        if m.provider == "custom" or m.label in seen:
            continue
        seen.add(m.label)
        out.append(price_age(m.label, m.as_of, today, first_party=m.first_party,
                             max_months=max_months))
    for r in rates:
        label = f"unit rate {r.part} ({r.item})"
        if label in seen:
            continue
        seen.add(label)
        out.append(price_age(label, r.as_of, today, first_party=r.first_party,
                             max_months=max_months))
    stale = [a for a in out if a.stale]
    return sorted(stale, key=lambda a: (a.read_as is None, a.read_as or date.max, a.label))


def age_text(a: PriceAge, today: date) -> str:
    """One stale price in words, with how its date was read."""
    if a.read_as is None:
        return f"{a.label}: undated (its source gives no date), so its age is unknown"
    read = (f" (read as {a.read_as.isoformat()}, the earliest it can mean)"
            if a.partial else "")
    days = (today - a.read_as).days
    return (f"{a.label}: as of {a.as_of}{read}, {a.months} month"
            f"{'' if a.months == 1 else 's'} ({days} days) before {today.isoformat()}")
