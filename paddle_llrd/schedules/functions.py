r"""The schedule functions behind the registry names, one per schedule (Hugging Face's ``get_*_schedule``).

Every function takes ``learning_rate`` first and returns a
:class:`paddle.optimizer.lr.LRScheduler`; all but the annealing ones a
:class:`paddle.optimizer.lr.LambdaDecay` whose lr at step :math:`s` is
``learning_rate * f(s)`` (:math:`f` of :mod:`.factors`), with :math:`W` =
``num_warmup_steps``, :math:`T` = ``num_training_steps`` and the linear
warmup :math:`f(s) = s / \max(1, W)` for :math:`s < W`. Each function is one
entry of :mod:`.registry`, which reads its options from its signature.

The long-warmup rule (:mod:`.long_warmup`) is applied once per call, after
the schedule is built, naming the function's arguments.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Optional

from paddle.optimizer.lr import LambdaDecay

from ..checks import checked_finite, checked_non_negative, checked_step_index, did_you_mean
from . import factors
from .factors import HF_WSD_DECAY_TYPES, HF_WSD_WARMUP_TYPES, WSD_DECAY_STYLES, lr_lambda
from .long_warmup import warn_if_warmup_outlasts_training
from .schedule_checks import checked_floor_lr, checked_step_count, lr_warmup_init_fraction
from .warmup import (
    ConstScheduleWithWarmup,
    CosineAnnealingWithWarmupDecay,
    CosineDecayWithWarmup,
    LinearAnnealingWithWarmupDecay,
    LinearDecayWithWarmup,
    PolyDecayWithWarmup,
    _LambdaSchedule,
    checked_cycle_count,
)

__all__ = [
    # PaddleNLP's five
    "get_linear_schedule_with_warmup", "get_cosine_schedule_with_warmup", "get_constant_schedule",
    "get_constant_schedule_with_warmup", "get_polynomial_decay_schedule_with_warmup",
    # the newer ones: Hugging Face's, Megatron-LM's
    "get_cosine_with_hard_restarts_schedule_with_warmup", "get_inverse_sqrt_schedule",
    "DEFAULT_INVERSE_SQRT_TIMESCALE", "get_cosine_with_min_lr_schedule_with_warmup",
    "get_wsd_schedule", "DEFAULT_WSD_DECAY_RATIO", "WSD_HUGGING_FACE_KEYWORDS", "WSD_MEGATRON_KEYWORDS",
    "get_cosine_annealing_schedule_with_warmup", "get_linear_annealing_schedule_with_warmup",
]


def _warmup_and_total(num_warmup_steps: Any, num_training_steps: Any) -> "tuple[int, int]":
    """``num_warmup_steps`` (``>= 0``) and ``num_training_steps`` (``>= 1``) as step counts."""
    warmup = checked_step_count(num_warmup_steps, "num_warmup_steps")
    return warmup, checked_step_count(num_training_steps, "num_training_steps", minimum=1)


def _long_warmup_rule(warmup: int, total: int, owner: str) -> None:
    """:func:`~.long_warmup.warn_if_warmup_outlasts_training` with the functions' argument names."""
    warn_if_warmup_outlasts_training(warmup, total, owner, "num_warmup_steps", "num_training_steps")


def get_linear_schedule_with_warmup(
    learning_rate: float, num_warmup_steps: int, num_training_steps: int, last_epoch: int = -1
) -> LambdaDecay:
    r"""Linear warmup, then linear decay to 0 at ``num_training_steps`` (``"linear"``).

    .. math:: f(s) = \max\!\left(0, \frac{T - s}{\max(1, T - W)}\right), \quad s \ge W

    Returns a :class:`~paddle_llrd.LinearDecayWithWarmup`; a warmup longer
    than training warns (:class:`~paddle_llrd.LongWarmupWarning`).

    Examples:
        >>> from paddle_llrd import get_linear_schedule_with_warmup
        >>> from paddle_llrd.schedules.curve import lr_curve
        >>> scheduler = get_linear_schedule_with_warmup(
        ...     0.1, num_warmup_steps=2, num_training_steps=10)
        >>> [round(lr, 6) for lr in lr_curve(scheduler, 4)]
        [0.0, 0.05, 0.1, 0.0875, 0.075]
    """
    warmup, total = _warmup_and_total(num_warmup_steps, num_training_steps)
    scheduler = LinearDecayWithWarmup(learning_rate, total, warmup, last_epoch=last_epoch, warn_long_warmup=False)
    _long_warmup_rule(warmup, total, "get_linear_schedule_with_warmup")
    return scheduler


