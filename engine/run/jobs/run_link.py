"""A Run page link as a sweep request: what `python -m engine watch --link` runs.

The Run page writes its form to the address (dashboard/sweep_form.py: ?model=resnet18&
batch=1,8&rounds=5), a value only where it differs from the form's default; this reads the
same parameters back into the same SweepRequest, with the same defaults, without
Streamlit. Unlike the page, which notes a refused link value and carries on with its
default, a command run by cron must not measure something other than what was asked: any
value it cannot use, or a parameter it does not know, is a UserError naming it and what is
allowed. A user's model file (?source=file) is the page's alone: its file lives in the
server's models folder and its code may need a person's trust, so it is refused here.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from engine.core.budget import default_max_rounds
from engine.core.catalog import CATALOG, DIAGNOSTIC_MODELS, FRAMEWORKS
from engine.core.errors import UserError
from engine.core.limits import (BATCH_RANGE, DEFAULT_ENERGY_S, DEFAULT_ROUNDS,
                                DEFAULT_VERDICT_MARGIN, PROFILE_RANGE, ROUNDS_RANGE,
                                VERDICT_MARGIN_RANGE, logical_cores)
from engine.core.policy import MeasurementPolicy
from engine.core.runtimes import ROWS
from engine.present.guide_text import PAGE_GUIDES
from engine.present.run_form import (DEFAULT_BATCHES, DEFAULT_MODELS, default_threads,
                                     parse_image_size, parse_time_budget)
from engine.run.jobs.requests import SweepRequest

__all__ = ["request_from_link", "RUN_PAGE", "LINK_PARAMS"]

RUN_PAGE = "run"  # app.py's url_path of the Run page; it is also the default page, at /
POLICY = MeasurementPolicy()
# The parameters dashboard/sweep_form.py writes for a catalog sweep, and nothing else.
LINK_PARAMS = ("model", "framework", "runtime", "batch", "threads", "replicas", "image_size",
               "min_time", "min_iters", "warmup", "rounds", "max_rounds", "time_budget",
               "margin", "contention", "energy", "profile", "source")
MAX_LINK_LEN = 4000  # far beyond any form's address; a longer one is not a Run link


def _query(link: str) -> dict[str, str]:
    text = (link or "").strip()
    if not text or len(text) > MAX_LINK_LEN:
        raise UserError(f"link: {len(text)} characters; allowed: a Run page link or its query "
                        f"string, 1..{MAX_LINK_LEN} characters", field="link")
    if "://" in text or text.startswith("/"):
        parts = urlsplit(text)
        page = parts.path.rstrip("/").rpartition("/")[2]
        # another page of the dashboard's (a path prefix, /proxy/8501/, is not a page)
        if page in PAGE_GUIDES + ("docs",) and page != RUN_PAGE:
            raise UserError(f"link: the {page!r} page's; allowed: a link of the Run page "
                            "(\"Link to this sweep\")", field="link")
        text = parts.query
    pairs = parse_qs(text.lstrip("?"), keep_blank_values=True, strict_parsing=False)
    unknown = sorted(set(pairs) - set(LINK_PARAMS))
    if unknown:
        raise UserError(f"link: unknown parameter {unknown[0]!r}; allowed: "
                        f"{', '.join(LINK_PARAMS)}", field="link")
    return {k: v[-1] for k, v in pairs.items()}  # the last wins, as on the page


def _names(q: dict, param: str, allowed, default) -> tuple[str, ...]:
    if param not in q:
        return tuple(default)
    names = tuple(n for n in q[param].split(",") if n)
    bad = [n for n in names if n not in allowed]
    if bad or not names:
        raise UserError(f"{param}: {bad[0] if bad else ''!r} is not offered; allowed: "
                        f"comma-separated, of {', '.join(allowed)}", field=param)
    return names


def _integers(q: dict, param: str, lo: int, hi: int, default) -> tuple[int, ...]:
    if param not in q:
        return tuple(default)
    out = []
    for text in q[param].split(","):
        try:
            value = int(text)
        except ValueError:
            raise UserError(f"{param}: {text!r} is not an integer; allowed: comma-separated "
                            f"integers {lo}..{hi}", field=param) from None
        if not lo <= value <= hi:
            raise UserError(f"{param}: {value} is out of range; allowed: integers {lo}..{hi}",
                            field=param)
        out.append(value)
    return tuple(sorted(set(out)))


def _number(q: dict, param: str, lo: float, hi: float, default: float, *,
            integer: bool = False) -> float:
    if param not in q:
        return default
    try:
        value = int(q[param]) if integer else float(q[param])
    except ValueError:
        raise UserError(f"{param}: {q[param]!r} is not {'an integer' if integer else 'a number'}"
                        f"; allowed: {lo:g}..{hi:g}", field=param) from None
    if not lo <= value <= hi:  # NaN too
        raise UserError(f"{param}: {value:g} is out of range; allowed: {lo:g}..{hi:g}",
                        field=param)
    return value


def _switch(q: dict, param: str) -> bool:
    value = q.get(param, "0")
    if value not in ("0", "1"):
        raise UserError(f"{param}: {value!r}; allowed: 1 (on) or 0 (off)", field=param)
    return value == "1"


def request_from_link(link: str) -> SweepRequest:
    """The sweep a Run page link (the whole address, or its query string) describes, as the
    page would launch it here; UserError naming the first value it cannot use."""
    q = _query(link)
    if q.get("source", "catalog") != "catalog":
        raise UserError(f"source: {q['source']!r}; allowed: catalog (a model file is "
                        "launched from the Run page itself)", field="source")
    cores = logical_cores()
    rounds = int(_number(q, "rounds", *ROUNDS_RANGE, DEFAULT_ROUNDS, integer=True))
    energy = _switch(q, "energy")
    models = _names(q, "model", [*CATALOG, *DIAGNOSTIC_MODELS], DEFAULT_MODELS)
    return SweepRequest(
        models=models,
        frameworks=_names(q, "framework", list(FRAMEWORKS), ["torch", "tensorflow"]),
        runtimes=_names(q, "runtime", [r.name for r in ROWS], ()),
        batch_sizes=_integers(q, "batch", 1, BATCH_RANGE[1], DEFAULT_BATCHES),
        threads=_integers(q, "threads", 1, cores, default_threads(cores, cores)),
        replicas=_integers(q, "replicas", 1, cores, (1,)),
        image_size=parse_image_size(q.get("image_size", ""), models),
        policy=MeasurementPolicy(
            warmup_iters=int(_number(q, "warmup", 0, 10_000, POLICY.warmup_iters,
                                     integer=True)),
            min_time_s=_number(q, "min_time", 0.0, 3600.0, POLICY.min_time_s),
            min_iters=int(_number(q, "min_iters", 1, 100_000, POLICY.min_iters, integer=True)),
            energy_s=DEFAULT_ENERGY_S if energy else 0.0),
        rounds=rounds,
        # the form's own default (not one that follows rounds), which the page leaves out
        max_rounds=int(_number(q, "max_rounds", *ROUNDS_RANGE,
                               default_max_rounds(DEFAULT_ROUNDS), integer=True)),
        time_budget_s=parse_time_budget(q.get("time_budget", "")),
        margin=_number(q, "margin", 100 * VERDICT_MARGIN_RANGE[0],
                       100 * VERDICT_MARGIN_RANGE[1], 100 * DEFAULT_VERDICT_MARGIN) / 100,
        contention=_switch(q, "contention"),
        profile_steps=int(_number(q, "profile", *PROFILE_RANGE, 0, integer=True)))
