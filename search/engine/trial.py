"""One trial: plan the sampled network and check static constraints (before any model
exists), build it, measure it on this device, check measured constraints, train it, score it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import TYPE_CHECKING, Any

import keras
import optuna
from sqlalchemy.exc import SQLAlchemyError

from nas.errors import TrainingDiverged
from nas.search.data import Dataset
from nas.search.deploy import Deployed, deploy
from nas.search.engine.early_stopping import (
    RungDecision,
    competitors_at,
    decide,
    rung_epochs,
    rung_objectives,
    rung_point,
)
from nas.search.hardware import HardwareCost, HardwareProfiler
from nas.search.nets import NetworkPlan, build_plan, deployed_plan, plan_network, static_constraints
from nas.search.records import Screened, TrialAttr
from nas.search.runtime import import_tensorflow
from nas.search.space import Candidate, ConstraintsSpec, SearchSpace
from nas.search.training import TrainResult, precision_policy, sparsity_report, train_compressed

if TYPE_CHECKING:
    from nas.storage.weights import WeightStore

PhaseCallback = Callable[[str], None]
# Training at this fraction of the pipeline's delivery rate (or more) is starved for input.
INPUT_BOUND_RATIO = 0.8


@dataclass(frozen=True)
class TrialOutcome:
    """A trained trial's objectives; a screened one has none (it is told to the study as
    PRUNED, so no sampler, plot or `best_trials` reads a stand-in value as a measurement)."""

    values: list[float] | None
    screened: Screened | None = None  # set when a constraint rejected it before training
    stopped: RungDecision | None = None  # set when early stopping ended its training at a rung


class _StopAtRung(Exception):  # a signal out of the training loop, not an error
    def __init__(self, decision: RungDecision) -> None:
        self.decision = decision


def measured_constraints(c: ConstraintsSpec, cost: HardwareCost) -> dict[str, float]:
    out = {}
    if c.max_latency_ms is not None and cost.latency is not None:
        out["max_latency_ms"] = cost.latency.p95_ms / c.max_latency_ms - 1.0
    if c.min_throughput is not None:
        out["min_throughput"] = 1.0 - cost.primary.images_per_s / c.min_throughput
    return out


class TrialRunner:
    """Runs trials of one space on one dataset; objectives come back in the space's order."""

    def __init__(
        self,
        space: SearchSpace,
        data: Dataset,
        profiler: HardwareProfiler,
        *,
        seed: int,
        on_phase: PhaseCallback,
        screening: bool = True,
        delivery: float | None = None,
        warn: Callable[[str], None] = lambda _: None,
        weights: WeightStore | None = None,
    ) -> None:
        self.weights = weights
        self.delivery = delivery  # images/s the input pipeline delivers, measured once
        self.warn = warn
        self.warned = False
        self.space = space
        self.data = data
        self.profiler = profiler
        self.seed = seed
        self.on_phase = on_phase
        self.screening = screening
        self.rungs = rung_epochs(space.spec.search.early_stopping, space.spec.training.epochs)

    def _check_input_bound(self, trial: optuna.Trial, training_rate: float) -> None:
        """Training that consumes images nearly as fast as the pipeline delivers them is
        waiting for data: the trial's figures then say more about the input than the model."""
        if self.delivery is None:
            return
        bound = training_rate >= INPUT_BOUND_RATIO * self.delivery
        trial.set_user_attr(TrialAttr.INPUT_BOUND, bound)
        if bound and not self.warned:
            self.warned = True
            self.warn(
                f"Warning: the input pipeline is the bottleneck: it delivers {self.delivery:,.0f} images/s and "
                f"trial {trial.number} trained at {training_rate:,.0f} images/s (use dataset.cache: memory, a smaller "
                "image_size, or faster storage)"
            )

    def _values(self, run: _Run) -> list[float]:
        """The objectives of a trained trial in the space's order. The objective is the
        accuracy of what will be deployed (after pruning and quantization)."""
        deployed, result, cost = run.deployed, run.result, run.cost
        assert result is not None and deployed is not None and cost is not None
        figures = {
            "accuracy": deployed.accuracy if deployed.accuracy is not None else result.accuracy,
            "throughput": cost.primary.images_per_s,
            "model_size": float(deployed.model_bytes),
        }
        if deployed.latency_ms is not None:
            figures["tflite_latency"] = deployed.latency_ms
        return [figures[name] for name in self.space.spec.objectives]

    def _screen_out(self, run: _Run, kind: Screened) -> TrialOutcome:
        """Stop a trial a constraint rejected, keeping only the objectives really known by then
        (the plan's size; the throughput once measured): accuracy was never measured."""
        known: dict[str, float] = {"model_size": float(run.net.weight_bytes())}
        if run.cost is not None:
            known["throughput"] = run.cost.primary.images_per_s
        objectives = self.space.spec.objectives
        run.trial.set_user_attr(TrialAttr.KNOWN_OBJECTIVES, {k: v for k, v in known.items() if k in objectives})
        return TrialOutcome(None, kind)

    def _screened(self, trial: optuna.Trial, limits: dict[str, float], kind: Screened) -> bool:
        """Record the constraints; True when one is broken and the trial stops here."""
        for name, value in limits.items():
            trial.set_constraint(name, value)
        if self.screening and any(v > 0 for v in limits.values()):
            trial.set_user_attr(TrialAttr.SCREENED, kind)
            return True
        return False

    def _save_weights(self, trial: optuna.Trial, model: keras.Model) -> None:
        """Keep the trained model for `nas export`; a full disk costs the weights, not the trial."""
        assert self.weights is not None
        try:
            with TemporaryDirectory(prefix="nas-weights-") as tmp:
                path = Path(tmp) / "model.keras"
                model.save(path)
                stored = self.weights.save(trial.study.study_name, trial.number, path)
            trial.set_user_attr(TrialAttr.WEIGHTS_BYTES, stored.bytes)
        except (OSError, SQLAlchemyError) as exc:
            trial.set_user_attr(TrialAttr.WEIGHTS_ERROR, str(exc)[:300])
            self.warn(f"Warning: weights of trial {trial.number} not saved: {exc}")

    def run(self, trial: optuna.Trial) -> TrialOutcome:
        """Plan, screen, build, measure, screen again, train, deploy and save: each phase is
        timed into the trial's durations and named to the display as it starts."""
        run = _Run(trial, self.space.sample(trial, num_classes=self.data.num_classes, channels=self.data.channels))
        try:
            with run.phase("plan", self.on_phase):
                self._plan(run)
            if self._screened(trial, static_constraints(self.space.spec.constraints, run.net), Screened.STATIC):
                return self._screen_out(run, Screened.STATIC)
            with precision_policy(run.candidate.precision):
                with run.phase("build", self.on_phase):
                    keras.utils.set_random_seed(self.seed + trial.number)
                    run.model = build_plan(run.net)
                with run.phase("measure", self.on_phase):
                    self._measure(run)
                assert run.cost is not None
                if self._screened(
                    trial, measured_constraints(self.space.spec.constraints, run.cost), Screened.MEASURED
                ):
                    return self._screen_out(run, Screened.MEASURED)
                try:
                    with run.phase("train", self.on_phase), self.profiler.lock.shared():
                        self._train(run)
                except _StopAtRung as stop:
                    return self._stop_at_rung(run, stop.decision)
                with run.phase("deploy", self.on_phase), self.profiler.lock.shared():
                    self._deploy(run)
                if self.weights is not None:
                    with run.phase("save", self.on_phase):
                        self._save_weights(trial, run.model)
            return TrialOutcome(self._values(run))
        finally:
            # Without this, every trial's graphs and weights stay alive in the process and a
            # long search grows until it is killed (the classic KerasTuner complaint). With
            # free_memory, clear_session runs the full garbage collection itself.
            run.model = None
            keras.backend.clear_session(free_memory=True)

    def _plan(self, run: _Run) -> None:
        trial = run.trial
        run.net_full = plan_network(run.candidate)
        run.net = deployed_plan(run.candidate, run.net_full)  # channel pruning measures the cut network
        trial.set_user_attr(TrialAttr.PARAMS, run.net.params())
        trial.set_user_attr(TrialAttr.FLOPS, run.net.flops())
        trial.set_user_attr(TrialAttr.MODEL_BYTES, run.net.weight_bytes())

    def _measure(self, run: _Run) -> None:
        trial, candidate = run.trial, run.candidate
        cost = self.profiler.measure(
            run.model,
            precision=candidate.precision,
            xla=candidate.xla,
            need_latency=self.space.spec.constraints.max_latency_ms is not None,
        )
        run.cost = cost
        unsettled = [t.batch_size for t in cost.throughput.values() if not t.warmup_settled]
        if unsettled or (cost.latency is not None and not cost.latency.warmup_settled):
            self.warn(
                f"Warning: trial {trial.number}: the warm-up before timing did not settle within its time limit; "
                "its figures are stored as untrustworthy (hardware.trustworthy false)"
            )
        trial.set_user_attr(TrialAttr.DEVICE, cost.device)
        trial.set_user_attr(TrialAttr.HARDWARE, cost.to_attr())
        trial.set_user_attr(TrialAttr.THROUGHPUT_SPREAD, round(cost.primary.spread, 4))
        peak = self.profiler.peak_flops(candidate.precision)
        achieved = run.net.flops() * cost.primary.images_per_s
        trial.set_user_attr(TrialAttr.FLOPS_PER_S, achieved)
        if peak:
            trial.set_user_attr(TrialAttr.PEAK_FRACTION, achieved / peak[0])
            trial.set_user_attr(TrialAttr.PEAK_SOURCE, peak[1])

    def _train(self, run: _Run) -> None:
        trial, candidate, spec = run.trial, run.candidate, self.space.spec

        def on_epoch(epoch: int, epochs: int, logs: dict[str, float]) -> None:
            acc = logs.get("val_accuracy")
            self.on_phase(f"train epoch {epoch}/{epochs}" + (f", val acc {acc:.3f}" if acc else ""))
            for key in ("loss", "val_accuracy"):
                run.history.setdefault(key, []).append(logs[key])
            if epoch in self.rungs:
                self._at_rung(run, self.rungs.index(epoch), epoch, logs["val_accuracy"])

        augmentation = spec.dataset.augmentation
        run.model, run.result = train_compressed(
            run.model,
            run.net_full,
            run.net,
            candidate,
            self.data,
            seed=self.seed + trial.number,
            pruning=spec.compression.pruning,
            augmentation=augmentation if augmentation.active else None,
            on_epoch=on_epoch,
        )
        trial.set_user_attr(TrialAttr.HISTORY, run.result.history)
        trial.set_user_attr(TrialAttr.VAL_LOSS, run.result.loss)
        trial.set_user_attr(TrialAttr.TRAIN_IMAGES_PER_S, round(run.result.images_per_s, 1))
        self._check_input_bound(trial, run.result.images_per_s)
        if candidate.pruning in ("magnitude", "n_m"):
            exclude: list[str] = list(spec.compression.pruning.exclude)
            trial.set_user_attr(TrialAttr.SPARSITY, sparsity_report(run.model, exclude))

    def _at_rung(self, run: _Run, rung: int, epoch: int, accuracy: float) -> None:
        """Store this trial's point at the rung (for every worker to read), rank it against
        the rung's points in the database, and stop training unless it is among the best."""
        trial, cost = run.trial, run.cost
        assert cost is not None
        directions = rung_objectives(self.space.spec.objectives)
        known = {"accuracy": accuracy, "throughput": cost.primary.images_per_s, "model_size": run.net.weight_bytes()}
        entry: dict[str, Any] = {"epoch": epoch, **{name: known[name] for name in directions}}
        run.rungs[str(rung)] = entry
        trial.set_user_attr(TrialAttr.RUNGS, run.rungs)
        others = competitors_at(trial.study, rung, directions)
        eta = self.space.spec.search.early_stopping.eta
        decision = decide(eta, trial.number, rung_point(entry, directions), others, rung, epoch)
        entry.update(
            keep=decision.keep, position=decision.position, competitors=decision.competitors, kept=decision.kept
        )
        trial.set_user_attr(TrialAttr.RUNGS, run.rungs)
        if not decision.keep:
            raise _StopAtRung(decision)

    def _stop_at_rung(self, run: _Run, decision: RungDecision) -> TrialOutcome:
        """A trial early stopping ended: PRUNED, with where and why and what was known."""
        trial, cost = run.trial, run.cost
        assert cost is not None
        accuracy = run.history["val_accuracy"][-1]
        trial.set_user_attr(TrialAttr.HISTORY, run.history)
        trial.set_user_attr(
            TrialAttr.EARLY_STOPPED,
            {
                "rung": decision.rung,
                "epoch": decision.epoch,
                "accuracy": accuracy,
                "position": decision.position,
                "competitors": decision.competitors,
                "kept": decision.kept,
            },
        )
        known = {"throughput": cost.primary.images_per_s, "model_size": float(run.net.weight_bytes())}
        objectives = self.space.spec.objectives
        trial.set_user_attr(TrialAttr.KNOWN_OBJECTIVES, {k: v for k, v in known.items() if k in objectives})
        return TrialOutcome(None, stopped=decision)

    def _deploy(self, run: _Run) -> None:
        spec, objectives = self.space.spec, self.space.spec.objectives
        assert run.result is not None
        run.deployed = deploy(
            run.model,
            run.candidate.quantization,
            self.data,
            convert="model_size" in objectives or "tflite_latency" in objectives,
            latency="tflite_latency" in objectives,
            threads=spec.compression.tflite_threads,
            pruned=run.candidate.pruning != "none",
        )
        run.trial.set_user_attr(TrialAttr.DEPLOY, run.deployed.to_attr())
        run.trial.set_user_attr(TrialAttr.KERAS_ACCURACY, run.result.accuracy)


