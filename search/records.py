"""Every name nas stores or sends, declared once: the study's and each trial's attribute keys
(Optuna user attributes, so `optuna`, optuna-dashboard and SQL read them too), why a search
loop stopped, why a trial stopped early, and the events a worker process sends its parent.

The values are the stored strings: renaming one breaks every study made before, so add, never
rename. `StrEnum` members are `str`, so they go into Optuna and JSON as they are.

The study records that several rooms read are typed here too, beside their keys: each has one
writer (`to_attr`, the JSON value stored) and one reader (`from_attr`).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from typing import Any, ClassVar


class StudyAttr(StrEnum):
    """Study user attributes, written when a study is created or a search (re)starts."""

    NAS_VERSION = "nas_version"  # version of nas that created the study
    SPACE = "space"  # the space's fingerprint (canonical JSON); a resumed search must match it
    SPACE_SOURCE = "space_source"  # the file or preset the space came from
    SPACE_DOCUMENT = "space_document"  # the whole space file, so `nas worker` can rebuild it
    BUDGET = "budget"  # total finished trials the study aims for (--trials)
    SEARCH = "search"  # the options every worker must share (sampler, seed, screening, ...)
    DATASET = "dataset"  # summary of the dataset (source, sizes, classes, image shape)
    PIPELINE = "pipeline"  # images/s the input pipeline delivers, and at which batch size
    # Throughput of the front measured again together after the search (`nas pareto --confirm`):
    # when, where, how, and per trial number its images/s with the 95% interval
    CONFIRMED = "confirmed"
    # search.strategy supernet: its training (epochs planned and done, per-epoch figures, the
    # fixed training knobs) and the checkpoint file the finished epochs are in
    SUPERNET = "supernet"
    # The supernet front's subnets fine-tuned after the search: per trial number the accuracy
    # inherited and fine-tuned, with the epochs and learning rate that took
    FINETUNED = "finetuned"
    # `nas train`: the chosen trials trained again with the space's `final:` recipe; per trial
    # number the recipe, its training curve, the test accuracy (Keras and deployed), the
    # throughput measured again, and the kept model's file and hash; with `--seeds N` each
    # seed's figures and their mean and spread
    FINAL = "final"
    # The dataset's paths inside the space file's folder, relative to the artifacts folder: a
    # copied study finds its data from the artifacts folder it is given (engine/data_paths.py)
    DATA_PATHS = "data_paths"


# Each record's fields are in the order they are stored in: `to_attr` writes them so, and reading
# then writing a stored record gives the same JSON. Every key is required when read: every version
# of nas wrote all of them (None where a field's type allows it), but those a later version added
# where an older record means their absence (FinalFigures' seeds); a study without the record reads
# as None.


@dataclass(frozen=True)
class ConfirmedFigure:
    """One trial's throughput measured again with the front (`Confirmation.trials`)."""

    images_per_s: float  # the median ratio to the reference network times the baseline
    low: float | None  # the 95% interval of images_per_s (hardware/intervals.py)
    high: float | None
    relative: float | None  # the median ratio to the reference network
    spread: float  # interquartile spread of the rounds
    trustworthy: bool  # spread within measure.max_spread

    def to_attr(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_attr(cls, value: dict[str, Any]) -> ConfirmedFigure:
        return cls(**{f.name: value[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class Confirmation:
    """The front's throughput measured again together after the search (StudyAttr.CONFIRMED,
    engine/confirm.py; `nas pareto --confirm`). A later confirmation on the same device keeps
    the figures of trials it did not measure (on another device it drops them: two scales)."""

    KEY: ClassVar[StudyAttr] = StudyAttr.CONFIRMED
    measured_at: str  # ISO 8601, UTC, in seconds
    device: str  # the device's label: "CPU <name> (<n> threads)" or "GPU <name>"
    batch_size: int
    rounds: int  # timed rounds of each network
    baseline_images_per_s: float  # the reference network's images/s the ratios are scaled by
    trials: dict[str, ConfirmedFigure]  # by trial number (a string, as JSON keys are)
    # hardware.device_identity of the device; None in records stored before it was kept
    device_id: str | None = None

    def to_attr(self) -> dict[str, Any]:
        record = asdict(self)
        if self.device_id is None:
            del record["device_id"]  # an older record is written back as it was
        return record

    @classmethod
    def from_attr(cls, value: dict[str, Any] | None) -> Confirmation | None:
        """The stored record; None where the study holds none."""
        if not value:
            return None
        return cls(
            measured_at=value["measured_at"],
            device=value["device"],
            batch_size=value["batch_size"],
            rounds=value["rounds"],
            baseline_images_per_s=value["baseline_images_per_s"],
            trials={n: ConfirmedFigure.from_attr(f) for n, f in (value.get("trials") or {}).items()},
            device_id=value.get("device_id"),
        )


@dataclass(frozen=True)
class FinalRun:
    """One seed's final training of a trial (`FinalFigures.seeds`, `nas train --seeds N`)."""

    seed: int  # k of 0..N-1 (engine/final.py's final_seed gives the seed it trained with)
    test_accuracy: float  # of the deployed form where it converted, else of the Keras model
    keras_test_accuracy: float
    history: dict[str, list[float]]  # per epoch: loss, accuracy, ..., seconds
    seconds: float  # the training's
    throughput: float  # images/s measured again after the training
    throughput_low: float | None  # its 95% interval
    throughput_high: float | None
    device: str | None  # the device's name
    model: str  # the model's file (.keras): relative to the artifacts folder (absolute before)
    sha256: str  # of that file

    def to_attr(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_attr(cls, value: dict[str, Any]) -> FinalRun:
        return cls(**{f.name: value[f.name] for f in fields(cls)})


# A record of one seed, seed 0, is stored as nas stored every record before seeds: the run's
# figures alone, no `seeds` list. With more (or another) seed, the figures are their mean.
_MANY_SEEDS = ("seeds", "test_accuracy_sd", "throughput_sd")


@dataclass(frozen=True)
class FinalFigures:
    """One trial trained again by `nas train` with the space's `final:` recipe (`FinalTraining.trials`):
    one seed's figures, or with `--seeds N` the mean of every seed's, the kept model the seed's
    whose test accuracy is closest to that mean (the lower seed on a tie)."""

    # The recipe (engine/final.py's final_recipe): a seed asked again with an equal one is not
    # trained again.
    recipe: dict[str, Any]
    test_accuracy: float  # of the deployed form where it converted, else of the Keras model (mean of the seeds)
    keras_test_accuracy: float  # (mean of the seeds)
    search_accuracy: float | None  # the trial's validation accuracy; None without an accuracy objective
    history: dict[str, list[float]]  # per epoch: loss, accuracy, ..., seconds (the kept seed's)
    seconds: float  # the training's (mean of the seeds)
    throughput: float  # images/s measured again after the training (mean of the seeds)
    throughput_low: float | None  # its 95% interval (from the lowest seed's low to the highest's high)
    throughput_high: float | None
    device: str | None  # the device's name (the kept seed's)
    model: str  # the kept model's file (.keras), for `nas export`: relative to the artifacts folder (absolute before)
    sha256: str  # of that file
    # Stored with 2 seeds or more, or one other than seed 0 (absent before seeds): every seed's
    # figures, and the sample standard deviation of their test accuracies and throughputs.
    seeds: tuple[FinalRun, ...] | None = None
    test_accuracy_sd: float | None = None
    throughput_sd: float | None = None

    @property
    def epochs(self) -> int:
        return int(self.recipe["epochs"])

    @property
    def runs(self) -> tuple[FinalRun, ...]:
        """Every seed's figures, seed 0's alone in a record of one seed."""
        if self.seeds is not None:
            return self.seeds
        names = [f.name for f in fields(FinalRun) if f.name != "seed"]
        return (FinalRun(seed=0, **{name: getattr(self, name) for name in names}),)

    @property
    def kept_seed(self) -> int:
        """The seed whose model `model` is."""
        return next((run.seed for run in self.runs if run.model == self.model), self.runs[0].seed)

    @classmethod
    def of_runs(cls, recipe: dict[str, Any], search_accuracy: float | None, runs: list[FinalRun]) -> FinalFigures:
        """The figures of these seeds: their mean and spread, the model of the seed closest to the
        mean (representative, where the best seed's would flatter it)."""
        runs = sorted(runs, key=lambda run: run.seed)
        accuracy = statistics.fmean(run.test_accuracy for run in runs)
        distance = [abs(run.test_accuracy - accuracy) for run in runs]
        # Two seeds are always equally far from their mean: a tie, up to the float's last bits.
        kept = next(run for run, d in zip(runs, distance, strict=True) if d <= min(distance) + 1e-9)
        lows = [run.throughput_low for run in runs]
        highs = [run.throughput_high for run in runs]
        alone = len(runs) == 1 and runs[0].seed == 0
        return cls(
            recipe=recipe,
            test_accuracy=round(accuracy, 6),
            keras_test_accuracy=round(statistics.fmean(run.keras_test_accuracy for run in runs), 6),
            search_accuracy=search_accuracy,
            history=kept.history,
            seconds=round(statistics.fmean(run.seconds for run in runs), 1),
            throughput=round(statistics.fmean(run.throughput for run in runs), 2),
            throughput_low=None if None in lows else min(low for low in lows if low is not None),
            throughput_high=None if None in highs else max(high for high in highs if high is not None),
            device=kept.device,
            model=kept.model,
            sha256=kept.sha256,
            seeds=None if alone else tuple(runs),
            test_accuracy_sd=_sd([run.test_accuracy for run in runs], 6),
            throughput_sd=_sd([run.throughput for run in runs], 2),
        )

    def to_attr(self) -> dict[str, Any]:
        value = asdict(self)
        if self.seeds is None:
            for key in _MANY_SEEDS:
                del value[key]
        else:
            value["seeds"] = [run.to_attr() for run in self.seeds]
        return value

    @classmethod
    def from_attr(cls, value: dict[str, Any]) -> FinalFigures:
        held = {f.name: value[f.name] for f in fields(cls) if f.name not in _MANY_SEEDS}
        if value.get("seeds") is None:
            return cls(**held)
        return cls(
            **held,
            seeds=tuple(FinalRun.from_attr(run) for run in value["seeds"]),
            test_accuracy_sd=value["test_accuracy_sd"],
            throughput_sd=value["throughput_sd"],
        )


def _sd(values: list[float], digits: int) -> float | None:
    """The sample standard deviation; None for one value."""
    return round(statistics.stdev(values), digits) if len(values) > 1 else None


@dataclass(frozen=True)
class FinalTraining:
    """`nas train`'s figures (StudyAttr.FINAL, engine/final.py), stored again as each trial ends."""

    KEY: ClassVar[StudyAttr] = StudyAttr.FINAL
    trained_at: str  # when the last trial ended: ISO 8601, UTC, in seconds
    trials: dict[str, FinalFigures]  # by trial number (a string, as JSON keys are)

    def to_attr(self) -> dict[str, Any]:
        return {"trained_at": self.trained_at, "trials": {n: f.to_attr() for n, f in self.trials.items()}}

    @classmethod
    def from_attr(cls, value: dict[str, Any] | None) -> FinalTraining | None:
        """The stored record; None where the study holds none."""
        if not value:
            return None
        trials = {n: FinalFigures.from_attr(f) for n, f in (value.get("trials") or {}).items()}
        return cls(trained_at=value["trained_at"], trials=trials)


class TrialAttr(StrEnum):
    """Trial user attributes. A trial is COMPLETE, FAIL (with FAIL_REASON) or WAITING (queued)."""

    WORKER = "worker"  # host, pid, process start; a pool worker's index, cores, threads, GPUs seen
    DURATIONS = "durations"  # seconds per phase (plan, build, measure, train, deploy, save) and total
    PARAMS = "params"  # parameters of the deployed network
    FLOPS = "flops"  # 2 x multiply-accumulates of its conv and dense layers, per image
    MODEL_BYTES = "model_bytes"  # float32 weight bytes of the planned network
    SCREENED = "screened"  # a Screened value: rejected by a constraint or by halving (state PRUNED)
    KNOWN_OBJECTIVES = "known_objectives"  # a screened trial's objectives measured before it stopped
    DEVICE = "device"  # the device the figures were measured on (name, versions)
    HARDWARE = "hardware"  # throughput (every round, spread, warm-up) and latency measurements
    THROUGHPUT_SPREAD = "throughput_spread"  # interquartile spread of the throughput rounds
    FLOPS_PER_S = "flops_per_s"  # FLOPs x measured images/s
    PEAK_FRACTION = "peak_fraction"  # FLOPS_PER_S over the device's peak, where the peak is known
    PEAK_SOURCE = "peak_source"  # where that peak comes from: "measured: ..." or "data sheet: ..."
    HISTORY = "history"  # loss and accuracy per epoch
    VAL_LOSS = "val_loss"  # final validation loss
    TRAIN_IMAGES_PER_S = "train_images_per_s"  # training speed
    INPUT_BOUND = "input_bound"  # training ran near the input pipeline's delivery rate
    SPARSITY = "sparsity"  # achieved sparsity per pruned layer
    DEPLOY = "deploy"  # the deployed form: quantization, size, accuracy, latency
    KERAS_ACCURACY = "keras_accuracy"  # accuracy of the trained Keras model before conversion
    WEIGHTS_BYTES = "weights_bytes"  # size of the stored trained model
    WEIGHTS_ERROR = "weights_error"  # why the trained model could not be stored
    WEIGHTS_SKIPPED = "weights_skipped"  # why it was not stored: dominated (or infeasible) when it finished
    FAIL_REASON = "fail_reason"  # one line: why the trial failed
    RETRY_OF = "retry_of"  # on a queued retry: the number of the trial it repeats
    RETRIES = "retries"  # on a queued retry: how many retries of the original trial so far
    # Early stopping (search.early_stopping: asha): per rung reached, "k" -> the epoch, the
    # objectives known there (accuracy so far, throughput, size) and the decision (keep,
    # position, competitors, kept); a trial stopped at a rung is PRUNED with EARLY_STOPPED
    RUNGS = "rungs"
    EARLY_STOPPED = "early_stopped"  # rung, epoch, accuracy so far, position, competitors, kept
    # Where the accuracy comes from: absent when the trial trained its network, "supernet" when
    # it inherited the supernet's weights (BatchNorm re-calibrated)
    ACCURACY_SOURCE = "accuracy_source"
    # Successive halving (search.supernet.halving): the subset's images, correct count and
    # accuracy, the upper bound of the whole set's accuracy, its z, and the complete trial that
    # dominated that bound (None: scored on the rest of the set); PRUNED with SCREENED halving
    HALVING = "halving"


class TunerAttr(StrEnum):
    """Attributes `nas.tuner.OptunaOracle` writes (KerasTuner projects kept in an Optuna study)."""

    STUDY_MARK = "keras_tuner_oracle"  # study: made (or adopted) by OptunaOracle
    STUDY_OPENINGS = "keras_tuner_openings"  # study: oracles that opened it; seeds samplers apart
    TRIAL_ID = "keras_tuner_trial"  # KerasTuner's trial id
    TRIAL_PROJECT = "keras_tuner_project"  # the KerasTuner project (directory/name) the trial is of
    TRIAL_DUPLICATE = "keras_tuner_duplicate_of"  # a proposal not run: it repeats this trial
    TRIAL_FAILED_ATTEMPTS = "keras_tuner_failed_attempts"  # crashed attempts before the told one
    TRIAL_LAST_ERROR = "keras_tuner_last_error"  # last line of the last crashed attempt


class Screened(StrEnum):
    """Which check stopped a trial before its accuracy was measured in full."""

    STATIC = "static"  # on the plan: params, FLOPs, model size
    MEASURED = "measured"  # on the measured device: latency, throughput
    # a supernet subnet whose accuracy's upper bound from a validation subset is dominated
    HALVING = "halving"


class StoppedBy(StrEnum):
    """Why a search loop (one process) or a pool of them stopped."""

    BUDGET = "budget"  # the study's budget of finished trials is complete
    TIMEOUT = "timeout"  # --timeout passed; no new trial started
    FAILURES = "failures"  # --max-consecutive-failures trials failed in a row
    INTERRUPTED = "interrupted"  # first Ctrl-C: the running trial finished, nothing new started
    RECYCLE = "recycle"  # a pool worker ran --recycle-after trials and is replaced
    ORPHANED = "orphaned"  # a pool worker's parent died
    STOPPED = "stopped"  # a pool worker was stopped at once (second Ctrl-C, SIGTERM)
    CRASHED = "crashed"  # pool workers kept dying without saying why


class PipeEvent(StrEnum):
    """Events a pool worker sends its parent as JSON lines, {"event": ..., payload}."""

    MESSAGE = "message"  # text: a line for the log
    START = "start"  # study, budget, finished
    TRIAL_STARTED = "trial_started"  # number
    PHASE = "phase"  # text: the running trial's phase
    TRIAL_FINISHED = "trial_finished"  # report (TrialReport as a dict), finished, pareto
    OUTCOME = "outcome"  # stopped_by (a StoppedBy), ran, failed; text when stopped
    ERROR = "error"  # text: bad input the worker found (the pool stops)
    # Made by the parent itself, never sent:
    SPAWNED = "spawned"  # the worker process started
    EOF = "eof"  # the worker closed its pipe


class SamplerName(StrEnum):
    """Optuna samplers a search can use (`--sampler`, `search.sampler`), stored in the study."""

    TPE = "tpe"
    NSGA2 = "nsga2"
    GP = "gp"
    RANDOM = "random"


class QuantizeMode(StrEnum):
    """Post-training quantization: a searchable knob (`compression.quantization`) and an
    export option (`nas export --quantize`)."""

    NONE = "none"
    DYNAMIC = "dynamic"
    FLOAT16 = "float16"
    INT8 = "int8"


class ExportFormat(StrEnum):
    """What `nas export` writes; the manifest records it per trial."""

    KERAS = "keras"
    SAVEDMODEL = "savedmodel"
    TFLITE = "tflite"
    ONNX = "onnx"
    TFTRT = "tftrt"
    TENSORRT = "tensorrt"


def choices(vocabulary: type[StrEnum]) -> str:
    """'a, b, c or d': the values of an enum for an error message."""
    values = [member.value for member in vocabulary]
    return ", ".join(values[:-1]) + " or " + values[-1]
