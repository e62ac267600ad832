"""The space file's whole schema: SpaceSpec with `search.strategy` limited to the registered
strategies and each strategy's settings under `search.<name>:`, built from the registry so
that a strategy is added by its own folder and one registry line, never by editing spec.py."""

from __future__ import annotations

import functools
from typing import Any, Literal, cast

from pydantic import Field, create_model

from nas.search import strategies
from nas.search.space.spec import SearchSpec, SpaceSpec


def space_schema() -> type[SpaceSpec]:
    """The model every space file is validated by (and the guide's reference is made from)."""
    return _schema(strategies.version())


@functools.cache
def _schema(version: int) -> type[SpaceSpec]:
    parts = {name: strategies.space_part(name) for name in strategies.names()}
    fields: dict[str, Any] = {
        "strategy": (
            Literal[tuple(parts)],
            Field(
                strategies.DEFAULT,
                description="; ".join(f"{name}: {part.summary}" for name, part in parts.items()),
            ),
        )
    }
    for name, part in parts.items():
        if part.schema is not None:
            fields[name] = (part.schema, Field(part.schema(), description=f"settings of strategy: {name}"))
    search = create_model(
        "SearchSpec", __base__=SearchSpec, __module__=SearchSpec.__module__, __doc__=SearchSpec.__doc__, **fields
    )
    described = SpaceSpec.model_fields["search"].description
    space = create_model(
        "SpaceSpec",
        __base__=SpaceSpec,
        __module__=SpaceSpec.__module__,
        __doc__=SpaceSpec.__doc__,
        search=(search, Field(search(), description=described)),
    )
    return cast(type[SpaceSpec], space)
