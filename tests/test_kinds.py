"""A kind of work is one package, registered once (docs/ARCHITECTURE.md, "Adding a kind of
work"): every per-kind table is derived from the registry and a kind missing from any of
them fails here; serving's tables, declared as data, are the ones its migration created;
and a toy kind built from nothing but the checklist (a package under engine/scenarios/, a
worker body under engine/worker/, its request under engine/run/jobs/, one line in the
registry) runs end to end, launched as a job, through a real worker subprocess into a real DuckDB file, its measurements in its own table and `runs`
unchanged.

The toy runs in a copy of engine/ (the real files, with the checklist's edit applied to the
copy's registry), so the product's own registry stays as it is.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import shutil
import subprocess
import sys
import textwrap

import duckdb
import pytest

from engine.core.protocol import CORE_MESSAGES, Result, message_types
from engine.scenarios import KIND_TABLES, KINDS, MESSAGES, SCENARIOS, decode
from engine.scenarios.serving.table import LOADGEN_LOGS, SERVING_RESULTS
from engine.scenarios.tables import Column, KindTable
from store.db import m012_serving, open_db
from store.kinds import create_kind_tables, kind_rows
from tests.conftest import ROOT

SCENARIOS_DIR = ROOT / "engine" / "scenarios"
# The shared files the checklist edits (docs/ARCHITECTURE.md, "Adding a kind of work"):
# the registry alone. Everything else a kind needs is new files in its own packages.
CHECKLIST_SHARED_FILES = ["engine/scenarios/__init__.py"]


def _kind_packages() -> set[str]:
    return {p.name for p in SCENARIOS_DIR.iterdir()
            if p.is_dir() and (p / "__init__.py").exists()}


def _defined_results() -> set[type]:
    """Every Result subclass a kind's messages.py defines, found by importing each one."""
    out = set()
    for package in _kind_packages():
        module = importlib.import_module(f"engine.scenarios.{package}.messages")
        out |= {v for v in vars(module).values() if isinstance(v, type)
                and issubclass(v, Result) and v.__module__ == module.__name__}
    return out


def test_every_kind_package_is_registered_and_in_every_derived_table():
    """A package under engine/scenarios/ that the registry does not list, or a kind whose
    spec, hooks, messages, tables or worker body are not where the checklist puts them,
    fails here (no list of kinds to update: the packages on disk are the list)."""
    modules = {type(s).__module__.split(".")[2]: s for s in KINDS}
    assert sorted(modules) == sorted(_kind_packages())
    assert len(modules) >= 4  # inference, training, dataload, serving at least
    for package, s in modules.items():
        assert SCENARIOS[s.kind] is s
        assert type(s).__module__ == f"engine.scenarios.{package}.hooks"
        assert s.spec_type.__module__ == f"engine.scenarios.{package}.spec"
        assert s.worker_body == f"engine.worker.{package}.body"
        assert (ROOT / "engine" / "worker" / package / "body.py").exists()
        assert s.messages and all(MESSAGES[m.kind] is m for m in s.messages)
        assert {m.__module__ for m in s.messages} == {f"engine.scenarios.{package}.messages"}
        assert all(t in KIND_TABLES for t in s.tables)
    # every Result a kind defines is one its Scenario lists, so the decoder knows it
    assert _defined_results() <= set(MESSAGES.values())
    assert {c.__name__ for c in _defined_results()} >= {
        "InferenceResult", "TrainResult", "LoadResult", "ServeResult", "ReplicaWarm"}
    assert set(MESSAGES.values()) == set(CORE_MESSAGES) | {m for s in KINDS
                                                           for m in s.messages}
    assert SERVING_RESULTS in KIND_TABLES and LOADGEN_LOGS in KIND_TABLES


def test_a_kind_left_out_of_the_registry_is_missing_from_every_table():
    """The check above would fail: without serving, its result does not decode and its
    tables are not created."""
    others = [s for s in KINDS if s.kind != "serve"]
    types = message_types(CORE_MESSAGES, *(s.messages for s in others))
    assert "serve_result" in MESSAGES and "serve_result" not in types
    assert not set(SCENARIOS["serve"].tables) & {t for s in others for t in s.tables}
    line = ('{"v": 8, "kind": "replica_done", "run_id": "r", "calls": 2, '
            '"peak_rss_bytes": null}')
    assert decode(line).calls == 2


def test_two_kinds_cannot_share_a_message_name_or_a_field_named_like_the_envelope():
    @dataclasses.dataclass(frozen=True)
    class Twin(Result):
        kind = "serve_result"

    with pytest.raises(ValueError, match="message kind 'serve_result' is taken by ServeResult"):
        message_types(CORE_MESSAGES, *(s.messages for s in KINDS), (Twin,))

    @dataclasses.dataclass(frozen=True)
    class Enveloped(Result):
        kind = "enveloped"
        v: int = 0

    with pytest.raises(ValueError, match="has a field named like the envelope"):
        message_types((Enveloped,))


