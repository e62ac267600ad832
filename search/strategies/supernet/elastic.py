"""What a weight-sharing supernet can share of a space, and the space its trials then sample.

The supernet holds the space's largest network. A subnet chooses, per stage, how many blocks
run (the first k), which kernel (the centre of the largest), which expansion (the first
channels of the hidden layer) and whether squeeze-and-excitation runs, and one width (the
first channels of every layer; the stem's width and the dense head layer's units too). A stage
whose block type is searched holds one set of weights per type (ProxylessNAS' candidate
paths; MBConv and fused blocks share nothing), each elastic as above; the sandwich's largest
and smallest subnets take different types, swapped every step, so both types train on the
labels and by distillation in every phase. And the input resolution and the stem's stride, which change
no weight's shape (every convolution slides the same kernels over a larger or smaller map and
the head pools globally: the same weights run at any spatial size, as in Once-for-All's
elastic resolution). Those five families are elastic. Knobs that only training reads
(learning rate, batch size, optimizer, dropout, precision) cannot differ between subnets that
share one training, so each is fixed at one value for it. Post-training quantization acts on
each subnet after it is extracted and stays searchable. Anything else that changes a
network's structure (a stage's stride or filters, activations, pruning) has no shared form:
such a space is refused, naming the parameter. No TensorFlow: `nas space show` reads this.

Progressive shrinking (Once-for-All; `search.supernet.schedule: progressive`) opens those
families in turn, in phases of the training: `progressive_phases` is the rule.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nas.errors import NasError
from nas.search.space import Param, SearchSpace, shown
from nas.search.strategies.supernet.settings import supernet_settings

ELASTIC_STAGE_FIELDS = ("block", "depth", "kernel", "expansion", "se")
ELASTIC_GLOBALS = ("width_multiplier", "resolution", "stem_stride", "stem_filters", "head_hidden")
# The spatial ones: the same weights at another map size. A smaller stem stride is the larger
# network (4x the work at stride 1 as at 2).
SPATIAL = ("resolution", "stem_stride")
_SMALLER_IS_LARGER = ("stem_stride",)
# Where each training knob lives in the space file.
TRAINING_KNOBS = {
    "batch_size": "training",
    "optimizer": "training",
    "learning_rate": "training",
    "dropout": "model",
    "drop_connect_rate": "model",
    "precision": "compute",
    "xla": "compute",
}
SEARCHABLE_AFTER_TRAINING = ("quantization",)
_STAGE_PARAM = re.compile(r"^(?:stage\d+|shared)\.(\w+)$")
# Progressive shrinking's phases: the largest network alone, then each elastic dimension
# opened in this order (Once-for-All's, which samples the resolution from the start: here it
# opens first); SE opens with the expansion it gates, the stem's stride with the resolution.
LARGEST_PHASE = "largest"
DIMENSIONS = ("resolution", "kernel", "depth", "expansion", "width")
# The block type is no size: never closed, it has no phase of its own (see ElasticSpace.closed).
BLOCK = "block"
_DIMENSION_OF = {"kernel": "kernel", "depth": "depth", "expansion": "expansion", "se": "expansion", "block": BLOCK}


def is_elastic(name: str) -> bool:
    match = _STAGE_PARAM.match(name)
    return name in ELASTIC_GLOBALS or (match is not None and match.group(1) in ELASTIC_STAGE_FIELDS)


def dimension_of(name: str) -> str:
    """The progressive-shrinking dimension an elastic parameter belongs to."""
    if name in SPATIAL:
        return "resolution"
    if name in ELASTIC_GLOBALS:
        return "width"
    match = _STAGE_PARAM.match(name)
    assert match is not None, name
    return _DIMENSION_OF[match.group(1)]


def progressive_phases(epochs: int, dimensions: Sequence[str]) -> list[str]:
    """The phase of each epoch (index epoch - 1) of a progressive-shrinking training.

    A phase is named by the last dimension it opens; `largest` trains the largest network
    alone. `dimensions` are the elastic ones the space has, in the order `DIMENSIONS` opens
    them (a dimension the space does not make elastic has no phase). The first quarter of the
    epochs (epochs // 4, at least 1) is `largest`; the rest are split evenly among the
    dimensions, in order, one more epoch each to the last ones where they do not divide. Every
    phase gets an epoch where the epochs allow: with no more epochs than dimensions there is no
    `largest` phase, and with fewer, the first dimensions open together with the first phase
    that has an epoch (the last phase, everything open, always runs). 12 epochs, kernel, depth,
    expansion and width elastic: largest 1-3, kernel 4-5, depth 6-7, expansion 8-9, width 10-12.
    A pure function of its arguments: a resumed training finds its phase from the epoch alone."""
    count = len(dimensions)
    if not count:
        return [LARGEST_PHASE] * epochs
    first = max(1, epochs // 4) if epochs > count else 0
    base, extra = divmod(epochs - first, count)
    out = [LARGEST_PHASE] * first
    for i, dimension in enumerate(dimensions):
        out += [dimension] * (base + (i >= count - extra))
    return out


def phase_ranges(phases: Sequence[str]) -> str:
    """progressive_phases' list in words: "largest 1-3, kernel 4-5, depth 6"."""
    spans: list[tuple[str, int, int]] = []
    for epoch, phase in enumerate(phases, 1):
        if spans and spans[-1][0] == phase:
            spans[-1] = (phase, spans[-1][1], epoch)
        else:
            spans.append((phase, epoch, epoch))
    return ", ".join(f"{name} {a}-{b}" if b > a else f"{name} {a}" for name, a, b in spans)


def default_fixed(param: Param) -> Any:
    """The value a training knob takes when the space file does not fix it: the first of a
    choice, the middle of a range (geometric for a log range), to three significant digits."""
    if param.fixed:
        return param.value
    if param.choices:
        return param.choices[0]
    assert param.low is not None and param.high is not None
    middle = math.sqrt(param.low * param.high) if param.log else (param.low + param.high) / 2
    if param.kind == "int":
        return round(middle)
    return float(f"{middle:.3g}")


def _check_fixed(name: str, param: Param, value: Any) -> Any:
    where = f"search.supernet.fixed.{name}"
    if param.kind in ("int", "float") and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise NasError(f"{where}: expected a number, got {shown(value)}")
    if param.choices and value not in param.choices:
        raise NasError(f"{where}: {shown(value)} is not one of the space's values {list(param.choices)}")
    if param.low is not None and param.high is not None and not param.low <= value <= param.high:
        raise NasError(f"{where}: {shown(value)} is outside the space's range [{param.low:g}, {param.high:g}]")
    if param.fixed and value != param.value:
        raise NasError(f"{where}: the space fixes {name} at {shown(param.value)}")
    return int(value) if param.kind == "int" else float(value) if param.kind == "float" else value


@dataclass(frozen=True)
class ElasticSpace:
    """A space as a supernet strategy sees it."""

    space: SearchSpace  # the space with every training knob fixed: what trials sample
    elastic: tuple[str, ...]  # the searchable parameters the supernet shares
    fixed: dict[str, Any]  # training knob -> the value the supernet trains with (searchable ones)
    largest: dict[str, Any]  # the elastic parameters' values of the largest subnet
    smallest: dict[str, Any]

    def random_params(self, rng: np.random.Generator, keep: dict[str, Any] | None = None) -> dict[str, Any]:
        """A subnet drawn uniformly, parameter by parameter, conditions respected; the
        parameters in `keep` take its values instead (and draw nothing)."""
        keep = keep or {}
        values: dict[str, Any] = {}
        out: dict[str, Any] = {}
        for name, p in self.space.parameters().items():
            if not p.active(values):
                continue
            value = p.value if p.fixed else keep[name] if name in keep else _draw(p, rng)
            values[name] = value
            if not p.fixed:
                out[name] = value
        return out

    def dimensions(self) -> tuple[str, ...]:
        """The progressive-shrinking dimensions this space makes elastic, in opening order."""
        present = {dimension_of(name) for name in self.elastic}
        return tuple(d for d in DIMENSIONS if d in present)

    def opened(self, phase: str) -> tuple[str, ...]:
        """The dimensions open in `phase` (progressive_phases' names): it and those before it."""
        dimensions = self.dimensions()
        return () if phase == LARGEST_PHASE else dimensions[: dimensions.index(phase) + 1]

    def closed(self, opened: Collection[str]) -> dict[str, Any]:
        """The elastic parameters of the dimensions not `opened`, at their largest values. A
        block type is never closed: each type's weights train from the first phase."""
        return {
            name: self.largest[name]
            for name in self.elastic
            if dimension_of(name) not in opened and dimension_of(name) != BLOCK
        }

    def block_types(self) -> tuple[str, ...]:
        """The searched block-type parameters."""
        return tuple(name for name in self.elastic if dimension_of(name) == BLOCK)

    def swapped(self, params: dict[str, Any]) -> dict[str, Any]:
        """`params` with every searched block type exchanged (the largest's for the smallest's):
        the sandwich's other pair of ends."""
        out = dict(params)
        for name in self.block_types():
            if name in out:
                out[name] = self.smallest[name] if out[name] == self.largest[name] else self.largest[name]
        return out

    def variants(self) -> list[dict[str, Any]]:
        """The largest subnet in each block type: the supernet holds the weights of all of them."""
        return [self.largest, self.swapped(self.largest)] if self.block_types() else [self.largest]

    def smallest_within(self, opened: Collection[str]) -> dict[str, Any]:
        """The smallest subnet that varies only the `opened` dimensions."""
        return {**self.smallest, **self.closed(opened)}

    def middle(self) -> dict[str, Any]:
        """A fixed subnet between the smallest and the largest: each elastic parameter at the
        median of its values (of a continuous range: its midpoint, geometric if log). With an
        even count of values the lower and upper medians alternate over the parameters, in
        the space's order, so a space of two-valued choices is not its largest or smallest."""
        out: dict[str, Any] = {}
        upper = False
        params = self.space.parameters()
        for name in self.elastic:
            p = params[name]
            if p.discrete:
                values = sorted(p.values())
                if len(values) % 2 == 0:
                    upper = not upper
                out[name] = values[len(values) // 2 if upper else (len(values) - 1) // 2]
            else:
                assert p.low is not None and p.high is not None
                mid = math.sqrt(p.low * p.high) if p.log else (p.low + p.high) / 2
                out[name] = p.low + round((mid - p.low) / p.step) * p.step if p.step else mid
        return out


def _draw(p: Param, rng: np.random.Generator) -> Any:
    if p.choices:
        return p.choices[int(rng.integers(len(p.choices)))]
    if p.kind == "int":
        return p.values()[int(rng.integers(len(p.values())))]
    assert p.low is not None and p.high is not None
    if p.log:
        return float(math.exp(rng.uniform(math.log(p.low), math.log(p.high))))
    return float(rng.uniform(p.low, p.high))


def _extreme(name: str, p: Param, largest: bool) -> Any:
    if name.endswith(".block"):
        # No type is larger: the ends take the choice's first and last, so they differ.
        return p.choices[0] if largest else p.choices[-1]
    if name in _SMALLER_IS_LARGER:
        largest = not largest
    if p.choices:
        return max(p.choices) if largest else min(p.choices)
    return p.high if largest else p.low


def elastic_space(space: SearchSpace) -> ElasticSpace:
    """The supernet's view of `space`; NasError (exit 2) names a parameter it cannot share."""
    if space.spec.search.early_stopping.method != "none":
        raise NasError("search.early_stopping: a supernet's trials train nothing to stop; set method: none")
    chosen = dict(supernet_settings(space).fixed)
    params = space.parameters()
    for name in chosen:
        if name not in TRAINING_KNOBS:
            raise NasError(f"search.supernet.fixed.{name}: not a training knob (those are {', '.join(TRAINING_KNOBS)})")
    fixed: dict[str, Any] = {}
    elastic: list[str] = []
    for name, p in params.items():
        if name in TRAINING_KNOBS:
            if name in chosen:
                fixed[name] = _check_fixed(name, p, chosen[name])
            elif not p.fixed:
                fixed[name] = default_fixed(p)
            continue
        if p.fixed:
            if name == "pruning.method" and p.value != "none":
                raise NasError("pruning.method: a supernet's subnets cannot be pruned (set method: none)")
            continue
        if name in SEARCHABLE_AFTER_TRAINING:
            continue
        if not is_elastic(name):
            raise NasError(
                f"{name}: a supernet cannot share this choice (elastic: block, depth, kernel, expansion, se, "
                "width_multiplier, resolution, stem_stride, stem_filters, head_hidden); fix it or use "
                "search.strategy: trials"
            )
        if name == "head_hidden" and p.discrete and 0 in p.values():
            raise NasError(
                "head_hidden: 0 (no dense layer) cannot share the classifier's weights with a dense "
                "layer's; leave 0 out of the choice or fix it"
            )
        if name.endswith(".expansion") and p.discrete and 1.0 in p.values():
            raise NasError(
                f"{name}: expansion 1 drops the expansion convolution, which other expansions share; "
                "leave 1 out of the choice"
            )
        elastic.append(name)
    if not elastic:
        raise NasError(
            "search.strategy: supernet needs at least one elastic choice "
            "(block, depth, kernel, expansion, se, width, resolution, stem stride, stem filters, head hidden)"
        )
    narrowed = _with_fixed(space, fixed)
    largest = {name: _extreme(name, params[name], True) for name in elastic}
    smallest = {name: _extreme(name, params[name], False) for name in elastic}
    return ElasticSpace(narrowed, tuple(elastic), fixed, largest, smallest)


def _with_fixed(space: SearchSpace, fixed: dict[str, Any]) -> SearchSpace:
    spec = space.spec
    parts = {"training": spec.training, "model": spec.model, "compute": spec.compute}
    for name, value in fixed.items():
        section = TRAINING_KNOBS[name]
        current: Param = getattr(parts[section], name)
        parts[section] = parts[section].model_copy(update={name: Param(current.kind, value=value)})
    return SearchSpace(spec.model_copy(update=parts), space.source, space.document)
