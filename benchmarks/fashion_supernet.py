"""The supernet strategy on Fashion-MNIST (issue 47): how well its inherited accuracies rank
subnets, and what it reaches end to end against the `trials` strategy, on the preset
spaces/fashion_mnist.yaml with the same 1-hour budget as benchmarks/fashion.py; in round 2
(issue 62) the second front of the proof's table, on the preset whose block types the supernet
holds as candidate paths.

The supernet study's space is the preset with `search.strategy: supernet`, `epochs: auto`
(half of the hour, measured when the training starts: the training is inside the clock), no
fine-tuning after the search (`nas train` starts the front from its inherited weights with the
preset's final recipe instead) and a trial budget the hour bounds. It is written to the round's
supernet/space.yaml (benchmarks/fashion_state.py: round 2 in benchmarks/fashion-runs-2/) when
its search first runs, so the figures name the exact file; a `train` piece copies the preset's
final recipe as it is then into it and into the study. Every piece resumes after a kill, stops
within its --minutes, and keeps its results in that folder (committed as each piece ends):

    python -m benchmarks.fashion_supernet search SEED [--minutes 64]   # the supernet search's hour
    python -m benchmarks.fashion_supernet trials SEED [--minutes 64]   # the trials strategy, another seed
    python -m benchmarks.fashion_supernet train STUDY [--seeds K] [--networks N | --trials 3,7] [--minutes 55]
    python -m benchmarks.fashion_supernet standalone [--minutes 55]    # 40 subnets x 2 seeds from scratch
    python -m benchmarks.fashion_supernet ranking [--minutes 55]       # inherited and fine-tuned vs stand-alone
    python -m benchmarks.fashion_supernet status

`trials` seed 0 is benchmarks/fashion.py's study (its database); other seeds run here. `train`
runs `nas train --seeds K` on N members spread along a study's front (both ends in) or on the
trials named.
`standalone` trains 40 subnets spread evenly over the space's FLOPs (drawn once, stored) with
the preset's training settings at the knobs the supernet trains with, two seeds each: the seeds'
agreement is the ceiling of any ranking. `ranking` takes those subnets out of the seed-0
supernet (BatchNorm re-estimated as a trial's is) and scores them on the validation set, then
fine-tunes each `--finetune-epochs` epochs (0: none) and scores it again, and ranks both against
the stand-alone mean over the subnets each figure exists for.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

import yaml

from benchmarks import stamps
from benchmarks.fashion import run_nas, trial_list
from benchmarks.fashion_state import (
    NETWORKS,
    REPO,
    SEARCH_SECONDS,
    chunk,
    front_of,
    logged,
    recipe_space,
    spread_front,
    sync_final,
)
from benchmarks.fashion_state import SUPERNET as HERE
from benchmarks.fashion_state import SUPERNET_DATABASE as DATABASE

SPACE_FILE = HERE / "space.yaml"
SUBNETS = 40
SEEDS = 2


def _load(name: str, empty: dict[str, Any]) -> dict[str, Any]:
    path = HERE / name
    return json.loads(path.read_text()) if path.is_file() else empty


def _save(name: str, document: dict[str, Any]) -> None:
    HERE.mkdir(parents=True, exist_ok=True)
    tmp = HERE / f"{name}.tmp"
    tmp.write_text(json.dumps(document, indent=1) + "\n")
    os.replace(tmp, HERE / name)  # a kill mid-write keeps the previous file whole


def space_document() -> dict[str, Any]:
    """The supernet study's space: the round's file where its search wrote it (the record), else
    the preset with the supernet strategy."""
    if SPACE_FILE.is_file():
        document: dict[str, Any] = yaml.safe_load(SPACE_FILE.read_text())
        return document
    document = yaml.safe_load((REPO / "spaces" / "fashion_mnist.yaml").read_text())
    document["name"] = "fashion_supernet"
    document["search"] |= {
        "strategy": "supernet",
        "trials": 100_000,  # the hour bounds it
        "supernet": {"epochs": "auto", "budget_share": 0.5, "finetune": {"epochs": 0}},
    }
    return document


def _write_space(document: dict[str, Any]) -> None:
    HERE.mkdir(parents=True, exist_ok=True)
    SPACE_FILE.write_text(yaml.safe_dump(document, sort_keys=False))


def _search(kind: str, seed: int, minutes: float, command: str) -> None:
    """One piece of a study's hour: `nas search` with what is left of it as --timeout (the
    supernet's training inside it), killed after `minutes` (the study resumes next piece)."""
    name = f"fashion_{kind}_s{seed}"
    progress = _load("progress.json", {"searches": {}, "chunks": []})
    spent = progress["searches"].get(name, 0.0)
    left = SEARCH_SECONDS - spent
    if left <= 0:
        print(f"{name}: its {SEARCH_SECONDS} s are spent")
        return
    space = str(SPACE_FILE) if kind == "supernet" else "fashion_mnist"
    if kind == "supernet" and not SPACE_FILE.is_file():
        _write_space(space_document())
    # The search's own --timeout ends the hour; the piece stops it only when its minutes end
    # first. Killed at the hour too, seed 0's search was stopped before its after-search steps.
    seconds = minutes * 60
    started, commit, at, began = time.monotonic(), stamps.commit(), stamps.now(), time.time()
    args = ["search", space, "--study", name, "--seed", str(seed), "--trials", "100000", "--timeout", f"{left:.0f}"]
    code = run_nas(args, seconds, HERE / "artifacts", database=DATABASE)
    took = time.monotonic() - started
    progress["searches"][name] = spent + min(took, left)
    progress["chunks"].append(chunk(name, took, code, commit) | {"started": at, "started_unix": round(began, 1)})
    _save("progress.json", logged(progress, command, commit))


