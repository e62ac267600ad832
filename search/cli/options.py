"""Options several commands share."""

from __future__ import annotations

from typing import Annotated

import typer

from nas.spaces import preset_names

# The presets are read from the package, so the help names every one shipped.
SpaceArg = Annotated[str, typer.Argument(help=f"Space file, or a preset name ({', '.join(preset_names())}).")]
StorageOpt = Annotated[
    str | None,
    typer.Option("--storage", help="Database URL (default: $NAS_STORAGE or sqlite:///nas.db)."),
]
ArtifactsOpt = Annotated[
    str | None,
    typer.Option(help="Folder for trained weights (default: $NAS_ARTIFACTS, or nas-artifacts beside a SQLite file)."),
]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show TensorFlow's logs and full tracebacks.")]
WideOpt = Annotated[
    bool, typer.Option("--wide", help="Every column of the table, in full (default: what fits the terminal).")
]
WhereOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--where",
        help="Only trials that meet this, e.g. 'throughput>=5000' or 'test_accuracy>0.93' (FIGURE OP NUMBER; "
        "OP: >=, <=, >, <, ==; repeatable: all must hold). The front is then that of the trials that meet it.",
    ),
]
BestOpt = Annotated[
    str | None,
    typer.Option(
        "--best",
        help="Only the best front member by this figure (accuracy, throughput, test_accuracy, params, ...), "
        "after the --where constraints.",
    ),
]
RecycleOpt = Annotated[
    int,
    typer.Option(min=0, help="A worker exits after N trials and a fresh process takes over (bounds memory; 0: never)."),
]


def check_study(value: str | None) -> str | None:
    """Callback of --study: the name becomes the study's artifact folder, so it follows the
    rule of a space's `name` and is refused before anything is opened or written."""
    if value is None:
        return None
    from nas.storage import safe_name  # loads SQLAlchemy: only once a command is parsed

    return safe_name(value, "{study}")
