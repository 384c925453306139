"""Checks of user arguments that several of the package's classes share.

Each refuses a bad value with an exception that names the class, the argument
and what was expected, as a bare ``assert`` or Python's own error would not.
"""
from __future__ import annotations

import numbers
from typing import Any


def checked_count(value: Any, argument: str, *, owner: str, meaning: str) -> int:
    """``value`` as an int >= 0, else an error naming ``owner``'s ``argument``.

    ``TypeError`` for anything but an int (a bool is refused, a NumPy integer
    taken), with ``meaning`` saying what the count is; ``ValueError`` for a
    negative int.

    Examples:
        >>> checked_count(3, "n_layers", owner="AdamWDL",
        ...               meaning="the number of encoder layers")
        3
        >>> checked_count(-1, "total_steps", owner="WeightDecaySchedule",
        ...               meaning="a number of optimizer steps")
        Traceback (most recent call last):
        ...
        ValueError: WeightDecaySchedule: `total_steps` must be >= 0, got -1.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{owner}: `{argument}` must be an int >= 0 ({meaning}), "
            f"got {type(value).__name__} {value!r}."
        )
    if value < 0:
        raise ValueError(f"{owner}: `{argument}` must be >= 0, got {value!r}.")
    return int(value)
