"""The search engine: options and samplers, the study, one trial in phases, the trial loop
and its interrupts and garbage collection, recovery of orphaned trials, weight retention,
liveness and events."""

from typing import TYPE_CHECKING

from nas._lazy import lazy_exports

if TYPE_CHECKING:
    from nas.search.engine.collector import freeze_survivors as freeze_survivors
    from nas.search.engine.events import SearchEvents as SearchEvents
    from nas.search.engine.events import TrialReport as TrialReport
    from nas.search.engine.liveness import WorkerIdentity as WorkerIdentity
    from nas.search.engine.loop import SearchOutcome as SearchOutcome
    from nas.search.engine.loop import run_search as run_search
    from nas.search.engine.loop import run_worker as run_worker
    from nas.search.engine.options import SearchOptions as SearchOptions
    from nas.search.engine.recovery import recover_orphans as recover_orphans
    from nas.search.engine.samplers import make_sampler as make_sampler
    from nas.search.engine.study import JoinedStudy as JoinedStudy
    from nas.search.engine.study import counts as counts
    from nas.search.engine.study import join_study as join_study
    from nas.search.engine.study import load_existing_study as load_existing_study
    from nas.search.engine.study import prepare_study as prepare_study
    from nas.search.engine.study import restrict_to_device as restrict_to_device

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "collector": ["freeze_survivors"],
        "liveness": ["WorkerIdentity"],
        "options": ["SearchOptions"],
        "samplers": ["make_sampler"],
        "events": ["SearchEvents", "TrialReport"],
        "loop": ["SearchOutcome", "run_search", "run_worker"],
        "recovery": ["recover_orphans"],
        "study": [
            "JoinedStudy",
            "counts",
            "join_study",
            "load_existing_study",
            "prepare_study",
            "restrict_to_device",
        ],
    },
)

__all__ = [
    "JoinedStudy",
    "SearchEvents",
    "SearchOptions",
    "SearchOutcome",
    "TrialReport",
    "WorkerIdentity",
    "counts",
    "freeze_survivors",
    "join_study",
    "load_existing_study",
    "make_sampler",
    "prepare_study",
    "recover_orphans",
    "restrict_to_device",
    "run_search",
    "run_worker",
]
