"""Training data, framework-neutral: NumPy arrays and a seeded order both frameworks share.

Imported by training workers only. Nothing is downloaded: the digits ship inside
scikit-learn, and the synthetic set is drawn from a seeded generator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.scenarios.training.spec import TrainSpec

__all__ = ["TrainData", "load_data", "epoch_order", "CLASSES"]

CLASSES = 10


@dataclass(frozen=True)
class TrainData:
    """NHWC float32 images (normalised) and int64 labels; NCHW copies are made by the
    torch trainer once, outside the timed steps."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    description: str


def _digits(seed: int) -> TrainData:
    from scipy.ndimage import zoom
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    # 8x8 -> 32x32, bilinear (order 1) so strokes stay smooth, values 0..16 -> 0..1
    images = zoom(x.reshape(-1, 8, 8).astype(np.float32) / 16.0, (1, 4, 4), order=1)
    images = np.repeat(images[..., None], 3, axis=-1)  # grey to 3 channels, as the models take
    x_tr, x_te, y_tr, y_te = train_test_split(images, y, test_size=0.2, random_state=seed,
                                              stratify=y)
    # Standardise with the training split's statistics only: the test set stays unseen.
    mean, std = float(x_tr.mean()), float(x_tr.std())
    norm = lambda a: np.ascontiguousarray((a - mean) / std, dtype=np.float32)  # noqa: E731
    return TrainData(norm(x_tr), y_tr.astype(np.int64), norm(x_te), y_te.astype(np.int64),
                     f"digits 32x32x3: {len(y_tr)} train / {len(y_te)} test, seed {seed}")


def _synthetic(spec: TrainSpec) -> TrainData:
    rng = np.random.default_rng(spec.seed)
    n, s = spec.synthetic_samples, spec.image_size
    n_test = max(spec.batch_size, n // 4)
    x = rng.standard_normal((n + n_test, s, s, 3), dtype=np.float32)
    y = rng.integers(0, CLASSES, n + n_test).astype(np.int64)
    return TrainData(x[:n], y[:n], x[n:], y[n:],
                     f"synthetic {s}x{s}x3: {n} train / {n_test} test, seed {spec.seed}")


def load_data(spec: TrainSpec) -> TrainData:
    return _digits(spec.seed) if spec.dataset == "digits" else _synthetic(spec)


def epoch_order(n: int, epoch: int, seed: int) -> np.ndarray:
    """The shuffled order of epoch `epoch` (1-based): the same in every framework and run
    with this seed, different from epoch to epoch, as a DataLoader(shuffle=True) would be."""
    return np.random.default_rng([seed, epoch]).permutation(n)
