r"""Schedules by name: ``get_scheduler("cosine", ...)``, as PaddleNLP's Trainer calls it.

The names are the ``lr_scheduler_type`` strings of PaddleNLP's
``TrainingArguments``, then Hugging Face's ``cosine_with_restarts``,
``inverse_sqrt``, ``cosine_with_min_lr`` and ``warmup_stable_decay`` (with
Megatron-LM's decay styles), the Megatron-style annealing schedulers,
``sequential`` (stages one after another, :class:`~paddle_llrd.SequentialSchedule`)
and ``reduce_lr_on_plateau`` (Paddle's ``ReduceOnPlateau``, stepped with a
metric). Every schedule function takes ``learning_rate`` first; all but the
two annealing ones and those two return a
:class:`paddle.optimizer.lr.LambdaDecay` whose lr at step :math:`s` is
``learning_rate * f(s)``, with :math:`W` = ``num_warmup_steps``, :math:`T` =
``num_training_steps`` and the linear warmup :math:`f(s) = s / \max(1, W)`
for :math:`s < W`. Each ``f`` is the shared warmup followed by one small decay
function of :mod:`paddle_llrd.schedules.warmup`, bound with
:func:`functools.partial` (so the schedulers pickle).

Every schedule with a warmup takes Megatron-LM's ``lr_warmup_init`` through
:func:`get_scheduler`: the warmup then rises from ``lr_warmup_init`` instead
of 0, and every later step keeps its value.

:func:`register_scheduler` adds a schedule under a new name;
:func:`get_scheduler` passes each schedule only the arguments it accepts.
"""
from __future__ import annotations

import enum
import inspect
import math
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Dict, List, Optional, Union

from paddle.optimizer.lr import LambdaDecay, LRScheduler

from ..argument_checks import did_you_mean
from .plateau import ReduceOnPlateauSchedule
from .sequential import SequentialSchedule
from .warmup import (
    _WSD_DECAY_STYLES,
    _LambdaSchedule,
    ConstScheduleWithWarmup,
    CosineAnnealingWithWarmupDecay,
    CosineDecayWithWarmup,
    LinearAnnealingWithWarmupDecay,
    LinearDecayWithWarmup,
    PolyDecayWithWarmup,
    _constant,
    _cosine_waves,
    _finite_real,
    _floor_lr,
    _inverse_sqrt_decay,
    _last_epoch,
    _learning_rate,
    _lr_lambda,
    _stable_then_decay,
    _start_warmup_at,
    _step_count,
    _warmup_named,
    _warn_if_warmup_outlasts_training,
    _warmup_init_lr,
)

__all__ = [
    "SchedulerType",
    "TYPE_TO_SCHEDULER_FUNCTION",
    "get_constant_schedule",
    "get_constant_schedule_with_warmup",
    "get_cosine_annealing_schedule_with_warmup",
    "get_cosine_schedule_with_warmup",
    "get_cosine_with_hard_restarts_schedule_with_warmup",
    "get_cosine_with_min_lr_schedule_with_warmup",
    "get_inverse_sqrt_schedule",
    "get_linear_annealing_schedule_with_warmup",
    "get_linear_schedule_with_warmup",
    "get_polynomial_decay_schedule_with_warmup",
    "get_reduce_on_plateau_schedule",
    "get_scheduler",
    "get_sequential_schedule",
    "get_wsd_schedule",
    "register_scheduler",
    "schedule_function",
    "DEFAULT_INVERSE_SQRT_TIMESCALE",
    "DEFAULT_WSD_DECAY_RATIO",
]


class SchedulerType(str, enum.Enum):
    """The built-in schedule names.

    The first five are PaddleNLP's ``lr_scheduler_type`` values; then come
    Hugging Face's ``cosine_with_restarts``, ``inverse_sqrt``,
    ``cosine_with_min_lr`` and ``warmup_stable_decay`` (with Megatron-LM's
    decay styles), the Megatron-style annealing schedulers, ``sequential``
    (schedules one after another) and Hugging Face's ``reduce_lr_on_plateau``.

    Examples:
        >>> from paddle_llrd import SchedulerType
        >>> SchedulerType("cosine") is SchedulerType.COSINE, SchedulerType.COSINE == "cosine"
        (True, True)
        >>> str(SchedulerType.WARMUP_STABLE_DECAY)
        'warmup_stable_decay'
    """

    LINEAR = "linear"
    COSINE = "cosine"
    CONSTANT = "constant"
    CONSTANT_WITH_WARMUP = "constant_with_warmup"
    POLYNOMIAL = "polynomial"
    COSINE_WITH_RESTARTS = "cosine_with_restarts"
    INVERSE_SQRT = "inverse_sqrt"
    COSINE_WITH_MIN_LR = "cosine_with_min_lr"
    WARMUP_STABLE_DECAY = "warmup_stable_decay"
    COSINE_ANNEALING_WITH_WARMUP = "cosine_annealing_with_warmup"
    LINEAR_ANNEALING_WITH_WARMUP = "linear_annealing_with_warmup"
    SEQUENTIAL = "sequential"
    REDUCE_LR_ON_PLATEAU = "reduce_lr_on_plateau"

    def __str__(self) -> str:
        return self.value


def _warmup_and_total(num_warmup_steps: Any, num_training_steps: Any) -> "tuple[int, int]":
    """``num_warmup_steps`` (``>= 0``) and ``num_training_steps`` (``>= 1``) as step counts."""
    return (
        _step_count(num_warmup_steps, "num_warmup_steps"),
        _step_count(num_training_steps, "num_training_steps", minimum=1),
    )


