r"""Learning-rate factors :math:`f(s)`: small pure functions of the step, one per schedule shape.

A ``LambdaDecay`` schedule's lr at step :math:`s` is ``learning_rate * f(s)``.
Every :math:`f` here but :func:`hugging_face_wsd` is the one linear warmup
(:func:`factor_with_warmup`) followed by one decay function; :func:`lr_lambda`
binds them with :func:`functools.partial`, so the schedulers pickle and
deep-copy (a ``lambda`` could not). :math:`W` is the number of warmup steps,
:math:`T` the number of training steps.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable

__all__ = [
    "HF_WSD_DECAY_TYPES",
    "HF_WSD_WARMUP_TYPES",
    "WSD_DECAY_STYLES",
    "factor_with_warmup",
    "hugging_face_wsd",
    "lr_lambda",
    "warmup_fraction",
]


def warmup_fraction(step: int, warmup_steps: int, start: float = 0.0) -> float:
    r"""The linear warmup from ``start`` (a fraction of the peak) to 1: :math:`a + (1 - a)\, s / \max(1, W)`.

    With ``start=0`` this is exactly ``step / max(1, W)``, bit for bit.

    Examples:
        >>> warmup_fraction(1, 4), warmup_fraction(2, 4, start=0.5)
        (0.25, 0.75)
    """
    return start + (1.0 - start) * (step / max(1, warmup_steps))


def factor_with_warmup(
    step: int, *, warmup_steps: int, decay: Callable[..., float], warmup_start: float = 0.0, **decay_args: Any
) -> float:
    """:func:`warmup_fraction` from ``warmup_start`` before ``warmup_steps``, then ``decay(step, warmup_steps=W, ...)``.
    """
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
    r"""Fraction of the decay phase done: :math:`p = (s - W) / \max(1, T - W)`."""
    return (step - warmup_steps) / max(1, total_steps - warmup_steps)


def constant(step: int, *, warmup_steps: int) -> float:
    r""":math:`f(s) = 1` (``"constant"``, ``"constant_with_warmup"`` after the warmup)."""
    return 1.0


def linear_decay(step: int, *, warmup_steps: int, total_steps: int) -> float:
    r""":math:`f(s) = \max\!\left(0, \frac{T - s}{\max(1, T - W)}\right)` (``"linear"``)."""
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
    r"""The cosine waves of ``"cosine"`` and ``"cosine_with_min_lr"`` down to a floor.

    .. math:: f(s) = m + (1 - m) \max\!\left(0, \tfrac12 (1 + \cos(2 \pi c\, p))\right)

    :math:`c` = ``num_cycles``, :math:`m` = ``floor``, :math:`p` of
    :func:`decay_progress`; ``hold_after_end`` caps :math:`p` at 1, so a
    decay stays at its final value after :math:`T` instead of climbing back up
    the wave.
    """
    progress = decay_progress(step, warmup_steps, total_steps)
    if hold_after_end:
        progress = min(progress, 1.0)
    wave = max(0.0, 0.5 * (1.0 + math.cos(math.pi * num_cycles * 2.0 * progress)))
    return floor + (1.0 - floor) * wave


def cosine_hard_restarts(step: int, *, warmup_steps: int, total_steps: int, num_cycles: float) -> float:
    r"""``"cosine_with_restarts"``, 0 from :math:`p = 1`.

    .. math:: f(s) = \max\!\left(0, \tfrac12 (1 + \cos(\pi ((c\, p) \bmod 1)))\right), \quad p < 1
    """
    progress = decay_progress(step, warmup_steps, total_steps)
    if progress >= 1.0:
        return 0.0
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * ((num_cycles * progress) % 1.0))))


def polynomial_decay(
    step: int, *, warmup_steps: int, total_steps: int, lr_init: float, lr_end: float, power: float
) -> float:
    r"""``"polynomial"``, :math:`\eta_{end}/\eta` from :math:`s > T` on.

    .. math:: f(s) = \frac{(\eta - \eta_{end}) (1 - p)^{power} + \eta_{end}}{\eta}, \quad s \le T
    """
    if step > total_steps:
        return lr_end / lr_init
    remaining = 1.0 - decay_progress(step, warmup_steps, total_steps)
    return ((lr_init - lr_end) * remaining**power + lr_end) / lr_init


def inverse_sqrt_decay(step: int, *, warmup_steps: int, timescale: int) -> float:
    r"""``"inverse_sqrt"``: 1 at the end of warmup, then :math:`\sim 1/\sqrt{s}`.

    .. math:: f(s) = \sqrt{\tau / (s + \tau - W)}
    """
    return math.sqrt(timescale / (step + timescale - warmup_steps))


# The decay stage's shapes: the share a(r) of the way from the floor to the peak
# that is left at progress r in [0, 1]; each is 1 at r = 0 and 0 at r = 1.
def anneal_linear(ratio: float) -> float:
    r""":math:`a(r) = 1 - r`."""
    return 1.0 - ratio


def anneal_cosine(ratio: float) -> float:
    r""":math:`a(r) = \tfrac12 (\cos(\pi r) + 1)`."""
    return 0.5 * (math.cos(math.pi * ratio) + 1.0)


def anneal_exponential(ratio: float) -> float:
    r""":math:`a(r) = 2 \cdot 0.5^{r} - 1`."""
    return 2.0 * 0.5**ratio - 1.0


def anneal_one_minus_sqrt(ratio: float) -> float:
    r""":math:`a(r) = 1 - \sqrt{r}`."""
    return 1.0 - math.sqrt(ratio)


#: ``decay_style`` of the warmup-stable-decay schedule (Megatron-LM's) -> its shape a(r).
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
    r"""Megatron-LM's WSD after the warmup: 1 until :math:`T - D`, then :math:`m + (1 - m)\, a(r)`, then :math:`m`.

    :math:`D` = ``decay_steps``, :math:`m` = ``floor``, :math:`a` = ``anneal``
    and :math:`r = (s - (T - D)) / D`.
    """
    decay_start = total_steps - decay_steps
    if step < decay_start:
        return 1.0
    if step >= total_steps:
        return floor
    return floor + (1.0 - floor) * anneal((step - decay_start) / decay_steps)


def _rise_linear(progress: float) -> float:
    return progress


def _rise_cosine(progress: float) -> float:
    return 0.5 * (1.0 - math.cos(math.pi * progress))


def _rise_one_minus_sqrt(progress: float) -> float:
    return 1.0 - math.sqrt(1.0 - progress)


#: Hugging Face's ``warmup_type`` -> the rise :math:`w(p)` from 0 to 1 over the warmup.
HF_WSD_WARMUP_TYPES = {"linear": _rise_linear, "cosine": _rise_cosine, "1-sqrt": _rise_one_minus_sqrt}
#: Hugging Face's ``decay_type``s (``"cosine"`` takes ``num_cycles``, see :func:`hugging_face_wsd`).
HF_WSD_DECAY_TYPES = ("linear", "cosine", "1-sqrt")


def _hf_decay_left(progress: float, decay_type: str, num_cycles: float) -> float:
    if decay_type == "linear":
        return 1.0 - progress
    if decay_type == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * num_cycles * 2.0 * progress))
    return 1.0 - math.sqrt(progress)


def hugging_face_wsd(
    step: int,
    *,
    warmup_steps: int,
    stable_steps: int,
    decay_steps: int,
    warmup_type: str,
    decay_type: str,
    floor: float,
    num_cycles: float,
) -> float:
    r"""Hugging Face's ``get_wsd_schedule`` factor: warmup from :math:`m`, stable, decay to :math:`m`.

    With :math:`W, S, D` = ``warmup_steps``, ``stable_steps``,
    ``decay_steps``, :math:`m` = ``floor`` and :math:`c` = ``num_cycles``:

    .. math::

        f(s) = \begin{cases}
            \max(0,\ m + (1 - m)\, w(s / \max(1, W))) & s < W \\
            1 & W \le s < W + S \\
            \max(0,\ m + (1 - m)\, d(\tfrac{s - W - S}{\max(1, D)})) & W + S \le s < W + S + D \\
            m & s \ge W + S + D
        \end{cases}

    with the warmup rise :math:`w(p)` of ``warmup_type`` (``"linear"``:
    :math:`p`, ``"cosine"``: :math:`\tfrac12 (1 - \cos(\pi p))`,
    ``"1-sqrt"``: :math:`1 - \sqrt{1 - p}`) and the decay :math:`d(p)` of
    ``decay_type`` (``"linear"``: :math:`1 - p`, ``"cosine"``:
    :math:`\tfrac12 (1 + \cos(2 \pi c\, p))`, ``"1-sqrt"``: :math:`1 - \sqrt{p}`).

    Examples:
        >>> [round(hugging_face_wsd(s, warmup_steps=2, stable_steps=1, decay_steps=2, warmup_type="linear",
        ...                         decay_type="linear", floor=0.2, num_cycles=0.5), 6) for s in range(6)]
        [0.2, 0.6, 1.0, 1.0, 0.6, 0.2]
    """
    if step < warmup_steps:
        rise = HF_WSD_WARMUP_TYPES[warmup_type](step / max(1, warmup_steps))
        return max(0.0, rise * (1.0 - floor) + floor)
    if step < warmup_steps + stable_steps:
        return 1.0
    if step < warmup_steps + stable_steps + decay_steps:
        progress = (step - warmup_steps - stable_steps) / max(1, decay_steps)
        return max(0.0, _hf_decay_left(progress, decay_type, num_cycles) * (1.0 - floor) + floor)
    return floor