def train(
    study: str, minutes: float, command: str, seeds: int = 1, networks: int = NETWORKS, trials: list[int] | None = None
) -> None:
    """`nas train --seeds SEEDS` on `networks` members of a study's front spread along it (its
    fastest and its most accurate among them), or on the trials named, with the preset's final
    recipe as it is now: copied first into the study (`sync_final`) and into its space file (the
    record), so every front gets the references' recipe."""
    import optuna

    found = optuna.load_study(study_name=study, storage=f"sqlite:///{DATABASE}")
    members = ",".join(map(str, trials or spread_front(front_of(found), networks)))
    final = recipe_space().document["final"]
    if sync_final(DATABASE, study, final):
        print(f"the preset's final recipe changed since {study} searched: copied into the study")
    document = space_document()
    if study.startswith("fashion_supernet") and SPACE_FILE.is_file() and document.get("final") != final:
        _write_space(document | {"final": final})
    started, commit = time.monotonic(), stamps.commit()
    args = ["train", study, "--trials", members, "--seeds", str(seeds)]
    code = run_nas(args, minutes * 60, HERE / "artifacts", database=DATABASE)
    progress = _load("progress.json", {"searches": {}, "chunks": []})
    progress["chunks"].append(chunk(f"train {study}", time.monotonic() - started, code, commit))
    _save("progress.json", logged(progress, command, commit))


def _setup() -> tuple[Any, Any, Any]:
    """(the supernet study's space, its elastic view, the data)."""
    from nas.search.data import load_dataset
    from nas.search.runtime import import_tensorflow, set_debug
    from nas.search.space import space_from_dict
    from nas.search.strategies.supernet.elastic import elastic_space

    set_debug(False)
    import_tensorflow()
    space = space_from_dict(space_document(), str(SPACE_FILE))
    return space, elastic_space(space), load_dataset(space.spec.dataset)


def spread_subnets(elastic: Any, count: int) -> list[dict[str, Any]]:
    """`count` subnets evenly spread over the FLOPs of 4,000 drawn uniformly (seed 0)."""
    import numpy as np

    from nas.search.nets import plan_network

    rng = np.random.default_rng(0)
    drawn = [elastic.random_params(rng) for _ in range(4000)]
    flops = [plan_network(elastic.space.candidate(p, num_classes=10, channels=1)).flops() for p in drawn]
    order = sorted(range(len(drawn)), key=lambda i: flops[i])
    picked = [order[int((k + 0.5) * len(order) / count)] for k in range(count)]
    return [drawn[i] | {"flops": flops[i]} for i in picked]