def get_cosine_schedule_with_warmup(
    learning_rate: float, num_warmup_steps: int, num_training_steps: int, num_cycles: float = 0.5,
    last_epoch: int = -1, min_lr: float = 0.0,
) -> LambdaDecay:
    r"""Linear warmup, then a cosine from ``learning_rate`` down to ``min_lr`` (``"cosine"``).

    With :math:`\eta` = ``learning_rate``, :math:`c` = ``num_cycles``,
    :math:`m = \eta_{\min} / \eta` and :math:`p = \min\!\left(1, \frac{s - W}{\max(1, T - W)}\right)`:

    .. math::

        f(s) = m + (1 - m) \max\!\left(0, \tfrac12 \left(1 + \cos(2 \pi c\, p)\right)\right), \quad s \ge W

    (:func:`~paddle_llrd.schedules.factors.cosine_waves`). The default
    ``num_cycles=0.5`` is a half cosine reaching ``min_lr`` at :math:`T`. With
    ``min_lr=0`` the values are PaddleNLP's up to :math:`T`; after :math:`T`
    the value reached at :math:`T` is held (PaddleNLP's curve climbs back up).

    Args:
        learning_rate (float): The peak learning rate.
        num_warmup_steps (int): Warmup steps :math:`W`.
        num_training_steps (int): Training steps :math:`T`.
        num_cycles (float, optional): Number of cosine waves over the decay phase. Default: ``0.5``.
        last_epoch (int, optional): The last step already taken. Default: ``-1``.
        min_lr (float, optional): The floor, ``0 <= min_lr <= learning_rate``. Default: ``0.0``.

    Raises:
        ValueError: a negative or non-finite argument, ``min_lr > learning_rate``.

    Examples:
        >>> from paddle_llrd import get_cosine_schedule_with_warmup
        >>> from paddle_llrd.schedules.curve import lr_curve
        >>> scheduler = get_cosine_schedule_with_warmup(1.0, 2, 6, min_lr=0.2)
        >>> [round(lr, 6) for lr in lr_curve(scheduler, 7)]
        [0.0, 0.5, 1.0, 0.882843, 0.6, 0.317157, 0.2, 0.2]
    """
    learning_rate = checked_non_negative(learning_rate, "learning_rate")
    warmup, total = _warmup_and_total(num_warmup_steps, num_training_steps)
    num_cycles = checked_cycle_count(num_cycles)
    min_lr = checked_floor_lr(min_lr, learning_rate, "learning_rate")
    floor = min_lr / learning_rate if learning_rate > 0 else 0.0
    return _cosine_to_floor(learning_rate, warmup, total, num_cycles, last_epoch, floor,
                            "get_cosine_schedule_with_warmup")


def _cosine_to_floor(learning_rate: float, warmup: int, total: int, num_cycles: float, last_epoch: Any,
                     floor: float, owner: str) -> LambdaDecay:
    """The cosine of ``"cosine"`` and ``"cosine_with_min_lr"`` down to ``floor`` (a fraction of the peak)."""
    factor = lr_lambda(factors.cosine_waves, warmup, total_steps=total, num_cycles=num_cycles, floor=floor,
                       hold_after_end=True)
    scheduler = _LambdaSchedule(learning_rate, factor, checked_step_index(last_epoch))
    _long_warmup_rule(warmup, total, owner)
    return scheduler


def get_constant_schedule(learning_rate: float, last_epoch: int = -1) -> LambdaDecay:
    r"""A constant ``learning_rate`` (``"constant"``): :math:`f(s) = 1`, no warmup.

    Examples:
        >>> from paddle_llrd import get_constant_schedule
        >>> get_constant_schedule(0.3)()
        0.3
    """
    learning_rate = checked_non_negative(learning_rate, "learning_rate")
    return _LambdaSchedule(learning_rate, lr_lambda(factors.constant, 0), checked_step_index(last_epoch))


def get_constant_schedule_with_warmup(
    learning_rate: float, num_warmup_steps: int, last_epoch: int = -1, *, num_training_steps: Optional[int] = None
) -> LambdaDecay:
    r"""Linear warmup, then constant (``"constant_with_warmup"``): :math:`f(s) = 1` for :math:`s \ge W`.

    Returns a :class:`~paddle_llrd.ConstScheduleWithWarmup`. The schedule has
    no end; ``num_training_steps``, when given (``get_scheduler`` and the
    Trainers give it), only makes a warmup longer than training warn
    (:class:`~paddle_llrd.LongWarmupWarning`), as for the other warmup schedules.

    Examples:
        >>> from paddle_llrd import get_constant_schedule_with_warmup
        >>> from paddle_llrd.schedules.curve import lr_curve
        >>> scheduler = get_constant_schedule_with_warmup(0.2, num_warmup_steps=4)
        >>> [round(lr, 6) for lr in lr_curve(scheduler, 5)]
        [0.0, 0.05, 0.1, 0.15, 0.2, 0.2]
    """
    warmup = checked_step_count(num_warmup_steps, "num_warmup_steps")
    total = None if num_training_steps is None else checked_step_count(num_training_steps, "num_training_steps",
                                                                       minimum=1)
    scheduler = ConstScheduleWithWarmup(learning_rate, warmup, total, last_epoch, warn_long_warmup=False)
    if total is not None:
        _long_warmup_rule(warmup, total, "get_constant_schedule_with_warmup")
    return scheduler


