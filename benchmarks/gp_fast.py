"""A faster `predict` for the one Gaussian process KerasTuner's BayesianOptimization fits
(sklearn's GaussianProcessRegressor with a Matern(nu=2.5) kernel, normalize_y=True), giving
the same answers bit for bit.

The oracle maximises its acquisition with L-BFGS-B and numerical gradients: 50 restarts per
proposal, about 3,000 one-row `predict` calls each, so a replay of one BayesianOptimization
seed made over 100,000 of them. Each call's arithmetic takes microseconds; the rest of its
time (cProfile, 1 seed, 1 worker: 21 of 31 s) went to Python around it: checking the row
(is it a dataframe, finite, of known features), checking the kernel's length scale, dividing
the training set by it again, scipy's argument checks in cdist and solve_triangular. Here the
same NumPy, scipy and LAPACK calls run in the same order on the same arrays, without that
wrapping, and the training set divided by the length scale is kept between calls of one
fit. Nothing here is written by hand that a library offers: it is sklearn's own computation
(sklearn 1.9's `_gpr.py` and `kernels.py`) with the checks taken out, for the benchmark only.
Any call outside that one case (another kernel, return_cov, a list, a non-finite row, an
unfitted process) goes to sklearn's own `predict`. tests/benchmarks/test_table.py holds it
to sklearn's answers, bit for bit.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
from scipy.linalg import get_lapack_funcs
from scipy.spatial import distance
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import Matern

_SQRT5 = math.sqrt(5)
# What cdist(..., metric="euclidean") calls for float64 arrays once it has its arguments.
_cdist_euclidean = distance._METRIC_ALIAS["euclidean"].cdist_func


def _fast_case(gpr: GaussianProcessRegressor, X: Any, return_std: bool, return_cov: bool) -> bool:
    kernel = getattr(gpr, "kernel_", None)
    return (
        return_std
        and not return_cov
        and type(kernel) is Matern
        and kernel.nu == 2.5
        and hasattr(gpr, "X_train_")
        and type(X) is np.ndarray
        and X.dtype == np.float64
        and X.ndim == 2
        and X.shape[1] == gpr.n_features_in_
        and bool(np.isfinite(X).all())
    )


def _scaled_train(gpr: GaussianProcessRegressor, cache: dict[int, tuple[Any, ...]]) -> tuple[Any, np.ndarray]:
    """The length scale (as `_check_length_scale` makes it) and X_train_ divided by it, kept
    while the process keeps the same fit (a refit, or a new theta, makes a new X_train_ or
    length_scale object)."""
    kept = cache.get(id(gpr))
    if kept is not None and kept[0] is gpr.X_train_ and kept[1] is gpr.kernel_.length_scale:
        return kept[2], kept[3]
    length_scale = np.squeeze(gpr.kernel_.length_scale).astype(float)
    if np.ndim(length_scale) > 1 or (np.ndim(length_scale) == 1 and length_scale.shape[0] != gpr.n_features_in_):
        raise ValueError("length_scale does not match the data")  # sklearn's own check, as it says it
    scaled = gpr.X_train_ / length_scale
    cache[id(gpr)] = (gpr.X_train_, gpr.kernel_.length_scale, length_scale, scaled)
    return length_scale, scaled


def _predict(gpr: GaussianProcessRegressor, X: np.ndarray, cache: dict[int, tuple[Any, ...]]) -> tuple[Any, Any]:
    """sklearn's posterior mean and standard deviation, step for step (see the module's note)."""
    length_scale, train = _scaled_train(gpr, cache)
    # kernel_(X, X_train_) for Matern(nu=2.5)
    dists = _cdist_euclidean(X / length_scale, train, out=None)
    K = dists * _SQRT5
    K_trans = (1.0 + K + K**2 / 3.0) * np.exp(-K)
    y_mean = K_trans @ gpr.alpha_
    y_mean = gpr._y_train_std * y_mean + gpr._y_train_mean
    if y_mean.ndim > 1 and y_mean.shape[1] == 1:
        y_mean = np.squeeze(y_mean, axis=1)
    # solve_triangular(L_, K_trans.T, lower=True, check_finite=False), as scipy's
    # _solve_triangular calls LAPACK's trtrs for it
    a1, b1 = gpr.L_, K_trans.T
    (trtrs,) = get_lapack_funcs(("trtrs",), (a1, b1))
    if a1.flags.f_contiguous:
        V, info = trtrs(a1, b1, overwrite_b=False, lower=True, trans=0, unitdiag=False)
    else:
        V, info = trtrs(a1.T, b1, overwrite_b=False, lower=False, trans=1, unitdiag=False)
    if info != 0:
        raise np.linalg.LinAlgError(f"trtrs failed ({info})")
    y_var = np.ones(X.shape[0])  # Matern's diag(X): a normalised kernel
    y_var -= np.einsum("ij,ji->i", V.T, V)
    negative = y_var < 0
    if np.any(negative):
        return None, None  # sklearn warns here: let it, on its own path
    y_var = np.outer(y_var, gpr._y_train_std**2).reshape(*y_var.shape, -1)
    if y_var.shape[1] == 1:
        y_var = np.squeeze(y_var, axis=1)
    return y_mean, np.sqrt(y_var)


@contextlib.contextmanager
def fast_predict() -> Iterator[None]:
    """Inside, GaussianProcessRegressor.predict takes the fast path where it applies."""
    original = GaussianProcessRegressor.predict
    cache: dict[int, tuple[Any, ...]] = {}

    def predict(self: GaussianProcessRegressor, X: Any, return_std: bool = False, return_cov: bool = False) -> Any:
        if _fast_case(self, X, return_std, return_cov):
            mean, std = _predict(self, X, cache)
            if mean is not None:
                return mean, std
        return original(self, X, return_std=return_std, return_cov=return_cov)

    GaussianProcessRegressor.predict = predict  # type: ignore[method-assign]
    try:
        yield
    finally:
        GaussianProcessRegressor.predict = original  # type: ignore[method-assign]
