"""The model catalog: one name per model, a builder in each framework, its native input size.

A row's input is images (its size: pixels a side) or tokens (its size: the sequence
length, token ids and an all-ones mask, engine/core/encoders.py). The size travels as
RunSpec.image_size and the stored runs' image_size column under that one name for both:
for a token model it holds the sequence length, and labels say which (model_label).

This module imports no framework: the dashboard and the CLI read names, sizes and notes
from here, and only a worker process calls a builder (in `engine/worker/backends/`).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.encoders import ENCODERS, TOKEN_REFUSALS
from engine.core.errors import UserError
from engine.core.limits import IMAGE_RANGE, int_range
from engine.core.runtimes import ROWS

__all__ = ["ModelInfo", "CATALOG", "FRAMEWORKS", "RUNTIMES", "REFERENCE_RUNTIME",
           "CPP_RUNNER_RUNTIMES",
           "DIAGNOSTIC_MODELS", "get_model", "model_label", "keras_bn_momentum",
           "OFFERED_MODELS", "IMAGE_MODELS", "tokens_per_sample", "tokens_per_s", "sample_noun",
           "size_noun", "check_size",
           "size_range", "runtime_refusal", "input_values"]

# Runtimes per framework, as the CLI and the dashboard name them, with what each is: derived
# from engine.core.runtimes' rows, where everything else about a runtime is too. The first of
# each is the reference every other runtime's output is checked against before it is timed.
RUNTIMES: dict[str, dict[str, str]] = {
    f: {r.name: r.label for r in ROWS if r.framework == f}
    for f in dict.fromkeys(r.framework for r in ROWS)}
# The runtime a framework gets when none is named (what issue #2's sweeps measured).
FRAMEWORKS: dict[str, str] = {r.framework: r.name for r in ROWS if r.default}
REFERENCE_RUNTIME = {r.framework: r.name for r in ROWS if r.reference}
# Runtimes measured by the LibTorch C++ runner, which times its own loop in a process of its
# own: no replicas' shared window, no interleaved blocks, no LoadGen queries, one float32
# N,C,H,W input.
CPP_RUNNER_RUNTIMES = tuple(r.name for r in ROWS if r.cpp_runner)

_BN_NOTE = (
    "Keras counts BatchNormalization moving mean and variance as (non-trainable) parameters; "
    "torchvision keeps them as buffers, outside parameters(). "
)
_EFF_NOTE = _BN_NOTE + (
    "Keras EfficientNet also starts with a Normalization layer (mean, variance, count: 7 "
    "non-trainable weights) and a Rescaling layer; both are part of its graph and timed."
)


_MOBILE_NOTE = _BN_NOTE + (
    "Trainable counts match exactly (Keras' head uses 1x1 convolutions where torchvision "
    "uses Linear layers: same weights). Keras' built-in Rescaling is switched off "
    "(include_preprocessing=False) so both take the same normalised input."
)


@dataclass(frozen=True)
class ModelInfo:
    name: str
    family: str
    native_size: int
    torch_builder: str  # attribute of torchvision.models
    keras_builder: str  # attribute of keras.applications, or "engine:<fn>" for our own
    note: str
    # torchvision's BatchNorm momentum (torch's convention: the weight of a new batch's
    # statistics; Keras' momentum is 1 minus it). Keras' own defaults are slower (ResNet50
    # and EfficientNet 0.99, MobileNetV3 0.999 in Keras terms), so for training comparisons
    # the TensorFlow trainer sets every BatchNormalization layer to this (keras_bn_momentum).
    torch_bn_momentum: float = 0.1
    input_kind: str = "image"  # "image": size is pixels a side; "tokens": sequence length
    offered: bool = True  # False: a tiny row for tests, not on a form

    @property
    def size_unit(self) -> str:
        return "tok" if self.input_kind == "tokens" else "px"


def _eff(i: int, size: int) -> ModelInfo:
    return ModelInfo(f"efficientnet_b{i}", "EfficientNet", size, f"efficientnet_b{i}",
                     f"EfficientNetB{i}", _EFF_NOTE)


_ENC = ("Built from its configuration with seeded random weights (no download): "
        "transformers' {hf} in torch, keras-hub's {keras} in TensorFlow. ")
_ENCODER_ROWS = (
    ModelInfo("bert_base", "BERT", 128, "transformers:BertModel", "keras_hub:BertBackbone",
              _ENC.format(hf="BertModel", keras="BertBackbone") + "bert-base-uncased's "
              "sizes (12 layers, width 768, 30,522 tokens, 512 positions); pooler included "
              "on both sides, so parameters are equal (109,482,240). GELU is the tanh "
              "approximation on both (keras-hub's; HF's default is the exact erf form, so "
              "HF is set to gelu_pytorch_tanh). Input: random token ids and an all-ones "
              "mask (TensorFlow also gets the all-zeros segment ids keras-hub asks for, "
              "which HF uses by default); size is the sequence length.",
              input_kind="tokens"),
    ModelInfo("vit_b16", "ViT", 224, "transformers:ViTModel", "keras_hub:ViTBackbone",
              _ENC.format(hf="ViTModel", keras="ViTBackbone") + "ViT-B/16 (12 layers, "
              "width 768, patch 16), no pooler and no head on either side, so parameters "
              "are equal (85,798,656 at 224 px; position embeddings grow with the size). "
              "LayerNorm epsilon 1e-6 on both (keras-hub's). Output: the last hidden "
              "state of all 197 tokens."),
    ModelInfo("tiny_bert", "BERT", 32, "transformers:BertModel", "keras_hub:BertBackbone",
              "2 layers, width 64, a vocabulary of 512 ids: for tests.", input_kind="tokens",
              offered=False),
    ModelInfo("tiny_vit", "ViT", 32, "transformers:ViTModel", "keras_hub:ViTBackbone",
              "2 layers, width 64, patch 8: for tests.", offered=False),
)

CATALOG: dict[str, ModelInfo] = {
    m.name: m
    for m in [
        *(_eff(i, s) for i, s in enumerate([224, 240, 260, 300, 380, 456, 528, 600])),
        ModelInfo("resnet18", "ResNet", 224, "resnet18", "engine:resnet18",
                  _BN_NOTE + "Keras has no ResNet18: ours is built layer for layer like "
                  "torchvision's BasicBlock ResNet (bias-free convs, symmetric padding, 1x1 "
                  "projection shortcuts), so trainable counts match exactly."),
        ModelInfo("resnet34", "ResNet", 224, "resnet34", "engine:resnet34",
                  _BN_NOTE + "Keras has no ResNet34: built like torchvision's BasicBlock "
                  "ResNet, so trainable counts match exactly."),
        ModelInfo("resnet50", "ResNet", 224, "resnet50", "ResNet50",
                  _BN_NOTE + "keras.applications.ResNet50 is the original ResNet v1: its "
                  "convolutions carry biases (26,560 more trainable parameters) and the "
                  "stride 2 sits in a block's first 1x1 conv, where torchvision (v1.5) puts "
                  "it in the 3x3, so the two do slightly different work (see FLOPs)."),
        ModelInfo("mobilenet_v3_small", "MobileNetV3", 224, "mobilenet_v3_small",
                  "MobileNetV3Small",
                  _MOBILE_NOTE, torch_bn_momentum=0.01),
        ModelInfo("mobilenet_v3_large", "MobileNetV3", 224, "mobilenet_v3_large",
                  "MobileNetV3Large",
                  _MOBILE_NOTE, torch_bn_momentum=0.01),
        *_ENCODER_ROWS,
    ]
}
# What the forms offer: every row but the tiny test ones. Training, serving and the data
# loading kinds run image classifiers only (their trainers, batchers and datasets make
# images and labels): IMAGE_MODELS is theirs.
OFFERED_MODELS = tuple(n for n, m in CATALOG.items() if m.offered)
IMAGE_MODELS = tuple(n for n, m in CATALOG.items()
                     if m.offered and m.family not in ("BERT", "ViT"))

# Diagnostic models of the "selftest" framework (see FRAMEWORKS); size is nominal.
DIAGNOSTIC_MODELS: dict[str, str] = {
    "identity": "returns its input: measures the harness's own per-iteration overhead",
    "fault_raise": "raises an exception while loading (status error)",
    "fault_hang": "never returns from its first forward (status timeout)",
    "fault_alloc": "allocates memory until the cap stops it (status oom)",
    "fault_exit": "ends its process abruptly mid-run (status killed)",
}


def model_label(model: str, size) -> str:
    """A model and its input size as tables show it ("resnet18 224px", "bert_base 128
    tok"); a user's model (no image size: it takes the inputs it describes) by its name
    alone."""
    if size is None or size != size:
        return str(model)
    info = CATALOG.get(model)
    return f"{model} {int(size)} tok" if info and info.input_kind == "tokens" \
        else f"{model} {size}px"


def tokens_per_sample(model: str, size) -> int | None:
    """The tokens one sample holds (its sequence length) for a token model, else None:
    tokens/s = samples/s x this."""
    info = CATALOG.get(model)
    if info is None or info.input_kind != "tokens" or size is None or size != size:
        return None
    return int(size)


def _takes_tokens(model: str) -> bool:
    """A catalog token model (a user's model, not in the catalog, counts as images)."""
    return model in CATALOG and CATALOG[model].input_kind == "tokens"


def sample_noun(models) -> str:
    """What one sample of these models is, as an axis says it: "sequences" when every one
    is a token model (a sample is one sequence), else "samples"."""
    token = [_takes_tokens(m) for m in models]
    return "sequences" if token and all(token) else "samples"


def size_noun(models) -> str:
    """The input-size column's name for these models: pixels a side for image models, the
    sequence length for token models, both named where they mix."""
    token = {_takes_tokens(m) for m in models}
    if token == {True}:
        return "tokens"
    return "size (px or tokens)" if token == {True, False} else "image px"


def tokens_per_s(model: str, size, samples_per_s) -> float | None:
    """A token model's tokens/s: its samples (sequences) per second x its sequence length;
    None for an image model or a missing figure."""
    tokens = tokens_per_sample(model, size)
    if not tokens or samples_per_s is None or samples_per_s != samples_per_s:
        return None
    return samples_per_s * tokens


def size_range(model: str) -> tuple[int, int, int]:
    """(lowest, highest, step) of a catalog model's input size: a token model's sequence
    length up to its positions; a ViT's side in whole patches; a CNN's IMAGE_RANGE."""
    enc = ENCODERS.get(model)
    if enc is None:
        return (*IMAGE_RANGE, 1)
    if CATALOG[model].input_kind == "tokens":
        return 1, int(enc.hf["max_position_embeddings"]), 1
    p = enc.patch
    return -(-IMAGE_RANGE[0] // p) * p, IMAGE_RANGE[1] // p * p, p


def check_size(model: str, size) -> None:
    """UserError naming image_size (the field that carries a token model's sequence
    length too) and the model's range, in its unit."""
    lo, hi, step = size_range(model)
    if CATALOG[model].input_kind == "tokens":
        int_range("image_size", size, lo, hi,
                  hint=f" (for {model}: its sequence length in tokens)")
        return
    int_range("image_size", size, lo, hi)
    if size % step:
        raise UserError(f"image_size: {size} px is not a whole number of {model}'s "
                        f"{step} px patches; allowed: {lo}..{hi} in steps of {step}",
                        field="image_size")


def runtime_refusal(model: str, runtime: str) -> str:
    """Why a catalog model does not run on a runtime ("" when it does)."""
    info = CATALOG.get(model)
    if info is not None and info.input_kind == "tokens":
        return TOKEN_REFUSALS.get(runtime, "")
    return ""


def input_values(model: str, size) -> int | None:
    """Values in one sample's input(s): 3 x size^2 pixels, or a token model's ids and mask
    (2 x size). The roofline's lower bound of bytes moved counts them."""
    if size is None or size != size:
        return None
    if model in CATALOG and CATALOG[model].input_kind == "tokens":
        return 2 * int(size)
    return 3 * int(size) * int(size)


def get_model(name: str) -> ModelInfo:
    return CATALOG[name]


def keras_bn_momentum(name: str) -> float:
    """The Keras BatchNormalization momentum equal to torchvision's for this model: Keras
    keeps momentum x the old statistic, torch momentum x the new one."""
    return round(1 - CATALOG[name].torch_bn_momentum, 12)
