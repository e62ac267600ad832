"""The Python API: what the command line does, from Python. Run a search, load a study, read
its Pareto front, choose a model by its figures, final-train it, load it, export, report.

    import nas.api as nas

    study = nas.search("spaces/tiny.yaml", trials=3)          # or a dict with the same keys
    for record in study.pareto():                             # plain dicts, best accuracy first
        print(record["trial"], record["accuracy"], record["throughput"], record["parameters"])
    best = study.best("accuracy", where=["throughput>=5000"])  # one record, as pareto() gives them
    study.train(trials=[best["trial"]])                       # `nas train`: final recipe, test set
    model = study.model(best["trial"])                        # a Keras model; model.nas_weights says whose
    study.export("tflite", "exported/", trials=[best["trial"]])  # the manifest, as a dict
    study.report("report.html")

    study = nas.load("tiny", storage="sqlite:///nas.db")      # any study made by `nas search`

Everything runs in this process (for parallel workers use `nas search --workers N`); bad
input raises `nas.api.NasError` with the same one-line message the command line prints.
TensorFlow is imported only by the calls that train, measure, load a model or export.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import optuna

from nas.errors import NasError
from nas.search import runtime
from nas.search.engine import SearchEvents, SearchOptions, TrialReport, load_existing_study
from nas.search.records import StoppedBy
from nas.search.results import Choice, either
from nas.search.space import load_space, space_from_dict
from nas.storage import open_storage, resolve_storage_url

__all__ = ["NasError", "Study", "load", "search"]

_log = logging.getLogger(__name__)


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

    def pareto(self, *, where: str | Sequence[str] = ()) -> list[dict[str, Any]]:
        """The feasible Pareto front as records (objectives, params, FLOPs, device figures,
        parameters), the same as `nas pareto --format json`. `where`: constraints such as
        `"throughput>=5000"` (`nas pareto --where`; several must all hold): the front of the
        trials that meet them."""

        return Choice.parse(where).records(self.optuna)

    def best(self, objective: str, *, where: str | Sequence[str] = ()) -> dict[str, Any]:
        """The best front member by `objective` (any figure a record holds: accuracy,
        throughput, test_accuracy, params, ...) among the trials that meet `where`, as one
        record of `pareto()` (`record["trial"]` is its number); `nas pareto --best OBJECTIVE`.
        Raises NasError naming the closest trial when no trial meets the constraints, and
        for a figure measured on a device (throughput, latency) of a study measured on
        several: there is one best per device (`pareto()` has one front per device)."""

        records = Choice.parse(where, objective).records(self.optuna)
        if len(records) > 1:
            devices = ", ".join(f"trial {r['trial']} on {r['compared_on']}" for r in records)
            raise NasError(
                f"{{best}} {objective}: study '{self.name}' was measured on {len(records)} devices and {objective} "
                f"compares only within one ({devices}); confirm() measures the front again together here, "
                "then best('confirmed_throughput') compares them"
            )
        return records[0]

    def train(
        self,
        trials: Sequence[int] | None = None,
        *,
        where: str | Sequence[str] = (),
        again: bool = False,
        seeds: int = 1,
        from_scratch: bool = False,
        artifacts: str | None = None,
        on_message: Callable[[str], None] | None = None,
    ) -> dict[int, dict[str, Any]]:
        """`nas train`: train `trials` (default: the front's most accurate members, at most the
        space's `final.trials`; or the front members that meet `where`) again with the space's
        `final:` recipe (`seeds` times each, as `nas train --seeds`: the figures are the mean),
        score each once on the test set, measure it again and keep the model. Returns the
        study's final-trained figures (test accuracy, throughput, recipe, the kept model's
        file) by trial number, those of earlier runs included."""

        choice = Choice.parse(where)
        either(trials, choice, "trials")
        runtime.import_tensorflow()
        from nas.search.engine import join_study
        from nas.search.strategies import strategy_for

        joined = join_study(self._url(), self.name)
        if artifacts:
            joined = replace(joined, options=replace(joined.options, artifacts=os.path.abspath(artifacts)))
        asked = list(trials) if trials else None
        events = _Callback(None, on_message)
        if choice:
            asked, _ = choice.trials_to_train(joined.study, joined.space.spec.final.trials)
            events.message(f"Chosen {choice.describe()}: trials {', '.join(map(str, asked))}")
        strategy = strategy_for(joined.space)
        if seeds < 1:
            raise NasError(f"seeds: {seeds} is not a count of trainings (1 or more)")
        figures = strategy.train_final(joined, events, trials=asked, scratch=from_scratch, again=again, seeds=seeds)
        from nas.search.engine import stored_model_path
        from nas.storage import default_artifact_root

        # The study stores models relative to its artifacts folder (so it travels): a caller
        # gets the path on this machine.
        root = default_artifact_root(joined.options.storage, joined.options.artifacts)
        return {
            int(number): f.to_attr() | {"model": str(stored_model_path(f.model, root))} for number, f in figures.items()
        }

    def confirm(self, *, cache: bool = True, on_message: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
        """`nas pareto --confirm`: measure the front (and the trials within noise of it) again,
        together, on this machine's device, store the figures, and return the front with them
        (`confirmed_throughput`, `confirmed_low`, `confirmed_high`): for a study measured on
        several devices one front, by the confirmed figures (`compared_on`: this device).
        `cache=False` measures the device's reference baseline again too."""

        runtime.import_tensorflow()
        from nas.search.engine import CONFIRM, join_study

        joined = join_study(self._url(), self.name)
        CONFIRM.run(replace(joined, options=replace(joined.options, cache=cache)), _Callback(None, on_message))
        return Choice.parse().records(self.optuna, remeasured=True)

    def model(self, trial: int, *, search_weights: bool = False, artifacts: str | None = None) -> Any:
        """Trial `trial`'s trained Keras model: the final-trained one where `nas train` (or
        `train()`) kept one, else the search's weights (`search_weights=True`: always those).
        Its attribute `nas_weights` says which ("final-trained" or "search"), and the
        logger `nas.api` says it at INFO level. Raises NasError as `nas export` does when the
        weights are not there."""

        runtime.import_tensorflow()
        from nas.search.results import trial_model

        model, weights = trial_model(self._url(), self.name, trial, artifacts=artifacts, search_weights=search_weights)
        model.nas_weights = weights
        _log.info("study '%s', trial %d: %s weights", self.name, trial, weights)
        return model

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
        where: str | Sequence[str] = (),
        quantize: str = "none",
        retrain_full: bool = False,
        search_weights: bool = False,
        artifacts: str | None = None,
    ) -> dict[str, Any]:
        """Export like `nas export` and return the manifest; raises NasError when a parity
        check fails (the files and manifest.json are kept). Files that cannot be run here get
        `not run: <why>` as their verdict in the manifest, never `passed`. Each trial's model is
        the final-trained one where there is one, else the search's (`search_weights=True`:
        always the search's); the manifest's `weights` says which. `where`: the front members
        that meet these constraints instead of `trials`."""
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
            where=tuple([where] if isinstance(where, str) else where),
            search_weights=search_weights,
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
