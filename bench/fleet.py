"""Sweeps through Ray against local subprocesses, side by side in one run (issue #15).

Starts a local Ray cluster of two nodes on this machine (ray.cluster_utils.Cluster, each
tagged with a catalog shape), then measures, alternating local and Ray:

1. Dispatch overhead per worker group: a group of one short run (selftest identity,
   --short-time s timed), its wall time through Runner.run minus the time the worker spent
   on the run itself (its record's start to end). The rest is starting the worker process
   (and, through Ray, reaching the node's host actor and relaying its lines). Target: under
   1 s per worker group through Ray. The host actor's one-time start is printed apart.
2. The share of a sweep's wall time spent measuring: the same sweep (by default torch
   mobilenet_v3_small, 64 px, batches 1 2 4, 1 thread, --min-time s per run, --rounds
   rounds) run locally, through Ray on one node, and as a fleet sweep on both nodes at
   once; per node, the sum of its runs' timed windows over the sweep's wall time, and where
   the rest went. Target: at least 75 % through Ray. Each round starts fresh workers, so a
   framework import per worker group per round is part of every sweep, local or not.

Both nodes share this machine's cores: the one-node Ray sweep is the like-for-like figure
against local, and the fleet's shows what two nodes importing a framework at once on two
shared cores cost; neither compares machines. Results go to a temporary database; nothing touches ./data.

    .venv/bin/python bench/fleet.py [--groups 8] [--model mobilenet_v3_small]
        [--framework torch] [--rounds 2] [--min-time 10]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.run.process.runner import Runner  # noqa: E402
from engine.run.jobs.sweep import run_sweep  # noqa: E402
from engine.core import MeasurementPolicy  # noqa: E402
from engine.scenarios.inference.expand import expand_sweep

SHAPES = ("c6i.4xlarge", "VM.Standard.E4.Flex 16 OCPU/32 GB")


def _worker_s(records) -> float:
    return sum((r.ended_at - r.started_at).total_seconds() for r in records)


def group_overhead(runner, spec) -> float:
    t0 = time.perf_counter()
    records = runner.run([spec], on_record=lambda r: None)
    wall = time.perf_counter() - t0
    assert records[0].status == "ok", records[0].reason
    return wall - _worker_s(records)


def measuring_share(specs, runner, db, rounds, label) -> list[tuple[str, float, float]]:
    """(node, share measuring, wall s) per node of one sweep."""
    t0 = time.perf_counter()
    records = run_sweep(specs, db=db, rounds=rounds, seed=3, runner=runner,
                        command=f"bench/fleet.py {label}")
    wall = time.perf_counter() - t0
    bad = [r for r in records if r.status != "ok"]
    assert not bad, bad[0].reason
    by: dict[str, dict] = {}
    for r in records:  # where each node's time went, by phase of its runs
        d = by.setdefault(r.machine_shape or "this machine",
                          {"measure": 0.0, "warm-up": 0.0, "runs": 0.0, "import": 0.0})
        d["measure"] += r.measured_s
        d["warm-up"] += r.warmup_s or 0.0
        d["runs"] += (r.ended_at - r.started_at).total_seconds()
        d["import"] = max(d["import"], r.import_s or 0.0)
    return [(node, d["measure"] / wall, wall, d) for node, d in sorted(by.items())]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--groups", type=int, default=8, help="worker groups timed per executor")
    p.add_argument("--short-time", type=float, default=0.2)
    p.add_argument("--model", default="mobilenet_v3_small")
    p.add_argument("--framework", default="torch")
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--min-time", type=float, default=10.0)
    args = p.parse_args()

    tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths are length-limited
    os.environ.update(RAY_TMPDIR=tmp, RAY_USAGE_STATS_ENABLED="0",
                      PYTHONPATH=os.pathsep.join(
                          x for x in (str(ROOT), os.environ.get("PYTHONPATH")) if x))
    import ray
    from ray.cluster_utils import Cluster

    from engine.run.cluster.join import release
    from engine.run.cluster.fleet import cluster_plan, ray_runner
    from engine.run.cluster.ray_cluster import RayExecutor, cluster_nodes, connect

    cpus = len(os.sched_getaffinity(0))
    t0 = time.perf_counter()
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": cpus, "resources": {f"shape:{SHAPES[0]}": 1}})
    cluster.add_node(num_cpus=cpus, resources={f"shape:{SHAPES[1]}": 1})
    cluster.wait_for_nodes()
    connect(cluster.address)
    print(f"local Ray cluster of 2 nodes x {cpus} CPUs up in {time.perf_counter() - t0:.1f} s")
    try:
        node = next(n for n in cluster_nodes() if n.shape == SHAPES[0])
        t0 = time.perf_counter()
        ex = RayExecutor(node)
        ray.get(ex.host.facts.remote())
        actor_s = time.perf_counter() - t0
        short = expand_sweep(["identity"], ["selftest"], [1], [1], policy=MeasurementPolicy(
            warmup_iters=2, min_time_s=args.short_time, min_iters=20, max_time_s=1.0))[0]
        local, remote = Runner(timeout_s=120), Runner(timeout_s=120, executor=ex)
        lo, ra = [], []
        for _ in range(args.groups):  # alternating, so drift falls on both alike
            lo.append(group_overhead(local, short))
            ra.append(group_overhead(remote, short))
        ex.shutdown()
        med_lo, med_ra = statistics.median(lo), statistics.median(ra)
        print(f"\n1. dispatch overhead per worker group ({args.groups} groups each, one "
              f"{args.short_time:g} s run per group; wall time minus the run's own)")
        print(f"   local subprocess: median {med_lo:.3f} s [{min(lo):.3f}-{max(lo):.3f}]")
        print(f"   through Ray:      median {med_ra:.3f} s [{min(ra):.3f}-{max(ra):.3f}]"
              f"  (host actor's one-time start: {actor_s:.2f} s)")
        print(f"   Ray adds {med_ra - med_lo:+.3f} s per group; Ray/local = "
              f"{med_ra / med_lo:.2f}x; target under 1 s per group through Ray: "
              f"{'met' if med_ra < 1.0 else 'NOT met'}")

        policy = MeasurementPolicy(min_time_s=args.min_time, min_iters=20, warmup_iters=10)
        specs = expand_sweep([args.model], [args.framework], [1, 2, 4], [1],
                             image_size=args.image_size, policy=policy)
        one = ray_runner(cluster_plan(cluster.address, [f"shape={SHAPES[0]}"], False,
                                      resolve_shape=lambda n: n),
                         timeout_s=900, memory_cap_bytes=None)
        fleet = ray_runner(cluster_plan(cluster.address, None, True,
                                        resolve_shape=lambda n: n),
                           timeout_s=900, memory_cap_bytes=None)
        with tempfile.TemporaryDirectory() as d:
            local_share = measuring_share(specs, Runner(timeout_s=900), Path(d) / "l.duckdb",
                                          args.rounds, "local")
            ray_share = measuring_share(specs, one, Path(d) / "r.duckdb", args.rounds, "ray")
            fleet_share = measuring_share(specs, fleet, Path(d) / "f.duckdb", args.rounds,
                                          "fleet")
        release(one)
        release(fleet)
        print(f"\n2. share of the sweep's wall time spent measuring ({args.framework} "
              f"{args.model} {args.image_size} px, batches 1 2 4, 1 thread, "
              f"{args.min_time:g} s per run, {args.rounds} rounds)")
        for label, rows in (("local", local_share), ("ray", ray_share),
                            ("fleet", fleet_share)):
            for node, share, wall, d in rows:
                other = d["runs"] - d["measure"] - d["warm-up"]
                print(f"   {label:5} {node:36} {share:6.1%} of {wall:.1f} s measuring; in "
                      f"runs {d['runs'] / wall:.1%} (warm-up {d['warm-up']:.1f} s, load, "
                      f"build and output check {other:.1f} s); outside runs "
                      f"{wall - d['runs']:.1f} s (worker start, framework import "
                      f"{d['import']:.1f} s per worker, dispatch)")
        ray_frac, local_frac = ray_share[0][1], local_share[0][1]
        worst = min(row[1] for row in fleet_share)
        print(f"   one node through Ray / local = {ray_frac / local_frac:.2f}x; target at "
              f"least 75 % measuring through Ray: {'met' if ray_frac >= 0.75 else 'NOT met'}")
        print(f"   fleet (both nodes at once, sharing this machine's {cpus} cores): worst "
              f"node {worst:.1%}, {worst / local_frac:.2f}x local")
    finally:
        ray.shutdown()
        cluster.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
