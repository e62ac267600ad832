"""The settings of a search that its workers share, and the ones each process keeps."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from nas.storage import StorageURL, safe_name

MAX_CONSECUTIVE_FAILURES = 5


@dataclass(frozen=True)
class SearchOptions:
    storage: StorageURL
    study_name: str
    trials: int
    sampler: str
    seed: int
    timeout: float | None = None
    max_consecutive_failures: int = MAX_CONSECUTIVE_FAILURES
    cache: bool = True  # reuse measurements of the same network on the same device
    screening: bool = True  # reject infeasible candidates before training
    keep_weights: bool = True  # store each finished trial's trained model
    keep_top_k: int = 0  # besides the Pareto front, keep the weights of the k most accurate
    artifacts: str | None = None  # where weights go on this machine (default: beside the database)

    def __post_init__(self) -> None:
        # The name becomes the study's artifact folder; one from a database may be anything.
        safe_name(self.study_name, "study")

    def shared(self) -> dict[str, Any]:
        """What every worker of the study must agree on, stored on the study."""
        out = asdict(self)
        for local in ("storage", "study_name", "trials", "timeout", "artifacts"):
            out.pop(local)
        return out
