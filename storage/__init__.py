"""Persistence: storage URLs, engine settings and the Optuna RDB storage we open."""

from .cache import CacheKey, CacheStats, MeasurementCache
from .engine import open_storage
from .retry import with_lock_retries
from .studylock import study_lock
from .urls import StorageURL, default_storage_url, resolve_storage_url

__all__ = [
    "CacheKey",
    "CacheStats",
    "MeasurementCache",
    "StorageURL",
    "default_storage_url",
    "open_storage",
    "resolve_storage_url",
    "study_lock",
    "with_lock_retries",
]