@pytest.mark.parametrize("make, says", [
    (lambda: Column("Bad Name", "VARCHAR"), "not a lower-case identifier"),
    (lambda: Column("x", "TEXT; DROP TABLE runs"), "is not one of VARCHAR"),
    (lambda: KindTable("t", (Column("x", "BIGINT"),)), "run_id must be its first column"),
    (lambda: KindTable("t", (Column("run_id", "VARCHAR"),), key=("run_id", "y")),
     "a key column it does not have"),
    (lambda: KindTable("runs; --", (Column("run_id", "VARCHAR"),)), "not a lower-case"),
])
def test_a_table_declaration_spells_only_identifiers_and_duckdb_types(make, says):
    with pytest.raises(ValueError, match=says):
        make()


def _schema(con, table: str) -> tuple[list, list]:
    columns = con.execute(
        "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
        "WHERE table_name = ? ORDER BY ordinal_position", [table]).fetchall()
    keys = con.execute(
        "SELECT constraint_type, constraint_column_names FROM duckdb_constraints() "
        "WHERE table_name = ? AND constraint_type IN ('PRIMARY KEY', 'UNIQUE') "
        "ORDER BY constraint_type", [table]).fetchall()
    return columns, keys


def test_serving_tables_declared_as_data_are_the_ones_its_migration_created():
    migrated, declared = duckdb.connect(), duckdb.connect()
    m012_serving(migrated)
    create_kind_tables(declared, (SERVING_RESULTS, LOADGEN_LOGS))
    for table in ("serving_results", "loadgen_logs"):
        assert _schema(declared, table) == _schema(migrated, table)
    assert _schema(declared, "loadgen_logs")[1] == [("PRIMARY KEY", ["run_id", "name"])]
    # the generic creation leaves tables a migration made as they are
    create_kind_tables(migrated, KIND_TABLES)
    assert _schema(migrated, "serving_results") == _schema(declared, "serving_results")


def test_a_kind_table_is_created_and_grown_without_touching_runs(tmp_path):
    db = tmp_path / "k.duckdb"
    v1 = KindTable("toy_sums", (Column("run_id", "VARCHAR"), Column("n", "BIGINT", True)))
    v2 = KindTable("toy_sums", (*v1.columns, Column("total", "BIGINT"),
                                Column("parts", "DOUBLE[]")))
    with open_db(db) as con:
        runs_before = _schema(con, "runs")
        create_kind_tables(con, (v1,))
        con.execute("INSERT INTO toy_sums VALUES ('r1', 3)")
        create_kind_tables(con, (v2,))  # what the kind's next version declares
        con.execute("INSERT INTO toy_sums VALUES ('r2', 4, 6, [1.5, 2.5])")
        assert _schema(con, "toy_sums")[0] == [
            ("run_id", "VARCHAR", "NO"), ("n", "BIGINT", "NO"), ("total", "BIGINT", "YES"),
            ("parts", "DOUBLE[]", "YES")]
        assert kind_rows(con, v2, ["r2", "r1"]).to_dict("records")[0] == {
            "run_id": "r1", "n": 3, "total": None, "parts": None}
        assert kind_rows(con, v2, ["r2"])["parts"].tolist()[0].tolist() == [1.5, 2.5]
        assert _schema(con, "runs") == runs_before


# ------------------------------------------------------- a toy kind, from the checklist

