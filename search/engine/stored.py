"""A finished study read back: its space, and a stored trial's network rebuilt exactly as the
trial built, measured and deployed it. Confirming, fine-tuning, final training and export all
read a study through here, so none of them can rebuild a trial differently."""

from __future__ import annotations

from typing import Any

import keras
import optuna

from nas.errors import NasError
from nas.search.data import Dataset
from nas.search.deploy import Deployed, deploy
from nas.search.nets import NetworkPlan, build_plan, deployed_plan, plan_network
from nas.search.records import StudyAttr
from nas.search.space import Candidate, SearchSpace, space_from_dict
from nas.search.training import precision_policy


def study_space(study: optuna.Study) -> SearchSpace:
    document = study.user_attrs.get(StudyAttr.SPACE_DOCUMENT)
    if document is None:
        raise NasError(f"study '{study.study_name}' holds no space (made by an older nas); run `nas search` on it once")
    return space_from_dict(document, f"study '{study.study_name}'")


def trial_plans(
    space: SearchSpace, params: dict[str, Any], classes: int, channels: int
) -> tuple[Candidate, NetworkPlan, NetworkPlan]:
    """The trial's candidate, its network as sampled, and as measured and deployed (channel
    pruning cuts it), as TrialRunner planned them."""
    candidate = space.candidate(params, num_classes=classes, channels=channels)
    return candidate, *candidate_plans(candidate)


def candidate_plans(candidate: Candidate) -> tuple[NetworkPlan, NetworkPlan]:
    """A candidate's network as sampled, and as measured and deployed."""
    net_full = plan_network(candidate)
    return net_full, deployed_plan(candidate, net_full)


def converts(space: SearchSpace, candidate: Candidate) -> bool:
    """Whether the candidate's deployed form is converted to TFLite (and so scored there)."""
    objectives = space.spec.objectives
    return candidate.quantization != "none" or "model_size" in objectives or "tflite_latency" in objectives


def deploy_as_trial(
    model: Any, space: SearchSpace, candidate: Candidate, data: Dataset, *, latency: bool = False
) -> Deployed:
    """`model` converted and scored on `data`'s validation images as its trial's deployed form
    was: converted when an objective needs the file, with the candidate's quantization."""
    return deploy(
        model,
        candidate.quantization,
        data,
        convert=converts(space, candidate),
        latency=latency,
        threads=space.spec.compression.tflite_threads,
        pruned=candidate.pruning != "none",
    )


def rebuild(space: SearchSpace, params: dict[str, Any], classes: int, channels: int, *, float32: bool = False) -> Any:
    """The Keras network the trial measured and deployed, freshly initialised: under its
    precision policy, or in float32 (what exporters and runtimes expect)."""
    candidate, _, net = trial_plans(space, params, classes, channels)
    if float32:
        return build_plan(net)
    with precision_policy(candidate.precision):
        model: keras.Model = build_plan(net)
    return model
