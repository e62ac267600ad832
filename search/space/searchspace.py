"""A loaded space: the flat, named parameters it samples, the Candidates they make, and the
fingerprint a study keeps of it (the schema is spec.py; reading a file, loading.py)."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from typing import Any

import optuna

from nas.errors import NasError
from nas.search import strategies
from nas.search.space.candidate import Candidate, StagePlan
from nas.search.space.compression_spec import COMPRESSION_DEFAULTS
from nas.search.space.families import FAMILIES
from nas.search.space.model_spec import GLOBAL_FIELDS, GLOBAL_OFF, STAGE_DEFAULTS, STAGE_FIELDS, sampling_order
from nas.search.space.params import Param
from nas.search.space.spec import (
    COMPUTE_DEFAULTS,
    TRAINING_DEFAULTS,
    SpaceSpec,
)


class SearchSpace:
    """A validated space: names its parameters and turns samples into Candidates.

    Parameters have flat Optuna names: globals (`width_multiplier`, `phi`), `shared.kernel`
    for one value used by every stage that does not set its own, `stage2.kernel` for a
    stage's own, then training and compute ones. Conditions refer to these names.
    """

    def __init__(self, spec: SpaceSpec, source: str = "<dict>", document: dict[str, Any] | None = None) -> None:
        self.spec = spec
        self.source = source
        # The mapping the space was read from: stored on the study so that `nas worker` on
        # another machine rebuilds the same space without the file.
        self.document = document
        self._sources = {
            (i, field): self._source(i, field) for i in range(len(spec.model.stages)) for field in STAGE_FIELDS
        }
        self._params = self._flatten()

    @property
    def name(self) -> str:
        return self.spec.name

    def stage_source(self, stage: int, field: str) -> str:
        """The parameter a stage's field takes its value from."""
        return self._sources[(stage, field)]

    def _source(self, stage: int, field: str) -> str:
        m = self.spec.model
        if field in m.stages[stage].set_params():
            return f"stage{stage}.{field}"
        if field in m.shared.set_params():
            return f"shared.{field}"
        if field == "activation":
            return "activation"
        return f"stage{stage}.{field}"

    def _flatten(self) -> dict[str, Param]:
        m, rules = self.spec.model, FAMILIES[self.spec.model.family]
        out: dict[str, Param] = {}

        def add(scope: dict[str, Param], rename: Any) -> None:
            for key in sampling_order(scope):
                p = scope[key]
                when = tuple((rename(k), allowed) for k, allowed in p.when)
                out[rename(key)] = replace(p, when=when)

        globals_ = m.global_params()
        globals_.setdefault("resolution", Param("int", value=self.spec.dataset.image_size))
        globals_.setdefault("activation", Param("str", value=rules.activation))
        globals_.setdefault("drop_connect_rate", Param("float", value=rules.drop_connect_rate))
        globals_.setdefault("head_hidden", Param("int", value=rules.head_hidden))
        add({k: globals_[k] for k in GLOBAL_FIELDS}, lambda k: k)
        if m.compound is not None:
            out["phi"] = m.compound.phi
        add(m.shared.set_params(), lambda k: f"shared.{k}")
        shared = m.shared.set_params()
        for i, stage in enumerate(m.stages):
            own = stage.set_params()
            scope = {
                f: own.get(f) or Param(STAGE_FIELDS[f][0], value=STAGE_DEFAULTS[f])
                for f in STAGE_FIELDS
                if f in own or (f not in shared and f != "activation")
            }
            add(scope, lambda k, i=i: self.stage_source(i, k))
        add(self.spec.training.params(), lambda k: k)
        add(self.spec.compute.params(), lambda k: k)
        pruning = self.spec.compression.pruning.params()
        add(pruning, lambda k: f"pruning.{k}")
        add({"quantization": self.spec.compression.quantization}, lambda k: k)
        return out

    def parameters(self) -> dict[str, Param]:
        """Every parameter by its Optuna name, fixed ones included, in sampling order."""
        return dict(self._params)

    def searchable(self) -> dict[str, Param]:
        return {name: p for name, p in self._params.items() if not p.fixed}

    def distributions(self) -> dict[str, optuna.distributions.BaseDistribution]:
        return {name: p.distribution() for name, p in self.searchable().items()}

    def configurations(self) -> list[dict[str, Any]]:
        """Every configuration of a finite space, as the trial parameters a sampler would
        suggest (searchable and active ones only), in a fixed order: a parameter whose
        conditions do not hold in a branch is left out of that branch, as in `sample`."""
        continuous = [name for name, p in self.searchable().items() if not p.discrete]
        if continuous:
            raise NasError(f"{continuous[0]}: a continuous range has no finite list of values (use choice)")
        branches: list[tuple[dict[str, Any], dict[str, Any]]] = [({}, {})]  # (all values, searchable ones)
        for name, p in self._params.items():
            grown = []
            for values, params in branches:
                if not p.active(values):
                    grown.append((values, params))
                elif p.fixed:
                    grown.append(({**values, name: p.value}, params))
                else:
                    grown += [({**values, name: v}, {**params, name: v}) for v in p.values()]
            branches = grown
        return [params for _, params in branches]

    def sample(self, trial: optuna.Trial, *, num_classes: int, channels: int) -> Candidate:
        """Define-by-run: a parameter whose conditions do not hold is never suggested."""
        values: dict[str, Any] = {}
        for name, p in self._params.items():
            if p.active(values):
                values[name] = p.suggest(trial, name)
        return self._candidate(values, num_classes=num_classes, channels=channels)

    def candidate(self, params: dict[str, Any], *, num_classes: int, channels: int) -> Candidate:
        """Rebuild the Candidate of a stored trial from its parameters."""
        values: dict[str, Any] = {}
        for name, p in self._params.items():
            if not p.active(values):
                continue
            if p.fixed:
                values[name] = p.value
            elif name in params:
                values[name] = params[name]
            else:
                raise NasError(f"trial parameters lack '{name}' (was the space changed?)")
        return self._candidate(values, num_classes=num_classes, channels=channels)

    def active_values(self, params: dict[str, Any]) -> dict[str, Any]:
        """The values of a trial's active parameters, fixed ones included."""
        values: dict[str, Any] = {}
        for name, p in self._params.items():
            if p.active(values):
                values[name] = p.value if p.fixed else params.get(name)
        return values

    def _candidate(self, v: dict[str, Any], *, num_classes: int, channels: int) -> Candidate:
        m, t = self.spec.model, self.spec.training
        rules = FAMILIES[m.family]
        # An inactive parameter takes its "off" value.
        defaults: dict[str, Any] = {
            **GLOBAL_OFF,
            "resolution": self.spec.dataset.image_size,
            "stem_stride": 2,
            "activation": rules.activation,
            "phi": 0.0,
            **TRAINING_DEFAULTS,
            **COMPUTE_DEFAULTS,
            **{f"pruning.{k}": COMPRESSION_DEFAULTS[k] for k in ("method", "sparsity")},
            "quantization": COMPRESSION_DEFAULTS["quantization"],
        }

        def get(name: str) -> Any:
            value = v.get(name)
            return defaults[name] if value is None else value

        activation = str(get("activation"))

        def stage_value(i: int, field: str) -> Any:
            value = v.get(self.stage_source(i, field))
            if value is None:
                return activation if field == "activation" else STAGE_DEFAULTS[field]
            return value

        stages = tuple(
            StagePlan(
                filters=int(stage_value(i, "filters")),
                stride=int(stage_value(i, "stride")),
                depth=int(stage_value(i, "depth")),
                kernel=int(stage_value(i, "kernel")),
                expansion=float(stage_value(i, "expansion")),
                se=bool(stage_value(i, "se")),
                se_ratio=float(stage_value(i, "se_ratio")),
                activation=str(stage_value(i, "activation")),
                block=str(stage_value(i, "block")),
            )
            for i in range(len(m.stages))
        )
        width, depth = float(get("width_multiplier")), float(get("depth_multiplier"))
        resolution = int(get("resolution"))
        if m.compound is not None:
            phi = float(get("phi"))
            depth *= m.compound.alpha**phi
            width *= m.compound.beta**phi
            resolution = round(resolution * m.compound.gamma**phi)
        return Candidate(
            num_classes=num_classes,
            image_size=self.spec.dataset.image_size,
            channels=channels,
            width_multiplier=round(width, 6),
            stem_filters=int(get("stem_filters")),
            stem_stride=int(get("stem_stride")),
            head_filters=m.head_filters,
            dropout=float(get("dropout")),
            stages=stages,
            epochs=t.epochs,
            batch_size=int(get("batch_size")),
            optimizer=str(get("optimizer")),
            learning_rate=float(get("learning_rate")),
            precision=str(get("precision")),
            xla=bool(get("xla")),
            family=m.family,
            depth_multiplier=round(depth, 6),
            resolution=resolution,
            activation=activation,
            drop_connect_rate=float(get("drop_connect_rate")),
            head_hidden=int(get("head_hidden")),
            pruning=str(get("pruning.method")),
            sparsity=float(get("pruning.sparsity")),
            quantization=str(get("quantization")),
        )

    def with_precisions(self, allowed: list[str]) -> SearchSpace:
        """This space with only `allowed` precision policies (for a device that cannot run
        the others)."""
        param = Param("str", value=allowed[0]) if len(allowed) == 1 else Param("str", choices=tuple(allowed))
        compute = self.spec.compute.model_copy(update={"precision": param})
        return SearchSpace(self.spec.model_copy(update={"compute": compute}), self.source, self.document)

    def fingerprint(self) -> str:
        """What must not change under a running study: everything but `name` and the search's
        budget and sampler; the strategy and its settings are in it, since a supernet study's
        trials are scored by weights those settings trained."""
        # Defaults left out: a later version that adds a knob with a default does not make
        # every existing study look changed (a `trials` study's fingerprint has no `search`).
        # `final` acts after the search (nas train), like the search's own budget and sampler.
        data = self.spec.model_dump(mode="json", exclude={"name", "search", "final"}, exclude_defaults=True)
        if data.get("measure", {}).get("latency") is True:
            # `latency: true` was the default until it became unset (resolved per strategy): as
            # then, it is left out, so studies made from a space that says it still resume.
            del data["measure"]["latency"]
            if not data["measure"]:
                del data["measure"]
        # The test set is read by `nas train` only: one can be added to a finished study.
        data.get("dataset", {}).pop("test_path", None)
        for name in ("stem_stride", "stem_filters", "head_hidden"):
            param = getattr(self.spec.model, name)
            if param is not None and param.fixed and name in data["model"]:
                # A fixed one was a plain number before it became searchable: studies made then resume.
                data["model"][name] = param.value
        if search := self._search_fingerprint():
            data["search"] = search
        return json.dumps(_plain(data), sort_keys=True)

    def _search_fingerprint(self) -> dict[str, Any]:
        """The strategy and its settings away from their defaults (the rest of `search:` is the
        budget and the sampler, which may change)."""
        name = self.spec.search.strategy
        part = strategies.space_part(name)
        data: dict[str, Any] = {} if name == strategies.DEFAULT else {"strategy": name}
        if part.schema is not None and (settings := part.fingerprint(part.of(self.spec.search))):
            data[name] = settings
        return data

    def matches(self, stored: dict[str, Any]) -> bool:
        """Whether a fingerprint a study (or a supernet's checkpoint) stored is this space's.
        Older versions kept some strategy settings at their defaults: read in today's form."""
        return json.dumps(normalised(stored), sort_keys=True) == self.fingerprint()


def stored_strategy(stored: dict[str, Any]) -> str:
    """The strategy a stored fingerprint was searched with."""
    name: str = stored.get("search", {}).get("strategy", strategies.DEFAULT)
    return name


def normalised(stored: dict[str, Any]) -> dict[str, Any]:
    """A stored fingerprint in today's form: every part of the space keeps only what differs
    from its defaults, the strategy's settings included (`StrategySettings.normalised`)."""
    search = dict(stored.get("search") or {})
    name = search.pop("strategy", strategies.DEFAULT)
    out = {k: v for k, v in stored.items() if k != "search"}
    if name not in strategies.REGISTRY:
        out["search"] = {"strategy": name, **search}  # matches nothing today: refused as changed
        return out
    settings = strategies.space_part(name).normalised(search.pop(name, None) or {})
    part = ({} if name == strategies.DEFAULT else {"strategy": name}) | ({name: settings} if settings else {})
    if part or search:
        out["search"] = part | search
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, Param):
        return {k: v for k, v in asdict(value).items() if v not in (None, (), False)}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
