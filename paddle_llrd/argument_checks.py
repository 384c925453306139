"""Checks of user arguments that several of the package's classes share.

Each ``checked_*`` function refuses a bad value with an exception that names
the class, the argument and what was expected, as a bare ``assert`` or
Python's own error would not. :func:`is_real_number` is the test of a real
number they share with the optimizer's step. :func:`did_you_mean` is the
suggestion that every refusal of an unknown name (a schedule, a schedule's
option, a config key) ends with.
"""
from __future__ import annotations

import difflib
import math
import numbers
import os
import sys
import warnings
from typing import Any, Iterable

_PACKAGE_DIRECTORY = os.path.dirname(os.path.abspath(__file__)) + os.sep


def is_real_number(value: Any) -> bool:
    """A Python/NumPy real number, not a bool.

    Examples:
        >>> is_real_number(0.5), is_real_number(3), is_real_number(True), is_real_number("1")
        (True, True, False, False)
    """
    if type(value) is float:  # the common case (an optimizer step asks per parameter), without an ABC check
        return True
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``" Did you mean 'closest'?"`` for the choice closest to ``word``, or ``""`` when none is close.

    Closeness is :func:`difflib.get_close_matches`' ratio (0.6 or more),
    compared without case, so ``"Cosine"`` finds ``"cosine"``.

    Examples:
        >>> did_you_mean("layerwise_decay_rate", ["layer_map", "layerwise_decay", "learning_rate"])
        " Did you mean 'layerwise_decay'?"
        >>> did_you_mean("xyz", ["linear", "cosine"])
        ''
    """
    by_folded = {}
    for choice in choices:
        by_folded.setdefault(str(choice).lower(), str(choice))
    close = difflib.get_close_matches(str(word).lower(), list(by_folded), n=1)
    return f" Did you mean {by_folded[close[0]]!r}?" if close else ""


def checked_count(value: Any, argument: str, *, owner: str, meaning: str, minimum: int = 0) -> int:
    """``value`` as an int >= ``minimum``, else an error naming ``owner``'s ``argument``.

    ``TypeError`` for anything but an int (a bool is refused, a NumPy integer
    taken), with ``meaning`` saying what the count is; ``ValueError`` for an
    int below ``minimum``.

    Examples:
        >>> checked_count(3, "n_layers", owner="AdamWDL",
        ...               meaning="the number of encoder layers")
        3
        >>> checked_count(-1, "total_steps", owner="WeightDecaySchedule",
        ...               meaning="a number of optimizer steps")
        Traceback (most recent call last):
        ...
        ValueError: WeightDecaySchedule: `total_steps` must be >= 0, got -1.
        >>> checked_count(0, "n_layers", owner="LLRDTrainer",
        ...               meaning="the number of encoder layers", minimum=1)
        Traceback (most recent call last):
        ...
        ValueError: LLRDTrainer: `n_layers` must be >= 1, got 0.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{owner}: `{argument}` must be an int >= {minimum} ({meaning}), "
            f"got {type(value).__name__} {value!r}."
        )
    if value < minimum:
        raise ValueError(f"{owner}: `{argument}` must be >= {minimum}, got {value!r}.")
    return int(value)


def checked_real(
    value: Any, argument: str, *, owner: str | None = None, positive: bool = False, advice: str = ""
) -> float:
    """``value`` as a finite float >= 0 (> 0 with ``positive``), else an error naming ``argument``.

    ``TypeError`` for anything but a real number (a bool is refused, a NumPy
    float taken); ``ValueError`` for NaN, an infinity or a value out of range,
    followed by ``advice`` when given. ``owner``, when given, starts the
    message.

    Examples:
        >>> checked_real(0.1, "start_wd", owner="WeightDecaySchedule")
        0.1
        >>> checked_real(0, "layer_decay", positive=True, advice="usually in (0, 1]")
        Traceback (most recent call last):
        ...
        ValueError: `layer_decay` must be a finite number > 0, got 0 (usually in (0, 1]).
    """
    prefix = f"{owner}: " if owner else ""
    bound = "> 0" if positive else ">= 0"
    if not is_real_number(value):
        raise TypeError(f"{prefix}`{argument}` must be a real number {bound}, got {type(value).__name__} {value!r}.")
    number = float(value)
    if not (math.isfinite(number) and (number > 0.0 if positive else number >= 0.0)):
        suffix = f" ({advice})" if advice else ""
        raise ValueError(f"{prefix}`{argument}` must be a finite number {bound}, got {value!r}{suffix}.")
    return number


