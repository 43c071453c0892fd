"""tf.function(jit_compile=True): XLA-compiled; compile time recorded as prepare_s."""

from engine.worker.backends import tf_function


class Backend(tf_function.Backend):
    jit_compile = True
