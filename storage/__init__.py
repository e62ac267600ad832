"""Persistence: storage URLs, engine settings and the Optuna RDB storage we open."""

from .cache import CacheKey, CacheStats, MeasurementCache
from .engine import open_storage
from .paths import contained, own_folder, safe_name, trial_number
from .profile import open_device_profile
from .retry import with_lock_retries
from .studylock import study_lock
from .urls import StorageURL, default_storage_url, resolve_storage_url

__all__ = [
    "CacheKey",
    "CacheStats",
    "MeasurementCache",
    "StorageURL",
    "contained",
    "default_storage_url",
    "open_device_profile",
    "open_storage",
    "own_folder",
    "resolve_storage_url",
    "safe_name",
    "study_lock",
    "trial_number",
    "with_lock_retries",
]
