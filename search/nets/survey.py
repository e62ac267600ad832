"""What `nas space show|sample|validate` report: domains, conditions, the size of a space,
and the networks it holds, all without TensorFlow (arch.py does the arithmetic)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna

from nas.errors import NasError
from nas.search.nets.channels import deployed_plan
from nas.search.nets.constraints import static_constraints
from nas.search.nets.plan import NetworkPlan
from nas.search.space import Candidate, Param, SearchSpace, SpaceSpec

# Above this many combinations of the parameters that conditions depend on, the size is
# reported as an upper bound (the product of domain sizes) instead of counted exactly.
_EXACT_LIMIT = 20_000
_PROBES = 200
_NOT_ARCHITECTURE = {"dropout", "batch_size", "optimizer", "learning_rate", "precision", "xla"}


@dataclass(frozen=True)
class SpaceSize:
    combinations: int  # of the discrete parameters, conditions taken into account
    continuous: list[str]  # float ranges: each adds a continuous dimension
    exact: bool


def space_size(params: dict[str, Param]) -> SpaceSize:
    searchable = {n: p for n, p in params.items() if not p.fixed or p.when}
    drivers = {ref for p in searchable.values() for ref, _ in p.when}
    continuous = [n for n, p in searchable.items() if not p.discrete]
    combos = math.prod(len(params[d].values()) for d in drivers if d in params and params[d].discrete)
    if combos > _EXACT_LIMIT:
        total = math.prod(len(p.values()) for p in searchable.values() if p.discrete)
        return SpaceSize(total, continuous, exact=False)
    names = list(params)

    def count(i: int, assigned: dict[str, Any]) -> int:
        if i == len(names):
            return 1
        name, p = names[i], params[names[i]]
        if not p.active(assigned):
            return count(i + 1, assigned)
        if name in drivers:
            return sum(count(i + 1, {**assigned, name: v}) for v in p.values())
        return (len(p.values()) if p.discrete else 1) * count(i + 1, assigned)

    return SpaceSize(count(0, {}), continuous, exact=True)


def output_shape(spec: SpaceSpec) -> tuple[int, int]:
    """(classes, channels) of the networks, without reading the data where it can be helped."""
    d = spec.dataset
    channels = d.channels or (1 if d.source == "digits" else 3)
    if spec.model.num_classes is not None:
        return spec.model.num_classes, channels
    if d.classes is not None:
        return len(d.classes), channels
    if d.source == "digits":
        return 10, channels
    if d.source == "folder" and d.path and Path(d.path).is_dir():
        folders = [p for p in Path(d.path).iterdir() if p.is_dir() and not p.name.startswith(".")]
        if len(folders) >= 2:
            return len(folders), channels
    raise NasError(
        f"the number of classes of a {d.source} dataset is known only after reading it: set model.num_classes"
    )


def sample(space: SearchSpace, seed: int, classes: int, channels: int) -> tuple[dict[str, Any], Candidate]:
    """One candidate drawn at random (Optuna's RandomSampler, define-by-run)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    trial = study.ask()
    candidate = space.sample(trial, num_classes=classes, channels=channels)
    return space.active_values(trial.params), candidate


@dataclass
class Probe:
    """Params, FLOPs and static feasibility over random candidates: what a space holds."""

    params: list[int] = field(default_factory=list)
    flops: list[int] = field(default_factory=list)
    feasible: int = 0

    def summary(self) -> dict[str, Any]:
        return {
            "candidates": len(self.params),
            "params": [min(self.params), max(self.params)],
            "flops": [min(self.flops), max(self.flops)],
            "statically_feasible": self.feasible,
        }


def probe(space: SearchSpace, classes: int, channels: int, n: int = _PROBES) -> Probe:
    out = Probe()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(n):
        net = deployed_plan(space.sample(study.ask(), num_classes=classes, channels=channels))
        out.params.append(net.params())
        out.flops.append(net.flops())
        out.feasible += all(v <= 0 for v in static_constraints(space.spec.constraints, net).values())
    return out


def fixed_network(space: SearchSpace, classes: int, channels: int) -> NetworkPlan | None:
    """The network when no architecture parameter is searched, else None."""
    if any(name not in _NOT_ARCHITECTURE for name in space.searchable()):
        return None
    return deployed_plan(sample(space, 0, classes, channels)[1])


def network_summary(net: NetworkPlan) -> dict[str, Any]:
    return {
        "family": net.family,
        "input_shape": [net.input_size, net.input_size, net.channels],
        "resolution": net.resolution,
        "classes": net.classes,
        "blocks": len(net.blocks),
        "params": net.params(),
        "flops": net.flops(),
        "model_bytes": net.weight_bytes(),
    }


def layer_rows(net: NetworkPlan) -> list[dict[str, Any]]:
    """A row per stem, block and head: the layer summary of `nas space sample`."""
    rows: list[dict[str, Any]] = []
    if net.resolution != net.input_size:
        rows.append({"layer": "resize", "in": net.channels, "out": net.channels, "size": net.resolution, "params": 0})
    rows.append(
        {
            "layer": "stem",
            "in": net.channels,
            "out": net.stem_ch,
            "kernel": 3,
            "stride": net.stem_stride,
            "activation": net.activation,
            "size": net.stem_size,
            "params": 9 * net.channels * net.stem_ch + 4 * net.stem_ch,
        }
    )
    for b in net.blocks:
        rows.append(
            {
                "layer": b.name,
                "block": b.block,
                "in": b.in_ch,
                "hidden": b.hidden,
                "out": b.out_ch,
                "kernel": b.kernel,
                "stride": b.stride,
                "se": b.se_ch,
                "activation": b.activation,
                "residual": b.residual,
                "drop": round(b.drop_rate, 4),
                "size": b.out_size,
                "params": b.params(),
            }
        )
    last = net.blocks[-1].out_ch if net.blocks else net.stem_ch
    head_params = last * net.head_ch + 4 * net.head_ch
    rows.append({"layer": "head", "in": last, "out": net.head_ch, "kernel": 1, "size": net.last_size})
    rows[-1].update(activation=net.activation, params=head_params)
    features = net.head_ch
    if net.head_hidden:
        rows.append({"layer": "head_hidden", "in": net.head_ch, "out": net.head_hidden, "activation": net.activation})
        rows[-1]["params"] = net.head_ch * net.head_hidden + net.head_hidden
        features = net.head_hidden
    rows.append(
        {"layer": "classifier", "in": features, "out": net.classes, "params": features * net.classes + net.classes}
    )
    return rows


def parameter_rows(space: SearchSpace) -> list[dict[str, Any]]:
    rows = []
    for name, p in space.parameters().items():
        row: dict[str, Any] = {"name": name, "kind": p.kind, "fixed": p.fixed, "domain": p.describe()}
        if p.fixed:
            row["value"] = p.value
        elif p.choices:
            row["choices"] = list(p.choices)
        else:
            row.update(low=p.low, high=p.high, step=p.step, log=p.log)
        if p.when:
            row["when"] = {ref: list(allowed) for ref, allowed in p.when}
        rows.append(row)
    return rows


def condition_text(when: dict[str, list[Any]]) -> str:
    def show(v: Any) -> str:
        return str(v).lower() if isinstance(v, bool) else str(v)

    parts = []
    for ref, allowed in when.items():
        values = [show(v) for v in allowed]
        parts.append(f"{ref} = {values[0]}" if len(values) == 1 else f"{ref} in [{', '.join(values)}]")
    return " and ".join(parts)
