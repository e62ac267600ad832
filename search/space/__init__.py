"""The space language: parameters and units, the schema of a space file, model families,
loading and sampling a candidate. No TensorFlow."""

from typing import TYPE_CHECKING

from nas._lazy import lazy_exports

if TYPE_CHECKING:
    from nas.search.space.base import Spec as Spec
    from nas.search.space.builtin_sets import BUILTIN_SETS as BUILTIN_SETS
    from nas.search.space.candidate import Candidate as Candidate
    from nas.search.space.candidate import StagePlan as StagePlan
    from nas.search.space.compression_spec import PruningSpec as PruningSpec
    from nas.search.space.families import FAMILIES as FAMILIES
    from nas.search.space.loading import load_space as load_space
    from nas.search.space.loading import space_from_dict as space_from_dict
    from nas.search.space.params import Param as Param
    from nas.search.space.params import shown as shown
    from nas.search.space.schema import space_schema as space_schema
    from nas.search.space.searchspace import SearchSpace as SearchSpace
    from nas.search.space.searchspace import stored_strategy as stored_strategy
    from nas.search.space.spec import OBJECTIVES as OBJECTIVES
    from nas.search.space.spec import AugmentationSpec as AugmentationSpec
    from nas.search.space.spec import ConstraintsSpec as ConstraintsSpec
    from nas.search.space.spec import DatasetSpec as DatasetSpec
    from nas.search.space.spec import EarlyStoppingSpec as EarlyStoppingSpec
    from nas.search.space.spec import FinalSpec as FinalSpec
    from nas.search.space.spec import MeasureSpec as MeasureSpec
    from nas.search.space.spec import SpaceSpec as SpaceSpec
    from nas.search.space.units import human as human
    from nas.search.space.units import parse_bytes as parse_bytes
    from nas.search.space.units import parse_count as parse_count

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "builtin_sets": ["BUILTIN_SETS"],
        "base": ["Spec"],
        "schema": ["space_schema"],
        "candidate": ["Candidate", "StagePlan"],
        "compression_spec": ["PruningSpec"],
        "families": ["FAMILIES"],
        "loading": ["load_space", "space_from_dict"],
        "searchspace": ["SearchSpace", "stored_strategy"],
        "params": ["Param", "shown"],
        "spec": [
            "OBJECTIVES",
            "AugmentationSpec",
            "ConstraintsSpec",
            "DatasetSpec",
            "EarlyStoppingSpec",
            "FinalSpec",
            "MeasureSpec",
            "SpaceSpec",
        ],
        "units": ["human", "parse_bytes", "parse_count"],
    },
)

__all__ = [
    "BUILTIN_SETS",
    "FAMILIES",
    "OBJECTIVES",
    "AugmentationSpec",
    "Candidate",
    "ConstraintsSpec",
    "DatasetSpec",
    "EarlyStoppingSpec",
    "FinalSpec",
    "MeasureSpec",
    "Param",
    "PruningSpec",
    "SearchSpace",
    "SpaceSpec",
    "Spec",
    "StagePlan",
    "human",
    "load_space",
    "parse_bytes",
    "parse_count",
    "shown",
    "space_from_dict",
    "space_schema",
    "stored_strategy",
]
