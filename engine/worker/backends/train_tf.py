"""TensorFlow training: one tf.function train step (GradientTape, SGD with momentum),
the way Keras' fit() runs it, so Python overhead is not what is compared."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import keras

from engine.worker.backends.base import ModelStats
from engine.worker.backends.tf_function import build_keras
from engine.scenarios.training.spec import TrainSpec
from engine.core.catalog import keras_bn_momentum


def match_bn_momentum(model, name: str) -> float:
    """Every BatchNormalization layer at torchvision's momentum for this model (Keras' own
    default keeps 0.99 or 0.999 of the old statistic, torch 0.9 or 0.99), so the two
    frameworks' accuracy curves differ by initialisation, not by how fast BatchNorm tracks
    the batches. The layers read momentum when the train step is traced, which is after
    this. Returns the Keras momentum set (the run records torch's: config_extra)."""
    momentum = keras_bn_momentum(name)
    for layer in model._flatten_layers():
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.momentum = momentum
    return momentum


class Trainer:
    def __init__(self):
        self.model = self.opt = None

    def versions(self) -> dict:
        return {"tensorflow": tf.__version__, "keras": keras.__version__,
                "numpy": np.__version__}

    def effective_threads(self) -> dict:
        return {"tf_intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
                "tf_inter_op": tf.config.threading.get_inter_op_parallelism_threads()}

    def load(self, spec: TrainSpec, classes: int) -> None:
        keras.utils.set_random_seed(spec.seed)
        model = self.model = build_keras(spec, classes)
        match_bn_momentum(model, spec.model)
        # Keras' SGD (v = m*v - lr*g; w += v) equals torch's (b = m*b + g; w -= lr*b) at a
        # constant learning rate.
        opt = self.opt = keras.optimizers.SGD(learning_rate=spec.lr, momentum=spec.momentum)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        @tf.function(reduce_retracing=True)
        def train_fn(x, y):
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                loss = loss_fn(y, logits)
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.int32))
            return loss, correct

        self.train_fn = train_fn
        self.eval_fn = tf.function(lambda x: model(x, training=False), reduce_retracing=True)

    def prepare(self, x_nhwc: np.ndarray) -> np.ndarray:
        return x_nhwc  # Keras is NHWC already

    def train_step(self, xb: np.ndarray, yb: np.ndarray) -> tuple[float, int]:
        loss, correct = self.train_fn(xb, yb)
        # .numpy() returns once the step has run: the step time includes it.
        return float(loss.numpy()), int(correct.numpy())

    def logits(self, xb: np.ndarray) -> np.ndarray:
        return self.eval_fn(xb).numpy()

    def model_stats(self) -> ModelStats:
        trainable = int(sum(int(np.prod(w.shape)) for w in self.model.trainable_weights))
        return ModelStats(int(self.model.count_params()), trainable, None,
                          "not counted for training")

    def reset_device_peak(self) -> None:
        pass  # runs on the CPU only

    def device_peak_bytes(self):
        return None

    def unload(self) -> None:
        self.model = self.opt = None
        keras.backend.clear_session()