TOY_FILES = {
    "engine/scenarios/count/__init__.py": '"""Count: sum the first n integers."""\n',
    "engine/scenarios/count/spec.py": '''
        from dataclasses import asdict, dataclass, field

        from engine.core.policy import MeasurementPolicy


        @dataclass(frozen=True)
        class CountSpec:
            n: int
            batch_size: int = 1
            intra_threads: int = 1
            policy: MeasurementPolicy = field(default_factory=MeasurementPolicy)
            kind = "count"
            framework, runtime, device = "selftest", "python", "cpu"
            inter_threads, profile_steps = 1, 0
            precision = weight_policy = image_size = None

            @property
            def model(self):
                return f"sum-{self.n}"

            def key(self):
                return (self.n,)

            def to_dict(self):
                return asdict(self)

            @classmethod
            def from_dict(cls, d):
                return cls(**{**d, "policy": MeasurementPolicy(**d["policy"])})
        ''',
    "engine/scenarios/count/messages.py": '''
        from dataclasses import dataclass

        from engine.core.protocol import Result


        @dataclass(frozen=True)
        class CountResult(Result):
            kind = "count_result"
            n: int = 0
            total: int = 0


        MESSAGES = (CountResult,)
        ''',
    "engine/scenarios/count/table.py": '''
        from engine.scenarios.tables import Column, KindTable

        COUNT_SUMS = KindTable("count_sums", (Column("run_id", "VARCHAR"),
                                              Column("n", "BIGINT", not_null=True),
                                              Column("total", "BIGINT")))
        ''',
    "engine/scenarios/count/hooks.py": '''
        from engine.scenarios.base import Scenario
        from engine.scenarios.count.messages import MESSAGES
        from engine.scenarios.count.spec import CountSpec
        from engine.scenarios.count.table import COUNT_SUMS


        class Count(Scenario):
            kind = CountSpec.kind
            spec_type = CountSpec
            worker_body = "engine.worker.count.body"
            messages = MESSAGES
            tables = (COUNT_SUMS,)
            title, sample_unit = "Count", "sum"

            def result_columns(self, res):
                return {"kind_rows": {COUNT_SUMS.name: [
                    {"run_id": res.run_id, "n": res.n, "total": res.total}]}}


        COUNT = Count()
        ''',
    "engine/scenarios/count/request.py": '''
        from dataclasses import dataclass

        from engine.core.policy import MeasurementPolicy
        from engine.scenarios.count.hooks import COUNT
        from engine.scenarios.count.spec import CountSpec


        @dataclass(frozen=True)
        class CountJob:
            ns: tuple[int, ...]
            rounds: int = 1
            seed: int | None = None
            timeout_s: float = 60.0
            memory_cap_bytes: int | None = None
            scenario = COUNT

            def _expand(self):
                policy = MeasurementPolicy(warmup_iters=1, min_time_s=0.01, min_iters=3)
                return [CountSpec(n, policy=policy) for n in self.ns], []

            def label(self):
                return "count " + ", ".join(map(str, self.ns))
        ''',
    "engine/run/jobs/count_request.py": '''
        from dataclasses import dataclass

        from engine.run.jobs.requests import Request
        from engine.scenarios.count.request import CountJob


        @dataclass(frozen=True)
        class CountRequest(CountJob, Request):
            """A count as a job: queued, run and stored as a sweep like any kind's."""
        ''',
    "engine/worker/count/__init__.py": "",
    "engine/worker/count/body.py": '''
        from engine.scenarios.count.messages import CountResult
        from engine.worker.measure import time_loop


        def run_group(runs, frame):
            frame.ready({"python": "3"}, {"threads": 1})
            for run_id, spec, _ in runs:
                def body(run_id=run_id, spec=spec):
                    loop = time_loop(lambda: sum(range(spec.n)) and None, spec.policy)
                    return CountResult(
                        run_id, load_s=0.0, first_forward_s=None, warmup_ns=loop.warmup_ns,
                        samples_ns=loop.samples_ns, warmup_s=loop.warmup_wall_ns / 1e9,
                        measured_s=loop.wall_ns / 1e9, stop_reason=loop.stop_reason,
                        block_calls=loop.block_calls, n=spec.n, total=sum(range(spec.n)))
                frame.guarded(run_id, spec, body)
        ''',
}
# The one shared edit: the registry lists the kind.
REGISTRY_EDIT = [
    ("from engine.scenarios.base import Scenario\n", "from engine.scenarios.base import "
     "Scenario\nfrom engine.scenarios.count.hooks import COUNT\n"),
    ("KINDS: tuple[Scenario, ...] = (INFERENCE, TRAINING, DATA_LOADING, SERVING, GENERATION, "
     "GENSERVING)",
     "KINDS: tuple[Scenario, ...] = (INFERENCE, TRAINING, DATA_LOADING, SERVING, GENERATION, "
     "GENSERVING, COUNT)"),
]
DRIVE = '''
import sys
from engine.run.jobs.count_request import CountRequest

request = CountRequest(ns=(10, 1000))
request.run(request.specs(), db=sys.argv[1], runner=request.runner(db=sys.argv[1]), seed=1,
            on_start=print, on_stored=print, on_event=lambda ev, r: None, command="toy")
'''


def _toy_tree(dest):
    """engine/ and store/ as they are, the toy kind's new files (its package, its body, its
    job made a Request), the registry's one edit."""
    shutil.copytree(ROOT / "engine", dest / "engine", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__", "build", "cpp"))
    shutil.copytree(ROOT / "store", dest / "store",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for rel, text in TOY_FILES.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(textwrap.dedent(text).lstrip())
    registry = dest / CHECKLIST_SHARED_FILES[0]
    text = registry.read_text()
    for old, new in REGISTRY_EDIT:
        assert text.count(old) == 1
        text = text.replace(old, new)
    registry.write_text(text)


def test_a_toy_kind_from_the_checklist_runs_end_to_end_into_its_own_table(tmp_path):
    tree, db = tmp_path / "tree", tmp_path / "toy.duckdb"
    _toy_tree(tree)
    with open_db(tmp_path / "before.duckdb") as con:  # `runs` as the product makes it
        runs_schema = _schema(con, "runs")
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", DRIVE, str(db)], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    con = duckdb.connect(str(db), read_only=True)
    try:
        runs = con.execute("SELECT run_id, kind, model, framework, status, iterations >= 3 "
                           "FROM runs ORDER BY model").fetchall()
        sums = con.execute("SELECT run_id, n, total FROM count_sums ORDER BY n").fetchall()
        assert _schema(con, "runs") == runs_schema
        extra = json.loads(con.execute("SELECT extra FROM runs LIMIT 1").fetchone()[0])
    finally:
        con.close()
    assert [r[1:] for r in runs] == [("count", "sum-10", "selftest", "ok", True),
                                     ("count", "sum-1000", "selftest", "ok", True)]
    assert [(n, total) for _, n, total in sums] == [(10, 45), (1000, 499500)]
    assert {r[0] for r in runs} == {s[0] for s in sums}
    assert "gc_disabled" in extra
