"""The supernet strategy's space part: the space file's `search.supernet:` schema (the
weight-sharing training, the successive halving over its subnets and the fine-tuning of its
front), its fingerprint part and its check of a space."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from nas.search.space import Spec
from nas.search.strategies import StrategySettings

if TYPE_CHECKING:
    from nas.search.space import SearchSpace


class FinetuneSpec(Spec):
    """After a supernet search: the front's subnets trained on from their inherited weights."""

    epochs: int = Field(3, ge=0, le=10000, description="epochs per front subnet (0: no fine-tuning)")
    learning_rate: float | None = Field(
        None, gt=0, le=10, description="start of the cosine schedule (default: a tenth of the supernet's rate)"
    )


class HalvingSpec(Spec):
    """Successive halving over subnets: each is scored on the first `subset` validation images,
    and the rest of the set is scored only if an upper bound of its accuracy is not dominated."""

    enabled: bool = Field(True, description="score a subset first and stop subnets whose best case is dominated")
    subset: int = Field(
        2048, ge=1, le=10_000_000, description="validation images scored first, rounded up to whole batches of 256"
    )
    z: float = Field(3.5, ge=1, le=10, description="confidence of the accuracy's upper bound, as a normal z")


class SupernetSpec(Spec):
    """`search.strategy: supernet`: one weight-sharing network trained once, whose subnets the
    trials then evaluate with inherited weights (this package)."""

    # `auto`: measured on the machine when the training starts (supernet/budget.py) and stored, so
    # the study's fingerprint holds `auto` and the share, and a resumed search keeps the count.
    epochs: Annotated[int, Field(ge=1, le=10000)] | Literal["auto"] = Field(
        12,
        description="epochs of the supernet's sandwich training, or auto: as many as fit in budget_share of "
        "the search's --timeout, measured when the training starts",
    )
    budget_share: float = Field(
        0.5, gt=0.0, lt=1.0, description="with epochs: auto, the share of --timeout the supernet's training gets"
    )
    schedule: Literal["sandwich", "progressive"] = Field(
        "sandwich",
        description="sandwich: every step's subnets vary every elastic choice; progressive: the largest network "
        "first, then kernel, depth, expansion (with SE) and width opened in turn (Once-for-All)",
    )
    # The sandwich rule's settings (BigNAS): per step the largest, the smallest and this many random
    # subnets; the others learn the largest's predictions (in-place distillation) or the labels.
    random_subnets: int = Field(
        2, ge=0, le=6, description="subnets drawn at random for each training step, beside the largest and the smallest"
    )
    distillation: Literal["kl", "labels"] = Field(
        "kl",
        description="what every subnet but the largest learns: kl, the largest's predictions (in-place "
        "distillation); labels, the labels",
    )
    # On by default: a user sees the supernet learn (issue 47); three re-calibrations and scorings
    # per epoch cost seconds against an epoch's minutes. They read the weights and change nothing,
    # so they are not in the study's fingerprint.
    reference_subnets: bool = Field(
        True,
        description="after each epoch, score the smallest, a middle and the largest subnet as trials are scored "
        "(shown live, kept in the study)",
    )
    # Off by default: on benchmarks/supernet.py's space sorting cut the inherited ranking's
    # Kendall tau against full stand-alone training from 0.34 to -0.06 (RESULTS.md).
    sort_channels: bool = Field(
        False, description="sort channels by importance a quarter into the training (Once-for-All's criterion)"
    )
    calibration_batches: int = Field(
        8, ge=1, le=10000, description="training batches that re-estimate a subnet's BatchNorm statistics"
    )
    # The knobs a supernet cannot share (training hyperparameters, batch size, precision): the
    # value each is fixed at for the supernet's training; unset ones take the rule in elastic.py.
    fixed: dict[str, Any] = Field(default_factory=dict, description="values of the knobs that are not elastic")
    # Not in the study's fingerprint: it acts after the search, and each fine-tuned figure is
    # stored with the epochs and rate it took, so other settings fine-tune again.
    finetune: FinetuneSpec = Field(
        FinetuneSpec(), description="after the search, the front's subnets trained on from their inherited weights"
    )
    # On by default: a subnet scored in full gets the figure it got without halving (the same
    # batches), and one stopped was dominated even at its best case. Not in the study's
    # fingerprint: it decides how much of the set is scored, never what a COMPLETE trial's
    # accuracy means. A stopped trial is PRUNED, which samplers read as a bad trial (TPE) or
    # skip (NSGA-II), as they do a screened one; a dominated COMPLETE trial would have told them
    # about as little, and resuming with other settings keeps every stored trial meaningful.
    halving: HalvingSpec = Field(
        HalvingSpec(), description="score each subnet on a validation subset first; stop it there if dominated"
    )


class SupernetSettings(StrategySettings):
    schema = SupernetSpec
    summary = "one weight-sharing training"
    # Subnets are timed at batch 1 only where the space asks: their figures come by the hundred.
    measures_latency = False

    def of(self, search: Spec) -> SupernetSpec:
        value = super().of(search)
        assert isinstance(value, SupernetSpec)
        return value

    def unfingerprinted(self, settings: Any) -> set[str]:
        # A supernet study's trials are scored by weights the other settings trained. These act
        # after the search (finetune), read the weights without changing them (reference
        # subnets) or decide how much of the validation set is scored (halving).
        out = {"finetune", "reference_subnets", "halving"}
        if settings.epochs != "auto":
            out.add("budget_share")  # it decides nothing where the epochs are given
        return out

    def check(self, space: SearchSpace) -> None:
        from nas.search.strategies.supernet.elastic import elastic_space  # it builds SearchSpaces itself

        elastic_space(space)


SETTINGS = SupernetSettings("supernet")


def supernet_settings(space: SearchSpace) -> SupernetSpec:
    """A loaded supernet space's `search.supernet:`, typed."""
    return SETTINGS.of(space.spec.search)


def planned_epochs(space: SearchSpace) -> int | None:
    """The supernet's epochs where the space file gives them; None for `auto` (decided when
    the training starts, then stored)."""
    epochs = supernet_settings(space).epochs
    return None if epochs == "auto" else epochs
