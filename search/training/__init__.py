"""Training a candidate: the loop, precision policy, pruning and compressed training."""

from typing import TYPE_CHECKING

from nas._lazy import lazy_exports

if TYPE_CHECKING:
    from nas.search.training.checkpoint import EpochCheckpoint as EpochCheckpoint
    from nas.search.training.compressed import train_compressed as train_compressed
    from nas.search.training.precision import precision_policy as precision_policy
    from nas.search.training.pruning import n_m_mask as n_m_mask
    from nas.search.training.pruning import prunable_kernels as prunable_kernels
    from nas.search.training.pruning import sparsity_report as sparsity_report
    from nas.search.training.result import SCORE_BATCH as SCORE_BATCH
    from nas.search.training.result import TrainResult as TrainResult
    from nas.search.training.scoring import Scored as Scored
    from nas.search.training.scoring import evaluate as evaluate
    from nas.search.training.scoring import traced_forward as traced_forward
    from nas.search.training.train import make_optimizer as make_optimizer
    from nas.search.training.train import train_and_evaluate as train_and_evaluate

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "checkpoint": ["EpochCheckpoint"],
        "scoring": ["Scored", "evaluate", "traced_forward"],
        "compressed": ["train_compressed"],
        "precision": ["precision_policy"],
        "pruning": ["n_m_mask", "prunable_kernels", "sparsity_report"],
        "result": ["SCORE_BATCH", "TrainResult"],
        "train": ["make_optimizer", "train_and_evaluate"],
    },
)

__all__ = [
    "SCORE_BATCH",
    "EpochCheckpoint",
    "Scored",
    "TrainResult",
    "evaluate",
    "make_optimizer",
    "n_m_mask",
    "precision_policy",
    "prunable_kernels",
    "sparsity_report",
    "traced_forward",
    "train_and_evaluate",
    "train_compressed",
]
