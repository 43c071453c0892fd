"""A catalog model's calibrated weights made once per runner (engine/worker/weights.py): the
rule with fakes and an injected clock, then real torch and TensorFlow builds in fresh
subprocesses (this pytest process imports neither framework): TensorFlow weights read from
the file another process wrote are bit for bit the ones this process calibrates; torch
calibrates in every worker."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.core.paths import PROJECT_ROOT
from engine.core.policy import WEIGHTS_ENV
from engine.run.process.executors import LocalProcesses
from engine.scenarios.inference.spec import RunSpec
from engine.worker.weights import CALIBRATED, FROM_FILE, calibrated, weights_path


class _Model:
    """What the rule sees of a model: calibrate, write, read, each call logged."""

    def __init__(self, clock):
        self.calls, self.clock = [], clock

    def calibrate(self):
        self.calls.append("calibrate")
        self.clock.t += 1.5

    def write(self, path: Path):
        self.calls.append(("write", path.name))
        path.write_bytes(b"weights")

    def read(self, path: Path):
        self.calls.append(("read", path.read_bytes()))


class _Clock:
    t = 10.0

    def __call__(self):
        return self.t


def test_the_first_worker_calibrates_and_writes_the_next_reads_and_calibrates_nothing(tmp_path):
    path, clock = tmp_path / "w.npz", _Clock()
    first = _Model(clock)
    assert calibrated(path, first.calibrate, first.write, first.read, clock) == (CALIBRATED, 1.5)
    # written under a temporary name, then renamed: no part file is left
    assert first.calls == ["calibrate", ("write", f".w.npz.{os.getpid()}.part")]
    assert [p.name for p in tmp_path.iterdir()] == ["w.npz"]
    later = _Model(clock)
    assert calibrated(path, later.calibrate, later.write, later.read, clock) == (FROM_FILE, 0.0)
    assert later.calls == [("read", b"weights")]


def test_without_a_folder_every_worker_calibrates_and_writes_nothing():
    clock = _Clock()
    m = _Model(clock)
    assert calibrated(None, m.calibrate, m.write, m.read, clock) == (CALIBRATED, 1.5)
    assert m.calls == ["calibrate"]


def test_a_write_that_fails_leaves_no_file_and_the_run_its_calibrated_weights(tmp_path):
    clock = _Clock()
    m = _Model(clock)

    def full(path):
        path.write_bytes(b"half")
        raise OSError(28, "No space left on device")

    assert calibrated(tmp_path / "w.pt", m.calibrate, full, m.read, clock) == (CALIBRATED, 1.5)
    assert list(tmp_path.iterdir()) == []


def test_a_file_is_named_by_everything_its_bits_depend_on(tmp_path, monkeypatch):
    spec = RunSpec("resnet18", "torch", 1, 2)
    monkeypatch.delenv(WEIGHTS_ENV, raising=False)
    assert weights_path("torch", "2.14.1", spec, ".pt") is None  # a cluster node's worker
    monkeypatch.setenv(WEIGHTS_ENV, str(tmp_path))
    one = weights_path("torch", "2.14.1", spec, ".pt")
    assert one.parent == tmp_path and one.name.startswith("torch-resnet18-")
    assert one.suffix == ".pt"
    # another batch size builds the same model; another thread count, size, weight policy
    # or version may not
    assert weights_path("torch", "2.14.1", RunSpec("resnet18", "torch", 8, 2), ".pt") == one
    others = {weights_path("torch", "2.14.1", RunSpec("resnet18", "torch", 1, 1), ".pt"),
              weights_path("torch", "2.14.1", RunSpec("resnet18", "torch", 1, 2,
                                                      image_size=128), ".pt"),
              weights_path("torch", "2.14.1", RunSpec("resnet18", "torch", 1, 2,
                                                      weight_policy="random"), ".pt"),
              weights_path("torch", "2.15.0", spec, ".pt")}
    assert len(others) == 4 and one not in others


def test_an_executor_gives_its_workers_one_folder_and_removes_it_when_closed():
    ex = LocalProcesses()
    folder = Path(ex.weights_dir())
    assert folder.is_dir() and ex.weights_dir() == str(folder)
    ex.close()
    assert not folder.exists()
    again = Path(ex.weights_dir())  # the next worker's start makes a new one
    assert again != folder and again.is_dir()
    del ex  # a runner nobody closed: its folder goes with it
    import gc
    gc.collect()
    assert not again.exists()


def test_a_killed_processs_weights_folder_is_removed_by_the_next_one_made(tmp_path,
                                                                          monkeypatch):
    import tempfile

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    orphan = tmp_path / f"bench-weights-{dead}-abc"
    mine = tmp_path / f"bench-weights-{os.getpid()}-def"
    other = tmp_path / "bench-weights-notapid"
    for d in (orphan, mine, other):
        d.mkdir()
    (orphan / "tensorflow-x.npz").write_bytes(b"w")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ex = LocalProcesses()
    made = Path(ex.weights_dir())
    assert made.parent == tmp_path and made.name.startswith(f"bench-weights-{os.getpid()}-")
    assert not orphan.exists() and mine.is_dir() and other.is_dir()
    ex.close()


_TORCH = """
import os, sys, torch
from engine.scenarios.inference.spec import RunSpec
from engine.worker.backends import torch_eager
spec = RunSpec("mobilenet_v3_small", "torch", 1, 1, image_size=64).validate()
os.environ["BENCH_WEIGHTS_DIR"] = sys.argv[1]
for _ in range(2):
    m, how, s = torch_eager.build_model(spec, torch.device("cpu"))
    print(how, s > 0)
"""

_TF = """
import os, sys
import numpy as np
from engine.scenarios.inference.spec import RunSpec
from engine.worker.backends import tf_function
spec = RunSpec("mobilenet_v3_small", "tensorflow", 1, 1, image_size=64).validate()
def build(folder):
    os.environ["BENCH_WEIGHTS_DIR"] = folder
    return tf_function.build_calibrated(spec)
m, how, s = build(sys.argv[1])
if len(sys.argv) > 2:
    r, how2, s2 = build(sys.argv[2])
    a, b = m.get_weights(), r.get_weights()
    print(how, how2, s2, len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b)))
else:
    print(how, s > 0)
"""

_ENV = {"PYTHONPATH": str(PROJECT_ROOT), "OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1",
        "TF_NUM_INTEROP_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}


def _python(code: str, *args) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)],
                         env={**os.environ, **_ENV}, cwd=PROJECT_ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


@pytest.mark.slow
def test_tensorflow_weights_read_from_another_processs_file_are_the_ones_calibration_gives(
        tmp_path):
    written, fresh = tmp_path / "written", tmp_path / "fresh"
    written.mkdir()
    fresh.mkdir()
    # one process calibrates and writes; another calibrates afresh, then builds again
    # reading the first one's file
    assert _python(_TF, written) == [CALIBRATED, "True"]
    assert len(list(written.iterdir())) == 1
    assert _python(_TF, fresh, written) == [CALIBRATED, FROM_FILE, "0.0", "True"]


@pytest.mark.slow
def test_torch_calibrates_in_every_build_and_writes_no_file(tmp_path):
    # reading the weights moved torch's per-process lottery (engine/worker/weights.py)
    assert _python(_TORCH, tmp_path) == [CALIBRATED, "True", CALIBRATED, "True"]
    assert list(tmp_path.iterdir()) == []
