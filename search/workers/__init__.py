"""Worker processes: where each runs (placement), the pool that starts and watches them,
and the pipe their events cross."""

from nas.search.workers.pipe import PipeEvents
from nas.search.workers.placement import parse_gpus, plan_workers
from nas.search.workers.pool import PoolView, Slot, WorkerPool

__all__ = ["PipeEvents", "PoolView", "Slot", "WorkerPool", "parse_gpus", "plan_workers"]
