"""What a measurement found, as plain data: a network's throughput at one batch size, its
latency, and a trial's hardware cost. No TensorFlow: the loop, the trial code and a tabulated
benchmark read these without timing anything (timing.py and profiler.py make them)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Throughput:
    images_per_s: float  # median over rounds
    spread: float  # interquartile range / median of the per-round figures
    trustworthy: bool  # spread within the allowed maximum
    batch_size: int
    calls_per_round: int
    rounds: tuple[float, ...]  # images/s of each timed round
    warmup_calls: int
    seconds: float  # wall time of the whole measurement
    # False: the warm-up hit its time limit still changing, so the rounds may include it.
    # (Figures cached before this was recorded read as settled.)
    warmup_settled: bool = True
    # The 95% interval of images_per_s (None in figures cached before intervals existed): where
    # a repeat measurement would land (hardware/intervals.repeat_interval). It does not include
    # the error of the baseline, which scales every figure on the device alike.
    low: float | None = None
    high: float | None = None
    # Interleaved with the reference: the median ratio candidate/reference, the reference's
    # median images/s during this measurement, and the baseline that turned the ratio into
    # images_per_s. `measured_images_per_s` is the plain median of `rounds`.
    relative: float | None = None
    reference_images_per_s: float | None = None
    baseline_images_per_s: float | None = None
    measured_images_per_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Throughput:
        return cls(**{**data, "rounds": tuple(data["rounds"])})


@dataclass(frozen=True)
class Latency:
    p50_ms: float
    p95_ms: float
    spread: float  # interquartile range / median of the single-call times
    trustworthy: bool
    calls: int
    warmup_calls: int
    seconds: float
    warmup_settled: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Latency:
        return cls(**data)


@dataclass(frozen=True)
class HardwareCost:
    throughput: dict[int, Throughput]  # by inference batch size, in the space's order
    latency: Latency | None
    device: dict[str, Any]
    precision: str = "float32"
    xla: bool = False
    cached: dict[str, bool] = field(default_factory=dict)  # which figures came from the cache
    seconds: float = 0.0  # what measuring (or looking up) cost in this trial, lock waits included
    signature: str = ""  # the architecture signature: the cache's key, shared by equal networks
    lock_wait_s: float = 0.0  # of `seconds`, the time spent waiting for the device lock

    @property
    def primary(self) -> Throughput:
        return next(iter(self.throughput.values()))

    @property
    def trustworthy(self) -> bool:
        figures = [t.trustworthy for t in self.throughput.values()]
        return all(figures) and (self.latency is None or self.latency.trustworthy)

    def to_attr(self) -> dict[str, Any]:
        return {
            "throughput": {str(b): t.to_dict() for b, t in self.throughput.items()},
            "latency": self.latency.to_dict() if self.latency else None,
            "precision": self.precision,
            "xla": self.xla,
            "trustworthy": self.trustworthy,
            "cached": self.cached,
            "seconds": round(self.seconds, 4),
            "lock_wait_s": round(self.lock_wait_s, 4),
            "signature": self.signature,
        }
