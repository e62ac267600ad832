"""benchmarks/fashion.py's last pieces: every network's throughput measured together by nas'
protocol, then the table, the plot and which references nas' fronts dominate: the `trials`
strategy's (benchmarks/fashion.py's search) and, once benchmarks/fashion_supernet.py has
final-trained it, the supernet strategy's of the same seed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks import stamps
from benchmarks.fashion_references import PUBLISHED, PUBLISHED_SOURCE, REFERENCES
from benchmarks.fashion_state import HERE, WORK, final_trained, progress, recipe_space, study, supernet_study

# The fronts in the table: row kind -> the prefix of its rows' names.
FRONTS = {"nas": "nas trial", "supernet": "supernet subnet"}


def measure() -> None:
    """Every final-trained nas network and every reference measured in one process by nas'
    protocol (hardware/timing.measure_together: round-robin, each round between two rounds of
    the fixed reference network, scaled by the device's baseline): the same conditions for
    all. Throughput does not depend on the weights, so the networks are built afresh."""
    from nas.search import runtime

    runtime.set_debug(False)
    runtime.import_tensorflow()
    import keras

    from nas.search.engine.stored import rebuild

    space = recipe_space()
    models: list[tuple[str, Any]] = []
    for prefix, found in _fronts():
        by_number = {t.number: t for t in found.trials}
        for number in sorted(final_trained(found), key=int):
            params = by_number[int(number)].params
            models.append((f"{prefix} {number}", rebuild(space, params, 10, 1, float32=True)))
    for name, (build, _) in REFERENCES.items():
        keras.utils.set_random_seed(0)
        models.append((name, build()))
    result = {"command": "python -m benchmarks.fashion measure"} | measure_together_now(models, space)
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "throughput.json").write_text(json.dumps(result, indent=2) + "\n")
    for name, f in result["networks"].items():
        print(f"{name}: {f['images_per_s']:,.0f} img/s [{f['low']:,.0f}, {f['high']:,.0f}]")


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


def _fronts() -> list[tuple[str, Any]]:
    """(row name prefix, study) of each front in the table: the `trials` study, then the
    supernet study of the same seed where it exists."""
    found = [(FRONTS["nas"], study())]
    supernet = supernet_study()
    return found + ([(FRONTS["supernet"], supernet)] if supernet is not None else [])


# ---- the report ------------------------------------------------------------------------------------


def rows() -> list[dict[str, Any]]:
    """One row per network: test accuracy (after the same final recipe) and throughput (from
    `measure`, all together), nas' fronts and the references."""
    path = WORK / "throughput.json"
    if not path.is_file():
        raise SystemExit("no throughput yet: run `python -m benchmarks.fashion measure` first")
    measured = json.loads(path.read_text())["networks"]
    out = []
    kinds = {prefix: kind for kind, prefix in FRONTS.items()}
    for prefix, found in _fronts():
        for number, f in sorted(final_trained(found).items(), key=lambda item: int(item[0])):
            name = f"{prefix} {number}"
            if name not in measured:
                raise SystemExit(f"{name} was final-trained after `measure` ran: run it again")
            out.append({"name": name, "kind": kinds[prefix], "test_accuracy": f.test_accuracy, **measured[name]})
    for name in REFERENCES:
        path = WORK / "references" / f"{name}.json"
        if path.is_file() and name in measured:
            f = json.loads(path.read_text())
            out.append({"name": name, "kind": "reference", "test_accuracy": reference_accuracy(f), **measured[name]})
    return out


def reference_accuracy(figures: dict[str, Any]) -> float:
    """A reference's test accuracy for the comparison: the better of its two scorings. `nas
    train` scores with training's moving BatchNorm statistics; the references were scored so
    and again with statistics re-estimated on training images (which helps most of them):
    the better figure makes a reference as hard to dominate as either scoring can."""
    return max(figures["test_accuracy"], figures.get("test_accuracy_moving_statistics", 0.0))


def dominated_by(reference: dict[str, Any], front: list[dict[str, Any]]) -> list[str]:
    """The nas networks at least as accurate on the test set as `reference` and faster beyond
    both throughput intervals (their low end above its high end)."""
    return [
        r["name"] for r in front if r["test_accuracy"] >= reference["test_accuracy"] and r["low"] > reference["high"]
    ]


def judge(table: list[dict[str, Any]]) -> dict[str, dict[str, list[str]]]:
    """Each reference's `dominated_by` (by any front's networks), and per front the references
    it dominates and those it does not."""
    references = [r for r in table if r["kind"] == "reference"]
    for r in references:
        r["dominated_by"] = dominated_by(r, [n for n in table if n["kind"] in FRONTS])
    verdict = {}
    for kind in FRONTS:
        front = [n for n in table if n["kind"] == kind]
        if front:
            beaten = [r["name"] for r in references if dominated_by(r, front)]
            verdict[kind] = {
                "dominates": beaten,
                "not_dominated": [r["name"] for r in references if r["name"] not in beaten],
            }
    return verdict


def report() -> dict[str, Any]:
    table = rows()
    verdict = judge(table)
    state = progress()
    search_s = sum(c["seconds"] for c in state["chunks"] if c["piece"] == "search")
    train_s = sum(c["seconds"] for c in state["chunks"] if c["piece"] == "train")
    result = {
        "command": "python -m benchmarks.fashion report",
        "commit": stamps.commit(),
        "date": stamps.now(),
        "networks": table,
        "fronts": verdict,
        "published": PUBLISHED,
        "published_source": PUBLISHED_SOURCE,
        "search_seconds": round(search_s),
        "final_training_seconds": round(train_s),
        "chunks": state["chunks"],
    }
    (HERE / "fashion.json").write_text(json.dumps(result, indent=2) + "\n")
    _plot(table, HERE / "fashion.png")
    print(markdown(result))
    for kind, figures in verdict.items():
        print(
            f"{kind} front: dominates {len(figures['dominates'])}, not {', '.join(figures['not_dominated']) or 'none'}"
        )
    return result


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "| network | test accuracy | images/s (95% interval) | params | dominated by |",
        "|---|---|---|---|---|",
    ]
    for r in sorted(result["networks"], key=lambda r: -r["test_accuracy"]):
        beaten = _who(r.get("dominated_by", [])) or ("-" if r["kind"] in FRONTS else "none")
        lines.append(
            f"| {r['name']} | {r['test_accuracy']:.4f} | {r['images_per_s']:,.0f} ({r['low']:,.0f}-{r['high']:,.0f}) "
            f"| {r['params']:,} | {beaten} |"
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
    """Dominating networks grouped by front: "trials 1, 26; supernet 240"."""
    label = {FRONTS["nas"]: "trials", FRONTS["supernet"]: "supernet"}
    groups: dict[str, list[str]] = {}
    for name in names:
        prefix, number = name.rsplit(" ", 1)
        groups.setdefault(label.get(prefix, prefix), []).append(number)
    return "; ".join(f"{front} {', '.join(numbers)}" for front, numbers in groups.items())


def _plot(table: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5))
    labels = {
        "nas": "nas front (trials strategy), final-trained",
        "supernet": "nas front (supernet strategy), final-trained",
        "reference": "keras.applications and 2-conv, same recipe",
    }
    for kind, style in (
        ("nas", {"color": "#d62728", "marker": "o"}),
        ("supernet", {"color": "#2ca02c", "marker": "^"}),
        ("reference", {"color": "#1f77b4", "marker": "s"}),
    ):
        shown = [r for r in table if r["kind"] == kind]
        if not shown:
            continue
        ax.errorbar(
            [r["images_per_s"] for r in shown],
            [r["test_accuracy"] for r in shown],
            xerr=[[r["images_per_s"] - r["low"] for r in shown], [r["high"] - r["images_per_s"] for r in shown]],
            fmt=style["marker"],
            color=style["color"],
            label=labels[kind],
            capsize=3,
        )
    ax.set_xscale("log")
    ax.set_xlabel("images/s at batch 64 (nas' protocol, all measured together; log scale)")
    ax.set_ylabel("Fashion-MNIST test accuracy")
    ax.set_title("Fashion-MNIST: nas' fronts against keras.applications (same final recipe)")
    legend = ax.legend(loc="upper right", fontsize=8)
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
    short = {FRONTS["nas"] + " ": "#", FRONTS["supernet"] + " ": "s#"}
    names = [(_shorten(r["name"], short), r["images_per_s"], r["test_accuracy"]) for r in table]
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


def _shorten(name: str, short: dict[str, str]) -> str:
    for prefix, mark in short.items():
        if name.startswith(prefix):
            return mark + name.removeprefix(prefix)
    return name


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
