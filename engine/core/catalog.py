"""The model catalog: one name per model, a builder in each framework, its native input size.

This module imports no framework: the dashboard and the CLI read names, sizes and notes
from here, and only a worker process calls a builder (in `engine/worker/backends/`).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.runtimes import ROWS

__all__ = ["ModelInfo", "CATALOG", "FRAMEWORKS", "RUNTIMES", "REFERENCE_RUNTIME",
           "CPP_RUNNER_RUNTIMES",
           "DIAGNOSTIC_MODELS", "get_model", "model_label", "keras_bn_momentum"]

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


def _eff(i: int, size: int) -> ModelInfo:
    return ModelInfo(f"efficientnet_b{i}", "EfficientNet", size, f"efficientnet_b{i}",
                     f"EfficientNetB{i}", _EFF_NOTE)


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
    ]
}

# Diagnostic models of the "selftest" framework (see FRAMEWORKS); size is nominal.
DIAGNOSTIC_MODELS: dict[str, str] = {
    "identity": "returns its input: measures the harness's own per-iteration overhead",
    "fault_raise": "raises an exception while loading (status error)",
    "fault_hang": "never returns from its first forward (status timeout)",
    "fault_alloc": "allocates memory until the cap stops it (status oom)",
    "fault_exit": "ends its process abruptly mid-run (status killed)",
}


def model_label(model: str, size) -> str:
    """A model and its input size as tables show it; a user's model (no image size: it
    takes the inputs it describes) by its name alone."""
    return f"{model} {size}px" if size is not None and size == size else str(model)


def get_model(name: str) -> ModelInfo:
    return CATALOG[name]


def keras_bn_momentum(name: str) -> float:
    """The Keras BatchNormalization momentum equal to torchvision's for this model: Keras
    keeps momentum x the old statistic, torch momentum x the new one."""
    return round(1 - CATALOG[name].torch_bn_momentum, 12)
