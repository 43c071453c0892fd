"""Keras models run through a compiled tf.function, the result materialised each call."""

from __future__ import annotations

import sys
import time

import numpy as np
import tensorflow as tf
import keras

from engine.worker import user_models, weights
from engine.worker.backends.base import (ERROR_SEED, SEED, ModelStats, check_close,
                                         compared_rows, error_batches, output_error,
                                         output_matrix)
from engine.core.catalog import get_model
from engine.core.encoders import FLOPS_METHOD, encoder, encoder_flops
from engine.core.precision import REDUCED
from engine.scenarios.inference.spec import RunSpec

CALIBRATION_PASSES = 3
CALIBRATION_BATCH = 2


def make_input(spec: RunSpec) -> np.ndarray:
    """The same values the torch backend uses, laid out NHWC."""
    rng = np.random.default_rng(SEED)
    nchw = rng.standard_normal((spec.batch_size, 3, spec.image_size, spec.image_size),
                               dtype=np.float32)
    return np.ascontiguousarray(nchw.transpose(0, 2, 3, 1))


def catalog_inputs(spec: RunSpec, gen: np.random.Generator) -> list[np.ndarray]:
    """One batch of a catalog model's inputs drawn from gen: an encoder's (token ids,
    segment ids and mask, or ViT's NHWC images: keras_encoders.py), else NHWC images
    drawn as N,H,W,C directly (the error figures' draw)."""
    if encoder(spec.model) is not None:
        from engine.worker.backends import keras_encoders
        return keras_encoders.inputs(spec.model, spec.batch_size, spec.image_size, gen)
    return [gen.standard_normal((spec.batch_size, spec.image_size, spec.image_size, 3),
                                dtype=np.float32)]


def make_inputs(spec: RunSpec) -> list[np.ndarray]:
    """A catalog model's one NHWC image batch (an encoder's inputs), or the inputs a user's
    model describes (issue #14), in the layout it describes."""
    if spec.user_model is not None:
        return user_models.arrays(spec.user_model.inputs, spec.batch_size, SEED)
    if encoder(spec.model) is not None:
        return catalog_inputs(spec, np.random.default_rng(SEED))
    return [make_input(spec)]


def as_matrix(out):
    """A call's output (a tensor, or a dict/tuple of them) as one float array, a row per
    sample (engine.worker.backends.base.output_matrix)."""
    return output_matrix(out, lambda t: t.numpy() if hasattr(t, "numpy") else t)


def materialise(out) -> None:
    """Wait for every output tensor: a call returns only when its results exist."""
    for t in tf.nest.flatten(out):
        t.numpy()


def caller(model, spec: RunSpec):
    """call(list of tensors) -> output, for a Keras model or a SavedModel signature."""
    src = spec.user_model
    if src is None and encoder(spec.model) is not None:
        from engine.worker.backends import keras_encoders
        return keras_encoders.call(model, spec.model)
    if src is None:
        return lambda xs: model(xs[0], training=False)
    if isinstance(model, keras.Model):
        return lambda xs: model(xs[0] if len(xs) == 1 else list(xs), training=False)
    # A SavedModel's serving signature takes keyword tensors: by the described names when
    # they are the signature's, else in the signature's order.
    names = list(model.structured_input_signature[1])
    described = [i.name for i in src.inputs]
    if len(names) != len(described):
        raise ValueError(f"input: the SavedModel's serving_default takes {len(names)} inputs "
                         f"({', '.join(names)}); {len(described)} were described")
    keys = described if sorted(described) == sorted(names) else names
    return lambda xs: model(**dict(zip(keys, xs)))


