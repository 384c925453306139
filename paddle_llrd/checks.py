"""The primitives every check of a user's value is made of, with one message shape.

Each ``checked_*`` function takes the value, the argument's name and (keyword)
its ``owner`` (the class or function that takes it), and returns the value
converted, or raises::

    <owner>: `<argument>` must be <what is expected>, got <value>.

``TypeError`` when the value has the wrong type (the message says the type
expected, ``a real number >= 0``, and shows the type given: ``got str
'0.8'``), ``ValueError`` when it is out of range (``a finite number >= 0``,
``got nan``). Without an
owner the message starts at the argument. ``argument`` is the name, which the
message puts in backticks; a phrase that already names it with backticks
(``parameter group 1's `beta1```) is shown as it is.

A component's own argument checks sit beside the component and are made of
these: the optimizer's in :mod:`paddle_llrd.optim.optimizer_checks`, the
schedules' in :mod:`paddle_llrd.schedules.schedule_checks`, the Trainer
fields' in :mod:`paddle_llrd.integrations.training_arguments`, a layer map's
in :mod:`paddle_llrd.layer_decay.layer_maps`.

Examples:
    >>> checked_non_negative(0.01, "weight_decay", owner="AdamWDL")
    0.01
    >>> checked_non_negative("0.01", "weight_decay", owner="AdamWDL")
    Traceback (most recent call last):
    ...
    TypeError: AdamWDL: `weight_decay` must be a real number >= 0, got str '0.01'.
    >>> checked_in_range(1.5, "beta1", owner="AdamWDL", low=0.0, high=1.0, high_open=True)
    Traceback (most recent call last):
    ...
    ValueError: AdamWDL: `beta1` must be in [0, 1), got 1.5.
"""
from __future__ import annotations

import contextlib
import contextvars
import difflib
import math
import numbers
import os
from typing import Any, Iterable, Iterator

__all__ = [
    "checked_bool",
    "checked_choice",
    "checked_count",
    "checked_finite",
    "checked_in_range",
    "checked_non_negative",
    "checked_positive",
    "checked_step_index",
    "checks_named",
    "did_you_mean",
    "environment_count",
    "is_integer",
    "is_non_negative_number",
    "is_real_number",
    "optimizer_name",
    "refusal",
]

# The optimizer AdamWDL's messages name: AdamWDL, or the subclass whose code runs (checks_named).
_OPTIMIZER_NAME: contextvars.ContextVar[str] = contextvars.ContextVar("paddle_llrd_optimizer_name", default="AdamWDL")


@contextlib.contextmanager
def checks_named(optimizer: str) -> Iterator[None]:
    """Within the block, the optimizer's checks and refusals name ``optimizer`` (a subclass of
    AdamWDL, as ``paddle_llrd.AdamW`` runs AdamWDL's constructor and step) instead of AdamWDL.

    Examples:
        >>> with checks_named("AdamW"):
        ...     optimizer_name()
        'AdamW'
        >>> optimizer_name()
        'AdamWDL'
    """
    token = _OPTIMIZER_NAME.set(optimizer)
    try:
        yield
    finally:
        _OPTIMIZER_NAME.reset(token)


def optimizer_name() -> str:
    """The optimizer the messages name now (:func:`checks_named`)."""
    return _OPTIMIZER_NAME.get()


def is_real_number(value: Any) -> bool:
    """A Python/NumPy real number, not a bool.

    Examples:
        >>> is_real_number(0.5), is_real_number(3), is_real_number(True), is_real_number("1")
        (True, True, False, False)
    """
    if type(value) is float:  # the common case (an optimizer step asks per parameter), without an ABC check
        return True
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_integer(value: Any) -> bool:
    """An int or a NumPy integer, not a bool (where a count is expected).

    Examples:
        >>> is_integer(3), is_integer(True), is_integer(3.0)
        (True, False, False)
    """
    return not isinstance(value, bool) and isinstance(value, numbers.Integral)


def is_non_negative_number(value: Any) -> bool:
    """A real number (not a bool), finite and ``>= 0``: a learning rate, a weight decay, a ratio.

    The rule of :func:`checked_non_negative`, for a check whose message is
    about a function's answer rather than an argument.

    Examples:
        >>> is_non_negative_number(0.0), is_non_negative_number(float("inf")), is_non_negative_number(-1)
        (True, False, False)
    """
    return is_real_number(value) and math.isfinite(value) and value >= 0.0


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


