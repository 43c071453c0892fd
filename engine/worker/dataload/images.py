"""Worker-side code for the image data-loading benchmark.

A benchmark point is (format, decoder, normaliser, pipeline, batch size, workers, threads).
This module generates deterministic synthetic data sets, decodes and normalises them, builds
a `BatchSource` that yields fully materialised batches forever, and checks a batch against
the ground truth so that a fast-but-wrong combination (BGR order, dropped band) cannot win.

The names and the rules of what can run together live framework-free in
engine/scenarios/dataload/spec.py (the dashboard reads them there). Framework and codec imports
happen inside the functions that need them, and a torch pipeline and a TF pipeline never
share a process (`framework_of` tells the caller which process family a combination
belongs to).
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import tempfile
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from engine.scenarios.dataload.spec import BANDS, FORMATS, incompatibility
from engine.worker.errors import OutputMismatch  # the one class the frame classifies

__all__ = ["MEAN", "STD", "JPEG_MAE_BOUND", "OutputMismatch", "BatchSource", "source_image", "dataset_dir", "generate_dataset", "decode", "normalize_numpy",
           "normalize_torch", "make_batch_source", "expected_batch", "check_batch"]

_DTYPE = {"tiff": np.uint16, "png": np.uint8, "jpeg": np.uint8}
_EXT = {"tiff": "tif", "png": "png", "jpeg": "jpg"}
_LAYOUT_VERSION = 1  # bump when source_image or the writers change: old sets get a new folder

# ImageNet statistics for RGB (what real pipelines use); the NIR pair is a plausible round
# value, not measured on any data set -- it only has to be fixed and different from RGB.
_RGB_MEAN, _RGB_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
MEAN = {"tiff": _RGB_MEAN + (0.45,), "png": _RGB_MEAN, "jpeg": _RGB_MEAN}
STD = {"tiff": _RGB_STD + (0.25,), "png": _RGB_STD, "jpeg": _RGB_STD}

# Mean absolute error of decoded quality-90 JPEG vs source, 0-255 units, measured on
# source_image: 64 px 1.3-2.2 per image (1.77 on a batch of 4) with Pillow/OpenCV/skimage,
# 1.97 with tf.io (its default IDCT is INTEGER_FAST); 224 px ~1.0. A BGR swap gives ~36.
JPEG_MAE_BOUND = 4.0
_LOSSLESS_BOUND = 1e-5


def source_image(index: int, fmt: str, size: int, seed: int = 0) -> np.ndarray:
    """Deterministic ground truth, HWC: uint16 x4 for tiff, uint8 x3 for png/jpeg."""
    # crc32, not hash(): str hashes are salted per process and would change the data.
    rng = np.random.default_rng([seed, index, size, zlib.crc32(fmt.encode())])
    yy, xx = np.mgrid[0:size, 0:size] / size
    # Low frequencies in cycles per image, so the content looks alike at every size and
    # PNG/JPEG compress it like photos rather than like noise.
    fx, fy = rng.uniform(0.5, 3.0, 2)
    light = 0.5 + 0.25 * np.sin(2 * np.pi * (fx * xx + fy * yy) + rng.uniform(0, 2 * np.pi))
    light += 0.15 * (rng.uniform(-1, 1) * xx + rng.uniform(-1, 1) * yy)
    # One object with a sharp (1 px ramp) edge: real photos have edges, where JPEG rings.
    cx, cy, r = rng.uniform(0.3, 0.7, 2).tolist() + [rng.uniform(0.1, 0.3)]
    disc = np.clip((r - np.hypot(xx - cx, yy - cy)) * size + 0.5, 0.0, 1.0)
    texture = np.sin(2 * np.pi * rng.uniform(2, 6) * (xx if rng.random() < 0.5 else yy))
    bands = []
    for _ in range(BANDS[fmt]):
        # Bands share structure (as in photos, where chroma varies less than luma) but get
        # distinct gains and offsets, so a band swap is a large error.
        v = rng.uniform(0.5, 1.0) * light + rng.uniform(-0.2, 0.2) + rng.uniform(-0.3, 0.3) * disc
        v += rng.uniform(0.04, 0.1) * texture
        bands.append(v + rng.normal(0.0, 0.003, v.shape))  # ~0.8/255 sensor noise
    maxval = np.iinfo(_DTYPE[fmt]).max
    return np.rint(np.clip(np.stack(bands, axis=-1), 0.0, 1.0) * maxval).astype(_DTYPE[fmt])


def dataset_dir(root: str | os.PathLike, fmt: str, count: int, size: int, seed: int = 0) -> pathlib.Path:
    return pathlib.Path(root) / f"{fmt}-{count}x{size}px-seed{seed}-v{_LAYOUT_VERSION}"


def _file(folder: pathlib.Path, fmt: str, i: int) -> pathlib.Path:
    return folder / f"img_{i:05d}.{_EXT[fmt]}"


def _manifest(folder: pathlib.Path, fmt: str, count: int, size: int, seed: int) -> dict | None:
    """The manifest if the folder holds the complete, matching set; else None."""
    try:
        m = json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    want = {"format": fmt, "count": count, "size": size, "seed": seed, "version": _LAYOUT_VERSION}
    return m if all(m.get(k) == v for k, v in want.items()) else None


def _write_image(path: pathlib.Path, img: np.ndarray, fmt: str) -> None:
    if fmt == "tiff":
        import tifffile
        # extrasamples 'unspecified' (not alpha) keeps NIR a data band; OpenCV reads all 4.
        tifffile.imwrite(path, img, photometric="rgb", extrasamples=["unspecified"])
    else:
        from PIL import Image
        Image.fromarray(img).save(path, format="PNG" if fmt == "png" else "JPEG",
                                  **({"quality": 90} if fmt == "jpeg" else {}))


def generate_dataset(root: str | os.PathLike, fmt: str, count: int, size: int, seed: int = 0) -> pathlib.Path:
    """Idempotent and race-safe: write into a temp folder, then rename it into place."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    final = dataset_dir(root, fmt, count, size, seed)
    if _manifest(final, fmt, count, size, seed):
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    # Same filesystem as `final`, so the rename below is atomic: readers see either no
    # folder or a complete one, never a half-written set.
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        os.chmod(tmp, 0o755)  # mkdtemp makes it 0700; the renamed set should read like any folder
        total = 0
        for i in range(count):
            _write_image(_file(tmp, fmt, i), source_image(i, fmt, size, seed), fmt)
            total += _file(tmp, fmt, i).stat().st_size
        manifest = {"version": _LAYOUT_VERSION, "format": fmt, "count": count, "size": size,
                    "bands": BANDS[fmt], "dtype": np.dtype(_DTYPE[fmt]).name, "seed": seed,
                    "ext": _EXT[fmt], "bytes": total}
        (tmp / "manifest.json.tmp").write_text(json.dumps(manifest, indent=1))
        os.replace(tmp / "manifest.json.tmp", tmp / "manifest.json")  # written last
        try:
            os.rename(tmp, final)  # fails when `final` exists and is not empty
        except OSError:
            # Either another process won the race with an identical set (keep theirs), or
            # `final` is a stale incomplete folder not made by this code: move it aside, retry.
            if not _manifest(final, fmt, count, size, seed):
                stale = final.with_name(f".stale-{tmp.name}")
                with contextlib.suppress(FileNotFoundError):  # someone else moved it already
                    os.rename(final, stale)
                shutil.rmtree(stale, ignore_errors=True)
                with contextlib.suppress(OSError):
                    os.rename(tmp, final)
            if not _manifest(final, fmt, count, size, seed):
                raise OSError(f"could not put the data set in place at {final}") from None
        return final
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def decode(path: str | os.PathLike, decoder: str, fmt: str) -> np.ndarray:
    """HWC in source band order (RGB / RGBN) and the decoder's dtype (source dtype when it works)."""
    if decoder == "pillow":
        from PIL import Image
        with Image.open(path) as im:
            return np.asarray(im)  # forces the lazy decode while the file is open
    if decoder == "opencv":
        import cv2
        img = cv2.imread(os.fspath(path), cv2.IMREAD_UNCHANGED)
        if img is None:  # OpenCV reports unreadable files by returning None, not raising
            raise OSError(f"opencv could not read {path}")
        # OpenCV stores BGR(A); for the TIFF the 4th band is NIR and stays in place.
        return cv2.cvtColor(img, cv2.COLOR_BGRA2RGBA if img.shape[2] == 4 else cv2.COLOR_BGR2RGB)
    if decoder == "skimage":
        import skimage.io
        return skimage.io.imread(os.fspath(path))
    raise ValueError(f"decoder {decoder!r} is not usable through decode(); choose pillow, opencv or skimage")


