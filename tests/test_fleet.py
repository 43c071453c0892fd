"""The Ray executor and the fleet sweep (issue #15) on a real local Ray cluster: two nodes
(ray.cluster_utils.Cluster) tagged with different catalog shapes, the same worker
subprocesses as local runs, the driver alone writing DuckDB. No mocks of Ray."""

import socket
import threading

import pytest

from engine.cli import main
from engine.core.protocol import Progress, Ready
from engine.run.process.drive import WorkerEvent
from store.db import open_db

from tests.conftest import SHAPE_A, SHAPE_B
QUICK = ["--model", "identity", "--framework", "selftest", "--threads", "1",
         "--min-time", "0.05", "--min-iters", "20", "--warmup", "2", "--no-table",
         "--executor", "ray"]


def _rows(db_path):
    with open_db(db_path) as con:
        return con.execute(
            "SELECT machine_shape, node_id, node_host, status, batch_size, replicas, round_no, "
            "r.system_id, y.hostname, reason FROM runs r LEFT JOIN systems y USING (system_id) "
            "ORDER BY machine_shape, round_no, batch_size").fetchall()


def test_a_fleet_sweep_runs_every_node_kind_with_rounds_interleaved(ray_cluster, db_path,
                                                                    capsys):
    assert main(["run", *QUICK, "--batch", "1", "2", "--rounds", "2", "--max-rounds", "2",
                 "--fleet", "--address", ray_cluster.address, "--db", str(db_path)]) == 0
    out = capsys.readouterr().out
    rows = _rows(db_path)
    # 2 configurations x 2 node kinds x 2 rounds, one row each, all measured
    assert len(rows) == 8 and {r[3] for r in rows} == {"ok"}
    by_shape = {}
    for shape, node, host, *_ in rows:
        by_shape.setdefault(shape, set()).add((node, host))
    assert sorted(by_shape) == sorted([SHAPE_A, SHAPE_B])
    assert all(len(v) == 1 for v in by_shape.values())  # each shape on its one node
    (node_a, host_a), = by_shape[SHAPE_A]
    (node_b, _), = by_shape[SHAPE_B]
    assert node_a != node_b and host_a == socket.gethostname()
    # every round on both nodes: rounds 1 and 2 each hold 2 runs per shape
    for shape in (SHAPE_A, SHAPE_B):
        assert sorted(r[6] for r in rows if r[0] == shape) == [1, 1, 2, 2]
    assert all(r[7] is not None and r[8] is not None for r in rows)  # the node's systems row
    assert "2 configurations x 2 node kinds x 2 rounds = 8 runs" in out
    assert f"on {SHAPE_A}: ok" in out and f"on {SHAPE_B}: ok" in out


def test_a_placement_runs_only_on_its_node_with_replicas_on_its_cores(ray_cluster, db_path,
                                                                     capsys):
    # Each node has 2 CPUs, one left to Ray's processes: 1 thread x 2 replicas does not fit
    # the other one and is left out, said so; the row names the core left to Ray.
    assert main(["run", *QUICK, "--batch", "1", "--replicas", "1", "2", "--rounds", "1",
                 "--placement", f"shape={SHAPE_A}", "--address", ray_cluster.address,
                 "--db", str(db_path)]) == 0
    assert "1 threads x 2 replicas = 2 > 1 cores" in capsys.readouterr().out
    rows = _rows(db_path)
    assert [(r[0], r[3], r[5]) for r in rows] == [(SHAPE_A, "ok", 1)]
    with open_db(db_path) as con:
        [(left,)] = con.execute("SELECT extra->>'left_to_ray' FROM runs").fetchall()
    assert left.startswith("1 core (CPU ") and left.endswith(
        ") left to Ray's processes; the run used the node's other cores")


