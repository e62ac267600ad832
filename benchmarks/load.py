"""Load test: many pool workers, thousands of short trials, workers killed with SIGKILL.

    python -m benchmarks.load [--storage URL] [--workers 8] [--trials 2000] [--kill-every 8 15 | --kills N]

The space is the `tiny` preset with constraints that stop every trial before training: most
on the plan (`max_params`), about one in six after being built and measured (`min_throughput`
no network reaches), so trials are cheap but still exercise the storage, the budget, the
measurement cache and recovery. The inference batch size is drawn for this
run, so its cache rows are its own. While the search runs, a randomly chosen pool worker that is
running a trial is killed with SIGKILL every few seconds (or `--kills N` times, paced by the
finished trials), and the finished trials are snapshotted.

Afterwards it checks, and prints as JSON:
- the budget is met exactly (finished == --trials), nothing is RUNNING or WAITING;
- every trial finished at any snapshot is unchanged at the end (nothing lost or rewritten);
- every failed trial was failed by recovery (its worker died) and its parameters ran again
  (unless it was itself the retry);
- every measured trial's throughput is the cache row of its architecture, and the cache holds
  a row for every architecture measured; no weights were stored (nothing was trained).
tests/workers/test_load.py runs it on the real PostgreSQL and asserts those checks.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy as sa
import yaml

HERE = Path(__file__).resolve().parent
DEFAULT_STORAGE = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def _space(folder: Path, batch_size: int) -> Path:
    space = yaml.safe_load((HERE.parent / "spaces" / "tiny.yaml").read_text())
    space["name"] = "load"
    space["constraints"] = {"max_params": 1800, "min_throughput": 1e12}
    # Plain medians, no confirmation: at this run's huge batch size the reference network's
    # rounds would take seconds each, and this test is about storage and recovery.
    space["measure"] = {"batch_sizes": [batch_size], "latency": False, "rounds": 3, "round_seconds": 0.02,
                        "reference": False, "confirm": False}  # fmt: skip
    path = folder / "load.yaml"
    path.write_text(yaml.safe_dump(space))
    return path


def _workers_of(parent: int) -> list[int]:
    """Pids of the pool's worker processes (the parent's children running `nas worker`)."""
    try:
        children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    except OSError:
        return []
    pids = []
    for pid in map(int, children):
        try:
            if b"worker" in Path(f"/proc/{pid}/cmdline").read_bytes():
                pids.append(pid)
        except OSError:
            continue
    return pids


def _running_trials(study: optuna.Study, parent: subprocess.Popen[str], rng: random.Random) -> dict[int, int]:
    """Worker pid -> the trial it is running. For up to 3 s, only trials that are measuring
    (their build phase is recorded): a state that lasts long enough for a kill to land in it,
    where a trial screened on its plan is over in milliseconds. Then the first running trial
    seen, however long that takes: late in a run, when trials are screened in milliseconds, a
    single look at the deadline often finds none, and the run ended with a due kill unsent."""
    deadline = time.monotonic() + 3.0
    while True:
        trials = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
        live = set(_workers_of(parent.pid))
        running = {pid: t.number for t in trials if (pid := t.user_attrs.get("worker", {}).get("pid")) in live}
        measuring = {
            pid: t.number
            for t in trials
            if (pid := t.user_attrs.get("worker", {}).get("pid")) in live
            and "build" in t.user_attrs.get("durations", {})
        }
        if measuring or (running and time.monotonic() > deadline) or parent.poll() is not None:
            return measuring or running
        time.sleep(rng.uniform(0.05, 0.15))


def _state(study: optuna.Study, number: int) -> str:
    return next(t.state.name for t in study.get_trials(deepcopy=False) if t.number == number)


def _finished(study: optuna.Study) -> dict[int, tuple[Any, ...]]:
    """Number -> what must never change once a trial has finished."""
    done = (optuna.trial.TrialState.PRUNED, optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL)
    return {
        t.number: (t.state.name, t.values, t.params, json.dumps(t.user_attrs, sort_keys=True), t.datetime_complete)
        for t in study.get_trials(deepcopy=False, states=done)
    }


def run_load(
    storage: str,
    workers: int,
    trials: int,
    kill_every: tuple[float, float] = (8.0, 15.0),
    seed: int = 0,
    kills_at: int | None = None,
) -> dict[str, Any]:
    """The run and its checks. Kills come every `kill_every` seconds, or with `kills_at=N`
    paced by progress instead: one each time another 1/(N+2) of the budget has finished, so
    a run that goes faster than expected still sees its N kills (a miss is tried again). The
    last 2/(N+2) are left for the last kill to land: at 1/(N+1) steps a fast run (60 trials in
    30 s) finished its last quarter while the workers killed before were still starting."""
    rng = random.Random(seed)
    due = [trials * (k + 1) // (kills_at + 2) for k in range(kills_at)] if kills_at else []
    name = f"nas-load-{uuid.uuid4().hex[:8]}"
    batch_size = rng.randint(200, 100_000)  # cache keys of this run only
    with tempfile.TemporaryDirectory(prefix="nas-load-") as tmp:
        folder = Path(tmp)
        command = [sys.executable, "-m", "nas", "search", str(_space(folder, batch_size)), "--study", name]
        command += ["--storage", storage, "--workers", str(workers), "--trials", str(trials), "--sampler", "random"]
        env = {k: v for k, v in os.environ.items() if k != "NAS_STORAGE"} | {"NAS_LOCK_DIR": str(folder / "locks")}
        started = time.monotonic()
        # Output to files, not pipes: the live view of thousands of trials would fill a pipe
        # nobody reads during the run, and the search would block writing to it.
        log = folder / "search.log"
        with log.open("w") as sink:
            parent = subprocess.Popen(command, cwd=folder, env=env, stdout=sink, stderr=subprocess.STDOUT, text=True)
        kills: list[tuple[int, int]] = []  # (worker pid, the trial it was running)
        snapshots: dict[int, tuple[Any, ...]] = {}
        study: optuna.Study | None = None
        missed, landed = False, 0
        while parent.poll() is None:
            # A kill that came after its trial had finished (screened trials take milliseconds)
            # tests nothing: until a few have landed mid-trial, try again soon after a miss.
            if kills_at:
                time.sleep(0.2)
            else:
                time.sleep(rng.uniform(1.0, 3.0) if missed and landed < 3 else rng.uniform(*kill_every))
            if study is None:
                try:
                    study = optuna.load_study(study_name=name, storage=storage)
                except KeyError:
                    continue
            if kills_at:
                snapshots.update(_finished(study))
                if missed and len(kills) < 2 * kills_at:
                    pass  # the last kill missed its trial: try again now
                elif not due or len(snapshots) < due[0]:
                    continue
            missed = False
            # Only workers in the middle of a trial: killing one mid-trial is what recovery
            # must handle (and a worker killed again and again while starting is retired).
            running = _running_trials(study, parent, rng)
            pids = list(running)
            if pids and parent.poll() is None:
                victim = rng.choice(pids)
                try:
                    os.kill(victim, signal.SIGKILL)
                except ProcessLookupError:
                    continue
                kills.append((victim, running[victim]))
                # A due kill is spent only once sent: with no worker in a trial (all starting,
                # or between trials) or the victim just gone, it stays due for the next look.
                if due and len(snapshots) >= due[0]:
                    due.pop(0)
                time.sleep(0.5)
                missed = _state(study, running[victim]) in ("COMPLETE", "PRUNED")
                landed += not missed
            snapshots.update(_finished(study))
        parent.wait()
        wall = time.monotonic() - started
        stderr = log.read_text(errors="replace")
    try:
        result = _check(storage, name, trials, batch_size, snapshots, kills, wall, workers, parent.returncode, stderr)
        return result | {"kills_due_unsent": len(due)}
    finally:
        optuna.delete_study(study_name=name, storage=storage)


def _check(
    storage: str,
    name: str,
    trials: int,
    batch_size: int,
    snapshots: dict[int, tuple[Any, ...]],
    kills: list[tuple[int, int]],
    wall: float,
    workers: int,
    returncode: int,
    stderr: str,
) -> dict[str, Any]:
    study = optuna.load_study(study_name=name, storage=storage)
    everything = study.get_trials(deepcopy=False)
    states = Counter(t.state.name for t in everything)
    final = _finished(study)
    changed = sorted(n for n, before in snapshots.items() if final.get(n) != before)
    failed = [t for t in everything if t.state.name == "FAIL"]
    retried = {t.user_attrs.get("retry_of") for t in everything if "retry_of" in t.user_attrs}
    unexplained_failures = [
        t.number for t in failed if "ended while the trial was running" not in str(t.user_attrs.get("fail_reason"))
    ]
    # A kill landed mid-trial when recovery failed a trial naming the killed worker (not
    # necessarily the trial seen running just before: a worker may have moved on to the next).
    killed = {pid for pid, _ in kills}
    landed = [
        t.number
        for t in failed
        if any(f"worker process {pid} " in str(t.user_attrs.get("fail_reason")) for pid in killed)
    ]
    not_retried = [t.number for t in failed if t.number not in retried and "retry_of" not in t.user_attrs]
    measured = [t for t in everything if t.user_attrs.get("screened") == "measured"]
    engine = sa.create_engine(storage)
    with engine.connect() as connection:
        rows = connection.execute(
            sa.text("SELECT signature, result FROM nas_measurements WHERE kind LIKE 'throughput%' AND batch_size = :b"),
            {"b": batch_size},
        ).all()
        weights = connection.execute(sa.text("SELECT count(*) FROM nas_weights WHERE study = :s"), {"s": name}).scalar()
    engine.dispose()
    cache = {signature: (json.loads(r) if isinstance(r, str) else r)["images_per_s"] for signature, r in rows}
    disagree = [
        t.number
        for t in measured
        if cache.get(t.user_attrs["hardware"]["signature"])
        != t.user_attrs["hardware"]["throughput"][str(batch_size)]["images_per_s"]
    ]
    return {
        "storage": storage.split("@")[-1],
        "workers": workers,
        "budget": trials,
        "returncode": returncode,
        "wall_s": round(wall, 1),
        "trials_per_s": round(trials / wall, 2),
        "states": dict(states),
        "finished": states["PRUNED"] + states["COMPLETE"],
        "kills": len(kills),
        "kills_mid_trial": len(landed),
        "failed_by_kills": len(failed),
        "unexplained_failures": unexplained_failures,
        "failed_not_retried": not_retried,
        "snapshotted": len(snapshots),
        "changed_after_finishing": changed,
        "measured_trials": len(measured),
        "architectures_in_cache": len(cache),
        "measured_architectures_missing_from_cache": sorted(
            {t.user_attrs["hardware"]["signature"] for t in measured} - set(cache)
        ),
        "throughput_disagreeing_with_cache": disagree,
        "weights_rows": weights,
        "stderr_tail": stderr[-2000:] if returncode else "",
    }


def main() -> None:
    # Every search here starts cold, as a new user's does: a device profile would skip measuring the device.
    os.environ.pop("NAS_DEVICE_PROFILE", None)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--storage", default=DEFAULT_STORAGE)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--kill-every", type=float, nargs=2, default=(8.0, 15.0), metavar=("MIN_S", "MAX_S"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--kills", type=int, default=None, help="kill N times, paced by finished trials (instead of --kill-every)"
    )
    args = parser.parse_args()
    result = run_load(args.storage, args.workers, args.trials, tuple(args.kill_every), args.seed, args.kills)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