def get_polynomial_decay_schedule_with_warmup(
    learning_rate: float, num_warmup_steps: int, num_training_steps: int, lr_end: float = 1e-7,
    power: float = 1.0, last_epoch: int = -1,
) -> LambdaDecay:
    r"""Linear warmup, then polynomial decay to ``lr_end`` (``"polynomial"``).

    .. math::

        f(s) = \begin{cases}
            \dfrac{(\eta - \eta_{end}) \left(1 - \frac{s - W}{\max(1, T - W)}\right)^{power}
                   + \eta_{end}}{\eta} & W \le s \le T \\
            \eta_{end} / \eta & s > T
        \end{cases}

    Returns a :class:`~paddle_llrd.PolyDecayWithWarmup`.

    Raises:
        ValueError: ``lr_end >= learning_rate``, a negative ``power``, a bad step count.

    Examples:
        >>> from paddle_llrd import get_polynomial_decay_schedule_with_warmup
        >>> from paddle_llrd.schedules.curve import lr_curve
        >>> scheduler = get_polynomial_decay_schedule_with_warmup(1.0, 0, 4, lr_end=0.2)
        >>> [round(lr, 6) for lr in lr_curve(scheduler, 5)]
        [1.0, 0.8, 0.6, 0.4, 0.2, 0.2]
    """
    warmup, total = _warmup_and_total(num_warmup_steps, num_training_steps)
    scheduler = PolyDecayWithWarmup(learning_rate, total, warmup, lr_end=lr_end, power=power, last_epoch=last_epoch,
                                    warn_long_warmup=False)
    _long_warmup_rule(warmup, total, "get_polynomial_decay_schedule_with_warmup")
    return scheduler


def get_cosine_with_hard_restarts_schedule_with_warmup(
    learning_rate: float, num_warmup_steps: int, num_training_steps: int, num_cycles: float = 1.0,
    last_epoch: int = -1,
) -> LambdaDecay:
    r"""Linear warmup, then ``num_cycles`` cosine decays to 0, each restarting at the peak (``"cosine_with_restarts"``).

    Hugging Face's ``get_cosine_with_hard_restarts_schedule_with_warmup``: the
    decay phase is cut into :math:`c` = ``num_cycles`` equal cycles, each a half
    cosine from the peak down to 0, after which the lr jumps back to the peak.
    With :math:`p = (s - W) / \max(1, T - W)`:

    .. math::

        f(s) = \begin{cases}
            \tfrac12 \left(1 + \cos(\pi\, ((c\, p) \bmod 1))\right) & s \ge W,\ p < 1 \\
            0 & p \ge 1
        \end{cases}

    A fractional :math:`c` ends part-way through its last cycle and drops to 0
    at :math:`T`; ``num_cycles=0.5`` falls to half the peak, then to 0.

    This is exactly :class:`~paddle_llrd.CosineDecayWithWarmup` with
    ``with_hard_restarts=True`` and ``num_cycles=c``, which it returns; both
    take ``num_cycles`` by one rule (an ``int`` or a ``float``, finite and
    ``>= 0``: :func:`~paddle_llrd.schedules.warmup.checked_cycle_count`). Only the
    defaults differ: Hugging Face's ``1`` here, PaddleNLP's ``0.5`` for the
    class. :func:`get_scheduler` uses the ``num_cycles`` its caller passes and
    ``1`` when none is passed; PaddleNLP's ``Trainer`` always passes
    ``TrainingArguments.num_cycles`` (``0.5`` by default), so set
    ``num_cycles`` to 1 or more there for whole cycles.

    Args:
        learning_rate (float): The peak learning rate, ``>= 0``.
        num_warmup_steps (int): Warmup steps :math:`W`, ``>= 0``.
        num_training_steps (int): Training steps :math:`T`, ``>= 1``.
        num_cycles (int|float, optional): The number of cycles :math:`c \ge 0`. Default: ``1.0``.
        last_epoch (int, optional): The last step already taken. Default: ``-1``.

    Raises:
        TypeError: ``num_cycles`` is not a number.
        ValueError: ``num_cycles`` negative, NaN or infinite; a bad step count.

    Examples:
        >>> from paddle_llrd import get_cosine_with_hard_restarts_schedule_with_warmup
        >>> from paddle_llrd.schedules.curve import lr_curve
        >>> scheduler = get_cosine_with_hard_restarts_schedule_with_warmup(
        ...     1.0, 2, 10, num_cycles=2)
        >>> [round(lr, 6) for lr in lr_curve(scheduler, 11)]
        [0.0, 0.5, 1.0, 0.853553, 0.5, 0.146447, 1.0, 0.853553, 0.5, 0.146447, 0.0, 0.0]
    """
    warmup, total = _warmup_and_total(num_warmup_steps, num_training_steps)
    scheduler = CosineDecayWithWarmup(learning_rate, total, warmup, with_hard_restarts=True, num_cycles=num_cycles,
                                      last_epoch=last_epoch, warn_long_warmup=False)
    _long_warmup_rule(warmup, total, "get_cosine_with_hard_restarts_schedule_with_warmup")
    return scheduler


#: The ``timescale`` of ``"inverse_sqrt"`` without warmup (Hugging Face's and big_vision's).
DEFAULT_INVERSE_SQRT_TIMESCALE = 10_000


