"""benchmarks/fashion.py's last pieces for the round it runs (benchmarks/fashion_state.py):
every network's throughput measured together by nas' protocol, then the table, the plot, which
references nas' fronts dominate and which of the issue's goals are met, all by the noise rule
(benchmarks/fashion_verdicts.py); and the status of the round: what is done, what is left.

The fronts are every study of the round: the `trials` study of seed 0 (benchmarks/fashion.py's
search) and benchmarks/fashion_supernet.py's (the supernet strategy, other seeds), each with the
networks `nas train` final-trained; a row's accuracy is the mean of its seeds."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from benchmarks import stamps
from benchmarks.fashion_references import PUBLISHED, PUBLISHED_SOURCE, REFERENCES, reference_score
from benchmarks.fashion_state import (
    DATABASE,
    NETWORKS,
    REPO,
    ROUND,
    SEARCH_SECONDS,
    STUDY,
    SUPERNET,
    WORK,
    Front,
    chunk,
    current,
    final_trained,
    front_of,
    load,
    logged,
    preset_recipe,
    progress,
    recipe_space,
    round_studies,
    save_progress,
    spread_front,
)
from benchmarks.fashion_verdicts import SEEDS, Row, goals, judge, summary, wanted_seeds

MEASURE = "python -m benchmarks.fashion measure"


def measure() -> None:
    """Every final-trained network of the round's fronts and every reference measured in one
    process by nas' protocol (hardware/timing.measure_together: round-robin, each round between
    two rounds of the fixed reference network, scaled by the device's baseline): the same
    conditions for all. Throughput does not depend on the weights, so the networks are built
    afresh, each from its own study's space."""
    from nas.search import runtime

    runtime.set_debug(False)
    runtime.import_tensorflow()
    import keras

    from nas.search.engine.stored import rebuild, study_space

    started, commit = time.monotonic(), stamps.commit()
    models: list[tuple[str, Any]] = []
    for front in round_studies(WORK):
        found = load(front)
        space = study_space(found)
        by_number = {t.number: t for t in found.trials}
        for number in sorted(final_trained(found), key=int):
            params = by_number[int(number)].params
            models.append((f"{front.label} trial {number}", rebuild(space, params, 10, 1, float32=True)))
    for name, (build, _) in REFERENCES.items():
        keras.utils.set_random_seed(0)
        models.append((name, build()))
    result = {"command": MEASURE} | measure_together_now(models, recipe_space())
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "throughput.json").write_text(json.dumps(result, indent=2) + "\n")
    for name, f in result["networks"].items():
        print(f"{name}: {f['images_per_s']:,.0f} img/s [{f['low']:,.0f}, {f['high']:,.0f}]")
    state = progress()
    state["chunks"].append(chunk("measure", time.monotonic() - started, 0, commit))
    save_progress(logged(state, MEASURE, commit))


def measure_together_now(models: list[tuple[str, Any]], space: Any) -> dict[str, Any]:
    """`models` ((name, Keras model) pairs) timed together in this process by nas' protocol at
    the space's first measuring batch size: round-robin, each round between two rounds of the
    fixed reference network, scaled by the device's baseline; the figures by name."""
    from nas.search.engine.confirm import CONFIRM_FACTOR
    from nas.search.hardware import HardwareProfiler, describe_device
    from nas.search.hardware.reference import reference_forward
    from nas.search.hardware.timing import measure_together

    measure_spec = space.spec.measure
    batch = measure_spec.batch_sizes[0]
    profiler = HardwareProfiler(measure_spec, None)
    baseline = profiler.baseline(batch)
    rounds = CONFIRM_FACTOR * measure_spec.rounds
    print(f"measuring {len(models)} networks together: {rounds} rounds each at batch {batch}", flush=True)
    figures = measure_together(
        [(model, False) for _, model in models],
        batch,
        rounds=rounds,
        round_seconds=measure_spec.round_seconds,
        reference=reference_forward(batch, measure_spec.warmup_seconds),
        baseline=baseline,
        max_spread=measure_spec.max_spread,
        warmup_seconds=measure_spec.warmup_seconds,
    )
    return {
        "commit": stamps.commit(),
        "machine": stamps.machine(),
        "device": describe_device().get("name"),
        "date": stamps.now(),
        "batch_size": batch,
        "rounds": rounds,
        "baseline_images_per_s": baseline,
        "networks": {
            name: {
                "params": int(model.count_params()),
                "images_per_s": round(f.images_per_s, 1),
                "low": None if f.low is None else round(f.low, 1),
                "high": None if f.high is None else round(f.high, 1),
                "spread": round(f.spread, 4),
                "trustworthy": f.trustworthy,
            }
            for (name, model), f in zip(models, figures, strict=True)
        },
    }


