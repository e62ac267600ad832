"""The search engine: options and samplers, the study, one trial in phases, the trial loop
and its interrupts and garbage collection, recovery of orphaned trials, weight retention,
liveness and events."""

from typing import TYPE_CHECKING

from nas._lazy import lazy_exports

if TYPE_CHECKING:
    from nas.search.engine.collector import freeze_survivors as freeze_survivors
    from nas.search.engine.data_paths import located as located
    from nas.search.engine.data_paths import matches_moved as matches_moved
    from nas.search.engine.early_stopping import rung_epochs as rung_epochs
    from nas.search.engine.evaluation import EpochCallback as EpochCallback
    from nas.search.engine.evaluation import Evaluation as Evaluation
    from nas.search.engine.evaluation import TrialWork as TrialWork
    from nas.search.engine.events import SearchEvents as SearchEvents
    from nas.search.engine.events import TrialReport as TrialReport
    from nas.search.engine.final import Start as Start
    from nas.search.engine.final import final_model_file as final_model_file
    from nas.search.engine.final import stored_model_path as stored_model_path
    from nas.search.engine.front import UNKNOWN_DEVICE as UNKNOWN_DEVICE
    from nas.search.engine.front import Device as Device
    from nas.search.engine.front import confirmable as confirmable
    from nas.search.engine.front import confirmation as confirmation
    from nas.search.engine.front import confirmed as confirmed
    from nas.search.engine.front import confirmed_front as confirmed_front
    from nas.search.engine.front import device_bound as device_bound
    from nas.search.engine.front import devices as devices
    from nas.search.engine.front import final_figures as final_figures
    from nas.search.engine.front import finetuned as finetuned
    from nas.search.engine.front import measured_on as measured_on
    from nas.search.engine.front import mixed_devices as mixed_devices
    from nas.search.engine.front import noise_aware_front as noise_aware_front
    from nas.search.engine.front import objective_names as objective_names
    from nas.search.engine.front import pareto_front as pareto_front
    from nas.search.engine.front import throughput_interval as throughput_interval
    from nas.search.engine.keras_evaluation import KerasEvaluation as KerasEvaluation
    from nas.search.engine.keras_evaluation import KerasSetup as KerasSetup
    from nas.search.engine.keras_evaluation import keras_setup as keras_setup
    from nas.search.engine.liveness import WorkerIdentity as WorkerIdentity
    from nas.search.engine.loop import SearchOutcome as SearchOutcome
    from nas.search.engine.loop import run_search as run_search
    from nas.search.engine.loop import run_worker as run_worker
    from nas.search.engine.options import SearchOptions as SearchOptions
    from nas.search.engine.recovery import recover_orphans as recover_orphans
    from nas.search.engine.samplers import make_sampler as make_sampler
    from nas.search.engine.stored import converts as converts
    from nas.search.engine.stored import deploy_as_trial as deploy_as_trial
    from nas.search.engine.stored import rebuild as rebuild
    from nas.search.engine.stored import study_space as study_space
    from nas.search.engine.stored import trial_plans as trial_plans
    from nas.search.engine.strategy import CONFIRM as CONFIRM
    from nas.search.engine.strategy import AfterStep as AfterStep
    from nas.search.engine.strategy import EvaluationContext as EvaluationContext
    from nas.search.engine.strategy import EvaluationFactory as EvaluationFactory
    from nas.search.engine.strategy import Strategy as Strategy
    from nas.search.engine.strategy import ended_normally as ended_normally
    from nas.search.engine.strategy import finish_search as finish_search
    from nas.search.engine.study import JoinedStudy as JoinedStudy
    from nas.search.engine.study import counts as counts
    from nas.search.engine.study import join_study as join_study
    from nas.search.engine.study import load_existing_study as load_existing_study
    from nas.search.engine.study import prepare_study as prepare_study
    from nas.search.engine.study import restrict_to_device as restrict_to_device
    from nas.search.engine.study import shared_options as shared_options

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "data_paths": ["located", "matches_moved"],
        "early_stopping": ["rung_epochs"],
        "front": [
            "UNKNOWN_DEVICE",
            "Device",
            "confirmable",
            "confirmation",
            "confirmed",
            "confirmed_front",
            "device_bound",
            "devices",
            "final_figures",
            "finetuned",
            "measured_on",
            "mixed_devices",
            "noise_aware_front",
            "objective_names",
            "pareto_front",
            "throughput_interval",
        ],
        "final": ["Start", "final_model_file", "stored_model_path"],
        "stored": ["converts", "deploy_as_trial", "rebuild", "study_space", "trial_plans"],
        "keras_evaluation": ["KerasEvaluation", "KerasSetup", "keras_setup"],
        "evaluation": ["EpochCallback", "Evaluation", "TrialWork"],
        "strategy": [
            "AfterStep",
            "CONFIRM",
            "EvaluationContext",
            "EvaluationFactory",
            "Strategy",
            "ended_normally",
            "finish_search",
        ],
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
            "shared_options",
        ],
    },
)

__all__ = [
    "CONFIRM",
    "UNKNOWN_DEVICE",
    "AfterStep",
    "Device",
    "EpochCallback",
    "Evaluation",
    "EvaluationContext",
    "EvaluationFactory",
    "JoinedStudy",
    "KerasEvaluation",
    "KerasSetup",
    "SearchEvents",
    "SearchOptions",
    "SearchOutcome",
    "Start",
    "Strategy",
    "TrialReport",
    "TrialWork",
    "WorkerIdentity",
    "confirmable",
    "confirmation",
    "confirmed",
    "confirmed_front",
    "converts",
    "counts",
    "deploy_as_trial",
    "device_bound",
    "devices",
    "ended_normally",
    "final_figures",
    "final_model_file",
    "finetuned",
    "finish_search",
    "freeze_survivors",
    "join_study",
    "keras_setup",
    "load_existing_study",
    "located",
    "make_sampler",
    "matches_moved",
    "measured_on",
    "mixed_devices",
    "noise_aware_front",
    "objective_names",
    "pareto_front",
    "prepare_study",
    "rebuild",
    "recover_orphans",
    "restrict_to_device",
    "run_search",
    "run_worker",
    "rung_epochs",
    "shared_options",
    "stored_model_path",
    "study_space",
    "throughput_interval",
    "trial_plans",
]
