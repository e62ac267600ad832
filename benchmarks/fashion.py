"""Fashion-MNIST end to end: nas' `trials` strategy on spaces/fashion_mnist.yaml with a 1-hour
search budget, its front trained again with the preset's `final:` recipe (`nas train`), against
keras.applications references, the data set's published "2 Conv + pooling + BatchNorm" network
and ResNet-20, trained with exactly that recipe. Every test accuracy is read once, after
training; every throughput is measured by nas' protocol, all networks together in one process.

Each piece resumes after a kill and stops within its --minutes; its results go under the
round's folder (benchmarks/fashion_state.py: round 2 in benchmarks/fashion-runs-2/; round 1's
benchmarks/fashion-runs/ stays as it was), committed as each piece ends: the study database,
one JSON per reference, the throughput of all, progress.json with every piece's machine and
time. benchmarks/fashion_supernet.py searches and trains the round's other fronts (the supernet
strategy, seed 1). Then `report` writes the table, the plot and report.json there:

    python -m benchmarks.fashion search [--minutes 60]      # nas search, for what is left of its hour
    python -m benchmarks.fashion train [--seeds K] [--networks N | --trials 3,7] [--minutes 55]
    python -m benchmarks.fashion reference NAME [--seeds K] [--minutes 55]   # NAME from `references`, or `all`
    python -m benchmarks.fashion measure                    # every network's throughput, together, last
    python -m benchmarks.fashion report                     # table, plot, dominance, goals
    python -m benchmarks.fashion status                     # what is done and what is left

`train` runs `nas train --seeds K` on N members spread along the front (both ends in) or on the
trials named; `status` and `report` name the networks whose verdict rests on an accuracy margin
under a point, which get 3 seeds (benchmarks/fashion_verdicts.py), and the pieces that give them.

The references see the images resized to 32x32 (keras.applications refuses smaller inputs);
the 2-conv network, ResNet-20 and nas' networks see them at 28x28. keras.applications'
BatchNormalization keeps moving statistics with momentum 0.999; a reference's test accuracy is
scored after they are estimated again on 2,048 training images (as a subnet's are), and the
figure with the moving statistics is kept beside it.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import stamps
from benchmarks.fashion_references import REFERENCES, reference
from benchmarks.fashion_report import measure, report, status
from benchmarks.fashion_state import (
    DATABASE,
    NETWORKS,
    REPO,
    RUNS,
    SEARCH_SECONDS,
    SPACE,
    STUDY,
    WORK,
    chunk,
    front_of,
    logged,
    progress,
    recipe_space,
    save_progress,
    spread_front,
    study,
    sync_final,
)


def run_nas(args: list[str], seconds: float, artifacts: Path = RUNS / "artifacts", database: Path = DATABASE) -> int:
    """`nas ARGS` in its own process, stopped (SIGINT, then SIGKILL) when `seconds` run out:
    nas' own resume picks up from there. Returns its exit status (130 or -9 when stopped)."""
    database.parent.mkdir(parents=True, exist_ok=True)
    env = os.environ | {"NAS_STORAGE": f"sqlite:///{database}", "NAS_ARTIFACTS": str(artifacts)}
    # SIGINT back to its default in the child: a piece started in the background by a shell
    # without job control (`nohup ... &` in a script) inherits SIGINT ignored, Python then
    # installs no KeyboardInterrupt handler, and the stop below was ignored: seen as `nas
    # train` killed 60 s later, mid-epoch (issue 47's supernet s0 training, piece 3).
    process = subprocess.Popen([sys.executable, "-m", "nas", *args], cwd=REPO, env=env, preexec_fn=_default_sigint)
    try:
        return process.wait(timeout=max(1.0, seconds))
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)  # a search finishes its running trial; a training stops
        try:
            # A search's last trial may take minutes; `nas train` stops within a training step,
            # and its checkpoints make a kill safe anyway (atomic writes, resumed at the epoch).
            return process.wait(timeout=600 if args[0] == "search" else 60)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def search(minutes: float, command: str) -> None:
    """The search's hour, spent across as many pieces as it takes: each runs `nas search` with
    what is left of the hour as --timeout (the study resumes; a running trial at the end is
    finished, as nas does)."""
    state = progress()
    left = SEARCH_SECONDS - state["search_seconds"]
    if left <= 0:
        print(f"search: its {SEARCH_SECONDS} s are spent")
        return
    seconds = min(left, minutes * 60)
    started, code_of = time.monotonic(), stamps.commit()
    code = run_nas(
        ["search", SPACE, "--study", STUDY, "--trials", "1000", "--timeout", f"{seconds:.0f}"], seconds + 900
    )
    spent = time.monotonic() - started
    state["search_seconds"] += min(spent, seconds)
    state["chunks"].append(chunk("search", spent, code, code_of))
    save_progress(logged(state, command, code_of))


