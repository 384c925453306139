r"""Warmup learning-rate schedulers, compatible with ``paddlenlp.transformers``.

Every scheduler here is a :class:`paddle.optimizer.lr.LRScheduler`: pass it as
``learning_rate`` to any ``paddle.optimizer`` optimizer and call
``scheduler.step()`` once after every ``optimizer.step()``.

The four ``*WithWarmup`` classes are :class:`paddle.optimizer.lr.LambdaDecay`
subclasses: the lr at step :math:`s` is ``learning_rate * f(s)``. Each ``f`` is
built, as in HuggingFace's ``transformers.optimization``, from one shared linear
warmup (:func:`_factor_with_warmup`) followed by one small decay function per
schedule. The factor functions are module-level and bound with
:func:`functools.partial`, so the schedulers can be pickled and deep-copied
(a ``lambda`` could not).

Resuming: ``last_epoch=k`` is the index of the last step already taken, so the
new scheduler starts at step ``k + 1`` (Paddle's convention), and
``state_dict()`` / ``set_state_dict()`` carry ``last_epoch`` and ``last_lr``; both
give the same future values as never stopping. ``set_state_dict`` checks both
entries before it changes anything (Paddle's own would set ``last_epoch`` and
then fail on a missing ``last_lr``).
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import math
import numbers
import warnings
from collections.abc import Iterator, Mapping
from typing import Any, Callable, Optional, Tuple, Union

from paddle.optimizer.lr import LambdaDecay, LRScheduler

from ..argument_checks import checked_step_index, stacklevel_outside_package

__all__ = [
    "LinearDecayWithWarmup",
    "ConstScheduleWithWarmup",
    "CosineDecayWithWarmup",
    "PolyDecayWithWarmup",
    "CosineAnnealingWithWarmupDecay",
    "LinearAnnealingWithWarmupDecay",
    "InverseSquareRootSchedule",
]

Warmup = Union[int, float]


# ----------------------------------------------------------------------------
# Argument checks shared by the schedulers and the registry.
# ----------------------------------------------------------------------------
def _finite_real(value: Any, name: str) -> float:
    """``value`` as a finite Python float; ``TypeError``/``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"`{name}` must be a real number, got {value!r} of type {type(value).__name__}.")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"`{name}` must be finite, got {value!r}.")
    return value


def _learning_rate(value: Any, name: str = "learning_rate") -> float:
    value = _finite_real(value, name)
    if value < 0:
        raise ValueError(f"`{name}` must be >= 0, got {value!r}.")
    return value


