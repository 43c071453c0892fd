"""The resident-memory cap's parts, on fake cgroup trees: finding this process's memory
cgroup (v1 and v2), setting and lifting a run's limit in the right order, reading the
kernel's OOM kills, and the watchdog where no cgroup can be made. The real kernel and a real
worker are in tests/test_faults.py."""

import threading
from pathlib import Path

from engine.run.process.cgroups import WorkerCgroup, make_worker_cgroup, own_memory_cgroup
from engine.worker.memcap import ResidentCap, tree_rss_bytes

V1_MOUNTS = ("35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
             "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n")


def _files(tmp_path, mounts: str, cgroup: str, point: str):
    (tmp_path / "mountinfo").write_text(mounts.replace("/sys/fs/cgroup", point))
    (tmp_path / "cgroup").write_text(cgroup)
    return str(tmp_path / "mountinfo"), str(tmp_path / "cgroup")


def test_a_v1_memory_cgroup_is_found_under_its_mount(tmp_path):
    root = tmp_path / "fs"
    (root / "memory" / "process_api" / "abc").mkdir(parents=True)
    m, c = _files(tmp_path, V1_MOUNTS, "4:memory:/process_api/abc\n0::/\n", str(root))
    assert own_memory_cgroup(m, c) == str(root / "memory" / "process_api" / "abc")


def test_a_v2_group_counts_only_when_memory_is_enabled_for_its_children(tmp_path):
    root = tmp_path / "fs"
    (root / "user.slice").mkdir(parents=True)
    mounts = "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
    m, c = _files(tmp_path, mounts, "0::/user.slice\n", str(root))
    (root / "user.slice" / "cgroup.subtree_control").write_text("cpu io\n")
    assert own_memory_cgroup(m, c) is None
    (root / "user.slice" / "cgroup.subtree_control").write_text("cpu io memory\n")
    assert own_memory_cgroup(m, c) == str(root / "user.slice")


def test_no_cgroup_files_no_cgroup(tmp_path):
    assert own_memory_cgroup(str(tmp_path / "none"), str(tmp_path / "none")) is None
    assert make_worker_cgroup(str(tmp_path / "missing")) is None


def test_a_folder_without_the_controllers_files_is_no_cgroup_and_is_left_clean(tmp_path):
    assert make_worker_cgroup(str(tmp_path)) is None
    assert list(tmp_path.iterdir()) == []  # the child it tried is removed again


def _v1(tmp_path: Path, usage: int) -> Path:
    for name, text in (("memory.usage_in_bytes", str(usage)),
                       ("memory.limit_in_bytes", "9223372036854771712"),
                       ("memory.memsw.limit_in_bytes", "9223372036854771712"),
                       ("memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n")):
        (tmp_path / name).write_text(text)
    return tmp_path


def test_v1_a_run_is_limited_to_what_the_worker_held_plus_the_cap_then_lifted(tmp_path):
    g = _v1(tmp_path, usage=300 * 2**20)
    cap = ResidentCap(256 * 2**20, str(g))
    assert cap.method == "cgroup memory.limit_in_bytes"
    with cap.run():
        assert (g / "memory.limit_in_bytes").read_text() == str(556 * 2**20)
        assert (g / "memory.memsw.limit_in_bytes").read_text() == str(556 * 2**20)
        assert WorkerCgroup(str(g)).limit_bytes() == 556 * 2**20
    assert (g / "memory.limit_in_bytes").read_text() == "-1"
    assert (g / "memory.memsw.limit_in_bytes").read_text() == "-1"
    assert WorkerCgroup(str(g)).oom_kills() == 0
    (g / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
    assert WorkerCgroup(str(g)).oom_kills() == 1


def test_v2_a_run_is_limited_with_memory_max_and_no_swap(tmp_path):
    for name, text in (("memory.current", str(100 * 2**20)), ("memory.max", "max"),
                       ("memory.swap.max", "max"),
                       ("memory.events", "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")):
        (tmp_path / name).write_text(text)
    cap = ResidentCap(64 * 2**20, str(tmp_path))
    assert cap.method == "cgroup memory.max"
    with cap.run():
        assert (tmp_path / "memory.max").read_text() == str(164 * 2**20)
        assert (tmp_path / "memory.swap.max").read_text() == "0"
    assert (tmp_path / "memory.max").read_text() == "max"
    assert (tmp_path / "memory.swap.max").read_text() == "max"
    group = WorkerCgroup(str(tmp_path))
    assert group.v2 and group.oom_kills() == 1 and group.limit_bytes() is None


def test_without_a_cgroup_the_watchdog_calls_a_run_over_its_cap():
    sizes = iter([500 * 2**20, 600 * 2**20, 800 * 2**20])  # base, within, over
    said = []
    over = threading.Event()
    cap = ResidentCap(256 * 2**20, None, rss=lambda: next(sizes, 800 * 2**20),
                      watch_s=0.001, on_over=lambda text: (said.append(text), over.set()))
    assert cap.method == "RSS watchdog"
    with cap.run():
        assert over.wait(10)
    assert said == ["resident memory 800 MiB, 300 MiB over the 500 MiB the worker held when "
                    "the run began; the cap is 256 MiB per run (RSS watchdog, read every 1 ms)"]


def test_no_cap_no_watchdog_and_no_write(tmp_path):
    g = _v1(tmp_path, usage=1)
    cap = ResidentCap(None, str(g))
    assert cap.method is None
    with cap.run():
        assert (g / "memory.limit_in_bytes").read_text() == "9223372036854771712"


def test_a_process_tree_counts_itself():
    assert tree_rss_bytes() > 10 * 2**20  # this interpreter, with pytest loaded
