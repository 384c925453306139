"""Checks of user arguments that several of the package's classes share.

Each ``checked_*`` function refuses a bad value with an exception that names
the class, the argument and what was expected, as a bare ``assert`` or
Python's own error would not. :func:`is_real_number` is the test of a real
number they share with the optimizer's step. :func:`did_you_mean` is the
suggestion that every refusal of an unknown name (a schedule, a schedule's
option, a config key) ends with. :func:`checked_block_regex` is the one rule
of a ``layer_map``/``pattern`` regular expression.
"""
from __future__ import annotations

import difflib
import math
import numbers
import os
import re
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


def is_integer(value: Any) -> bool:
    """Whether ``value`` is an integer where a count is expected: an int or a NumPy integer, not a bool.

    Examples:
        >>> is_integer(3), is_integer(True), is_integer(3.0)
        (True, False, False)
    """
    return not isinstance(value, bool) and isinstance(value, numbers.Integral)


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
    if not is_integer(value):
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
    if not is_integer(value):
        raise TypeError(f"`{argument}` must be an int >= {minimum} ({meaning}), got {type(value).__name__} {value!r}.")
    if value < minimum:
        raise ValueError(f"`{argument}` must be an int >= {minimum} ({meaning}), got {value!r}.")
    return int(value)


# --- optim ---
def checked_positive_int(value: Any, what: str) -> int:
    """``value`` as an int >= 1, else an error starting with ``what`` (the owner and argument).

    ``TypeError`` for anything but an integer (:func:`is_integer`: a bool, a
    float, a str are refused); ``ValueError`` below 1.

    Examples:
        >>> checked_positive_int(2, "AdamWDL: `num_threads`")
        2
        >>> checked_positive_int(0, "AdamWDL: `num_threads`")
        Traceback (most recent call last):
        ...
        ValueError: AdamWDL: `num_threads` must be an int >= 1, got 0
    """
    if not is_integer(value):
        raise TypeError(f"{what} must be an int >= 1 (or None), got {type(value).__name__} {value!r}")
    if value < 1:
        raise ValueError(f"{what} must be an int >= 1, got {value!r}")
    return int(value)


def environment_positive_int(name: str) -> int | None:
    """The environment variable ``name`` as an int >= 1, None if unset or empty; else ``ValueError`` naming it.

    Examples:
        >>> import os
        >>> os.environ["LLRD_EXAMPLE"] = "two"
        >>> environment_positive_int("LLRD_EXAMPLE")
        Traceback (most recent call last):
        ...
        ValueError: environment variable LLRD_EXAMPLE must be an integer >= 1, got 'two'
        >>> del os.environ["LLRD_EXAMPLE"]
        >>> environment_positive_int("LLRD_EXAMPLE") is None
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


# --- layer_decay ---

_BLOCK_REGEX_EXAMPLE = r"'^stages\.(\d+)\.'"


def block_regex_problem(text: str) -> str | None:
    r"""Why ``text`` is no block regex, or ``None`` when it is one.

    A block regex (``layer_map``, ``LayerMap(pattern=...)``, ``lr-table
    --pattern``) is a regular expression with exactly one group, which
    captures the block index.

    Examples:
        >>> block_regex_problem(r"^stages\.(\d+)\.") is None
        True
        >>> print(block_regex_problem(r"(a)(\d+)"))
        has 2 groups; it needs exactly one, capturing the block index, e.g. '^stages\.(\d+)\.'
    """
    try:
        groups = re.compile(text).groups
    except re.error as exc:
        return f"is no regular expression: {exc}"
    if groups != 1:
        return f"has {groups} groups; it needs exactly one, capturing the block index, e.g. {_BLOCK_REGEX_EXAMPLE}"
    return None


def checked_block_regex(value: Any, argument: str, *, families: Iterable[str] = ()) -> str:
    r"""``value`` when it is a block regex (see :func:`block_regex_problem`),
    ``"auto"`` or one of ``families``; else an error naming ``argument``.

    Raises:
        TypeError: ``value`` is not a str.
        ValueError: ``value`` is no family and no regular expression with
            exactly one group.

    Examples:
        >>> checked_block_regex(r"^stages\.(\d+)\.", "pattern")
        '^stages\\.(\\d+)\\.'
        >>> checked_block_regex("lama", "layer_map", families=["bert", "llama"])
        Traceback (most recent call last):
        ...
        ValueError: `layer_map` must be 'auto', a family (bert, llama) or a regular expression whose one group captures the block index; 'lama' is no family and has 0 groups; it needs exactly one, capturing the block index, e.g. '^stages\.(\d+)\.'
    """
    names = sorted(families)
    kinds = f"'auto', a family ({', '.join(names)}) or a regular expression" if names else "a regular expression"
    if not isinstance(value, str):
        raise TypeError(f"`{argument}` must be {kinds} (a str), got {type(value).__name__} {value!r}")
    if names and (value == "auto" or value in names):
        return value
    problem = block_regex_problem(value)
    if problem is not None:
        no_family = "is no family and " if names else ""
        raise ValueError(
            f"`{argument}` must be {kinds} whose one group captures the block index; {value!r} {no_family}{problem}"
        )
    return value


# --- integrations ---
def checked_field_number(value: Any, field: str, expected: str) -> float:
    """A ``TrainingArguments`` field that must be a real number, as a float; else ``TypeError``.

    The range is the caller's to check; ``expected`` says it in the message.

    Examples:
        >>> checked_field_number(0.8, "layerwise_decay", "a real number such as 0.8")
        0.8
        >>> checked_field_number("0.8", "layerwise_decay", "a real number such as 0.8")
        Traceback (most recent call last):
        ...
        TypeError: layerwise_decay must be a real number such as 0.8, got str '0.8'
    """
    if not is_real_number(value):
        raise TypeError(f"{field} must be {expected}, got {type(value).__name__} {value!r}")
    return float(value)


def checked_field_bool(value: Any, field: str) -> bool:
    """A ``TrainingArguments`` field that must be a bool; else ``TypeError``.

    Examples:
        >>> checked_field_bool(True, "ema_eval")
        True
        >>> checked_field_bool("yes", "ema_eval")
        Traceback (most recent call last):
        ...
        TypeError: ema_eval must be a bool (true/false), got str 'yes'
    """
    if not isinstance(value, bool):
        raise TypeError(f"{field} must be a bool (true/false), got {type(value).__name__} {value!r}")
    return value


# --- schedules ---
# The rules of the learning-rate schedules' arguments: the scheduler classes,
# the registry functions and ReduceOnPlateauSchedule check with these.
def checked_finite_real(value: Any, argument: str) -> float:
    """``value`` as a finite float of either sign, else an error naming ``argument``.

    Raises:
        TypeError: ``value`` is not a real number (a bool is refused).
        ValueError: ``value`` is NaN or infinite.

    Examples:
        >>> checked_finite_real(-2, "power")
        -2.0
        >>> checked_finite_real(float("nan"), "power")
        Traceback (most recent call last):
        ...
        ValueError: `power` must be finite, got nan.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"`{argument}` must be a real number, got {value!r} of type {type(value).__name__}.")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"`{argument}` must be finite, got {number!r}.")
    return number


