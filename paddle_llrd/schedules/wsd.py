r"""The warmup-stable-decay schedule (``"warmup_stable_decay"``): :func:`get_wsd_schedule`.

The one schedule of the registry that takes two families of keywords, each
with its own numbers: Megatron-LM's ``--lr-decay-style WSD``
(:data:`WSD_MEGATRON_KEYWORDS`) and Hugging Face's ``get_wsd_schedule``
(:data:`WSD_HUGGING_FACE_KEYWORDS`). Which family a call names, the stages'
lengths and the decay's shape are decided here; the factors themselves are
:func:`~.factors.stable_then_decay` and :func:`~.factors.hugging_face_wsd`.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Dict, Mapping, Optional

from paddle.optimizer.lr import LambdaDecay

from ..checks import checked_finite, checked_non_negative, checked_step_index, did_you_mean
from . import factors
from .factors import HF_WSD_DECAY_TYPES, HF_WSD_WARMUP_TYPES, WSD_DECAY_STYLES, lr_lambda
from .schedule_checks import checked_floor_ratio, checked_step_count, lr_warmup_init_fraction
from .warmup import _LambdaSchedule, checked_cycle_count

__all__ = [
    "get_wsd_schedule", "hugging_face_reading", "DEFAULT_WSD_DECAY_RATIO", "WSD_HUGGING_FACE_KEYWORDS",
    "WSD_MEGATRON_KEYWORDS",
]

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
        given = ("`num_decay_steps`" if num_decay_steps is not None
                 else "`decay_ratio`" if decay_ratio is not None else "`decay_ratio`'s default of 0.1")
        raise ValueError(
            f"`num_warmup_steps` ({warmup}) plus the decay steps ({decay_steps}, from {given}) must not exceed "
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
        floor = checked_floor_ratio(learning_rate, min_lr, min_lr_ratio, "min_lr_ratio",
                                    schedule="warmup_stable_decay", required=False)
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
    floor = checked_floor_ratio(learning_rate, None, min_lr_ratio, "min_lr_ratio", schedule="warmup_stable_decay",
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


def hugging_face_reading(options: Mapping[str, Any]) -> Dict[str, Any]:
    """The options of Hugging Face's call (``get_scheduler(..., optimizer=...)``) as :func:`get_wsd_schedule` reads
    them: Hugging Face's keywords, so that ``min_lr_ratio`` starts the warmup where Hugging Face's does, unless the
    call names one of Megatron-LM's keywords or a ``warmup_type`` itself.

    Examples:
        >>> hugging_face_reading({"num_decay_steps": 2, "min_lr_ratio": 0.1})["warmup_type"]
        'linear'
        >>> "warmup_type" in hugging_face_reading({"decay_style": "linear"})
        False
    """
    named = [key for key in (*WSD_MEGATRON_KEYWORDS, "warmup_type") if options.get(key) is not None]
    return dict(options) if named else {**options, "warmup_type": "linear"}
