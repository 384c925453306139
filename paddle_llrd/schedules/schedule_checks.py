"""The rules of a schedule's arguments, shared by its ``get_*`` functions and classes.

Made of the primitives of :mod:`paddle_llrd.checks`; what is particular to
schedules is here: a number of steps (an integral float such as ``1000.0`` is
taken, as PaddleNLP's schedules take one), a warmup given as steps or as a
fraction of the training, an lr floor below the peak (an lr, or a fraction
of the peak), and Megatron-LM's ``lr_warmup_init``. A rule that belongs to one schedule family sits in its
module (``warmup_start`` and ``num_cycles`` in :mod:`.warmup`).
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Optional

from ..checks import checked_finite, checked_non_negative, is_integer, is_real_number

__all__ = ["checked_floor_lr", "checked_floor_ratio", "checked_step_count", "checked_warmup", "lr_warmup_init_fraction"]


def checked_step_count(value: Any, argument: str, minimum: int = 0) -> int:
    """A whole number of steps ``>= minimum``; an integral float such as ``1000.0`` is taken
    (PaddleNLP's schedules take one).

    Raises:
        TypeError: ``value`` is not a real number.
        ValueError: ``value`` is not whole, or below ``minimum``.

    Examples:
        >>> checked_step_count(1000.0, "num_training_steps", minimum=1)
        1000
        >>> checked_step_count(2.5, "num_warmup_steps")
        Traceback (most recent call last):
        ...
        ValueError: `num_warmup_steps` must be a whole number of steps, got 2.5.
    """
    if not is_real_number(value):
        raise TypeError(
            f"`{argument}` must be an int (a number of steps), got {value!r} of type {type(value).__name__}."
        )
    if not isinstance(value, numbers.Integral):
        value = float(value)
        if not math.isfinite(value) or not value.is_integer():
            raise ValueError(f"`{argument}` must be a whole number of steps, got {value!r}.")
    value = int(value)
    if value < minimum:
        raise ValueError(f"`{argument}` must be >= {minimum}, got {value}.")
    return value


def checked_warmup(warmup: Any, total_steps: int | None, argument: str = "warmup") -> int:
    """Warmup steps: an int as is, a float in ``[0, 1]`` as ``floor(warmup * total_steps)``.

    Raises:
        TypeError: ``warmup`` is not a real number.
        ValueError: a negative int, a float outside ``[0, 1]``, or a float with ``total_steps`` None.

    Examples:
        >>> checked_warmup(0.25, 16), checked_warmup(3, None)
        (4, 3)
    """
    if not is_real_number(warmup):
        raise TypeError(
            f"`{argument}` must be an int (number of steps) or a float (fraction of total_steps), "
            f"got {warmup!r} of type {type(warmup).__name__}."
        )
    if is_integer(warmup):
        return checked_step_count(warmup, argument)
    fraction = checked_finite(warmup, argument)
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(
            f"`{argument}` given as a float is a fraction of total_steps and must lie in [0, 1], got {fraction!r}; "
            "pass an int for a number of steps."
        )
    if total_steps is None:
        raise ValueError(
            f"`{argument}` is a float ({fraction!r}, a fraction of total_steps) but `total_steps` is None: "
            "pass `total_steps`, or an int number of warmup steps."
        )
    return int(math.floor(fraction * total_steps))


def checked_floor_lr(min_lr: Any, peak: float, peak_name: str) -> float:
    """``min_lr`` as a learning rate in ``[0, peak]``; errors name ``min_lr`` and ``peak_name``.

    Examples:
        >>> checked_floor_lr(0.2, 0.1, "max_lr")
        Traceback (most recent call last):
        ...
        ValueError: `min_lr` (0.2) must be <= `max_lr` (0.1).
    """
    floor = checked_non_negative(min_lr, "min_lr")
    if floor > peak:
        raise ValueError(f"`min_lr` ({floor!r}) must be <= `{peak_name}` ({peak!r}).")
    return floor


def checked_floor_ratio(
    learning_rate: float,
    min_lr: Optional[float],
    ratio: Optional[float],
    ratio_name: str,
    *,
    schedule: str,
    required: bool,
) -> float:
    """The floor as a fraction of ``learning_rate``, from at most (or, if ``required``, exactly) one of
    ``min_lr`` (an lr) and ``ratio`` (a fraction of the peak, named ``ratio_name``); 0 when neither is given.

    Raises:
        ValueError: both given; neither though ``required`` (the message names ``schedule``); a value out of range.

    Examples:
        >>> checked_floor_ratio(0.5, 0.1, None, "min_lr_rate", schedule="cosine_with_min_lr", required=True)
        0.2
        >>> checked_floor_ratio(0.5, None, 1.5, "min_lr_rate", schedule="cosine_with_min_lr", required=True)
        Traceback (most recent call last):
        ...
        ValueError: `min_lr_rate` must lie in [0, 1] (a fraction of learning_rate), got 1.5.
    """
    if min_lr is not None and ratio is not None:
        raise ValueError(
            f"Pass only one of `min_lr` (an absolute lr) and `{ratio_name}` (a fraction of learning_rate), "
            f"got min_lr={min_lr!r} and {ratio_name}={ratio!r}."
        )
    if min_lr is not None:
        min_lr = checked_floor_lr(min_lr, learning_rate, "learning_rate")
        return min_lr / learning_rate if learning_rate > 0 else 0.0
    if ratio is not None:
        ratio = checked_finite(ratio, ratio_name)
        if not 0.0 <= ratio <= 1.0:
            raise ValueError(f"`{ratio_name}` must lie in [0, 1] (a fraction of learning_rate), got {ratio!r}.")
        return ratio
    if required:
        raise ValueError(
            f"Scheduler {schedule!r} requires `min_lr` (an absolute lr) or `{ratio_name}` (a fraction of "
            "learning_rate), please provide one of them."
        )
    return 0.0


def lr_warmup_init_fraction(lr_warmup_init: Any, peak: float) -> float:
    """Megatron-LM's ``lr_warmup_init`` (an lr in ``[0, peak]``) as the fraction of ``peak`` the warmup starts at.

    The fraction is what the classes of :mod:`.warmup` take as ``warmup_start``.

    Raises:
        TypeError: ``lr_warmup_init`` is not a real number.
        ValueError: it is NaN, infinite, negative or above ``peak``.

    Examples:
        >>> lr_warmup_init_fraction(0.01, 0.1)
        0.1
        >>> lr_warmup_init_fraction(0.2, 0.1)
        Traceback (most recent call last):
        ...
        ValueError: `lr_warmup_init` (0.2) must be <= the peak learning rate (0.1): the warmup rises from it.
    """
    value = checked_non_negative(lr_warmup_init, "lr_warmup_init")
    if value > peak:
        raise ValueError(
            f"`lr_warmup_init` ({value!r}) must be <= the peak learning rate ({peak!r}): the warmup rises from it."
        )
    return value / peak if peak > 0 else 0.0
