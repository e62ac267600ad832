"""The space language: parameters and units, the schema of a space file, model families,
loading and sampling a candidate. No TensorFlow."""

from nas.search.space.candidate import Candidate, StagePlan
from nas.search.space.compression_spec import PruningSpec
from nas.search.space.families import FAMILIES
from nas.search.space.loading import SearchSpace, load_space, preset_names, space_from_dict
from nas.search.space.params import Param
from nas.search.space.spec import AugmentationSpec, ConstraintsSpec, DatasetSpec, MeasureSpec, SpaceSpec
from nas.search.space.units import human, parse_bytes, parse_count

__all__ = [
    "FAMILIES",
    "AugmentationSpec",
    "Candidate",
    "ConstraintsSpec",
    "DatasetSpec",
    "MeasureSpec",
    "Param",
    "PruningSpec",
    "SearchSpace",
    "SpaceSpec",
    "StagePlan",
    "human",
    "load_space",
    "parse_bytes",
    "parse_count",
    "preset_names",
    "space_from_dict",
]
