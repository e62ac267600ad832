"""`nas report`: one self-contained HTML file (plotly.js embedded, no CDN) that shows a study.

Plots: the Pareto front (front, trials within noise of it, dominated and infeasible trials
told apart, the throughput's 95% interval as error bars, confirmed figures beside, parameters
on hover), hypervolume over wall time, a supernet's reference subnets over its epochs (where
they were scored), parameter importances per objective (Optuna's fANOVA), learning curves of
the front, and a sortable table of every trial.
"""

from __future__ import annotations

import html
import json
import math
from datetime import datetime
from typing import Any

import optuna
import plotly.graph_objects as go
from optuna.importance import FanovaImportanceEvaluator
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState
from optuna.visualization import plot_param_importances
from plotly.offline import get_plotlyjs

from nas.errors import NasError
from nas.search.engine import (
    confirmed,
    devices,
    final_figures,
    measured_on,
    mixed_devices,
    noise_aware_front,
    objective_names,
    pareto_front,
    throughput_interval,
)
from nas.search.records import FinalFigures, StudyAttr, TrialAttr
from nas.search.results.pareto import hypervolume_2d
from nas.search.results.summaries import devices_line, stopped_early_line

# Objectives spanning orders of magnitude are plotted (and their hypervolume taken) in log10.
LOG_OBJECTIVES = {"throughput", "model_size", "tflite_latency"}


def _feasible(t: FrozenTrial) -> bool:
    return all(v <= 0 for v in t.constraints.values()) and not t.user_attrs.get(TrialAttr.SCREENED)


def _oriented(study: optuna.Study, t: FrozenTrial) -> list[float]:
    """Objective values turned so that larger is better, log10 where the scale calls for it."""
    out = []
    for name, value, direction in zip(objective_names(study), t.values, study.directions, strict=True):
        v = math.log10(max(value, 1e-12)) if name in LOG_OBJECTIVES else value
        out.append(v if direction == StudyDirection.MAXIMIZE else -v)
    return out


def hypervolume_history(study: optuna.Study) -> list[tuple[float, float]]:
    """(minutes since the first trial started, hypervolume) after each finished feasible trial."""
    done = [t for t in study.get_trials(deepcopy=False, states=[TrialState.COMPLETE]) if _feasible(t)]
    if len(study.directions) != 2 or not done:
        return []
    oriented = [_oriented(study, t) for t in done]
    # The reference point: just below the worst value seen of each objective.
    reference = [min(p[i] for p in oriented) - 0.01 * (1 + abs(min(p[i] for p in oriented))) for i in (0, 1)]
    start = min(t.datetime_start for t in done if t.datetime_start)
    order = sorted(range(len(done)), key=lambda i: done[i].datetime_complete or datetime.max)
    curve, seen = [], []
    for i in order:
        seen.append(oriented[i])
        finished = done[i].datetime_complete
        assert finished is not None
        curve.append(((finished - start).total_seconds() / 60, hypervolume_2d(seen, reference)))
    return curve


def _hover(t: FrozenTrial) -> str:
    lines = [f"trial {t.number}"] + [
        f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}" for k, v in t.params.items()
    ]
    return "<br>".join(html.escape(line) for line in lines)


