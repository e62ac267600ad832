"""One trial: plan the sampled network and check static constraints (before any model
exists), build it, measure it on this device, check measured constraints, train it, score it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import optuna

from nas.errors import TrainingDiverged
from nas.search.engine.early_stopping import (
    RungDecision,
    competitors_at,
    decide,
    rung_epochs,
    rung_objectives,
    rung_point,
)
from nas.search.engine.evaluation import Evaluation, PhaseCallback, TrialWork
from nas.search.engine.front import dominated_by
from nas.search.engine.retention import kept_on_finish
from nas.search.nets import deployed_plan, plan_network, static_constraints
from nas.search.records import Screened, TrialAttr
from nas.search.space import ConstraintsSpec, SearchSpace

if TYPE_CHECKING:
    from nas.search.hardware import HardwareCost

# Training at this fraction of the pipeline's delivery rate (or more) is starved for input.
INPUT_BOUND_RATIO = 0.8


@dataclass(frozen=True)
class TrialOutcome:
    """A trained trial's objectives; a screened one has none (it is told to the study as
    PRUNED, so no sampler, plot or `best_trials` reads a stand-in value as a measurement)."""

    values: list[float] | None
    screened: Screened | None = None  # set when a constraint (or halving) stopped it before its accuracy
    stopped: RungDecision | None = None  # set when early stopping ended its training at a rung


class _StopAtRung(Exception):  # a signal out of the training loop, not an error
    def __init__(self, decision: RungDecision) -> None:
        self.decision = decision


class _Halved(Exception):
    """A signal out of the evaluation's scoring (successive halving), not an error."""


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
        evaluation: Evaluation,
        *,
        on_phase: PhaseCallback,
        screening: bool = True,
        warn: Callable[[str], None] = lambda _: None,
        keep_top_k: int = 0,
    ) -> None:
        self.space = space
        self.keep_top_k = keep_top_k  # retention's: which finished trials' weights are worth saving
        self.evaluation = evaluation
        self.num_classes, self.channels = evaluation.num_classes, evaluation.channels  # for sampling
        self.delivery = evaluation.delivery  # images/s the input pipeline delivers, measured once
        self.warn = warn
        self.warned = False
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

    def _known(self, run: TrialWork, accuracy: float | None = None) -> dict[str, float]:
        """The one map from objective names to figures, as far as the trial has got: the
        plan's size, the throughput once measured, `accuracy` at a rung; once deployed, the
        accuracy of what will be deployed (after pruning and quantization) and its size."""
        deployed, result, cost = run.deployed, run.result, run.cost
        known = {"model_size": float(deployed.model_bytes if deployed is not None else run.net.weight_bytes())}
        if cost is not None:
            known["throughput"] = cost.primary.images_per_s
        if accuracy is not None:
            known["accuracy"] = accuracy
        if deployed is not None:
            assert result is not None
            known["accuracy"] = deployed.accuracy if deployed.accuracy is not None else result.accuracy
            if deployed.latency_ms is not None:
                known["tflite_latency"] = deployed.latency_ms
        return known

    def _values(self, run: TrialWork) -> list[float]:
        """The objectives of a trained and deployed trial in the space's order."""
        assert run.deployed is not None and run.cost is not None
        known = self._known(run)
        return [known[name] for name in self.space.spec.objectives]

    def _keep_known(self, run: TrialWork) -> None:
        """A trial that ends before its accuracy is measured keeps the objectives known by then."""
        objectives = self.space.spec.objectives
        known = {k: v for k, v in self._known(run).items() if k in objectives}
        run.trial.set_user_attr(TrialAttr.KNOWN_OBJECTIVES, known)

    def _screen_out(self, run: TrialWork, kind: Screened) -> TrialOutcome:
        """Stop a trial a constraint rejected, keeping only the objectives really known by then
        (the plan's size; the throughput once measured): accuracy was never measured."""
        self._keep_known(run)
        return TrialOutcome(None, kind)

    def _screened(self, run: TrialWork, limits: dict[str, float], kind: Screened) -> bool:
        """Record the constraints; True when one is broken and the trial stops here."""
        trial = run.trial
        for name, value in limits.items():
            trial.set_constraint(name, value)
            run.constraints[name] = value
        if self.screening and any(v > 0 for v in limits.values()):
            trial.set_user_attr(TrialAttr.SCREENED, kind)
            return True
        return False

    def run(self, trial: optuna.Trial) -> TrialOutcome:
        """Plan, screen, build, measure, screen again, train, deploy and save: each phase is
        timed into the trial's durations and named to the display as it starts."""
        candidate = self.space.sample(trial, num_classes=self.num_classes, channels=self.channels)
        run = TrialWork(trial, candidate)
        evaluation = self.evaluation
        with run.phase("plan", self.on_phase):
            self._plan(run)
        if self._screened(run, static_constraints(self.space.spec.constraints, run.net), Screened.STATIC):
            return self._screen_out(run, Screened.STATIC)
        with evaluation.scope(run):
            with run.phase("build", self.on_phase):
                evaluation.build(run)
            with run.phase("measure", self.on_phase):
                self._measure(run)
            assert run.cost is not None
            if self._screened(run, measured_constraints(self.space.spec.constraints, run.cost), Screened.MEASURED):
                return self._screen_out(run, Screened.MEASURED)
            run.on_bound = lambda upper, record: self._at_bound(run, upper, record)
            try:
                with run.phase("train", self.on_phase):
                    self._train(run)
            except _StopAtRung as stop:
                return self._stop_at_rung(run, stop.decision)
            except _Halved:
                return self._screen_out(run, Screened.HALVING)
            with run.phase("deploy", self.on_phase):
                self._deploy(run)
            values = self._values(run)
            if evaluation.keeps_weights and self._worth_saving(run, values):
                with run.phase("save", self.on_phase):
                    evaluation.save(run)
        return TrialOutcome(values)

    def _worth_saving(self, run: TrialWork, values: list[float]) -> bool:
        """Whether retention would keep this trial's weights once it is told: most trials of a
        long search finish dominated, and their file would be deleted right after it was written."""
        trial = run.trial
        device = run.cost.device if run.cost is not None else None
        reason = kept_on_finish(trial.study, trial.number, values, run.constraints, self.keep_top_k, device)
        if reason is not None:
            trial.set_user_attr(TrialAttr.WEIGHTS_SKIPPED, reason)
        return reason is None

    def _plan(self, run: TrialWork) -> None:
        trial = run.trial
        run.net_full = plan_network(run.candidate)
        run.net = deployed_plan(run.candidate, run.net_full)  # channel pruning measures the cut network
        trial.set_user_attr(TrialAttr.PARAMS, run.net.params())
        trial.set_user_attr(TrialAttr.FLOPS, run.net.flops())
        trial.set_user_attr(TrialAttr.MODEL_BYTES, run.net.weight_bytes())

    def _measure(self, run: TrialWork) -> None:
        trial, candidate = run.trial, run.candidate
        cost = self.evaluation.measure(run, need_latency=self.space.spec.constraints.max_latency_ms is not None)
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
        peak = self.evaluation.peak_flops(candidate.precision)
        achieved = run.net.flops() * cost.primary.images_per_s
        trial.set_user_attr(TrialAttr.FLOPS_PER_S, achieved)
        if peak:
            trial.set_user_attr(TrialAttr.PEAK_FRACTION, achieved / peak[0])
            trial.set_user_attr(TrialAttr.PEAK_SOURCE, peak[1])

    def _train(self, run: TrialWork) -> None:
        trial = run.trial

        def on_epoch(epoch: int, epochs: int, logs: dict[str, float]) -> None:
            acc = logs.get("val_accuracy")
            self.on_phase(f"train epoch {epoch}/{epochs}" + (f", val acc {acc:.3f}" if acc else ""))
            for key in ("loss", "val_accuracy"):
                run.history.setdefault(key, []).append(logs[key])
            if epoch in self.rungs:
                self._at_rung(run, self.rungs.index(epoch), epoch, logs["val_accuracy"])

        run.result = self.evaluation.train(run, on_epoch)
        trial.set_user_attr(TrialAttr.HISTORY, run.result.history)
        trial.set_user_attr(TrialAttr.VAL_LOSS, run.result.loss)
        trial.set_user_attr(TrialAttr.TRAIN_IMAGES_PER_S, round(run.result.images_per_s, 1))
        self._check_input_bound(trial, run.result.images_per_s)

    def _at_rung(self, run: TrialWork, rung: int, epoch: int, accuracy: float) -> None:
        """Store this trial's point at the rung (for every worker to read), rank it against
        the rung's points in the database, and stop training unless it is among the best."""
        trial, cost = run.trial, run.cost
        assert cost is not None
        directions = rung_objectives(self.space.spec.objectives)
        known = self._known(run, accuracy)
        entry: dict[str, Any] = {"epoch": epoch, **{name: known[name] for name in directions}}
        run.rungs[str(rung)] = entry
        trial.set_user_attr(TrialAttr.RUNGS, run.rungs)
        others = competitors_at(trial.study, rung, directions, cost.device)
        eta = self.space.spec.search.early_stopping.eta
        decision = decide(eta, trial.number, rung_point(entry, directions), others, rung, epoch)
        entry.update(
            keep=decision.keep, position=decision.position, competitors=decision.competitors, kept=decision.kept
        )
        trial.set_user_attr(TrialAttr.RUNGS, run.rungs)
        if not decision.keep:
            raise _StopAtRung(decision)

    def _at_bound(self, run: TrialWork, upper: float, record: dict[str, Any]) -> None:
        """Successive halving: stop the trial when a feasible COMPLETE trial dominates, beyond
        the noise (front.py), its best case: the accuracy's upper bound, the throughput's high
        end, and every objective deploying may still change at its best (so never dominated in
        it). If a trial dominates that, it dominates the trial's figures from the whole set."""
        trial, cost = run.trial, run.cost
        assert cost is not None
        primary = cost.primary
        known = {"accuracy": upper, "throughput": primary.images_per_s}
        known = {k: v for k, v in known.items() if k in self.space.spec.objectives}
        interval = (primary.low, primary.high) if primary.low is not None and primary.high is not None else None
        dominator = dominated_by(trial.study, known, interval, cost.device)
        trial.set_user_attr(
            TrialAttr.HALVING, {**record, "dominated_by": dominator.number if dominator is not None else None}
        )
        if dominator is not None:
            trial.set_user_attr(TrialAttr.SCREENED, Screened.HALVING)
            raise _Halved

    def _stop_at_rung(self, run: TrialWork, decision: RungDecision) -> TrialOutcome:
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
        self._keep_known(run)
        return TrialOutcome(None, stopped=decision)

    def _deploy(self, run: TrialWork) -> None:
        assert run.result is not None
        run.deployed = self.evaluation.deploy(run)
        run.trial.set_user_attr(TrialAttr.DEPLOY, run.deployed.to_attr())
        run.trial.set_user_attr(TrialAttr.KERAS_ACCURACY, run.result.accuracy)


def describe_failure(exc: BaseException) -> str:
    """One line for the trial's fail_reason attribute."""
    tf = sys.modules.get("tensorflow")  # not loaded: the error cannot be TensorFlow's
    if tf is not None and isinstance(exc, tf.errors.ResourceExhaustedError):
        return "out of memory (ResourceExhaustedError): " + str(exc).strip().splitlines()[0][:300]
    if isinstance(exc, TrainingDiverged):
        return str(exc)
    if tf is not None and isinstance(exc, tf.errors.OpError):
        # TensorFlow leads with "Graph execution error:" and the Python stack of the op; the
        # reason is the last line of its own that is not stack or node detail.
        lines = [line for line in exc.message.splitlines() if line.strip() and not line[0].isspace()]
        lines = [line for line in lines if not line.startswith(("Graph execution error", "Detected at node"))]
        return f"{type(exc).__name__}: {(lines[-1] if lines else exc.message)[:300]}"
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