def get_inverse_sqrt_schedule(
    learning_rate: float, num_warmup_steps: int, timescale: Optional[int] = None, last_epoch: int = -1
) -> LambdaDecay:
    r"""Linear warmup, then decay with the inverse square root of the step (``"inverse_sqrt"``).

    Hugging Face's ``get_inverse_sqrt_schedule``. With :math:`\tau` = ``timescale``:

    .. math::

        f(s) = \sqrt{\frac{\tau}{s + \tau - W}}, \qquad s \ge W

    so :math:`f(W) = 1` and the lr falls like :math:`1/\sqrt{s}`; it is half
    the peak at :math:`s = W + 3\tau`. ``timescale=None`` means:

    * :math:`\tau = W` when :math:`W \ge 1`. Then :math:`f(s) = \sqrt{W / s}`,
      the curve of :class:`~paddle_llrd.InverseSquareRootSchedule` ``(W,
      learning_rate)`` (PaddleNLP's Transformer schedule) step for step.
    * :math:`\tau` = ``DEFAULT_INVERSE_SQRT_TIMESCALE`` (10 000, as in Hugging
      Face and big_vision) when :math:`W = 0`, where :math:`\tau = W` would
      divide by zero: the lr starts at the peak and decays slowly
      (:math:`f(s) = \sqrt{10^4 / (s + 10^4)}`). Pass ``timescale`` to set the
      pace; :math:`\tau = 1` gives :math:`1/\sqrt{s + 1}`.

    ``num_training_steps`` plays no part (the decay never ends).

    Args:
        learning_rate (float): The peak learning rate, ``>= 0``.
        num_warmup_steps (int): Warmup steps :math:`W`, ``>= 0``.
        timescale (int, optional): :math:`\tau \ge 1`. Default: ``None`` (see above).
        last_epoch (int, optional): The last step already taken. Default: ``-1``.

    Examples:
        >>> from paddle_llrd import get_inverse_sqrt_schedule
        >>> from paddle_llrd.schedules.curve import lr_curve
        >>> scheduler = get_inverse_sqrt_schedule(0.5, num_warmup_steps=4)
        >>> lrs = [round(lr, 6) for lr in lr_curve(scheduler, 16)]
        >>> lrs[:5], lrs[16]
        ([0.0, 0.125, 0.25, 0.375, 0.5], 0.25)
        >>> late = get_inverse_sqrt_schedule(
        ...     1.0, num_warmup_steps=0, timescale=100, last_epoch=299)
        >>> late()
        0.5
    """
    learning_rate = checked_non_negative(learning_rate, "learning_rate")
    warmup = checked_step_count(num_warmup_steps, "num_warmup_steps")
    if timescale is None:
        timescale = warmup if warmup > 0 else DEFAULT_INVERSE_SQRT_TIMESCALE
    timescale = checked_step_count(timescale, "timescale", minimum=1)
    factor = lr_lambda(factors.inverse_sqrt_decay, warmup, timescale=timescale)
    return _LambdaSchedule(learning_rate, factor, checked_step_index(last_epoch))


def _floor_ratio(
    learning_rate: float,
    min_lr: Optional[float],
    ratio: Optional[float],
    ratio_name: str,
    *,
    schedule: str,
    required: bool,
) -> float:
    """The floor as a fraction of ``learning_rate``, from at most (or, if ``required``, exactly) one of the two."""
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


def get_cosine_with_min_lr_schedule_with_warmup(
    learning_rate: float, num_warmup_steps: int, num_training_steps: int, num_cycles: float = 0.5,
    last_epoch: int = -1, min_lr: Optional[float] = None, min_lr_rate: Optional[float] = None,
) -> LambdaDecay:
    r"""Linear warmup, then a cosine down to a floor given as ``min_lr`` or ``min_lr_rate`` (``"cosine_with_min_lr"``).

    Hugging Face's ``get_cosine_with_min_lr_schedule_with_warmup``; exactly one
    of ``min_lr`` (absolute) and ``min_lr_rate`` (a fraction of the peak) must
    be given. With :math:`m` = ``min_lr_rate`` or ``min_lr`` :math:`/\eta`,
    :math:`c` = ``num_cycles`` and
    :math:`p = \min\!\left(1, \frac{s - W}{\max(1, T - W)}\right)`:

    .. math::

        f(s) = m + (1 - m)\, \tfrac12 \left(1 + \cos(2 \pi c\, p)\right), \qquad s \ge W

    Up to :math:`T` these are Hugging Face's values; from :math:`T` on the value
    reached at :math:`T` is held (:math:`m` for the default half cosine), where
    Hugging Face's curve turns back up. It is the ``"cosine"`` schedule with a
    floor that may be given as a ratio.

    Args:
        learning_rate (float): The peak learning rate :math:`\eta`, ``>= 0``.
        num_warmup_steps (int): Warmup steps :math:`W`, ``>= 0``.
        num_training_steps (int): Training steps :math:`T`, ``>= 1``.
        num_cycles (float, optional): Cosine waves over the decay phase, ``>= 0``. Default: ``0.5``.
        last_epoch (int, optional): The last step already taken. Default: ``-1``.
        min_lr (float, optional): The floor as an lr, ``0 <= min_lr <= learning_rate``.
        min_lr_rate (float, optional): The floor as a fraction of ``learning_rate``, in ``[0, 1]``.

    Raises:
        ValueError: neither or both of ``min_lr`` and ``min_lr_rate``, or one out of range.

    Examples:
        >>> from paddle_llrd import get_cosine_with_min_lr_schedule_with_warmup
        >>> from paddle_llrd.schedules.curve import lr_curve
        >>> scheduler = get_cosine_with_min_lr_schedule_with_warmup(
        ...     1.0, 2, 6, min_lr_rate=0.2)
        >>> lrs = lr_curve(scheduler, 7)
        >>> [round(lr, 6) for lr in lrs]
        [0.0, 0.5, 1.0, 0.882843, 0.6, 0.317157, 0.2, 0.2]
    """
    learning_rate = checked_non_negative(learning_rate, "learning_rate")
    warmup, total = _warmup_and_total(num_warmup_steps, num_training_steps)
    num_cycles = checked_cycle_count(num_cycles)
    floor = _floor_ratio(learning_rate, min_lr, min_lr_rate, "min_lr_rate", schedule="cosine_with_min_lr",
                         required=True)
    return _cosine_to_floor(learning_rate, warmup, total, num_cycles, last_epoch, floor,
                            "get_cosine_with_min_lr_schedule_with_warmup")


