"""Persistence: storage URLs, engine settings and the Optuna RDB storage we open."""

from .engine import open_storage
from .urls import StorageURL, default_storage_url, resolve_storage_url

__all__ = ["StorageURL", "default_storage_url", "open_storage", "resolve_storage_url"]
