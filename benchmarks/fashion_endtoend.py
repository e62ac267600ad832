"""Issue 47's end-to-end comparison on Fashion-MNIST: the supernet strategy against the `trials`
strategy, each with the same 1-hour budget, by the hypervolume of its front over wall time.

    python -m benchmarks.fashion_endtoend measure    # every final-trained network, together
    python -m benchmarks.fashion_endtoend compare    # curves, times to reach, final figures

Two figures per study, both with benchmarks/scoring.py's hypervolume (accuracy, log10 images/s
above 1,000):

- the curve: at each minute of the study's clock (its search piece's start: the supernet's
  training is inside it), the hypervolume of the trials finished so far, by the accuracy the
  search itself ranked with (2-epoch validation accuracy for `trials`, inherited accuracy for
  the supernet: what a user watching the search sees) and the throughput the search measured;
- the final figure: the hypervolume of the front's final-trained networks (`nas train`, the
  preset's recipe), by test accuracy and by throughput measured again for all of them together
  in one process (`measure`, as benchmarks/fashion.py does for its table).

`measure` times the keras.applications references and the 2-conv network in the same process,
so `compare` also says, per study, which references its final-trained front dominates
(round 1's rule: at least as accurate on the test set, one seed each, faster beyond both
throughput intervals).

"Time to reach" is the first minute at which a supernet study's curve reaches the final curve
value of the `trials` study of the same seed. The `trials` study of seed 0 is
benchmarks/fashion.py's; the others live in benchmarks/fashion-runs/supernet/supernet.db.

This is round 1's comparison (issue 47): it reads benchmarks/fashion-runs/ (benchmarks/
fashion_state.py's round 1), whichever round the pieces now run, and keeps round 1's rule, so
its committed figures stay what its commands give. Round 2's verdicts, with each accuracy's
noise, are benchmarks/fashion_report.py's.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchmarks import stamps
from benchmarks.fashion_references import REFERENCES, reference_score
from benchmarks.fashion_state import ROUNDS, SEARCH_SECONDS, STUDY, Front, final_trained, recipe_space, round_studies
from benchmarks.scoring import front_hypervolume

WORK = ROUNDS[1]
HERE = WORK / "supernet"
TRIALS_STUDY = STUDY
TRIALS_DATABASE = WORK / "fashion.db"
SUPERNET_DATABASE = HERE / "supernet.db"
HORIZON = SEARCH_SECONDS
STEP = 60
PLOT = Path(__file__).parent / "fashion_supernet_hv.png"


def study_names() -> list[Front]:
    """(label, study name, seed, database) of every study of round 1, `trials` seed 0 first."""
    return round_studies(WORK)


def clock_start(study: str, chunks: Iterable[dict[str, Any]], first_trial: dt.datetime) -> float:
    """The study's search piece's start, in UNIX seconds: recorded exactly from 2026-12-06 on
    (`started_unix`); before that, its end (to the minute) less its seconds, the minute's middle
    taken (within 30 s), and never after the study's first trial started."""
    for chunk in chunks:
        if chunk["piece"] in (study, "search"):
            if "started_unix" in chunk:
                return float(chunk["started_unix"])
            ended = dt.datetime.fromisoformat(chunk["ended"]).timestamp() + 30
            return min(ended - chunk["seconds"], first_trial.timestamp())  # Optuna's times: naive, local
    raise SystemExit(f"error: no search piece recorded for {study}")


def curve(finished: list[tuple[float, float, float]], horizon: int = HORIZON, step: int = STEP) -> list[float]:
    """Hypervolume at each `step` seconds up to `horizon` of the (seconds into the clock,
    accuracy, images/s) trials finished by then."""
    return [
        round(front_hypervolume([(a, t) for at, a, t in finished if at <= moment]), 5)
        for moment in range(0, horizon + step, step)
    ]


def time_to_reach(values: list[float], target: float, step: int = STEP) -> int | None:
    """The first moment (seconds) at which `values` (one per `step`) reach `target`, if ever."""
    return next((i * step for i, v in enumerate(values) if v >= target), None)


def dominated_by(reference: dict[str, Any], front: list[dict[str, Any]]) -> list[str]:
    """Round 1's rule: the nas networks at least as accurate on the test set as `reference` (one
    seed each) and faster beyond both throughput intervals (their low end above its high end)."""
    return [
        r["name"] for r in front if r["test_accuracy"] >= reference["test_accuracy"] and r["low"] > reference["high"]
    ]


def versus_references(front: list[dict[str, Any]], measured: dict[str, Any]) -> dict[str, list[str]]:
    """The references (measured with the front, their test accuracy from benchmarks/fashion.py's
    runs of round 1) the front dominates, and those it does not, by round 1's rule."""
    references = [
        {"name": name, **reference_score(json.loads(path.read_text())), **measured[name]}
        for name in REFERENCES
        if name in measured and (path := WORK / "references" / f"{name}.json").is_file()
    ]
    beaten = [r["name"] for r in references if dominated_by(r, front)]
    return {"dominates": beaten, "not_dominated": [r["name"] for r in references if r["name"] not in beaten]}


def _progress(database: Path) -> list[dict[str, Any]]:
    path = (HERE if database == SUPERNET_DATABASE else WORK) / "progress.json"
    return json.loads(path.read_text())["chunks"] if path.is_file() else []


