"""Options several commands share."""

from __future__ import annotations

from typing import Annotated

import typer

StorageOpt = Annotated[
    str | None,
    typer.Option("--storage", help="Database URL (default: $NAS_STORAGE or sqlite:///nas.db)."),
]
ArtifactsOpt = Annotated[
    str | None,
    typer.Option(help="Folder for trained weights (default: $NAS_ARTIFACTS, or nas-artifacts beside a SQLite file)."),
]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show TensorFlow's logs and full tracebacks.")]
RecycleOpt = Annotated[
    int,
    typer.Option(min=0, help="A worker exits after N trials and a fresh process takes over (bounds memory; 0: never)."),
]
