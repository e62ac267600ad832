"""Successive halving over a supernet's subnets (`search.supernet.halving`): which validation
images a subnet is scored on first, and how high its accuracy on the whole set can be given
what it scored there. The runner decides what that bound means against the front
(engine/trial.py, engine/front.py); evaluation.py does the scoring. No TensorFlow here.

Why the bound is safe. The first images of a validation set nas split off are a uniform random
sample of it without replacement (train_test_split shuffles, stratified or not), so the subset's
correct count is hypergeometric around the whole set's accuracy p. Hoeffding (1963, section 6)
showed that every bound from the moment generating function of a sum drawn with replacement
holds for the same sum drawn without replacement; the Chernoff bound
P(subset accuracy <= a) <= exp(-n KL(a || p)) for a < p is one. So with
c = ln(1 / alpha), the largest q with n KL(subset accuracy || q) <= c is above p except with
probability at most alpha: no normal approximation, no finite-population correction (leaving
it out only widens the bound), and at alpha = P(N(0, 1) > z) it is wider than a z-sigma normal
bound (c = 8.4 against z**2 / 2 = 6.1 at z = 3.5). A validation set in another order (one read
from dataset.validation_path folder by folder) is no random sample; `first_images` turns
halving off where the subset's classes are mixed unlike the whole set's.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from nas.search.training import SCORE_BATCH

if TYPE_CHECKING:
    from nas.search.strategies.supernet.settings import HalvingSpec


def whole_batches(subset: int, batch: int = SCORE_BATCH) -> int:
    """`subset` rounded up to whole batches."""
    return -(-subset // batch) * batch


def first_images(settings: HalvingSpec, labels: np.ndarray, batch: int = SCORE_BATCH) -> tuple[int, str | None]:
    """(how many of the validation set's first images to score first, 0: all at once; why not,
    where a user should be told). Rounded up to whole batches, so a subnet scored in full is
    scored batch for batch as it is without halving and gets the same figures; halving needs
    a set larger than twice its subset, where the rest is worth saving."""
    if not settings.enabled:
        return 0, None
    n = whole_batches(settings.subset, batch)
    if len(labels) <= 2 * n:
        return 0, None
    # Pearson's statistic of the subset's class counts against the whole set's shares: about
    # (classes - 1) for a random sample; the first images of a set sorted by class give
    # more than N / 4 (n <= N / 2), far beyond the limit.
    _, codes = np.unique(labels, return_inverse=True)
    expected = np.bincount(codes) * (n / len(labels))
    statistic = float((((np.bincount(codes[:n], minlength=len(expected)) - expected) ** 2) / expected).sum())
    if statistic > 2 * (len(expected) - 1) + 30:
        return 0, (
            f"Warning: successive halving is off: the first {n} of the {len(labels)} validation images are not a "
            "random sample of them (their classes are mixed otherwise); every subnet is scored on all of them"
        )
    return n, None


def tail(z: float) -> float:
    """P(N(0, 1) > z): the chance the bound fails."""
    return 0.5 * math.erfc(z / math.sqrt(2))


def _kl(p: float, q: float) -> float:
    """KL(Bernoulli(p) || Bernoulli(q))."""
    out = 0.0
    if p > 0:
        out += p * math.log(p / q)
    if p < 1:
        out += (1 - p) * math.log((1 - p) / (1 - q))
    return out


def upper_bound(correct: int, n: int, z: float) -> float:
    """An upper bound of the whole set's accuracy from `correct` of `n` sampled images, wrong
    with probability at most tail(z) (the module's docstring says why)."""
    p = correct / n
    if correct >= n:
        return 1.0
    c = math.log(1 / tail(z)) / n
    low, high = p, 1.0
    for _ in range(60):  # bisection: KL(p || q) grows with q above p; 2**-60 is below a float's step
        mid = (low + high) / 2
        if _kl(p, mid) <= c:
            low = mid
        else:
            high = mid
    return high  # the side above the bound's exact value: safe
