"""Static constraints: limits a candidate's plan breaks or meets before any model exists."""

from __future__ import annotations

from nas.search.nets.plan import NetworkPlan
from nas.search.space import ConstraintsSpec


def static_constraints(c: ConstraintsSpec, net: NetworkPlan) -> dict[str, float]:
    """Optuna's convention: a value <= 0 is satisfied. Relative excess, so limits of any
    magnitude weigh alike in the sampler."""
    out = {}
    if c.max_params is not None:
        out["max_params"] = net.params() / c.max_params - 1.0
    if c.max_flops is not None:
        out["max_flops"] = net.flops() / c.max_flops - 1.0
    if c.max_model_size is not None:
        out["max_model_size"] = net.weight_bytes() / c.max_model_size - 1.0
    return out
