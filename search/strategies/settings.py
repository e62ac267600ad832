"""A strategy's space part: what the space loader asks of it. Its settings' schema (the space
file's `search.<name>:`), its part of the study's fingerprint, how a stored fingerprint is read,
and its own checks of a space. TensorFlow-free, and in the space's room though it lives here:
the space imports it through the registry (`nas.search.strategies`), never a strategy's engine
part (`strategy.py` and what it imports), which sits above the engine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from nas.search.space import Spec

if TYPE_CHECKING:
    from nas.search.space import SearchSpace


class StrategySettings:
    """The space part of a strategy without settings (`trials`); a strategy with some sets
    `schema` and, where some of them never change what a stored trial means, `unfingerprinted`."""

    schema: ClassVar[type[Spec] | None] = None  # the model of `search.<name>:`; None: no settings
    summary: ClassVar[str] = ""  # one phrase for the schema's description of `search.strategy`
    measures_latency: ClassVar[bool] = True  # whether an unset `measure.latency` means measured

    def __init__(self, name: str) -> None:
        self.name = name

    def of(self, search: Spec) -> Spec:
        """This strategy's settings in a loaded space's `search:` (its defaults where unset)."""
        assert self.schema is not None, f"strategy {self.name} has no settings"
        value = getattr(search, self.name)
        assert isinstance(value, self.schema)
        return value

    def unfingerprinted(self, settings: Any) -> set[str]:
        """Settings that never change what a stored trial means (they act after the search, or
        only decide how much work is done): left out of the study's fingerprint, so a resume
        may change them."""
        return set()

    def fingerprint(self, settings: Any) -> dict[str, Any]:
        """The settings that must not change under a running study. Like every part of the
        space, only those away from their defaults: a later version that adds a setting with a
        default (today's behaviour) keeps every stored study resumable."""
        if self.schema is None:
            return {}
        exclude = self.unfingerprinted(settings)
        data: dict[str, Any] = settings.model_dump(mode="json", exclude_defaults=True, exclude=exclude)
        return data

    def normalised(self, stored: dict[str, Any]) -> dict[str, Any]:
        """A fingerprint part stored by an older version, which kept some settings at their
        defaults, in today's form: those left out, as `fingerprint` leaves them."""
        if self.schema is None:
            return dict(stored)
        defaults = self.schema().model_dump(mode="json")
        return _without_defaults(stored, defaults)

    def check(self, space: SearchSpace) -> None:
        """Raise NasError for a space this strategy cannot search."""


def _without_defaults(stored: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in stored.items():
        default = defaults.get(key, _MISSING)
        if isinstance(value, dict) and isinstance(default, dict) and value != default:
            value = _without_defaults(value, default)
            if not value:
                continue
        elif value == default:
            continue
        out[key] = value
    return out


_MISSING = object()
