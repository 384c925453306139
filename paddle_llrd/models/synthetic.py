"""A synthetic sequence-classification task for demos, examples and tests.

Each sequence starts with a ``[CLS]`` token (id 0) followed by ``seq_len - 1``
random tokens from ``1 .. vocab_size - 1``. The label is 1 when more than
half of them are *marked*: with ``rule="upper"`` a token is marked when it
lies in the upper half of the vocabulary (``t >= vocab_size // 2``), with
``rule="middle"`` when it lies in the middle half
(``vocab_size // 4 <= t < 3 * vocab_size // 4``). ``seq_len - 1`` is odd, so
there are no ties. A Transformer learns either in a few hundred steps: the
[CLS] position has to attend over the whole sequence. The two rules share the
counting skill, so a model pretrained on one is a fine-tuning start for the
other.

Example:
    >>> from paddle_llrd.models.synthetic import make_majority_task
    >>> ids, labels = make_majority_task(4, seq_len=8, vocab_size=16, seed=0)
    >>> ids.shape, labels.shape
    ((4, 8), (4,))
    >>> bool(((ids[:, 1:] >= 8).sum(1) > 3.5).astype("int64").tolist() == labels.tolist())
    True
"""
from __future__ import annotations

import numpy as np


def make_majority_task(
    num_samples: int, seq_len: int = 16, vocab_size: int = 64, seed: int = 0, rule: str = "upper"
) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(input_ids [num_samples, seq_len] int64, labels [num_samples] int64)``."""
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    if seq_len < 2 or seq_len % 2 != 0:
        raise ValueError(f"seq_len must be an even number >= 2 ([CLS] + an odd count), got {seq_len}")
    if vocab_size < 4:
        raise ValueError(f"vocab_size must be >= 4, got {vocab_size}")
    if rule not in ("upper", "middle"):
        raise ValueError(f"rule must be 'upper' or 'middle', got {rule!r}")
    rng = np.random.default_rng(seed)
    tokens = rng.integers(1, vocab_size, size=(num_samples, seq_len - 1))
    if rule == "upper":
        marked = tokens >= vocab_size // 2
    else:
        marked = (tokens >= vocab_size // 4) & (tokens < 3 * vocab_size // 4)
    labels = (marked.sum(axis=1) > (seq_len - 1) / 2).astype("int64")
    input_ids = np.concatenate([np.zeros((num_samples, 1), dtype="int64"), tokens], axis=1)
    return input_ids.astype("int64"), labels