def build_keras(spec, classes: int = 1000):
    """The catalog's Keras model for spec.model at spec.image_size, producing logits."""
    if encoder(spec.model) is not None:  # keras-hub's backbone: no classes, no head
        from engine.worker.backends import keras_encoders
        return keras_encoders.build(spec.model, spec.image_size)
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
    """(the seeded Keras model with the spec's weight policy applied, how its calibrated
    weights came (engine.worker.weights: read from the runner's file, or calibrated here;
    None for random ones), the seconds calibrating took): every TensorFlow runtime starts
    from this, so they all run the same weights."""
    keras.utils.set_random_seed(SEED)
    model = build_keras(spec)
    if spec.weight_policy != "bn_calibrated" or encoder(spec.model) is not None:
        return model, None, 0.0  # an encoder has no BatchNorm: nothing to calibrate
    how, seconds = weights.calibrated(
        weights.weights_path("tensorflow", tf.__version__, spec, ".npz"),
        lambda: _calibrate_batchnorm(model, spec),
        lambda path: _write_weights(model, path), lambda path: _read_weights(model, path))
    return model, how, seconds


def _write_weights(model, path) -> None:
    with open(path, "wb") as f:  # a file object: np.savez would add .npz to a path
        np.savez(f, *model.get_weights())


def _read_weights(model, path) -> None:
    with np.load(path) as saved:
        model.set_weights([saved[f"arr_{i}"] for i in range(len(saved.files))])