def refusal(argument: str, expected: str, got: str, *, owner: str | None = None, advice: str = "") -> str:
    """The one message shape: ``"<owner>: `<argument>` must be <expected>, got <got> (<advice>)."``.

    Examples:
        >>> refusal("n_layers", "an int >= 0", "-1", owner="LayerMap")
        'LayerMap: `n_layers` must be an int >= 0, got -1.'
        >>> refusal("parameter group 1's `beta1`", "in [0, 1)", "1.5")
        "parameter group 1's `beta1` must be in [0, 1), got 1.5."
    """
    named = argument if "`" in argument else f"`{argument}`"
    prefix = f"{owner}: " if owner else ""
    suffix = f" ({advice})" if advice else ""
    return f"{prefix}{named} must be {expected}, got {got}{suffix}."


def _typed(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


def _real(value: Any, argument: str, expected: str, owner: str | None) -> float:
    if not is_real_number(value):
        raise TypeError(refusal(argument, expected, _typed(value), owner=owner))
    return float(value)


def checked_finite(value: Any, argument: str, *, owner: str | None = None) -> float:
    """``value`` as a finite float of either sign.

    Raises:
        TypeError: not a real number (a bool is refused, a NumPy float taken).
        ValueError: NaN or an infinity.

    Examples:
        >>> checked_finite(-2, "power")
        -2.0
        >>> checked_finite(float("nan"), "power")
        Traceback (most recent call last):
        ...
        ValueError: `power` must be a finite number, got nan.
    """
    number = _real(value, argument, "a real number", owner)
    if not math.isfinite(number):
        raise ValueError(refusal(argument, "a finite number", repr(value), owner=owner))
    return number


def checked_non_negative(value: Any, argument: str, *, owner: str | None = None, advice: str = "") -> float:
    """``value`` as a finite float ``>= 0`` (a learning rate, a weight decay, a threshold).

    Raises:
        TypeError: not a real number (a bool is refused).
        ValueError: NaN, an infinity or negative; ``advice`` follows in parentheses.

    Examples:
        >>> checked_non_negative(-0.1, "learning_rate")
        Traceback (most recent call last):
        ...
        ValueError: `learning_rate` must be a finite number >= 0, got -0.1.
    """
    number = _real(value, argument, "a real number >= 0", owner)
    if not is_non_negative_number(number):
        raise ValueError(refusal(argument, "a finite number >= 0", repr(value), owner=owner, advice=advice))
    return number


def checked_positive(value: Any, argument: str, *, owner: str | None = None, advice: str = "") -> float:
    """``value`` as a finite float ``> 0``.

    Raises:
        TypeError: not a real number (a bool is refused).
        ValueError: NaN, an infinity, 0 or negative; ``advice`` follows in parentheses.

    Examples:
        >>> checked_positive(0, "layer_decay", advice="usually in (0, 1]")
        Traceback (most recent call last):
        ...
        ValueError: `layer_decay` must be a finite number > 0, got 0 (usually in (0, 1]).
    """
    number = _real(value, argument, "a real number > 0", owner)
    if not (math.isfinite(number) and number > 0.0):
        raise ValueError(refusal(argument, "a finite number > 0", repr(value), owner=owner, advice=advice))
    return number


def checked_in_range(
    value: Any, argument: str, *, low: float, high: float, low_open: bool = False, high_open: bool = False,
    owner: str | None = None, advice: str = "",
) -> float:
    """``value`` as a float in the interval from ``low`` to ``high`` (each end closed unless ``*_open``).

    Raises:
        TypeError: not a real number (a bool is refused).
        ValueError: outside the interval, or NaN.

    Examples:
        >>> checked_in_range(0.999, "decay", low=0.0, high=1.0)
        0.999
        >>> checked_in_range(1.0, "ema_decay", low=0.0, high=1.0, high_open=True, advice="0 turns it off")
        Traceback (most recent call last):
        ...
        ValueError: `ema_decay` must be in [0, 1), got 1.0 (0 turns it off).
    """
    interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    number = _real(value, argument, f"a real number in {interval}", owner)
    above = number > low if low_open else number >= low
    below = number < high if high_open else number <= high
    if not (above and below):  # NaN fails both
        raise ValueError(refusal(argument, f"in {interval}", repr(value), owner=owner, advice=advice))
    return number


def checked_count(
    value: Any, argument: str, *, owner: str | None = None, minimum: int = 0, meaning: str = ""
) -> int:
    """``value`` as an int ``>= minimum`` (a number of layers, steps, threads); ``meaning``, when
    given, says in the message what the count is.

    Raises:
        TypeError: not an int (a bool and a float are refused, a NumPy integer taken).
        ValueError: below ``minimum``.

    Examples:
        >>> checked_count(3, "n_layers", owner="AdamWDL", meaning="the number of blocks")
        3
        >>> checked_count(2.5, "n_layers", owner="AdamWDL", meaning="the number of blocks")
        Traceback (most recent call last):
        ...
        TypeError: AdamWDL: `n_layers` must be an int >= 0 (the number of blocks), got float 2.5.
        >>> checked_count(0, "num_threads", owner="AdamWDL", minimum=1)
        Traceback (most recent call last):
        ...
        ValueError: AdamWDL: `num_threads` must be an int >= 1, got 0.
    """
    expected = f"an int >= {minimum}" + (f" ({meaning})" if meaning else "")
    if not is_integer(value):
        raise TypeError(refusal(argument, expected, _typed(value), owner=owner))
    if value < minimum:
        raise ValueError(refusal(argument, expected, repr(value), owner=owner))
    return int(value)


def checked_step_index(value: Any, argument: str = "last_epoch", *, owner: str | None = None) -> int:
    """A schedule's step counter: ``last_epoch`` (the last step taken, ``>= -1``, -1 before the
    first; a constructor's argument and ``set_state_dict``'s entry) or ``epoch`` (the step to move
    to, ``>= 0``: ``scheduler.step(epoch)``).

    Raises:
        TypeError: not an int (a bool is refused).
        ValueError: too small.

    Examples:
        >>> checked_step_index(-1), checked_step_index(7, "epoch")
        (-1, 7)
        >>> checked_step_index(-5, "epoch")
        Traceback (most recent call last):
        ...
        ValueError: `epoch` must be an int >= 0 (the step to move to), got -5.
    """
    if argument == "last_epoch":
        return checked_count(value, argument, owner=owner, minimum=-1, meaning="the last step taken; -1 before the first")
    return checked_count(value, argument, owner=owner, minimum=0, meaning="the step to move to")


def checked_choice(
    value: Any, argument: str, choices: Iterable[str], *, owner: str | None = None, ignore_case: bool = True
) -> str:
    """``value`` as the choice it names (compared without case unless ``ignore_case`` is False);
    else ``ValueError`` listing the choices and ending with the closest one (:func:`did_you_mean`).

    Examples:
        >>> checked_choice("MIN", "mode", ("min", "max"))
        'min'
        >>> checked_choice("cosin", "style", ("constant", "linear", "cosine"))
        Traceback (most recent call last):
        ...
        ValueError: `style` must be one of 'constant', 'linear', 'cosine', got 'cosin'. Did you mean 'cosine'?
    """
    names = tuple(choices)
    by_key = {(name.lower() if ignore_case else name): name for name in names}
    if isinstance(value, str) and (value.lower() if ignore_case else value) in by_key:
        return by_key[value.lower() if ignore_case else value]
    hint = did_you_mean(value, names) if isinstance(value, str) else ""
    raise ValueError(refusal(argument, f"one of {', '.join(map(repr, names))}", repr(value), owner=owner) + hint)


def checked_bool(value: Any, argument: str, *, owner: str | None = None) -> bool:
    """``value`` when it is a bool (not ``1``, not ``"yes"``); else ``TypeError``.

    Examples:
        >>> checked_bool("yes", "ema_eval")
        Traceback (most recent call last):
        ...
        TypeError: `ema_eval` must be a bool (true/false), got str 'yes'.
    """
    if not isinstance(value, bool):
        raise TypeError(refusal(argument, "a bool (true/false)", _typed(value), owner=owner))
    return value


def environment_count(name: str, *, minimum: int = 1) -> int | None:
    """The environment variable ``name`` as an int ``>= minimum``; ``None`` if unset or empty.

    Raises:
        ValueError: any other text, naming the variable.

    Examples:
        >>> import os
        >>> os.environ["LLRD_EXAMPLE"] = "two"
        >>> environment_count("LLRD_EXAMPLE")
        Traceback (most recent call last):
        ...
        ValueError: environment variable LLRD_EXAMPLE must be an integer >= 1, got 'two'
        >>> del os.environ["LLRD_EXAMPLE"]
        >>> environment_count("LLRD_EXAMPLE") is None
        True
    """
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise ValueError(f"environment variable {name} must be an integer >= {minimum}, got {text!r}") from None
    return value
