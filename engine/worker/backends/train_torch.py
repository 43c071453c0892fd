"""PyTorch training: eager mode, SGD with momentum, cross-entropy on logits."""

from __future__ import annotations

import numpy as np
import torch
import torchvision

from engine.worker.backends.base import ModelStats
from engine.core.catalog import get_model
from engine.scenarios.training.spec import TrainSpec


class Trainer:
    def __init__(self):
        self.model = self.opt = self.device = None

    def versions(self) -> dict:
        return {"torch": torch.__version__, "torchvision": torchvision.__version__,
                "numpy": np.__version__, "cuda": torch.version.cuda}

    def effective_threads(self) -> dict:
        return {"torch_intra_op": torch.get_num_threads(),
                "torch_inter_op": torch.get_num_interop_threads()}

    def load(self, spec: TrainSpec, classes: int) -> None:
        if spec.device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("device cuda requested but torch.cuda.is_available() is False")
        torch.manual_seed(spec.seed)
        self.device = torch.device(spec.device)
        builder = getattr(torchvision.models, get_model(spec.model).torch_builder)
        self.model = builder(weights=None, num_classes=classes).to(self.device).train()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=spec.lr,
                                   momentum=spec.momentum)
        self.loss_fn = torch.nn.CrossEntropyLoss()

    def prepare(self, x_nhwc: np.ndarray) -> np.ndarray:
        """Once per data set, untimed: torch convolutions take NCHW."""
        return np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2))

    def train_step(self, xb: np.ndarray, yb: np.ndarray) -> tuple[float, int]:
        x = torch.from_numpy(xb).to(self.device)
        y = torch.from_numpy(yb).to(self.device)
        self.opt.zero_grad(set_to_none=True)
        out = self.model(x)
        loss = self.loss_fn(out, y)
        loss.backward()
        self.opt.step()
        # .item() waits for the step to finish (on CUDA too): the step time includes it.
        return loss.item(), int((out.argmax(1) == y).sum().item())

    def logits(self, xb: np.ndarray) -> np.ndarray:
        self.model.eval()
        try:
            with torch.no_grad():
                return self.model(torch.from_numpy(xb).to(self.device)).float().cpu().numpy()
        finally:
            self.model.train()

    def model_stats(self) -> ModelStats:
        params = sum(p.numel() for p in self.model.parameters())
        trainable = sum(p.numel() for p in self.model.parameters() if p.requires_grad)
        return ModelStats(params, trainable, None, "not counted for training")

    def reset_device_peak(self) -> None:
        """Where the device peak starts (engine/worker/training/train_loop.py): after the
        warm-up steps and after each epoch's scoring, so first steps and evaluation's
        batches are not in it."""
        if self.device is not None and self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()

    def device_peak_bytes(self):
        if self.device is not None and self.device.type == "cuda":
            return int(torch.cuda.max_memory_allocated())
        return None

    def unload(self) -> None:
        self.model = self.opt = None
        if self.device is not None and self.device.type == "cuda":
            torch.cuda.empty_cache()