def _affine(fmt: str) -> tuple[np.ndarray, np.ndarray]:
    """(x/maxval - mean)/std folded into x*scale + offset: one multiply-add per value."""
    maxval = float(np.iinfo(_DTYPE[fmt]).max)
    std, mean = np.asarray(STD[fmt]), np.asarray(MEAN[fmt])
    return (1.0 / (maxval * std)).astype(np.float32), (-mean / std).astype(np.float32)


def normalize_numpy(batch_hwc_uint: np.ndarray, fmt: str) -> np.ndarray:
    scale, offset = (a.reshape(1, -1, 1, 1) for a in _affine(fmt))
    # Reorder to NCHW while still 1-2 bytes per value, then convert: transposing the float32
    # array instead moved 4x the bytes through a strided copy and was 4x slower (47 vs 12 ms
    # for 32 x 256 x 256 x 3), which would have made NumPy look worse than it is.
    x = np.ascontiguousarray(batch_hwc_uint.transpose(0, 3, 1, 2)).astype(np.float32)
    x *= scale  # in place: no extra temporaries of batch size
    x += offset
    return x


def normalize_torch(batch_hwc_uint: np.ndarray, fmt: str) -> Any:
    import torch
    scale, offset = (torch.from_numpy(a).view(1, -1, 1, 1) for a in _affine(fmt))
    # The permute is free (a view); the dtype conversion writes the contiguous NCHW copy.
    x = torch.from_numpy(batch_hwc_uint).permute(0, 3, 1, 2).to(
        torch.float32, memory_format=torch.contiguous_format)
    return x.mul_(scale).add_(offset)