#: The share of ``num_training_steps`` that ``"warmup_stable_decay"`` decays over when
#: ``num_decay_steps`` is not given (nor Megatron-LM's ``decay_ratio``).
DEFAULT_WSD_DECAY_RATIO = 0.1
#: ``get_wsd_schedule``'s keywords that only Hugging Face's ``get_wsd_schedule`` has
#: (``num_cycles`` counts when it is not the half cosine, 0.5, which both families' cosine is).
WSD_HUGGING_FACE_KEYWORDS = ("warmup_type", "decay_type", "num_stable_steps", "num_cycles")
#: ``get_wsd_schedule``'s keywords that only Megatron-LM's WSD has.
WSD_MEGATRON_KEYWORDS = ("decay_style", "decay_ratio", "min_lr", "lr_warmup_init")

# Megatron-LM calls the 1-sqrt style "minus_sqrt".
_WSD_STYLE_ALIASES = {"minus_sqrt": "1-sqrt"}


class _CosineByDefault(str):
    """``decay_style``'s default, ``"cosine"``, told apart from a ``"cosine"`` the caller passes
    (which names Megatron-LM's keywords, see :func:`get_wsd_schedule`)."""

    __slots__ = ()


def _wsd_decay_style(decay_style: Any) -> str:
    if not isinstance(decay_style, str):
        raise TypeError(
            f"`decay_style` must be a str, one of {', '.join(map(repr, WSD_DECAY_STYLES))}; got {decay_style!r}."
        )
    style = _WSD_STYLE_ALIASES.get(decay_style, decay_style)
    if style not in WSD_DECAY_STYLES:
        raise ValueError(
            f"`decay_style` must be one of {', '.join(map(repr, WSD_DECAY_STYLES))} "
            f"(or Megatron-LM's 'minus_sqrt' for '1-sqrt'), got {decay_style!r}."
        )
    return style


def _hugging_face_type(value: Any, argument: str, choices: "tuple[str, ...]") -> str:
    """``warmup_type`` / ``decay_type``: one of Hugging Face's ``choices``, else an error naming ``argument``."""
    if not isinstance(value, str) or value not in choices:
        hint = " ('exponential' is a `decay_style` of Megatron-LM's keywords)" if value == "exponential" else ""
        raise ValueError(
            f"`{argument}` must be one of {', '.join(map(repr, choices))} (Hugging Face's), got {value!r}{hint}."
            f"{did_you_mean(str(value), choices)}"
        )
    return value


def _wsd_decay_steps(num_decay_steps: Any, decay_ratio: Any, total: int) -> int:
    if num_decay_steps is not None and decay_ratio is not None:
        raise ValueError(
            "Pass only one of `num_decay_steps` (steps) and `decay_ratio` (a fraction of num_training_steps), "
            f"got num_decay_steps={num_decay_steps!r} and decay_ratio={decay_ratio!r}."
        )
    if num_decay_steps is not None:
        return checked_step_count(num_decay_steps, "num_decay_steps")
    ratio = DEFAULT_WSD_DECAY_RATIO if decay_ratio is None else checked_finite(decay_ratio, "decay_ratio")
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"`decay_ratio` must lie in [0, 1] (a fraction of num_training_steps), got {ratio!r}.")
    return int(math.floor(ratio * total))


def _total_and_decay(warmup: int, num_training_steps: Any, num_decay_steps: Any, decay_ratio: Any) -> "tuple[int, int]":
    """:math:`T` and :math:`D` of a WSD schedule that ends at ``num_training_steps``, the decay after the warmup."""
    if num_training_steps is None:
        raise ValueError(
            "Scheduler 'warmup_stable_decay' requires `num_training_steps` (or Hugging Face's "
            "`num_stable_steps` with `num_decay_steps`), please provide that argument."
        )
    total = checked_step_count(num_training_steps, "num_training_steps", minimum=1)
    decay_steps = _wsd_decay_steps(num_decay_steps, decay_ratio, total)
    if warmup + decay_steps > total:
        given = "num_decay_steps" if num_decay_steps is not None else "decay_ratio"
        raise ValueError(
            f"`num_warmup_steps` ({warmup}) plus the decay steps ({decay_steps}, from `{given}`) must not exceed "
            f"`num_training_steps` ({total}): the decay stage is the end of training, after warmup."
        )
    return total, decay_steps