def checked_step_index(value: Any, argument: str = "last_epoch") -> int:
    """A schedule's step counter: an int (not a bool), else ``TypeError``; too small, ``ValueError``.

    ``last_epoch`` (the constructor's argument and ``set_state_dict``'s entry)
    is the last step taken, ``>= -1`` (-1 before the first step); ``epoch``
    (``scheduler.step(epoch)``) is the step whose lr is computed, ``>= 0``.
    Every schedule of the package checks both with this one rule.

    Examples:
        >>> checked_step_index(-1), checked_step_index(7, "epoch")
        (-1, 7)
        >>> checked_step_index(-5, "epoch")
        Traceback (most recent call last):
        ...
        ValueError: `epoch` must be an int >= 0 (the step to move to), got -5.
        >>> checked_step_index(2.5, "epoch")
        Traceback (most recent call last):
        ...
        TypeError: `epoch` must be an int >= 0 (the step to move to), got float 2.5.
    """
    minimum, meaning = (-1, "the last step taken; -1 before the first") if argument == "last_epoch" else (
        0, "the step to move to")
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{argument}` must be an int >= {minimum} ({meaning}), got {type(value).__name__} {value!r}.")
    if value < minimum:
        raise ValueError(f"`{argument}` must be an int >= {minimum} ({meaning}), got {value!r}.")
    return int(value)


# --- optim ---
def checked_positive_int(value: Any, what: str) -> int:
    """``value`` as an int >= 1, else an error starting with ``what`` (the owner and argument).

    ``TypeError`` for anything but a Python int (a bool, a float, a str are
    refused); ``ValueError`` below 1.

    Examples:
        >>> checked_positive_int(2, "AdamWDL: `num_threads`")
        2
        >>> checked_positive_int(0, "AdamWDL: `num_threads`")
        Traceback (most recent call last):
        ...
        ValueError: AdamWDL: `num_threads` must be an int >= 1, got 0
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int >= 1 (or None), got {type(value).__name__} {value!r}")
    if value < 1:
        raise ValueError(f"{what} must be an int >= 1, got {value!r}")
    return value


def environment_positive_int(name: str) -> int | None:
    """The environment variable ``name`` as an int >= 1, None if unset or empty; else ``ValueError`` naming it.

    Examples:
        >>> import os
        >>> os.environ["PADDLE_LLRD_EXAMPLE"] = "two"
        >>> environment_positive_int("PADDLE_LLRD_EXAMPLE")
        Traceback (most recent call last):
        ...
        ValueError: environment variable PADDLE_LLRD_EXAMPLE must be an integer >= 1, got 'two'
        >>> del os.environ["PADDLE_LLRD_EXAMPLE"]
        >>> environment_positive_int("PADDLE_LLRD_EXAMPLE") is None
        True
    """
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"environment variable {name} must be an integer >= 1, got {text!r}") from None
    return value


def checked_unit_fraction(value: Any, argument: str) -> float:
    """``value`` as a float in [0, 1] (a decay rate), else ``TypeError`` (not a real
    number; a bool is refused) or ``ValueError`` (outside [0, 1], NaN) naming ``argument``.

    Examples:
        >>> checked_unit_fraction(0.999, "decay")
        0.999
        >>> checked_unit_fraction(1.5, "decay")
        Traceback (most recent call last):
        ...
        ValueError: decay must lie in [0, 1], got 1.5
    """
    if not is_real_number(value):
        raise TypeError(f"{argument} must be a real number in [0, 1], got {type(value).__name__} {value!r}")
    number = float(value)
    if not 0.0 <= number <= 1.0:  # NaN fails both comparisons
        raise ValueError(f"{argument} must lie in [0, 1], got {number!r}")
    return number


#: In the warning about a layer-wise decay above 1 (a Trainer filters its second copy on it).
LAYERWISE_DECAY_ABOVE_ONE = "is greater than 1, so lower layers train faster than the head"


def checked_layerwise_decay(value: Any, argument: str = "layerwise_decay", *, owner: str | None = None) -> float:
    """A layer-wise lr decay as a float, finite and > 0; a ``UserWarning`` when it is > 1.

    The one rule of :class:`~paddle_llrd.AdamWDL`'s ``layerwise_decay``,
    :func:`~paddle_llrd.layer_decay_param_groups`' ``layer_decay`` and the
    Trainer/CLI field ``layerwise_decay``. A decay ``d > 1`` is accepted (a
    ratio is ``d ** k``, any positive ``d`` gives numbers) but inverts
    layer-wise decay: block ``i`` of ``L`` trains ``d ** (L - i)`` times
    faster than the head, so the warning names the value.

    Raises:
        TypeError: ``value`` is not a real number (a bool is refused).
        ValueError: ``value`` is NaN, infinite or ``<= 0``.

    Examples:
        >>> checked_layerwise_decay(0.8)
        0.8
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     checked_layerwise_decay(1.5, owner="AdamWDL")
        1.5
        >>> print(caught[0].message)  # doctest: +ELLIPSIS
        AdamWDL: `layerwise_decay`=1.5 is greater than 1, so lower layers train faster than the head ...
    """
    number = checked_real(
        value, argument, owner=owner, positive=True,
        advice="usually in (0, 1]; 1.0 turns layer-wise decay off; to freeze layers set their "
               "parameters' stop_gradient=True",
    )
    if number > 1.0:
        prefix = f"{owner}: " if owner else ""
        warnings.warn(
            f"{prefix}`{argument}`={value!r} {LAYERWISE_DECAY_ABOVE_ONE} (each block trains {number!r} times "
            f"as fast as the block above it, the embeddings fastest). Layer-wise decay takes a value in "
            f"(0, 1), e.g. 0.8; accepted as given.",
            UserWarning,
            stacklevel=stacklevel_outside_package(),
        )
    return number


def stacklevel_outside_package() -> int:
    """The ``stacklevel`` for :func:`warnings.warn` that points at the first caller outside ``paddle_llrd``.

    Call it in the argument list of ``warnings.warn``: the warning then names
    the user's line however deep in the package it was raised (a registry
    function building a scheduler class, a Trainer building the optimizer).
    """
    level = 1
    frame = sys._getframe(1)  # the function that warns
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIRECTORY):
        frame = frame.f_back
        level += 1
    return level
