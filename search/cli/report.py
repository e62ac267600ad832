"""`nas report`: a self-contained HTML report of a study, optionally a PNG of its front."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nas.errors import NasError
from nas.search.cli.console import out
from nas.search.cli.options import DebugOpt, StorageOpt


def report(
    study: Annotated[str, typer.Argument(help="Study name.")],
    out_file: Annotated[str, typer.Option("--out", help="HTML file to write.")] = "report.html",
    png: Annotated[bool, typer.Option("--png", help="Also write the Pareto plot as a PNG beside it.")] = False,
    storage: StorageOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Write an offline HTML report of STUDY: Pareto front, hypervolume, importances, curves, trials."""
    from nas.search import runtime
    from nas.search.engine import load_existing_study
    from nas.search.results import build_report, pareto_png
    from nas.storage import open_storage, resolve_storage_url

    runtime.set_debug(debug)
    url = resolve_storage_url(storage)
    loaded = load_existing_study(open_storage(url, create=False), study, url)
    page = build_report(loaded, url.masked)
    target = Path(out_file).expanduser()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(page, encoding="utf-8")
        if png:
            pareto_png(loaded, str(target.with_suffix(".png")))
    except OSError as exc:
        raise NasError(f"--out: cannot write {target} ({exc.strerror or exc})") from None
    out.print(f"Report: {target} ({target.stat().st_size / 1e6:.1f} MB, works offline)", highlight=False)
    if png:
        out.print(f"Pareto plot: {target.with_suffix('.png')}", highlight=False)
