"""`nas export`: the Pareto front as files for each runtime, with parity checked."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nas.errors import NasError
from nas.search.cli.console import err, out
from nas.search.cli.options import ArtifactsOpt, BestOpt, DebugOpt, StorageOpt, WhereOpt
from nas.search.records import ExportFormat, QuantizeMode


def export(
    study: Annotated[str, typer.Argument(help="Study name.")],
    format: Annotated[ExportFormat, typer.Option("--format", help="What to write.")],
    out_dir: Annotated[str, typer.Option("--out", help="Folder for trial-N/ folders and manifest.json.")],
    trial: Annotated[
        list[int] | None, typer.Option("--trial", help="Trial number (repeatable; default: the Pareto front).")
    ] = None,
    where: WhereOpt = None,
    best: BestOpt = None,
    search_weights: Annotated[
        bool,
        typer.Option(
            "--search-weights",
            help="Export the search's weights for every trial (default: the final-trained model where `nas train` "
            "kept one).",
        ),
    ] = False,
    quantize: Annotated[QuantizeMode, typer.Option(help="Post-training quantization (tflite, tftrt, tensorrt).")] = (
        QuantizeMode.NONE
    ),
    retrain_full: Annotated[
        bool, typer.Option("--retrain-full", help="Train again on training + validation data first.")
    ] = False,
    storage: StorageOpt = None,
    artifacts: ArtifactsOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Export trials of STUDY (final-trained models where `nas train` kept them, else the search's weights) and
    check each file in its real runtime against the Keras model."""
    from rich.table import Table

    from nas.search import runtime
    from nas.search.results import Choice, either
    from nas.storage import resolve_storage_url, safe_name

    runtime.set_debug(debug)
    safe_name(study, "study")  # run_export checks it too; here it is said before TensorFlow loads
    either(trial, Choice.parse(where, best), "trial")  # likewise
    url, folder = resolve_storage_url(storage), _folder(out_dir)  # likewise
    runtime.import_tensorflow()
    from nas.search.results import ExportRequest, run_export

    request = ExportRequest(
        storage=url,
        study=study,
        out=folder,
        format=format.value,
        quantize=quantize.value,
        trials=list(trial or []),
        retrain_full=retrain_full,
        artifacts=artifacts,
        where=tuple(where or ()),
        best=best,
        search_weights=search_weights,
    )
    manifest, verdict = run_export(request, lambda line: err.print(line, highlight=False))
    table = Table(title=f"{format.value} export of '{study}' -> {request.out}")
    for column in ("trial", "weights", "files", "bytes", "agreement", "keras acc", "exported acc", "parity"):
        table.add_column(column, justify="left" if column in ("weights", "files", "parity") else "right")
    for record in manifest["trials"]:
        files = record.get("files", [])
        listed = ", ".join(f["path"] for f in files[:3]) + (" ..." if len(files) > 3 else "")
        size = f"{sum(f['bytes'] for f in files):,}" if files else ""
        first = (str(record["trial"]), record["weights"])
        if "error" in record:
            table.add_row(*first, listed, size, "", "", "", "FAILED: " + record["error"])
            continue
        if "parity" not in record:  # written, but its runtime is not available here
            table.add_row(*first, listed, size, "", "", "", record["verdict"])
            continue
        p = record["parity"]
        table.add_row(
            *first,
            listed,
            size,
            f"{p['agreement']:.2%}",
            f"{p['keras_accuracy']:.4f}",
            f"{p['accuracy']:.4f}",
            ("ok" if p["passed"] else "FAILED") + f" ({p['rule']})",
        )
    out.print(table)
    out.print(f"Manifest: {request.out / 'manifest.json'}", highlight=False)
    if verdict == "failed":
        err.print(
            "Error: parity check failed for at least one trial (figures above); the files are kept for inspection."
        )
        raise typer.Exit(1)
    if verdict != "passed":
        err.print(
            "Warning: the files of at least one trial could not be run here, so their parity was not checked "
            "(see the table); the manifest says `not run` for them.",
            highlight=False,
        )


def _folder(text: str) -> Path:
    """--out as an absolute path; `~user` of a user this machine lacks, a symlink loop or a NUL
    are bad input, not a traceback."""
    try:
        return Path(text).expanduser().resolve()
    except (RuntimeError, ValueError, OSError) as exc:
        raise NasError(f"{{out}} {text}: not a usable folder ({exc})") from None
