"""The race's space as nas runs it: the `mobilenet` preset, its budget in time, and the
settings of a contender (early stopping, the supernet strategy) or of a --quick check."""

from __future__ import annotations

from typing import Any

import yaml

from benchmarks.launch import ROOT

# --quick checks the script: the device's baseline and peak, rounds, warm-ups and latency
# measured briefly, and no confirmation after the budget (the race re-measures every front itself).
QUICK_MEASURE = {
    "rounds": 5,
    "round_seconds": 0.05,
    "warmup_seconds": 2,
    "latency_seconds": 0.2,
    "baseline_rounds": 5,
    "peak_seconds": 0.2,
}


def preset(epochs: int | None, asha: bool, quick: bool = False, supernet: bool = False) -> dict[str, Any]:
    space: dict[str, Any] = yaml.safe_load((ROOT / "spaces" / "mobilenet.yaml").read_text())
    space["name"] = "race"
    space["search"]["trials"] = 100_000  # the budget is time
    if quick:
        space["measure"] |= QUICK_MEASURE | {"confirm": False}
    if epochs:
        space["training"]["epochs"] = epochs
    if asha:
        space["search"]["early_stopping"] = {"method": "asha", "min_epochs": 1, "eta": 3}
    if supernet:  # the strategy's own defaults (12 supernet epochs, 3 of fine-tuning) but in --quick
        space["search"]["strategy"] = "supernet"
        if quick:
            space["search"]["supernet"] = {"epochs": 1, "finetune": {"epochs": 1}}
    return space
