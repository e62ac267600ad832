"""Multi-objective asynchronous successive halving (ASHA), shared through the study.

Optuna's pruners refuse multi-objective studies (`Trial.report` raises there) and KerasTuner's
Hyperband folds the objectives into one number, so this is written here. Rungs sit at epochs
`min_epochs * eta**k` below `training.epochs`. A trial reaching a rung stores its point there
(accuracy after that epoch, and the objectives already known before training: throughput,
the network's size) as a trial attribute, so every worker and every `nas worker` on another
machine reads the same rungs from the database. It then ranks itself against every trial
that reached the rung: non-dominated sorting, ties inside a front broken by crowding distance
(larger first: a point in a sparse part of the front is worth more to the front, as in
NSGA-II and MOASHA). It continues when it is within the best ceil(n / eta) of the n points,
or when fewer than eta trials have reached the rung (the first trials at a rung continue:
nothing waits for a rung to fill). Otherwise it stops, and is told to the study as PRUNED.
Where the points hold throughput, a trial ranks itself only against trials measured on its
own device (engine/front.py): another device's figures are on another scale.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna

from nas.search.engine.front import NOISY, same_device
from nas.search.records import TrialAttr
from nas.search.space import EarlyStoppingSpec

# Objectives known at a rung; accuracy is the one measured so far, the others before training.
RUNG_OBJECTIVES = ("accuracy", "throughput", "model_size")


def rung_epochs(spec: EarlyStoppingSpec, epochs: int) -> list[int]:
    """The epochs at which a trial is ranked: min_epochs * eta**k, below the last epoch."""
    if spec.method == "none":
        return []
    out, epoch = [], spec.min_epochs
    while epoch < epochs:
        out.append(epoch)
        epoch *= spec.eta
    return out


@dataclass(frozen=True)
class RungDecision:
    rung: int
    epoch: int
    keep: bool
    position: int  # 0 is best
    competitors: int  # points at the rung, this trial's included
    kept: int  # how many of them continue


def _dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    return all(x >= y for x, y in zip(a, b, strict=True)) and any(x > y for x, y in zip(a, b, strict=True))


def _fronts(points: Sequence[Sequence[float]]) -> list[list[int]]:
    """Indices of `points` (maximised) by non-dominated front, best front first."""
    remaining = list(range(len(points)))
    fronts = []
    while remaining:
        front = [i for i in remaining if not any(_dominates(points[j], points[i]) for j in remaining if j != i)]
        fronts.append(front)
        remaining = [i for i in remaining if i not in front]
    return fronts


def _crowding(points: Sequence[Sequence[float]], front: list[int]) -> dict[int, float]:
    distance = dict.fromkeys(front, 0.0)
    for k in range(len(points[front[0]])):
        ordered = sorted(front, key=lambda i: points[i][k])
        low, high = points[ordered[0]][k], points[ordered[-1]][k]
        if high == low:  # every point alike in this objective: it tells them nothing apart
            continue
        distance[ordered[0]] = distance[ordered[-1]] = math.inf
        for before, me, after in zip(ordered, ordered[1:], ordered[2:], strict=False):
            distance[me] += (points[after][k] - points[before][k]) / (high - low)
    return distance


def rank(points: Sequence[Sequence[float]]) -> list[int]:
    """Indices of `points` (maximised) best first: by front, then larger crowding distance,
    then index (callers pass points by trial number: the earlier trial first)."""
    order: list[int] = []
    for front in _fronts(points):
        crowding = _crowding(points, front)
        order += sorted(front, key=lambda i: (-crowding[i], i))
    return order


def decide(
    eta: int, number: int, mine: Sequence[float], others: Mapping[int, Sequence[float]], rung: int, epoch: int
) -> RungDecision:
    """Whether trial `number` with point `mine` continues past `rung`, against `others`' points
    there (trial number -> maximised point)."""
    # By trial number, so ties fall to the earlier trial whichever worker decides.
    numbers = sorted({*others, number})
    points = [list(mine) if n == number else list(others[n]) for n in numbers]
    order = rank(points)
    position = order.index(numbers.index(number))
    competitors = len(points)
    kept = competitors if competitors < eta else math.ceil(competitors / eta)
    return RungDecision(rung, epoch, position < kept, position, competitors, kept)


def rung_point(values: Mapping[str, float], directions: Mapping[str, str]) -> list[float]:
    """A rung entry as a point to maximise, in RUNG_OBJECTIVES order for the objectives the
    space has."""
    return [values[name] if directions[name] == "maximize" else -values[name] for name in directions]


def rung_objectives(objectives: Mapping[str, str]) -> dict[str, str]:
    """The space's objectives that are known at a rung, with their directions."""
    return {name: objectives[name] for name in RUNG_OBJECTIVES if name in objectives}


def competitors_at(
    study: optuna.Study, rung: int, directions: Mapping[str, str], device: Mapping[str, Any] | None = None
) -> dict[int, list[float]]:
    """Every trial's point at `rung`, read from the database (all workers, all machines); where
    the points hold throughput, only those of trials measured on `device` (a description as
    stored), whose throughput compares with this trial's."""
    out = {}
    trials = study.get_trials(deepcopy=False)
    if NOISY in directions:
        trials = same_device(study, trials, device)
    for t in trials:
        entry = (t.user_attrs.get(TrialAttr.RUNGS) or {}).get(str(rung))
        if entry is not None and all(name in entry for name in directions):
            out[t.number] = rung_point(entry, directions)
    return out