def get_linear_schedule_with_warmup(
    learning_rate: float, num_warmup_steps: int, num_training_steps: int, last_epoch: int = -1
) -> LambdaDecay:
    r"""Linear warmup, then linear decay to 0 at ``num_training_steps`` (``"linear"``).

    .. math:: f(s) = \max\!\left(0, \frac{T - s}{\max(1, T - W)}\right), \quad s \ge W

    Returns a :class:`~paddle_llrd.LinearDecayWithWarmup`.

    Examples:
        >>> from paddle_llrd import get_linear_schedule_with_warmup
        >>> scheduler = get_linear_schedule_with_warmup(
        ...     0.1, num_warmup_steps=2, num_training_steps=10)
        >>> lrs = []
        >>> for _ in range(5):
        ...     lrs.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> lrs
        [0.0, 0.05, 0.1, 0.0875, 0.075]
    """
    warmup, total = _warmup_and_total(num_warmup_steps, num_training_steps)
    with _warmup_named("get_linear_schedule_with_warmup"):
        return LinearDecayWithWarmup(learning_rate, total, warmup, last_epoch=last_epoch)


def get_cosine_schedule_with_warmup(
    learning_rate: float,
    num_warmup_steps: int,
    num_training_steps: int,
    num_cycles: float = 0.5,
    last_epoch: int = -1,
    min_lr: float = 0.0,
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
        >>> scheduler = get_cosine_schedule_with_warmup(1.0, 2, 6, min_lr=0.2)
        >>> lrs = []
        >>> for _ in range(8):
        ...     lrs.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> lrs
        [0.0, 0.5, 1.0, 0.882843, 0.6, 0.317157, 0.2, 0.2]
    """
    with _warmup_named("get_cosine_schedule_with_warmup"):
        return get_cosine_with_min_lr_schedule_with_warmup(
            learning_rate, num_warmup_steps, num_training_steps, num_cycles, last_epoch, min_lr=min_lr
        )


def get_constant_schedule(learning_rate: float, last_epoch: int = -1) -> LambdaDecay:
    r"""A constant ``learning_rate`` (``"constant"``): :math:`f(s) = 1`.

    Examples:
        >>> from paddle_llrd import get_constant_schedule
        >>> get_constant_schedule(0.3)()
        0.3
    """
    learning_rate = _learning_rate(learning_rate)
    return _LambdaSchedule(learning_rate, _lr_lambda(_constant, 0), _last_epoch(last_epoch))


def get_constant_schedule_with_warmup(
    learning_rate: float, num_warmup_steps: int, last_epoch: int = -1
) -> LambdaDecay:
    r"""Linear warmup, then constant (``"constant_with_warmup"``): :math:`f(s) = 1` for :math:`s \ge W`.

    Returns a :class:`~paddle_llrd.ConstScheduleWithWarmup`.

    Examples:
        >>> from paddle_llrd import get_constant_schedule_with_warmup
        >>> scheduler = get_constant_schedule_with_warmup(0.2, num_warmup_steps=4)
        >>> lrs = []
        >>> for _ in range(6):
        ...     lrs.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> lrs
        [0.0, 0.05, 0.1, 0.15, 0.2, 0.2]
    """
    warmup = _step_count(num_warmup_steps, "num_warmup_steps")
    return ConstScheduleWithWarmup(learning_rate, warmup, last_epoch=last_epoch)


def get_polynomial_decay_schedule_with_warmup(
    learning_rate: float,
    num_warmup_steps: int,
    num_training_steps: int,
    lr_end: float = 1e-7,
    power: float = 1.0,
    last_epoch: int = -1,
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
        >>> scheduler = get_polynomial_decay_schedule_with_warmup(1.0, 0, 4, lr_end=0.2)
        >>> lrs = []
        >>> for _ in range(6):
        ...     lrs.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> lrs
        [1.0, 0.8, 0.6, 0.4, 0.2, 0.2]
    """
    warmup, total = _warmup_and_total(num_warmup_steps, num_training_steps)
    with _warmup_named("get_polynomial_decay_schedule_with_warmup"):
        return PolyDecayWithWarmup(learning_rate, total, warmup, lr_end=lr_end, power=power, last_epoch=last_epoch)


def get_cosine_with_hard_restarts_schedule_with_warmup(
    learning_rate: float,
    num_warmup_steps: int,
    num_training_steps: int,
    num_cycles: float = 1.0,
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
        >>> scheduler = registry.get_cosine_with_hard_restarts_schedule_with_warmup(
        ...     1.0, 2, 10, num_cycles=2)
        >>> lrs = []
        >>> for _ in range(12):
        ...     lrs.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> lrs
        [0.0, 0.5, 1.0, 0.853553, 0.5, 0.146447, 1.0, 0.853553, 0.5, 0.146447, 0.0, 0.0]
    """
    warmup, total = _warmup_and_total(num_warmup_steps, num_training_steps)
    num_cycles = _cycle_count(num_cycles)
    with _warmup_named("get_cosine_with_hard_restarts_schedule_with_warmup"):
        return CosineDecayWithWarmup(
            learning_rate, total, warmup, with_hard_restarts=True, num_cycles=num_cycles, last_epoch=last_epoch
        )


#: The ``timescale`` of ``"inverse_sqrt"`` without warmup (Hugging Face's and big_vision's).
DEFAULT_INVERSE_SQRT_TIMESCALE = 10_000


def get_inverse_sqrt_schedule(
    learning_rate: float,
    num_warmup_steps: int,
    timescale: Optional[int] = None,
    last_epoch: int = -1,
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
        >>> scheduler = get_inverse_sqrt_schedule(0.5, num_warmup_steps=4)
        >>> lrs = []
        >>> for _ in range(17):
        ...     lrs.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> lrs[:5], lrs[16]
        ([0.0, 0.125, 0.25, 0.375, 0.5], 0.25)
        >>> late = get_inverse_sqrt_schedule(
        ...     1.0, num_warmup_steps=0, timescale=100, last_epoch=299)
        >>> late()
        0.5
    """
    learning_rate = _learning_rate(learning_rate)
    warmup = _step_count(num_warmup_steps, "num_warmup_steps")
    if timescale is None:
        timescale = warmup if warmup > 0 else DEFAULT_INVERSE_SQRT_TIMESCALE
    timescale = _step_count(timescale, "timescale", minimum=1)
    lr_lambda = _lr_lambda(_inverse_sqrt_decay, warmup, timescale=timescale)
    return _LambdaSchedule(learning_rate, lr_lambda, _last_epoch(last_epoch))


def _cycle_count(num_cycles: Any) -> float:
    """``num_cycles`` as a finite float ``>= 0``; ``TypeError``/``ValueError`` naming it."""
    num_cycles = _finite_real(num_cycles, "num_cycles")
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
        min_lr = _floor_lr(min_lr, learning_rate, "learning_rate")
        return min_lr / learning_rate if learning_rate > 0 else 0.0
    if ratio is not None:
        ratio = _finite_real(ratio, ratio_name)
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
    learning_rate: float,
    num_warmup_steps: int,
    num_training_steps: int,
    num_cycles: float = 0.5,
    last_epoch: int = -1,
    min_lr: Optional[float] = None,
    min_lr_rate: Optional[float] = None,
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
        >>> from paddle_llrd.schedules import registry
        >>> scheduler = registry.get_cosine_with_min_lr_schedule_with_warmup(
        ...     1.0, 2, 6, min_lr_rate=0.2)
        >>> lrs = []
        >>> for _ in range(8):
        ...     lrs.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> lrs
        [0.0, 0.5, 1.0, 0.882843, 0.6, 0.317157, 0.2, 0.2]
    """
    learning_rate = _learning_rate(learning_rate)
    warmup, total = _warmup_and_total(num_warmup_steps, num_training_steps)
    num_cycles = _cycle_count(num_cycles)
    floor = _floor_ratio(
        learning_rate, min_lr, min_lr_rate, "min_lr_rate", schedule="cosine_with_min_lr", required=True
    )
    _warn_if_warmup_outlasts_training(
        warmup, total, "get_cosine_with_min_lr_schedule_with_warmup", "num_warmup_steps", "num_training_steps"
    )
    lr_lambda = _lr_lambda(
        _cosine_waves, warmup, total_steps=total, num_cycles=num_cycles, floor=floor, hold_after_end=True
    )
    return _LambdaSchedule(learning_rate, lr_lambda, _last_epoch(last_epoch))


#: The share of ``num_training_steps`` that ``"warmup_stable_decay"`` decays over when
#: neither ``num_decay_steps`` nor ``decay_ratio`` is given.
DEFAULT_WSD_DECAY_RATIO = 0.1

# Megatron-LM calls the 1-sqrt style "minus_sqrt".
_WSD_STYLE_ALIASES = {"minus_sqrt": "1-sqrt"}


def _wsd_decay_style(decay_style: Any) -> str:
    if not isinstance(decay_style, str):
        raise TypeError(
            f"`decay_style` must be a str, one of {', '.join(map(repr, _WSD_DECAY_STYLES))}; got {decay_style!r}."
        )
    style = _WSD_STYLE_ALIASES.get(decay_style, decay_style)
    if style not in _WSD_DECAY_STYLES:
        raise ValueError(
            f"`decay_style` must be one of {', '.join(map(repr, _WSD_DECAY_STYLES))} "
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
        return _step_count(num_decay_steps, "num_decay_steps")
    ratio = DEFAULT_WSD_DECAY_RATIO if decay_ratio is None else _finite_real(decay_ratio, "decay_ratio")
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"`decay_ratio` must lie in [0, 1] (a fraction of num_training_steps), got {ratio!r}.")
    return int(math.floor(ratio * total))


def get_wsd_schedule(
    learning_rate: float,
    num_warmup_steps: int,
    num_training_steps: int,
    num_decay_steps: Optional[int] = None,
    decay_ratio: Optional[float] = None,
    decay_style: str = "cosine",
    min_lr_ratio: Optional[float] = None,
    min_lr: Optional[float] = None,
    last_epoch: int = -1,
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
        >>> scheduler = get_wsd_schedule(
        ...     1.0, num_warmup_steps=2, num_training_steps=10, num_decay_steps=4,
        ...     decay_style="linear", min_lr_ratio=0.2)
        >>> lrs = []
        >>> for _ in range(12):
        ...     lrs.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> lrs
        [0.0, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2, 0.2]
        >>> def lr_half_way(style):
        ...     return round(get_wsd_schedule(1.0, 0, 4, num_decay_steps=4,
        ...                                   decay_style=style, last_epoch=1)(), 6)
        >>> half_way = {style: lr_half_way(style)
        ...             for style in ["linear", "cosine", "exponential", "1-sqrt"]}
        >>> half_way
        {'linear': 0.5, 'cosine': 0.5, 'exponential': 0.414214, '1-sqrt': 0.292893}
    """
    learning_rate = _learning_rate(learning_rate)
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
    lr_lambda = _lr_lambda(
        _stable_then_decay,
        warmup,
        total_steps=total,
        decay_steps=decay_steps,
        anneal=_WSD_DECAY_STYLES[style],
        floor=floor,
    )
    return _LambdaSchedule(learning_rate, lr_lambda, _last_epoch(last_epoch))


def _annealing_arguments(learning_rate: Any, num_warmup_steps: Any, num_training_steps: Any, min_lr: Any):
    """The annealing classes' arguments, checked under the registry's names."""
    learning_rate = _learning_rate(learning_rate)
    min_lr = _floor_lr(min_lr, learning_rate, "learning_rate")
    warmup, total = _warmup_and_total(num_warmup_steps, num_training_steps)
    if total <= warmup:
        raise ValueError(
            f"`num_training_steps` ({total}) must be greater than `num_warmup_steps` ({warmup}) "
            "for the annealing schedules (they anneal between the two)."
        )
    return {"max_lr": learning_rate, "min_lr": min_lr, "warmup_step": warmup, "decay_step": total}


def get_cosine_annealing_schedule_with_warmup(
    learning_rate: float,
    num_warmup_steps: int,
    num_training_steps: int,
    min_lr: float = 0.0,
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
        >>> scheduler = get_cosine_annealing_schedule_with_warmup(1.0, 2, 6, min_lr=0.2)
        >>> lrs = []
        >>> for _ in range(8):
        ...     lrs.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> lrs
        [0.0, 0.5, 1.0, 0.882843, 0.6, 0.317157, 0.2, 0.2]
    """
    arguments = _annealing_arguments(learning_rate, num_warmup_steps, num_training_steps, min_lr)
    return CosineAnnealingWithWarmupDecay(**arguments, last_epoch=last_epoch)


def get_linear_annealing_schedule_with_warmup(
    learning_rate: float,
    num_warmup_steps: int,
    num_training_steps: int,
    min_lr: float = 0.0,
    last_epoch: int = -1,
) -> LinearAnnealingWithWarmupDecay:
    r"""Megatron-style warmup to ``learning_rate``, linear annealing to ``min_lr`` (``"linear_annealing_with_warmup"``).

    :class:`~paddle_llrd.LinearAnnealingWithWarmupDecay` ``(max_lr=learning_rate,
    min_lr=min_lr, warmup_step=num_warmup_steps, decay_step=num_training_steps)``:
    as ``"cosine_annealing_with_warmup"`` with :math:`1 - r` for the cosine factor,

    .. math::

        \mathrm{lr}(s) = \eta_{\min} + (1 - r) (\eta - \eta_{\min}), \qquad r = \frac{s - W}{T - W},\ W < s \le T

    Unlike ``"linear"``, the warmup reaches the peak at step :math:`W` itself
    and the lr stays at ``min_lr`` after :math:`T`.

    Examples:
        >>> from paddle_llrd import get_linear_annealing_schedule_with_warmup
        >>> scheduler = get_linear_annealing_schedule_with_warmup(1.0, 2, 6, min_lr=0.2)
        >>> lrs = []
        >>> for _ in range(8):
        ...     lrs.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> lrs
        [0.0, 0.5, 1.0, 0.8, 0.6, 0.4, 0.2, 0.2]
    """
    arguments = _annealing_arguments(learning_rate, num_warmup_steps, num_training_steps, min_lr)
    return LinearAnnealingWithWarmupDecay(**arguments, last_epoch=last_epoch)


#: Keys of a ``"sequential"`` stage that are not arguments of the stage's schedule.
_STAGE_KEYS = ("name", "num_steps")


def _stage_spec(stages: Any) -> List[Mapping]:
    if isinstance(stages, (str, bytes, Mapping)) or not isinstance(stages, Sequence):
        raise TypeError(
            '`stages` must be a list of dicts such as {"name": "cosine", "num_steps": 1000, ...}, '
            f"got {type(stages).__name__}."
        )
    if not stages:
        raise ValueError("`stages` must hold at least one stage.")
    for index, stage in enumerate(stages):
        if not isinstance(stage, Mapping):
            raise TypeError(
                f'`stages[{index}]` must be a dict such as {{"name": "cosine", "num_steps": 1000}}, '
                f"got {type(stage).__name__} {stage!r}."
            )
        if "name" not in stage:
            raise ValueError(f"`stages[{index}]` lacks 'name', the registry name of its schedule: {dict(stage)!r}.")
        if "num_training_steps" in stage:
            raise ValueError(
                f"`stages[{index}]` sets 'num_training_steps'; a stage's length is its 'num_steps' "
                "(the stage's schedule spans it)."
            )
        if "last_epoch" in stage:
            raise ValueError(
                f"`stages[{index}]` sets 'last_epoch'; every stage starts at its own step 0, "
                "pass last_epoch to the sequential schedule to resume."
            )
    return list(stages)


def _stage_lengths(stages: List[Mapping], num_training_steps: Optional[int]) -> List[Optional[int]]:
    """Each stage's ``num_steps``; the last one's may be left out, it then fills up ``num_training_steps``."""
    lengths: List[Optional[int]] = []
    for index, stage in enumerate(stages):
        if "num_steps" in stage:
            lengths.append(_step_count(stage["num_steps"], f"stages[{index}]['num_steps']", minimum=1))
        elif index < len(stages) - 1:
            raise ValueError(
                f"`stages[{index}]` lacks 'num_steps' (the stage's length); only the last stage may leave it out."
            )
        else:
            lengths.append(None)
    earlier = sum(lengths[:-1])
    if num_training_steps is None:
        return lengths
    if lengths[-1] is None:
        if num_training_steps - earlier < 1:
            raise ValueError(
                f"The stages before the last take {earlier} steps, which leaves no step of `num_training_steps` "
                f"({num_training_steps}) for `stages[{len(stages) - 1}]`."
            )
        lengths[-1] = num_training_steps - earlier
    elif earlier + lengths[-1] != num_training_steps:
        raise ValueError(
            f"The stages' 'num_steps' add up to {earlier + lengths[-1]}, but `num_training_steps` is "
            f"{num_training_steps}; leave out the last stage's 'num_steps' to let it fill the rest."
        )
    return lengths


def _first_stage_option(stage: Mapping, key: str, value: Any, given: bool) -> Dict[str, Any]:
    """The run's ``num_warmup_steps`` / ``lr_warmup_init`` for the first stage, unless it sets its own."""
    if key in stage:
        if given and stage[key] != value:
            raise ValueError(
                f"`stages[0]['{key}']` ({stage[key]!r}) contradicts `{key}` ({value!r}) given to the sequential "
                "schedule, which applies to the first stage: keep one."
            )
        return {}
    return {key: value} if given else {}


def get_sequential_schedule(
    learning_rate: float,
    stages: List[Mapping],
    num_warmup_steps: Optional[int] = None,
    num_training_steps: Optional[int] = None,
    num_cycles: Optional[float] = None,
    lr_end: Optional[float] = None,
    power: Optional[float] = None,
    min_lr: Optional[float] = None,
    lr_warmup_init: Optional[float] = None,
    last_epoch: int = -1,
) -> SequentialSchedule:
    r"""Registry schedules one after another (``"sequential"``): a :class:`~paddle_llrd.SequentialSchedule`.

    Each entry of ``stages`` is a dict ``{"name": ..., "num_steps": ...,
    **options}``: the stage is ``get_scheduler(name, learning_rate,
    num_training_steps=num_steps, **options)`` and starts, at its own step 0,
    where the stages before it end. ``options`` may hold the stage's own
    ``learning_rate`` (its peak; the run's by default), ``num_warmup_steps``
    and any argument of its schedule. The last stage may leave ``num_steps``
    out: it then takes what is left of ``num_training_steps``; otherwise the
    lengths must add up to ``num_training_steps`` (when it is given).

    The run's ``num_warmup_steps`` and ``lr_warmup_init`` (a Trainer's
    ``warmup_steps`` / ``warmup_ratio``) are the first stage's, unless it sets
    its own (a different non-zero value for both raises ``ValueError``); later
    stages have no warmup unless they set ``num_warmup_steps``.
    ``num_cycles``, ``lr_end``, ``power`` and ``min_lr``, when given, go to
    every stage that takes them and does not set its own.

    Args:
        learning_rate (float): The peak lr of every stage that does not set its own.
        stages (list[dict]): The stages, as above.
        num_warmup_steps (int, optional): The first stage's warmup.
        num_training_steps (int, optional): The whole run's steps.
        num_cycles, lr_end, power, min_lr (float, optional): Shared stage options.
        lr_warmup_init (float, optional): The first stage's warmup start.
        last_epoch (int, optional): The last step already taken. Default: ``-1``.

    Raises:
        ValueError / TypeError: a stage that is not a dict, lacks ``name`` or
            (but for the last) ``num_steps``, sets ``last_epoch``, or that its
            schedule refuses; the message names the stage (``stages[i]``).

    Examples:
        >>> from paddle_llrd import get_scheduler
        >>> scheduler = get_scheduler(
        ...     "sequential", 1.0, num_warmup_steps=2, num_training_steps=8,
        ...     stages=[{"name": "inverse_sqrt", "num_steps": 4},
        ...             {"name": "cosine", "learning_rate": 0.5}])
        >>> lrs = []
        >>> for _ in range(9):
        ...     lrs.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> lrs
        [0.0, 0.5, 1.0, 0.816497, 0.5, 0.426777, 0.25, 0.073223, 0.0]
    """
    stages = _stage_spec(stages)
    if num_training_steps is not None:
        num_training_steps = _step_count(num_training_steps, "num_training_steps", minimum=1)
    lengths = _stage_lengths(stages, num_training_steps)
    given_warmup = num_warmup_steps is not None and num_warmup_steps != 0
    shared = {
        key: value
        for key, value in (("num_cycles", num_cycles), ("lr_end", lr_end), ("power", power), ("min_lr", min_lr))
        if value is not None
    }
    schedules = []
    for index, (stage, length) in enumerate(zip(stages, lengths)):
        options = {key: value for key, value in stage.items() if key not in _STAGE_KEYS}
        stage_lr = options.pop("learning_rate", learning_rate)
        if index == 0:
            options.update(_first_stage_option(stage, "num_warmup_steps", num_warmup_steps, given_warmup))
            options.update(_first_stage_option(stage, "lr_warmup_init", lr_warmup_init, lr_warmup_init is not None))
        options.setdefault("num_warmup_steps", 0)
        options = {**shared, **options}
        try:
            schedule = get_scheduler(stage["name"], stage_lr, num_training_steps=length, **options)
        except (TypeError, ValueError, KeyError) as exc:
            raise type(exc)(f"`stages[{index}]` ({stage['name']!r}): {exc}") from exc
        schedules.append(schedule)
    milestones = []
    for length in lengths[:-1]:
        milestones.append((milestones[-1] if milestones else 0) + length)
    try:
        return SequentialSchedule(schedules, milestones, last_epoch=last_epoch)
    except TypeError as exc:  # a stage the sequence cannot hold (reduce_lr_on_plateau)
        raise TypeError(str(exc).replace("`schedules[", "`stages[")) from exc


def get_reduce_on_plateau_schedule(
    learning_rate: float,
    mode: str = "min",
    factor: float = 0.1,
    patience: int = 10,
    threshold: float = 1e-4,
    threshold_mode: str = "rel",
    cooldown: int = 0,
    min_lr: float = 0.0,
    epsilon: float = 1e-8,
    num_warmup_steps: Optional[int] = None,
) -> ReduceOnPlateauSchedule:
    r"""Lower the lr when a metric stops improving (``"reduce_lr_on_plateau"``).

    A :class:`~paddle_llrd.schedules.plateau.ReduceOnPlateauSchedule`, i.e.
    Paddle's :class:`paddle.optimizer.lr.ReduceOnPlateau` with these
    arguments (its numbers, checked arguments): step it with the metric,
    ``scheduler.step(eval_loss)``; after more than ``patience`` calls without
    an improvement the lr becomes ``max(lr * factor, min_lr)``. The Trainer
    integrations step it on the evaluation metric (``metric_for_best_model``).
    It has no warmup: a ``num_warmup_steps`` above 0 raises ``ValueError``
    (rather than being dropped); ``num_training_steps`` plays no part.

    Examples:
        >>> from paddle_llrd import get_scheduler
        >>> scheduler = get_scheduler(
        ...     "reduce_lr_on_plateau", 0.1, num_warmup_steps=0, num_training_steps=100,
        ...     factor=0.5, patience=0)
        >>> for loss in [1.0, 0.5, 0.6, 0.7]:
        ...     scheduler.step(loss)
        >>> scheduler()
        0.025
    """
    if num_warmup_steps is not None and _step_count(num_warmup_steps, "num_warmup_steps") > 0:
        raise ValueError(
            f"`num_warmup_steps` is {num_warmup_steps}, but 'reduce_lr_on_plateau' has no warmup (its lr moves "
            "only with the metric): set the warmup to 0."
        )
    return ReduceOnPlateauSchedule(
        learning_rate,
        mode=mode,
        factor=factor,
        patience=patience,
        threshold=threshold,
        threshold_mode=threshold_mode,
        cooldown=cooldown,
        min_lr=min_lr,
        epsilon=epsilon,
    )


SchedulerFunction = Callable[..., LRScheduler]


class _ScheduleTable(dict):
    """Schedule name -> schedule function, as used by :func:`get_scheduler`.

    Built-in schedules are keyed by :class:`SchedulerType`, schedules added by
    :func:`register_scheduler` by their name (a plain ``dict`` otherwise; its
    own class exists so that the documentation shows this text).
    """


TYPE_TO_SCHEDULER_FUNCTION: Dict[Union[SchedulerType, str], SchedulerFunction] = _ScheduleTable({
    SchedulerType.LINEAR: get_linear_schedule_with_warmup,
    SchedulerType.COSINE: get_cosine_schedule_with_warmup,
    SchedulerType.CONSTANT: get_constant_schedule,
    SchedulerType.CONSTANT_WITH_WARMUP: get_constant_schedule_with_warmup,
    SchedulerType.POLYNOMIAL: get_polynomial_decay_schedule_with_warmup,
    SchedulerType.COSINE_WITH_RESTARTS: get_cosine_with_hard_restarts_schedule_with_warmup,
    SchedulerType.INVERSE_SQRT: get_inverse_sqrt_schedule,
    SchedulerType.COSINE_WITH_MIN_LR: get_cosine_with_min_lr_schedule_with_warmup,
    SchedulerType.WARMUP_STABLE_DECAY: get_wsd_schedule,
    SchedulerType.COSINE_ANNEALING_WITH_WARMUP: get_cosine_annealing_schedule_with_warmup,
    SchedulerType.LINEAR_ANNEALING_WITH_WARMUP: get_linear_annealing_schedule_with_warmup,
    SchedulerType.SEQUENTIAL: get_sequential_schedule,
    SchedulerType.REDUCE_LR_ON_PLATEAU: get_reduce_on_plateau_schedule,
})

#: The built-in schedule functions with a linear warmup, which take ``lr_warmup_init`` through get_scheduler.
_WARMUP_SCHEDULE_FUNCTIONS = (
    get_linear_schedule_with_warmup,
    get_cosine_schedule_with_warmup,
    get_constant_schedule_with_warmup,
    get_polynomial_decay_schedule_with_warmup,
    get_cosine_with_hard_restarts_schedule_with_warmup,
    get_inverse_sqrt_schedule,
    get_cosine_with_min_lr_schedule_with_warmup,
    get_wsd_schedule,
    get_cosine_annealing_schedule_with_warmup,
    get_linear_annealing_schedule_with_warmup,
)

_BUILTIN_VALUES = frozenset(member.value for member in SchedulerType)


def _registry_key(name: Any) -> Union[SchedulerType, str]:
    """The dict key for ``name``: a :class:`SchedulerType` for built-in names, else the string.

    Any :class:`enum.Enum` with a string value is accepted, so PaddleNLP's own
    ``SchedulerType`` (which ``TrainingArguments`` stores) works too.
    """
    if isinstance(name, enum.Enum) and not isinstance(name, SchedulerType):
        name = name.value
    if not isinstance(name, str):
        raise TypeError(f"`name` must be a str or a SchedulerType, got {name!r} of type {type(name).__name__}.")
    if name in _BUILTIN_VALUES:
        return SchedulerType(name)
    return str(name)


def _valid_names() -> list:
    return [str(key) for key in TYPE_TO_SCHEDULER_FUNCTION]


def schedule_function(name: Union[str, SchedulerType]) -> SchedulerFunction:
    """The schedule function registered as ``name``: what :func:`get_scheduler` calls.

    Raises:
        ValueError: ``name`` is not registered; the message lists the valid
            names and ends with the closest one.

    Examples:
        >>> from paddle_llrd.schedules.registry import schedule_function
        >>> schedule_function("cosine").__name__
        'get_cosine_schedule_with_warmup'
        >>> schedule_function("cosin")
        Traceback (most recent call last):
        ...
        ValueError: Unknown scheduler name 'cosin'; valid names are: ... Did you mean 'cosine'?
    """
    key = _registry_key(name)
    if key not in TYPE_TO_SCHEDULER_FUNCTION:
        valid = _valid_names()
        raise ValueError(
            f"Unknown scheduler name {str(key)!r}; valid names are: {', '.join(valid)}.{did_you_mean(str(key), valid)}"
        )
    return TYPE_TO_SCHEDULER_FUNCTION[key]


def _lr_position_ok(signature: inspect.Signature) -> bool:
    """Whether the function can receive ``learning_rate`` as its first positional argument."""
    for parameter in signature.parameters.values():
        return parameter.kind in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.VAR_POSITIONAL,
        )
    return False


def register_scheduler(
    name: Union[str, SchedulerType], fn: SchedulerFunction, *, overwrite: bool = False
) -> SchedulerFunction:
    """Add the schedule function ``fn`` under ``name``, for :func:`get_scheduler`.

    ``fn`` is called as ``fn(learning_rate, **arguments)`` with those of
    ``num_warmup_steps``, ``num_training_steps``, ``num_cycles``, ``lr_end``,
    ``power``, ``min_lr`` and ``get_scheduler``'s extra keyword arguments that
    its signature accepts (all of them if it takes ``**kwargs``), and must
    return a :class:`paddle.optimizer.lr.LRScheduler` (``get_scheduler``
    raises ``TypeError`` naming ``name`` when it returns anything else: only a
    call can tell). Of ``num_cycles``,
    ``lr_end``, ``power`` and ``min_lr``, one that the caller of
    ``get_scheduler`` leaves out reaches ``fn`` as ``get_scheduler``'s default
    only where ``fn`` has no default of its own for it.

    Args:
        name (str|SchedulerType): The new name. Replacing an existing schedule
            (a built-in one included) needs ``overwrite=True``.
        fn (callable): The schedule function.
        overwrite (bool, optional): Replace an existing schedule. Default: ``False``.

    Returns:
        ``fn``, unchanged.

    Examples:
        >>> from paddle.optimizer.lr import LambdaDecay
        >>> from paddle_llrd import TYPE_TO_SCHEDULER_FUNCTION
        >>> from paddle_llrd import get_scheduler, register_scheduler
        >>> def get_halving_schedule(learning_rate, num_warmup_steps, last_epoch=-1):
        ...     def factor(step):
        ...         return 0.5 ** (step // max(1, num_warmup_steps))
        ...     return LambdaDecay(learning_rate, factor, last_epoch)
        >>> _ = register_scheduler("halving", get_halving_schedule)
        >>> scheduler = get_scheduler(
        ...     "halving", 0.8, num_warmup_steps=2, num_training_steps=10)
        >>> lrs = []
        >>> for _ in range(5):
        ...     lrs.append(scheduler())
        ...     scheduler.step()
        >>> lrs
        [0.8, 0.8, 0.4, 0.4, 0.2]
        >>> del TYPE_TO_SCHEDULER_FUNCTION["halving"]
    """
    if not isinstance(overwrite, bool):
        raise TypeError(f"`overwrite` must be a bool, got {overwrite!r}.")
    key = _registry_key(name)
    if not key:
        raise ValueError("`name` must be a non-empty string.")
    if not callable(fn):
        raise TypeError(f"`fn` must be callable (a schedule function), got {fn!r}.")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`fn` {fn!r} has no inspectable signature, so get_scheduler cannot call it.") from exc
    if not _lr_position_ok(signature):
        raise TypeError(
            f"`fn` {fn!r} must take the learning rate as its first positional argument, "
            f"its signature is {signature}."
        )
    if key in TYPE_TO_SCHEDULER_FUNCTION and not overwrite:
        kind = "built-in" if isinstance(key, SchedulerType) else "registered"
        raise ValueError(
            f"`name` {str(key)!r} is already a {kind} schedule; pass overwrite=True to replace it."
        )
    TYPE_TO_SCHEDULER_FUNCTION[key] = fn
    return fn


class _Default(float):
    """A :func:`get_scheduler` default: the documented number, marked as not passed by the caller.

    It prints as the plain number (so the signature reads ``num_cycles=0.5``)
    and ``get_scheduler`` leaves it to the schedule function's own default,
    so that an option the caller did not give never collides with another
    way of saying the same thing (``min_lr`` and ``min_lr_rate``).
    """

    __slots__ = ()


def get_scheduler(
    name: Union[str, SchedulerType],
    learning_rate: float,
    num_warmup_steps: Optional[int] = None,
    num_training_steps: Optional[int] = None,
    num_cycles: float = _Default(0.5),
    lr_end: float = _Default(1e-7),
    power: float = _Default(1.0),
    min_lr: float = _Default(0.0),
    **kwargs: Any,
) -> LRScheduler:
    """Build the schedule called ``name``, as PaddleNLP's ``Trainer.create_scheduler`` does.

    Each schedule gets only the arguments its function accepts, so
    ``num_cycles``/``lr_end``/``power``/``min_lr`` can always be passed.
    Of those four, one the caller does not pass goes to the schedule only if
    its function has no default of its own for it (or takes ``**kwargs``);
    otherwise the function's default applies. For the five PaddleNLP names the
    two defaults are the same numbers; ``"cosine_with_restarts"`` thus gets
    Hugging Face's ``num_cycles=1``, and ``"cosine_with_min_lr"`` /
    ``"warmup_stable_decay"`` see ``min_lr`` only when it is passed.

    Args:
        name (str|SchedulerType): A :class:`SchedulerType` value or a name added
            by :func:`register_scheduler`.
        learning_rate (float): The peak learning rate.
        num_warmup_steps (int, optional): Warmup steps; required by every
            built-in schedule but ``"constant"``.
        num_training_steps (int, optional): Training steps; required by every
            built-in schedule but ``"constant"``, ``"constant_with_warmup"``
            and ``"inverse_sqrt"``.
        num_cycles (float, optional): Cosine waves (``"cosine"``,
            ``"cosine_with_min_lr"``) or cycles (``"cosine_with_restarts"``,
            whose own default is ``1``). Default: ``0.5``.
        lr_end (float, optional): Final lr (``"polynomial"``). Default: ``1e-7``.
        power (float, optional): Polynomial power (``"polynomial"``). Default: ``1.0``.
        min_lr (float, optional): The floor as an lr (``"cosine"``,
            ``"cosine_with_min_lr"``, ``"warmup_stable_decay"``, the annealing
            schedules). Default: ``0.0``.
        **kwargs: Further arguments for the schedule function: ``last_epoch``,
            ``lr_warmup_init`` (every schedule with a warmup: Megatron-LM's
            warmup start, ``0 <= lr_warmup_init <= learning_rate``; the lr at
            step :math:`s < W` is then ``lr_warmup_init + (learning_rate -
            lr_warmup_init) * s / W``), ``min_lr_rate``
            (``"cosine_with_min_lr"``), ``timescale`` (``"inverse_sqrt"``),
            ``num_decay_steps``, ``decay_ratio``, ``decay_style``,
            ``min_lr_ratio`` (``"warmup_stable_decay"``), ``stages``
            (``"sequential"``), ``mode``, ``factor``, ``patience``,
            ``threshold``, ``threshold_mode``, ``cooldown``, ``epsilon``
            (``"reduce_lr_on_plateau"``), or those of a registered schedule;
            one it does not accept raises ``TypeError``.

    Raises:
        ValueError: ``name`` is unknown (the message lists the valid names
            and ends with the closest one, as :func:`schedule_function`'s),
            the schedule needs an argument that is ``None`` or missing, or
            ``lr_warmup_init`` is not finite, negative or above ``learning_rate``.
        TypeError: an argument the schedule does not take (``lr_warmup_init``
            for one without a warmup, such as ``"constant"``; the message
            lists those it takes and ends with the closest one), or the schedule
            function returns something that is not an ``LRScheduler`` (the
            message names the registered name).

    A warmup longer than ``num_training_steps`` is accepted with a
    ``UserWarning`` that names ``num_warmup_steps`` and ``num_training_steps``
    (``"linear"``, ``"cosine"``, ``"polynomial"``, ``"cosine_with_restarts"``,
    ``"cosine_with_min_lr"``).

    Examples:
        >>> from paddle_llrd import get_scheduler
        >>> scheduler = get_scheduler(
        ...     "linear", learning_rate=0.1, num_warmup_steps=2, num_training_steps=10,
        ...     num_cycles=0.5, lr_end=1e-7, power=1.0)
        >>> lrs = []
        >>> for _ in range(5):
        ...     lrs.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> lrs
        [0.0, 0.05, 0.1, 0.0875, 0.075]
        >>> wsd = get_scheduler(
        ...     "warmup_stable_decay", 0.1, num_warmup_steps=2, num_training_steps=10,
        ...     num_decay_steps=4, decay_style="linear", min_lr_ratio=0.5)
        >>> lrs = []
        >>> for _ in range(12):
        ...     lrs.append(round(wsd(), 6))
        ...     wsd.step()
        >>> lrs
        [0.0, 0.05, 0.1, 0.1, 0.1, 0.1, 0.1, 0.0875, 0.075, 0.0625, 0.05, 0.05]
        >>> get_scheduler("cosine_annealing", 0.1)
        Traceback (most recent call last):
        ...
        ValueError: Unknown scheduler name 'cosine_annealing'; valid names are: ...
    """
    key = _registry_key(name)
    fn = schedule_function(key)
    if "lr_warmup_init" in kwargs and fn in _WARMUP_SCHEDULE_FUNCTIONS:
        return _get_with_warmup_init(
            key, learning_rate, num_warmup_steps, num_training_steps, num_cycles, lr_end, power, min_lr, **kwargs
        )
    parameters = list(inspect.signature(fn).parameters.values())[1:]  # the first one takes learning_rate
    named = {
        p.name: p
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    takes_any_keyword = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)

    unknown = sorted(k for k in kwargs if k not in named)
    if unknown and not takes_any_keyword:
        accepted = [*named, *(["lr_warmup_init"] if fn in _WARMUP_SCHEDULE_FUNCTIONS else [])]
        raise TypeError(
            f"Scheduler {str(key)!r} does not accept the argument(s) {', '.join(unknown)}; "
            f"it takes: {', '.join(accepted) or 'nothing besides learning_rate'}.{did_you_mean(unknown[0], accepted)}"
        )
    offered: Dict[str, Any] = {
        "num_warmup_steps": num_warmup_steps,
        "num_training_steps": num_training_steps,
        "num_cycles": num_cycles,
        "lr_end": lr_end,
        "power": power,
        "min_lr": min_lr,
        **kwargs,
    }
    arguments = {}
    for arg_name, value in offered.items():
        if value is None:
            continue  # leave the function's own default, or report it missing below
        parameter = named.get(arg_name)
        if parameter is None and not takes_any_keyword:
            continue
        if isinstance(value, _Default):
            if parameter is not None and parameter.default is not inspect.Parameter.empty:
                continue  # not passed by the caller: the function's own default applies
            value = float(value)
        arguments[arg_name] = value
    for parameter in named.values():
        if parameter.default is inspect.Parameter.empty and parameter.name not in arguments:
            raise ValueError(
                f"Scheduler {str(key)!r} requires `{parameter.name}`, please provide that argument."
            )
    with _warmup_named(f"get_scheduler({str(key)!r})"):
        scheduler = fn(learning_rate, **arguments)
    if not isinstance(scheduler, LRScheduler):
        raise TypeError(
            f"The schedule function registered as {str(key)!r} ({getattr(fn, '__qualname__', fn)!r}) returned "
            f"{scheduler!r} of type {type(scheduler).__name__}, not a paddle.optimizer.lr.LRScheduler; "
            "make it return the scheduler it builds."
        )
    return scheduler


def _get_with_warmup_init(
    name: Union[str, SchedulerType], learning_rate: float, *args: Any, lr_warmup_init: Any, **kwargs: Any
) -> LRScheduler:
    """:func:`get_scheduler` for a built-in warmup schedule, its warmup started at ``lr_warmup_init``.

    ``lr_warmup_init`` is checked against the peak before the schedule is built.
    """
    if lr_warmup_init is None:
        return get_scheduler(name, learning_rate, *args, **kwargs)
    peak = _learning_rate(learning_rate)
    lr_warmup_init = _warmup_init_lr(lr_warmup_init, peak)
    scheduler = get_scheduler(name, learning_rate, *args, **kwargs)
    return _start_warmup_at(scheduler, lr_warmup_init, peak)
