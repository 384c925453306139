r"""Warmup learning-rate schedulers, compatible with ``paddlenlp.transformers``.

Every scheduler here is a :class:`paddle.optimizer.lr.LRScheduler`: pass it as
``learning_rate`` to any ``paddle.optimizer`` optimizer and call
``scheduler.step()`` once after every ``optimizer.step()``. The four
``*WithWarmup`` classes are :class:`paddle.optimizer.lr.LambdaDecay`
subclasses whose factor :math:`f(s)` comes from :mod:`.factors`. Each takes
``warmup_start`` (Megatron-LM's ``lr_warmup_init`` as a fraction of the peak):
the warmup rises from it instead of 0.

The arguments every class here shares:

* ``last_epoch`` (int, default ``-1``): the index of the last step already
  taken; the scheduler starts at step ``last_epoch + 1`` (Paddle's
  convention). ``step(epoch)`` and ``set_state_dict`` check their values by
  the same rule before they change anything.
* ``verbose`` (bool, default ``False``): print the lr at every step.
* ``warmup_start`` (float in ``[0, 1]``, keyword only, default ``0.0``): where
  the warmup starts, as a fraction of the peak (``get_scheduler``'s
  ``lr_warmup_init`` divided by the peak).
* ``warn_long_warmup`` (bool, keyword only, default ``True``; the classes with
  ``total_steps``): give a :class:`~paddle_llrd.LongWarmupWarning` when the
  warmup is longer than ``total_steps`` (:mod:`.long_warmup`).

:meth:`_LambdaSchedule.start_warmup_at` (every ``LambdaDecay`` schedule here)
and :meth:`_AnnealingWithWarmupDecay.start_warmup_at` move the warmup's start
of a built scheduler: how :func:`~paddle_llrd.get_scheduler` applies
``lr_warmup_init`` to the schedules whose function does not take it.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any, Optional, Union

from paddle.optimizer.lr import LambdaDecay, LRScheduler

from ..checks import checked_finite, checked_non_negative, checked_step_index, is_integer
from . import factors
from .factors import lr_lambda, warmup_fraction
from .long_warmup import warn_if_warmup_outlasts_training
from .optimizer_link import FollowedScheduler
from .schedule_checks import checked_floor_lr, checked_step_count, checked_warmup

__all__ = [
    "LinearDecayWithWarmup",
    "ConstScheduleWithWarmup",
    "CosineDecayWithWarmup",
    "PolyDecayWithWarmup",
    "CosineAnnealingWithWarmupDecay",
    "LinearAnnealingWithWarmupDecay",
    "InverseSquareRootSchedule",
    "checked_cycle_count",
    "checked_warmup_start_fraction",
]

Warmup = Union[int, float]


def checked_warmup_start_fraction(warmup_start: Any) -> float:
    """``warmup_start`` (where the warmup starts, as a fraction of the peak) as a float in ``[0, 1]``.

    Raises:
        TypeError: not a real number.
        ValueError: NaN, infinite, or outside ``[0, 1]``.

    Examples:
        >>> checked_warmup_start_fraction(0.25)
        0.25
    """
    start = checked_finite(warmup_start, "warmup_start")
    if not 0.0 <= start <= 1.0:
        raise ValueError(f"`warmup_start` must lie in [0, 1] (a fraction of the peak lr), got {start!r}.")
    return start


def checked_cycle_count(num_cycles: Any) -> float:
    """``num_cycles`` of a cosine with hard restarts (or of cosine waves) as a finite float ``>= 0``.

    An int is a whole number of cycles (Hugging Face's own type for the hard
    restarts), a float any number; both give the same numbers for the same
    value. The rule of :class:`CosineDecayWithWarmup` with
    ``with_hard_restarts=True`` and of every registry schedule that takes
    ``num_cycles``.

    Raises:
        TypeError: not a real number (a bool, a string).
        ValueError: negative, NaN or infinite.

    Examples:
        >>> checked_cycle_count(2), checked_cycle_count(0.5)
        (2.0, 0.5)
    """
    cycles = checked_finite(num_cycles, "num_cycles")
    if cycles < 0:
        raise ValueError(f"`num_cycles` must be >= 0 (the number of cycles), got {num_cycles!r}.")
    return cycles


def _total_and_warmup(total_steps: Any, warmup: Any) -> "tuple[int, int]":
    """``total_steps`` (``>= 1``) and the warmup in steps, for a ``*WithWarmup`` class."""
    total = checked_step_count(total_steps, "total_steps", minimum=1)
    return total, checked_warmup(warmup, total)


# ----------------------------------------------------------------------------
# Resuming: a set_state_dict that checks before it changes anything.
# ----------------------------------------------------------------------------
class _CheckedResume(FollowedScheduler):
    """Mixed into every scheduler here (before Paddle's class), with :class:`~.optimizer_link.FollowedScheduler`.

    Paddle's ``LRScheduler.set_state_dict`` takes whatever it is given and
    sets ``last_epoch`` before it finds ``last_lr`` missing; this one checks
    both entries first, so a refused ``state_dict`` changes nothing. Paddle's
    ``step(epoch)`` takes any ``epoch`` (``step(-5)`` gives a negative lr,
    ``step(nan)`` NaN); this one checks it by the rule of ``last_epoch``.
    """

    def step(self, epoch: Optional[int] = None) -> None:
        """Advance to the next step, or to step ``epoch`` (an int >= 0).

        Raises:
            TypeError: ``epoch`` is not an int (a float, a bool).
            ValueError: ``epoch`` is negative.
        """
        super().step(None if epoch is None else checked_step_index(epoch, "epoch"))

    def set_state_dict(self, state_dict: Mapping) -> None:
        """Resume from a :meth:`state_dict`: ``{"last_epoch": int >= -1, "last_lr": float >= 0}``.

        Raises:
            TypeError: ``state_dict`` is not a mapping, or an entry has the wrong type.
            KeyError: ``last_epoch`` or ``last_lr`` is missing.
            ValueError: ``last_epoch < -1``, or ``last_lr`` negative, NaN or infinite.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(
                f"`state_dict` must be a mapping from the scheduler's state_dict(), got {type(state_dict).__name__}."
            )
        missing = [key for key in ("last_epoch", "last_lr") if key not in state_dict]
        if missing:
            raise KeyError(
                f"`state_dict` lacks {' and '.join(f'`{key}`' for key in missing)}; "
                "a scheduler's state_dict has `last_epoch` and `last_lr`."
            )
        checked = {"last_epoch": checked_step_index(state_dict["last_epoch"]),
                   "last_lr": checked_non_negative(state_dict["last_lr"], "last_lr")}
        super().set_state_dict({**state_dict, **checked})

    set_dict = set_state_dict  # Paddle's alias would call the unchecked method


class _LambdaSchedule(_CheckedResume, LambdaDecay):
    """A :class:`~paddle.optimizer.lr.LambdaDecay` with the checked ``set_state_dict``
    (what the registry functions that build no named class return)."""

    def start_warmup_at(self, fraction: float) -> None:
        """Start the linear warmup at ``fraction`` of the peak instead of where it starts now.

        Every step from the end of the warmup on keeps its value; the lr of
        the current step is recomputed.

        Raises:
            TypeError: the factor is not the shared warmup of :mod:`.factors` (:func:`~.factors.lr_lambda`).
            ValueError: ``fraction`` outside ``[0, 1]``.

        Examples:
            >>> from paddle_llrd import get_linear_schedule_with_warmup
            >>> scheduler = get_linear_schedule_with_warmup(1.0, 4, 8)
            >>> scheduler.start_warmup_at(0.5)
            >>> scheduler()
            0.5
        """
        factor = self.lr_lambda
        if not (isinstance(factor, functools.partial) and factor.func is factors.factor_with_warmup):
            raise TypeError(
                f"{type(self).__name__}'s lr factor has no linear warmup of paddle_llrd.schedules.factors, "
                "so its warmup start cannot be moved."
            )
        start = checked_warmup_start_fraction(fraction)
        self.lr_lambda = functools.partial(factor, warmup_start=start)
        if hasattr(self, "warmup_start"):
            self.warmup_start = start
        self.last_lr = self.get_lr()


# ----------------------------------------------------------------------------
# LambdaDecay schedulers (lr = learning_rate * f(step)).
# ----------------------------------------------------------------------------
class LinearDecayWithWarmup(_LambdaSchedule):
    r"""Linear warmup from 0 to ``learning_rate``, then linear decay to 0 at ``total_steps``.

    With :math:`W` warmup steps and :math:`T` = ``total_steps``, the lr at step
    :math:`s` is ``learning_rate`` times

    .. math::

        f(s) = \begin{cases}
            \dfrac{s}{\max(1, W)} & s < W \\[1ex]
            \max\!\left(0, \dfrac{T - s}{\max(1, T - W)}\right) & s \ge W
        \end{cases}

    Args:
        learning_rate (float): The peak learning rate, ``>= 0``.
        total_steps (int): The number of training steps :math:`T`, ``>= 1``.
        warmup (int|float): An ``int`` is the number of warmup steps; a
            ``float`` in ``[0, 1]`` is the fraction of ``total_steps``
            (:math:`W = \lfloor \text{warmup} \cdot T \rfloor`). More steps
            than ``total_steps`` are accepted with a ``LongWarmupWarning``.
        last_epoch, verbose, warmup_start, warn_long_warmup: see :mod:`paddle_llrd.schedules.warmup`.

    Examples:
        >>> from paddle_llrd import LinearDecayWithWarmup
        >>> from paddle_llrd.schedules.curve import lr_curve
        >>> scheduler = LinearDecayWithWarmup(learning_rate=0.1, total_steps=10, warmup=2)
        >>> [round(lr, 6) for lr in lr_curve(scheduler, 11)]
        [0.0, 0.05, 0.1, 0.0875, 0.075, 0.0625, 0.05, 0.0375, 0.025, 0.0125, 0.0, 0.0]
    """

    def __init__(
        self, learning_rate: float, total_steps: int, warmup: Warmup, last_epoch: int = -1, verbose: bool = False,
        *, warmup_start: float = 0.0, warn_long_warmup: bool = True
    ) -> None:
        learning_rate = checked_non_negative(learning_rate, "learning_rate")
        self.total_steps, self.warmup_steps = _total_and_warmup(total_steps, warmup)
        self.warmup_start = checked_warmup_start_fraction(warmup_start)
        factor = lr_lambda(factors.linear_decay, self.warmup_steps, self.warmup_start, total_steps=self.total_steps)
        super().__init__(learning_rate, factor, checked_step_index(last_epoch), verbose)
        if warn_long_warmup:
            warn_if_warmup_outlasts_training(self.warmup_steps, self.total_steps, type(self).__name__)


class ConstScheduleWithWarmup(_LambdaSchedule):
    r"""Linear warmup from 0 to ``learning_rate``, then constant.

    .. math::

        f(s) = \begin{cases} \dfrac{s}{\max(1, W)} & s < W \\[1ex] 1 & s \ge W \end{cases}

    Args:
        learning_rate (float): The learning rate after warmup, ``>= 0``.
        warmup (int|float): An ``int`` is the number of warmup steps; a
            ``float`` in ``[0, 1]`` is a fraction of ``total_steps``, which is
            then required (``ValueError`` otherwise).
        total_steps (int, optional): The number of training steps: turns a
            ``float`` warmup into steps, and a warmup longer than it warns
            (without it the schedule knows no end). Default: ``None``.
        last_epoch, verbose, warmup_start, warn_long_warmup: see :mod:`paddle_llrd.schedules.warmup`.

    Examples:
        >>> from paddle_llrd import ConstScheduleWithWarmup
        >>> from paddle_llrd.schedules.curve import lr_curve
        >>> scheduler = ConstScheduleWithWarmup(learning_rate=0.2, warmup=4)
        >>> [round(lr, 6) for lr in lr_curve(scheduler, 6)]
        [0.0, 0.05, 0.1, 0.15, 0.2, 0.2, 0.2]
        >>> ConstScheduleWithWarmup(0.2, warmup=0.25, total_steps=16).warmup_steps
        4
    """

    def __init__(
        self, learning_rate: float, warmup: Warmup, total_steps: Optional[int] = None, last_epoch: int = -1,
        verbose: bool = False, *, warmup_start: float = 0.0, warn_long_warmup: bool = True
    ) -> None:
        learning_rate = checked_non_negative(learning_rate, "learning_rate")
        self.total_steps = None if total_steps is None else checked_step_count(total_steps, "total_steps", minimum=1)
        self.warmup_steps = checked_warmup(warmup, self.total_steps)
        self.warmup_start = checked_warmup_start_fraction(warmup_start)
        factor = lr_lambda(factors.constant, self.warmup_steps, self.warmup_start)
        super().__init__(learning_rate, factor, checked_step_index(last_epoch), verbose)
        if warn_long_warmup and self.total_steps is not None:
            warn_if_warmup_outlasts_training(self.warmup_steps, self.total_steps, type(self).__name__)


class CosineDecayWithWarmup(_LambdaSchedule):
    r"""Linear warmup from 0 to ``learning_rate``, then a cosine decay.

    With :math:`p = (s - W) / \max(1, T - W)` the progress of the decay phase,
    for :math:`s \ge W` (warmup :math:`s / \max(1, W)` before):

    * ``num_cycles=None`` (default), a half cosine from the peak to 0 at
      :math:`T`, held at 0 afterwards:

      .. math:: f(s) = \tfrac12 \left(1 + \cos(\pi \min(p, 1))\right)

    * ``num_cycles=n`` (an ``int``, PaddleNLP's meaning): :math:`n` full waves,
      back at the peak at :math:`T`:

      .. math:: f(s) = \max\!\left(0, \tfrac12 \left(1 + \cos(2 \pi n p)\right)\right)

    * ``with_hard_restarts=True`` with ``num_cycles=c`` (a real number
      :math:`\ge 0`, default ``0.5``; an ``int`` is a whole number of cycles):
      a decay that jumps back to the peak every :math:`1/c` of the decay
      phase, 0 from :math:`T` on (:func:`~paddle_llrd.get_cosine_with_hard_restarts_schedule_with_warmup`'s
      curve, by the same rule for ``num_cycles``, :func:`checked_cycle_count`):

      .. math::

          f(s) = \begin{cases}
              \max\!\left(0, \tfrac12 \left(1 + \cos(\pi \,((c\,p) \bmod 1))\right)\right) & p < 1 \\
              0 & p \ge 1
          \end{cases}

    PaddleNLP's default (``num_cycles=None`` meaning one full wave) climbed back
    to the peak at the end of training, though documented as a decay; here the
    default decays.

    Args:
        learning_rate (float): The peak learning rate, ``>= 0``.
        total_steps (int): The number of training steps :math:`T`, ``>= 1``.
        warmup (int|float): Warmup steps (``int``) or fraction of ``total_steps`` (``float``);
            more steps than ``total_steps`` are accepted with a ``LongWarmupWarning``.
        with_hard_restarts (bool, optional): Use hard restarts. Default: ``False``.
        num_cycles (int|float|None, optional): ``int >= 0`` waves without
            restarts, a real number ``>= 0`` of cycles with them, ``None`` for
            the defaults above.
        last_epoch, verbose, warmup_start, warn_long_warmup: see :mod:`paddle_llrd.schedules.warmup`.

    Raises:
        TypeError: ``num_cycles`` a float without restarts, or not a number.
        ValueError: ``num_cycles`` negative, NaN or infinite.

    Examples:
        >>> from paddle_llrd import CosineDecayWithWarmup
        >>> from paddle_llrd.schedules.curve import lr_curve
        >>> scheduler = CosineDecayWithWarmup(learning_rate=1.0, total_steps=6, warmup=2)
        >>> [round(lr, 6) for lr in lr_curve(scheduler, 7)]
        [0.0, 0.5, 1.0, 0.853553, 0.5, 0.146447, 0.0, 0.0]
    """

    def __init__(
        self, learning_rate: float, total_steps: int, warmup: Warmup, with_hard_restarts: bool = False,
        num_cycles: Optional[Union[int, float]] = None, last_epoch: int = -1, verbose: bool = False, *,
        warmup_start: float = 0.0, warn_long_warmup: bool = True
    ) -> None:
        learning_rate = checked_non_negative(learning_rate, "learning_rate")
        self.total_steps, self.warmup_steps = _total_and_warmup(total_steps, warmup)
        self.warmup_start = checked_warmup_start_fraction(warmup_start)
        if not isinstance(with_hard_restarts, bool):
            raise TypeError(f"`with_hard_restarts` must be a bool, got {with_hard_restarts!r}.")
        self.with_hard_restarts = with_hard_restarts
        self.num_cycles = self._check_num_cycles(num_cycles, with_hard_restarts)
        common = {"total_steps": self.total_steps}
        if with_hard_restarts:
            decay, shape = factors.cosine_hard_restarts, {"num_cycles": self.num_cycles}
        elif num_cycles is None:
            decay, shape = factors.cosine_waves, {"num_cycles": 0.5, "hold_after_end": True}
        else:
            decay, shape = factors.cosine_waves, {"num_cycles": self.num_cycles}
        factor = lr_lambda(decay, self.warmup_steps, self.warmup_start, **shape, **common)
        super().__init__(learning_rate, factor, checked_step_index(last_epoch), verbose)
        if warn_long_warmup:
            warn_if_warmup_outlasts_training(self.warmup_steps, self.total_steps, type(self).__name__)

    @staticmethod
    def _check_num_cycles(num_cycles: Any, with_hard_restarts: bool) -> Optional[Union[int, float]]:
        if num_cycles is None:
            return 0.5 if with_hard_restarts else None
        if with_hard_restarts:
            return checked_cycle_count(num_cycles)
        else:
            if not is_integer(num_cycles):
                raise TypeError(
                    "`num_cycles` must be an int (the number of full cosine waves) when "
                    f"with_hard_restarts=False, got {num_cycles!r} of type {type(num_cycles).__name__}; "
                    "leave it None for a half-cosine decay to 0."
                )
            value = int(num_cycles)
        if value < 0:
            raise ValueError(f"`num_cycles` must be >= 0, got {num_cycles!r}.")
        return value


class PolyDecayWithWarmup(_LambdaSchedule):
    r"""Linear warmup from 0 to ``learning_rate``, then polynomial decay to ``lr_end``.

    With :math:`\eta` = ``learning_rate`` and :math:`\eta_{end}` = ``lr_end``:

    .. math::

        f(s) = \begin{cases}
            \dfrac{s}{\max(1, W)} & s < W \\[1ex]
            \dfrac{(\eta - \eta_{end}) \left(1 - \frac{s - W}{\max(1, T - W)}\right)^{power} + \eta_{end}}{\eta}
                & W \le s \le T \\[2ex]
            \eta_{end} / \eta & s > T
        \end{cases}

    Args:
        learning_rate (float): The peak learning rate, ``> lr_end``.
        total_steps (int): The number of training steps :math:`T`, ``>= 1``.
        warmup (int|float): Warmup steps (``int``) or fraction of ``total_steps`` (``float``);
            more steps than ``total_steps`` are accepted with a ``LongWarmupWarning``.
        lr_end (float, optional): The final learning rate, ``0 <= lr_end <
            learning_rate``. Default: ``1e-7``.
        power (float, optional): The polynomial's power, ``>= 0``. Default: ``1.0``.
        last_epoch, verbose, warmup_start, warn_long_warmup: see :mod:`paddle_llrd.schedules.warmup`.

    Examples:
        >>> from paddle_llrd import PolyDecayWithWarmup
        >>> from paddle_llrd.schedules.curve import lr_curve
        >>> scheduler = PolyDecayWithWarmup(1.0, 6, 2, lr_end=0.1, power=2.0)
        >>> [round(lr, 6) for lr in lr_curve(scheduler, 7)]
        [0.0, 0.5, 1.0, 0.60625, 0.325, 0.15625, 0.1, 0.1]
    """

    def __init__(
        self, learning_rate: float, total_steps: int, warmup: Warmup, lr_end: float = 1e-7, power: float = 1.0,
        last_epoch: int = -1, verbose: bool = False, *, warmup_start: float = 0.0, warn_long_warmup: bool = True
    ) -> None:
        learning_rate = checked_non_negative(learning_rate, "learning_rate")
        self.total_steps, self.warmup_steps = _total_and_warmup(total_steps, warmup)
        self.warmup_start = checked_warmup_start_fraction(warmup_start)
        self.lr_end = checked_non_negative(lr_end, "lr_end")
        if not self.lr_end < learning_rate:
            raise ValueError(
                f"`lr_end` ({self.lr_end!r}) must be smaller than `learning_rate` ({learning_rate!r})."
            )
        self.power = checked_finite(power, "power")
        if self.power < 0:
            raise ValueError(f"`power` must be >= 0, got {self.power!r}.")
        factor = lr_lambda(
            factors.polynomial_decay,
            self.warmup_steps,
            self.warmup_start,
            total_steps=self.total_steps,
            lr_init=learning_rate,
            lr_end=self.lr_end,
            power=self.power,
        )
        super().__init__(learning_rate, factor, checked_step_index(last_epoch), verbose)
        if warn_long_warmup:
            warn_if_warmup_outlasts_training(self.warmup_steps, self.total_steps, type(self).__name__)


# ----------------------------------------------------------------------------
# LRScheduler schedulers with an absolute lr.
# ----------------------------------------------------------------------------
class _AnnealingWithWarmupDecay(_CheckedResume, LRScheduler):
    """Warmup to ``max_lr`` over ``warmup_step`` steps, anneal to ``min_lr`` at
    ``decay_step`` with :meth:`_anneal`, then stay at ``min_lr``."""

    def __init__(
        self, max_lr: float, min_lr: float, warmup_step: int, decay_step: int, last_epoch: int = -1,
        verbose: bool = False, *, warmup_start: float = 0.0
    ) -> None:
        self.max_lr = checked_non_negative(max_lr, "max_lr")
        self.min_lr = checked_floor_lr(min_lr, self.max_lr, "max_lr")
        self.warmup_step = checked_step_count(warmup_step, "warmup_step")
        self.decay_step = checked_step_count(decay_step, "decay_step")
        if self.decay_step <= self.warmup_step:
            raise ValueError(
                f"`decay_step` ({self.decay_step}) must be greater than `warmup_step` ({self.warmup_step})."
            )
        self.warmup_start = checked_warmup_start_fraction(warmup_start)
        super().__init__(self.max_lr, checked_step_index(last_epoch), verbose)

    def start_warmup_at(self, fraction: float) -> None:
        """Start the warmup at ``fraction`` of ``max_lr`` (as :meth:`_LambdaSchedule.start_warmup_at`).

        Raises:
            ValueError: ``fraction`` outside ``[0, 1]``.
        """
        self.warmup_start = checked_warmup_start_fraction(fraction)
        self.last_lr = self.get_lr()

    @staticmethod
    def _anneal(ratio: float) -> float:
        """The share of ``max_lr - min_lr`` left at decay ratio ``r`` in ``[0, 1]``."""
        raise NotImplementedError

    def get_lr(self) -> float:
        step = self.last_epoch
        if self.warmup_step > 0 and step <= self.warmup_step:
            return self.max_lr * warmup_fraction(step, self.warmup_step, self.warmup_start)
        if step > self.decay_step:
            return self.min_lr
        ratio = (step - self.warmup_step) / (self.decay_step - self.warmup_step)
        return self.min_lr + self._anneal(ratio) * (self.max_lr - self.min_lr)


class CosineAnnealingWithWarmupDecay(_AnnealingWithWarmupDecay):
    r"""Linear warmup to ``max_lr``, cosine annealing to ``min_lr`` at ``decay_step``, then ``min_lr``.

    The Megatron-LM style schedule; it sets the lr itself (no base-lr factor).
    With :math:`\eta_{\max}` = ``max_lr``, :math:`\eta_{\min}` = ``min_lr``,
    :math:`W` = ``warmup_step``, :math:`D` = ``decay_step`` and
    :math:`r = (s - W) / (D - W)`:

    .. math::

        \mathrm{lr}(s) = \begin{cases}
            \eta_{\max} \, s / W & W > 0,\ s \le W \\
            \eta_{\min} + \tfrac12 \left(\cos(\pi r) + 1\right) (\eta_{\max} - \eta_{\min}) & \text{otherwise, } s \le D \\
            \eta_{\min} & s > D
        \end{cases}

    Args:
        max_lr (float): The peak learning rate, ``>= min_lr``.
        min_lr (float): The final learning rate, ``>= 0``.
        warmup_step (int): Warmup steps :math:`W`, ``>= 0``.
        decay_step (int): The step :math:`D > W` at which ``min_lr`` is reached.
        last_epoch, verbose, warmup_start: see :mod:`paddle_llrd.schedules.warmup`.

    Examples:
        >>> from paddle_llrd import CosineAnnealingWithWarmupDecay
        >>> from paddle_llrd.schedules.curve import lr_curve
        >>> scheduler = CosineAnnealingWithWarmupDecay(1.0, 0.2, 2, 6)
        >>> [round(lr, 6) for lr in lr_curve(scheduler, 7)]
        [0.0, 0.5, 1.0, 0.882843, 0.6, 0.317157, 0.2, 0.2]
    """

    _anneal = staticmethod(factors.anneal_cosine)


class LinearAnnealingWithWarmupDecay(_AnnealingWithWarmupDecay):
    r"""Linear warmup to ``max_lr``, linear annealing to ``min_lr`` at ``decay_step``, then ``min_lr``.

    As :class:`CosineAnnealingWithWarmupDecay` with :math:`1 - r` in place of
    the cosine factor:

    .. math::

        \mathrm{lr}(s) = \begin{cases}
            \eta_{\max} \, s / W & W > 0,\ s \le W \\
            \eta_{\min} + (1 - r) (\eta_{\max} - \eta_{\min}) & \text{otherwise, } s \le D \\
            \eta_{\min} & s > D
        \end{cases}
        \qquad r = \frac{s - W}{D - W}

    Args: those of :class:`CosineAnnealingWithWarmupDecay`.

    Examples:
        >>> from paddle_llrd import LinearAnnealingWithWarmupDecay
        >>> from paddle_llrd.schedules.curve import lr_curve
        >>> scheduler = LinearAnnealingWithWarmupDecay(
        ...     max_lr=1.0, min_lr=0.5, warmup_step=0, decay_step=2)
        >>> lr_curve(scheduler, 3)
        [1.0, 0.75, 0.5, 0.5]
    """

    _anneal = staticmethod(factors.anneal_linear)


class InverseSquareRootSchedule(_CheckedResume, LRScheduler):
    r"""Linear warmup to ``learning_rate``, then decay with the inverse square root of the step.

    The Transformer (fairseq ``inverse_sqrt``) schedule, as in
    ``paddlenlp.ops.optimizer``. With :math:`\eta` = ``learning_rate`` and
    :math:`W` = ``warmup_steps``:

    .. math::

        \mathrm{lr}(s) = \begin{cases}
            \eta \, s / W & s < W \\[1ex]
            \eta \sqrt{W} / \sqrt{s} & s \ge W
        \end{cases}

    Args:
        warmup_steps (int): Warmup steps :math:`W`, ``>= 1`` (the decay is
            scaled by :math:`\sqrt{W}`, so there is no zero-warmup form).
        learning_rate (float, optional): The peak learning rate, reached at
            step :math:`W`. Default: ``1.0``.
        last_epoch, verbose, warmup_start: see :mod:`paddle_llrd.schedules.warmup`.

    Examples:
        >>> from paddle_llrd import InverseSquareRootSchedule
        >>> from paddle_llrd.schedules.curve import lr_curve
        >>> scheduler = InverseSquareRootSchedule(warmup_steps=4, learning_rate=0.5)
        >>> lrs = [round(lr, 6) for lr in lr_curve(scheduler, 16)]
        >>> lrs[:5], lrs[16]
        ([0.0, 0.125, 0.25, 0.375, 0.5], 0.25)
    """

    def __init__(
        self, warmup_steps: int, learning_rate: float = 1.0, last_epoch: int = -1, verbose: bool = False, *,
        warmup_start: float = 0.0
    ) -> None:
        self.warmup_steps = checked_step_count(warmup_steps, "warmup_steps", minimum=1)
        learning_rate = checked_non_negative(learning_rate, "learning_rate")
        self.warmup_start = checked_warmup_start_fraction(warmup_start)
        self.peak_lr = learning_rate
        super().__init__(learning_rate, checked_step_index(last_epoch), verbose)

    def get_lr(self) -> float:
        step = self.last_epoch
        if step < self.warmup_steps:
            return self.peak_lr * warmup_fraction(step, self.warmup_steps, self.warmup_start)
        return self.peak_lr * math.sqrt(self.warmup_steps) / math.sqrt(step)


