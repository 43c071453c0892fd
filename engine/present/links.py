"""Link values: every view of the dashboard is an address someone else can open, so every
value in a query string is untrusted input.

Pure parsing (no Streamlit; dashboard/link_state.py applies it to widgets). A value is
matched against the values the page offers, never used as a name of anything else: a value
that looks like a path (a slash, a backslash, `..`, `~`, a NUL) or is longer than
MAX_VALUE_LEN is refused before any matching. A refused value is ignored with a note naming
the field and what is allowed (Markdown-escaped: a page renders it); it never raises. A
value equal to one the page offers is accepted as it is, slashes included (catalog shape
names hold them): it is the page's own value, not a name of anything else.
"""

from __future__ import annotations

import math
from typing import Any, Iterable
from urllib.parse import urlencode

__all__ = ["MAX_VALUE_LEN", "looks_like_path", "parse_choice", "parse_choices",
           "parse_number", "parse_integers", "encode_setting", "note", "md_escape",
           "not_offered", "number_allowed", "number_refused", "view_url"]

MAX_VALUE_LEN = 200
_PATH_MARKS = ("/", "\\", "..", "\x00")


def looks_like_path(raw: str) -> bool:
    return raw.startswith("~") or any(m in raw for m in _PATH_MARKS)


_MARKDOWN = "\\`*_{}[]()<>#!|~$:"  # links (a bare https: too), images, emphasis, code, HTML


def md_escape(text: str) -> str:
    """A link value shown on a page renders as Markdown: escaped, `[x](https://...)` in a
    crafted link stays text instead of becoming a clickable link on our page."""
    return "".join("\\" + ch if ch in _MARKDOWN else ch for ch in text)


def note(field: str, raw: str, allowed: str, action: str = "ignored") -> str:
    shown = raw if len(raw) <= 40 else raw[:37] + "..."
    return (f"link: {field}={md_escape(repr(shown))} is not allowed; allowed: "
            f"{md_escape(allowed)}; {action}")


def _allowed_list(options: Iterable[str], limit: int = 8) -> str:
    names = list(options)
    if not names:
        return "nothing here yet"
    more = f" (and {len(names) - limit} more)" if len(names) > limit else ""
    return "one of " + ", ".join(names[:limit]) + more


def not_offered(field: str, value: Any, options: tuple | None, names: Iterable[str] = (),
                max_len: int | None = None) -> str | None:
    """A widget value the page did not offer (a crafted rerun message: Streamlit passes a
    choice it does not know through as the raw string, and a text box any length): the
    message naming the field and what is allowed, or None. value: one value or a list;
    options: the values offered (None: any); names: their spellings for the message."""
    for v in value if isinstance(value, list) else [value]:
        if max_len is not None and isinstance(v, str) and len(v) > max_len:
            return (f"{field}: {len(v)} characters is too long; allowed: at most {max_len} "
                    "characters")
        if options is not None and v not in options:
            shown = str(v) if len(str(v)) <= 40 else str(v)[:37] + "..."
            return (f"{field}: {md_escape(repr(shown))} is not offered; allowed: "
                    f"{md_escape(_allowed_list(names))}")
    return None


