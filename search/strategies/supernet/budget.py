"""How many supernet epochs fit in a search's time budget (`search.supernet.epochs: auto`).

Measured, not guessed: the first epoch is trained as any other, and its time decides the
rest. Its steps that traced a graph (the first of each spatial shape) are counted apart: later
epochs reuse those graphs. An epoch costs what the first cost without its tracing (its
reference-subnet scoring included); the training gets as many more as fit in what is left of
the budget's share, so nothing is spent on a probe. The learning rate's cosine schedule is
stretched to the decided epochs before the second epoch starts (its first epoch sits at the
top of the cosine, where a longer or shorter schedule differs by at most a few per cent of
the rate). Decided once per study and checkpointed; a resumed training keeps the count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class EpochBudget:
    epochs: int
    epoch_seconds: float  # each later epoch: the first without its tracing
    first_epoch_seconds: float
    trace_seconds: float
    budget_seconds: float  # the share of --timeout the training gets
    spent_seconds: float  # of it, when the first epoch ended

    def describe(self) -> str:
        return (
            f"{self.epochs} epoch{'s' if self.epochs != 1 else ''} fit in {self.budget_seconds:.0f} s (the first took "
            f"{self.first_epoch_seconds:.0f} s, {self.trace_seconds:.0f} s of it tracing graphs; "
            f"each next about {self.epoch_seconds:.0f} s)"
        )


def epochs_for_budget(
    first_epoch_seconds: float, trace_seconds: float, spent_seconds: float, budget_seconds: float, minimum: int = 1
) -> EpochBudget:
    """The epochs (the first included, at least `minimum`) that fit in `budget_seconds`, of
    which `spent_seconds` are gone when the first epoch ends."""
    each = max(first_epoch_seconds - trace_seconds, 1e-3)
    more = max(0, math.floor((budget_seconds - spent_seconds) / each))
    return EpochBudget(
        epochs=max(minimum, 1 + more),
        epoch_seconds=each,
        first_epoch_seconds=first_epoch_seconds,
        trace_seconds=trace_seconds,
        budget_seconds=budget_seconds,
        spent_seconds=spent_seconds,
    )
