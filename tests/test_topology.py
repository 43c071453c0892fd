"""Whole cores from a fixed topology (issue 26): cores counted from (package, core) and
distinct across replicas, each replica on whole cores, pinning that means N threads are N
cores whether a machine numbers a core's hardware threads i and i+N/2 or i and i+1; and
the E5 worked example priced from the counted cores."""

import pytest

from engine.analysis.cost import load_catalog
from engine.analysis.cost_machines import basis, figure, machine_rows
from engine.core.topology import (cores_counted, leave_one_core, split_whole_cores,
                                  whole_cores)
from engine.run.process import pinning
from engine.run.process.replicas import replicas_cores_used

# 16 logical CPUs on 8 physical cores, one package.
HALVES = {c: (0, c % 8) for c in range(16)}       # siblings i and i+8 (Intel on Linux)
ADJACENT = {c: (0, c // 2) for c in range(16)}    # siblings i and i+1 (many clouds' guests)
CPUS = range(16)


def test_cores_are_grouped_and_counted_from_package_and_core():
    assert whole_cores(CPUS, HALVES)[:2] == [(0, 8), (1, 9)]
    assert whole_cores(CPUS, ADJACENT)[:2] == [(0, 1), (2, 3)]
    assert cores_counted(range(8), HALVES) == 8 and cores_counted(range(8), ADJACENT) == 4
    two_sockets = {0: (0, 0), 1: (1, 0)}  # the same core id on another package
    assert cores_counted([0, 1], two_sockets) == 2
    assert cores_counted([0, 1], {}) == 2  # no topology: a core per CPU


@pytest.mark.parametrize("topology", [HALVES, ADJACENT], ids=["i/i+8", "i/i+1"])
def test_a_pinned_worker_gets_one_thread_per_core_of_its_own_on_either_numbering(topology):
    worker, parent = pinning.plan(4, set(CPUS), topology)
    assert len(worker) == 4 and cores_counted(worker, topology) == 4
    # its cores' other hardware threads go to nobody: the parent keeps off whole cores
    assert cores_counted(parent, topology) == 4
    assert not {topology[c] for c in worker} & {topology[c] for c in parent}
    # 8 threads take every core, one thread each: pinned, the parent stays where it is
    worker, parent = pinning.plan(8, set(CPUS), topology)
    assert cores_counted(worker, topology) == 8 and parent == tuple(CPUS)
    # 12 threads need hardware threads: 6 whole cores, both threads of each
    worker, parent = pinning.plan(12, set(CPUS), topology)
    assert len(worker) == 12 and cores_counted(worker, topology) == 6
    assert cores_counted(parent, topology) == 2
    assert pinning.plan(16, set(CPUS), topology) is None  # every CPU: nothing to keep apart
    # the last CPU (where a contention run's neighbour goes) is one of the worker's
    assert 15 in pinning.plan(1, set(CPUS), topology)[0]
    assert 15 in pinning.replica_cores(CPUS, 2, 4, topology)[-1]


def test_the_old_plan_took_the_last_cpus_whatever_the_topology():
    last8 = range(8, 16)  # what plan(8) pinned before: 8 cores on one machine, 4 on another
    assert (cores_counted(last8, HALVES), cores_counted(last8, ADJACENT)) == (8, 4)


@pytest.mark.parametrize("topology", [HALVES, ADJACENT], ids=["i/i+8", "i/i+1"])
def test_replicas_get_whole_cores_no_two_share_one(topology):
    four = pinning.replica_cores(CPUS, 4, 4, topology)
    assert [len(r) for r in four] == [4, 4, 4, 4]
    cores = [{topology[c] for c in r} for r in four]
    assert [len(c) for c in cores] == [2, 2, 2, 2]  # 4 threads on 2 whole cores each
    assert len(set().union(*cores)) == 8  # distinct across replicas
    two = pinning.replica_cores(CPUS, 2, 4, topology)  # 8 threads on 8 cores: one per core
    assert [cores_counted(r, topology) for r in two] == [4, 4]
    assert cores_counted(two[0] + two[1], topology) == 8
    # odd threads on hardware threads cannot all have whole cores: core order, siblings
    # together, never more than one core shared between two replicas
    assert split_whole_cores(CPUS, topology, 5, 3) is None
    five = pinning.replica_cores(CPUS, 5, 3, topology)
    assert [len(r) for r in five] == [3] * 5


def test_replicas_cores_are_counted_once_not_summed():
    # The old split: consecutive logical CPUs on siblings i/i+8; 4 x 4 summed to 16 cores.
    old = [tuple(range(i * 4, i * 4 + 4)) for i in range(4)]
    facts = [{"cores_used": 4, "core_ids": sorted({"%s:%s" % HALVES[c] for c in r})}
             for r in old]
    assert sum(f["cores_used"] for f in facts) == 16
    assert replicas_cores_used(facts) == 8
    assert replicas_cores_used([{"cores_used": 4}, {"cores_used": 4}]) is None  # unknown


E5 = next(m for m in load_catalog() if m.shape == "VM.Standard.E5.Flex 16 OCPU/32 GB")


def _splits(cores_of_4x3: int) -> list[dict]:
    """The benchmark machine (16 CPUs, siblings i/i+8): 8 threads x 1 replica pinned to 8
    cores at 700/s, and 4 threads x 3 replicas on consecutive CPUs 0-11 at 600/s."""
    row = dict(runs=3, threads_per_core=2, machine_shape=None, selected=True,
               cpu_model="Xeon", platform="Linux-x86_64")
    return [{**row, "threads": 8, "replicas": 1, "throughput": 700.0, "cores_used": 8},
            {**row, "threads": 4, "replicas": 3, "throughput": 600.0,
             "cores_used": cores_of_4x3}]


def test_the_e5_worked_example_estimate_and_cost_from_counted_cores():
    summed = sum(cores_counted(range(i * 4, i * 4 + 4), HALVES) for i in range(3))
    counted = cores_counted(range(12), HALVES)
    assert (summed, counted) == (12, 8)
    # Summed, the 4 x 3 split claimed the most cores (12) and set the per-core figure:
    # 600 / 12 = 50 per core x 16 OCPUs = 800/s, $0.189 per 1 M.
    [before] = machine_rows([E5], basis(_splits(summed)))
    assert before["throughput"] == pytest.approx(800.0)
    assert round(before["cost_per_million"], 3) == 0.189
    # Counted once, both splits hold 8 cores; the better one (700/s) sets 87.5 per core:
    # 1,400/s on E5's 16 cores, $0.544 / (1,400 x 3,600) x 1e6 = $0.108 per 1 M.
    [after] = machine_rows([E5], basis(_splits(counted)))
    assert after["throughput"] == pytest.approx(1400.0)
    assert round(after["cost_per_million"], 3) == 0.108
    assert after["estimate"] is True
    assert after["assumption"] == ("estimate: 87.5 samples/s per core from Xeon (best split "
                                   "8 threads x 1 replica at 8 cores) scaled to 16 cores")
    assert figure(basis(_splits(counted)), E5).split.threads == 8


@pytest.mark.parametrize("topology, ray", [(HALVES, (0, 8)), (ADJACENT, (0, 1))],
                         ids=["i/i+8", "i/i+1"])
def test_a_cluster_node_leaves_one_whole_core_to_rays_processes(topology, ray):
    left, rest = leave_one_core(CPUS, topology)
    assert left == ray and len(rest) == 14 and cores_counted(rest, topology) == 7
    assert not set(left) & set(rest)
    assert leave_one_core([0, 1], {0: (0, 0), 1: (0, 0)}) == ((), (0, 1))  # one core: kept


def test_a_node_host_keeps_its_workers_off_the_core_left_to_ray():
    import os

    from engine.run.cluster.node_host import NodeHost

    every = sorted(os.sched_getaffinity(0))
    host = NodeHost("n1", None)
    facts = host.facts()
    if len(every) < 2:
        assert facts["ray_cpus"] == [] and facts["cores"] == len(every)
        return
    assert facts["ray_cpus"] and facts["cores"] == len(every) - len(facts["ray_cpus"])
    assert not set(facts["ray_cpus"]) & set(host.cores)


def test_the_row_of_a_node_run_says_which_core_was_left_to_ray():
    from engine.run.process.records import base_fields
    from engine.scenarios.inference.spec import RunSpec

    spec = RunSpec(model="identity", framework="selftest", batch_size=1, intra_threads=1)
    common = dict(run_id="r", tags={}, ready=None, started_at=None, ended_at=None,
                  load_avg=None, memory_cap_bytes=None, timeout_s=1.0, git_commit="g",
                  system_id="s")
    on_node = base_fields(spec, **common, node={"node_id": "n", "ray_cpus": [0, 8]})
    assert on_node["extra"]["left_to_ray"] == ("1 core (CPU 0, 8) left to Ray's processes; "
                                               "the run used the node's other cores")
    assert "left_to_ray" not in base_fields(spec, **common)["extra"]
