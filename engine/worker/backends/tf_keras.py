"""The Keras model called eagerly, model(x, training=False): TensorFlow's reference runtime."""

from __future__ import annotations

import tensorflow as tf

from engine.worker.backends import tf_function
from engine.worker.backends.base import check_close, compared_rows
from engine.worker.backends.tf_function import as_matrix, make_inputs, materialise
from engine.scenarios.inference.spec import RunSpec
from engine.core.encoders import encoder


class Backend(tf_function.Backend):
    def prepare(self, spec: RunSpec) -> None:
        """The Keras call is the reference: nothing to trace, nothing to differ from; a bf16
        model's call is checked against the fp32 one's."""
        self.prepare_s = 0.0
        self.output_rel_diff = 0.0
        if spec.precision != "fp32":
            rows = compared_rows(spec)
            data = [tf.constant(a[rows]) for a in make_inputs(spec)]
            self.output_rel_diff = check_close(as_matrix(self.reference_call(data)),
                                               as_matrix(self.call(data)), "the fp32 Keras "
                                               "call", spec.precision)
            self.count_error(spec, lambda *xs: self.call(list(xs)))

    def make_step(self, spec: RunSpec):
        xs = [tf.constant(a) for a in make_inputs(spec)]
        if spec.user_model is not None or len(xs) > 1 or encoder(spec.model) is not None:
            call = self.call  # several inputs, or a dict of outputs (BERT's)

            def step():
                materialise(call(xs))
            return step
        (x,) = xs
        model = self.model

        def step():
            model(x, training=False).numpy()
        return step