def measure() -> None:
    """Every final-trained network of every study and every reference, measured together
    (benchmarks/fashion.py's protocol, the same conditions for all, whichever machine trained
    them)."""
    import keras
    import optuna

    from nas.search import runtime

    runtime.set_debug(False)
    runtime.import_tensorflow()
    from benchmarks.fashion_report import measure_together_now
    from nas.search.engine.stored import rebuild, study_space

    models = []
    for label, name, _, database in study_names():
        found = optuna.load_study(study_name=name, storage=f"sqlite:///{database}")
        space = study_space(found)  # round 1's, not the preset's today
        by_number = {t.number: t for t in found.trials}
        for number in sorted(final_trained(found), key=int):
            params = by_number[int(number)].params
            models.append((f"{label} trial {number}", rebuild(space, params, 10, 1, float32=True)))
    if not models:
        raise SystemExit("error: no study has final-trained networks yet (run the train pieces)")
    for reference, (build, _) in REFERENCES.items():
        keras.utils.set_random_seed(0)
        models.append((reference, build()))
    result = {"command": "python -m benchmarks.fashion_endtoend measure"} | measure_together_now(models, recipe_space())
    HERE.mkdir(parents=True, exist_ok=True)
    (HERE / "throughput.json").write_text(json.dumps(result, indent=2) + "\n")


def compare() -> dict[str, Any]:
    import optuna

    measured_path = HERE / "throughput.json"
    measured = json.loads(measured_path.read_text())["networks"] if measured_path.is_file() else {}
    studies: dict[str, Any] = {}
    for label, name, seed, database in study_names():
        found = optuna.load_study(study_name=name, storage=f"sqlite:///{database}")
        done = [t for t in found.trials if t.state == optuna.trial.TrialState.COMPLETE and t.values]
        if not done:
            continue
        start = clock_start(name, _progress(database), min(t.datetime_start for t in done))
        finished = [(t.datetime_complete.timestamp() - start, t.values[0], t.values[1]) for t in done]
        final = final_trained(found)
        points = [
            (f.test_accuracy, measured.get(f"{label} trial {n}", {}).get("images_per_s", f.throughput))
            for n, f in final.items()
        ]
        studies[label] = {
            "study": name,
            "seed": seed,
            "trials": len(done),
            "curve": curve(finished),
            "final_trained": sorted(final, key=int),
            "final_hypervolume": round(front_hypervolume(points), 5) if points else None,
            "final_throughput": "measured together"
            if all(f"{label} trial {n}" in measured for n in final)
            else "as `nas train` measured each",
        }
        front = [
            {
                "name": f"{label} trial {n}",
                "test_accuracy": f.test_accuracy,
                **measured.get(f"{label} trial {n}", {}),
            }
            for n, f in final.items()
        ]
        if front and all("low" in r for r in front):
            studies[label]["references"] = versus_references(front, measured)
    for label, figures in studies.items():
        if label.startswith("supernet"):
            rival = studies.get(f"trials s{figures['seed']}")
            if rival:
                target = rival["curve"][-1]
                figures["reaches_trials_final_curve_at"] = time_to_reach(figures["curve"], target)
    result = {
        "command": "python -m benchmarks.fashion_endtoend compare",
        "commit": stamps.commit(),
        "date": stamps.now(),
        "step_seconds": STEP,
        "studies": studies,
    }
    HERE.mkdir(parents=True, exist_ok=True)
    (HERE / "endtoend.json").write_text(json.dumps(result, indent=1) + "\n")
    plot(studies, PLOT)
    for label, figures in studies.items():
        reach = figures.get("reaches_trials_final_curve_at")
        print(
            f"{label}: {figures['trials']} trials, curve at 20/40/60 min "
            f"{figures['curve'][20]:.4f}/{figures['curve'][40]:.4f}/{figures['curve'][60]:.4f}, "
            f"final-trained {figures['final_hypervolume']}"
            + (f", reaches the trials curve's end at {reach} s" if reach is not None else "")
        )
        if "references" in figures:
            verdict = figures["references"]
            standing = ", ".join(verdict["not_dominated"]) or "none"
            print(f"  dominates {len(verdict['dominates'])} references; not: {standing}")
    return result


def plot(studies: dict[str, Any], path: Path) -> None:
    """One panel per seed: each study's curve over its clock, and its final-trained front's
    hypervolume (test accuracy, throughput) as a mark at the hour's end."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seeds = sorted({figures["seed"] for figures in studies.values()})
    fig, axes = plt.subplots(1, len(seeds), figsize=(5.5 * len(seeds), 4), squeeze=False, sharey=True)
    for axis, seed in zip(axes[0], seeds, strict=True):
        for label, figures in studies.items():
            if figures["seed"] != seed:
                continue
            color = "C0" if label.startswith("trials") else "C1"
            minutes = [i * STEP / 60 for i in range(len(figures["curve"]))]
            axis.step(minutes, figures["curve"], where="post", color=color, label=f"{label}, as searched")
            if figures["final_hypervolume"] is not None:
                axis.plot(
                    [HORIZON / 60],
                    [figures["final_hypervolume"]],
                    marker="*",
                    markersize=12,
                    color=color,
                    linestyle="",
                    label=f"{label}, final-trained (test)",
                )
        axis.set(title=f"seed {seed}", xlabel="minutes into the study's hour")
        axis.legend(fontsize=7, loc="lower right")
    axes[0][0].set(ylabel="hypervolume (accuracy, log10 images/s)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("piece", choices=["measure", "compare"])
    args = parser.parse_args()
    measure() if args.piece == "measure" else compare()


if __name__ == "__main__":
    main()
