r"""The schedule functions behind the registry names, one per schedule (Hugging Face's ``get_*_schedule``).

Every function takes ``learning_rate`` first. All but the annealing ones
return a :class:`paddle.optimizer.lr.LambdaDecay` whose lr at step :math:`s`
is ``learning_rate * f(s)``, with :math:`W` = ``num_warmup_steps``,
:math:`T` = ``num_training_steps`` and the linear warmup
:math:`f(s) = s / \max(1, W)` for :math:`s < W`. Every function with a
warmup takes Megatron-LM's ``lr_warmup_init`` through ``get_scheduler``: the
warmup then rises from it instead of 0, and every later step keeps its value.

Each public ``get_*`` function keeps PaddleNLP's / Hugging Face's signature
and calls its private builder (``_linear`` for ``get_linear_...``), which also
takes ``lr_warmup_init`` and ``caller``, the name a warning about a warmup
longer than training gives; :data:`~paddle_llrd.schedules.registry.BUILTIN_SCHEDULES`
hands the builders to ``get_scheduler``.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Optional

from paddle.optimizer.lr import LambdaDecay

from ..argument_checks import (
    checked_finite_real,
    checked_floor_lr,
    checked_non_negative_real,
    checked_step_count,
    checked_step_index,
    checked_warmup_start,
)
from . import factors
from .factors import WSD_DECAY_STYLES, lr_lambda
from .warmup import (
    ConstScheduleWithWarmup,
    CosineAnnealingWithWarmupDecay,
    CosineDecayWithWarmup,
    LinearAnnealingWithWarmupDecay,
    LinearDecayWithWarmup,
    PolyDecayWithWarmup,
    _LambdaSchedule,
    warn_if_warmup_outlasts_training,
)

__all__ = [
    # PaddleNLP's five
    "get_linear_schedule_with_warmup", "get_cosine_schedule_with_warmup", "get_constant_schedule",
    "get_constant_schedule_with_warmup", "get_polynomial_decay_schedule_with_warmup",
    # the newer ones: Hugging Face's, Megatron-LM's
    "get_cosine_with_hard_restarts_schedule_with_warmup", "get_inverse_sqrt_schedule",
    "DEFAULT_INVERSE_SQRT_TIMESCALE", "get_cosine_with_min_lr_schedule_with_warmup",
    "get_wsd_schedule", "DEFAULT_WSD_DECAY_RATIO", "get_cosine_annealing_schedule_with_warmup",
    "get_linear_annealing_schedule_with_warmup",
]


def _warmup_and_total(
    num_warmup_steps: Any, num_training_steps: Any, caller: Optional[str] = None
) -> "tuple[int, int]":
    """``num_warmup_steps`` (``>= 0``) and ``num_training_steps`` (``>= 1``) as step counts.

    With ``caller``, a warmup longer than training warns, naming ``caller``.
    """
    warmup = checked_step_count(num_warmup_steps, "num_warmup_steps")
    total = checked_step_count(num_training_steps, "num_training_steps", minimum=1)
    if caller is not None:
        warn_if_warmup_outlasts_training(warmup, total, caller, "num_warmup_steps", "num_training_steps")
    return warmup, total


def get_linear_schedule_with_warmup(
    learning_rate: float, num_warmup_steps: int, num_training_steps: int, last_epoch: int = -1
) -> LambdaDecay:
    r"""Linear warmup, then linear decay to 0 at ``num_training_steps`` (``"linear"``).

    .. math:: f(s) = \max\!\left(0, \frac{T - s}{\max(1, T - W)}\right), \quad s \ge W

    Returns a :class:`~paddle_llrd.LinearDecayWithWarmup`.

    Examples:
        >>> from paddle_llrd import get_linear_schedule_with_warmup
        >>> from paddle_llrd.schedules.table import lr_curve
        >>> scheduler = get_linear_schedule_with_warmup(
        ...     0.1, num_warmup_steps=2, num_training_steps=10)
        >>> [round(lr, 6) for lr in lr_curve(scheduler, 4)]
        [0.0, 0.05, 0.1, 0.0875, 0.075]
    """
    return _linear(learning_rate, num_warmup_steps, num_training_steps, last_epoch, caller="get_linear_schedule_with_warmup")


def _linear(learning_rate, num_warmup_steps, num_training_steps, last_epoch=-1, *, lr_warmup_init=0.0, caller=None):
    warmup, total = _warmup_and_total(num_warmup_steps, num_training_steps, caller)
    start = _start(lr_warmup_init, learning_rate)
    return LinearDecayWithWarmup(learning_rate, total, warmup, last_epoch=last_epoch, warmup_start=start,
                                 warn_long_warmup=False)


def get_cosine_schedule_with_warmup(
    learning_rate: float, num_warmup_steps: int, num_training_steps: int, num_cycles: float = 0.5,
    last_epoch: int = -1, min_lr: float = 0.0,
) -> LambdaDecay:
    r"""Linear warmup, then a cosine from ``learning_rate`` down to ``min_lr`` (``"cosine"``).

    With :math:`\eta` = ``learning_rate``, :math:`c` = ``num_cycles``,
    :math:`m = \eta_{\min} / \eta` and :math:`p = \min\!\left(1, \frac{s - W}{\max(1, T - W)}\right)`:

    .. math::

        f(s) = m + (1 - m) \max\!\left(0, \tfrac12 \left(1 + \cos(2 \pi c\, p)\right)\right), \quad s \ge W

    The default ``num_cycles=0.5`` is a half cosine reaching ``min_lr`` at
    :math:`T`. With ``min_lr=0`` the values are PaddleNLP's up to :math:`T`;
    after :math:`T` the value reached at :math:`T` is held (PaddleNLP's curve
    climbs back up). It is :func:`get_cosine_with_min_lr_schedule_with_warmup`
    with the floor given as ``min_lr``, which it returns.

    Args:
        learning_rate (float): The peak learning rate.
        num_warmup_steps (int): Warmup steps :math:`W`.
        num_training_steps (int): Training steps :math:`T`.
        num_cycles (float, optional): Number of cosine waves over the decay phase. Default: ``0.5``.
        last_epoch (int, optional): The last step already taken. Default: ``-1``.
        min_lr (float, optional): The floor, ``0 <= min_lr <= learning_rate``. Default: ``0.0``.

    Examples:
        >>> from paddle_llrd import get_cosine_schedule_with_warmup
        >>> from paddle_llrd.schedules.table import lr_curve
        >>> scheduler = get_cosine_schedule_with_warmup(1.0, 2, 6, min_lr=0.2)
        >>> [round(lr, 6) for lr in lr_curve(scheduler, 7)]
        [0.0, 0.5, 1.0, 0.882843, 0.6, 0.317157, 0.2, 0.2]
    """
    return _cosine_with_min_lr(learning_rate, num_warmup_steps, num_training_steps, num_cycles, last_epoch,
                               min_lr=min_lr, caller="get_cosine_schedule_with_warmup")


def _cosine(learning_rate, num_warmup_steps, num_training_steps, num_cycles=0.5, last_epoch=-1, min_lr=0.0, *,
            lr_warmup_init=0.0, caller=None):
    return _cosine_with_min_lr(learning_rate, num_warmup_steps, num_training_steps, num_cycles, last_epoch,
                               min_lr=min_lr, lr_warmup_init=lr_warmup_init, caller=caller)


def get_constant_schedule(learning_rate: float, last_epoch: int = -1) -> LambdaDecay:
    r"""A constant ``learning_rate`` (``"constant"``): :math:`f(s) = 1`.

    Examples:
        >>> from paddle_llrd import get_constant_schedule
        >>> get_constant_schedule(0.3)()
        0.3
    """
    learning_rate = checked_non_negative_real(learning_rate)
    return _LambdaSchedule(learning_rate, lr_lambda(factors.constant, 0), checked_step_index(last_epoch))


def get_constant_schedule_with_warmup(
    learning_rate: float, num_warmup_steps: int, last_epoch: int = -1
) -> LambdaDecay:
    r"""Linear warmup, then constant (``"constant_with_warmup"``): :math:`f(s) = 1` for :math:`s \ge W`.

    Returns a :class:`~paddle_llrd.ConstScheduleWithWarmup`.

    Examples:
        >>> from paddle_llrd import get_constant_schedule_with_warmup
        >>> from paddle_llrd.schedules.table import lr_curve
        >>> scheduler = get_constant_schedule_with_warmup(0.2, num_warmup_steps=4)
        >>> [round(lr, 6) for lr in lr_curve(scheduler, 5)]
        [0.0, 0.05, 0.1, 0.15, 0.2, 0.2]
    """
    return _constant_with_warmup(learning_rate, num_warmup_steps, last_epoch)


def _constant_with_warmup(learning_rate, num_warmup_steps, last_epoch=-1, *, lr_warmup_init=0.0, caller=None):
    warmup = checked_step_count(num_warmup_steps, "num_warmup_steps")
    start = _start(lr_warmup_init, learning_rate)
    return ConstScheduleWithWarmup(learning_rate, warmup, last_epoch=last_epoch, warmup_start=start)


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

    ``lr_end >= learning_rate`` raises ``ValueError``. Returns a
    :class:`~paddle_llrd.PolyDecayWithWarmup`.

    Examples:
        >>> from paddle_llrd import get_polynomial_decay_schedule_with_warmup
        >>> from paddle_llrd.schedules.table import lr_curve
        >>> scheduler = get_polynomial_decay_schedule_with_warmup(1.0, 0, 4, lr_end=0.2)
        >>> [round(lr, 6) for lr in lr_curve(scheduler, 5)]
        [1.0, 0.8, 0.6, 0.4, 0.2, 0.2]
    """
    return _polynomial(learning_rate, num_warmup_steps, num_training_steps, lr_end, power, last_epoch, caller="get_polynomial_decay_schedule_with_warmup")