def pareto_figure(study: optuna.Study) -> Any:

    names = objective_names(study)
    # Two objectives or more: the second against the first. One: the objective by trial number.
    x_name, y_name = (names[1], names[0]) if len(names) > 1 else ("trial", names[0])
    yi = names.index(y_name)

    def x_of(t: FrozenTrial) -> float:
        return float(t.number) if x_name == "trial" else t.values[names.index(x_name)]

    front = {t.number for t in pareto_front(study)}
    within_noise = {t.number for t in noise_aware_front(study)} - front
    front_label, noise_label = "Pareto front", "within noise of the front"
    groups: dict[str, list[FrozenTrial]] = {front_label: [], noise_label: [], "dominated": [], "infeasible": []}
    for t in study.get_trials(deepcopy=False, states=[TrialState.COMPLETE]):
        key = (
            "infeasible"
            if not _feasible(t)
            else front_label
            if t.number in front
            else noise_label
            if t.number in within_noise
            else "dominated"
        )
        groups[key].append(t)
    style = {
        front_label: {"color": "#d62728", "size": 11, "symbol": "circle"},
        noise_label: {"color": "#ff7f0e", "size": 9, "symbol": "circle"},
        "dominated": {"color": "#1f77b4", "size": 8, "symbol": "circle-open"},
        "infeasible": {"color": "#7f7f7f", "size": 8, "symbol": "x"},
    }

    def error_bars(trials: list[FrozenTrial], axis: str) -> dict[str, Any] | None:
        """The throughput's 95% interval around each point, when throughput is on `axis`."""
        name = x_name if axis == "x" else y_name
        if name != "throughput":
            return None
        k = names.index(name)
        ends = [throughput_interval(t) or (t.values[k], t.values[k]) for t in trials]
        return {
            "type": "data",
            "symmetric": False,
            "array": [high - t.values[k] for t, (_, high) in zip(trials, ends, strict=True)],
            "arrayminus": [t.values[k] - low for t, (low, _) in zip(trials, ends, strict=True)],
            "thickness": 1,
        }

    # A study measured on several devices has one front per device: each is its own line, in
    # its own symbol, so no line joins figures of two devices.
    fronts: list[tuple[str, list[FrozenTrial], dict[str, Any]]]
    fronts = [(front_label, groups.pop(front_label), style[front_label])]
    mixed = mixed_devices(study)
    if mixed:
        members = fronts[0][1]
        symbols = ["circle", "square", "diamond", "triangle-up", "cross", "star-square"]
        fronts = [
            (
                f"{front_label} on {device.label}",
                [t for t in members if measured_on(t) == device.identity],
                {**style[front_label], "symbol": symbols[i % len(symbols)]},
            )
            for i, device in enumerate(mixed)
        ]
    fig = go.Figure()

    def add(label: str, trials: list[FrozenTrial], marker: dict[str, Any], line: bool, bars: bool) -> None:
        """One group's points; a front is a line, sorted along x; `bars`: the throughput's interval."""
        trials = sorted(trials, key=x_of) if line else trials
        fig.add_trace(
            go.Scatter(
                x=[x_of(t) for t in trials],
                y=[t.values[yi] for t in trials],
                mode="lines+markers" if line else "markers",
                name=f"{label} ({len(trials)})",
                marker=marker,
                line={"dash": "dot"} if line else None,
                text=[_hover(t) for t in trials],
                hovertemplate="%{text}<extra></extra>",
                error_x=error_bars(trials, "x") if bars else None,
                error_y=error_bars(trials, "y") if bars else None,
            )
        )

    for label, trials, marker in fronts:
        add(label, trials, marker, line=True, bars=True)
    for label, trials in groups.items():
        add(label, trials, style[label], line=False, bars=label == noise_label)
    measured = confirmed(study)
    shown = [t for t in [*(t for _, ts, _ in fronts for t in ts), *groups[noise_label]] if str(t.number) in measured]
    if shown and "throughput" in (x_name, y_name):
        figure = {t.number: measured[str(t.number)].images_per_s for t in shown}
        on_x = x_name == "throughput"
        fig.add_trace(
            go.Scatter(
                x=[figure[t.number] if on_x else x_of(t) for t in shown],
                y=[t.values[yi] if on_x else figure[t.number] for t in shown],
                mode="markers",
                name=f"confirmed after the search ({len(shown)})",
                marker={"color": "#2ca02c", "size": 9, "symbol": "diamond"},
                text=[f"trial {t.number}: confirmed {figure[t.number]:,.0f} img/s" for t in shown],
                hovertemplate="%{text}<extra></extra>",
            )
        )
    final = final_figures(study)
    if final and {x_name, y_name} == {"accuracy", "throughput"}:
        # `nas train`: test accuracy after the final recipe at the throughput measured again.
        # With `nas train --seeds N`: the seeds' means, and a bar of one standard deviation.
        tested = [(int(n), f) for n, f in sorted(final.items(), key=lambda item: int(item[0]))]
        on_x = x_name == "throughput"
        spread = {"type": "data", "array": [f.test_accuracy_sd or 0.0 for _, f in tested]}
        seeds = any(f.test_accuracy_sd is not None for _, f in tested)
        fig.add_trace(
            go.Scatter(
                x=[f.throughput if on_x else f.test_accuracy for _, f in tested],
                y=[f.test_accuracy if on_x else f.throughput for _, f in tested],
                error_y=spread if on_x and seeds else None,
                error_x=spread if not on_x and seeds else None,
                mode="markers",
                name=f"final-trained, test accuracy ({len(tested)})",
                marker={"color": "#9467bd", "size": 10, "symbol": "star"},
                text=[_final_text(n, f) for n, f in tested],
                hovertemplate="%{text}<extra></extra>",
            )
        )
    title = "Pareto front" if len(names) > 1 else f"{y_name} by trial (best in red)"
    fig.update_layout(title=title, xaxis_title=x_name, yaxis_title=y_name, template="plotly_white")
    if x_name in LOG_OBJECTIVES:
        fig.update_xaxes(type="log")
    if y_name in LOG_OBJECTIVES:
        fig.update_yaxes(type="log")
    return fig