# ---- the table --------------------------------------------------------------------------------


def collect() -> tuple[list[Row], list[str]]:
    """Every network with figures, without throughput: each front's final-trained networks (the
    mean of their seeds) and each reference's; and the names of those trained with another recipe
    than the preset's today (left out: their pieces train them again)."""
    preset = preset_recipe(recipe_space())
    table: list[Row] = []
    stale: list[str] = []
    for front in round_studies(WORK):
        for number, f in sorted(final_trained(load(front)).items(), key=lambda item: int(item[0])):
            name = f"{front.label} trial {number}"
            if not current(f.recipe, preset):
                stale.append(name)
                continue
            figures = {"test_accuracy": f.test_accuracy, "test_accuracy_sd": f.test_accuracy_sd, "seeds": len(f.runs)}
            table.append({"name": name, "kind": "front", "front": front.label} | figures)
    for name in REFERENCES:
        path = WORK / "references" / f"{name}.json"
        if path.is_file():
            record = json.loads(path.read_text())
            if not current(record["recipe"], preset):
                stale.append(name)
                continue
            table.append({"name": name, "kind": "reference"} | reference_score(record))
    return table, stale


def measured() -> dict[str, Any]:
    """`measure`'s figures by network, empty before it ran."""
    path = WORK / "throughput.json"
    return json.loads(path.read_text())["networks"] if path.is_file() else {}


def rows() -> tuple[list[Row], list[str]]:
    """The table: every network's figures with its throughput from `measure` (all together);
    and the stale names (`collect`)."""
    timed = measured()
    if not timed:
        raise SystemExit(f"no throughput yet: run `{MEASURE}` first")
    table, stale = collect()
    late = [r["name"] for r in table if r["name"] not in timed]
    if late:
        raise SystemExit(f"{', '.join(late)}: trained after `measure` ran: run it again")
    return [r | timed[r["name"]] for r in table], stale


def _search_pieces(front: Front) -> list[dict[str, Any]]:
    """The pieces that ran a study's search (benchmarks/fashion.py's for the `trials` study of
    seed 0, benchmarks/fashion_supernet.py's, named after the study, for the others)."""
    if front.study == STUDY and front.database == DATABASE:
        return [c for c in progress()["chunks"] if c["piece"] == "search"]
    return [c for c in _supernet_progress()["chunks"] if c["piece"] == front.study]


def _supernet_progress() -> dict[str, Any]:
    path = SUPERNET / "progress.json"
    return json.loads(path.read_text()) if path.is_file() else {"searches": {}, "chunks": []}


def budgets() -> dict[str, float]:
    """Seconds per front of its search's pieces and of one seed's final training (seed 0's epochs,
    as `nas train` timed them) of every network final-trained from it with the preset's recipe:
    the accuracy goal's budget."""
    out = {}
    preset = preset_recipe(recipe_space())
    for front in round_studies(WORK):
        searched = _search_pieces(front)
        if searched:
            trained = [f for f in final_trained(load(front)).values() if current(f.recipe, preset)]
            training = sum(run.seconds for f in trained for run in f.runs if run.seed == 0)
            out[front.label] = sum(c["seconds"] for c in searched) + training
    return out