def test_the_comparison_never_blends_two_node_kinds(ray_cluster, db_path):
    from engine.analysis.compare import aggregate
    from store.runs import sweep_rounds

    assert main(["run", *QUICK, "--batch", "1", "--rounds", "1", "--fleet",
                 "--address", ray_cluster.address, "--db", str(db_path)]) == 0
    with open_db(db_path) as con:
        sweep = con.execute("SELECT sweep_id FROM sweeps").fetchone()[0]
        results = aggregate(sweep_rounds(con, sweep))
    assert sorted(r.contender for r in results) == sorted(
        [f"selftest (python) @{SHAPE_A}", f"selftest (python) @{SHAPE_B}"])
    # the pages' setting pickers: one host, two shapes, two settings (never one figure)
    from store.queries import settings
    with open_db(db_path) as con:
        picked = settings(con, "inference")
    assert sorted(picked.machine_shape) == sorted([SHAPE_A, SHAPE_B])
    assert len(set(picked.system_id)) == 1


@pytest.mark.parametrize("argv, field, words", [
    (["--placement", "shape=m7i.4xlarge"], "placement",
     [f"shape:{SHAPE_A}", f"shape:{SHAPE_B}", "2 CPU"]),
    (["--placement", "gpu=1"], "placement", ["shape=NAME", "node=ID"]),
    # 2-CPU nodes, one left to Ray's processes: one CPU for threads x replicas
    (["--fleet", "--threads", "1", "--replicas", "2"], "replicas",
     ["replicas: 2 is out of range", "1..1"]),
    (["--fleet", "--profile", "3"], "profile_steps", ["stays on the node"]),
    (["--fleet", "--machine-shape", "c6i.4xlarge"], "machine_shape", ["shape:NAME"]),
])
def test_bad_cluster_input_is_refused_before_anything_runs(ray_cluster, db_path, capsys, argv,
                                                           field, words):
    assert main(["run", *QUICK, "--batch", "1", "--address", ray_cluster.address,
                 "--db", str(db_path), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {field}: ") and all(w in err for w in words), err
    assert not db_path.exists()  # nothing stored


def test_an_unreachable_address_is_refused_fast_and_stores_nothing(db_path, capsys):
    with socket.socket() as s:  # a port nothing listens on: bound here, never listened
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        assert main(["run", *QUICK, "--batch", "1", "--fleet", "--address",
                     f"127.0.0.1:{port}", "--db", str(db_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: address: cannot reach a Ray head at 127.0.0.1:")
    assert not db_path.exists()
    assert main(["run", *QUICK, "--batch", "1", "--fleet", "--address", "nohost",
                 "--db", str(db_path)]) == 2
    assert "error: address: 'nohost' is not HOST:PORT" in capsys.readouterr().err


def test_a_node_lost_mid_sweep_gives_killed_rows_and_the_rest_completes(ray_cluster, db_path):
    """A third node joins, and is removed while its first run is being timed: that run and
    the two queued behind it are `killed` rows naming the node; the other node's runs are
    all ok. Exactly one row per attempted run."""
    from engine.run.cluster.join import release
    from engine.run.cluster.fleet import cluster_plan, ray_runner
    from engine.run.jobs.sweep import run_sweep
    from engine.scenarios.inference.expand import expand_sweep
    from engine.core.policy import MeasurementPolicy

    import ray

    doomed = ray_cluster.add_node(num_cpus=2, resources={"shape:m6i.4xlarge": 1})
    ray_cluster.wait_for_nodes()
    plan = cluster_plan(ray_cluster.address, [f"shape={SHAPE_A}", "shape=m6i.4xlarge"], False,
                        resolve_shape=lambda name: name)
    assert [n.shape for n in plan.nodes] == [SHAPE_A, "m6i.4xlarge"]
    runner = ray_runner(plan, timeout_s=120, memory_cap_bytes=None)
    policy = MeasurementPolicy(warmup_iters=2, min_time_s=3.0, min_iters=20, max_time_s=4.0)
    specs = expand_sweep(["identity"], ["selftest"], [1, 2, 4], [1], policy=policy, cores=2)
    timing = threading.Event()
    doomed_thread = []

    def on_event(notice, round_no):
        ev = notice.event if isinstance(notice, WorkerEvent) else None  # or a Timing
        if isinstance(ev, Ready) and (ev.node or {}).get("shape") == "m6i.4xlarge":
            doomed_thread.append(threading.get_ident())  # that node's runner thread
        if (isinstance(ev, Progress) and ev.phase == "measure"
                and threading.get_ident() in doomed_thread):
            timing.set()
    box = {}
    t = threading.Thread(target=lambda: box.update(records=run_sweep(
        specs, db=db_path, rounds=1, seed=1, runner=runner, command="test",
        on_event=on_event)))
    t.start()
    assert timing.wait(120)
    ray_cluster.remove_node(doomed, allow_graceful=False)
    ray_cluster.wait_for_nodes()  # later tests see the two nodes they expect
    t.join(300)
    assert not t.is_alive()
    release(runner)
    ray.shutdown()
    rows = _rows(db_path)
    assert len(rows) == 6 == len(box["records"])
    assert [r[3] for r in rows if r[0] == SHAPE_A] == ["ok", "ok", "ok"]
    lost = [r for r in rows if r[0] == "m6i.4xlarge"]
    assert [r[3] for r in lost] == ["killed"] * 3
    assert all("was lost" in r[9] and r[1] and r[1][:8] in r[9] for r in lost)


def test_a_port_that_answers_but_is_not_a_ray_head_is_refused_within_the_bound():
    """Something listens (here a socket that never speaks): Ray's join is bounded, and the
    refusal names the address and how a driver joins. In a process of its own: the join
    Ray started goes on in a thread that this one must not share."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        probe = ("from engine.run.cluster.ray_cluster import connect\n"
                 "from engine.core.errors import UserError\n"
                 "try:\n"
                 f"    connect('127.0.0.1:{port}', timeout_s=3)\n"
                 "except UserError as e:\n"
                 "    print(e.field, e)\n")
        out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                             text=True, timeout=120).stdout
    assert out.startswith(f"address address: 127.0.0.1:{port} answers but is not a Ray head")
    assert f"ray start --address=127.0.0.1:{port}" in out


def test_node_tags_are_checked_against_the_catalog_and_one_shape_runs_once(ray_cluster):
    """A node's shape tag the catalog lacks is refused naming the node and its tag; two
    chosen nodes that resolve to one shape would be one machine in every figure: refused."""
    from engine.run.cluster.fleet import cluster_plan
    from engine.core.errors import UserError

    import ray

    def catalog(name):
        if name == SHAPE_B:
            raise UserError(f"machine_shape: {name!r} is not a shape of the price catalog; "
                            "closest: c6i.8xlarge", field="machine_shape")
        return name
    try:
        with pytest.raises(UserError) as e:
            cluster_plan(ray_cluster.address, None, True, resolve_shape=catalog)
        assert e.value.field == "placement"
        assert f"is tagged shape:{SHAPE_B}: '{SHAPE_B}' is not a shape" in str(e.value)
        with pytest.raises(UserError) as e:
            cluster_plan(ray_cluster.address, None, True, resolve_shape=lambda n: SHAPE_A)
        assert (e.value.field, "two of the chosen nodes have the same shape" in str(e.value)) \
            == ("placement", True)
    finally:
        ray.shutdown()


def test_a_node_host_refuses_a_start_that_arrives_after_its_kill():
    """Calls to the threaded host actor may overtake each other: a group the driver has
    already killed or closed never starts a worker afterwards."""
    from engine.run.cluster.node_host import NodeHost
    from engine.run.process.machine import system_info

    host = NodeHost("n1", SHAPE_A)
    host.kill("g1")
    host.start("g1", [], intra=1, inter=1, kind="inference", memory_cap_bytes=None,
               mode="bench", pin=False, slots=None, sync=None)
    assert host.workers == {} and host.close("g1") == (None, "")
    facts = host.facts()
    assert (facts["shape"], facts["system"]["system_id"]) == (SHAPE_A,
                                                             system_info()["system_id"])


def test_a_node_that_fails_stops_the_others_with_the_reason_not_as_a_user_cancel(
        db_path, worker_env):
    """FleetRunner over two runners on this machine: the second's executor fails once the
    first's run is being timed. The first's run ends in one `killed` row saying another
    node failed (not "cancelled by the user"), and the failure reaches the caller."""
    import threading

    from engine.run.cluster.fleet import FleetRunner
    from engine.run.process.runner import Runner
    from engine.scenarios.inference.expand import expand_sweep
    from engine.core.policy import MeasurementPolicy

    timing = threading.Event()

    class Broken:  # an executor that cannot start a worker (its node's setup is broken)
        def start(self, *a, **k):
            assert timing.wait(120)
            raise RuntimeError("no python on the node")

    cancel = threading.Event()
    good, bad = Runner(timeout_s=120, cancel=cancel), Runner(timeout_s=120, cancel=cancel,
                                                             executor=Broken())
    fleet = FleetRunner([good, bad], cancel)
    [spec] = expand_sweep(["identity"], ["selftest"], [1], [1], cores=2, policy=(
        MeasurementPolicy(warmup_iters=1, min_time_s=60.0, min_iters=5, max_time_s=60.0)))
    records = []

    def on_event(notice):
        ev = notice.event if isinstance(notice, WorkerEvent) else None  # or a Timing
        if isinstance(ev, Progress) and ev.phase == "measure":
            timing.set()
    with pytest.raises(RuntimeError, match="no python on the node"):
        fleet.run([spec], on_record=records.append, on_event=on_event)
    assert [(r.status, r.reason) for r in records] == [
        ("killed", "stopped: the sweep on another node failed (RuntimeError: no python on "
                   "the node)")]


def test_a_fleet_tune_tunes_each_node_kind_on_its_cores_and_names_the_cheapest(
        ray_cluster, db_path, capsys):
    """The autotuner per machine shape (issue 27 part 3): one tuning, its own sweep, on each
    node kind at once, each candidate fit to that node's cores and priced on its shape (an
    estimate: these nodes give workers 1 of the shape's cores), then the cheapest per 1 M
    at the bound and the cheapest per provider."""
    code = main(["tune", "--model", "identity", "--framework", "selftest", "--bound-ms", "50",
                 "--batches", "1", "2", "--probe-s", "0.05", "--search-queries",
                 "1000", "--max-probes", "2", "--start-qps", "1000",
                 "--executor", "ray", "--fleet", "--address", ray_cluster.address,
                 "--db", str(db_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    with open_db(db_path) as con:
        runs = con.execute("SELECT sweep_id, machine_shape, kind, intra_threads, replicas, "
                           "status FROM runs").fetchall()
        commands = con.execute("SELECT command FROM sweeps").fetchall()
    sweeps = {}
    for sweep_id, shape, kind, threads, replicas, status in runs:
        sweeps.setdefault(sweep_id, set()).add(shape)
        assert (threads, replicas) == (1, 1)  # each node leaves 1 of its 2 CPUs to Ray
    assert sorted(s for shapes in sweeps.values() for s in shapes) == sorted([SHAPE_A, SHAPE_B])
    assert len(commands) == 2 and all(c[0].startswith("python -m engine tune") for c in commands)
    assert {k for *_, k, _, _, _ in runs} == {"inference", "serve"}
    conclusion = out[out.index("every node kind"):]
    assert f"  {SHAPE_A}: selftest python fp32" in conclusion
    assert f"  {SHAPE_B}: selftest python fp32" in conclusion
    assert "(estimate)" in conclusion  # 1 of the shape's cores, scaled to the whole machine
    # the OCI shape's hourly price per core is the lower here: it is the cheapest
    assert f"cheapest per 1 M at the bound: {SHAPE_B}:" in conclusion
    # a winner VALID at the highest target its 1,000 queries test (1,000 QPS under 50 ms)
    # has a lower-bound max, so its cost is an upper bound: "at most $..."
    [per] = [line for line in conclusion.splitlines() if line.startswith("best per provider:")]
    aws = next(line for line in conclusion.splitlines() if line.startswith("  c6i.4xlarge: "))
    at_most = "at most " if "≥ " in aws else ""
    assert per.startswith("best per provider: OCI: ") and f"; AWS: c6i.4xlarge, {at_most}$" in per
