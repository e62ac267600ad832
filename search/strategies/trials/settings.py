"""`trials` in the space: no settings; nothing of the search decides what a stored trial means."""

from __future__ import annotations

from nas.search.strategies import StrategySettings


class TrialsSettings(StrategySettings):
    summary = "every candidate trained from scratch"


SETTINGS = TrialsSettings("trials")