def standalone(minutes: float, command: str) -> None:
    """The subnets trained from scratch with the preset's training settings, each stored as it ends."""
    import keras

    from nas.search.nets import build_plan, plan_network
    from nas.search.training import train_and_evaluate

    deadline = time.monotonic() + minutes * 60
    _, elastic, data = _setup()
    document = _load("standalone.json", {})
    if not document:
        document = {"subnets": spread_subnets(elastic, SUBNETS), "runs": [], "fixed": elastic.fixed}
    document |= {"command": command, "commit": stamps.commit(), "machine": stamps.machine()}
    done = {(r["subnet"], r["seed"]) for r in document["runs"]}
    todo = [(i, s) for s in range(SEEDS) for i in range(len(document["subnets"])) if (i, s) not in done]
    print(f"{len(todo)} trainings to run ({len(done)} done)", flush=True)
    for index, seed in todo:
        if time.monotonic() > deadline:
            break
        started = time.perf_counter()
        params = {k: v for k, v in document["subnets"][index].items() if k != "flops"}
        candidate = elastic.space.candidate(params, num_classes=data.num_classes, channels=data.channels)
        keras.utils.set_random_seed(seed)
        result = train_and_evaluate(build_plan(plan_network(candidate)), candidate, data, seed=seed)
        keras.backend.clear_session(free_memory=True)
        took = time.perf_counter() - started
        run = {"subnet": index, "seed": seed, "accuracy": round(result.accuracy, 4), "seconds": round(took, 1)}
        document["runs"].append(run | {"commit": stamps.commit(), "ended": stamps.now()})
        _save("standalone.json", document)
        print(f"subnet {index} seed {seed}: {result.accuracy:.4f} ({took:.0f} s)", flush=True)


def ranking(minutes: float, finetune_epochs: int, command: str) -> None:
    """Inherited and fine-tuned accuracy of the stand-alone subnets, out of the seed-0 supernet."""
    import dataclasses

    import keras

    from nas.search.strategies.supernet.evaluation import calibration_batches, evaluate
    from nas.search.strategies.supernet.extract import extract, recalibrate
    from nas.search.strategies.supernet.finetune import finetune_rate, finetune_subnet
    from nas.search.strategies.supernet.network import Supernet
    from nas.search.strategies.supernet.train import load_checkpoint

    deadline = time.monotonic() + minutes * 60
    space, elastic, data = _setup()
    subnets = _load("standalone.json", {}).get("subnets")
    if not subnets:
        raise SystemExit("error: run the standalone piece first (it draws the subnets)")
    checkpoint = HERE / "artifacts" / "fashion_supernet_s0" / "supernet.npz"
    largest = elastic.space.candidate(elastic.largest, num_classes=data.num_classes, channels=data.channels)
    supernet = Supernet(largest, seed=0)
    held = load_checkpoint(checkpoint, supernet)
    settings = space.spec.search.supernet
    batches = calibration_batches(data, largest.batch_size, settings.calibration_batches)
    document = _load("ranking.json", {"subnets": {}})
    document |= {
        "command": command,
        "commit": stamps.commit(),
        "supernet_epochs": held.done,
        "finetune_epochs": finetune_epochs,
        "machine": stamps.machine(),
    }
    # Inherited accuracy first for every subnet (seconds each), fine-tuning after (a minute or
    # more each): a piece cut short still decides the inherited ranking.
    for tune in (False, True) if finetune_epochs else (False,):
        for index, params in enumerate(subnets):
            row = document["subnets"].setdefault(str(index), {})
            if time.monotonic() > deadline or ("finetuned" if tune else "inherited") in row:
                continue
            params = {k: v for k, v in params.items() if k != "flops"}
            candidate = elastic.space.candidate(params, num_classes=data.num_classes, channels=data.channels)
            started = time.perf_counter()
            if tune:
                rate = finetune_rate(candidate.learning_rate, settings.finetune.learning_rate)
                tuned = dataclasses.replace(candidate, epochs=finetune_epochs, learning_rate=rate)
                _, result = finetune_subnet(supernet, tuned, batches, data, seed=0)
                row |= {
                    "finetuned": round(result.accuracy, 4),
                    "finetune_seconds": round(time.perf_counter() - started, 1),
                }
            else:
                model = extract(supernet, candidate)
                recalibrate(model, batches)
                row |= {
                    "inherited": round(evaluate(model, data)[1], 4),
                    "seconds": round(time.perf_counter() - started, 1),
                }
            keras.backend.clear_session(free_memory=True)
            row["finetune_commit" if tune else "commit"] = stamps.commit()
            _save("ranking.json", document)
            print(f"subnet {index}: {row}", flush=True)
    correlations(command)


