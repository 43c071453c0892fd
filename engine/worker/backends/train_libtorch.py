"""LibTorch C++ training: the torchvision model, scripted, trained by engine/worker/cpp/libtorch_train.

The same model (same seed, same initial weights), the same data, the same batches in the
same order and the same optimiser (SGD with momentum, cross-entropy on logits) as the
Python trainer (engine/worker/backends/train_torch.py), so the two give comparable time per step
and per epoch. The C++ side times every step with steady_clock (gather outside the timer,
loss.item() inside, as the Python loop does), computes the test split's logits after every
epoch in eval mode, and prints JSON lines that are read here while it runs.

Unlike the Python trainers this one runs a whole training at once: train_all().
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torchvision

from engine.worker.backends.base import ModelStats
from engine.core.catalog import get_model
from engine.worker.training.datasets import CLASSES
from engine.scenarios.training.spec import TrainSpec
from engine.core.paths import CPP_BUILD_DIR

# Built by scripts/build_libtorch_runner.sh; LIBTORCH_TRAIN points elsewhere.
RUNNER = Path(os.environ.get("LIBTORCH_TRAIN",
                             CPP_BUILD_DIR / "libtorch_train"))


def script_model(model: torch.nn.Module, name: str) -> torch.jit.ScriptModule:
    """torch.jit.script, or a RuntimeError that names the model and says why not."""
    try:
        with warnings.catch_warnings():  # torch 2.x calls TorchScript deprecated
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            return torch.jit.script(model)
    except Exception as e:  # noqa: BLE001 - the frontend raises several types
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise RuntimeError(f"{name} cannot be trained by LibTorch: torch.jit.script fails "
                           f"on it ({type(e).__name__}: {first})") from e


class Trainer:
    def __init__(self):
        self.model = None
        self.tmp = None
        self.cpp_threads: dict = {}
        self.prepare_s = None  # building, scripting and saving the model, writing the data

    def versions(self) -> dict:
        return {"torch": torch.__version__, "torchvision": torchvision.__version__,
                "numpy": np.__version__, "libtorch": torch.__version__}

    def effective_threads(self) -> dict:
        """This process's torch threads; after a run, the C++ process's own as well."""
        return {"torch_intra_op": torch.get_num_threads(),
                "torch_inter_op": torch.get_num_interop_threads(), **self.cpp_threads}

    def prepare(self, x_nhwc: np.ndarray) -> np.ndarray:
        """Once per data set, untimed: torch convolutions take NCHW."""
        return np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2))

    def _build(self, spec: TrainSpec) -> str:
        """The model exactly as train_torch builds it, scripted and saved; returns its path."""
        torch.manual_seed(spec.seed)
        builder = getattr(torchvision.models, get_model(spec.model).torch_builder)
        self.model = builder(weights=None, num_classes=CLASSES).train()
        # The generator as Python's training would find it: dropout and stochastic depth
        # then draw the same masks in C++.
        torch.get_rng_state().numpy().tofile(os.path.join(self.tmp.name, "rng.bin"))
        scripted = script_model(self.model, spec.model)
        path = os.path.join(self.tmp.name, "model.pt")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.jit.save(scripted, path)
        return path

    def train_all(self, spec: TrainSpec, x_train: np.ndarray, y_train: np.ndarray,
                  x_test: np.ndarray, y_test: np.ndarray, orders: list[np.ndarray],
                  steps: int, progress: Callable[[str, int], None]) -> dict:
        """Train len(orders) epochs of `steps` steps in the C++ trainer.

        x_*: float32 NCHW, y_*: int64 labels; orders[e]: epoch e+1's index order (batch s is
        order[s*b:(s+1)*b]). Returns {"step_ns": [int], "losses": [float], "epochs":
        [{"wall_s", "loss_sum", "correct", "test_logits" (n_test x classes float32)}],
        "peak_rss_bytes": int (VmHWM of the C++ process)}.
        """
        from engine.worker.errors import Diverged

        if spec.device != "cpu":
            raise RuntimeError("the LibTorch trainer is built against libtorch_cpu: "
                               "device cpu only")
        if not RUNNER.exists():
            raise RuntimeError(f"the LibTorch C++ trainer is not built ({RUNNER} missing): run "
                               "scripts/build_libtorch_runner.sh, which needs g++ "
                               "(apt-get install g++)")
        b, epochs = spec.batch_size, len(orders)
        if x_train.ndim != 4 or x_test.ndim != 4 or x_train.shape[1:] != x_test.shape[1:]:
            raise ValueError(f"x_train {x_train.shape} and x_test {x_test.shape} must be NCHW "
                             "with the same image shape")
        if len(y_train) != len(x_train) or len(y_test) != len(x_test):
            raise ValueError("images and labels differ in count")
        if epochs < 1 or steps < 1:
            raise ValueError("nothing to train: no epochs or no steps")
        order_len = len(orders[0])
        if any(len(o) != order_len for o in orders) or steps * b > order_len:
            raise ValueError(f"every order must hold the same number (>= {steps * b}) of "
                             "indices")

        self.unload()  # a previous run's files
        self.tmp = tempfile.TemporaryDirectory(prefix="libtorch-train-")
        d = self.tmp.name
        t = time.perf_counter()
        model_path = self._build(spec)
        files = {}
        for name, arr, dtype in (("x_train", x_train, "<f4"), ("y_train", y_train, "<i8"),
                                 ("x_test", x_test, "<f4"), ("y_test", y_test, "<i8"),
                                 ("orders", np.stack(orders), "<i8")):
            files[name] = os.path.join(d, f"{name}.bin")
            np.ascontiguousarray(arr, dtype=dtype).tofile(files[name])
        self.prepare_s = time.perf_counter() - t

        n, c, h, w = x_train.shape
        args = [str(RUNNER), model_path, files["x_train"], files["y_train"], str(n), str(c),
                str(h), str(w), files["x_test"], files["y_test"], str(len(x_test)),
                files["orders"], str(order_len), os.path.join(d, "rng.bin"), d,
                str(spec.intra_threads), str(spec.inter_threads), repr(float(spec.lr)),
                repr(float(spec.momentum)), str(epochs), str(steps), str(b)]
        step_ns: list[int] = []
        losses: list[float] = []
        out_epochs: list[dict] = []
        done = diverged = None
        phase = lambda e: f"epoch {e}/{epochs}"  # noqa: E731
        with open(os.path.join(d, "stderr.txt"), "w+") as err:
            # stderr to a file: a chatty child cannot block on a full pipe.
            proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, text=True)
            try:
                for line in proc.stdout:
                    ev = json.loads(line)
                    event = ev["event"]
                    if event == "steps":
                        step_ns.extend(ev["ns"])
                        # the float32 value loss.item() gave, exactly, as Python's would be
                        losses.extend(float(v) for v in np.asarray(ev["losses"], np.float32))
                        progress(phase(ev["epoch"]), ev["done"])
                    elif event == "epoch_start":
                        progress(phase(ev["epoch"]), ev["done"])
                    elif event == "epoch":
                        path = os.path.join(d, f"logits-{ev['epoch']}.bin")
                        logits = np.fromfile(path, dtype="<f4").reshape(ev["rows"],
                                                                        ev["classes"])
                        os.unlink(path)
                        out_epochs.append(dict(wall_s=float(ev["wall_s"]),
                                               loss_sum=float(ev["loss_sum"]),
                                               correct=int(ev["correct"]),
                                               test_logits=logits))
                        progress(phase(ev["epoch"]), ev["done"])
                    elif event == "diverged":
                        diverged = ev
                    elif event == "done":
                        done = ev
                proc.wait()
            finally:
                if proc.poll() is None:  # the callback raised, or the output was bad
                    proc.kill()
                    proc.wait()
                proc.stdout.close()
            err.seek(0)
            err_text = err.read().strip()
        if diverged is not None:
            raise Diverged(f"training diverged: the loss became {diverged['loss']} at step "
                           f"{diverged['step']} (epoch {diverged['epoch']}); lower lr "
                           f"({spec.lr:g}) or momentum ({spec.momentum:g})")
        if proc.returncode != 0 or done is None:
            why = (f"killed by signal {-proc.returncode}" if proc.returncode < 0
                   else f"exited with code {proc.returncode}")
            raise RuntimeError(f"libtorch_train {why}: {err_text[-1500:] or '(no stderr)'}")
        self.cpp_threads = {"libtorch_intra_op": done["intra_threads"],
                            "libtorch_inter_op": done["inter_threads"]}
        return {"step_ns": step_ns, "losses": losses, "epochs": out_epochs,
                "peak_rss_bytes": int(done["peak_rss_bytes"])}

    def model_stats(self) -> ModelStats:
        params = sum(p.numel() for p in self.model.parameters())
        trainable = sum(p.numel() for p in self.model.parameters() if p.requires_grad)
        return ModelStats(params, trainable, None, "not counted for training")

    def reset_device_peak(self) -> None:
        pass  # the C++ trainer reports no device peak

    def device_peak_bytes(self):
        return None

    def unload(self) -> None:
        self.model = None
        if self.tmp is not None:
            self.tmp.cleanup()
            self.tmp = None
