"""Optuna samplers by name, seeded so that workers and resumed runs do not repeat each other."""

from __future__ import annotations

import optuna

from nas.errors import NasError
from nas.search.engine.distinct import DistinctSampler
from nas.search.records import SamplerName, choices


def make_sampler(name: str, seed: int) -> optuna.samplers.BaseSampler:
    """The named sampler, kept from proposing a configuration the study already has."""
    return DistinctSampler(_sampler(name, seed), seed)


def _sampler(name: str, seed: int) -> optuna.samplers.BaseSampler:
    if name == SamplerName.TPE:
        # constant_liar: trials running in parallel workers count as pessimistic results, so
        # workers do not all propose the same point.
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True)
    if name == SamplerName.NSGA2:
        return optuna.samplers.NSGAIISampler(seed=seed)
    if name == SamplerName.RANDOM:
        return optuna.samplers.RandomSampler(seed=seed)
    if name == SamplerName.GP:
        try:
            import torch  # noqa: F401  (GPSampler's dependency)
        except ImportError:
            raise NasError("sampler 'gp' needs PyTorch: pip install torch (or use tpe or nsga2)") from None
        return optuna.samplers.GPSampler(seed=seed)
    raise NasError(f"unknown sampler '{name}' (use {choices(SamplerName)})")


def worker_sampler(name: str, seed: int, worker_index: int, trials_so_far: int) -> optuna.samplers.BaseSampler:
    """A sampler seeded apart from every other worker's and from earlier runs of this one:
    workers with one seed would propose identical points (a known NSGA-II pitfall), and a
    resumed sampler with the same seed would replay its first proposals. Taken modulo 2**32,
    the range NumPy's generators accept (a standalone `nas worker` uses its pid as index)."""
    return make_sampler(name, (seed + 7919 * worker_index + trials_so_far) % 2**32)