def _keyword_families(num_cycles: float, given: "dict[str, bool]") -> "tuple[list[str], list[str]]":
    """The Hugging Face and the Megatron-LM keywords of a ``get_wsd_schedule`` call."""
    given = {**given, "num_cycles": num_cycles != 0.5}
    hugging_face = [key for key in WSD_HUGGING_FACE_KEYWORDS if given[key]]
    megatron = [key for key in WSD_MEGATRON_KEYWORDS if given[key]]
    if hugging_face and megatron:
        raise ValueError(
            f"warmup_stable_decay takes Hugging Face's keywords or Megatron-LM's, not both: got "
            f"{', '.join(f'`{key}`' for key in hugging_face)} (Hugging Face's get_wsd_schedule) and "
            f"{', '.join(f'`{key}`' for key in megatron)} (Megatron-LM's). The two warm up differently "
            "(Hugging Face's from min_lr_ratio * learning_rate, Megatron-LM's from lr_warmup_init): "
            "keep one family's (docs/schedules.rst, 'warmup_stable_decay')."
        )
    return hugging_face, megatron


def get_wsd_schedule(
    learning_rate: float, num_warmup_steps: int, num_training_steps: Optional[int] = None,
    num_decay_steps: Optional[int] = None, decay_ratio: Optional[float] = None,
    decay_style: str = _CosineByDefault("cosine"), min_lr_ratio: Optional[float] = None,
    min_lr: Optional[float] = None, last_epoch: int = -1, *, warmup_type: Optional[str] = None,
    decay_type: Optional[str] = None, num_stable_steps: Optional[int] = None, num_cycles: float = 0.5,
    lr_warmup_init: Optional[float] = None,
) -> LambdaDecay:
    r"""Warmup, a stable stage at the peak, then a decay to a floor (``"warmup_stable_decay"``).

    The WSD schedule (MiniCPM), with the keywords of Megatron-LM's
    ``--lr-decay-style WSD`` or with those of Hugging Face's
    ``get_wsd_schedule``, each giving its own numbers; the rule for a call is
    in docs/schedules.rst ("warmup_stable_decay"):

    * Hugging Face's keywords (:data:`WSD_HUGGING_FACE_KEYWORDS`):
      ``warmup_type``, ``decay_type``, ``num_stable_steps``, ``num_cycles``
      other than 0.5. The numbers are
      :func:`~paddle_llrd.schedules.factors.hugging_face_wsd`'s: the warmup
      rises from :math:`m\eta` (:math:`m` = ``min_lr_ratio``) as
      ``warmup_type`` says, the stable stage lasts ``num_stable_steps`` (by
      default :math:`T - W - D`), and the decay ``decay_type`` falls to
      :math:`m\eta` over :math:`D` = ``num_decay_steps`` steps.
    * Megatron-LM's (:data:`WSD_MEGATRON_KEYWORDS`): ``decay_style``,
      ``decay_ratio``, ``min_lr``, ``lr_warmup_init``. The warmup rises
      linearly from ``lr_warmup_init`` (0 by default), the decay stage is
      the last :math:`D` of :math:`T` steps (:math:`D` = ``num_decay_steps``
      or :math:`\lfloor` ``decay_ratio`` :math:`\cdot T \rfloor`), then:

      .. math::

          f(s) = \begin{cases}
              1 & W \le s < T - D \\
              m + (1 - m)\, a(r) & T - D \le s < T, \quad r = (s - (T - D)) / D \\
              m & s \ge T
          \end{cases}

      with :math:`a(r)` of ``decay_style``: ``"linear"`` :math:`1 - r`,
      ``"cosine"`` :math:`\tfrac12 (1 + \cos(\pi r))`, ``"exponential"``
      :math:`2 \cdot 0.5^{r} - 1`, ``"1-sqrt"`` (also ``"minus_sqrt"``)
      :math:`1 - \sqrt{r}`.

    Keywords of both families raise ``ValueError`` naming them. With neither,
    the two give the same numbers (:math:`D` = ``num_decay_steps`` or
    :math:`\lfloor 0.1\, T \rfloor`, a cosine decay), except where the warmup
    starts when ``min_lr_ratio > 0``: that call raises ``ValueError`` asking
    for ``warmup_type`` (Hugging Face's) or ``decay_style`` (Megatron-LM's).

    Args:
        learning_rate (float): The peak learning rate :math:`\eta`, ``>= 0``.
        num_warmup_steps (int): Warmup steps :math:`W`, ``>= 0``.
        num_training_steps (int, optional): Training steps :math:`T`, ``>= 1``;
            required but with Hugging Face's ``num_stable_steps``, which then
            must make :math:`W + S + D = T` when it is given.
        num_decay_steps (int, optional): Decay steps :math:`D` (``W + D <= T``).
        decay_ratio (float, optional): Megatron-LM's :math:`D / T`, in ``[0, 1]``. Default: ``0.1``.
        decay_style (str, optional): Megatron-LM's decay shape (above). Default: ``"cosine"``.
        min_lr_ratio (float, optional): The floor :math:`m` as a fraction of ``learning_rate``, in ``[0, 1]``.
        min_lr (float, optional): Megatron-LM's floor as an lr, ``<= learning_rate``.
        last_epoch (int, optional): The last step already taken. Default: ``-1``.
        warmup_type (str, optional): Hugging Face's warmup: ``"linear"`` (its default), ``"cosine"``, ``"1-sqrt"``.
        decay_type (str, optional): Hugging Face's decay: ``"linear"``, ``"cosine"`` (its default), ``"1-sqrt"``.
        num_stable_steps (int, optional): Hugging Face's stable stage :math:`S`.
        num_cycles (float, optional): Hugging Face's cosine waves of the decay. Default: ``0.5``.
        lr_warmup_init (float, optional): Megatron-LM's warmup start, an lr in ``[0, learning_rate]``.

    Raises:
        ValueError: keywords of both families; ``min_lr_ratio > 0`` with a
            warmup and neither family named; a stage that does not fit; an
            unknown type or style; a value out of range.
        TypeError: a value of the wrong type.

    Examples:
        Megatron-LM's keywords, a linear decay over the last 4 of 10 steps to a fifth of the peak:

        >>> from paddle_llrd import get_wsd_schedule
        >>> from paddle_llrd.schedules.curve import lr_curve
        >>> scheduler = get_wsd_schedule(
        ...     1.0, num_warmup_steps=2, num_training_steps=10, num_decay_steps=4,
        ...     decay_style="linear", min_lr_ratio=0.2)
        >>> [round(lr, 6) for lr in lr_curve(scheduler, 11)]
        [0.0, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2, 0.2]

        Hugging Face's: the same stages, the warmup from a fifth of the peak:

        >>> scheduler = get_wsd_schedule(
        ...     1.0, num_warmup_steps=2, num_training_steps=10, num_decay_steps=4,
        ...     warmup_type="linear", decay_type="linear", min_lr_ratio=0.2)
        >>> [round(lr, 6) for lr in lr_curve(scheduler, 11)]
        [0.2, 0.6, 1.0, 1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2, 0.2]
    """
    learning_rate = checked_non_negative(learning_rate, "learning_rate")
    num_cycles = checked_cycle_count(num_cycles)
    hugging_face, megatron = _keyword_families(num_cycles, {
        "warmup_type": warmup_type is not None,
        "decay_type": decay_type is not None,
        "num_stable_steps": num_stable_steps is not None,
        "decay_style": not isinstance(decay_style, _CosineByDefault),
        "decay_ratio": decay_ratio is not None,
        "min_lr": min_lr is not None,
        "lr_warmup_init": lr_warmup_init is not None,
    })
    warmup = checked_step_count(num_warmup_steps, "num_warmup_steps")
    if hugging_face:
        factor = _hugging_face_wsd(learning_rate, warmup, num_training_steps, num_decay_steps, num_stable_steps,
                                   warmup_type, decay_type, min_lr_ratio, num_cycles)
    else:
        total, decay_steps = _total_and_decay(warmup, num_training_steps, num_decay_steps, decay_ratio)
        style = _wsd_decay_style(decay_style)
        floor = _floor_ratio(learning_rate, min_lr, min_lr_ratio, "min_lr_ratio", schedule="warmup_stable_decay",
                             required=False)
        if not megatron and floor > 0 and warmup > 0:
            raise ValueError(
                f"warmup_stable_decay with `min_lr_ratio` = {floor!r} and a warmup (`num_warmup_steps` = {warmup}) "
                "reads two ways: Hugging Face's get_wsd_schedule warms up from min_lr_ratio * learning_rate, "
                "Megatron-LM's from lr_warmup_init (0). Name the family: add warmup_type='linear' (Hugging "
                "Face's) or decay_style='cosine' (Megatron-LM's), as docs/schedules.rst says."
            )
        start = 0.0 if lr_warmup_init is None else lr_warmup_init_fraction(lr_warmup_init, learning_rate)
        factor = lr_lambda(factors.stable_then_decay, warmup, start, total_steps=total, decay_steps=decay_steps,
                           anneal=WSD_DECAY_STYLES[style], floor=floor)
    return _LambdaSchedule(learning_rate, factor, checked_step_index(last_epoch))


