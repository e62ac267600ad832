"""Tabulated benchmark of our own space: every configuration of benchmarks/table/space.yaml
trained once through nas' own trial code, with its learning curve, epoch times and measured
throughput, kept in one compressed file so that searches can be replayed against it in
simulated time (the HPO field's NAS-Bench-201 / HPOBench way; nothing here is downloaded).

    python -m benchmarks.table build [--shard I/N] [--work DIR] [--limit K]
    python -m benchmarks.table export [--work DIR] [--out FILE]
    python -m benchmarks.table summary [--table FILE]
    python -m benchmarks.table fidelity [--configs 20] [--seed 1] [--table FILE]

build: shard I of N (configurations I, I+N, I+2N... of the space's fixed order) is a nas
study in its own SQLite file under --work; its configurations are queued on the study once
and `run_search` runs them as ordinary trials (no weights kept), so the table holds what a
nas trial saw. A killed build resumes where it stopped when run again: nas' recovery queues
the trial that was running again, and finished ones are never re-run. Shards can run in
separate processes or sessions; the device lock keeps their measurements apart.
export: every shard's finished trials become the table (one row per configuration, in the
space's order), stamped with commit, date and machine; missing configurations are named.
summary: the spread of final accuracy and throughput over the table.
fidelity: configurations spread over the table's accuracy ranks trained again live with
another seed (a fresh database: throughput measured again too); Spearman and Kendall rank
correlations of accuracy and throughput between the table and the re-run.

`TableEvaluation` answers the engine's evaluation seam (nas/search/engine/evaluation.py)
from the table, so a replay runs nas' real trial code with only the figures looked up.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from benchmarks import stamps
from nas.search.deploy import Deployed
from nas.search.engine import run_search
from nas.search.engine.evaluation import EpochCallback, TrialWork
from nas.search.engine.events import SearchEvents, TrialReport
from nas.search.engine.options import SearchOptions
from nas.search.engine.study import open_study
from nas.search.hardware import HardwareCost
from nas.search.hardware.figures import Throughput
from nas.search.records import TrialAttr
from nas.search.space import SearchSpace, load_space
from nas.search.strategies import strategy_for
from nas.search.training import TrainResult
from nas.storage import open_storage, resolve_storage_url

HERE = Path(__file__).resolve().parent
SPACE = HERE / "table" / "space.yaml"
TABLE = HERE / "table" / "digits-mobilenet.json.gz"
WORK = HERE / "table" / "build"  # shard databases (ignored by git)
STUDY = "table"
VERSION = 1
ENQUEUED = "table_enqueued"  # study attribute: this shard's configurations are queued


def config_key(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True)


def parse_shard(text: str) -> tuple[int, int]:
    index, _, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        raise SystemExit(f"Error: --shard {text}: expected I/N, such as 0/2") from None
    if not 0 <= i < n:
        raise SystemExit(f"Error: --shard {text}: I must be at least 0 and below N")
    return i, n


def shard_configs(space: SearchSpace, shard: tuple[int, int]) -> list[dict[str, Any]]:
    i, n = shard
    return space.configurations()[i::n]


def shard_path(work: Path, shard: tuple[int, int]) -> Path:
    return work / f"shard-{shard[0]}-of-{shard[1]}.db"


class _Progress(SearchEvents):
    """One line per finished trial, so a long build shows where it is."""

    def __init__(self, total: int) -> None:
        self.total, self.started = total, time.monotonic()

    def message(self, text: str) -> None:
        print(text, flush=True)

    def trial_finished(self, report: TrialReport, finished: int, pareto_size: int) -> None:
        what = (
            f"accuracy {report.values[0]:.3f}, {report.values[1]:,.0f} images/s"
            if report.values
            else (report.fail_reason or "no figures")
        )
        elapsed = time.monotonic() - self.started
        print(f"[{finished}/{self.total}, {elapsed:,.0f} s] trial {report.number}: {what}", flush=True)


def queue_configs(study: optuna.Study, configs: list[dict[str, Any]]) -> int:
    """Queue every configuration not yet on the study (a kill mid-way queues the rest on the
    next run, none twice); returns how many were queued now."""
    if study.user_attrs.get(ENQUEUED):
        return 0
    trials = study.get_trials(deepcopy=False)
    # A queued trial has no params until it is asked for: Optuna keeps them as "fixed_params".
    present = {config_key(t.params) for t in trials}
    present |= {config_key(t.system_attrs.get("fixed_params", {})) for t in trials}
    queued = 0
    for params in configs:
        if config_key(params) not in present:
            study.enqueue_trial(params)
            queued += 1
    study.set_user_attr(ENQUEUED, len(configs))
    return queued


def build(
    shard: tuple[int, int], work: Path, *, limit: int | None = None, space_path: Path = SPACE, quiet: bool = False
) -> optuna.Study:
    """Run shard `shard`'s configurations (the first `limit` of them) as a nas study."""
    space = load_space(str(space_path))
    configs = shard_configs(space, shard)[:limit]
    work.mkdir(parents=True, exist_ok=True)
    url = resolve_storage_url(f"sqlite:///{shard_path(work, shard)}")
    study = open_study(space, open_storage(url), STUDY)
    queue_configs(study, configs)
    options = SearchOptions(
        storage=url, study_name=STUDY, trials=len(configs), sampler="random", seed=0, keep_weights=False
    )
    events = SearchEvents() if quiet else _Progress(len(configs))
    return run_search(space, options, events, strategy=strategy_for(space)).study