def report() -> dict[str, Any]:
    table, stale = rows()
    verdict = judge(table)
    verdicts = goals(table, REFERENCES, budgets())
    timed = json.loads((WORK / "throughput.json").read_text())
    result = {
        "command": "python -m benchmarks.fashion report",
        "commit": stamps.commit(),
        "date": stamps.now(),
        "round": ROUND,
        "measured": {key: timed.get(key) for key in ("commit", "machine", "device", "date", "batch_size", "rounds")},
        "networks": table,
        "fronts": verdict,
        "goals": verdicts,
        "wanted_seeds": wanted_seeds(table, verdicts),
        "stale": stale,
        "published": PUBLISHED,
        "published_source": PUBLISHED_SOURCE,
        "pieces": progress()["chunks"] + _supernet_progress()["chunks"],
    }
    (WORK / "report.json").write_text(json.dumps(result, indent=2) + "\n")
    _plot(table, WORK / "fashion.png")
    print(markdown(result))
    print()
    for front, figures in verdict.items():
        print(
            f"{front} front: dominates {len(figures['dominates'])}, ties with "
            f"{', '.join(figures['ties']) or 'none'}, not {', '.join(figures['not_dominated']) or 'none'}"
        )
    for line in summary(verdicts):
        print(f"goal: {line}")
    _say_wanted(result["wanted_seeds"])
    if stale:
        print(f"left out, trained with another recipe than the preset's: {', '.join(stale)}")
    return result