def _hugging_face_wsd(learning_rate: float, warmup: int, num_training_steps: Any, num_decay_steps: Any,
                      num_stable_steps: Any, warmup_type: Any, decay_type: Any, min_lr_ratio: Any, num_cycles: float):
    """Hugging Face's WSD factor (:func:`~.factors.hugging_face_wsd`) from ``get_wsd_schedule``'s arguments."""
    warmup_type = _hugging_face_type("linear" if warmup_type is None else warmup_type, "warmup_type",
                                     tuple(HF_WSD_WARMUP_TYPES))
    decay_type = _hugging_face_type("cosine" if decay_type is None else decay_type, "decay_type", HF_WSD_DECAY_TYPES)
    floor = _floor_ratio(learning_rate, None, min_lr_ratio, "min_lr_ratio", schedule="warmup_stable_decay",
                         required=False)
    if num_stable_steps is not None:
        stable = checked_step_count(num_stable_steps, "num_stable_steps")
        if num_decay_steps is None:
            raise ValueError(
                "Hugging Face's `num_stable_steps` needs `num_decay_steps` (the decay stage after it), "
                "as in Hugging Face's get_wsd_schedule."
            )
        decay_steps = checked_step_count(num_decay_steps, "num_decay_steps")
        if num_training_steps is not None:
            total = checked_step_count(num_training_steps, "num_training_steps", minimum=1)
            if warmup + stable + decay_steps != total:
                raise ValueError(
                    f"`num_warmup_steps` ({warmup}) + `num_stable_steps` ({stable}) + `num_decay_steps` "
                    f"({decay_steps}) = {warmup + stable + decay_steps} must equal `num_training_steps` ({total}), "
                    "or the schedule ends elsewhere than training: leave `num_stable_steps` out (the stable "
                    "stage is then the steps between warmup and decay) or make the stages add up."
                )
    else:
        total, decay_steps = _total_and_decay(warmup, num_training_steps, num_decay_steps, None)
        stable = total - warmup - decay_steps
    return functools.partial(factors.hugging_face_wsd, warmup_steps=warmup, stable_steps=stable,
                             decay_steps=decay_steps, warmup_type=warmup_type, decay_type=decay_type, floor=floor,
                             num_cycles=num_cycles)


