"""What the demo measures, as plain functions of arrays.

Example:
    >>> import numpy as np
    >>> accuracy(np.array([[2.0, 1.0], [0.0, 3.0], [5.0, 4.0]]), np.array([0, 1, 1]))
    0.6666666666666666
    >>> relative_layer_change({"a": np.array([3.0, 4.0])}, {"a": np.array([0.0, 4.0])}, lambda name: "L")
    {'L': 0.6}
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np


def accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    """The fraction of rows of ``logits`` whose largest entry is at ``labels``."""
    logits, labels = np.asarray(logits), np.asarray(labels)
    if logits.ndim != 2 or labels.shape != (logits.shape[0],) or logits.shape[0] == 0:
        raise ValueError(f"`logits` must be [n, classes] and `labels` [n] with n >= 1, got {logits.shape} and {labels.shape}")
    return float(np.mean(np.argmax(logits, axis=1) == labels))


def relative_layer_change(
    before: Mapping[str, np.ndarray], after: Mapping[str, np.ndarray], label_of: Callable[[str], str]
) -> dict[str, float]:
    """``||after - before|| / ||before||`` per layer, over the layer's parameters taken together.

    Parameters are grouped by ``label_of(name)``; the norms are Frobenius norms
    of all of a group's entries, so a big matrix counts more than a bias. Only
    the names in ``before`` are compared (a freshly initialised head has no
    "before"). Labels keep the order in which ``before`` first names them.
    """
    squared_change: dict[str, float] = {}
    squared_norm: dict[str, float] = {}
    for name, old in before.items():
        if name not in after:
            raise KeyError(f"parameter {name!r} is missing from `after`")
        old = np.asarray(old, dtype="float64")
        new = np.asarray(after[name], dtype="float64")
        if old.shape != new.shape:
            raise ValueError(f"parameter {name!r} changed shape: {old.shape} -> {new.shape}")
        label = label_of(name)
        squared_change[label] = squared_change.get(label, 0.0) + float(np.sum((new - old) ** 2))
        squared_norm[label] = squared_norm.get(label, 0.0) + float(np.sum(old**2))
    return {
        label: float(np.sqrt(squared_change[label]) / np.sqrt(squared_norm[label])) if squared_norm[label] else float("inf")
        for label in squared_change
    }


def mean_and_spread(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value).

    >>> mean_and_spread([0.5, 0.7, 0.9])
    (0.7, 0.2)
    """
    array = np.asarray(values, dtype="float64")
    spread = float(np.std(array, ddof=1)) if len(array) > 1 else 0.0
    return float(np.mean(array)), spread
