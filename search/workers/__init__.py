"""Worker processes: where each runs (placement), the pool that starts and watches them,
and the pipe their events cross."""

from typing import TYPE_CHECKING

from nas._lazy import lazy_exports

if TYPE_CHECKING:
    from nas.search.workers.pipe import PipeEvents as PipeEvents
    from nas.search.workers.placement import parse_gpus as parse_gpus
    from nas.search.workers.placement import plan_workers as plan_workers
    from nas.search.workers.placement import uncapped_shared_gpus as uncapped_shared_gpus
    from nas.search.workers.pool import PoolView as PoolView
    from nas.search.workers.pool import Slot as Slot
    from nas.search.workers.pool import WorkerPool as WorkerPool

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "pipe": ["PipeEvents"],
        "placement": ["parse_gpus", "plan_workers", "uncapped_shared_gpus"],
        "pool": ["PoolView", "Slot", "WorkerPool"],
    },
)

__all__ = [
    "PipeEvents",
    "PoolView",
    "Slot",
    "WorkerPool",
    "parse_gpus",
    "plan_workers",
    "uncapped_shared_gpus",
]