def _polynomial(learning_rate, num_warmup_steps, num_training_steps, lr_end=1e-7, power=1.0, last_epoch=-1, *,
                lr_warmup_init=0.0, caller=None):
    warmup, total = _warmup_and_total(num_warmup_steps, num_training_steps, caller)
    return PolyDecayWithWarmup(learning_rate, total, warmup, lr_end=lr_end, power=power, last_epoch=last_epoch,
                               warmup_start=_start(lr_warmup_init, learning_rate), warn_long_warmup=False)


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
    ``with_hard_restarts=True`` and ``num_cycles=float(c)``, which it returns.
    Only the defaults differ: Hugging Face's ``1`` here, PaddleNLP's ``0.5``
    for the class. :func:`get_scheduler` uses the ``num_cycles`` its caller
    passes and ``1`` when none is passed; PaddleNLP's ``Trainer`` always passes
    ``TrainingArguments.num_cycles`` (``0.5`` by default), so set
    ``num_cycles`` to 1 or more there for whole cycles.

    Args:
        learning_rate (float): The peak learning rate, ``>= 0``.
        num_warmup_steps (int): Warmup steps :math:`W`, ``>= 0``.
        num_training_steps (int): Training steps :math:`T`, ``>= 1``.
        num_cycles (float, optional): The number of cycles :math:`c \ge 0`
            (an ``int`` is accepted). Default: ``1.0``.
        last_epoch (int, optional): The last step already taken. Default: ``-1``.

    Examples:
        >>> from paddle_llrd.schedules import registry
        >>> from paddle_llrd.schedules.table import lr_curve
        >>> scheduler = registry.get_cosine_with_hard_restarts_schedule_with_warmup(
        ...     1.0, 2, 10, num_cycles=2)
        >>> [round(lr, 6) for lr in lr_curve(scheduler, 11)]
        [0.0, 0.5, 1.0, 0.853553, 0.5, 0.146447, 1.0, 0.853553, 0.5, 0.146447, 0.0, 0.0]
    """
    return _cosine_with_hard_restarts(learning_rate, num_warmup_steps, num_training_steps, num_cycles, last_epoch, 
                                      caller="get_cosine_with_hard_restarts_schedule_with_warmup")


def _cosine_with_hard_restarts(learning_rate, num_warmup_steps, num_training_steps, num_cycles=1.0, last_epoch=-1, *,
                               lr_warmup_init=0.0, caller=None):
    warmup, total = _warmup_and_total(num_warmup_steps, num_training_steps)
    num_cycles = _cycle_count(num_cycles)
    if caller is not None:
        warn_if_warmup_outlasts_training(warmup, total, caller, "num_warmup_steps", "num_training_steps")
    return CosineDecayWithWarmup(
        learning_rate, total, warmup, with_hard_restarts=True, num_cycles=num_cycles, last_epoch=last_epoch,
        warmup_start=_start(lr_warmup_init, learning_rate), warn_long_warmup=False,
    )


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
        >>> from paddle_llrd.schedules.registry import get_inverse_sqrt_schedule
        >>> from paddle_llrd.schedules.table import lr_curve
        >>> scheduler = get_inverse_sqrt_schedule(0.5, num_warmup_steps=4)
        >>> lrs = [round(lr, 6) for lr in lr_curve(scheduler, 16)]
        >>> lrs[:5], lrs[16]
        ([0.0, 0.125, 0.25, 0.375, 0.5], 0.25)
        >>> late = get_inverse_sqrt_schedule(
        ...     1.0, num_warmup_steps=0, timescale=100, last_epoch=299)
        >>> late()
        0.5
    """
    return _inverse_sqrt(learning_rate, num_warmup_steps, timescale, last_epoch)