def _final_text(number: int, f: FinalFigures) -> str:
    text = f"trial {number}: test accuracy {f.test_accuracy:.4f}"
    if f.test_accuracy_sd is not None:
        text += f" ± {f.test_accuracy_sd:.4f} (mean of {len(f.runs)} seeds)"
    return text + f" after {f.epochs} epochs, {f.throughput:,.0f} img/s"


def hypervolume_figure(study: optuna.Study) -> Any | None:

    curve = hypervolume_history(study)
    if not curve:
        return None
    fig = go.Figure(go.Scatter(x=[c[0] for c in curve], y=[c[1] for c in curve], mode="lines+markers", line_shape="hv"))
    log_note = ", ".join(n for n in objective_names(study) if n in LOG_OBJECTIVES)
    fig.update_layout(
        title="Hypervolume of the front over time" + (f" ({log_note} in log10)" if log_note else ""),
        xaxis_title="minutes since the first trial started",
        yaxis_title="hypervolume",
        template="plotly_white",
    )
    return fig


def supernet_figure(study: optuna.Study) -> Any | None:
    """A supernet study's reference subnets (`search.supernet.reference_subnets`): validation
    accuracy after each epoch of its training, the epoch's phase on hover."""
    history = (study.user_attrs.get(StudyAttr.SUPERNET) or {}).get("history") or []
    scored = [(epoch, h) for epoch, h in enumerate(history, 1) if h.get("reference_accuracy")]
    if not scored:
        return None
    fig = go.Figure()
    for name in ("smallest", "middle", "largest"):
        fig.add_trace(
            go.Scatter(
                x=[epoch for epoch, _ in scored],
                y=[h["reference_accuracy"][name] for _, h in scored],
                mode="lines+markers",
                name=f"{name} subnet",
                text=[f"phase: {h['phase']}" if "phase" in h else "" for _, h in scored],
            )
        )
    fig.update_layout(
        title="Supernet training: reference subnets (BatchNorm re-calibrated)",
        xaxis_title="epoch",
        yaxis_title="validation accuracy",
        template="plotly_white",
    )
    return fig


def _objective(i: int) -> Any:
    return lambda t: t.values[i]


