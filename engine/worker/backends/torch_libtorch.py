"""LibTorch C++: the frozen TorchScript model measured by engine/worker/cpp/libtorch_runner.

The runner applies the same measurement policy in C++ (steady_clock per iteration) and
prints JSON lines. Its first output is checked against eager PyTorch before its timings are
accepted: on a mismatch the runner is stopped and the run is invalid.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from engine.worker.backends import torch_eager
from engine.worker.backends.base import check_close, compared_rows
from engine.worker.backends.torch_eager import as_matrix, make_inputs
from engine.worker.measure import LoopResult
from engine.scenarios.inference.spec import RunSpec
from engine.core.paths import CPP_BUILD_DIR

# Built by scripts/build_libtorch_runner.sh; LIBTORCH_RUNNER points elsewhere (tests use it
# to show what a machine without a compiler gets).
RUNNER = Path(os.environ.get("LIBTORCH_RUNNER",
                             CPP_BUILD_DIR / "libtorch_runner"))


class Backend(torch_eager.Backend):
    is_reference = False
    peak_rss_bytes = None  # the C++ process's own peak, reported by the runner
    baseline_rss_bytes = None  # and its resident set with libtorch loaded, before the model

    def load(self, spec: RunSpec) -> None:
        if spec.device != "cpu":
            raise RuntimeError("the LibTorch runner is built against libtorch_cpu: device cpu only")
        if not RUNNER.exists():
            raise RuntimeError(f"the LibTorch C++ runner is not built ({RUNNER} missing): run "
                               "scripts/build_libtorch_runner.sh, which needs g++ "
                               "(apt-get install g++)")
        super().load(spec)

    def convert(self, model, spec: RunSpec):
        """Traced and frozen once, as TorchScript from Python is; saved for the runner. A
        user's TorchScript file goes to the runner as it is."""
        self.tmp = tempfile.TemporaryDirectory()
        src = spec.user_model
        self.model_path = os.path.join(self.tmp.name, "model.pt")
        if src is not None and src.format == "torchscript":
            self.model_path = src.path
            return model
        x = torch.from_numpy(make_inputs(spec)[0])
        with torch.no_grad():
            t = time.perf_counter()
            scripted = torch.jit.freeze(torch.jit.trace(model, x))
            torch.jit.save(scripted, self.model_path)
            self.prepare_s = time.perf_counter() - t
        return model

    def prepare(self, spec: RunSpec) -> None:
        """Nothing here: measure() checks the runner's first output on this run's input."""

    def reference_bytes(self) -> int:
        """The eager reference lives in this worker, not in the runner whose memory is
        measured: nothing of it to count apart."""
        return 0

    def measure(self, spec: RunSpec, on_progress) -> tuple[float, LoopResult]:
        """Run the C++ runner; returns (first_forward_s, the loop's samples)."""
        p = spec.policy
        x = make_inputs(spec)[0]  # one float32 N,C,H,W input (RunSpec.validate says so)
        rows = compared_rows(spec)
        with torch.no_grad():  # per run: a reused model meets a new batch size here
            reference = as_matrix(self.reference(torch.from_numpy(x[rows])))
        path_in = os.path.join(self.tmp.name, f"input-{spec.batch_size}.bin")
        x.astype("<f4").tofile(path_in)
        args = [str(RUNNER), self.model_path, path_in,
                *map(str, x.shape), str(spec.intra_threads), str(spec.inter_threads),
                str(p.warmup_iters), repr(p.warmup_max_s), repr(p.min_time_s),
                str(p.min_iters), repr(p.max_time_s), str(p.max_iters),
                _rows_arg(rows)]
        # stderr to a file, read at the end: a pipe read only after stdout closes would let a
        # chatty runner block on a full pipe (~64 KiB) and end as a timeout.
        err_file = tempfile.TemporaryFile(mode="w+")
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err_file, text=True)
        result = None
        try:
            for line in proc.stdout:
                ev = json.loads(line)
                if ev["event"] == "output":  # only the rows compared (ROWS)
                    self.output_rel_diff = check_close(reference, _output_rows(ev),
                                                       "eager (Python)")
                elif ev["event"] == "progress":
                    on_progress(ev["iters"], 0)
                elif ev["event"] == "result":
                    result = ev
        except BaseException:  # a mismatch, bad output, or the progress callback failing
            proc.kill()
            raise
        finally:
            proc.wait()
            proc.stdout.close()
            err_file.seek(0)
            err = err_file.read()
            err_file.close()
        if result is None:
            raise RuntimeError(f"libtorch_runner exited with code {proc.returncode}: "
                               f"{err.strip()[-1500:]}")
        self.peak_rss_bytes = result["peak_rss_kb"] * 1024
        self.baseline_rss_bytes = result["baseline_rss_kb"] * 1024
        loop = LoopResult(tuple(result["warmup_ns"]), tuple(result["samples_ns"]),
                          result["warmup_wall_ns"], result["wall_ns"], result["stop_reason"])
        return result["first_forward_ns"] / 1e9, loop

    def make_step(self, spec: RunSpec):
        raise NotImplementedError("the LibTorch runtime measures in C++ (see measure)")

    def unload(self) -> None:
        if getattr(self, "tmp", None) is not None:
            self.tmp.cleanup()
            self.tmp = None
        super().unload()


def _rows_arg(rows) -> str:
    """The runner's ROWS argument: the sample indices compared ("0,255"), or "all"."""
    return "all" if isinstance(rows, slice) else ",".join(map(str, rows))


def _output_rows(ev: dict) -> np.ndarray:
    """The runner's output event as a row per sample it sent. A model whose output has
    fewer rows than the rows asked for sends fewer: the check then says the shapes differ."""
    got = np.asarray(ev["values"], dtype=np.float64)
    width = ev["shape"][1]
    return got.reshape(-1, width) if width else got.reshape(len(ev["rows"]), 0)