def correlations(command: str) -> dict[str, Any]:
    """Kendall tau and Spearman of each ranking against the stand-alone mean, and the seeds'
    agreement with each other (the ceiling), over the subnets every figure exists for; stamped
    with the command of the ranking piece that worked them out and this checkout's commit."""
    from benchmarks.table import rank_correlations

    runs = _load("standalone.json", {}).get("runs", [])
    scored = _load("ranking.json", {"subnets": {}})["subnets"]
    by_seed: dict[int, dict[int, float]] = {}
    for run in runs:
        by_seed.setdefault(run["seed"], {})[run["subnet"]] = run["accuracy"]
    both = sorted(set.intersection(*(set(v) for v in by_seed.values())) if len(by_seed) == SEEDS else set())
    out: dict[str, Any] = {"command": command, "commit": stamps.commit(), "subnets_with_both_seeds": len(both)}
    if len(both) >= 3:
        out["seeds_against_each_other"] = rank_correlations(
            [by_seed[0][i] for i in both], [by_seed[1][i] for i in both]
        )
        mean = {i: statistics.fmean(by_seed[s][i] for s in by_seed) for i in both}
        for figure in ("inherited", "finetuned"):
            ranked = [i for i in both if figure in scored.get(str(i), {})]
            out[f"{figure}_subnets"] = len(ranked)
            if len(ranked) >= 3:
                truth = [mean[i] for i in ranked]
                out[figure] = rank_correlations([scored[str(i)][figure] for i in ranked], truth)
                if figure == "finetuned" and len(ranked) < out["inherited_subnets"]:
                    # The same subnets for both, where fine-tuning has not reached them all.
                    inherited = [scored[str(i)]["inherited"] for i in ranked]
                    out["inherited_where_finetuned"] = rank_correlations(inherited, truth)
        subnets = _load("standalone.json", {}).get("subnets", [])
        if subnets:  # the proxy with no training at all: a bigger network is a better one
            out["flops"] = rank_correlations([subnets[i]["flops"] for i in both], [mean[i] for i in both])
    _save("correlations.json", out)
    print(json.dumps(out, indent=1))
    return out


def status() -> None:
    progress = _load("progress.json", {"searches": {}, "chunks": []})
    for name, spent in sorted(progress["searches"].items()):
        print(f"{name}: {spent:.0f} of {SEARCH_SECONDS} s")
    document = _load("standalone.json", {})
    print(f"standalone: {len(document.get('runs', []))} of {SUBNETS * SEEDS} trainings")
    rows = _load("ranking.json", {"subnets": {}})["subnets"].values()
    for figure in ("inherited", "finetuned"):
        print(f"ranking, {figure}: {sum(figure in row for row in rows)} of {SUBNETS} subnets")


def command_line(args: argparse.Namespace) -> str:
    """The piece's command as the JSON it writes records it, the defaults left out."""
    return (
        f"python -m benchmarks.fashion_supernet {args.piece}"
        + (f" {args.what}" if args.what else "")
        + (f" --seeds {args.seeds}" if args.seeds != 1 else "")
        + (f" --networks {args.networks}" if args.networks != NETWORKS else "")
        + (f" --trials {','.join(map(str, args.trials))}" if args.trials else "")
        + (f" --minutes {args.minutes:g}" if args.minutes != 55 else "")
        + (f" --finetune-epochs {args.finetune_epochs}" if args.finetune_epochs != 1 else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("piece", choices=["search", "trials", "train", "standalone", "ranking", "status"])
    parser.add_argument("what", nargs="?", help="search/trials: the seed; train: the study")
    parser.add_argument("--minutes", type=float, default=55.0, help="stop this piece after so long (it resumes)")
    parser.add_argument("--seeds", type=int, default=1, help="train: seeds 0..K-1 of each network")
    parser.add_argument("--networks", type=int, default=NETWORKS, help="train: front members, spread along it")
    parser.add_argument("--trials", type=trial_list, help="train: these trials instead (e.g. 3,7)")
    parser.add_argument("--finetune-epochs", type=int, default=1, help="ranking: fine-tuning epochs per subnet")
    args = parser.parse_args()
    if args.seeds < 1 or args.networks < 2:
        parser.error("--seeds must be 1 or more, --networks 2 or more (both ends of the front)")
    command = command_line(args)
    if args.piece in ("search", "trials"):
        seed = int(args.what or 0)
        if args.piece == "trials" and seed == 0:
            raise SystemExit("error: trials seed 0 is benchmarks/fashion.py's study")
        _search("supernet" if args.piece == "search" else "trials", seed, args.minutes, command)
    elif args.piece == "train":
        if not args.what:
            raise SystemExit("error: name the study (status lists them)")
        train(args.what, args.minutes, command, args.seeds, args.networks, args.trials)
    elif args.piece == "standalone":
        standalone(args.minutes, command)
    elif args.piece == "ranking":
        ranking(args.minutes, args.finetune_epochs, command)
    else:
        status()


if __name__ == "__main__":
    main()
