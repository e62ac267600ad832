"""Datasets: the built-in digits, image folders, .npz and TFRecords, decoded once and
cached; the tf.data pipeline."""

from nas.search.data.dataset import Dataset, delivery_rate, load_dataset, pipeline
from nas.search.data.sources import check_source

__all__ = ["Dataset", "check_source", "delivery_rate", "load_dataset", "pipeline"]
