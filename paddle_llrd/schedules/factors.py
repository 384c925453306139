r"""Learning-rate factors :math:`f(s)`: small pure functions of the step, as in optax.

A ``LambdaDecay`` schedule's lr at step :math:`s` is ``learning_rate * f(s)``.
Every :math:`f` here is the one linear warmup (:func:`factor_with_warmup`)
followed by one decay function; :func:`lr_lambda` binds them with
:func:`functools.partial`, so the schedulers pickle and deep-copy (a
``lambda`` could not).
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable

__all__ = ["WSD_DECAY_STYLES", "factor_with_warmup", "lr_lambda", "warmup_fraction"]


def warmup_fraction(step: int, warmup_steps: int, start: float = 0.0) -> float:
    """The linear warmup from ``start`` (a fraction of the peak) to 1: ``start + (1 - start) * step / max(1, W)``.

    With ``start=0`` this is exactly ``step / max(1, W)``, bit for bit.

    Examples:
        >>> warmup_fraction(1, 4), warmup_fraction(2, 4, start=0.5)
        (0.25, 0.75)
    """
    return start + (1.0 - start) * (step / max(1, warmup_steps))


def factor_with_warmup(
    step: int, *, warmup_steps: int, decay: Callable[..., float], warmup_start: float = 0.0, **decay_args: Any
) -> float:
    """:func:`warmup_fraction` from ``warmup_start`` before ``warmup_steps``, then ``decay(step, warmup_steps=W, ...)``."""
    if step < warmup_steps:
        return warmup_fraction(step, warmup_steps, warmup_start)
    return decay(step, warmup_steps=warmup_steps, **decay_args)


def lr_lambda(
    decay: Callable[..., float], warmup_steps: int, warmup_start: float = 0.0, **decay_args: Any
) -> Callable[[int], float]:
    """A picklable :math:`f(s)`: the shared warmup (from ``warmup_start``) followed by ``decay``.

    Examples:
        >>> f = lr_lambda(constant, 4, warmup_start=0.5)
        >>> [f(step) for step in range(6)]
        [0.5, 0.625, 0.75, 0.875, 1.0, 1.0]
    """
    return functools.partial(
        factor_with_warmup, warmup_steps=warmup_steps, decay=decay, warmup_start=warmup_start, **decay_args
    )


def decay_progress(step: int, warmup_steps: int, total_steps: int) -> float:
    """Fraction of the decay phase done: ``(step - W) / max(1, T - W)``."""
    return (step - warmup_steps) / max(1, total_steps - warmup_steps)


def constant(step: int, *, warmup_steps: int) -> float:
    return 1.0


def linear_decay(step: int, *, warmup_steps: int, total_steps: int) -> float:
    return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))


def cosine_waves(
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
    progress = decay_progress(step, warmup_steps, total_steps)
    if hold_after_end:
        progress = min(progress, 1.0)
    wave = max(0.0, 0.5 * (1.0 + math.cos(math.pi * num_cycles * 2.0 * progress)))
    return floor + (1.0 - floor) * wave


def cosine_hard_restarts(step: int, *, warmup_steps: int, total_steps: int, num_cycles: float) -> float:
    progress = decay_progress(step, warmup_steps, total_steps)
    if progress >= 1.0:
        return 0.0
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * ((num_cycles * progress) % 1.0))))


def polynomial_decay(
    step: int, *, warmup_steps: int, total_steps: int, lr_init: float, lr_end: float, power: float
) -> float:
    if step > total_steps:
        return lr_end / lr_init
    remaining = 1.0 - decay_progress(step, warmup_steps, total_steps)
    return ((lr_init - lr_end) * remaining**power + lr_end) / lr_init


def inverse_sqrt_decay(step: int, *, warmup_steps: int, timescale: int) -> float:
    """``sqrt(timescale / (step + timescale - W))``: 1 at the end of warmup, then ``~ 1/sqrt(step)``."""
    return math.sqrt(timescale / (step + timescale - warmup_steps))


# The decay stage's shapes: the share a(r) of the way from the floor to the peak
# that is left at progress r in [0, 1]; each is 1 at r = 0 and 0 at r = 1.
def anneal_linear(ratio: float) -> float:
    return 1.0 - ratio


def anneal_cosine(ratio: float) -> float:
    return 0.5 * (math.cos(math.pi * ratio) + 1.0)


def anneal_exponential(ratio: float) -> float:
    return 2.0 * 0.5**ratio - 1.0


def anneal_one_minus_sqrt(ratio: float) -> float:
    return 1.0 - math.sqrt(ratio)


#: ``decay_style`` of the warmup-stable-decay schedule -> its shape a(r).
WSD_DECAY_STYLES = {
    "linear": anneal_linear,
    "cosine": anneal_cosine,
    "exponential": anneal_exponential,
    "1-sqrt": anneal_one_minus_sqrt,
}


def stable_then_decay(
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