def importance_figures(study: optuna.Study) -> list[Any]:

    figures: list[Any] = []
    done = study.get_trials(deepcopy=False, states=[TrialState.COMPLETE])
    if len(done) < 3:
        return figures
    for i, name in enumerate(objective_names(study)):
        try:
            fig = plot_param_importances(
                study, evaluator=FanovaImportanceEvaluator(seed=0), target=_objective(i), target_name=name
            )
        except (ValueError, RuntimeError):  # too few trials or a single distinct value
            continue
        fig.update_layout(title=f"Parameter importance for {name} (fANOVA)", template="plotly_white")
        figures.append(fig)
    return figures


def learning_curves_figure(study: optuna.Study) -> Any | None:

    fig = go.Figure()
    for t in sorted(pareto_front(study), key=lambda t: t.number):
        curve = (t.user_attrs.get(TrialAttr.HISTORY) or {}).get("val_accuracy")
        if curve:
            fig.add_trace(
                go.Scatter(x=list(range(1, len(curve) + 1)), y=curve, mode="lines+markers", name=f"trial {t.number}")
            )
    if not fig.data:
        return None
    fig.update_layout(
        title="Learning curves of the Pareto front",
        xaxis_title="epoch",
        yaxis_title="validation accuracy",
        template="plotly_white",
    )
    return fig


def trial_rows(study: optuna.Study) -> list[dict[str, Any]]:
    front = {t.number for t in pareto_front(study)}
    within_noise = {t.number for t in noise_aware_front(study)} - front
    final = final_figures(study)
    rows = []
    for t in study.get_trials(deepcopy=False):
        row: dict[str, Any] = {"trial": t.number, "state": t.state.name}
        if t.state == TrialState.COMPLETE:
            row["state"] = (
                "front"
                if t.number in front
                else "infeasible"
                if not _feasible(t)
                else "within noise of the front"
                if t.number in within_noise
                else "dominated"
            )
            row.update(zip(objective_names(study), t.values, strict=True))
            if (trained := final.get(str(t.number))) is not None:
                row["test accuracy (final)"] = trained.test_accuracy
        elif t.user_attrs.get(TrialAttr.EARLY_STOPPED):  # stopped at a rung: what was known there
            at = t.user_attrs[TrialAttr.EARLY_STOPPED]
            row["state"] = f"stopped early (rung {at['rung']}, epoch {at['epoch']})"
            row["accuracy"] = at["accuracy"]
            row.update(t.user_attrs.get(TrialAttr.KNOWN_OBJECTIVES) or {})
        elif t.user_attrs.get(TrialAttr.SCREENED):  # stopped by a constraint: only what was known then
            row["state"] = f"screened ({t.user_attrs[TrialAttr.SCREENED]})"
            row.update(t.user_attrs.get(TrialAttr.KNOWN_OBJECTIVES) or {})
            if half := t.user_attrs.get(TrialAttr.HALVING):  # its accuracy on the subset, as an early-stopped one's
                row["accuracy"] = half["accuracy"]
        row["params"] = t.user_attrs.get(TrialAttr.PARAMS)
        row["FLOPs"] = t.user_attrs.get(TrialAttr.FLOPS)
        row["seconds"] = (t.user_attrs.get(TrialAttr.DURATIONS) or {}).get("total")
        row.update(t.params)
        if t.state == TrialState.FAIL:
            row["fail_reason"] = t.user_attrs.get(TrialAttr.FAIL_REASON)
        rows.append(row)
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    columns = list(dict.fromkeys(k for r in rows for k in r))

    def cell(v: Any) -> str:
        if v is None:
            return ""
        if isinstance(v, float):
            return f"{v:.6g}"
        return html.escape(str(v))

    head = "".join(f'<th onclick="sortTable({i})">{html.escape(c)}</th>' for i, c in enumerate(columns))
    body = "".join("<tr>" + "".join(f"<td>{cell(r.get(c))}</td>" for c in columns) + "</tr>" for r in rows)
    return f'<table id="trials"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


