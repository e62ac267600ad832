"""`nas space validate|show|sample`: look at a space before spending hours on it."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from nas.search.cli.console import message, out
from nas.search.cli.options import SpaceArg
from nas.search.space import human

space_app = typer.Typer(help="Check and inspect a space file without training anything.", no_args_is_help=True)


class ShowFormat(StrEnum):
    table = "table"
    json = "json"


FormatOpt = Annotated[ShowFormat, typer.Option("--format", help="Output format.")]


def _size_text(size: Any) -> str:
    text = f"{size.combinations:,} combinations" + ("" if size.exact else " (at most)")
    if size.continuous:
        text += f" x {len(size.continuous)} continuous ({', '.join(size.continuous)})"
    return text


@space_app.command()
def validate(
    space: SpaceArg,
    data: Annotated[bool, typer.Option(help="Also check the dataset's paths and class folders.")] = True,
) -> None:
    """Check SPACE: schema, domains, conditions and (by default) its data; exit 2 on the first problem."""
    from nas.search.nets import output_shape, probe, space_size
    from nas.search.space import load_space

    loaded = load_space(space)
    if data:
        from nas.search.data import check_source

        check_source(loaded.spec.dataset)
    size = space_size(loaded.parameters())
    line = (
        f"OK: {loaded.source}: {loaded.spec.model.family}, {len(loaded.searchable())} searchable parameters, "
        f"{_size_text(size)}"
    )
    try:
        classes, channels = output_shape(loaded.spec)
    except Exception as exc:
        out.print(f"{line}; networks not probed ({message(exc)})", highlight=False, soft_wrap=True)
        return
    found = probe(loaded, classes, channels)
    s = found.summary()
    line += (
        f"; params {human(s['params'][0])}-{human(s['params'][1])}, FLOPs {human(s['flops'][0])}-{human(s['flops'][1])}"
    )
    out.print(line + f" over {s['candidates']} random candidates", highlight=False, soft_wrap=True)
    if found.feasible == 0:
        out.print(
            f"Warning: none of {s['candidates']} random candidates meets the static constraints; "
            "the search will reject almost everything it samples.",
            highlight=False,
        )
    elif found.feasible < s["candidates"]:
        out.print(f"{found.feasible} of {s['candidates']} random candidates meet the static constraints.")


@space_app.command()
def show(
    space: SpaceArg,
    format: FormatOpt = ShowFormat.table,
    all_params: Annotated[bool, typer.Option("--all", help="List fixed parameters too.")] = False,
) -> None:
    """Parameters, domains, conditions and size of SPACE; params and FLOPs of its networks."""
    from nas.search.nets import (
        condition_text,
        fixed_network,
        network_summary,
        output_shape,
        parameter_rows,
        probe,
        space_size,
    )
    from nas.search.space import load_space
    from nas.search.strategies import strategy_for

    loaded = load_space(space)
    strategy = strategy_for(loaded)
    size = space_size(loaded.parameters())
    report: dict[str, Any] = {
        "name": loaded.name,
        "source": loaded.source,
        "family": loaded.spec.model.family,
        "searchable": len(loaded.searchable()),
        "parameters": parameter_rows(loaded),
        "size": {"combinations": size.combinations, "exact": size.exact, "continuous": size.continuous},
        "constraints": loaded.spec.constraints.model_dump(exclude_none=True),
        "early_stopping": _early_stopping(loaded.spec),
        "measure": loaded.spec.search_measure().model_dump(),
        "strategy": strategy.describe(loaded),
    }
    note = None
    try:
        classes, channels = output_shape(loaded.spec)
        net = fixed_network(loaded, classes, channels)
        if net is not None:
            report["network"] = network_summary(net)
        else:
            report["candidates"] = probe(loaded, classes, channels).summary()
    except Exception as exc:
        note = message(exc)
        report["note"] = note
    if format == ShowFormat.json:
        print(json.dumps(report, indent=2, default=str))
        return

    out.print(
        f"Space '{loaded.name}' ({loaded.source}): {loaded.spec.model.family}, "
        f"{report['searchable']} searchable of {len(report['parameters'])} parameters",
        highlight=False,
    )
    table = Table()
    for column in ("parameter", "domain", "active when"):
        table.add_column(column)
    rows = [r for r in report["parameters"] if all_params or not r["fixed"] or r.get("when")]
    for r in rows:
        table.add_row(r["name"], escape(r["domain"]), escape(condition_text(r["when"])) if r.get("when") else "")
    if rows:
        out.print(table)
    hidden = len(report["parameters"]) - len(rows)
    if hidden:
        out.print(f"{hidden} fixed parameters not shown (--all lists them).", highlight=False)
    out.print(f"Size: {_size_text(size)}", highlight=False)
    if report["constraints"]:
        out.print("Constraints: " + ", ".join(f"{k} {v}" for k, v in report["constraints"].items()), highlight=False)
    stopping = report["early_stopping"]
    out.print(
        "Early stopping: "
        + (
            f"asha, eta {stopping['eta']}, rungs at epochs {', '.join(map(str, stopping['rungs']))} "
            f"of {stopping['epochs']}"
            if stopping["method"] == "asha" and stopping["rungs"]
            else f"{stopping['method']}" + (" (no rung below the last epoch)" if stopping["method"] == "asha" else "")
        ),
        highlight=False,
    )
    m = report["measure"]
    out.print(
        f"Measure: batch {', '.join(map(str, m['batch_sizes']))}, {m['rounds']} rounds of {m['round_seconds']} s"
        + (", interleaved with the reference" if m["reference"] else "")
        + (", front confirmed after the search" if m["confirm"] and m["reference"] else "")
        + (
            f"; warm-up at most {m['warmup_seconds']:g} s, "
            + (f"latency timed {m['latency_seconds']:g} s, " if m["latency"] else "no latency, ")
            + f"once per device: baseline {m['baseline_rounds']} rounds, matmul peak {m['peak_seconds']:g} s"
        ),
        highlight=False,
        soft_wrap=True,
    )
    out.print(strategy.summary(report["strategy"]), highlight=False, soft_wrap=True)
    if "network" in report:
        n = report["network"]
        out.print(
            f"Network: {n['params']:,} params, {n['flops']:,} FLOPs ({human(n['flops'])}), "
            f"{n['model_bytes']:,} bytes of weights, {n['blocks']} blocks at {n['resolution']}x{n['resolution']}, "
            f"{n['classes']} classes",
            highlight=False,
        )
    elif "candidates" in report:
        c = report["candidates"]
        out.print(
            f"Over {c['candidates']} random candidates: params {human(c['params'][0])} to {human(c['params'][1])}, "
            f"FLOPs {human(c['flops'][0])} to {human(c['flops'][1])}, "
            f"{c['statically_feasible']} meet the static constraints",
            highlight=False,
        )
    if note:
        out.print(f"Networks not shown: {note}", highlight=False)


def _early_stopping(spec: Any) -> dict[str, Any]:
    from nas.search.engine import rung_epochs

    stopping = spec.search.early_stopping
    return {
        **stopping.model_dump(),
        "epochs": spec.training.epochs,
        "rungs": rung_epochs(stopping, spec.training.epochs),
    }


@space_app.command("sample")
def sample_cmd(
    space: SpaceArg,
    seed: Annotated[int, typer.Option(help="Seed of the random draw.")] = 0,
    format: FormatOpt = ShowFormat.table,
) -> None:
    """Draw one candidate from SPACE: its parameters, params, FLOPs and layers."""
    from nas.search.nets import layer_rows, network_summary, output_shape, sample, static_constraints
    from nas.search.space import load_space

    loaded = load_space(space)
    classes, channels = output_shape(loaded.spec)
    values, candidate = sample(loaded, seed, classes, channels)
    from nas.search.nets import deployed_plan

    net = deployed_plan(candidate)
    limits = static_constraints(loaded.spec.constraints, net)
    report: dict[str, Any] = {
        "seed": seed,
        "parameters": {k: v for k, v in values.items() if k in loaded.searchable()},
        "network": network_summary(net),
        "constraints": {k: ("met" if v <= 0 else f"exceeded by {v:.0%}") for k, v in limits.items()},
        "layers": layer_rows(net),
    }
    if format == ShowFormat.json:
        print(json.dumps(report, indent=2, default=str))
        return
    out.print(f"Candidate of '{loaded.name}' (seed {seed}):", highlight=False)
    for name, value in report["parameters"].items():
        out.print(f"  {name} = {value:.6g}" if isinstance(value, float) else f"  {name} = {value}", highlight=False)
    n = report["network"]
    out.print(
        f"Network: {n['params']:,} params, {n['flops']:,} FLOPs ({human(n['flops'])}), "
        f"{n['model_bytes']:,} bytes, input {n['input_shape']} run at {n['resolution']}x{n['resolution']}",
        highlight=False,
    )
    if report["constraints"]:
        out.print("Constraints: " + ", ".join(f"{k} {v}" for k, v in report["constraints"].items()), highlight=False)
    columns = (
        "layer",
        "block",
        "in",
        "hidden",
        "out",
        "kernel",
        "stride",
        "se",
        "activation",
        "residual",
        "size",
        "params",
    )
    table = Table()
    for column in columns:
        table.add_column(column, justify="left" if column in ("layer", "block", "activation") else "right")
    for row in report["layers"]:
        table.add_row(*(escape(_cell(row.get(c))) for c in columns))
    out.print(table)


def _cell(value: Any) -> str:
    if value is None or value is False:
        return ""
    if value is True:
        return "yes"
    return f"{value:,}" if isinstance(value, int) else str(value)
