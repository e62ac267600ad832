"""Reading a study: the Pareto front, summaries for `nas status`, the HTML report, export."""

from typing import TYPE_CHECKING

from nas._lazy import lazy_exports

if TYPE_CHECKING:
    from nas.search.engine import objective_names as objective_names
    from nas.search.results.choose import Choice as Choice
    from nas.search.results.choose import either as either
    from nas.search.results.export import ExportRequest as ExportRequest
    from nas.search.results.export import run_export as run_export
    from nas.search.results.export import trial_model as trial_model
    from nas.search.results.pareto import hypervolume_2d as hypervolume_2d
    from nas.search.results.pareto import one_front_confirmed as one_front_confirmed
    from nas.search.results.pareto import pareto_records as pareto_records
    from nas.search.results.pareto import to_csv as to_csv
    from nas.search.results.pareto import to_json as to_json
    from nas.search.results.report import build_report as build_report
    from nas.search.results.report import pareto_png as pareto_png
    from nas.search.results.summaries import cache_summary as cache_summary
    from nas.search.results.summaries import devices_line as devices_line
    from nas.search.results.summaries import screened_line as screened_line
    from nas.search.results.summaries import stopped_early_line as stopped_early_line
    from nas.search.results.summaries import study_summaries as study_summaries

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "choose": ["Choice", "either"],
        "export": ["ExportRequest", "run_export", "trial_model"],
        "pareto": ["hypervolume_2d", "objective_names", "one_front_confirmed", "pareto_records", "to_csv", "to_json"],
        "report": ["build_report", "pareto_png"],
        "summaries": ["cache_summary", "devices_line", "screened_line", "stopped_early_line", "study_summaries"],
    },
)

__all__ = [
    "Choice",
    "ExportRequest",
    "build_report",
    "cache_summary",
    "devices_line",
    "either",
    "hypervolume_2d",
    "objective_names",
    "one_front_confirmed",
    "pareto_png",
    "pareto_records",
    "run_export",
    "screened_line",
    "stopped_early_line",
    "study_summaries",
    "to_csv",
    "to_json",
    "trial_model",
]
