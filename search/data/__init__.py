"""Datasets: the built-in digits, image folders, .npz and TFRecords, decoded once and
cached; the tf.data pipeline."""

from typing import TYPE_CHECKING

from nas._lazy import lazy_exports

if TYPE_CHECKING:
    from nas.search.data.dataset import Dataset as Dataset
    from nas.search.data.dataset import delivery_rate as delivery_rate
    from nas.search.data.dataset import load_dataset as load_dataset
    from nas.search.data.dataset import pipeline as pipeline
    from nas.search.data.sources import check_source as check_source

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "dataset": ["Dataset", "delivery_rate", "load_dataset", "pipeline"],
        "sources": ["check_source"],
    },
)

__all__ = ["Dataset", "check_source", "delivery_rate", "load_dataset", "pipeline"]
