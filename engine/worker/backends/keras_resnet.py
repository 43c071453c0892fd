"""ResNet18/34 in Keras, built layer for layer like torchvision's BasicBlock ResNet.

Keras has no ResNet18/34. To compare like with like, padding is explicit and symmetric
(torch pads both sides; Keras "same" pads stride-2 convolutions asymmetrically), convs carry
no bias, BatchNorm uses torch's epsilon (1e-5) and momentum (0.1 in torch = 0.9 in Keras),
and the head is global average pooling plus a Dense producing logits (1000-way unless
training asks for fewer classes).
"""

from __future__ import annotations

import keras
from keras import layers

__all__ = ["resnet18", "resnet34"]

_BN = dict(epsilon=1e-5, momentum=0.9)


def _conv_bn(x, filters, kernel, stride, name, relu=True):
    pad = kernel // 2
    if pad:
        x = layers.ZeroPadding2D(pad, name=f"{name}_pad")(x)
    x = layers.Conv2D(filters, kernel, strides=stride, use_bias=False, name=f"{name}_conv")(x)
    x = layers.BatchNormalization(**_BN, name=f"{name}_bn")(x)
    return layers.ReLU(name=f"{name}_relu")(x) if relu else x


def _basic_block(x, filters, stride, name):
    shortcut = x
    y = _conv_bn(x, filters, 3, stride, f"{name}_1")
    y = _conv_bn(y, filters, 3, 1, f"{name}_2", relu=False)
    if stride != 1 or x.shape[-1] != filters:
        shortcut = _conv_bn(x, filters, 1, stride, f"{name}_down", relu=False)
    y = layers.Add(name=f"{name}_add")([y, shortcut])
    return layers.ReLU(name=f"{name}_out")(y)


def _resnet(blocks, name, input_shape, classes=1000):
    inputs = keras.Input(shape=input_shape)
    x = _conv_bn(inputs, 64, 7, 2, "stem")
    # Zero padding before max-pooling equals torch's -inf padding here: inputs are post-ReLU.
    x = layers.ZeroPadding2D(1, name="pool_pad")(x)
    x = layers.MaxPooling2D(3, strides=2, name="pool")(x)
    for stage, (n, filters) in enumerate(zip(blocks, (64, 128, 256, 512)), start=1):
        for i in range(n):
            stride = 2 if (i == 0 and stage > 1) else 1
            x = _basic_block(x, filters, stride, f"layer{stage}_{i}")
    x = layers.GlobalAveragePooling2D(name="avgpool")(x)
    outputs = layers.Dense(classes, name="fc")(x)
    return keras.Model(inputs, outputs, name=name)


def resnet18(input_shape, classes=1000):
    return _resnet((2, 2, 2, 2), "resnet18", input_shape, classes)


def resnet34(input_shape, classes=1000):
    return _resnet((3, 4, 6, 3), "resnet34", input_shape, classes)
