"""Result sets over time: which stored inference runs a selector names, what each sweep ran
on (project commit, framework versions, machine), and one configuration's history.

A selector is what a user writes for `compare --baseline/--candidate`: a sweep id (or a
unique prefix; several separated by commas: the same build measured on several days),
`commit:<prefix>`, `machine:<system_id prefix>` or `<package>:<version>` for a package the
workers reported (`torch:2.5.1`, `tensorflow:2.18`). An exact value wins
over a longer one it is a prefix of, as with sweep ids; a prefix must name one commit or
one machine, while a version names every release it is a component prefix of (`torch:2.5`
takes 2.5.0 and 2.5.1+cpu, never 2.50).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd

from engine.scenarios import INFERENCE
from engine.core.errors import UserError
from store.runs import FRAMEWORK_PACKAGES

__all__ = ["Selection", "resolve_selection", "selection_runs", "sweep_runs", "result_sets",
           "config_history", "framework_versions", "CONFIG_COLUMNS"]

# The columns that make a configuration (engine.analysis.regress.Config, in this order).
CONFIG_COLUMNS = ("model", "framework", "runtime", "batch_size", "intra_threads",
                  "image_size", "precision", "device", "inter_threads", "replicas",
                  "contention", "wait_policy")
# Reported beside the framework's own version: a selftest build slowed on purpose
# (engine/worker/backends/selftest.py) must never read as the plain one.
_MARKERS = ("selftest_delay_ms",)


@dataclass(frozen=True)
class Selection:
    """What a selector resolved to: one of sweep, commit, machine or package (with the
    versions it matched), and how to name it."""

    text: str
    label: str
    sweep_ids: tuple[str, ...] = ()
    commit: str | None = None
    system_id: str | None = None
    package: str | None = None
    versions: tuple[str, ...] = ()


def framework_versions(framework: str, versions: dict | str | None) -> str:
    """'torch 2.5.1'; for a framework with no package of its name (selftest), its packages'
    versions; and any deliberate slowdown marker."""
    if isinstance(versions, str):
        versions = json.loads(versions or "{}")
    versions = versions or {}
    names = [framework] if framework in versions else list(FRAMEWORK_PACKAGES.get(framework, ()))
    parts = [f"{n} {versions[n]}" for n in names if versions.get(n) not in (None, "")]
    parts += [f"{k} {versions[k]}" for k in _MARKERS if versions.get(k) not in (None, "")]
    return " ".join(parts) or f"{framework} (version not recorded)"


def _distinct(con, sql: str, params: list) -> list[str]:
    return [r[0] for r in con.execute(sql, params).fetchall() if r[0] is not None]


def _pick(values: list[str], want: str) -> list[str]:
    """Exact match wins, else every value it is a prefix of."""
    return [v for v in values if v == want] or [v for v in values if v.startswith(want)]


def _allowed(con) -> str:
    packages = _distinct(con, "SELECT DISTINCT unnest(json_keys(versions)) AS k FROM runs "
                              "WHERE kind = ? AND versions IS NOT NULL ORDER BY k",
                         [INFERENCE.kind])
    return ("a sweep id or unique prefix (see `python -m engine history`), commit:<prefix>, "
            "machine:<system_id prefix>, or <package>:<version> with package one of "
            f"{', '.join(packages) or '(none recorded yet)'}")


def _version_matches(stored: str, want: str) -> bool:
    return stored == want or stored.startswith((want + ".", want + "+"))


_DISTINCT = {"commit": "SELECT DISTINCT git_commit FROM runs WHERE kind = ? ORDER BY 1",
             "machine": "SELECT DISTINCT system_id FROM runs WHERE kind = ? ORDER BY 1"}


def resolve_selection(con, text: str | None, field: str = "baseline") -> Selection:
    """The Selection a selector names, or UserError (field: the option it came from) saying
    what matched and what is allowed."""
    text = (text or "").strip()
    if not text:
        raise UserError(f"{field}: no selector given; allowed: {_allowed(con)}", field=field)
    what, sep, value = text.partition(":")
    if not sep:
        ids = _distinct(con, "SELECT DISTINCT sweep_id FROM runs WHERE kind = ? "
                             "ORDER BY sweep_id", [INFERENCE.kind])
        found = []
        for part in [p.strip() for p in text.split(",")]:
            match = _pick(ids, part)
            if len(match) != 1:
                raise UserError(f"{field}: {part!r} matches {len(match)} inference sweeps; "
                                f"allowed: {_allowed(con)}", field=field)
            found.append(match[0])
        found = list(dict.fromkeys(found))
        label = (f"sweep {found[0][:8]}" if len(found) == 1 else
                 f"{len(found)} sweeps ({', '.join(f[:8] for f in found)})")
        return Selection(text, label, sweep_ids=tuple(found))
    if what in ("commit", "machine"):
        stored = _distinct(con, _DISTINCT[what], [INFERENCE.kind])
        match = _pick(stored, value) if value else []
        if len(match) != 1:
            raise UserError(f"{field}: {text!r} matches {len(match)} {what}s "
                            f"({', '.join(m[:12] for m in match[:5]) or 'none'}); allowed: a "
                            f"unique prefix of {', '.join(s[:12] for s in stored) or 'none'}",
                            field=field)
        if what == "commit":
            return Selection(text, f"commit {match[0][:12]}", commit=match[0])
        return Selection(text, f"machine {match[0][:8]}", system_id=match[0])
    packages = _distinct(con, "SELECT DISTINCT unnest(json_keys(versions)) FROM runs "
                              "WHERE kind = ? AND versions IS NOT NULL", [INFERENCE.kind])
    if what not in packages:
        raise UserError(f"{field}: unknown selector {what!r} in {text!r}; allowed: "
                        f"{_allowed(con)}", field=field)
    stored = _distinct(con, "SELECT DISTINCT versions->>? FROM runs WHERE kind = ? "
                            "ORDER BY 1", [what, INFERENCE.kind])
    match = tuple(v for v in stored if value and _version_matches(v, value))
    if not match:
        raise UserError(f"{field}: no inference runs with {what} {value!r}; allowed: "
                        f"{what}:<version> with version one of {', '.join(stored)}",
                        field=field)
    return Selection(text, f"{what} {', '.join(match)}", package=what, versions=match)


_RUNS = (
    "SELECT r.run_id, r.sweep_id, s.created_at AS sweep_created, r.round_no, r.model, "
    "r.framework, r.runtime, r.batch_size, r.intra_threads, r.inter_threads, r.precision, "
    "r.image_size, r.device, r.system_id, r.status, r.validity, r.median_ms, r.throughput, "
    "r.warmup_iters, r.min_time_s, r.min_iters, r.started_at, r.git_commit, r.versions, "
    "r.replicas, r.machine_shape, r.model_sha256, coalesce(r.contention, 'none') AS contention, "
    "r.wait_policy, "
    "r.extra->'interference' AS interference, (r.extra->>'replica')::INTEGER AS replica "
    "FROM runs r LEFT JOIN sweeps s USING (sweep_id) "
    "WHERE r.kind = ? AND (len(?::VARCHAR[]) = 0 OR list_contains(?::VARCHAR[], r.sweep_id)) "
    "AND (?::VARCHAR IS NULL OR r.git_commit = ?) AND (?::VARCHAR IS NULL OR r.system_id = ?) "
    "AND (?::VARCHAR IS NULL OR list_contains(?::VARCHAR[], r.versions->>?::VARCHAR)) "
    "ORDER BY r.started_at, r.run_id")


def _dicts(cur) -> list[dict]:
    names = [d[0] for d in cur.description]
    rows = [dict(zip(names, row)) for row in cur.fetchall()]
    for r in rows:
        if isinstance(r.get("interference"), str):
            r["interference"] = json.loads(r["interference"])
        if "versions" in r:
            r["versions"] = framework_versions(r["framework"], r["versions"])
    return rows


def selection_runs(con, text: str, field: str = "baseline") -> tuple[Selection, list[dict]]:
    """The selection a selector names and its inference runs, one dict each (the columns
    engine.analysis.compare.aggregate reads, the measurement policy, the sweep's date, and
    `versions` as framework_versions writes it), oldest first."""
    sel = resolve_selection(con, text, field)
    cur = con.execute(_RUNS, [INFERENCE.kind, list(sel.sweep_ids), list(sel.sweep_ids),
                              sel.commit,
                              sel.commit, sel.system_id, sel.system_id, sel.package,
                              list(sel.versions), sel.package])
    return sel, _dicts(cur)


def sweep_runs(con, sweep_ids) -> list[dict]:
    """The inference runs of these sweeps, as selection_runs gives a selector naming them
    (`compare --baseline ID,ID`), oldest first; none for no sweep."""
    ids = list(sweep_ids)
    if not ids:
        return []
    return _dicts(con.execute(_RUNS, [INFERENCE.kind, ids, ids, None, None, None, None, None,
                                      [], None]))


def result_sets(con) -> pd.DataFrame:
    """One row per inference sweep, newest first: when, rounds, runs (and ok), the project
    commits, the framework versions and the machines it ran on."""
    sets = con.execute(
        "SELECT s.sweep_id, s.created_at, s.rounds, count(*) AS runs, "
        "count(*) FILTER (WHERE r.status = 'ok') AS ok, "
        "list(DISTINCT r.git_commit ORDER BY r.git_commit) "
        "FILTER (WHERE r.git_commit IS NOT NULL) AS commits, "
        "list(DISTINCT r.system_id ORDER BY r.system_id) "
        "FILTER (WHERE r.system_id IS NOT NULL) AS machines, "
        "list(DISTINCT coalesce(y.cpu_model, 'unknown CPU') || coalesce(' on ' || y.hostname, "
        "'')) AS machine_names "
        "FROM sweeps s JOIN runs r USING (sweep_id) LEFT JOIN systems y USING (system_id) "
        "WHERE r.kind = ? GROUP BY s.sweep_id, s.created_at, s.rounds "
        "ORDER BY s.created_at DESC, s.sweep_id", [INFERENCE.kind]).df()
    pairs = con.execute("SELECT DISTINCT sweep_id, framework, versions FROM runs "
                        "WHERE kind = ? AND sweep_id IS NOT NULL", [INFERENCE.kind]).fetchall()
    labels: dict = {}
    for sweep_id, framework, versions in pairs:
        label = framework_versions(framework, versions)
        labels.setdefault(sweep_id, set()).add(label)
    sets["versions"] = [", ".join(sorted(labels.get(s, ()))) for s in sets.sweep_id]
    for col in ("commits", "machines", "machine_names"):  # no match gives NULL, not []
        # (pandas hands a NULL list over as NA, not None: a sweep run outside a git
        # checkout has no commit)
        sets[col] = [[] if v is None or v is pd.NA else list(v) for v in sets[col]]
    return sets


def config_history(con, config: tuple) -> list[dict]:
    """Every inference run of one configuration (values in CONFIG_COLUMNS order), an A/A
    test's copies left out, in sweep order: sweep, its date, round, status, median, versions
    (as framework_versions writes them), commit and machine."""
    if len(config) != len(CONFIG_COLUMNS):
        raise ValueError(f"config: {len(config)} values, expected {len(CONFIG_COLUMNS)}")
    cur = con.execute(
        "SELECT r.sweep_id, coalesce(s.created_at, r.started_at) AS sweep_created, "
        "r.round_no, r.status, r.median_ms, r.framework, r.versions, r.git_commit, r.system_id "
        "FROM runs r LEFT JOIN sweeps s USING (sweep_id) "
        "WHERE r.kind = ? AND r.model = ? AND r.framework = ? AND r.runtime = ? "
        "AND r.batch_size IS NOT DISTINCT FROM ? AND r.intra_threads IS NOT DISTINCT FROM ? "
        "AND r.image_size IS NOT DISTINCT FROM ? AND r.precision IS NOT DISTINCT FROM ? "
        "AND r.device IS NOT DISTINCT FROM ? AND r.inter_threads IS NOT DISTINCT FROM ? "
        # a split, a neighbour or torch's wait policy is another configuration (the quiet,
        # default ones are NULL on runs stored before they were recorded)
        "AND coalesce(r.replicas, 1) = ? AND coalesce(r.contention, 'none') = ? "
        "AND coalesce(r.wait_policy, '') = ? "
        "AND r.extra->>'replica' IS NULL "
        "ORDER BY sweep_created, r.sweep_id, r.round_no, r.started_at",
        [INFERENCE.kind, *config])
    return _dicts(cur)
