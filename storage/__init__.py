"""Persistence: storage URLs, engine settings and the Optuna RDB storage we open."""

from .cache import CacheKey, CacheStats, MeasurementCache
from .engine import GRACE_PERIOD_S, HEARTBEAT_INTERVAL_S, open_storage
from .paths import contained, own_folder, safe_name, trial_number
from .profile import ENV_VAR, open_device_profile
from .retry import with_lock_retries
from .studylock import study_lock
from .urls import StorageURL, default_storage_url, resolve_storage_url
from .weights import StoredWeights, WeightStore, check_artifact_root, default_artifact_root, sha256_file

__all__ = [
    "ENV_VAR",
    "GRACE_PERIOD_S",
    "HEARTBEAT_INTERVAL_S",
    "CacheKey",
    "CacheStats",
    "MeasurementCache",
    "StorageURL",
    "StoredWeights",
    "WeightStore",
    "check_artifact_root",
    "contained",
    "default_artifact_root",
    "default_storage_url",
    "open_device_profile",
    "open_storage",
    "own_folder",
    "resolve_storage_url",
    "safe_name",
    "sha256_file",
    "study_lock",
    "trial_number",
    "with_lock_retries",
]