def _step_count(value: Any, name: str, minimum: int = 0) -> int:
    """A whole number of steps ``>= minimum`` (an integral float such as ``1000.0`` is accepted)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"`{name}` must be an int (a number of steps), got {value!r} of type {type(value).__name__}.")
    if not isinstance(value, numbers.Integral):
        value = float(value)
        if not math.isfinite(value) or not value.is_integer():
            raise ValueError(f"`{name}` must be a whole number of steps, got {value!r}.")
    value = int(value)
    if value < minimum:
        raise ValueError(f"`{name}` must be >= {minimum}, got {value}.")
    return value


def _last_epoch(value: Any) -> int:
    return checked_step_index(value, "last_epoch")


def _warmup_steps(warmup: Any, total_steps: Optional[int], name: str = "warmup") -> int:
    """Number of warmup steps: an ``int`` as is, a ``float`` as ``floor(warmup * total_steps)``."""
    if isinstance(warmup, bool) or not isinstance(warmup, numbers.Real):
        raise TypeError(
            f"`{name}` must be an int (number of steps) or a float (fraction of total_steps), "
            f"got {warmup!r} of type {type(warmup).__name__}."
        )
    if isinstance(warmup, numbers.Integral):
        return _step_count(warmup, name)
    fraction = _finite_real(warmup, name)
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(
            f"`{name}` given as a float is a fraction of total_steps and must lie in [0, 1], got {fraction!r}; "
            "pass an int for a number of steps."
        )
    if total_steps is None:
        raise ValueError(
            f"`{name}` is a float ({fraction!r}, a fraction of total_steps) but `total_steps` is None: "
            "pass `total_steps`, or an int number of warmup steps."
        )
    return int(math.floor(fraction * total_steps))


def _total_and_warmup(total_steps: Any, warmup: Any, owner: str) -> "tuple[int, int]":
    """``total_steps`` (``>= 1``) and the warmup in steps, for the ``*WithWarmup`` class ``owner``."""
    total = _step_count(total_steps, "total_steps", minimum=1)
    warmup_steps = _warmup_steps(warmup, total)
    _warn_if_warmup_outlasts_training(warmup_steps, total, owner)
    return total, warmup_steps


#: In every warning about a warmup longer than training (the schedule table filters on it).
LONG_WARMUP_TEXT = "is longer than training"

# (owner, warmup argument, total argument) while a registry function builds a
# schedule, so that a warning names the arguments its caller wrote.
_warmup_argument_names: contextvars.ContextVar[Optional[Tuple[str, str, str]]] = contextvars.ContextVar(
    "paddle_llrd_warmup_argument_names", default=None
)


@contextlib.contextmanager
def _warmup_named(owner: str, warmup_name: str = "num_warmup_steps", total_name: str = "num_training_steps") -> Iterator[None]:
    """Warnings raised inside name ``owner``'s arguments; the outermost caller's names win."""
    if _warmup_argument_names.get() is not None:
        yield
        return
    token = _warmup_argument_names.set((owner, warmup_name, total_name))
    try:
        yield
    finally:
        _warmup_argument_names.reset(token)


def _warn_if_warmup_outlasts_training(
    warmup_steps: int, total_steps: int, owner: str, warmup_name: str = "warmup", total_name: str = "total_steps"
) -> None:
    """A ``UserWarning`` when ``warmup_steps > total_steps``: accepted (PaddleNLP accepts it), but
    the lr is still climbing when training ends and drops after the warmup."""
    if warmup_steps <= total_steps:
        return
    owner, warmup_name, total_name = _warmup_argument_names.get() or (owner, warmup_name, total_name)
    last = total_steps - 1
    warnings.warn(
        f"{owner}: the warmup (`{warmup_name}` = {warmup_steps} steps) {LONG_WARMUP_TEXT} "
        f"(`{total_name}` = {total_steps}): the lr is still climbing when training ends (step {last} "
        f"trains at {last / warmup_steps:.3g} of the peak), then it drops when the warmup ends at step {warmup_steps}. "
        f"Accepted, as PaddleNLP accepts it; make `{warmup_name}` at most `{total_name}` unless that is "
        "what you want.",
        UserWarning,
        stacklevel=stacklevel_outside_package(),
    )


def _floor_lr(min_lr: Any, peak: float, peak_name: str) -> float:
    """``min_lr`` as a learning rate ``<= peak``; errors name ``min_lr`` (and ``peak_name``)."""
    min_lr = _learning_rate(min_lr, "min_lr")
    if min_lr > peak:
        raise ValueError(f"`min_lr` ({min_lr!r}) must be <= `{peak_name}` ({peak!r}).")
    return min_lr


# ----------------------------------------------------------------------------
# lr factors f(step): the scheduler's lr is learning_rate * f(step).
# ----------------------------------------------------------------------------
def _warmup_fraction(step: int, warmup_steps: int, start: float = 0.0) -> float:
    """Linear warmup from ``start`` (a fraction of the peak) to 1: ``start + (1 - start) * step / max(1, W)``.

    With ``start=0`` this is exactly ``step / max(1, W)``, bit for bit.
    """
    return start + (1.0 - start) * (step / max(1, warmup_steps))


def _factor_with_warmup(
    step: int, *, warmup_steps: int, decay: Callable[..., float], warmup_start: float = 0.0, **decay_args: Any
) -> float:
    """Linear warmup from ``warmup_start`` for ``warmup_steps`` steps, then ``decay(step, warmup_steps=..., **decay_args)``."""
    if step < warmup_steps:
        return _warmup_fraction(step, warmup_steps, warmup_start)
    return decay(step, warmup_steps=warmup_steps, **decay_args)


def _decay_progress(step: int, warmup_steps: int, total_steps: int) -> float:
    """Fraction of the decay phase done: ``(step - W) / max(1, T - W)``."""
    return (step - warmup_steps) / max(1, total_steps - warmup_steps)


def _constant(step: int, *, warmup_steps: int) -> float:
    return 1.0


def _linear_decay(step: int, *, warmup_steps: int, total_steps: int) -> float:
    return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))


def _cosine_waves(
    step: int,
    *,
    warmup_steps: int,
    total_steps: int,
    num_cycles: float,
    floor: float = 0.0,
    hold_after_end: bool = False,
) -> float:
    """``floor + (1 - floor) * max(0, (1 + cos(2 pi num_cycles progress)) / 2)``.

    ``hold_after_end`` caps ``progress`` at 1, so a decay stays at its final
    value after ``total_steps`` instead of climbing back up the wave.
    """
    progress = _decay_progress(step, warmup_steps, total_steps)
    if hold_after_end:
        progress = min(progress, 1.0)
    wave = max(0.0, 0.5 * (1.0 + math.cos(math.pi * num_cycles * 2.0 * progress)))
    return floor + (1.0 - floor) * wave


def _cosine_hard_restarts(step: int, *, warmup_steps: int, total_steps: int, num_cycles: float) -> float:
    progress = _decay_progress(step, warmup_steps, total_steps)
    if progress >= 1.0:
        return 0.0
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * ((num_cycles * progress) % 1.0))))


def _polynomial_decay(
    step: int, *, warmup_steps: int, total_steps: int, lr_init: float, lr_end: float, power: float
) -> float:
    if step > total_steps:
        return lr_end / lr_init
    remaining = 1.0 - _decay_progress(step, warmup_steps, total_steps)
    return ((lr_init - lr_end) * remaining**power + lr_end) / lr_init


def _inverse_sqrt_decay(step: int, *, warmup_steps: int, timescale: int) -> float:
    """``sqrt(timescale / (step + timescale - W))``: 1 at the end of warmup, then ``~ 1/sqrt(step)``."""
    return math.sqrt(timescale / (step + timescale - warmup_steps))


# The decay stage's shapes: the share a(r) of the way from the floor to the peak
# that is left at progress r in [0, 1]; each is 1 at r = 0 and 0 at r = 1.
def _anneal_linear(ratio: float) -> float:
    return 1.0 - ratio


def _anneal_cosine(ratio: float) -> float:
    return 0.5 * (math.cos(math.pi * ratio) + 1.0)


def _anneal_exponential(ratio: float) -> float:
    return 2.0 * 0.5**ratio - 1.0


def _anneal_one_minus_sqrt(ratio: float) -> float:
    return 1.0 - math.sqrt(ratio)


#: ``decay_style`` of the warmup-stable-decay schedule -> its shape a(r).
_WSD_DECAY_STYLES = {
    "linear": _anneal_linear,
    "cosine": _anneal_cosine,
    "exponential": _anneal_exponential,
    "1-sqrt": _anneal_one_minus_sqrt,
}


def _stable_then_decay(
    step: int,
    *,
    warmup_steps: int,
    total_steps: int,
    decay_steps: int,
    anneal: Callable[[float], float],
    floor: float,
) -> float:
    """1 until ``total_steps - decay_steps``, then ``floor + (1 - floor) * anneal(r)``, ``floor`` from ``total_steps``."""
    decay_start = total_steps - decay_steps
    if step < decay_start:
        return 1.0
    if step >= total_steps:
        return floor
    return floor + (1.0 - floor) * anneal((step - decay_start) / decay_steps)


def _lr_lambda(decay: Callable[..., float], warmup_steps: int, **decay_args: Any) -> Callable[[int], float]:
    """A picklable ``f(step)``: the shared warmup followed by ``decay``."""
    return functools.partial(_factor_with_warmup, warmup_steps=warmup_steps, decay=decay, **decay_args)


# ----------------------------------------------------------------------------
# Resuming: a set_state_dict that checks before it changes anything.
# ----------------------------------------------------------------------------
class _CheckedResume:
    """Mixed into every scheduler here (before Paddle's class).

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
        checked = {"last_epoch": _last_epoch(state_dict["last_epoch"]),
                   "last_lr": _learning_rate(state_dict["last_lr"], "last_lr")}
        super().set_state_dict({**state_dict, **checked})

    set_dict = set_state_dict  # Paddle's alias would call the unchecked method


class _LambdaSchedule(_CheckedResume, LambdaDecay):
    """A :class:`~paddle.optimizer.lr.LambdaDecay` with the checked ``set_state_dict``
    (what the registry functions that build no named class return)."""


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
            than ``total_steps`` are accepted with a ``UserWarning``.
        last_epoch (int, optional): The last step already taken; the scheduler
            starts at step ``last_epoch + 1``. Default: ``-1`` (start at 0).
        verbose (bool, optional): Print the lr at every step. Default: ``False``.

    Examples:
        >>> from paddle_llrd import LinearDecayWithWarmup
        >>> scheduler = LinearDecayWithWarmup(learning_rate=0.1, total_steps=10, warmup=2)
        >>> lrs = []
        >>> for _ in range(12):
        ...     lrs.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> lrs
        [0.0, 0.05, 0.1, 0.0875, 0.075, 0.0625, 0.05, 0.0375, 0.025, 0.0125, 0.0, 0.0]
    """

    def __init__(
        self,
        learning_rate: float,
        total_steps: int,
        warmup: Warmup,
        last_epoch: int = -1,
        verbose: bool = False,
    ) -> None:
        learning_rate = _learning_rate(learning_rate)
        self.total_steps, self.warmup_steps = _total_and_warmup(total_steps, warmup, type(self).__name__)
        lr_lambda = _lr_lambda(_linear_decay, self.warmup_steps, total_steps=self.total_steps)
        super().__init__(learning_rate, lr_lambda, _last_epoch(last_epoch), verbose)


class ConstScheduleWithWarmup(_LambdaSchedule):
    r"""Linear warmup from 0 to ``learning_rate``, then constant.

    .. math::

        f(s) = \begin{cases} \dfrac{s}{\max(1, W)} & s < W \\[1ex] 1 & s \ge W \end{cases}

    Args:
        learning_rate (float): The learning rate after warmup, ``>= 0``.
        warmup (int|float): An ``int`` is the number of warmup steps; a
            ``float`` in ``[0, 1]`` is a fraction of ``total_steps``, which is
            then required (``ValueError`` otherwise).
        total_steps (int, optional): The number of training steps, used only
            to turn a ``float`` warmup into steps. Default: ``None``.
        last_epoch (int, optional): The last step already taken. Default: ``-1``.
        verbose (bool, optional): Print the lr at every step. Default: ``False``.

    Examples:
        >>> from paddle_llrd import ConstScheduleWithWarmup
        >>> scheduler = ConstScheduleWithWarmup(learning_rate=0.2, warmup=4)
        >>> lrs = []
        >>> for _ in range(7):
        ...     lrs.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> lrs
        [0.0, 0.05, 0.1, 0.15, 0.2, 0.2, 0.2]
        >>> ConstScheduleWithWarmup(0.2, warmup=0.25, total_steps=16).warmup_steps
        4
    """

    def __init__(
        self,
        learning_rate: float,
        warmup: Warmup,
        total_steps: Optional[int] = None,
        last_epoch: int = -1,
        verbose: bool = False,
    ) -> None:
        learning_rate = _learning_rate(learning_rate)
        self.total_steps = None if total_steps is None else _step_count(total_steps, "total_steps", minimum=1)
        self.warmup_steps = _warmup_steps(warmup, self.total_steps)
        lr_lambda = _lr_lambda(_constant, self.warmup_steps)
        super().__init__(learning_rate, lr_lambda, _last_epoch(last_epoch), verbose)


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

    * ``with_hard_restarts=True`` with ``num_cycles=c`` (a ``float``, default
      ``0.5``): a decay that jumps back to the peak every :math:`1/c` of the
      decay phase, 0 from :math:`T` on:

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
            more steps than ``total_steps`` are accepted with a ``UserWarning``.
        with_hard_restarts (bool, optional): Use hard restarts. Default: ``False``.
        num_cycles (int|float|None, optional): ``int >= 0`` waves without
            restarts, ``float >= 0`` restarts with them, ``None`` for the
            defaults above. Another type raises ``TypeError``.
        last_epoch (int, optional): The last step already taken. Default: ``-1``.
        verbose (bool, optional): Print the lr at every step. Default: ``False``.

    Examples:
        >>> from paddle_llrd import CosineDecayWithWarmup
        >>> scheduler = CosineDecayWithWarmup(learning_rate=1.0, total_steps=6, warmup=2)
        >>> lrs = []
        >>> for _ in range(8):
        ...     lrs.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> lrs
        [0.0, 0.5, 1.0, 0.853553, 0.5, 0.146447, 0.0, 0.0]
    """

    def __init__(
        self,
        learning_rate: float,
        total_steps: int,
        warmup: Warmup,
        with_hard_restarts: bool = False,
        num_cycles: Optional[Union[int, float]] = None,
        last_epoch: int = -1,
        verbose: bool = False,
    ) -> None:
        learning_rate = _learning_rate(learning_rate)
        self.total_steps, self.warmup_steps = _total_and_warmup(total_steps, warmup, type(self).__name__)
        if not isinstance(with_hard_restarts, bool):
            raise TypeError(f"`with_hard_restarts` must be a bool, got {with_hard_restarts!r}.")
        self.with_hard_restarts = with_hard_restarts
        self.num_cycles = self._check_num_cycles(num_cycles, with_hard_restarts)
        common = {"total_steps": self.total_steps}
        if with_hard_restarts:
            lr_lambda = _lr_lambda(_cosine_hard_restarts, self.warmup_steps, num_cycles=self.num_cycles, **common)
        elif num_cycles is None:
            lr_lambda = _lr_lambda(_cosine_waves, self.warmup_steps, num_cycles=0.5, hold_after_end=True, **common)
        else:
            lr_lambda = _lr_lambda(_cosine_waves, self.warmup_steps, num_cycles=self.num_cycles, **common)
        super().__init__(learning_rate, lr_lambda, _last_epoch(last_epoch), verbose)

    @staticmethod
    def _check_num_cycles(num_cycles: Any, with_hard_restarts: bool) -> Optional[Union[int, float]]:
        if num_cycles is None:
            return 0.5 if with_hard_restarts else None
        if with_hard_restarts:
            if isinstance(num_cycles, (bool, numbers.Integral)) or not isinstance(num_cycles, numbers.Real):
                raise TypeError(
                    "`num_cycles` must be a float (the number of hard restarts, e.g. 0.5) when "
                    f"with_hard_restarts=True, got {num_cycles!r} of type {type(num_cycles).__name__}."
                )
            value = _finite_real(num_cycles, "num_cycles")
        else:
            if isinstance(num_cycles, bool) or not isinstance(num_cycles, numbers.Integral):
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
            more steps than ``total_steps`` are accepted with a ``UserWarning``.
        lr_end (float, optional): The final learning rate, ``0 <= lr_end <
            learning_rate``. Default: ``1e-7``.
        power (float, optional): The polynomial's power, ``>= 0``. Default: ``1.0``.
        last_epoch (int, optional): The last step already taken. Default: ``-1``.
        verbose (bool, optional): Print the lr at every step. Default: ``False``.

    Examples:
        >>> from paddle_llrd import PolyDecayWithWarmup
        >>> scheduler = PolyDecayWithWarmup(
        ...     1.0, total_steps=6, warmup=2, lr_end=0.1, power=2.0)
        >>> lrs = []
        >>> for _ in range(8):
        ...     lrs.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> lrs
        [0.0, 0.5, 1.0, 0.60625, 0.325, 0.15625, 0.1, 0.1]
    """

    def __init__(
        self,
        learning_rate: float,
        total_steps: int,
        warmup: Warmup,
        lr_end: float = 1e-7,
        power: float = 1.0,
        last_epoch: int = -1,
        verbose: bool = False,
    ) -> None:
        learning_rate = _learning_rate(learning_rate)
        self.total_steps, self.warmup_steps = _total_and_warmup(total_steps, warmup, type(self).__name__)
        self.lr_end = _learning_rate(lr_end, "lr_end")
        if not self.lr_end < learning_rate:
            raise ValueError(
                f"`lr_end` ({self.lr_end!r}) must be smaller than `learning_rate` ({learning_rate!r})."
            )
        self.power = _finite_real(power, "power")
        if self.power < 0:
            raise ValueError(f"`power` must be >= 0, got {self.power!r}.")
        lr_lambda = _lr_lambda(
            _polynomial_decay,
            self.warmup_steps,
            total_steps=self.total_steps,
            lr_init=learning_rate,
            lr_end=self.lr_end,
            power=self.power,
        )
        super().__init__(learning_rate, lr_lambda, _last_epoch(last_epoch), verbose)


# ----------------------------------------------------------------------------
# LRScheduler schedulers with an absolute lr.
# ----------------------------------------------------------------------------
class _AnnealingWithWarmupDecay(_CheckedResume, LRScheduler):
    """Warmup to ``max_lr`` over ``warmup_step`` steps, anneal to ``min_lr`` at
    ``decay_step`` with :meth:`_anneal`, then stay at ``min_lr``."""

    #: Where the warmup starts, as a fraction of ``max_lr`` (set by ``get_scheduler(..., lr_warmup_init=...)``).
    warmup_start = 0.0

    def __init__(
        self,
        max_lr: float,
        min_lr: float,
        warmup_step: int,
        decay_step: int,
        last_epoch: int = -1,
        verbose: bool = False,
    ) -> None:
        self.max_lr = _learning_rate(max_lr, "max_lr")
        self.min_lr = _floor_lr(min_lr, self.max_lr, "max_lr")
        self.warmup_step = _step_count(warmup_step, "warmup_step")
        self.decay_step = _step_count(decay_step, "decay_step")
        if self.decay_step <= self.warmup_step:
            raise ValueError(
                f"`decay_step` ({self.decay_step}) must be greater than `warmup_step` ({self.warmup_step})."
            )
        super().__init__(self.max_lr, _last_epoch(last_epoch), verbose)

    @staticmethod
    def _anneal(ratio: float) -> float:
        """The share of ``max_lr - min_lr`` left at decay ratio ``r`` in ``[0, 1]``."""
        raise NotImplementedError

    def get_lr(self) -> float:
        step = self.last_epoch
        if self.warmup_step > 0 and step <= self.warmup_step:
            return self.max_lr * _warmup_fraction(step, self.warmup_step, self.warmup_start)
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
        last_epoch (int, optional): The last step already taken. Default: ``-1``.
        verbose (bool, optional): Print the lr at every step. Default: ``False``.

    Examples:
        >>> from paddle_llrd import CosineAnnealingWithWarmupDecay
        >>> scheduler = CosineAnnealingWithWarmupDecay(
        ...     max_lr=1.0, min_lr=0.2, warmup_step=2, decay_step=6)
        >>> lrs = []
        >>> for _ in range(8):
        ...     lrs.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> lrs
        [0.0, 0.5, 1.0, 0.882843, 0.6, 0.317157, 0.2, 0.2]
    """

    _anneal = staticmethod(_anneal_cosine)


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

    Args:
        max_lr (float): The peak learning rate, ``>= min_lr``.
        min_lr (float): The final learning rate, ``>= 0``.
        warmup_step (int): Warmup steps :math:`W`, ``>= 0``.
        decay_step (int): The step :math:`D > W` at which ``min_lr`` is reached.
        last_epoch (int, optional): The last step already taken. Default: ``-1``.
        verbose (bool, optional): Print the lr at every step. Default: ``False``.

    Examples:
        >>> from paddle_llrd import LinearAnnealingWithWarmupDecay
        >>> scheduler = LinearAnnealingWithWarmupDecay(
        ...     max_lr=1.0, min_lr=0.2, warmup_step=2, decay_step=6)
        >>> lrs = []
        >>> for _ in range(8):
        ...     lrs.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> lrs
        [0.0, 0.5, 1.0, 0.8, 0.6, 0.4, 0.2, 0.2]
    """

    _anneal = staticmethod(_anneal_linear)


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
        last_epoch (int, optional): The last step already taken. Default: ``-1``.
        verbose (bool, optional): Print the lr at every step. Default: ``False``.

    Examples:
        >>> from paddle_llrd import InverseSquareRootSchedule
        >>> scheduler = InverseSquareRootSchedule(warmup_steps=4, learning_rate=0.5)
        >>> lrs = []
        >>> for _ in range(17):
        ...     lrs.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> lrs[:5], lrs[16]
        ([0.0, 0.125, 0.25, 0.375, 0.5], 0.25)
    """

    def __init__(
        self,
        warmup_steps: int,
        learning_rate: float = 1.0,
        last_epoch: int = -1,
        verbose: bool = False,
    ) -> None:
        self.warmup_steps = _step_count(warmup_steps, "warmup_steps", minimum=1)
        learning_rate = _learning_rate(learning_rate)
        self.peak_lr = learning_rate
        super().__init__(learning_rate, _last_epoch(last_epoch), verbose)

    def get_lr(self) -> float:
        step = self.last_epoch
        if step < self.warmup_steps:
            return self.peak_lr * _warmup_fraction(step, self.warmup_steps)
        return self.peak_lr * math.sqrt(self.warmup_steps) / math.sqrt(step)


# ----------------------------------------------------------------------------
# Megatron-LM's lr_warmup_init: a warmup that starts above 0.
# ----------------------------------------------------------------------------
def _warmup_init_lr(lr_warmup_init: Any, peak: float) -> float:
    """``lr_warmup_init`` as a learning rate in ``[0, peak]``; errors name it."""
    value = _finite_real(lr_warmup_init, "lr_warmup_init")
    if value < 0:
        raise ValueError(f"`lr_warmup_init` must be >= 0, got {value!r}.")
    if value > peak:
        raise ValueError(
            f"`lr_warmup_init` ({value!r}) must be <= the peak learning rate ({peak!r}): the warmup rises from it."
        )
    return value


def _start_warmup_at(scheduler: LRScheduler, lr_warmup_init: float, peak: float) -> LRScheduler:
    """Make the linear warmup of a built-in schedule start at ``lr_warmup_init`` instead of 0.

    The lr at step :math:`s < W` becomes ``lr_warmup_init + (peak -
    lr_warmup_init) * s / W``; every other step keeps its value. The
    scheduler's current lr is recomputed, so this works at any position.

    Raises:
        TypeError: ``scheduler`` is not one of this module's warmup schedules.
    """
    start = lr_warmup_init / peak if peak > 0 else 0.0
    if isinstance(scheduler, _AnnealingWithWarmupDecay):
        scheduler.warmup_start = start
    elif (
        isinstance(scheduler, LambdaDecay)
        and isinstance(scheduler.lr_lambda, functools.partial)
        and scheduler.lr_lambda.func is _factor_with_warmup
    ):
        keywords = {**scheduler.lr_lambda.keywords, "warmup_start": start}
        scheduler.lr_lambda = functools.partial(_factor_with_warmup, *scheduler.lr_lambda.args, **keywords)
    else:
        raise TypeError(f"{type(scheduler).__name__} has no linear warmup that `lr_warmup_init` could start.")
    scheduler.last_lr = scheduler.get_lr()
    return scheduler
