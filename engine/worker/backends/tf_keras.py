"""The Keras model called eagerly, model(x, training=False): TensorFlow's reference runtime."""

from __future__ import annotations

import tensorflow as tf

from engine.worker.backends import tf_function
from engine.worker.backends.tf_function import make_input
from engine.spec import RunSpec


class Backend(tf_function.Backend):
    def prepare(self, spec: RunSpec) -> None:
        """The Keras call is the reference: nothing to trace, nothing to differ from."""
        self.prepare_s = 0.0
        self.output_rel_diff = 0.0

    def make_step(self, spec: RunSpec):
        x = tf.constant(make_input(spec))
        model = self.model

        def step():
            model(x, training=False).numpy()
        return step
