"""Where benchmarks/fashion.py and benchmarks/fashion_supernet.py keep what they have done (one
folder per round of the proof, committed: the studies, the references' figures, the throughput,
the pieces that ran) and the readers their pieces share.

Round 1 (issue 46 and 47, the preset before fused blocks) is benchmarks/fashion-runs/: the
record RESULTS.md links to, read (benchmarks/fashion_endtoend.py) but never written again.
The pieces run round 2 (issue 62) in benchmarks/fashion-runs-2/."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from benchmarks import stamps

if TYPE_CHECKING:
    from nas.search.records import FinalFigures

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
ROUNDS = {1: HERE / "fashion-runs", 2: HERE / "fashion-runs-2"}
ROUND = 2  # the round the pieces run
WORK = ROUNDS[ROUND]  # committed: the studies, the references' figures, the throughput
RUNS = REPO / "runs" / f"fashion-{ROUND}"  # not committed: the search's per-trial weights
STUDY = "fashion_mnist"  # the `trials` study of seed 0 (DATABASE); the others live in SUPERNET_DATABASE
SPACE = "fashion_mnist"  # the preset
DATABASE = WORK / "fashion.db"
SUPERNET = WORK / "supernet"  # benchmarks/fashion_supernet.py's studies, space file and progress
SUPERNET_DATABASE = SUPERNET / "supernet.db"
SEARCH_SECONDS = 3600
NETWORKS = 6  # front members final-trained per study by default, spread along it (both ends in)


class Front(NamedTuple):
    """One study of a round: its label in tables ("trials s0", "supernet s1"), name, seed and database."""

    label: str
    study: str
    seed: int
    database: Path


def progress() -> dict[str, Any]:
    path = WORK / "progress.json"
    return json.loads(path.read_text()) if path.is_file() else {"search_seconds": 0.0, "chunks": []}


def save_progress(state: dict[str, Any]) -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "progress.json").write_text(json.dumps(state, indent=2) + "\n")
    write_back(WORK)


def write_back(folder: Path) -> None:
    """Write each study database's WAL back into it, so the committed file holds every trial:
    the search piece of 2026-12-08 ended with 4 MB of its trials still in fashion.db-wal
    (ignored by git), the database itself a few trials behind."""
    for database in sorted(folder.rglob("*.db")):
        connection = sqlite3.connect(database)
        try:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            connection.close()


def logged(log: dict[str, Any], command: str, commit: str) -> dict[str, Any]:
    """A progress log stamped after a piece ran: `command` is the list of the pieces' commands
    (each once, in the order they first ran; one stored as a string becomes the list's first),
    the piece's own added; `commit` is the last piece's (the code it ran). Both lead the log,
    the rest of it kept as it is (a `stamped_from` note too)."""
    commands = log.get("command", [])
    commands = [commands] if isinstance(commands, str) else list(commands)
    stamps_now = {"command": commands if command in commands else [*commands, command], "commit": commit}
    return stamps_now | {key: value for key, value in log.items() if key not in stamps_now}


def chunk(piece: str, seconds: float, code: int, commit: str) -> dict[str, Any]:
    """One piece that ran: what, when, how long, its exit status, and the stamps RESULTS.md
    names (the commit checked out when it started: the code it ran; the machine)."""
    ended = dt.datetime.now(dt.UTC)
    return {
        "piece": piece,
        "seconds": round(seconds, 1),
        "exit": code,
        "commit": commit,
        "machine": stamps.machine(),
        "started": (ended - dt.timedelta(seconds=seconds)).isoformat(timespec="minutes"),
        "ended": ended.isoformat(timespec="minutes"),
    }


def study() -> Any:
    import optuna

    return optuna.load_study(study_name=STUDY, storage=f"sqlite:///{DATABASE}")


def round_studies(work: Path) -> list[Front]:
    """Every study of the round in `work` that exists: the `trials` study of seed 0 first, then
    benchmarks/fashion_supernet.py's (fashion_<strategy>_s<seed>)."""
    import optuna

    found = [Front("trials s0", STUDY, 0, work / "fashion.db")] if (work / "fashion.db").is_file() else []
    database = work / "supernet" / "supernet.db"
    if database.is_file():
        for summary in optuna.get_all_study_summaries(f"sqlite:///{database}", include_best_trial=False):
            kind, seed = summary.study_name.removeprefix("fashion_").rsplit("_s", 1)
            found.append(Front(f"{kind} s{seed}", summary.study_name, int(seed), database))
    return found


def load(front: Front) -> Any:
    import optuna

    return optuna.load_study(study_name=front.study, storage=f"sqlite:///{front.database}")


def final_trained(found: Any) -> dict[str, FinalFigures]:
    """`nas train`'s figures by trial number."""
    from nas.search.engine.front import final_figures

    return final_figures(found)


def spread_front(front: list[tuple[int, float]], count: int) -> list[int]:
    """`count` of the front's (trial, accuracy) members evenly spread along it, most accurate
    first, both ends included (all of them where the front has no more)."""
    ordered = [n for n, _ in sorted(front, key=lambda m: (-m[1], m[0]))]
    if len(ordered) <= count:
        return ordered
    return [ordered[round(k * (len(ordered) - 1) / (count - 1))] for k in range(count)]


def front_of(found: Any) -> list[tuple[int, float]]:
    """The study's Pareto front by its medians (Optuna's best trials: what `nas pareto` marks),
    as (trial, search accuracy)."""
    return [(t.number, t.values[0]) for t in found.best_trials]


def recipe_space() -> Any:
    """The preset: its final recipe is every network's."""
    from nas.search.space import load_space

    return load_space(SPACE)


def preset_recipe(space: Any) -> dict[str, Any]:
    """What every network's final training must share, as the preset says it today (the keys of
    engine/final.py's final_recipe that are not the network's own; where the preset leaves one
    to the trial, nothing to compare)."""
    final = space.spec.final
    augmentation = final.augmentation or space.spec.dataset.augmentation
    recipe = {
        "epochs": final.epochs,
        "warmup_epochs": final.warmup_epochs,
        "learning_rate": final.learning_rate,
        "batch_size": final.batch_size,
        "label_smoothing": final.label_smoothing,
        "augmentation": augmentation.recorded(),
        "data": final.data,
        "seed": final.seed,
    }
    return {key: value for key, value in recipe.items() if value is not None}


def current(recipe: dict[str, Any], preset: dict[str, Any]) -> bool:
    """Whether a network was final-trained with the preset's recipe as it is now."""
    return all(recipe.get(key) == value for key, value in preset.items())


def sync_final(database: Path, name: str, final: dict[str, Any]) -> bool:
    """The preset's `final:` section copied into the study's stored space, which `nas train`
    reads (it stores the space when the search runs). `final:` acts after the search and is no
    part of the study's fingerprint; the recipe may change after a search (benchmarks/
    fashion_recipe.py), and every network of the table, the references too, gets the one the
    preset says now. True where it changed (`nas train` then trains its trials again)."""
    import optuna

    from nas.search.records import StudyAttr

    found = optuna.load_study(study_name=name, storage=f"sqlite:///{database}")
    document = found.user_attrs.get(StudyAttr.SPACE_DOCUMENT)
    if document is None or document.get("final") == final:
        return False
    found.set_user_attr(StudyAttr.SPACE_DOCUMENT, document | {"final": final})
    return True
