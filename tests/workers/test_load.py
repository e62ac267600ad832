"""Load test on the real PostgreSQL: pool workers, sixty screened trials, workers killed
with SIGKILL throughout (benchmarks/load.py does the run and the checks).

The suite runs a smaller version of the benchmark: 3 workers, NAS_LOAD_TRIALS trials
(default 60), 3 kills paced by progress (at each fifth of the budget, not by the clock: a
run faster than expected still sees them), each aimed at a worker while it measures (a state
the run observes in the database, so the kills land mid-trial). The 8-worker, 2,000-trial run
recorded in benchmarks/RESULTS.md is `python benchmarks/load.py`."""

from __future__ import annotations

import os
from types import ModuleType

import pytest

from ..helpers import benchmark_module, server_url


def _load_benchmark() -> ModuleType:
    return benchmark_module("load")


@pytest.mark.slow
@pytest.mark.server
def test_workers_killed_at_random_lose_nothing_on_postgresql() -> None:
    trials = int(os.environ.get("NAS_LOAD_TRIALS", "60"))
    result = _load_benchmark().run_load(server_url("postgresql"), workers=3, trials=trials, seed=1, kills_at=3)
    print(result)  # the figures, for `pytest -s`
    assert result["returncode"] == 0, result["stderr_tail"]
    assert result["finished"] == trials  # the budget, met exactly
    assert set(result["states"]) <= {"PRUNED", "FAIL"}, result["states"]  # nothing RUNNING or WAITING
    assert result["kills"] >= 3, result  # the run really was interrupted, at every fifth
    assert result["kills_mid_trial"] >= 1, result  # at least one kill hit a running trial
    assert result["failed_by_kills"] == result["kills_mid_trial"], result  # each such kill failed one trial
    assert result["unexplained_failures"] == [] and result["failed_not_retried"] == []
    assert result["snapshotted"] > 0 and result["changed_after_finishing"] == []
    assert result["measured_trials"] > 0, result
    assert result["measured_architectures_missing_from_cache"] == []
    assert result["throughput_disagreeing_with_cache"] == []
    assert result["weights_rows"] == 0  # nothing was trained, so nothing was kept
