"""Opening, preparing and joining a study; no TensorFlow here, so the parent of a pool of
workers stays small."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from nas import __version__
from nas.errors import NasError
from nas.search.engine.data_paths import located, matches_moved, store_travelling_paths
from nas.search.engine.events import SearchEvents
from nas.search.engine.options import SearchOptions
from nas.search.engine.recovery import recover_orphans
from nas.search.engine.samplers import make_sampler
from nas.search.hardware import device_label, unsupported_precisions
from nas.search.records import StudyAttr
from nas.search.space import SearchSpace, space_from_dict, stored_strategy
from nas.storage import GRACE_PERIOD_S, StorageURL, check_artifact_root, default_artifact_root, open_storage


def counts(study: optuna.Study) -> tuple[int, int]:
    """(finished, running) trials of the study. Finished: trained (COMPLETE) or stopped by a
    constraint before training (PRUNED); both count towards the budget."""
    # Unfiltered on purpose: Optuna's RDB storage serves that from its cache of finished
    # trials, while a state filter queries every trial again (25x slower at 400 trials).
    trials = study.get_trials(deepcopy=False)
    finished = sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials)
    return finished, sum(t.state == TrialState.RUNNING for t in trials)


def open_study(
    space: SearchSpace, storage: optuna.storages.RDBStorage, name: str, root: Path | None = None
) -> optuna.Study:
    """Load the study if it exists (checking it was made from this space, or from this space
    before its project moved with its data and the artifacts folder `root`), else create it."""
    directions = list(space.spec.objectives.values())
    names = list(space.spec.objectives)
    try:
        study = optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        study = optuna.create_study(study_name=name, storage=storage, directions=directions)
        study.set_metric_names(names)
        study.set_user_attr(StudyAttr.NAS_VERSION, __version__)
        study.set_user_attr(StudyAttr.SPACE_SOURCE, space.source)
        study.set_user_attr(StudyAttr.SPACE, json.loads(space.fingerprint()))
        return study
    stored = study.user_attrs.get(StudyAttr.SPACE)
    if stored is None:
        raise NasError(f"study '{name}' exists but was not created by nas; choose another {{study}} name")
    was, now = stored_strategy(stored), space.spec.search.strategy
    if was != now:
        raise NasError(
            f"study '{name}' was searched with search.strategy {was}, not {now}; "
            "use {study} NEW_NAME for the other strategy"
        )
    if not matches_moved(space, stored, study, root):
        raise NasError(
            f"study '{name}' was created from a different space "
            f"(from {study.user_attrs.get('space_source')}); use {{study}} NEW_NAME for the changed space"
        )
    return study


def restrict_to_device(space: SearchSpace, device: dict[str, Any], events: SearchEvents) -> SearchSpace:
    """Drop the precision policies this device cannot run well from this worker's space."""
    unsupported = unsupported_precisions(device)
    param = space.spec.compute.precision
    values = [param.value] if param.fixed else list(param.choices)
    kept = [v for v in values if v not in unsupported]
    if kept == values:
        return space
    dropped = "; ".join(f"{v} ({unsupported[v]})" for v in values if v in unsupported)
    if not kept:
        raise NasError(f"compute.precision: nothing this {device_label(device)} can run: {dropped}")
    events.message(f"Warning: removed from this worker's space: {dropped}")
    return space.with_precisions(kept)


def prepare_study(
    space: SearchSpace, options: SearchOptions, events: SearchEvents
) -> tuple[optuna.storages.RDBStorage, optuna.Study]:
    """Create or resume the study and store what its workers need; the caller has already
    checked everything that can reject the input, so nothing is written for bad input."""
    root = check_artifact_root(options.storage, options.artifacts)  # the last check: a file in its way
    storage = open_storage(options.storage)
    study = open_study(space, storage, options.study_name, root)
    for line in recover_orphans(study, GRACE_PERIOD_S):
        events.message(line)
    study.set_user_attr(StudyAttr.BUDGET, options.trials)
    study.set_user_attr(StudyAttr.SEARCH, options.shared())
    if space.document is not None:
        study.set_user_attr(StudyAttr.SPACE_DOCUMENT, space.document)
        store_travelling_paths(study, space, root)
    return storage, study


def load_existing_study(storage: optuna.storages.BaseStorage, name: str, url: StorageURL) -> optuna.Study:
    try:
        return optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        names = [s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)]
        known = f"studies there: {', '.join(names)}" if names else "it holds no studies"
        raise NasError(f"study '{name}' not found in {url.masked} ({known})") from None


@dataclass(frozen=True)
class JoinedStudy:
    """What `nas worker` reads from a study another process prepared."""

    study: optuna.Study
    storage: optuna.storages.RDBStorage
    space: SearchSpace
    options: SearchOptions


def shared_options(study: optuna.Study) -> dict[str, Any]:
    """The options every worker of the study shares (sampler, seed, screening, weights...), as
    `nas search` stored them; empty for a study made before they were stored."""
    return dict(study.user_attrs.get(StudyAttr.SEARCH) or {})


def join_study(url: StorageURL, name: str, timeout: float | None = None) -> JoinedStudy:
    storage = open_storage(url, create=False)
    study = load_existing_study(storage, name, url)
    attrs = study.user_attrs
    document, shared, budget = (
        attrs.get(StudyAttr.SPACE_DOCUMENT),
        shared_options(study) or None,
        attrs.get(StudyAttr.BUDGET),
    )
    if document is None or shared is None or budget is None:
        raise NasError(
            f"study '{name}' holds no space to join (made by an older nas or by hand); "
            "run `nas search SPACE {study} NAME` once with this version first"
        )
    options = SearchOptions(storage=url, study_name=name, trials=int(budget), timeout=timeout, **shared)
    # A worker on another machine finds the data where it lies beside the artifacts folder it
    # is given, as nas train and nas export do (a path that exists here is kept).
    root = default_artifact_root(url, options.artifacts)
    space = located(space_from_dict(document, f"study '{name}'"), study, root)
    make_sampler(options.sampler, options.seed)  # this machine may lack what the sampler needs
    return JoinedStudy(study, storage, space, options)