def _normalizer(normalize: str) -> Callable[[np.ndarray, str], Any]:
    return {"numpy": normalize_numpy, "torch": normalize_torch}[normalize]


class BatchSource:
    """Yields fully materialised batches forever, in file order, restarting epochs itself."""

    def __init__(self, new_epoch: Callable[[], Iterator[Any]], force: Callable[[Any], Any] | None = None,
                 on_close: Callable[[], None] | None = None):
        self._new_epoch: Callable[[], Iterator[Any]] | None = new_epoch
        self._force, self._on_close = force, on_close
        self._it: Iterator[Any] | None = new_epoch()

    def next(self) -> Any:
        if self._it is None or self._new_epoch is None:
            raise RuntimeError("BatchSource is closed")
        try:
            batch = next(self._it)
        except StopIteration:  # epoch restart is timed with the batch, as in training
            self._it = self._new_epoch()
            batch = next(self._it)
        if self._force is not None:
            self._force(batch)
        return batch

    def close(self) -> None:
        if self._on_close is not None:
            self._on_close()
        # Drop every reference (the epoch factory holds the DataLoader) so nothing lingers.
        self._it = self._new_epoch = self._force = self._on_close = None


@dataclass(frozen=True)
class _FileDataset:
    """Map-style dataset; a plain picklable object, so no torch import at module level."""
    files: tuple[str, ...]
    decoder: str
    fmt: str

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> np.ndarray:
        return decode(self.files[i], self.decoder, self.fmt)


@dataclass(frozen=True)
class _Collate:
    fmt: str
    normalize: str

    def __call__(self, images: list[np.ndarray]) -> Any:
        import torch
        out = _normalizer(self.normalize)(np.stack(images), self.fmt)
        # Return a tensor either way: tensors leave a worker through shared memory, a numpy
        # array would be pickled through a pipe -- a cost no real torch pipeline pays.
        return out if isinstance(out, torch.Tensor) else torch.from_numpy(out)


def _opencv_threads(threads: int, _worker_id: int = 0) -> None:
    import cv2
    cv2.setNumThreads(threads)  # per process: each DataLoader worker sets its own


