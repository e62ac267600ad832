"""What every part of the space file's schema shares: strict frozen models, and the validator
that turns a YAML value (a constant or a `{choice: ...}`/`{int: ...}` range) into a Param."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, BeforeValidator, ConfigDict

from nas.search.space.params import Check, Kind, Param, parse_param


class Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


def fixed(fields: dict[str, tuple[Kind, Check | None]], values: dict[str, Any], name: str) -> Param:
    """A field's default: the constant Param of its kind holding the value from `values`, the
    same value a switched-off (`when:`) parameter takes, so both are written once."""
    return Param(fields[name][0], value=values[name])


@dataclass(frozen=True)
class Parsed(BeforeValidator):
    """The validator of a searchable field, which keeps the field's kind and domain readable: the
    guide's space reference (scripts/docs_hooks.py) is generated from them."""

    kind: Kind = "str"
    check: Check | None = None


def parsed(kind: Kind, check: Check | None = None) -> Parsed:
    """A field validator: the raw value parsed into a Param of this kind and domain."""
    return Parsed(lambda raw: parse_param(raw, kind, check), kind=kind, check=check)
