"""Datasets: the built-in digits, Keras' data sets by name (read from local files only), image
folders, .npz and TFRecords, decoded once and cached, with a test set kept apart; the tf.data
pipeline."""

from typing import TYPE_CHECKING

from nas._lazy import lazy_exports

if TYPE_CHECKING:
    from nas.search.data.dataset import Dataset as Dataset
    from nas.search.data.dataset import check_source as check_source
    from nas.search.data.dataset import delivery_rate as delivery_rate
    from nas.search.data.dataset import load_dataset as load_dataset
    from nas.search.data.dataset import pipeline as pipeline

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "dataset": ["Dataset", "check_source", "delivery_rate", "load_dataset", "pipeline"],
    },
)

__all__ = ["Dataset", "check_source", "delivery_rate", "load_dataset", "pipeline"]