def make_batch_source(path: str | os.PathLike, fmt: str, decoder: str, normalize: str, pipeline: str,
                      batch_size: int, workers: int, threads: int) -> BatchSource:
    reason = incompatibility(fmt, decoder, normalize, pipeline)
    if reason:
        raise ValueError(reason)
    folder = pathlib.Path(path)
    m = json.loads((folder / "manifest.json").read_text())
    if m["format"] != fmt:
        raise ValueError(f"{folder} holds {m['format']} files, not {fmt}")
    if workers < 0 or (pipeline == "loop" and workers):
        raise ValueError(f"workers must be >= 0, and 0 for pipeline loop (it runs in the caller); got {workers}")
    if not 1 <= batch_size <= m["count"]:  # drop_last with fewer files would yield nothing
        raise ValueError(f"batch_size must be 1..{m['count']} (the data set size), got {batch_size}")
    files = tuple(str(_file(folder, fmt, i)) for i in range(m["count"]))
    if decoder == "opencv":
        _opencv_threads(threads)
    if decoder != "tf_io":
        # One untimed decode pays the lazy imports (skimage.io -> imageio plugins: ~0.4 s)
        # here instead of in the first timed batch; forked DataLoader workers inherit them.
        decode(files[0], decoder, fmt)

    if pipeline == "loop":
        norm = _normalizer(normalize)

        def epoch() -> Iterator[Any]:
            for start in range(0, len(files) - batch_size + 1, batch_size):
                yield norm(np.stack([decode(f, decoder, fmt) for f in files[start:start + batch_size]]), fmt)
        return BatchSource(epoch)

    if pipeline == "torch_dataloader":
        from functools import partial
        from torch.utils.data import DataLoader
        # Normalisation runs in collate, i.e. in the workers when workers > 0: that is where
        # real pipelines do it, and it keeps the main process free for the model step.
        loader = DataLoader(_FileDataset(files, decoder, fmt), batch_size=batch_size, shuffle=False,
                            drop_last=True, num_workers=workers, persistent_workers=workers > 0,
                            collate_fn=_Collate(fmt, normalize),
                            worker_init_fn=partial(_opencv_threads, threads) if decoder == "opencv" else None)

        def stop_workers() -> None:
            # Persistent workers live in loader._iterator until it is garbage-collected;
            # DataLoader has no public close, so stop them now rather than at some GC.
            getattr(getattr(loader, "_iterator", None), "_shutdown_workers", lambda: None)()
        return BatchSource(lambda: iter(loader), on_close=stop_workers)  # re-iterating reuses workers

    import tensorflow as tf  # pipeline == "tf_data" (incompatibility() allowed nothing else)
    scale, offset = (tf.constant(a) for a in _affine(fmt))
    decode_op = tf.io.decode_png if fmt == "png" else tf.io.decode_jpeg  # default dct_method
    parallel = workers or None  # None = sequential map, the tf.data analogue of workers=0
    ds = tf.data.Dataset.from_tensor_slices(list(files))
    ds = ds.map(lambda p: decode_op(tf.io.read_file(p), channels=BANDS[fmt]), num_parallel_calls=parallel)
    # Normalise the whole batch at once: one vectorised op instead of one per image.
    ds = ds.batch(batch_size, drop_remainder=True).map(
        lambda b: tf.cast(b, tf.float32) * scale + offset, num_parallel_calls=parallel)
    ds = ds.repeat()  # after batch: every epoch yields the same batches, restart inside tf
    if workers:
        # A fixed depth (not AUTOTUNE) keeps runs comparable; 2 overlaps one batch's
        # production with the consumer.
        ds = ds.prefetch(2)
    else:
        # workers=0 must mean no background work, as in the other pipelines, but TF's default
        # static optimisations (map_parallelization, map_and_batch_fusion, inject_prefetch)
        # turn sequential maps into async ones: measured 3-6 batches pulled ahead of one
        # next(). With them off exactly one batch is produced per next().
        options = tf.data.Options()
        options.experimental_optimization.apply_default_optimizations = False
        ds = ds.with_options(options)
    it = iter(ds)
    # Eager CPU ops are synchronous, so the tensor is already computed; _numpy() is the
    # zero-copy view (numpy() would add a full copy to the timed cost) and makes sure of it.
    return BatchSource(lambda: it, force=lambda t: t._numpy() if hasattr(t, "_numpy") else t.numpy())


def expected_batch(fmt: str, size: int, seed: int, indices: Any, layout: str = "NCHW") -> np.ndarray:
    """The normalised float32 reference, computed in float64 from the definition."""
    x = np.stack([source_image(int(i), fmt, size, seed) for i in indices]).astype(np.float64)
    x = ((x / np.iinfo(_DTYPE[fmt]).max - np.asarray(MEAN[fmt])) / np.asarray(STD[fmt])).astype(np.float32)
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2)) if layout == "NCHW" else x


def check_batch(batch: Any, fmt: str, size: int, seed: int, indices: Any, *, decoder: str = "?") -> float:
    """Error of a batch vs the ground truth; raises OutputMismatch beyond the bound."""
    module = type(batch).__module__  # type name, not isinstance: no torch/tf import here
    if module.startswith("tensorflow"):
        arr, layout = batch.numpy(), "NHWC"
    else:
        arr, layout = np.asarray(batch.detach().cpu() if module.startswith("torch") else batch), "NCHW"
    want = expected_batch(fmt, size, seed, indices, layout)
    if arr.shape != want.shape or arr.dtype != np.float32:
        raise OutputMismatch(f"decoder {decoder}: batch is {arr.dtype} {arr.shape} ({layout}), expected "
                             f"float32 {want.shape} ({BANDS[fmt]} bands) -- wrong band count or layout?")
    diff = np.abs(arr.astype(np.float64) - want)
    if fmt != "jpeg":
        err, bound, unit = float(diff.max()), _LOSSLESS_BOUND, "max abs error (normalised)"
    else:  # back to 0-255 units: lossy, so judge the mean, not the worst pixel
        shape = (1, -1, 1, 1) if layout == "NCHW" else (1, 1, 1, -1)
        err = float((diff * np.asarray(STD[fmt]).reshape(shape) * 255.0).mean())
        bound, unit = JPEG_MAE_BOUND, "mean abs error (0-255)"
    if not err <= bound:  # also catches NaN
        raise OutputMismatch(f"decoder {decoder}: {unit} {err:.3g} exceeds {bound:g} for {fmt} "
                             f"(band order swapped or wrong values?)")
    return err