def _row(trial: optuna.trial.FrozenTrial) -> dict[str, Any]:
    attrs = trial.user_attrs
    hardware = attrs[TrialAttr.HARDWARE]
    primary = next(iter(hardware["throughput"].values()))
    history = attrs[TrialAttr.HISTORY]
    assert trial.values is not None
    return {
        "params": trial.params,
        "accuracy": trial.values[0],
        "val_accuracy": history["val_accuracy"],
        "loss": history["loss"],
        "val_loss": history["val_loss"],
        "epoch_seconds": history["seconds"],
        "throughput": primary,
        "trustworthy": hardware["trustworthy"],
        "signature": hardware["signature"],
        "measure_seconds": hardware["seconds"],
        "cached": all(hardware["cached"].values()) if hardware["cached"] else False,
        "durations": attrs[TrialAttr.DURATIONS],
        "params_count": attrs[TrialAttr.PARAMS],
        "flops": attrs[TrialAttr.FLOPS],
        "model_bytes": attrs[TrialAttr.MODEL_BYTES],
    }


def table_rows(space: SearchSpace, studies: list[optuna.Study]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(rows in the space's order, configurations with no finished trial). A configuration
    run twice (a retry) keeps its first finished trial. Each network's measuring time is
    the one uncached measurement of it, so a replay charges it once per search, as the cache
    does."""
    found: dict[str, dict[str, Any]] = {}
    for study in studies:
        for trial in sorted(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)), key=lambda t: t.number):
            found.setdefault(config_key(trial.params), _row(trial))
    measured: dict[str, float] = {}
    for row in found.values():
        if not row["cached"]:
            measured.setdefault(row["signature"], row["measure_seconds"])
    rows, missing = [], []
    for params in space.configurations():
        row = found.get(config_key(params))
        if row is None:
            missing.append(params)
            continue
        row["network_measure_seconds"] = measured.get(row["signature"], row["measure_seconds"])
        rows.append(row)
    return rows, missing


def export(work: Path, out: Path, *, space_path: Path = SPACE) -> dict[str, Any]:
    space = load_space(str(space_path))
    studies = []
    for path in sorted(work.glob("shard-*-of-*.db")):
        storage = open_storage(resolve_storage_url(f"sqlite:///{path}"), create=False)
        studies.append(optuna.load_study(study_name=STUDY, storage=storage))
    rows, missing = table_rows(space, studies)
    starts = [t.datetime_start for s in studies for t in s.get_trials(deepcopy=False) if t.datetime_start]
    ends = [t.datetime_complete for s in studies for t in s.get_trials(deepcopy=False) if t.datetime_complete]
    header = {
        "version": VERSION,
        "commit": stamps.commit(),
        "date": stamps.today(),
        "machine": stamps.machine(),
        "space": json.loads(space.fingerprint()),
        "document": space.document,  # the space file as parsed: a replay rebuilds the space from it
        "configurations": len(space.configurations()),
        "rows": len(rows),
        "missing": missing,
        "shards": len(studies),
        # The trials' own time, summed; and first start to last end (several shards overlap).
        "trial_seconds": round(sum(r["durations"]["total"] for r in rows), 1),
        "span_seconds": round((max(ends) - min(starts)).total_seconds(), 1) if starts and ends else 0.0,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(out, "wt", encoding="utf-8") as f:
        json.dump({"header": header, "rows": rows}, f, separators=(",", ":"))
    return header


@dataclass(frozen=True)
class Table:
    header: dict[str, Any]
    rows: list[dict[str, Any]]

    @classmethod
    def load(cls, path: Path = TABLE) -> Table:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
        return cls(data["header"], data["rows"])

    def by_key(self) -> dict[str, dict[str, Any]]:
        return {config_key(r["params"]): r for r in self.rows}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary(table: Table) -> dict[str, Any]:
    accuracy = [r["accuracy"] for r in table.rows]
    throughput = [r["throughput"]["images_per_s"] for r in table.rows]
    return {
        "rows": len(table.rows),
        "networks": len({r["signature"] for r in table.rows}),
        "accuracy_p10": round(percentile(accuracy, 0.1), 4),
        "accuracy_p50": round(percentile(accuracy, 0.5), 4),
        "accuracy_p90": round(percentile(accuracy, 0.9), 4),
        "accuracy_p10_p90_points": round(100 * (percentile(accuracy, 0.9) - percentile(accuracy, 0.1)), 1),
        "throughput_min": round(min(throughput)),
        "throughput_max": round(max(throughput)),
        "throughput_untrustworthy": sum(not r["throughput"]["trustworthy"] for r in table.rows),
        "throughput_interval_width_median": round(
            statistics.median(
                (r["throughput"]["high"] - r["throughput"]["low"]) / r["throughput"]["images_per_s"] for r in table.rows
            ),
            3,
        ),
        "mean_trial_seconds": round(statistics.fmean(r["durations"]["total"] for r in table.rows), 2),
    }


def rank_correlations(a: list[float], b: list[float]) -> dict[str, float]:
    from scipy import stats

    return {
        "spearman": round(float(stats.spearmanr(a, b).statistic), 3),
        "kendall": round(float(stats.kendalltau(a, b).statistic), 3),
    }


def fidelity(table: Table, configs: int, seed: int, *, space_path: Path = SPACE) -> dict[str, Any]:
    """Re-run `configs` configurations, evenly spread over the table's accuracy ranks, live
    with training seed `seed` in a fresh database, and compare ranks."""
    ranked = sorted(table.rows, key=lambda r: r["accuracy"])
    step = (len(ranked) - 1) / max(1, configs - 1)
    chosen = [ranked[round(i * step)] for i in range(configs)]
    space = load_space(str(space_path))
    with tempfile.TemporaryDirectory(prefix="nas-fidelity-") as tmp:
        url = resolve_storage_url(f"sqlite:///{Path(tmp) / 'fidelity.db'}")
        study = open_study(space, open_storage(url), STUDY)
        queue_configs(study, [r["params"] for r in chosen])
        options = SearchOptions(
            storage=url, study_name=STUDY, trials=configs, sampler="random", seed=seed, keep_weights=False
        )
        rerun = {
            config_key(t.params): _row(t)
            for t in run_search(space, options, _Progress(configs), strategy=strategy_for(space)).study.get_trials(
                states=(TrialState.COMPLETE,)
            )
        }
    pairs = [(r, rerun[config_key(r["params"])]) for r in chosen if config_key(r["params"]) in rerun]
    return {
        "configs": len(pairs),
        "seed": seed,
        "accuracy": rank_correlations([a["accuracy"] for a, _ in pairs], [b["accuracy"] for _, b in pairs]),
        "throughput": rank_correlations(
            [a["throughput"]["images_per_s"] for a, _ in pairs], [b["throughput"]["images_per_s"] for _, b in pairs]
        ),
        "accuracy_mean_abs_diff": round(statistics.fmean(abs(a["accuracy"] - b["accuracy"]) for a, b in pairs), 4),
    }


class TableEvaluation:
    """The evaluation seam answered from the table: nothing is built, timed or trained. The
    simulated clock advances by what each step cost when the table was built: a network's
    measuring time the first time this evaluation sees it (after that the cache answers, as
    in a real search), each epoch's time, and the trial's planning, building and deploying."""

    keeps_weights = False
    weights = None
    delivery = None  # no input pipeline: nothing is trained
    num_classes, channels = 10, 1  # the table's data set (digits)

    def __init__(self, table: Table, space: SearchSpace) -> None:
        self.rows = table.by_key()
        self.space = space
        self.device = {"name": "table", "machine": table.header.get("machine")}
        self.seen: set[str] = set()  # networks measured so far in this replay
        self.clock = 0.0  # simulated seconds spent by the trials evaluated so far

    def charge(self, seconds: float) -> None:
        self.clock += seconds

    def row(self, work: TrialWork) -> dict[str, Any]:
        key = config_key(dict(work.trial.params))
        try:
            return self.rows[key]
        except KeyError:
            raise KeyError(f"configuration not in the table: {key}") from None

    @contextmanager
    def scope(self, work: TrialWork) -> Iterator[None]:
        yield

    def build(self, work: TrialWork) -> None:
        durations = self.row(work)["durations"]
        self.charge(durations.get("plan", 0.0) + durations.get("build", 0.0))

    def measure(self, work: TrialWork, *, need_latency: bool) -> HardwareCost:
        row = self.row(work)
        first = row["signature"] not in self.seen
        self.seen.add(row["signature"])
        seconds = row["network_measure_seconds"] if first else 0.0
        self.charge(seconds)
        figure = Throughput.from_dict(row["throughput"])
        return HardwareCost(
            {figure.batch_size: figure},
            None,
            self.device,
            cached={str(figure.batch_size): not first},
            seconds=seconds,
            signature=row["signature"],
        )

    def peak_flops(self, precision: str) -> tuple[float, str] | None:
        return None

    def start(self) -> None:
        """The table holds every figure already."""

    def worker_attrs(self) -> dict[str, Any]:
        return {"device": "table"}

    def train(self, work: TrialWork, on_epoch: EpochCallback) -> TrainResult:
        row = self.row(work)
        epochs = len(row["val_accuracy"])
        for epoch in range(1, epochs + 1):
            self.charge(row["epoch_seconds"][epoch - 1])
            logs = {"loss": row["loss"][epoch - 1], "val_accuracy": row["val_accuracy"][epoch - 1]}
            on_epoch(epoch, epochs, logs)
        history = {k: list(row[k]) for k in ("loss", "val_accuracy", "val_loss")}
        history["seconds"] = list(row["epoch_seconds"])
        # Training images/s only feeds the input-bound check, which a replay does not make.
        return TrainResult(row["accuracy"], row["val_loss"][-1], history, sum(row["epoch_seconds"]), 0.0)

    def deploy(self, work: TrialWork) -> Deployed:
        row = self.row(work)
        self.charge(row["durations"].get("deploy", 0.0))
        return Deployed(None, int(row["model_bytes"]), None, None, converted=False)

    def save(self, work: TrialWork) -> None:
        raise AssertionError("a table keeps no weights")


def main() -> None:
    # Every build starts cold: a device profile would skip measuring the device.
    os.environ.pop("NAS_DEVICE_PROFILE", None)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p_build = sub.add_parser("build")
    p_build.add_argument("--shard", default="0/1")
    p_build.add_argument("--work", type=Path, default=WORK)
    p_build.add_argument("--limit", type=int, default=None, help="only the shard's first K configurations")
    p_export = sub.add_parser("export")
    p_export.add_argument("--work", type=Path, default=WORK)
    p_export.add_argument("--out", type=Path, default=TABLE)
    p_summary = sub.add_parser("summary")
    p_summary.add_argument("--table", type=Path, default=TABLE)
    p_fidelity = sub.add_parser("fidelity")
    p_fidelity.add_argument("--table", type=Path, default=TABLE)
    p_fidelity.add_argument("--configs", type=int, default=20)
    p_fidelity.add_argument("--seed", type=int, default=1)
    for p in (p_build, p_export, p_fidelity):
        p.add_argument("--space", type=Path, default=SPACE)
    args = parser.parse_args()
    if args.command == "build":
        started = time.monotonic()
        study = build(parse_shard(args.shard), args.work, limit=args.limit, space_path=args.space)
        done = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
        print(json.dumps({"shard": args.shard, "complete": done, "seconds": round(time.monotonic() - started, 1)}))
    elif args.command == "export":
        print(json.dumps(export(args.work, args.out, space_path=args.space) | {"out": str(args.out)}, indent=2))
    elif args.command == "summary":
        table = Table.load(args.table)
        shown = {k: v for k, v in table.header.items() if k not in ("space", "document")}
        print(json.dumps(shown | summary(table), indent=2))
    else:
        print(json.dumps(fidelity(Table.load(args.table), args.configs, args.seed, space_path=args.space), indent=2))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
