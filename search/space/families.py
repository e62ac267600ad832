"""What each model family fixes that a space file does not choose: activations, squeeze-and-
excitation form, stochastic depth and how the width multiplier acts on stem and head."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class FamilyRules:
    activation: str  # stem, head and default stage activation
    gate: str | None  # squeeze-and-excitation gate; None: the family has no SE
    se_activation: str | None  # SE's reduce activation; None: the block's own
    se_base: Literal["hidden", "input"]  # SE width is a ratio of the expanded or the input channels
    drop_connect_rate: float
    head_hidden: int
    scale_stem: bool
    head: Literal["at_least", "scaled", "fixed"]  # how the width multiplier acts on the head


FAMILIES: dict[str, FamilyRules] = {
    # MobileNetV2 (Sandler et al. 2018): ReLU6, linear bottleneck; the head never narrows.
    "mobilenet_v2": FamilyRules("relu6", "hard_sigmoid", "relu", "hidden", 0.0, 0, True, "at_least"),
    # MobileNetV3 (Howard et al. 2019): hard-swish/ReLU per stage, SE with hard-sigmoid on the
    # expanded width, a fixed 16-filter stem, and a dense layer after pooling.
    "mobilenet_v3": FamilyRules("hard_swish", "hard_sigmoid", "relu", "hidden", 0.0, 1280, False, "at_least"),
    # EfficientNet (Tan & Le 2019): swish, SE on the block's input width, stochastic depth.
    "efficientnet": FamilyRules("swish", "sigmoid", None, "input", 0.2, 0, True, "scaled"),
    # EfficientNetV2 (Tan & Le 2021): EfficientNet's rules; its early stages are Fused-MBConv
    # (`block: fused`), which a space file says per stage.
    "efficientnet_v2": FamilyRules("swish", "sigmoid", None, "input", 0.2, 0, True, "scaled"),
    # EfficientNet-Lite: no SE, ReLU6, stem and head kept fixed (quantizes well).
    "efficientnet_lite": FamilyRules("relu6", None, None, "input", 0.2, 0, False, "fixed"),
}
