"""Machine identity (issue #15, first part): what a worker reads of its machine (SMT
threads per core, the CPU flags that change speed, the governor) and the catalog shape a
user says the machine is, refused with the closest names when the catalog lacks it."""

import pytest

from engine.analysis.cost import load_catalog, resolve_shape
from engine.cli import main
from engine.core.errors import UserError
from engine.worker.machine import (SPEED_FLAGS, core_ids_of, parse_cpu_flags,
                                   parse_siblings, physical_cores_of)
from store.db import open_db

SAPPHIRE = ("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
            "flags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni amx_bf16 amx_tile\n")


def test_the_flags_that_change_kernels_are_read_in_a_fixed_order():
    assert parse_cpu_flags(SAPPHIRE) == SPEED_FLAGS
    assert parse_cpu_flags("flags : sse2 avx2 fma\n") == ()
    assert parse_cpu_flags("flags : avx512_vnni avx512f\nflags : amx_bf16\n") == (
        "avx512f", "avx512_vnni")  # the first CPU's line only
    assert parse_cpu_flags("") == ()


@pytest.mark.parametrize("text, n", [("0-1\n", 2), ("0,64", 2), ("3", 1), ("0-3", 4),
                                     ("", None), ("x-y", None)])
def test_hyperthreads_per_core_come_from_the_sibling_list(text, n):
    assert parse_siblings(text) == n


def test_pinned_cpus_count_as_the_physical_cores_they_belong_to(tmp_path):
    # 2 sockets x 2 cores x 2 threads; Linux numbers cpu0/cpu4 as siblings here
    for cpu in range(8):
        topo = tmp_path / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "core_id").write_text(f"{cpu % 2}\n")
        (topo / "physical_package_id").write_text(f"{(cpu // 2) % 2}\n")
    root = str(tmp_path)
    assert physical_cores_of([0, 4], root) == 1  # SMT siblings: one core
    assert physical_cores_of([0, 1], root) == 2
    assert physical_cores_of([0, 2], root) == 2  # same core id, other socket
    assert physical_cores_of(range(8), root) == 4
    assert physical_cores_of([9], root) is None  # /sys does not say
    # named, so that replicas on siblings of one core count it once (engine/run/process/runner.py)
    assert core_ids_of([0, 4, 1], root) == ["0:0", "0:1"]
    assert core_ids_of([0, 9], root) is None


def test_a_shape_is_matched_as_prices_list_prints_it_or_refused_with_the_closest():
    machines = load_catalog()
    assert resolve_shape("c6i.8xlarge", machines).shape == "c6i.8xlarge"
    assert resolve_shape("  vm.standard.e4.flex 16 ocpu/32  gb ", machines).shape == \
        "VM.Standard.E4.Flex 16 OCPU/32 GB"
    full = next(m.shape for m in machines if m.shape.startswith("VM.Standard3.Flex 16 OCPU"))
    assert resolve_shape("VM.Standard3.Flex 16 OCPU/32 GB", machines).shape == full
    with pytest.raises(UserError) as e:
        resolve_shape("c6i.8xlarg", machines)
    assert e.value.field == "machine_shape"
    assert str(e.value).startswith("machine_shape: 'c6i.8xlarg' is not a shape of the price "
                                   "catalog; closest: c6i.8xlarge")


def test_every_run_records_its_shape_and_machine_facts(db_path, worker_env, capsys,
                                                       monkeypatch):
    monkeypatch.setenv("BENCH_MACHINE_SHAPE", "m6i.4xlarge")  # the config default
    sweep = ["run", "--model", "identity", "--framework", "selftest", "--batch", "1",
             "--min-time", "0.02", "--min-iters", "5", "--warmup", "1", "--rounds", "1",
             "--no-table", "--db", str(db_path)]
    assert main(sweep) == 0
    assert main([*sweep, "--machine-shape", "c6i.8xlarge"]) == 0  # the option beats it
    with open_db(db_path) as con:
        rows = con.execute("SELECT machine_shape, threads_per_core >= 1, cpu_flags IS NOT NULL, "
                           "(extra->>'cores_used')::INTEGER FROM runs "
                           "ORDER BY started_at").fetchall()
    # one thread, pinned to one CPU: one physical core, whatever the SMT
    assert rows == [("m6i.4xlarge", True, True, 1), ("c6i.8xlarge", True, True, 1)]
    # whether the host is a VM, where cpuinfo says (x86: its flags line)
    from engine.worker.machine import hypervisor_of
    with open("/proc/cpuinfo") as f:
        expected = hypervisor_of(f.read())
    with open_db(db_path) as con:
        said = con.execute("SELECT (extra->>'hypervisor')::BOOLEAN FROM runs").fetchall()
    assert said == [(expected,), (expected,)]
    capsys.readouterr()
    assert main([*sweep, "--machine-shape", "c6i.8xlarg"]) == 2
    assert capsys.readouterr().err.startswith(
        "error: machine_shape: 'c6i.8xlarg' is not a shape of the price catalog; closest: ")
    with open_db(db_path) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (2,)  # nothing more
