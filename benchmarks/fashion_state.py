"""Where benchmarks/fashion.py keeps what it has done (benchmarks/fashion-runs/, committed: the
study, the references' figures, the throughput, the pieces that ran) and the readers its
pieces share."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import stamps

if TYPE_CHECKING:
    from nas.search.records import FinalFigures

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORK = HERE / "fashion-runs"  # committed: the study, the references' figures, the throughput
RUNS = REPO / "runs" / "fashion"  # not committed: the search's per-trial weights
STUDY = "fashion_mnist"
SPACE = "fashion_mnist"  # the preset
DATABASE = WORK / "fashion.db"
SUPERNET_DATABASE = WORK / "supernet" / "supernet.db"  # benchmarks/fashion_supernet.py's studies
SUPERNET_STUDY = "fashion_supernet_s0"  # the supernet front beside the `trials` one in the table
SEARCH_SECONDS = 3600


def progress() -> dict[str, Any]:
    path = WORK / "progress.json"
    return json.loads(path.read_text()) if path.is_file() else {"search_seconds": 0.0, "chunks": []}


def save_progress(state: dict[str, Any]) -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "progress.json").write_text(json.dumps(state, indent=2) + "\n")


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
    """One piece that ran: what, how long, its exit status, and the stamps RESULTS.md names
    (the commit checked out when it started: the code it ran)."""
    return {
        "piece": piece,
        "seconds": round(seconds, 1),
        "exit": code,
        "commit": commit,
        "machine": stamps.machine(),
        "ended": stamps.now(),
    }


def study() -> Any:
    import optuna

    return optuna.load_study(study_name=STUDY, storage=f"sqlite:///{DATABASE}")


def supernet_study() -> Any | None:
    """The supernet study of the table's seed, if benchmarks/fashion_supernet.py searched it."""
    import optuna

    if not SUPERNET_DATABASE.is_file():
        return None
    storage = f"sqlite:///{SUPERNET_DATABASE}"
    names = {s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}
    return optuna.load_study(study_name=SUPERNET_STUDY, storage=storage) if SUPERNET_STUDY in names else None


def final_trained(found: Any) -> dict[str, FinalFigures]:
    """`nas train`'s figures by trial number."""
    from nas.search.engine.front import final_figures

    return final_figures(found)


def recipe_space() -> Any:
    """The preset: its final recipe is every network's."""
    from nas.search.space import load_space

    return load_space(SPACE)