def front_members(networks: int) -> list[int]:
    """`networks` members of the study's Pareto front by its medians (Optuna's best trials:
    what `nas pareto` marks on the front), spread along it, most accurate first, both ends in: a
    reference is dominated only by a final-trained network at least as fast, so the front's
    fast end is trained too."""
    return spread_front(front_of(study()), networks)


def train(
    minutes: float, command: str, seeds: int = 1, networks: int = NETWORKS, trials: list[int] | None = None
) -> None:
    """`nas train --seeds SEEDS` on the front's spread members (or the trials named), with the
    preset's final recipe as it is now (copied into the study first: `sync_final`), stopped
    after `minutes`. Its checkpoints are kept in the round's folder and committed with the
    piece, so a training cut by the piece's end resumes in the next session at its last epoch;
    seeds already final-trained with the recipe are kept as they are."""
    started, code_of = time.monotonic(), stamps.commit()
    members = ",".join(map(str, trials or front_members(networks)))
    if sync_final(DATABASE, STUDY, recipe_space().document["final"]):
        print("the preset's final recipe changed since the search: copied into the study")
    code = run_nas(["train", STUDY, "--trials", members, "--seeds", str(seeds)], minutes * 60, WORK / "artifacts")
    state = progress()
    state["chunks"].append(chunk("train", time.monotonic() - started, code, code_of))
    save_progress(logged(state, command, code_of))


def trial_list(text: str) -> list[int]:
    """--trials: `3,7` -> [3, 7]."""
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of trial numbers such as 3,7") from None


def command_line(args: argparse.Namespace) -> str:
    """The piece's command as progress.json and a reference's JSON record it, the defaults
    left out."""
    return (
        f"python -m benchmarks.fashion {args.piece}"
        + (f" {args.name}" if args.name else "")
        + (f" --seeds {args.seeds}" if args.seeds != 1 else "")
        + (f" --networks {args.networks}" if args.networks != NETWORKS else "")
        + (f" --trials {','.join(map(str, args.trials))}" if args.trials else "")
        + (f" --minutes {args.minutes:g}" if args.minutes != 55 else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("piece", choices=["search", "train", "reference", "measure", "report", "status"])
    parser.add_argument("name", nargs="?", choices=[*REFERENCES, "all"], help="reference: one of them, or all")
    parser.add_argument("--minutes", type=float, default=55.0, help="stop this piece after so long (it resumes)")
    parser.add_argument("--seeds", type=int, default=1, help="train, reference: seeds 0..K-1 of each network")
    parser.add_argument("--networks", type=int, default=NETWORKS, help="train: front members, spread along it")
    parser.add_argument("--trials", type=trial_list, help="train: these trials instead (e.g. 3,7)")
    args = parser.parse_args()
    if args.seeds < 1 or args.networks < 2:
        parser.error("--seeds must be 1 or more, --networks 2 or more (both ends of the front)")
    command = command_line(args)
    if args.piece == "search":
        search(args.minutes, command)
    elif args.piece == "train":
        train(args.minutes, command, args.seeds, args.networks, args.trials)
    elif args.piece == "reference":
        names = list(REFERENCES) if args.name in (None, "all") else [args.name]
        deadline = time.monotonic() + args.minutes * 60
        for name in names:
            left = (deadline - time.monotonic()) / 60
            if left <= 1:
                break
            started, code_of = time.monotonic(), stamps.commit()
            said = reference(name, args.seeds, left, command)
            if said != "done":  # it trained: the piece's machine and time in the log
                state = progress()
                took = time.monotonic() - started
                state["chunks"].append(chunk(f"reference {name}", took, 0 if said == "trained" else 130, code_of))
                save_progress(logged(state, command, code_of))
            if said == "stopped":
                break
    elif args.piece == "measure":
        measure()
    elif args.piece == "report":
        report()
    else:
        status()


if __name__ == "__main__":
    main()
