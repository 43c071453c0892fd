"""Keras models run through a compiled tf.function, the result materialised each call."""

from __future__ import annotations

import time

import numpy as np
import tensorflow as tf
import keras

from engine.worker.backends.base import SEED, ModelStats
from engine.spec.catalog import get_model
from engine.spec import RunSpec

CALIBRATION_PASSES = 3
CALIBRATION_BATCH = 2


def make_input(spec: RunSpec) -> np.ndarray:
    """The same values the torch backend uses, laid out NHWC."""
    rng = np.random.default_rng(SEED)
    nchw = rng.standard_normal((spec.batch_size, 3, spec.image_size, spec.image_size),
                               dtype=np.float32)
    return np.ascontiguousarray(nchw.transpose(0, 2, 3, 1))


def build_keras(spec, classes: int = 1000):
    """The catalog's Keras model for spec.model at spec.image_size, producing logits."""
    builder = get_model(spec.model).keras_builder
    shape = (spec.image_size, spec.image_size, 3)
    if builder.startswith("engine:"):
        from engine.worker.backends import keras_resnet
        return getattr(keras_resnet, builder.split(":", 1)[1])(shape, classes)
    kwargs = dict(weights=None, input_shape=shape, classifier_activation=None, classes=classes)
    if builder.startswith("MobileNetV3"):
        # torchvision models take normalised tensors; Keras' built-in Rescaling is dropped
        # where Keras allows it (EfficientNet's cannot be, see the catalog note).
        kwargs["include_preprocessing"] = False
    return getattr(keras.applications, builder)(**kwargs)


def build_calibrated(spec: RunSpec):
    """The seeded Keras model with the spec's weight policy applied: every TensorFlow
    runtime starts from this, so they all run the same weights."""
    keras.utils.set_random_seed(SEED)
    model = build_keras(spec)
    if spec.weight_policy == "bn_calibrated":
        _calibrate_batchnorm(model, spec)
    return model


class Backend:
    """tf.function: traced for each run's shape in prepare() (timed as prepare_s), checked
    against the Keras call on the same input, then timed.

    A fresh tf.function per run gives every batch size its own shape-specialised trace, as
    the first one got: one function retraced at a second shape would relax its batch
    dimension to None and time a shape-generic graph, so results would depend on the order
    the sweep ran its batch sizes in.
    """

    jit_compile = False
    prepare_s = 0.0
    first_forward_s = None  # the worker times the first call after preparation
    output_rel_diff = 0.0

    def __init__(self):
        self.model = None
        self.fn = None

    def versions(self) -> dict:
        return {"tensorflow": tf.__version__, "keras": keras.__version__,
                "numpy": np.__version__,
                "onednn": tf.sysconfig.get_build_info().get("is_onednn_enabled", None)
                if hasattr(tf.sysconfig, "get_build_info") else None}

    def effective_threads(self) -> dict:
        return {"tf_intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
                "tf_inter_op": tf.config.threading.get_inter_op_parallelism_threads()}

    def load(self, spec: RunSpec) -> None:
        self.model = build_calibrated(spec)
        self.prepare_s = 0.0  # traced per shape in prepare()

    def prepare(self, spec: RunSpec) -> None:
        from engine.worker.backends.base import check_close, checked_rows

        model = self.model
        rows = checked_rows(spec.batch_size)
        data = make_input(spec)
        reference = model(tf.constant(data[rows]), training=False).numpy()
        x = tf.constant(data)
        self.fn = tf.function(lambda x: model(x, training=False), jit_compile=self.jit_compile)
        t = time.perf_counter()
        got = self.fn(x).numpy()  # traces (and, for XLA, compiles) for this input shape
        self.prepare_s = time.perf_counter() - t
        self.output_rel_diff = check_close(reference, got[rows], "the Keras call")

    def model_stats(self, spec: RunSpec, count_flops: bool) -> ModelStats:
        trainable = int(sum(int(np.prod(w.shape)) for w in self.model.trainable_weights))
        flops = _profile_flops(self.model, spec.image_size) if count_flops else None
        return ModelStats(int(self.model.count_params()), trainable, flops,
                          "tf.compat.v1.profiler float_operation on the frozen graph "
                          "(2 FLOPs per MAC; also counts BatchNorm/elementwise ops)")

    def make_step(self, spec: RunSpec):
        x = tf.constant(make_input(spec))
        fn = self.fn

        def step():
            fn(x).numpy()  # materialise: the call returns only when the result exists
        return step

    def context(self):
        import contextlib
        return contextlib.nullcontext()

    def device_peak_bytes(self):
        return None

    def unload(self) -> None:
        self.model = self.fn = None
        keras.backend.clear_session()


def _calibrate_batchnorm(model, spec: RunSpec) -> None:
    """Cumulative-average BatchNorm statistics over a few train-mode passes.

    Keras' default momentum (0.99) would barely move the statistics in a few passes, so
    momentum is set per pass to k/(k+1), which makes the moving value the mean of all passes,
    then restored.
    """
    bns = [l for l in model._flatten_layers() if isinstance(l, keras.layers.BatchNormalization)]
    saved = [l.momentum for l in bns]
    rng = np.random.default_rng(SEED + 1)
    for k in range(CALIBRATION_PASSES):
        for l in bns:
            l.momentum = k / (k + 1)
        x = rng.standard_normal((CALIBRATION_BATCH, spec.image_size, spec.image_size, 3),
                                dtype=np.float32)
        model(x, training=True)
    for l, mom in zip(bns, saved):
        l.momentum = mom


def _profile_flops(model, size: int) -> int:
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2)

    fn = tf.function(lambda x: model(x, training=False))
    concrete = fn.get_concrete_function(tf.TensorSpec([1, size, size, 3], tf.float32))
    frozen = convert_variables_to_constants_v2(concrete)
    opts = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
    opts["output"] = "none"
    info = tf.compat.v1.profiler.profile(graph=frozen.graph,
                                         run_meta=tf.compat.v1.RunMetadata(),
                                         cmd="op", options=opts)
    return int(info.total_float_ops)
