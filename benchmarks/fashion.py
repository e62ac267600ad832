"""Fashion-MNIST end to end: nas' `trials` strategy on spaces/fashion_mnist.yaml with a 1-hour
search budget, its front trained again with the preset's `final:` recipe (`nas train`), against
keras.applications references and the data set's published "2 Conv + pooling + BatchNorm"
network trained with exactly that recipe. Every test accuracy is read once, after training;
every throughput is measured by nas' protocol, all networks together in one process.

Each piece resumes after a kill and stops within its --minutes; its results go under
benchmarks/fashion-runs/ (committed as each piece ends: the study database, one JSON per
reference, the throughput of all), then `report` writes the table, the plot and
benchmarks/fashion.json:

    python -m benchmarks.fashion search [--minutes 60]      # nas search, for what is left of its hour
    python -m benchmarks.fashion train [--minutes 55]       # nas train: the front, a checkpoint per epoch
    python -m benchmarks.fashion reference NAME [--minutes 55]   # NAME from `references`, or `all`
    python -m benchmarks.fashion measure                    # every network's throughput, together
    python -m benchmarks.fashion report                     # table, plot, dominance
    python -m benchmarks.fashion status                     # what is done and what is left

The references see the images resized to 32x32 (keras.applications refuses smaller inputs);
the 2-conv network and nas' networks see them at 28x28. keras.applications' BatchNormalization
keeps moving statistics with momentum 0.999; a reference's test accuracy is scored after they
are estimated again on 2,048 training images (as a subnet's are), and the figure with the
moving statistics is kept beside it.
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
from benchmarks.fashion_report import measure, report
from benchmarks.fashion_state import (
    DATABASE,
    REPO,
    RUNS,
    SEARCH_SECONDS,
    SPACE,
    STUDY,
    WORK,
    chunk,
    final_trained,
    logged,
    progress,
    save_progress,
    study,
)


def run_nas(args: list[str], seconds: float, artifacts: Path = RUNS / "artifacts", database: Path = DATABASE) -> int:
    """`nas ARGS` in its own process, stopped (SIGINT, then SIGKILL) when `seconds` run out:
    nas' own resume picks up from there. Returns its exit status (130 or -9 when stopped)."""
    WORK.mkdir(parents=True, exist_ok=True)
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


def front_members() -> list[int]:
    """The study's Pareto front by its medians (Optuna's best trials: what `nas pareto` marks
    on the front), fastest last. All of them are final-trained, not only the preset's
    `final.trials` most accurate: a reference is dominated only by a final-trained network at
    least as fast, so the front's fast end must be trained too."""
    found = study()
    return [t.number for t in sorted(found.best_trials, key=lambda t: (-t.values[0], t.number))]


def train(minutes: float, command: str) -> None:
    """`nas train` on the study's front (the preset's final recipe), stopped after `minutes`.
    Its checkpoints are kept under benchmarks/fashion-runs/ and committed with the piece, so a
    training cut by the piece's end resumes in the next session at its last epoch; trials
    already final-trained with the recipe are kept as they are."""
    started, code_of = time.monotonic(), stamps.commit()
    members = ",".join(map(str, front_members()))
    code = run_nas(["train", STUDY, "--trials", members], minutes * 60, WORK / "artifacts")
    state = progress()
    state["chunks"].append(chunk("train", time.monotonic() - started, code, code_of))
    save_progress(logged(state, command, code_of))


def status() -> None:
    state = progress()
    print(f"search: {state['search_seconds']:.0f} of {SEARCH_SECONDS} s")
    if DATABASE.is_file():
        final = final_trained(study())
        print(f"final-trained: {', '.join(sorted(final, key=int)) or 'none'}")
    for name in REFERENCES:
        print(f"reference {name}: {'done' if (WORK / 'references' / f'{name}.json').is_file() else 'to do'}")
    print(f"throughput: {'measured' if (WORK / 'throughput.json').is_file() else 'to do'}")


def command_line(args: argparse.Namespace) -> str:
    """The piece's command as progress.json and a reference's JSON record it, the default
    --minutes left out."""
    return (
        f"python -m benchmarks.fashion {args.piece}"
        + (f" {args.name}" if args.name else "")
        + (f" --minutes {args.minutes:g}" if args.minutes != 55 else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("piece", choices=["search", "train", "reference", "measure", "report", "status"])
    parser.add_argument("name", nargs="?", choices=[*REFERENCES, "all"], help="reference: one of them, or all")
    parser.add_argument("--minutes", type=float, default=55.0, help="stop this piece after so long (it resumes)")
    args = parser.parse_args()
    command = command_line(args)
    if args.piece == "search":
        search(args.minutes, command)
    elif args.piece == "train":
        train(args.minutes, command)
    elif args.piece == "reference":
        names = list(REFERENCES) if args.name in (None, "all") else [args.name]
        deadline = time.monotonic() + args.minutes * 60
        for name in names:
            left = (deadline - time.monotonic()) / 60
            if left <= 1:
                break
            reference(name, left, command)
    elif args.piece == "measure":
        measure()
    elif args.piece == "report":
        report()
    else:
        status()


if __name__ == "__main__":
    main()