def build_bf16(spec: RunSpec, reference):
    """The same model built under Keras' mixed_bfloat16 policy (bf16 compute, fp32
    variables) with the fp32 reference's weights. Keras reads the global policy when a layer
    is made, so the policy is set for the build alone and the previous one restored: no
    later model of this process is built in bf16 by accident. The runner gives bf16
    TensorFlow runs a worker of their own as well (engine.run.process.together.worker_key)."""
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = build_keras(spec)
    finally:
        keras.mixed_precision.set_global_policy(previous)
    model.set_weights(reference.get_weights())
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
    # how the calibrated weights came and the seconds calibrating took, kept out of the
    # build time (engine.worker.weights)
    weights_from = None
    calibrate_s = 0.0
    output_rel_diff = 0.0
    output_error = None  # a bf16 run's OutputError against the fp32 Keras call
    runtime_settings = None

    def __init__(self):
        self.model = None
        self.fn = None
        self.reference_call = None  # the fp32 Keras call a bf16 model is checked against

    def versions(self) -> dict:
        return {"tensorflow": tf.__version__, "keras": keras.__version__,
                "numpy": np.__version__,
                "onednn": tf.sysconfig.get_build_info().get("is_onednn_enabled", None)
                if hasattr(tf.sysconfig, "get_build_info") else None,
                # an encoder's builder (keras_encoders) imports it; a CNN's worker never does
                **({"keras_hub": sys.modules["keras_hub"].__version__}
                   if "keras_hub" in sys.modules else {})}

    def effective_threads(self) -> dict:
        return {"tf_intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
                "tf_inter_op": tf.config.threading.get_inter_op_parallelism_threads()}

    def load(self, spec: RunSpec) -> None:
        if spec.user_model is not None:  # the user's weights, as given: never re-calibrated
            self.model = user_models.tf_model(spec.user_model)
        else:
            self.model, self.weights_from, self.calibrate_s = build_calibrated(spec)
        self.call = self.reference_call = caller(self.model, spec)
        self.output_error = None
        if spec.precision == "bf16":
            reference = self.model
            self.model = build_bf16(spec, reference)
            self.call = caller(self.model, spec)
            self.reference_call = caller(reference, spec)
        self.prepare_s = 0.0  # traced per shape in prepare()

    def prepare(self, spec: RunSpec) -> None:
        call = self.call
        rows = compared_rows(spec)
        data = make_inputs(spec)
        reference = as_matrix(self.reference_call([tf.constant(a[rows]) for a in data]))
        xs = [tf.constant(a) for a in data]
        self.fn = tf.function(lambda *xs: call(list(xs)), jit_compile=self.jit_compile)
        t = time.perf_counter()
        got = as_matrix(self.fn(*xs))  # traces (and, for XLA, compiles) for this shape
        self.prepare_s = time.perf_counter() - t
        self.output_rel_diff = check_close(reference, got[rows], "the Keras call",
                                           spec.precision)
        self.count_error(spec, self.fn)

    def count_error(self, spec: RunSpec, run) -> None:
        """A bf16 run's OutputError against the fp32 Keras call, once per built model, on
        error_batches() generated batches of this run's size (NHWC, ERROR_SEED)."""
        if spec.precision not in REDUCED or spec.user_model is not None \
                or self.output_error is not None:
            return
        gen = np.random.default_rng(ERROR_SEED)
        refs, gots = [], []
        for _ in range(error_batches(spec.batch_size)):
            xs = [tf.constant(a) for a in catalog_inputs(spec, gen)]
            refs.append(as_matrix(self.reference_call(xs)))
            gots.append(as_matrix(run(*xs)))
        self.output_error = output_error(np.concatenate(refs), np.concatenate(gots))

    def model_stats(self, spec: RunSpec, count_flops: bool) -> ModelStats:
        if isinstance(self.model, keras.Model):
            weights, params = self.model.trainable_weights, int(self.model.count_params())
        else:  # a SavedModel signature: its captured variables
            weights = self.model.trainable_variables
            params = int(sum(int(np.prod(v.shape)) for v in self.model.variables))
        trainable = int(sum(int(np.prod(w.shape)) for w in weights))
        method = ("tf.compat.v1.profiler float_operation on the frozen graph "
                  "(2 FLOPs per MAC; also counts BatchNorm/elementwise ops)")
        flops = None
        if spec.user_model is None and encoder(spec.model) is not None:
            # counted from the configuration, as the torch side counts it
            return ModelStats(params, trainable, encoder_flops(spec.model, spec.image_size)
                              if count_flops else None, FLOPS_METHOD)
        if count_flops:
            from dataclasses import replace

            one = [tf.TensorSpec(a.shape, a.dtype)
                   for a in make_inputs(replace(spec, batch_size=1))]
            try:
                flops = _profile_flops(self.call, one)
            except Exception as exc:  # noqa: BLE001 - a user's graph the profiler cannot read
                if spec.user_model is None:
                    raise
                method = f"not counted: the TF profiler failed ({type(exc).__name__})"
        return ModelStats(params, trainable, flops, method)

    def make_step(self, spec: RunSpec):
        xs = [tf.constant(a) for a in make_inputs(spec)]
        fn = self.fn
        if spec.user_model is not None or len(xs) > 1 or encoder(spec.model) is not None:
            def step():  # several inputs, or a dict of outputs (BERT's)
                materialise(fn(*xs))
            return step
        (x,) = xs

        def step():
            fn(x).numpy()  # materialise: the call returns only when the result exists
        return step

    def context(self):
        import contextlib
        return contextlib.nullcontext()

    def start_device(self, spec: RunSpec) -> None:
        pass  # runs on the CPU only: nothing to start

    def reset_device_peak(self) -> None:
        pass  # runs on the CPU only: no device peak

    def device_peak_bytes(self):
        return None

    def unload(self) -> None:
        self.model = self.fn = self.call = self.reference_call = None
        keras.backend.clear_session()


def _calibrate_batchnorm(model, spec: RunSpec) -> None:
    """Cumulative-average BatchNorm statistics over a few train-mode passes.

    Keras' default momentum (0.99) would barely move the statistics in a few passes, so
    momentum is set per pass to k/(k+1), which makes the moving value the mean of all passes,
    then restored.
    """
    bns = [l for l in model._flatten_layers() if isinstance(l, keras.layers.BatchNormalization)]
    if not bns:  # nothing to calibrate (the encoders): no pass, no input to draw
        return
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


def _profile_flops(call, specs: list) -> int:
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2)

    fn = tf.function(lambda *xs: call(list(xs)))
    concrete = fn.get_concrete_function(*specs)
    frozen = convert_variables_to_constants_v2(concrete)
    opts = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
    opts["output"] = "none"
    info = tf.compat.v1.profiler.profile(graph=frozen.graph,
                                         run_meta=tf.compat.v1.RunMetadata(),
                                         cmd="op", options=opts)
    return int(info.total_float_ops)
