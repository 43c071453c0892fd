"""What a stored search found, read back from the store (issue 27): a Deploy search's sweep
carries its request in its command (MAX_QPS_COMMAND or TUNE_COMMAND, then the request's
fields as JSON), and the pure search is replayed over the stored probes (`replay_max_qps`,
`replay_tune`), so any reader of the database, viewer mode included, sees the conclusion
the job printed. The query count every probe ran is the command's (a count chosen from the
search's estimate is restated there before the first Server probe: engine/run/
search/query_choice.py); a search stored before the count was fixed says its probes varied.
"""

from __future__ import annotations

import json
from dataclasses import replace

from engine.run.search.autotune import Candidate, ClosedFigure, Tuning, autotune, closed_by_sut
from engine.run.search.max_qps import (DEFAULT_QPS_PRECISION, DEFAULT_QPS_PROBES, StoredProbe,
                                       replay_max_qps)
from engine.run.search.query_choice import QueryChoice
from engine.scenarios import INFERENCE, SERVING

__all__ = ["MAX_QPS_COMMAND", "TUNE_COMMAND", "GEN_RATE_COMMAND", "GEN_USERS_COMMAND",
           "GEN_TUNE_COMMAND", "request_fields", "search_limits",
           "stored_probe", "replay_tune"]

MAX_QPS_COMMAND = "dashboard max-qps"
TUNE_COMMAND = "dashboard tune"
# serving a language model's searches (engine/run/search/genserve_jobs.py; their replays:
# engine/run/search/gen_replays.py)
GEN_RATE_COMMAND = "dashboard genserve-search"
GEN_USERS_COMMAND = "dashboard genserve-users"
GEN_TUNE_COMMAND = "dashboard genserve-tune"


def request_fields(command: str | None) -> dict:
    """The request fields a search's sweep command carries ({} for any other command)."""
    for prefix in (MAX_QPS_COMMAND, TUNE_COMMAND, GEN_RATE_COMMAND, GEN_USERS_COMMAND,
                   GEN_TUNE_COMMAND):
        if command and command.startswith(prefix + " {"):
            try:
                fields = json.loads(command[len(prefix) + 1:])
            except ValueError:
                return {}
            return fields if isinstance(fields, dict) else {}
    return {}


def search_limits(fields: dict) -> dict:
    """The bracket precision, probe limit, queries a probe and bound a search's sweep
    command records, as replay_max_qps takes them; a sweep stored before the first two were
    recorded ran the defaults, and one stored before the query count was fixed ran varying
    counts (None: the replay says so)."""
    return {"precision": fields.get("qps_precision", DEFAULT_QPS_PRECISION),
            "max_probes": fields.get("max_probes", DEFAULT_QPS_PROBES),
            "query_count": fields.get("search_queries"), "bound_ms": fields.get("bound_ms")}


def stored_probe(row) -> StoredProbe:
    """A row of store.serving.search_probes as the search reads a probe."""
    return StoredProbe(float(_none(row.target_qps) or 0.0), row.status, row.reason or "",
                       _none(row.p99_ms), row.summary, row.run_id, _none(row.throughput),
                       _int(row.threads_per_core),
                       row.machine_shape, _int(row.cores_used),
                       _int(getattr(row, "replicas", 1)) or 1, _flag(row))


def replay_tune(fields: dict, probes, price) -> Tuning:
    """The tuning as it ran, from its sweep's stored runs in order (store.serving.
    search_probes' rows): each candidate's closed-loop figure the store's the tuner used
    (as its command recorded it), else the first inference run of its configuration in the
    sweep, each confirmation the max-QPS search replayed over that candidate's Server
    tests. fields: the sweep command's (request_fields). A tuning stored before its
    command recorded the store's figures shows a candidate that used one as missing."""
    cands = [Candidate(*c) for c in fields["candidates"]]
    rows = list(probes)
    queries = QueryChoice.from_fields(fields)  # as the command recorded it

    def same(c: Candidate, r) -> bool:
        wait = _none(r.max_wait_ms)
        return (r.framework, r.runtime, r.precision, r.batch_size, r.intra_threads,
                _int(getattr(r, "replicas", 1)) or 1) == (
            c.framework, c.runtime, c.precision, c.max_batch, c.threads, c.replicas) and (
            r.kind != SERVING.kind or (wait or 0.0) == c.max_wait_ms)

    def probed(c: Candidate) -> ClosedFigure:
        for r in rows:
            if r.kind == INFERENCE.kind and same(c, r):
                return ClosedFigure(r.status, _none(r.throughput), _none(r.p99_ms),
                                    r.reason, "measured",
                                    r.run_id, _int(r.threads_per_core), _int(r.cores_used),
                                    r.machine_shape, _flag(r))
        return ClosedFigure("missing", reason="no closed-loop figure stored")

    known = {Candidate(*row["candidate"]).closed_loop(): row
             for row in fields.get("stored", [])}
    closed_probe = closed_by_sut(known, probed)

    def qps_search(c: Candidate, start: float):
        return replace(replay_max_qps([stored_probe(r) for r in rows
                                       if r.kind == SERVING.kind and same(c, r)],
                                      **search_limits(fields)), queries=queries)

    return autotune(cands, default=Candidate(*fields["default"]), closed_probe=closed_probe,
                    qps_search=qps_search, price=price, bound_ms=fields["bound_ms"],
                    objective=fields["objective"], margin=fields["margin"],
                    choose_queries=lambda rates: queries)


def _none(x):
    """None for a missing value as a DataFrame row holds one (None, NaN, pandas' NA)."""
    try:
        return None if x is None or bool(x != x) else x
    except TypeError:  # pandas.NA: its comparison is NA, whose truth is ambiguous
        return None


def _flag(row) -> bool | None:
    """A row's hypervisor flag (None: not recorded, or a row read before it was)."""
    x = _none(getattr(row, "hypervisor", None))
    return None if x is None else bool(x)


def _int(x):
    x = _none(x)
    return None if x is None else int(x)
