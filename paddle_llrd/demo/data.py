"""The demo's data: scikit-learn's bundled 8x8 digits, split into two tasks.

The *source* task (pretraining) is to tell apart the ``source_digits``
(0-4 by default); the *target* task (fine-tuning) the other digits (5-9),
from only a few labelled images per class. Both tasks share the strokes a
lower layer learns, not the classes the head learns. Each task's images are
split once, by a fixed seed, into a training pool and a test set, so every
seed and optimizer is scored on the same test images.

Example:
    >>> from paddle_llrd.demo.data import load_transfer_task, few_shot_indices
    >>> task = load_transfer_task()
    >>> task.source_train.images.shape[1:], task.source_train.images.dtype
    ((1, 8, 8), dtype('float32'))
    >>> sorted(set(task.target_test.labels.tolist()))  # digits 5-9 relabelled 0-4
    [0, 1, 2, 3, 4]
    >>> import numpy as np
    >>> picked = few_shot_indices(task.target_pool.labels, per_class=3, rng=np.random.default_rng(0))
    >>> np.bincount(task.target_pool.labels[picked]).tolist()
    [3, 3, 3, 3, 3]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

DATASET_NAME = "scikit-learn digits"
_SPLIT_SEED = 1234  # fixed: the test sets never change with --seeds


@dataclass(frozen=True)
class LabelledImages:
    images: np.ndarray  # [n, 1, 8, 8] float32 in [0, 1]
    labels: np.ndarray  # [n] int64, 0 .. classes - 1

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, indices: np.ndarray) -> "LabelledImages":
        return LabelledImages(self.images[indices], self.labels[indices])


@dataclass(frozen=True)
class TransferTask:
    source_digits: tuple[int, ...]
    target_digits: tuple[int, ...]
    source_train: LabelledImages
    source_test: LabelledImages
    target_pool: LabelledImages  # the few-shot training images are drawn from here
    target_test: LabelledImages


def _load_digits() -> tuple[np.ndarray, np.ndarray]:
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise ImportError("the demo needs scikit-learn: `pip install paddle_llrd[demo]` or `pip install scikit-learn`") from None
    digits = load_digits()
    # Pixels are counts 0..16 in the bundled data.
    return (digits.images / 16.0).astype("float32")[:, None], digits.target.astype("int64")


def _relabelled(images: np.ndarray, digits: np.ndarray, chosen: Sequence[int]) -> LabelledImages:
    keep = np.isin(digits, chosen)
    relabel = {digit: index for index, digit in enumerate(chosen)}
    return LabelledImages(images[keep], np.array([relabel[d] for d in digits[keep]], dtype="int64"))


def _split(task: LabelledImages, test_fraction: float, rng: np.random.Generator) -> tuple[LabelledImages, LabelledImages]:
    order = rng.permutation(len(task))
    n_test = int(round(test_fraction * len(task)))
    return task.subset(np.sort(order[n_test:])), task.subset(np.sort(order[:n_test]))


def load_transfer_task(source_digits: Sequence[int] = (0, 1, 2, 3, 4), test_fraction: float = 0.3) -> TransferTask:
    """The two tasks; ``source_digits`` pretrain, the remaining digits are the target."""
    source = tuple(sorted(set(source_digits)))
    if not source or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not 0 <= d <= 9 for d in source):
        raise ValueError(f"`source_digits` must be digits 0-9, got {list(source_digits)!r}")
    target = tuple(d for d in range(10) if d not in source)
    if len(source) < 2 or len(target) < 2:
        raise ValueError(f"`source_digits` must leave at least two digits on each side, got {list(source)!r}")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"`test_fraction` must lie in (0, 1), got {test_fraction!r}")
    images, digits = _load_digits()
    rng = np.random.default_rng(_SPLIT_SEED)
    source_train, source_test = _split(_relabelled(images, digits, source), test_fraction, rng)
    target_pool, target_test = _split(_relabelled(images, digits, target), test_fraction, rng)
    return TransferTask(source, target, source_train, source_test, target_pool, target_test)


def few_shot_indices(labels: np.ndarray, per_class: int, rng: np.random.Generator) -> np.ndarray:
    """``per_class`` indices of each class in ``labels``, drawn without replacement, sorted."""
    if isinstance(per_class, bool) or not isinstance(per_class, int) or per_class < 1:
        raise ValueError(f"`per_class` must be an int >= 1, got {per_class!r}")
    picked = []
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        if len(members) < per_class:
            raise ValueError(f"`per_class`={per_class} but class {int(label)} has only {len(members)} images")
        picked.append(rng.choice(members, size=per_class, replace=False))
    return np.sort(np.concatenate(picked))


def random_shift(images: np.ndarray, max_shift: int, rng: np.random.Generator) -> np.ndarray:
    """Each image moved by its own random whole-pixel offset in ``[-max_shift, max_shift]``
    along each axis; pixels moved in from outside are 0 (the digits' background).

    >>> image = np.arange(9, dtype="float32").reshape(1, 1, 3, 3)
    >>> random_shift(image, 0, np.random.default_rng(0)).tolist() == image.tolist()
    True
    """
    if max_shift == 0:
        return images
    n, _, height, width = images.shape
    padded = np.pad(images, ((0, 0), (0, 0), (max_shift, max_shift), (max_shift, max_shift)))
    rows, cols = rng.integers(0, 2 * max_shift + 1, size=(2, n))
    return np.stack([padded[i, :, rows[i]:rows[i] + height, cols[i]:cols[i] + width] for i in range(n)])
