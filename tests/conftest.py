import atexit
import contextlib
import fcntl
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The shapes the test cluster's two nodes are tagged with (custom resources shape:NAME).
SHAPE_A, SHAPE_B = "c6i.4xlarge", "VM.Standard.E4.Flex 16 OCPU/32 GB"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@contextlib.contextmanager
def _turn(alone: bool):
    """A test's turn when the suite runs in two processes (pytest-xdist, run-tests.sh): a
    test marked `alone` (its outcome rests on measured time: a LoadGen latency bound, a
    contention verdict) waits until the other process's current test ends and keeps it from
    starting another until it is done; other tests share the turn. Two flock files for the
    run: `gate`, held by an `alone` test while it waits, so the other process's next test
    waits behind it instead of overtaking it; `turn`, shared by ordinary tests, exclusive
    for an `alone` one. Without xdist there is one process and nothing to wait for."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run:
        yield
        return
    base = Path(tempfile.gettempdir()) / f"bench-tests-{run}"
    with open(f"{base}.gate", "a") as gate, open(f"{base}.turn", "a") as turn:
        if alone:
            fcntl.flock(gate, fcntl.LOCK_EX)
            fcntl.flock(turn, fcntl.LOCK_EX)
            fcntl.flock(gate, fcntl.LOCK_UN)
        else:
            fcntl.flock(gate, fcntl.LOCK_SH)
            fcntl.flock(turn, fcntl.LOCK_SH)
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(turn, fcntl.LOCK_UN)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    # setup (module fixtures included), call and teardown, all inside the turn
    with _turn(item.get_closest_marker("alone") is not None):
        yield


_SEEDED: dict = {}  # (seed function, args) -> the database it wrote first this session
_SEED_DIR: list = []


def seed_once(seed, db_path, *args) -> None:
    """seed(db_path, *args), a seed of seeds/records.py. A database not yet written gets
    a copy of the one the same call wrote first this session: the seeds are fixed rows, so
    the file is the same, and a copy takes 0.01 s where seeding takes most of a second of
    CPU (a dozen inserts and their statistics). A database that exists is seeded for real:
    its rows join what is there."""
    db_path = Path(db_path)
    if db_path.exists():
        seed(db_path, *args)
        return
    key = (seed.__module__, seed.__qualname__, args)
    if key not in _SEEDED:
        if not _SEED_DIR:
            _SEED_DIR.append(tempfile.mkdtemp(prefix="seeded-"))
            atexit.register(shutil.rmtree, _SEED_DIR[0], True)
        template = Path(_SEED_DIR[0]) / f"{len(_SEEDED)}.duckdb"
        seed(template, *args)
        assert not template.with_name(template.name + ".wal").exists()  # all in the file
        _SEEDED[key] = template
    db_path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_SEEDED[key], db_path)


@pytest.fixture(scope="session", autouse=True)
def _component_scan_once():
    """Streamlit's AppTest looks for v2 components on every new AppTest's first run by
    reading the metadata of each installed distribution (219 in this venv, 0.6 s of CPU a
    scan, and the suite makes hundreds of AppTests); the installed packages do not change
    during a session, so the first scan's answer (none: the dashboard uses no v2
    component) is given to every later AppTest, each still registering it in a component
    manager of its own."""
    from streamlit.components.v2 import manifest_scanner

    scan = manifest_scanner.scan_component_manifests
    found: list = []

    def scan_once(max_workers=None):
        if not found:
            found.append(scan(max_workers))
        return list(found[0])
    # component_manager imports the function from this module at each call
    manifest_scanner.scan_component_manifests = scan_once
    yield
    manifest_scanner.scan_component_manifests = scan


@pytest.fixture(autouse=True)
def _no_ambient_db(monkeypatch):
    """Tests never touch the user's ./data database, nor a Ray cluster named in the
    environment (the Run page would offer it), unless they pass one."""
    for name in ("BENCH_DB", "BENCH_RAY_ADDRESS", "RAY_ADDRESS"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def db_path(tmp_path) -> Path:
    return tmp_path / "bench.duckdb"


@pytest.fixture
def worker_env(monkeypatch):
    """Workers are started with `python -m engine.worker` from the project root."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))


@pytest.fixture(scope="session")
def model_files(tmp_path_factory):
    """tests/model_files.py's user-model files, made once a session (a torch and a Keras
    process, about 20 s) for the test files that run them; tests read them and may add
    files of their own beside them, never change one."""
    from tests.model_files import make_model_files

    return make_model_files(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="session")
def ray_cluster():
    """A real local Ray cluster (issue #15), shared by the tests that need one: a head and
    a worker node on this machine, 2 CPUs each, each tagged with a shape.
    Ray's files go to a short path of their own (its sockets' paths are length-limited)."""
    tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    saved = {k: os.environ.get(k) for k in ("RAY_TMPDIR", "RAY_USAGE_STATS_ENABLED",
                                             "PYTHONPATH")}
    # the nodes' workers import engine.run.cluster.node_host from this checkout
    os.environ.update(RAY_TMPDIR=tmp, RAY_USAGE_STATS_ENABLED="0",
                      PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), saved["PYTHONPATH"])
                                                 if p))
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 2, "resources": {f"shape:{SHAPE_A}": 1}})
    c.add_node(num_cpus=2, resources={f"shape:{SHAPE_B}": 1})
    c.wait_for_nodes()
    yield c
    c.shutdown()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    shutil.rmtree(tmp, ignore_errors=True)
