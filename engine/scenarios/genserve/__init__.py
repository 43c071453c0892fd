"""Serving a language model (issue 38, kind `genserve`): LoadGen in token-latency mode (TTFT
and TPOT bounds) and a closed loop of N users against a continuous-batching engine or the
one-request-at-a-time baseline; the parent derives every figure from each request's raw
readings."""