def checked_non_negative_real(value: Any, argument: str = "learning_rate") -> float:
    """``value`` as a finite float ``>= 0`` (a learning rate, a threshold), else an error naming ``argument``.

    Raises:
        TypeError: ``value`` is not a real number.
        ValueError: ``value`` is NaN, infinite or negative.

    Examples:
        >>> checked_non_negative_real(-0.1)
        Traceback (most recent call last):
        ...
        ValueError: `learning_rate` must be >= 0, got -0.1.
    """
    number = checked_finite_real(value, argument)
    if number < 0:
        raise ValueError(f"`{argument}` must be >= 0, got {number!r}.")
    return number


def checked_step_count(value: Any, argument: str, minimum: int = 0) -> int:
    """A whole number of steps ``>= minimum``; an integral float such as ``1000.0`` is taken.

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
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
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
    if isinstance(warmup, bool) or not isinstance(warmup, numbers.Real):
        raise TypeError(
            f"`{argument}` must be an int (number of steps) or a float (fraction of total_steps), "
            f"got {warmup!r} of type {type(warmup).__name__}."
        )
    if isinstance(warmup, numbers.Integral):
        return checked_step_count(warmup, argument)
    fraction = checked_finite_real(warmup, argument)
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
    floor = checked_non_negative_real(min_lr, "min_lr")
    if floor > peak:
        raise ValueError(f"`min_lr` ({floor!r}) must be <= `{peak_name}` ({peak!r}).")
    return floor


def checked_warmup_start(lr_warmup_init: Any, peak: float) -> float:
    """Megatron-LM's ``lr_warmup_init`` (an lr in ``[0, peak]``) as the fraction of ``peak`` the warmup starts at.

    Raises:
        TypeError: ``lr_warmup_init`` is not a real number.
        ValueError: it is NaN, infinite, negative or above ``peak``.

    Examples:
        >>> checked_warmup_start(0.01, 0.1)
        0.1
        >>> checked_warmup_start(0.2, 0.1)
        Traceback (most recent call last):
        ...
        ValueError: `lr_warmup_init` (0.2) must be <= the peak learning rate (0.1): the warmup rises from it.
    """
    value = checked_non_negative_real(lr_warmup_init, "lr_warmup_init")
    if value > peak:
        raise ValueError(
            f"`lr_warmup_init` ({value!r}) must be <= the peak learning rate ({peak!r}): the warmup rises from it."
        )
    return value / peak if peak > 0 else 0.0


def checked_choice(value: Any, argument: str, choices: tuple[str, ...]) -> str:
    """``value`` lower-cased if it is one of ``choices`` (compared without case), else ``ValueError``.

    Examples:
        >>> checked_choice("MIN", "mode", ("min", "max"))
        'min'
    """
    if not isinstance(value, str) or value.lower() not in choices:
        raise ValueError(f"`{argument}` must be one of {', '.join(map(repr, choices))}, got {value!r}.")
    return value.lower()