def markdown(result: dict[str, Any]) -> str:
    """The table, most accurate first: the mean ± the sample standard deviation over the seeds,
    and who dominates each reference (and ties with it) by the noise rule."""
    lines = [
        "| network | test accuracy (mean ± sd) | seeds | images/s (95% interval) | params | dominated by | ties |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in sorted(result["networks"], key=lambda r: -r["test_accuracy"]):
        sd = r["test_accuracy_sd"]
        accuracy = f"{r['test_accuracy']:.4f}" + (f" ± {sd:.4f}" if sd is not None else "")
        reference = r["kind"] == "reference"
        beaten = (_who(r.get("dominated_by", [])) or "none") if reference else "-"
        ties = (_who(r.get("ties", [])) or "-") if reference else "-"
        lines.append(
            f"| {r['name']} | {accuracy} | {r['seeds']} | {r['images_per_s']:,.0f} ({r['low']:,.0f}-{r['high']:,.0f}) "
            f"| {r['params']:,} | {beaten} | {ties} |"
        )
    lines.append("")
    lines.append(
        "Published ("
        + result["published_source"]
        + "): "
        + "; ".join(f"{k} {v:.3f}" for k, v in result["published"].items())
    )
    return "\n".join(lines)


def _who(names: list[str]) -> str:
    """Networks grouped by front: "trials s0 1, 26; supernet s0 240"."""
    groups: dict[str, list[str]] = {}
    for name in names:
        front, number = name.rsplit(" trial ", 1)
        groups.setdefault(front, []).append(number)
    return "; ".join(f"{front} {', '.join(numbers)}" for front, numbers in groups.items())


def _say_wanted(wanted: dict[str, int]) -> None:
    if not wanted:
        print(f"noise rule: no verdict waits for more seeds ({SEEDS} each where a margin under a point decides)")
        return
    print(f"noise rule: a margin under a point decides these; {SEEDS} seeds each wanted (now):")
    for command in seed_commands(wanted):
        print(f"    {command}")


def seed_commands(wanted: dict[str, int]) -> list[str]:
    """The pieces that give `wanted`'s networks their SEEDS seeds: one `train` per study (in the
    round's order), then one `reference` per reference."""
    trials: dict[str, list[str]] = {}
    for name in wanted:
        if " trial " in name:
            front, number = name.rsplit(" trial ", 1)
            trials.setdefault(front, []).append(number)
    ordered = [front for front in round_studies(WORK) if front.label in trials]
    numbers = {label: sorted(found, key=int) for label, found in trials.items()}
    return [train_command(front, f"--seeds {SEEDS} --trials {','.join(numbers[front.label])}") for front in ordered] + [
        f"python -m benchmarks.fashion reference {name} --seeds {SEEDS}" for name in wanted if " trial " not in name
    ]


def train_command(front: Front, options: str = "") -> str:
    """The piece that final-trains a front's networks."""
    if front.study == STUDY and front.database == DATABASE:
        return f"python -m benchmarks.fashion train {options}".rstrip()
    return f"python -m benchmarks.fashion_supernet train {front.study} {options}".rstrip()


# ---- what is done, what is left ---------------------------------------------------------------


def status() -> None:
    """What the round has done and what it has left, piece by piece."""
    preset = preset_recipe(recipe_space())
    print(f"round {ROUND} ({WORK.relative_to(REPO)}); the preset's final recipe: {preset}")
    _status_searches()
    for front in round_studies(WORK):
        _status_front(front, preset)
    for name in REFERENCES:
        path = WORK / "references" / f"{name}.json"
        record = json.loads(path.read_text()) if path.is_file() else None
        if record is None or not current(record["recipe"], preset):
            said = "to do" if record is None else "trained with another recipe: to do again"
            said += f" (python -m benchmarks.fashion reference {name})"
        else:
            said = f"seeds {', '.join(str(run['seed']) for run in record['seeds'])}"
        print(f"reference {name}: {said}")
    table, stale = collect()
    timed = measured()
    if stale:
        print(f"trained with another recipe than the preset's (left out until trained again): {', '.join(stale)}")
    late = [r["name"] for r in table if r["name"] not in timed]
    if not timed:
        print(f"throughput: to measure ({MEASURE}; last, on a quiet machine)")
    elif late:
        print(f"throughput: measured before {', '.join(late)}: measure again ({MEASURE})")
    shown = [r | timed[r["name"]] for r in table if r["name"] in timed]
    if shown:
        judge(shown)
        verdicts = goals(shown, REFERENCES, budgets())
        print("by the networks measured so far:")
        for line in summary(verdicts):
            print(f"  goal: {line}")
        _say_wanted(wanted_seeds(shown, verdicts))
    pieces = progress()["chunks"] + _supernet_progress()["chunks"]
    machines = sorted({c["machine"] for c in pieces})
    print(f"pieces run: {len(pieces)}, on {'; '.join(machines) or 'no machine yet'}")


def _status_searches() -> None:
    spent = progress()["search_seconds"]
    said = ": to do (python -m benchmarks.fashion search --minutes 60)" if not spent else ""
    print(f"search trials s0: {spent:.0f} of {SEARCH_SECONDS} s{said}")
    searches = _supernet_progress()["searches"]
    for name, seconds in sorted(searches.items()):
        print(f"search {name}: {seconds:.0f} of {SEARCH_SECONDS} s")
    if "fashion_supernet_s0" not in searches:
        print("search fashion_supernet_s0: to do (python -m benchmarks.fashion_supernet search 0 --minutes 64)")


def _status_front(front: Front, preset: dict[str, Any]) -> None:
    found = load(front)
    members = front_of(found)
    if not members:
        print(f"{front.label}: no finished trial yet")
        return
    figures = final_trained(found)
    trained = {n: f for n, f in figures.items() if current(f.recipe, preset)}
    done = [f"{n} ({len(f.runs)} seed{'s' * (len(f.runs) != 1)})" for n, f in sorted(trained.items(), key=_number)]
    left = [str(n) for n in spread_front(members, NETWORKS) if str(n) not in trained]
    said = f"{front.label}: front of {len(members)}; final-trained: {', '.join(done) or 'none'}"
    if left:  # of the NETWORKS a train piece spreads along the front by default
        said += f"; to train: {', '.join(left)} ({train_command(front)})"
    print(said)


def _number(item: tuple[str, Any]) -> int:
    return int(item[0])


# ---- the plot ---------------------------------------------------------------------------------


def _style(row: Row) -> tuple[str, str, str]:
    """(colour, marker, legend label) of a row: a strategy's colour, a seed's marker."""
    if row["kind"] == "reference":
        return "#1f77b4", "s", "keras.applications, 2-conv and ResNet-20, same recipe"
    strategy, seed = row["front"].split(" s")
    colour = "#d62728" if strategy == "trials" else "#2ca02c"
    marker = ("o", "D", "p")[int(seed) % 3] if strategy == "trials" else ("^", "v", "<")[int(seed) % 3]
    return colour, marker, f"nas front ({strategy} strategy, seed {seed}), final-trained"


def _plot(table: list[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5))
    groups: dict[tuple[str, str, str], list[Row]] = {}
    for r in table:
        groups.setdefault(_style(r), []).append(r)
    for (colour, marker, label), shown in groups.items():
        ax.errorbar(
            [r["images_per_s"] for r in shown],
            [r["test_accuracy"] for r in shown],
            xerr=[[r["images_per_s"] - r["low"] for r in shown], [r["high"] - r["images_per_s"] for r in shown]],
            yerr=[r["test_accuracy_sd"] or 0.0 for r in shown],
            fmt=marker,
            color=colour,
            label=label,
            capsize=3,
        )
    ax.set_xscale("log")
    ax.set_xlabel("images/s at batch 64 (nas' protocol, all measured together; log scale)")
    ax.set_ylabel("Fashion-MNIST test accuracy (mean ± sd over the seeds)")
    ax.set_title(f"Fashion-MNIST, round {ROUND}: nas' fronts against the references (same final recipe)")
    legend = ax.legend(loc="upper right", fontsize=7)
    for value in PUBLISHED.values():
        if value > 0.9:
            ax.axhline(value, color="#999999", linewidth=0.6, linestyle="--")
    fig.tight_layout()  # the axes' final place: every box below is measured in it
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    markers = [_box_around(ax.transData.transform((r["images_per_s"], r["test_accuracy"])), 5) for r in table]
    bars = [_bar(ax, r) for r in table]  # the intervals' bars, caps included
    taken = [*markers, *bars, _corners(legend.get_window_extent(renderer))]
    _label_published(ax, renderer, taken)
    names = [(_shorten(r["name"]), r["images_per_s"], r["test_accuracy"]) for r in table]
    _label_points(ax, renderer, names, taken)
    fig.savefig(path, dpi=130)
    plt.close(fig)


def _label_published(ax: Any, renderer: Any, taken: list[tuple[float, ...]]) -> None:
    """Each published figure's name on its line: at the left end, or at the right end where a
    marker or the legend lies under the left one (a label over a marker hides the marker)."""
    above = 1.0
    for label, value in sorted(PUBLISHED.items(), key=lambda item: -item[1]):
        if value <= 0.9:
            continue
        # Two anchors 0.001 apart (MobileNet 0.950, ResNet18 0.949): the lower one's label goes
        # under its line so that neither covers the other.
        dy = -8 if above - value < 0.004 else 2
        _first_free(
            lambda side, text=f"{label} {value:.3f}", value=value, dy=dy: ax.annotate(
                text,
                (side[0], value),
                xycoords=("axes fraction", "data"),
                fontsize=6,
                color="#666666",
                xytext=(0, dy),
                textcoords="offset points",
                ha=side[1],
            ),
            [(0.01, "left"), (0.99, "right")],
            renderer,
            taken,
        )
        above = value


def _shorten(name: str) -> str:
    """A front network's label on the plot: "t0#12" for "trials s0 trial 12", "s1#5" for
    "supernet s1 trial 5"; a reference's its name."""
    if " trial " not in name:
        return name
    front, number = name.rsplit(" trial ", 1)
    strategy, seed = front.split(" s")
    return f"{strategy[0]}{seed}#{number}"


def _label_points(
    ax: Any, renderer: Any, points: list[tuple[str, float, float]], taken: list[tuple[float, ...]]
) -> None:
    """Each point's name beside it, on the first side where it covers no other label, marker
    or the legend (matplotlib places annotations where told; 24 points in a small range
    collide)."""
    sides = [((4, 4), "left"), ((4, -11), "left"), ((-4, 4), "right"), ((-4, -11), "right"), ((4, 12), "left")]
    for name, x, y in points:
        _first_free(
            lambda side, name=name, x=x, y=y: ax.annotate(
                name, (x, y), fontsize=7, textcoords="offset points", xytext=side[0], ha=side[1]
            ),
            sides,
            renderer,
            taken,
        )


def _first_free(place: Any, sides: list[Any], renderer: Any, taken: list[tuple[float, ...]]) -> None:
    """The label `place(side)` makes on the first side where it covers nothing in `taken` (on
    the last side where every one does); its box joins `taken`."""
    for i, side in enumerate(sides):
        label = place(side)
        box = _corners(label.get_window_extent(renderer))
        if i == len(sides) - 1 or not any(_overlap(box, other) for other in taken):
            break
        label.remove()
    taken.append(box)


def _box_around(centre: Any, half: float) -> tuple[float, ...]:
    return (centre[0] - half, centre[1] - half, centre[0] + half, centre[1] + half)


def _bar(ax: Any, row: dict[str, Any]) -> tuple[float, ...]:
    (x0, y), (x1, _) = ax.transData.transform([(row["low"], row["test_accuracy"]), (row["high"], row["test_accuracy"])])
    return (x0 - 1, y - 2, x1 + 1, y + 2)


def _corners(box: Any) -> tuple[float, ...]:
    return (box.x0, box.y0, box.x1, box.y1)


def _overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
