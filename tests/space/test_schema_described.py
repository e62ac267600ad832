"""The space file's schema describes itself: the guide's space reference is generated from the
models' docstrings and field descriptions, so a field without one would be a hole in it."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any, get_args

from nas.search.space import compression_spec, model_spec, spec
from nas.search.space.base import Spec
from nas.search.space.params import Param
from nas.search.space.schema import space_schema
from nas.search.strategies.supernet import settings as supernet_settings


def _nested(annotation: Any) -> Iterator[Any]:
    """The annotation and every type inside it (list[X], X | None, dict[str, X], ...)."""
    yield annotation
    for arg in get_args(annotation):
        yield from _nested(arg)


def _walk(model: type[Spec], path: str, seen: dict[type[Spec], str], problems: list[str]) -> None:
    if model in seen:
        return
    seen[model] = path
    if not (model.__dict__.get("__doc__") or "").strip():
        problems.append(f"{path or '(the file)'}: {model.__name__} has no docstring")
    for name, field in model.model_fields.items():
        dotted = f"{path}.{name}" if path else name
        types = list(_nested(field.annotation))
        description = (field.description or "").strip()
        if not description:
            problems.append(f"{dotted}: no description")
        elif Param in types and not description.startswith("searchable"):
            problems.append(f"{dotted}: a Param, but its description does not start with 'searchable'")
        for t in types:
            if inspect.isclass(t) and issubclass(t, Spec):
                _walk(t, dotted, seen, problems)


def test_every_field_and_model_is_described() -> None:
    seen: dict[type[Spec], str] = {}
    problems: list[str] = []
    _walk(space_schema(), "", seen, problems)
    assert not problems, "the space schema has undocumented parts:\n" + "\n".join(problems)

    # The walk reaches every model the three schema modules define (so none escapes the check).
    defined = {
        cls
        for module in (spec, model_spec, compression_spec, supernet_settings)
        for cls in vars(module).values()
        if inspect.isclass(cls) and issubclass(cls, Spec) and cls is not Spec and cls.__module__ == module.__name__
    }
    # The schema's SearchSpec and SpaceSpec are spec.py's with the registered strategies added.
    missed = sorted(cls.__name__ for cls in defined if not any(issubclass(s, cls) for s in seen))
    assert not missed, f"models not reached from SpaceSpec: {missed}"
    assert seen[model_spec.StageSpec] == "model.stages"
    assert seen[spec.TFRecordSpec] == "dataset.tfrecord"