def _inverse_sqrt(learning_rate, num_warmup_steps, timescale=None, last_epoch=-1, *, lr_warmup_init=0.0,
                  caller=None):
    learning_rate = checked_non_negative_real(learning_rate)
    warmup = checked_step_count(num_warmup_steps, "num_warmup_steps")
    if timescale is None:
        timescale = warmup if warmup > 0 else DEFAULT_INVERSE_SQRT_TIMESCALE
    timescale = checked_step_count(timescale, "timescale", minimum=1)
    factor = lr_lambda(factors.inverse_sqrt_decay, warmup, _start(lr_warmup_init, learning_rate), timescale=timescale)
    return _LambdaSchedule(learning_rate, factor, checked_step_index(last_epoch))


def _cycle_count(num_cycles: Any) -> float:
    """``num_cycles`` as a finite float ``>= 0``; ``TypeError``/``ValueError`` naming it."""
    num_cycles = checked_finite_real(num_cycles, "num_cycles")
    if num_cycles < 0:
        raise ValueError(f"`num_cycles` must be >= 0 (the number of cycles), got {num_cycles!r}.")
    return num_cycles


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
        ratio = checked_finite_real(ratio, ratio_name)
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
        >>> from paddle_llrd.schedules.table import lr_curve
        >>> scheduler = get_cosine_with_min_lr_schedule_with_warmup(
        ...     1.0, 2, 6, min_lr_rate=0.2)
        >>> lrs = lr_curve(scheduler, 7)
        >>> [round(lr, 6) for lr in lrs]
        [0.0, 0.5, 1.0, 0.882843, 0.6, 0.317157, 0.2, 0.2]
    """
    return _cosine_with_min_lr(learning_rate, num_warmup_steps, num_training_steps, num_cycles, last_epoch, min_lr,
                               min_lr_rate, 
                               caller="get_cosine_with_min_lr_schedule_with_warmup")


def _cosine_with_min_lr(learning_rate, num_warmup_steps, num_training_steps, num_cycles=0.5, last_epoch=-1,
                        min_lr=None, min_lr_rate=None, *, lr_warmup_init=0.0, caller=None):
    learning_rate = checked_non_negative_real(learning_rate)
    warmup, total = _warmup_and_total(num_warmup_steps, num_training_steps)
    num_cycles = _cycle_count(num_cycles)
    floor = _floor_ratio(
        learning_rate, min_lr, min_lr_rate, "min_lr_rate", schedule="cosine_with_min_lr", required=True
    )
    start = _start(lr_warmup_init, learning_rate)
    if caller is not None:
        warn_if_warmup_outlasts_training(warmup, total, caller, "num_warmup_steps", "num_training_steps")
    factor = lr_lambda(
        factors.cosine_waves, warmup, start, total_steps=total, num_cycles=num_cycles, floor=floor,
        hold_after_end=True,
    )
    return _LambdaSchedule(learning_rate, factor, checked_step_index(last_epoch))


#: The share of ``num_training_steps`` that ``"warmup_stable_decay"`` decays over when
#: neither ``num_decay_steps`` nor ``decay_ratio`` is given.
DEFAULT_WSD_DECAY_RATIO = 0.1

# Megatron-LM calls the 1-sqrt style "minus_sqrt".
_WSD_STYLE_ALIASES = {"minus_sqrt": "1-sqrt"}


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


def _wsd_decay_steps(num_decay_steps: Any, decay_ratio: Any, total: int) -> int:
    if num_decay_steps is not None and decay_ratio is not None:
        raise ValueError(
            "Pass only one of `num_decay_steps` (steps) and `decay_ratio` (a fraction of num_training_steps), "
            f"got num_decay_steps={num_decay_steps!r} and decay_ratio={decay_ratio!r}."
        )
    if num_decay_steps is not None:
        return checked_step_count(num_decay_steps, "num_decay_steps")
    ratio = DEFAULT_WSD_DECAY_RATIO if decay_ratio is None else checked_finite_real(decay_ratio, "decay_ratio")
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"`decay_ratio` must lie in [0, 1] (a fraction of num_training_steps), got {ratio!r}.")
    return int(math.floor(ratio * total))


def get_wsd_schedule(
    learning_rate: float, num_warmup_steps: int, num_training_steps: int, num_decay_steps: Optional[int] = None,
    decay_ratio: Optional[float] = None, decay_style: str = "cosine", min_lr_ratio: Optional[float] = None,
    min_lr: Optional[float] = None, last_epoch: int = -1,
) -> LambdaDecay:
    r"""Warmup, a stable stage at the peak, then a decay to a floor by the end (``"warmup_stable_decay"``).

    The WSD schedule (MiniCPM; Megatron-LM's ``--lr-decay-style WSD``, Hugging
    Face's ``get_wsd_schedule``). The decay stage is the last :math:`D` of the
    :math:`T` training steps: :math:`D` = ``num_decay_steps``, or
    :math:`\lfloor` ``decay_ratio`` :math:`\cdot T \rfloor`, or
    :math:`\lfloor 0.1\, T \rfloor` when neither is given; the stable stage
    fills :math:`[W, T - D)`, so :math:`W + D \le T` is required. With the
    floor :math:`m` = ``min_lr_ratio`` or ``min_lr`` :math:`/\eta` (at most one
    of them; 0 when neither) and :math:`r = (s - (T - D)) / D`:

    .. math::

        f(s) = \begin{cases}
            s / \max(1, W) & s < W \\
            1 & W \le s < T - D \\
            m + (1 - m)\, a(r) & T - D \le s < T \\
            m & s \ge T
        \end{cases}

    with the decay shape :math:`a(r)` named by ``decay_style`` (each falls from
    1 at :math:`r = 0` to 0 at :math:`r = 1`):

    * ``"linear"``: :math:`a(r) = 1 - r`
    * ``"cosine"``: :math:`a(r) = \tfrac12 (1 + \cos(\pi r))`
    * ``"exponential"``: :math:`a(r) = 2 \cdot 0.5^{r} - 1`
    * ``"1-sqrt"`` (Megatron-LM's ``"minus_sqrt"`` is accepted too):
      :math:`a(r) = 1 - \sqrt{r}`

    These are Megatron-LM's ``WSD`` formulas (its ``lr_decay_steps`` is
    :math:`T`, ``wsd_decay_steps`` is :math:`D`, ``init_lr`` 0) and, for the
    styles they share, Hugging Face's, with two differences from the latter:
    the warmup always starts at 0 (Hugging Face's starts at
    :math:`m \eta`), and the cosine is the half cosine (no ``num_cycles``).
    ``decay_style`` is Hugging Face's ``decay_type``; the stable stage is
    :math:`T - W - D` steps rather than a ``num_stable_steps``.

    Args:
        learning_rate (float): The peak learning rate :math:`\eta`, ``>= 0``.
        num_warmup_steps (int): Warmup steps :math:`W`, ``>= 0``.
        num_training_steps (int): Training steps :math:`T`, ``>= 1``; the decay ends here.
        num_decay_steps (int, optional): Decay steps :math:`D`, ``<= T - W``.
        decay_ratio (float, optional): :math:`D` as a fraction of :math:`T`, in
            ``[0, 1]``. Default (with ``num_decay_steps`` also ``None``): ``0.1``.
        decay_style (str, optional): ``"linear"``, ``"cosine"``,
            ``"exponential"`` or ``"1-sqrt"``. Default: ``"cosine"``.
        min_lr_ratio (float, optional): The floor as a fraction of ``learning_rate``, in ``[0, 1]``.
        min_lr (float, optional): The floor as an lr, ``<= learning_rate``.
        last_epoch (int, optional): The last step already taken. Default: ``-1``.

    Examples:
        >>> from paddle_llrd.schedules.registry import get_wsd_schedule
        >>> from paddle_llrd.schedules.table import lr_curve
        >>> scheduler = get_wsd_schedule(
        ...     1.0, num_warmup_steps=2, num_training_steps=10, num_decay_steps=4,
        ...     decay_style="linear", min_lr_ratio=0.2)
        >>> [round(lr, 6) for lr in lr_curve(scheduler, 11)]
        [0.0, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2, 0.2]
        >>> def lr_half_way(style):
        ...     return round(get_wsd_schedule(1.0, 0, 4, num_decay_steps=4,
        ...                                   decay_style=style, last_epoch=1)(), 6)
        >>> half_way = {style: lr_half_way(style)
        ...             for style in ["linear", "cosine", "exponential", "1-sqrt"]}
        >>> half_way
        {'linear': 0.5, 'cosine': 0.5, 'exponential': 0.414214, '1-sqrt': 0.292893}
    """
    return _wsd(learning_rate, num_warmup_steps, num_training_steps, num_decay_steps, decay_ratio, decay_style,
                min_lr_ratio, min_lr, last_epoch)


def _wsd(learning_rate, num_warmup_steps, num_training_steps, num_decay_steps=None, decay_ratio=None,
         decay_style="cosine", min_lr_ratio=None, min_lr=None, last_epoch=-1, *, lr_warmup_init=0.0, caller=None):
    learning_rate = checked_non_negative_real(learning_rate)
    warmup, total = _warmup_and_total(num_warmup_steps, num_training_steps)
    decay_steps = _wsd_decay_steps(num_decay_steps, decay_ratio, total)
    if warmup + decay_steps > total:
        given = "num_decay_steps" if num_decay_steps is not None else "decay_ratio"
        raise ValueError(
            f"`num_warmup_steps` ({warmup}) plus the decay steps ({decay_steps}, from `{given}`) must not exceed "
            f"`num_training_steps` ({total}): the decay stage is the end of training, after warmup."
        )
    style = _wsd_decay_style(decay_style)
    floor = _floor_ratio(
        learning_rate, min_lr, min_lr_ratio, "min_lr_ratio", schedule="warmup_stable_decay", required=False
    )
    factor = lr_lambda(
        factors.stable_then_decay,
        warmup,
        _start(lr_warmup_init, learning_rate),
        total_steps=total,
        decay_steps=decay_steps,
        anneal=WSD_DECAY_STYLES[style],
        floor=floor,
    )
    return _LambdaSchedule(learning_rate, factor, checked_step_index(last_epoch))


def _annealing(cls, learning_rate, num_warmup_steps, num_training_steps, min_lr=0.0, last_epoch=-1, *,
               lr_warmup_init=0.0, caller=None):
    """``cls`` (one of the annealing classes) built from the registry's arguments, checked under their names."""
    learning_rate = checked_non_negative_real(learning_rate)
    min_lr = checked_floor_lr(min_lr, learning_rate, "learning_rate")
    warmup, total = _warmup_and_total(num_warmup_steps, num_training_steps)
    if total <= warmup:
        raise ValueError(
            f"`num_training_steps` ({total}) must be greater than `num_warmup_steps` ({warmup}) "
            "for the annealing schedules (they anneal between the two)."
        )
    return cls(learning_rate, min_lr, warmup, total, last_epoch=last_epoch,
               warmup_start=_start(lr_warmup_init, learning_rate))


_cosine_annealing = functools.partial(_annealing, CosineAnnealingWithWarmupDecay)
_linear_annealing = functools.partial(_annealing, LinearAnnealingWithWarmupDecay)


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

    Examples:
        >>> from paddle_llrd import get_cosine_annealing_schedule_with_warmup
        >>> from paddle_llrd.schedules.table import lr_curve
        >>> scheduler = get_cosine_annealing_schedule_with_warmup(1.0, 2, 6, min_lr=0.2)
        >>> [round(lr, 6) for lr in lr_curve(scheduler, 7)]
        [0.0, 0.5, 1.0, 0.882843, 0.6, 0.317157, 0.2, 0.2]
    """
    return _cosine_annealing(learning_rate, num_warmup_steps, num_training_steps, min_lr, last_epoch)


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
        >>> from paddle_llrd.schedules.table import lr_curve
        >>> scheduler = get_linear_annealing_schedule_with_warmup(1.0, 2, 6, min_lr=0.2)
        >>> [round(lr, 6) for lr in lr_curve(scheduler, 7)][2:7]
        [1.0, 0.8, 0.6, 0.4, 0.2]
    """
    return _linear_annealing(learning_rate, num_warmup_steps, num_training_steps, min_lr, last_epoch)


def _start(lr_warmup_init: Any, learning_rate: Any) -> float:
    """``lr_warmup_init`` as ``warmup_start``, the fraction of the peak where the warmup starts."""
    return checked_warmup_start(lr_warmup_init, checked_non_negative_real(learning_rate))
