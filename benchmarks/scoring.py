"""How the benchmarks score a search: the hypervolume of its (accuracy, log10 images/s) front,
the single score KerasTuner ranks by, and the time between trials spent outside them."""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Iterable

REFERENCE = (0.0, 3.0)  # accuracy 0, 1,000 images/s: slower candidates add nothing to the hypervolume
SCORE_WEIGHT = 0.1  # KerasTuner's single score: accuracy + 0.1 * log10(images/s)


def log_throughput(images_per_s: float) -> float:
    return math.log10(max(images_per_s, 1e-9))


def hypervolume(points: Iterable[tuple[float, float]], reference: tuple[float, float] = REFERENCE) -> float:
    """Area dominated by maximised (accuracy, log10 images/s) points above `reference`."""
    # Imported here: a benchmark's parent process stays free of nas' imports until it scores.
    from nas.search.results import hypervolume_2d

    return hypervolume_2d([[a, t] for a, t in points], list(reference))


def front_hypervolume(points: Iterable[tuple[float, float]], reference: tuple[float, float] = REFERENCE) -> float:
    """The hypervolume of (accuracy, images/s) points."""
    return hypervolume([(a, log_throughput(t)) for a, t in points], reference)


def throughput_score(images_per_s: float) -> float:
    """Throughput's part of KerasTuner's single score."""
    return SCORE_WEIGHT * math.log10(images_per_s)


def single_score(accuracy: float, images_per_s: float) -> float:
    """The one figure a KerasTuner user ranks (accuracy, images/s) by: KerasTuner has no fronts."""
    return accuracy + throughput_score(images_per_s)


def idle_gaps(trials: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """From each trial's (end, seconds inside it), (seconds outside any trial, seconds) of each
    gap between two trial ends; a trial busy longer than its gap leaves 0 outside, and trials
    ending together make no gap."""
    ordered = sorted(trials, key=lambda t: t[0])
    return [
        (max(0.0, (end - before) - inside), end - before)
        for (before, _), (end, inside) in itertools.pairwise(ordered)
        if end > before
    ]


def overhead_share(gaps: list[tuple[float, float]]) -> float:
    """Median share of a gap between trial ends spent outside the trial (nan: no gaps)."""
    shares = [idle / gap for idle, gap in gaps]
    return statistics.median(shares) if shares else float("nan")


def overhead_seconds(gaps: list[tuple[float, float]]) -> float:
    """Median seconds of a gap between trial ends spent outside the trial: unlike the share,
    not lowered by a tool whose training itself is slower (nan: no gaps)."""
    idle = [idle for idle, _ in gaps]
    return statistics.median(idle) if idle else float("nan")


def bootstrap_interval(diffs: list[float], *, rounds: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap interval of the mean paired difference over seeds."""
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(diffs, k=len(diffs))) for _ in range(rounds))
    return means[int(0.025 * rounds)], means[int(0.975 * rounds) - 1]
