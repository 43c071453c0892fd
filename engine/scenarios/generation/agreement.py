"""How a runtime's greedy tokens are held to the reference's (PyTorch eager, fp32, greedy,
on the same seeded prompts), before anything is timed.

The figure is the share of positions equal to the reference's over the first
min(N, AGREE_TOKENS) generated tokens of every row. Greedy decoding conditions each token
on the ones before, so once a runtime picks a different token the rest of that row
diverges: the share is, in effect, how far into each row the runtime followed the
reference. A runtime below its precision's threshold is an `invalid` row with the figure.

Thresholds. fp32: 0.9. Two fp32 runtimes reorder sums differently, and a near-tie between
the two best logits can flip late in a row; the weights are drawn so that logits are wide
(engine/scenarios/generation/models.py: std about 2) and near-ties rare, so an fp32 runtime
that follows the reference for less than 90 % of the compared positions is computing
something else. Reduced precisions: REDUCED_THRESHOLD (0: recorded, not judged), with the
measurement it rests on.

Framework-free (numpy): the worker checks, the pages state the rule.
"""

from __future__ import annotations

import numpy as np

__all__ = ["AGREE_TOKENS", "FP32_THRESHOLD", "REDUCED_THRESHOLD", "threshold",
           "agreement_share", "REFERENCE_TEXT"]

AGREE_TOKENS = 32
FP32_THRESHOLD = 0.9
# Reduced precisions (bf16, int8, int4) are recorded and shown, never judged on this
# figure. Measured here, torch eager bf16 against its own fp32 on the same prompts (batch
# 4, first 32 tokens, prompt seeds 0-2, prompts of 16 and 128 tokens): tiny_llama 0.38-0.95,
# tiny_gpt2 0.61-1.00, smollm2_135m 0.10 and 0.04, with rows that took another token at
# their very first step. Rounding weights and activations to 8 mantissa bits flips a
# near-tie somewhere in most rows of a 30-layer model, and greedy decoding diverges from
# there, so a correct bf16 run can share almost nothing with fp32 by position: any
# threshold above 0 would call correct runs invalid. (A check that survives one flipped
# token would score each step on the reference's own prefix, which only a runtime that
# takes a forward call per step, not OpenVINO GenAI or Keras' one-call generate, allows.)
REDUCED_THRESHOLD = 0.0
REFERENCE_TEXT = "torch eager fp32 greedy on the same prompts"


def threshold(precision: str) -> float:
    return FP32_THRESHOLD if precision == "fp32" else REDUCED_THRESHOLD


def agreement_share(tokens, reference) -> tuple[float, int]:
    """(share of equal positions, positions compared) over the first min(N, AGREE_TOKENS)
    tokens of every row; tokens and reference are (batch, >= that many) integer arrays."""
    tokens, reference = np.asarray(tokens), np.asarray(reference)
    if tokens.shape[0] != reference.shape[0]:
        raise ValueError(f"{tokens.shape[0]} rows against the reference's "
                         f"{reference.shape[0]}")
    k = min(tokens.shape[1], reference.shape[1], AGREE_TOKENS)
    if k == 0:
        raise ValueError("no tokens to compare")
    equal = tokens[:, :k] == reference[:, :k]
    return float(equal.mean()), int(equal.size)
