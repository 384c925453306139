r"""The schedule functions behind the registry names, one per schedule (Hugging Face's ``get_*_schedule``).

Every function takes ``learning_rate`` first and returns a
:class:`paddle.optimizer.lr.LRScheduler`; all but the annealing ones a
:class:`paddle.optimizer.lr.LambdaDecay` whose lr at step :math:`s` is
``learning_rate * f(s)`` (:math:`f` of :mod:`.factors`), with :math:`W` =
``num_warmup_steps``, :math:`T` = ``num_training_steps`` and the linear
warmup :math:`f(s) = s / \max(1, W)` for :math:`s < W`. Each function is one
entry of :mod:`.registry`, which reads its options from its signature.
``"warmup_stable_decay"``'s :func:`~.wsd.get_wsd_schedule` lives in :mod:`.wsd`
and is importable from here too.

The long-warmup rule (:mod:`.long_warmup`) is applied once per call, after
the schedule is built, naming the function's arguments.
"""
from __future__ import annotations

from typing import Any, Optional

from paddle.optimizer.lr import LambdaDecay

from ..checks import checked_non_negative, checked_step_index
from . import factors
from .factors import lr_lambda
from .long_warmup import warn_if_warmup_outlasts_training
from .schedule_checks import checked_floor_lr, checked_floor_ratio, checked_step_count
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
# "warmup_stable_decay", with its two families of keywords, has a module of its own; its function is one of these.
from .wsd import DEFAULT_WSD_DECAY_RATIO, WSD_HUGGING_FACE_KEYWORDS, WSD_MEGATRON_KEYWORDS, get_wsd_schedule

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
    floor = checked_floor_ratio(learning_rate, min_lr, min_lr_rate, "min_lr_rate", schedule="cosine_with_min_lr",
                                required=True)
    return _cosine_to_floor(learning_rate, warmup, total, num_cycles, last_epoch, floor,
                            "get_cosine_with_min_lr_schedule_with_warmup")


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
