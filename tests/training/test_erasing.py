"""Random erasing (`augmentation.erasing`, search/training/erasing.py): one rectangle of the
paper's size and shape per erased image, at the rate asked, inside the compiled train step; a
space without it keeps its fingerprint and its stored final recipes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from nas.errors import NasError

BACKGROUND = -1.0  # outside the fill's [0, 1]: every erased pixel differs from it


def _erased(rate: float, images: int = 2000, size: tuple[int, int] = (16, 24), seed: int = 3) -> np.ndarray:
    """Which pixels the layer changed, per image, run as the train step runs it (XLA)."""
    import tensorflow as tf

    from nas.search.training.erasing import RandomErasing

    layer = RandomErasing(rate, seed=seed)
    x = tf.fill((images, *size, 2), BACKGROUND)

    @tf.function(jit_compile=True)  # type: ignore[untyped-decorator]
    def step(batch: Any) -> Any:
        return layer(batch, training=True)

    out = step(x).numpy()
    changed = out != BACKGROUND
    assert (changed[..., 0] == changed[..., 1]).all()  # every channel of an erased pixel
    assert (out[changed] >= 0).all() and (out[changed] <= 1).all()  # filled with uniform values
    return np.asarray(changed[..., 0])


def test_an_erased_image_holds_one_rectangle_of_the_paper_s_size_and_shape() -> None:
    changed = _erased(1.0)
    height, width = changed.shape[1:]
    shares, aspects = [], []
    for mask in changed:
        rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
        assert rows.size and cols.size  # at rate 1 every image is erased
        box = mask[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]
        assert box.all() and mask.sum() == box.size  # one filled rectangle, nothing else
        shares.append(box.size / (height * width))
        aspects.append(box.shape[0] / box.shape[1])
    # Sides are whole pixels (rounded), so the bounds hold to a pixel's rounding.
    assert min(shares) >= 0.015 and max(shares) <= 0.45
    assert 0.2 <= min(aspects) < 0.45 and 2.5 < max(aspects) <= 4.5
    # The paper's loop (draw until one fits) gives the same sizes and shapes: a rectangle too
    # tall for this 16x24 image is drawn again in both, so large tall ones are rarer than drawn.
    paper_shares, paper_aspects = _paper(height, width, len(changed))
    assert np.mean(shares) == pytest.approx(np.mean(paper_shares), abs=0.01)  # sd of a mean: 0.002
    assert np.mean(aspects) == pytest.approx(np.mean(paper_aspects), abs=0.06)  # sd: 0.02


def _paper(height: int, width: int, count: int) -> tuple[list[float], list[float]]:
    """Zhong et al.'s Algorithm 1 in NumPy: shares and aspect ratios of `count` rectangles."""
    rng = np.random.default_rng(0)
    shares: list[float] = []
    aspects: list[float] = []
    while len(shares) < count:
        area = rng.uniform(0.02, 0.4) * height * width
        aspect = rng.uniform(0.3, 1 / 0.3)
        tall, wide = round(np.sqrt(area * aspect)), round(np.sqrt(area / aspect))
        if 1 <= tall <= height and 1 <= wide <= width:
            shares.append(tall * wide / (height * width))
            aspects.append(tall / wide)
    return shares, aspects


def test_erasing_happens_at_its_rate_and_only_in_training() -> None:
    import tensorflow as tf

    from nas.search.training.erasing import RandomErasing

    erased = _erased(0.3).any(axis=(1, 2)).mean()
    assert erased == pytest.approx(0.3, abs=0.04)  # 2000 images: the binomial's 4 sd is 0.04
    assert not _erased(0.0).any()
    x = tf.fill((4, 8, 8, 1), BACKGROUND)
    assert (RandomErasing(1.0, seed=0)(x, training=False).numpy() == BACKGROUND).all()


def test_the_augmenter_erases_and_a_space_without_it_keeps_its_fingerprint_and_recipes() -> None:
    from nas.search.space import AugmentationSpec, space_from_dict
    from nas.search.training.erasing import RandomErasing
    from nas.search.training.train import make_augmenter

    augmenter = make_augmenter(AugmentationSpec(flip="horizontal", erasing=0.5), seed=0)
    assert augmenter is not None and isinstance(augmenter.layers[-1], RandomErasing)
    assert AugmentationSpec(erasing=0.5).active and not AugmentationSpec().active
    # A recipe stored before erasing existed compares equal to today's without it.
    before = {"flip": "horizontal", "rotation": 0.0, "crop": 0.1, "contrast": 0.0}
    assert AugmentationSpec(flip="horizontal", crop=0.1).recorded() == before
    assert AugmentationSpec(flip="horizontal", crop=0.1, erasing=0.5).recorded() == {**before, "erasing": 0.5}

    base = {
        "name": "s",
        "dataset": {"source": "digits", "image_size": 8, "augmentation": {"flip": "horizontal"}},
        "model": {"stages": [{"filters": 8}]},
    }
    plain = space_from_dict(base).fingerprint()

    def erasing(rate: float) -> str:
        dataset = {**base["dataset"], "augmentation": {"flip": "horizontal", "erasing": rate}}
        return space_from_dict({**base, "dataset": dataset}).fingerprint()

    assert erasing(0) == plain and "erasing" not in plain
    assert erasing(0.5) != plain  # the search's own augmentation changes what trials mean
    final = space_from_dict({**base, "final": {"augmentation": {"erasing": 0.5}}})
    assert final.fingerprint() == plain and final.spec.final.augmentation is not None
    with pytest.raises(NasError, match=r"final\.augmentation\.erasing: .*less than or equal to 1"):
        space_from_dict({**base, "final": {"augmentation": {"erasing": 1.5}}})