@dataclass
class _Run:
    """What one trial has worked out so far; each phase adds its part."""

    trial: optuna.Trial
    candidate: Candidate
    net_full: NetworkPlan = field(init=False)
    net: NetworkPlan = field(init=False)
    model: keras.Model | None = None
    cost: HardwareCost | None = None
    result: TrainResult | None = None
    deployed: Deployed | None = None
    durations: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)
    history: dict[str, list[float]] = field(default_factory=dict)  # loss and val_accuracy per epoch so far
    rungs: dict[str, dict[str, Any]] = field(default_factory=dict)  # TrialAttr.RUNGS as it grows

    @contextmanager
    def phase(self, name: str, on_phase: PhaseCallback) -> Iterator[None]:
        on_phase(name)
        t0 = time.perf_counter()
        ended = False
        try:
            yield
            ended = True
        finally:
            self.durations[name] = round(time.perf_counter() - t0, 4)
            self.durations["total"] = round(time.perf_counter() - self.started, 4)
            try:
                self.trial.set_user_attr(TrialAttr.DURATIONS, self.durations)
            except Exception:
                # A phase cut short (a stop, an error) ends the trial for that reason; a
                # failed write of its durations must not replace it.
                if ended:
                    raise


def describe_failure(exc: BaseException) -> str:
    """One line for the trial's fail_reason attribute."""
    tf = import_tensorflow()
    if isinstance(exc, tf.errors.ResourceExhaustedError):
        return "out of memory (ResourceExhaustedError): " + str(exc).strip().splitlines()[0][:300]
    if isinstance(exc, TrainingDiverged):
        return str(exc)
    if isinstance(exc, tf.errors.OpError):
        # TensorFlow leads with "Graph execution error:" and the Python stack of the op; the
        # reason is the last line of its own that is not stack or node detail.
        lines = [line for line in exc.message.splitlines() if line.strip() and not line[0].isspace()]
        lines = [line for line in lines if not line.startswith(("Graph execution error", "Detected at node"))]
        return f"{type(exc).__name__}: {(lines[-1] if lines else exc.message)[:300]}"
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