# Click a header to sort by it (numbers numerically, text alphabetically); click again to reverse.
_SORT_JS = """
function sortTable(col) {
  const table = document.getElementById("trials");
  const rows = Array.from(table.tBodies[0].rows);
  const asc = table.dataset.col == col ? table.dataset.dir != "asc" : true;
  const key = r => { const t = r.cells[col].textContent; const n = parseFloat(t); return isNaN(n) ? t : n; };
  rows.sort((a, b) => { const x = key(a), y = key(b); return (x > y ? 1 : x < y ? -1 : 0) * (asc ? 1 : -1); });
  rows.forEach(r => table.tBodies[0].appendChild(r));
  table.dataset.col = col; table.dataset.dir = asc ? "asc" : "desc";
}
"""

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: right; }
th { background: #f3f3f3; cursor: pointer; position: sticky; top: 0; }
.plot { max-width: 1100px; }
"""


def build_report(study: optuna.Study, storage_label: str) -> str:

    complete = study.get_trials(deepcopy=False, states=[TrialState.COMPLETE])
    if not complete:
        raise NasError(f"study '{study.study_name}' has no finished trials to report on")
    figures = [
        pareto_figure(study),
        hypervolume_figure(study),
        supernet_figure(study),
        *importance_figures(study),
        learning_curves_figure(study),
    ]
    divs = [
        f'<div class="plot">{fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"plot{i}")}</div>'
        for i, fig in enumerate(f for f in figures if f is not None)
    ]
    summary: dict[str, Any] = {
        "study": study.study_name,
        "storage": storage_label,
        "trials": len(study.trials),
        "finished": len(complete),
        "pareto": len(pareto_front(study)),
        "objectives": dict(zip(objective_names(study), (d.name.lower() for d in study.directions), strict=True)),
        "stopped_early": stopped_early_line(study.get_trials(deepcopy=False)),
        "devices": devices_line(
            [(d.label, d.trials) for d in devices(study.get_trials(deepcopy=False))], bool(mixed_devices(study))
        ),
    }
    objectives = ", ".join(f"{k} ({v})" for k, v in summary["objectives"].items())
    summary_json = json.dumps(summary).replace("</", "<\\/")  # never closes the script tag
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>nas report: {html.escape(study.study_name)}</title>
<style>{_CSS}</style>
<script>{get_plotlyjs()}</script>
<script>{_SORT_JS}</script></head>
<body>
<h1>Study {html.escape(study.study_name)}</h1>
<p>{summary["finished"]} finished of {summary["trials"]} trials, {summary["pareto"]} on the Pareto front;
{html.escape(summary["stopped_early"] or "")}
{html.escape(summary["devices"] + ";" if summary["devices"] else "")}
objectives: {html.escape(objectives)}; {html.escape(storage_label)}</p>
<script type="application/json" id="summary">{summary_json}</script>
{"".join(divs)}
<h2>Trials</h2>
{_table(trial_rows(study))}
</body></html>
"""


def pareto_png(study: optuna.Study, path: str) -> None:
    """The Pareto plot as a PNG (matplotlib: plotly's image export needs Chrome via kaleido)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = pareto_figure(study)
    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    # plotly's marker symbols as matplotlib's (the open circle is drawn hollow).
    kinds = {"square": "s", "diamond": "D", "triangle-up": "^", "cross": "P", "star-square": "*", "star": "*", "x": "x"}
    for trace in figure.data:
        marker = trace.marker
        kind = kinds.get(marker.symbol, "o")
        face = "none" if marker.symbol in ("circle-open", "x") else marker.color
        line = ":" if "lines" in (trace.mode or "") else "none"
        ax.plot(trace.x, trace.y, kind, linestyle=line, color=marker.color, markerfacecolor=face, label=trace.name)
    ax.set_xlabel(figure.layout.xaxis.title.text)
    ax.set_ylabel(figure.layout.yaxis.title.text)
    if figure.layout.xaxis.type == "log":
        ax.set_xscale("log")
    if figure.layout.yaxis.type == "log":
        ax.set_yscale("log")
    ax.set_title(f"Pareto front of '{study.study_name}'")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
