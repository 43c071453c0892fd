"""What to run for data loading: the formats, decoders, normalisers and pipelines by name,
which combinations can run, a frozen `LoadSpec` and the expansion of a data-loading sweep.

Names and rules only: the worker side (engine/worker/dataload/images.py) implements them, and the
dashboard reads them from here without importing a decoder or a framework.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from engine.core.errors import UserError
from engine.core.limits import (BATCH_RANGE, LOAD_COUNT_RANGE, LOAD_SIZE_RANGE, SEED_RANGE,
                                WORKERS_RANGE, choice, int_range, logical_cores, unique)
from engine.core.policy import MeasurementPolicy

__all__ = ["LoadSpec", "expand_load", "FORMATS", "BANDS", "DECODERS", "NORMALIZERS",
           "PIPELINES", "incompatibility", "framework_of"]

FORMATS = {
    "tiff": "4-band (R,G,B,NIR) uint16 TIFF like a satellite tile, uncompressed, via tifffile",
    "png": "3-band uint8 RGB PNG (Pillow, default compression level 6)",
    "jpeg": "3-band uint8 RGB JPEG, quality 90 (Pillow defaults: baseline, 4:2:0 chroma)",
}
BANDS = {"tiff": 4, "png": 3, "jpeg": 3}
DECODERS = {
    "pillow": "PIL.Image.open + np.asarray",
    "opencv": "cv2.imread(IMREAD_UNCHANGED), BGR(A) converted to RGB(N)",
    "skimage": "skimage.io.imread (imageio: tifffile for TIFF, Pillow for PNG/JPEG)",
    "tf_io": "tf.io.read_file + tf.io.decode_png/decode_jpeg inside the tf.data graph",
}
NORMALIZERS = {
    "numpy": "numpy: uint HWC batch -> float32 NCHW, per-band affine",
    "torch": "torch ops on torch.from_numpy(batch) -> float32 NCHW tensor",
    "tf": "tf ops inside the tf.data graph -> float32 NHWC tensor",
}
PIPELINES = {
    "loop": "a plain Python loop: read, decode and normalise each batch in the calling thread",
    "torch_dataloader": "torch.utils.data.DataLoader with num_workers and batch_size",
    "tf_data": "tf.data: parallel map of the decoder, batch, prefetch",
}

def incompatibility(fmt: str, decoder: str, normalize: str, pipeline: str) -> str | None:
    """None when the combination runs; else a one-line reason naming what is allowed."""
    for value, table, what in ((fmt, FORMATS, "format"), (decoder, DECODERS, "decoder"),
                               (normalize, NORMALIZERS, "normalize"), (pipeline, PIPELINES, "pipeline")):
        if value not in table:
            return f"unknown {what} {value!r}; choose one of {', '.join(table)}"
    # Library limitations first: they are the most fundamental reason (checked for real by
    # the check script: Pillow returns RGB high bytes; tf.io rejects the file).
    if fmt == "tiff" and decoder == "pillow":
        return ("pillow cannot decode 4-band 16-bit TIFF (it returns 3 bands of 8 bits: "
                "the RGB high bytes, NIR dropped); use opencv or skimage")
    if fmt == "tiff" and decoder == "tf_io":
        return "tf.io has no TIFF decoder (only JPEG, JPEG XL, PNG, GIF, BMP, WebP); use opencv or skimage"
    # Design rules: tf pieces run in-graph and keep TensorFlow out of torch/numpy processes.
    if pipeline == "tf_data" and (decoder != "tf_io" or normalize != "tf"):
        return "tf_data decodes and normalises inside the tf graph: it needs decoder tf_io and normalize tf"
    if decoder == "tf_io" and pipeline != "tf_data":
        return "tf_io decodes inside the tf graph, so only in pipeline tf_data (with normalize tf)"
    if normalize == "tf" and pipeline != "tf_data":
        return "normalize tf runs inside the tf graph, so only in pipeline tf_data (with decoder tf_io)"
    return None


def framework_of(decoder: str, normalize: str, pipeline: str) -> str:
    """The process family a combination must run in: 'tensorflow', 'torch' or 'numpy'."""
    # Any tf piece counts, not only tf_data, so that even a refused combination can never be
    # routed into a torch process.
    if pipeline == "tf_data" or decoder == "tf_io" or normalize == "tf":
        return "tensorflow"
    if pipeline == "torch_dataloader" or normalize == "torch":
        return "torch"
    return "numpy"


@dataclass(frozen=True)
class LoadSpec:
    """One data-loading run: read, decode and normalise batches of images from disk.

    A generated, deterministic image set (engine.worker.dataload.images) is read in a fixed order,
    cycling epochs; each timed iteration delivers one batch, fully materialised. The first
    batch is checked against the ground truth before anything is timed.
    """

    fmt: str
    decoder: str
    normalize: str
    pipeline: str
    batch_size: int
    workers: int = 0
    intra_threads: int = 1
    count: int = 256
    image_size: int = 256
    seed: int = 0
    policy: MeasurementPolicy = field(default_factory=MeasurementPolicy)
    inter_threads = 1
    kind = "dataload"
    device = "cpu"
    precision = None
    weight_policy = None
    profile_steps = 0

    @property
    def model(self) -> str:  # the runs table's model column: what is loaded
        return self.fmt

    @property
    def framework(self) -> str:
        return framework_of(self.decoder, self.normalize, self.pipeline)

    @property
    def runtime(self) -> str:  # the implementation: the Compare columns
        return f"{self.pipeline}:{self.decoder}+{self.normalize}"

    @property
    def dataset(self) -> str:
        return f"{self.fmt}-{self.count}x{self.image_size}px-seed{self.seed}"

    def key(self) -> tuple:
        return (self.fmt, self.runtime, self.batch_size, self.workers, self.intra_threads,
                self.count, self.image_size)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "LoadSpec":
        d = dict(d)
        d["policy"] = MeasurementPolicy(**d.get("policy", {}))
        return cls(**d)

    def validate(self, cores: int | None = None) -> "LoadSpec":
        cores = cores or logical_cores()
        choice("format", self.fmt, tuple(FORMATS))
        choice("decoder", self.decoder, tuple(DECODERS))
        choice("normalize", self.normalize, tuple(NORMALIZERS))
        choice("pipeline", self.pipeline, tuple(PIPELINES))
        why = incompatibility(self.fmt, self.decoder, self.normalize, self.pipeline)
        if why:
            raise UserError(f"decoder: {self.runtime} cannot load {self.fmt}: {why}",
                            field="decoder")
        int_range("batch_size", self.batch_size, *BATCH_RANGE)
        int_range("workers", self.workers, *WORKERS_RANGE)
        if self.pipeline == "loop" and self.workers:
            raise UserError("workers: the loop pipeline runs in the calling thread; allowed: "
                            "0 (use torch_dataloader or tf_data for parallel workers)",
                            field="workers")
        int_range("intra_threads", self.intra_threads, 1, cores,
                   hint=f" (this machine has {cores} logical cores)")
        int_range("count", self.count, *LOAD_COUNT_RANGE)
        int_range("image_size", self.image_size, *LOAD_SIZE_RANGE)
        int_range("seed", self.seed, *SEED_RANGE)
        if self.batch_size > self.count:
            raise UserError(f"batch_size: {self.batch_size} is larger than the {self.count} "
                            f"images; allowed: integer 1..{self.count}", field="batch_size")
        return replace(self, policy=self.policy.validate())


def expand_load(formats, decoders, normalizers, pipelines, batch_sizes, workers, threads,
                **common) -> tuple[list[LoadSpec], list[str]]:
    """(specs, skipped): every runnable combination, validated, and a line for each one
    that cannot run (a decoder that cannot read the format, workers for the plain loop),
    so the user sees why a column is missing. None runnable is an error."""
    specs, skipped = [], []
    for name, values, allowed in (("format", formats, FORMATS), ("decoder", decoders, DECODERS),
                                  ("normalize", normalizers, NORMALIZERS),
                                  ("pipeline", pipelines, PIPELINES),
                                  ("batch_size", batch_sizes, None), ("workers", workers, None),
                                  ("threads", threads, None)):
        if not values:
            raise UserError(f"{name}: pick at least one value", field=name)
        for v in values if allowed else ():  # an unknown name is refused, never skipped
            choice(name, v, tuple(allowed))
    for fmt in unique(formats):
        for p in unique(pipelines):
            for d in unique(decoders):
                for n in unique(normalizers):
                    why = incompatibility(fmt, d, n, p)
                    if why:
                        skipped.append(f"{p}:{d}+{n} on {fmt}: {why}")
                        continue
                    for t in unique(threads):
                        for w in unique(workers):
                            if p == "loop" and w:
                                continue  # the loop has no workers: measured once, at 0
                            for b in unique(batch_sizes):
                                specs.append(LoadSpec(fmt, d, n, p, b, workers=w,
                                                      intra_threads=t, **common).validate())
    if not specs:
        raise UserError("decoder: no combination of the chosen formats, decoders, "
                        "normalisations and pipelines can run: " + "; ".join(skipped),
                        field="decoder")
    # Grouped by worker process (framework, threads) so imports are paid once per group.
    specs.sort(key=lambda s: (s.framework, s.intra_threads))
    return specs, skipped
