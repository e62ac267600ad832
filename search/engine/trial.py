"""One trial: plan the sampled network and check static constraints (before any model
exists), build it, measure it on this device, check measured constraints, train it, score it."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import TYPE_CHECKING

import keras
import optuna
from sqlalchemy.exc import SQLAlchemyError

from nas.search.data import Dataset
from nas.search.deploy import Deployed, deploy
from nas.search.hardware import HardwareCost, HardwareProfiler
from nas.search.nets import NetworkPlan, build_plan, plan_network, pruned_plan, static_constraints
from nas.search.records import TrialAttr
from nas.search.space import ConstraintsSpec, SearchSpace
from nas.search.training import precision_policy, sparsity_report, train_compressed

if TYPE_CHECKING:
    from nas.storage.weights import WeightStore

PhaseCallback = Callable[[str], None]
# Training at this fraction of the pipeline's delivery rate (or more) is starved for input.
INPUT_BOUND_RATIO = 0.8


@dataclass(frozen=True)
class TrialOutcome:
    values: list[float]
    screened: str | None = None  # "static" or "measured" when rejected before training


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

    def _values(
        self,
        accuracy: float,
        cost: HardwareCost | None,
        deployed: Deployed | None = None,
        net: NetworkPlan | None = None,
    ) -> list[float]:
        # A screened trial is infeasible (the front ignores it); its size is the plan's and its
        # latency a large stand-in, since Optuna takes no missing values.
        figures = {
            "accuracy": accuracy,
            "throughput": cost.primary.images_per_s if cost else 0.0,
            "model_size": float(deployed.model_bytes if deployed else net.weight_bytes() if net else 0),
            "tflite_latency": deployed.latency_ms if deployed and deployed.latency_ms is not None else 1e9,
        }
        return [figures[name] for name in self.space.spec.objectives]

    def _screened(self, trial: optuna.Trial, limits: dict[str, float], kind: str) -> bool:
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
        durations: dict[str, float] = {}
        started = time.perf_counter()

        @contextmanager
        def phase(name: str) -> Iterator[None]:
            self.on_phase(name)
            t0 = time.perf_counter()
            try:
                yield
            finally:
                durations[name] = round(time.perf_counter() - t0, 4)
                durations["total"] = round(time.perf_counter() - started, 4)
                trial.set_user_attr(TrialAttr.DURATIONS, durations)

        spec = self.space.spec
        model: keras.Model | None = None
        candidate = self.space.sample(trial, num_classes=self.data.num_classes, channels=self.data.channels)
        try:
            with phase("plan"):
                net_full = plan_network(candidate)
                # Channel pruning deploys (and so measures) the cut network.
                net = pruned_plan(net_full, candidate.sparsity) if candidate.pruning == "channel" else net_full
                params, flops = net.params(), net.flops()
                trial.set_user_attr(TrialAttr.PARAMS, params)
                trial.set_user_attr(TrialAttr.FLOPS, flops)
                trial.set_user_attr(TrialAttr.MODEL_BYTES, net.weight_bytes())
            if self._screened(trial, static_constraints(spec.constraints, net), "static"):
                return TrialOutcome(self._values(0.0, None, net=net), "static")
            with precision_policy(candidate.precision):
                with phase("build"):
                    keras.utils.set_random_seed(self.seed + trial.number)
                    model = build_plan(net)

                with phase("measure"):
                    cost = self.profiler.measure(
                        model,
                        precision=candidate.precision,
                        xla=candidate.xla,
                        need_latency=spec.constraints.max_latency_ms is not None,
                    )
                    trial.set_user_attr(TrialAttr.DEVICE, cost.device)
                    trial.set_user_attr(TrialAttr.HARDWARE, cost.to_attr())
                    trial.set_user_attr(TrialAttr.THROUGHPUT_SPREAD, round(cost.primary.spread, 4))
                    peak = self.profiler.peak_flops(candidate.precision)
                    achieved = flops * cost.primary.images_per_s
                    trial.set_user_attr(TrialAttr.FLOPS_PER_S, achieved)
                    if peak:
                        trial.set_user_attr(TrialAttr.PEAK_FRACTION, achieved / peak)
                if self._screened(trial, measured_constraints(spec.constraints, cost), "measured"):
                    return TrialOutcome(self._values(0.0, cost, net=net), "measured")

                def on_epoch(epoch: int, epochs: int, logs: dict[str, float]) -> None:
                    acc = logs.get("val_accuracy")
                    self.on_phase(f"train epoch {epoch}/{epochs}" + (f", val acc {acc:.3f}" if acc else ""))

                with phase("train"), self.profiler.lock.shared():
                    model, result = train_compressed(
                        model,
                        net_full,
                        net,
                        candidate,
                        self.data,
                        seed=self.seed + trial.number,
                        pruning=spec.compression.pruning,
                        augmentation=spec.dataset.augmentation if spec.dataset.augmentation.active else None,
                        on_epoch=on_epoch,
                    )
                    trial.set_user_attr(TrialAttr.HISTORY, result.history)
                    trial.set_user_attr(TrialAttr.VAL_LOSS, result.loss)
                    trial.set_user_attr(TrialAttr.TRAIN_IMAGES_PER_S, round(result.images_per_s, 1))
                    self._check_input_bound(trial, result.images_per_s)
                    if candidate.pruning in ("magnitude", "n_m"):
                        trial.set_user_attr(
                            TrialAttr.SPARSITY, sparsity_report(model, list(spec.compression.pruning.exclude))
                        )
                objectives = spec.objectives
                with phase("deploy"), self.profiler.lock.shared():
                    deployed = deploy(
                        model,
                        candidate.quantization,
                        self.data,
                        convert="model_size" in objectives or "tflite_latency" in objectives,
                        latency="tflite_latency" in objectives,
                        threads=spec.compression.tflite_threads,
                        pruned=candidate.pruning != "none",
                    )
                    trial.set_user_attr(TrialAttr.DEPLOY, deployed.to_attr())
                    trial.set_user_attr(TrialAttr.KERAS_ACCURACY, result.accuracy)
                if self.weights is not None:
                    with phase("save"):
                        self._save_weights(trial, model)
            # The objective is the accuracy of what will be deployed (after pruning and quantization).
            accuracy = deployed.accuracy if deployed.accuracy is not None else result.accuracy
            return TrialOutcome(self._values(accuracy, cost, deployed, net))
        finally:
            # Without this, every trial's graphs and weights stay alive in the process and a
            # long search grows until it is killed (the classic KerasTuner complaint).
            del model
            keras.backend.clear_session(free_memory=True)
            gc.collect()


def describe_failure(exc: BaseException) -> str:
    """One line for the trial's fail_reason attribute."""
    from nas.search.runtime import import_tensorflow
    from nas.search.training import TrainingDiverged

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
