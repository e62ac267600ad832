"""Finding trials whose worker died, failing them with a reason, and running them again."""

from __future__ import annotations

import datetime as dt
import logging
import socket

import optuna
from optuna.trial import FrozenTrial, TrialState

from nas.search.engine.liveness import WorkerIdentity
from nas.search.engine.optuna_private import stale_trial_ids, study_storage, trial_id
from nas.search.records import TrialAttr

log = logging.getLogger("nas")

MAX_RETRIES = 1


def requeue(study: optuna.Study, trial: FrozenTrial, *, count_retry: bool = True) -> bool:
    """Queue the trial's parameters again, at most MAX_RETRIES times per original trial."""
    retries = int(trial.user_attrs.get(TrialAttr.RETRIES, 0))
    if count_retry:
        if retries >= MAX_RETRIES:
            return False
        retries += 1
    origin = trial.user_attrs.get(TrialAttr.RETRY_OF, trial.number)
    # A queued trial stopped before it suggested every parameter holds the rest only as
    # Optuna's "fixed_params"; queueing just `params` would turn the rest into a fresh sample.
    params = {**trial.system_attrs.get("fixed_params", {}), **trial.params}
    study.enqueue_trial(params, user_attrs={TrialAttr.RETRY_OF: origin, TrialAttr.RETRIES: retries})
    return True


def _checkable_here(trial: FrozenTrial) -> bool:
    """Whether this host can tell if the trial's worker lives without a heartbeat."""
    worker = WorkerIdentity.from_attr(trial.user_attrs.get(TrialAttr.WORKER))
    return worker is not None and worker.host == socket.gethostname()


def _orphan_reason(trial: FrozenTrial, stale: set[int], grace_s: float) -> str | None:
    worker = WorkerIdentity.from_attr(trial.user_attrs.get(TrialAttr.WORKER))
    if worker is not None and worker.is_gone():
        return f"worker process {worker.pid} on {worker.host} ended while the trial was running"
    if trial_id(trial) in stale:
        where = f"{worker.host}:{worker.pid}" if worker else "unknown worker"
        return f"no heartbeat for over {grace_s:.0f} s (worker {where} lost)"
    if worker is None and trial.datetime_start is not None:
        # Killed between ask() and recording its worker: no other owner can exist after grace.
        age = dt.datetime.now() - trial.datetime_start
        if age.total_seconds() > grace_s:
            return "worker unknown and no heartbeat since the trial started"
    return None


def recover_orphans(study: optuna.Study, grace_s: float) -> list[str]:
    """Fail every RUNNING trial whose worker is gone and queue it again; returns what was done
    (and a warning when trials of other hosts could not be checked)."""
    found = stale_trial_ids(study)
    stale = found or set()
    storage = study_storage(study)
    done = []
    # Unfiltered: served from Optuna's cache of finished trials, unlike a state filter.
    running = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.RUNNING]
    if found is None:
        # Only the heartbeat can tell whether another host's trial is still alive.
        unchecked = [t.number for t in running if not _checkable_here(t)]
        if unchecked:
            done.append(
                "Warning: cannot read trial heartbeats from this storage, so trials running on other hosts "
                f"({', '.join(map(str, unchecked[:10]))}{', ...' if len(unchecked) > 10 else ''}) cannot be "
                "recovered if their worker died"
            )
    for trial in running:
        reason = _orphan_reason(trial, stale, grace_s)
        if reason is None:
            continue
        try:
            storage.set_trial_user_attr(trial_id(trial), TrialAttr.FAIL_REASON, reason)
            if not storage.set_trial_state_values(trial_id(trial), TrialState.FAIL):
                continue
        except optuna.exceptions.UpdateFinishedTrialError:
            continue  # another worker recovered it first
        again = requeue(study, trial)
        done.append(
            f"trial {trial.number} was left running ({reason}): marked failed"
            + (", parameters queued again" if again else ", retry limit reached")
        )
    return done
