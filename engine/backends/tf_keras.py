"""The Keras model called eagerly, model(x, training=False): TensorFlow's reference runtime."""

from __future__ import annotations

import tensorflow as tf

from engine.backends import tf_function
from engine.backends.tf_function import build_calibrated, make_input
from engine.spec import RunSpec


class Backend(tf_function.Backend):
    def load(self, spec: RunSpec) -> None:
        self.model = build_calibrated(spec)
        self.prepare_s = 0.0
        self.output_rel_diff = 0.0  # the reference

    def make_step(self, spec: RunSpec):
        x = tf.constant(make_input(spec))
        model = self.model

        def step():
            model(x, training=False).numpy()
        return step