def _spell(x: float) -> str:
    """3.0 -> '3', 1048576 -> '1048576', 0.005 -> '0.005', 1e300 -> '1e+300'."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


def number_allowed(lo: float, hi: float, integer: bool = False,
                   zero: str | None = None) -> str:
    """'integer 1..100', 'number 0..50': what a number box allows, as its messages say;
    zero: what 0 means where it is allowed outside lo..hi ('0 (automatic) or integer
    459..1000000')."""
    head = f"0 ({zero}) or " if zero else ""
    return f"{head}{'integer' if integer else 'number'} {_spell(lo)}..{_spell(hi)}"


def number_refused(field: str, value: float | None, lo: float, hi: float,
                   integer: bool = False, zero: str | None = None) -> str | None:
    """A number box's value outside lo..hi, or a fraction where an integer is asked for: the
    message naming the field and the range, or None. value None: the box was emptied, or
    Streamlit put its (None) default in place of a non-finite number (NaN, inf) a crafted
    rerun message sent (dashboard/numbers.py)."""
    allowed = number_allowed(lo, hi, integer, zero)
    if value is None or isinstance(value, bool) or not math.isfinite(value):
        return f"{field}: an empty or non-finite value is not allowed; allowed: {allowed}"
    if zero and value == 0:
        return None
    if not lo <= value <= hi or (integer and not float(value).is_integer()):
        return f"{field}: {_spell(value)} is not allowed; allowed: {allowed}"
    return None


def _refused(field: str, raw: str, allowed: str, action: str = "ignored") -> str | None:
    if len(raw) > MAX_VALUE_LEN:
        return note(field, raw, f"at most {MAX_VALUE_LEN} characters; {allowed}", action)
    if looks_like_path(raw):
        return note(field, raw, f"a name, not a path; {allowed}", action)
    return None


def parse_choice(field: str, raw: str | None, options: dict[str, Any],
                 prefix_ok: bool = False) -> tuple[Any, str | None]:
    """(the option `raw` names, or None; a note when raw was given but refused). options maps
    each link spelling to its value. prefix_ok: a unique prefix names it too (sweep ids)."""
    if raw is None or raw == "":
        return None, None
    if raw in options and len(raw) <= MAX_VALUE_LEN:  # the page's own (a shape holds a "/")
        return options[raw], None
    allowed = _allowed_list(options)
    bad = _refused(field, raw, allowed)
    if bad:
        return None, bad
    key = _by_prefix(options, raw) if prefix_ok else None
    if key is not None:
        return options[key], None
    return None, note(field, raw, allowed)


def _by_prefix(options: dict, raw: str) -> str | None:
    """The one option `raw` is a prefix of (at least 4 characters: a sweep id's), or None."""
    hits = [k for k in options if k.startswith(raw)] if len(raw) >= 4 else []
    return hits[0] if len(hits) == 1 else None


def parse_choices(field: str, raw: str | None, options: dict[str, Any],
                  prefix_ok: bool = False) -> tuple[list | None, str | None]:
    """Comma-separated options: the known ones in link order; unknown ones are named in the
    note. None when nothing usable was given (the page keeps its default). prefix_ok: a
    unique prefix of at least 4 characters names an option too (sweep ids)."""
    if raw is None or raw == "":
        return None, None
    allowed = _allowed_list(options)
    bad = None if raw in options and len(raw) <= MAX_VALUE_LEN else _refused(field, raw,
                                                                             allowed)
    if bad:
        return None, bad
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    if prefix_ok:
        parts = [p if p in options else (_by_prefix(options, p) or p) for p in parts]
    known = list(dict.fromkeys(options[p] for p in parts if p in options))
    unknown = [p for p in parts if p not in options]
    msg = note(field, ",".join(unknown), allowed) if unknown else None
    return (known or None), msg


def parse_number(field: str, raw: str | None, lo: float, hi: float, *,
                 integer: bool = False, action: str = "ignored", zero: str | None = None
                 ) -> tuple[float | int | None, str | None]:
    """A number in lo..hi (or 0, where zero says what it means); action says what the page
    does instead (e.g. "using 3")."""
    if raw is None or raw == "":
        return None, None
    allowed = number_allowed(lo, hi, integer, zero)  # as the box's own refusal spells it
    bad = _refused(field, raw, allowed, action)
    if bad:
        return None, bad
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        return None, note(field, raw, allowed, action)
    if not math.isfinite(value) or not (lo <= value <= hi or (zero and value == 0)):
        return None, note(field, raw, allowed, action)
    return value, None


def parse_integers(field: str, raw: str | None, lo: int, hi: int
                   ) -> tuple[list[int] | None, list[str]]:
    """Comma-separated integers in lo..hi (batch sizes, thread counts): the usable ones in
    link order, each once; a note for each refused one (ignored). Only the first
    MAX_VALUE_LEN characters are read, and a longer value gets a note of its own. None when
    nothing usable was given (the page keeps its default)."""
    if raw is None or raw == "":
        return None, []
    parsed = [parse_number(field, part.strip(), lo, hi, integer=True)
              for part in raw[:MAX_VALUE_LEN + 1].split(",") if part.strip()]
    values = list(dict.fromkeys(v for v, _ in parsed if v is not None))
    notes = [m for _, m in parsed if m]
    if len(raw) > MAX_VALUE_LEN:
        notes.append(note(field, raw, f"at most {MAX_VALUE_LEN} characters"))
    return values or None, notes


def encode_setting(setting: tuple) -> str:
    """A setting (device, precision, inter-op threads, machine id, catalog shape, neighbour)
    as one link value; without a shape or a neighbour it reads as before they were part of
    a setting."""
    device, precision, inter, system, *rest = setting
    shape = rest[0] if rest else ""
    contention = rest[1] if len(rest) > 1 else "none"
    # Matched against the page's own settings, never split: "_" only has to read well (a
    # dot would make ".." of empty parts, which the path check refuses).
    return (f"{device}_{precision}_{'' if inter is None else inter}_{system or ''}"
            + (f"_{shape}" if shape else "")
            + (f"_{contention}" if contention != "none" else ""))


def view_url(base_url: str, page: str, params: dict[str, str]) -> str:
    """The address of a page's view outside the page (a feed entry, a webhook's message):
    the dashboard's address, the page's url_path and its link values, encoded as the
    page's own "Link to this view" writes them (dashboard/link_state.py)."""
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return f"{base_url.rstrip('/')}/{page}" + (f"?{query}" if query else "")
