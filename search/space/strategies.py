"""What a search strategy contributes to a space: its part of the study's fingerprint and its
own checks of the space. The engine's half of each strategy (its evaluation, sampler and
after-search steps) is engine/strategy.py; the two registries hold the same names (a test
keeps them so) and nothing else in nas compares a strategy's name."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nas.errors import NasError

if TYPE_CHECKING:
    from nas.search.space.searchspace import SearchSpace
    from nas.search.space.spec import SearchSpec

DEFAULT = "trials"  # what a study stored before strategies existed was searched with


class StrategyRules:
    """The `trials` strategy: every candidate trains its own network, so nothing of the
    search's settings decides what a stored trial means."""

    def fingerprint(self, search: SearchSpec) -> dict[str, Any] | None:
        """The search settings that must not change under a running study; None: none."""
        return None

    def check(self, space: SearchSpace) -> None:
        """Raise NasError for a space this strategy cannot search."""


class SupernetRules(StrategyRules):
    def fingerprint(self, search: SearchSpec) -> dict[str, Any] | None:
        # A supernet study's trials are scored by weights these settings trained.
        data = search.model_dump(mode="json", include={"strategy", "supernet"})
        data["supernet"].pop("finetune")  # it acts after the search (spec.py)
        data["supernet"].pop("reference_subnets")  # it reads the weights, never changes them
        data["supernet"].pop("halving")  # how much of the validation set is scored (spec.py)
        if data["supernet"]["schedule"] == "sandwich":
            data["supernet"].pop("schedule")  # a study from before schedules was trained with sandwich
        if not data["supernet"]["sort_channels"]:
            data["supernet"].pop("sort_channels")  # a study from before channel sorting was trained without it
        for key, default in (("random_subnets", 2), ("distillation", "kl")):
            if data["supernet"][key] == default:
                data["supernet"].pop(key)  # a study from before the setting was trained with its default
        if data["supernet"]["epochs"] != "auto":
            data["supernet"].pop("budget_share")  # it decides nothing where the epochs are given
        return data

    def check(self, space: SearchSpace) -> None:
        from nas.search.space.elastic import elastic_space  # it builds SearchSpaces itself

        elastic_space(space)


def planned_epochs(search: SearchSpec) -> int | None:
    """The supernet's epochs where the space file gives them; None for `auto` (decided when
    the training starts, then stored)."""
    epochs = search.supernet.epochs
    return None if epochs == "auto" else epochs


RULES: dict[str, StrategyRules] = {"trials": StrategyRules(), "supernet": SupernetRules()}


def rules_for(search: SearchSpec) -> StrategyRules:
    try:
        return RULES[search.strategy]
    except KeyError:  # the schema admits only registered names; a stored study may hold anything
        raise NasError(f"search.strategy: {search.strategy} is not one of {list(RULES)}") from None