def _annealing(cls, learning_rate: Any, num_warmup_steps: Any, num_training_steps: Any, min_lr: Any,
               last_epoch: Any):
    """``cls`` (one of the annealing classes) built from the registry's arguments, checked under their names."""
    learning_rate = checked_non_negative(learning_rate, "learning_rate")
    min_lr = checked_floor_lr(min_lr, learning_rate, "learning_rate")
    warmup, total = _warmup_and_total(num_warmup_steps, num_training_steps)
    if total <= warmup:
        raise ValueError(
            f"`num_training_steps` ({total}) must be greater than `num_warmup_steps` ({warmup}) "
            "for the annealing schedules (they anneal between the two)."
        )
    return cls(learning_rate, min_lr, warmup, total, last_epoch=last_epoch)


def get_cosine_annealing_schedule_with_warmup(
    learning_rate: float, num_warmup_steps: int, num_training_steps: int, min_lr: float = 0.0,
    last_epoch: int = -1,
) -> CosineAnnealingWithWarmupDecay:
    r"""Megatron-style warmup to ``learning_rate``, cosine annealing to ``min_lr`` (``"cosine_annealing_with_warmup"``).

    :class:`~paddle_llrd.CosineAnnealingWithWarmupDecay` ``(max_lr=learning_rate,
    min_lr=min_lr, warmup_step=num_warmup_steps, decay_step=num_training_steps)``,
    an absolute-lr :class:`~paddle.optimizer.lr.LRScheduler`. With
    :math:`r = (s - W) / (T - W)` and :math:`T > W`:

    .. math::

        \mathrm{lr}(s) = \begin{cases}
            \eta\, s / W & W > 0,\ s \le W \\
            \eta_{\min} + \tfrac12 \left(\cos(\pi r) + 1\right) (\eta - \eta_{\min}) & \text{otherwise, } s \le T \\
            \eta_{\min} & s > T
        \end{cases}

    Raises:
        ValueError: ``num_training_steps <= num_warmup_steps`` (the decay must fit), ``min_lr > learning_rate``.

    Examples:
        Warmup to the peak at step 2, half way down at step 4, ``min_lr`` from step 6 on:

        >>> from paddle_llrd import get_cosine_annealing_schedule_with_warmup
        >>> from paddle_llrd.schedules.curve import lr_curve
        >>> lrs = lr_curve(get_cosine_annealing_schedule_with_warmup(1.0, 2, 6, min_lr=0.2), 7)
        >>> [round(lrs[step], 6) for step in (1, 2, 4, 6, 7)]
        [0.5, 1.0, 0.6, 0.2, 0.2]
    """
    return _annealing(CosineAnnealingWithWarmupDecay, learning_rate, num_warmup_steps, num_training_steps, min_lr,
                      last_epoch)


def get_linear_annealing_schedule_with_warmup(
    learning_rate: float, num_warmup_steps: int, num_training_steps: int, min_lr: float = 0.0,
    last_epoch: int = -1,
) -> LinearAnnealingWithWarmupDecay:
    r"""As :func:`get_cosine_annealing_schedule_with_warmup`, annealing linearly (``"linear_annealing_with_warmup"``).

    A :class:`~paddle_llrd.LinearAnnealingWithWarmupDecay`: :math:`1 - r` in
    place of the cosine factor. Unlike ``"linear"``, the warmup reaches the
    peak at step :math:`W` itself and the lr stays at ``min_lr`` after :math:`T`.

    Examples:
        Steps 2 to 6, from the peak down to ``min_lr``:

        >>> from paddle_llrd import get_linear_annealing_schedule_with_warmup
        >>> from paddle_llrd.schedules.curve import lr_curve
        >>> scheduler = get_linear_annealing_schedule_with_warmup(1.0, 2, 6, min_lr=0.2)
        >>> [round(lr, 6) for lr in lr_curve(scheduler, 7)][2:7]
        [1.0, 0.8, 0.6, 0.4, 0.2]
    """
    return _annealing(LinearAnnealingWithWarmupDecay, learning_rate, num_warmup_steps, num_training_steps, min_lr,
                      last_epoch)
