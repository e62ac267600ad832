"""The Python API: run a search, load a study, read its Pareto front, export, report.

    import nas.api as nas

    study = nas.search("spaces/tiny.yaml", trials=3)          # or a dict with the same keys
    for record in study.pareto():                             # plain dicts, best accuracy first
        print(record["trial"], record["accuracy"], record["throughput"], record["parameters"])
    study.export("tflite", "exported/", quantize="int8")      # the manifest, as a dict
    study.report("report.html")

    study = nas.load("tiny", storage="sqlite:///nas.db")      # any study made by `nas search`

Everything runs in this process (for parallel workers use `nas search --workers N`); bad
input raises `nas.api.NasError` with the same one-line message the command line prints.
TensorFlow is imported only by the calls that train or export.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna

from nas.errors import NasError
from nas.search import runtime
from nas.search.engine import SearchEvents, SearchOptions, TrialReport, load_existing_study
from nas.search.records import StoppedBy
from nas.search.results import pareto_records
from nas.search.space import load_space, space_from_dict
from nas.storage import open_storage, resolve_storage_url

__all__ = ["NasError", "Study", "load", "search"]


class _Callback(SearchEvents):
    def __init__(
        self, on_trial: Callable[[TrialReport], None] | None, on_message: Callable[[str], None] | None
    ) -> None:
        self.on_trial, self.on_message = on_trial, on_message

    def message(self, text: str) -> None:
        if self.on_message is not None:
            self.on_message(text)

    def trial_finished(self, report: TrialReport, finished: int, pareto_size: int) -> None:
        if self.on_trial is not None:
            self.on_trial(report)


@dataclass(frozen=True)
class Study:
    """A study in a storage: an Optuna study made by nas, with its records."""

    name: str
    storage: str  # the URL as given (may hold a password; never printed by nas)

    def _url(self) -> Any:

        return resolve_storage_url(self.storage)

    @property
    def optuna(self) -> optuna.Study:
        """The underlying Optuna study (metric names set; every trial attribute there)."""

        url = self._url()
        return load_existing_study(open_storage(url, create=False), self.name, url)

    def pareto(self) -> list[dict[str, Any]]:
        """The feasible Pareto front as records (objectives, params, FLOPs, device figures,
        parameters), the same as `nas pareto --format json`."""

        return pareto_records(self.optuna)

    def trials(self) -> list[dict[str, Any]]:
        """Every trial: number, state, values by objective name, parameters, attributes."""
        study = self.optuna
        names = study.metric_names or []
        return [
            {
                "trial": t.number,
                "state": t.state.name,
                "values": dict(zip(names, t.values, strict=True)) if t.values else None,
                "parameters": t.params,
                "attributes": t.user_attrs,
            }
            for t in study.get_trials(deepcopy=False)
        ]

    def export(
        self,
        format: str,
        out: str | Path,
        *,
        trials: list[int] | None = None,
        quantize: str = "none",
        retrain_full: bool = False,
        artifacts: str | None = None,
    ) -> dict[str, Any]:
        """Export like `nas export` and return the manifest; raises NasError when a parity
        check fails (the files and manifest.json are kept). Files that cannot be run here get
        `not run: <why>` as their verdict in the manifest, never `passed`."""
        from nas.search import runtime

        runtime.import_tensorflow()
        from nas.search.results import ExportRequest, run_export

        request = ExportRequest(
            storage=self._url(),
            study=self.name,
            out=Path(out).expanduser().resolve(),
            format=format,
            quantize=quantize,
            trials=list(trials or []),
            retrain_full=retrain_full,
            artifacts=artifacts,
        )
        manifest, verdict = run_export(request, lambda _: None)
        if verdict == "failed":
            raise NasError(f"parity check failed; see {request.out / 'manifest.json'}")
        return manifest

    def report(self, out: str | Path, *, png: bool = False) -> Path:
        """Write the offline HTML report (and the Pareto plot as PNG beside it)."""
        from nas.search.results import build_report, pareto_png

        target = Path(out).expanduser()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(build_report(self.optuna, self._url().masked), encoding="utf-8")
        if png:
            pareto_png(self.optuna, str(target.with_suffix(".png")))
        return target


def search(
    space: str | Path | Mapping[str, Any],
    *,
    study: str | None = None,
    storage: str | None = None,
    trials: int | None = None,
    sampler: str | None = None,
    seed: int | None = None,
    timeout: float | None = None,
    keep_top_k: int = 0,
    on_trial: Callable[[TrialReport], None] | None = None,
    on_message: Callable[[str], None] | None = None,
    finish: bool = True,
) -> Study:
    """Run (or resume) a search to its budget in this process and return the study.

    `space` is a space file, a preset name, or a mapping with the keys of a space file;
    defaults come from the space as on the command line. `on_trial` is called with each
    finished trial's report, `on_message` with each line the command line would print (resume,
    warnings, the supernet's epochs, the after-search steps). Like `nas search`, a search that
    ends normally runs its strategy's after-search steps (a supernet study's front fine-tuned,
    the front's throughput confirmed); `finish=False` leaves them out."""

    runtime.set_debug(False)
    loaded = space_from_dict(dict(space), "<dict>") if isinstance(space, Mapping) else load_space(str(space))
    url = resolve_storage_url(storage)
    options = SearchOptions(
        storage=url,
        study_name=study or loaded.name,
        trials=trials or loaded.spec.search.trials,
        sampler=sampler or loaded.spec.search.sampler,
        seed=loaded.spec.search.seed if seed is None else seed,
        timeout=timeout,
        keep_top_k=keep_top_k,
    )
    runtime.import_tensorflow()
    from nas.search.engine import run_search
    from nas.search.strategies import strategy_for

    events = _Callback(on_trial, on_message)
    outcome = run_search(loaded, options, events, strategy=strategy_for(loaded), finish=finish)
    if outcome.stopped_by == StoppedBy.FAILURES:
        raise NasError(f"stopped after {options.max_consecutive_failures} failed trials in a row")
    return Study(options.study_name, url.raw)


def load(study: str, storage: str | None = None) -> Study:
    """A study made by `nas search` (or `search()`); raises NasError if it is not there."""

    found = Study(study, resolve_storage_url(storage).raw)
    found.optuna  # noqa: B018 - fail here, with the list of studies, rather than on first use
    return found
