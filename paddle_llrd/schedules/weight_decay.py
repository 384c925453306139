r"""Weight-decay schedules: a coefficient that ramps from ``start_wd`` to ``end_wd``.

Megatron-LM's ``OptimizerParamScheduler`` moves the weight decay of an AdamW
run from ``--start-weight-decay`` to ``--end-weight-decay`` over
``--weight-decay-incr-steps`` steps, with an increment style ``constant``,
``linear`` or ``cosine``. :class:`WeightDecaySchedule` is that rule, and
:class:`paddle_llrd.AdamWDL` accepts it as its ``weight_decay``: the optimizer
then uses the schedule's value at every step and advances it after every
applied step. One schedule belongs to one optimizer (:func:`claim_schedule`):
two optimizers stepping it would advance it twice per iteration.
"""
from __future__ import annotations

import math
import warnings
import weakref
from collections.abc import Mapping
from typing import Any

from ..checks import checked_count, checked_non_negative
from ..warning_classes import CheckpointMatchWarning, stacklevel_outside_package

__all__ = ["WEIGHT_DECAY_STYLES", "WeightDecaySchedule", "check_unclaimed", "claim_schedule"]

WEIGHT_DECAY_STYLES = ("constant", "linear", "cosine")
_CONFIG_KEYS = ("start_wd", "end_wd", "total_steps", "style")


def _checked_step_count(value: Any, argument: str) -> int:
    return checked_count(value, argument, owner="WeightDecaySchedule", meaning="a number of optimizer steps")


class WeightDecaySchedule:
    r"""A weight-decay coefficient that moves from ``start_wd`` to ``end_wd`` over ``total_steps``.

    With :math:`s` the number of optimizer steps taken so far
    (:attr:`current_step`), :math:`T` = ``total_steps``, :math:`w_0` =
    ``start_wd`` and :math:`w_1` = ``end_wd``, the coefficient of the next
    step is

    .. math::

        \lambda(s) =
        \begin{cases}
            w_1 & \text{if } s \ge T\\
            w_0 + (w_1 - w_0)\,\dfrac{s}{T} & \text{style } \texttt{linear}\\
            w_0 + (w_1 - w_0)\,\tfrac12\left(\cos\!\left(\pi\left(1 - \dfrac{s}{T}\right)\right) + 1\right)
                & \text{style } \texttt{cosine}\\
            w_0 = w_1 & \text{style } \texttt{constant}
        \end{cases}

    as Megatron-LM's ``OptimizerParamScheduler.get_wd`` computes it: the first
    step uses :math:`w_0`, step :math:`T` and every later one :math:`w_1`
    (the ramp is clamped, not extrapolated). The cosine ramp starts and ends
    flat. ``end_wd`` may be smaller than ``start_wd`` (a decreasing decay).

    Given to :class:`~paddle_llrd.AdamWDL` as ``weight_decay``, the optimizer
    owns the schedule: it uses :math:`\lambda(s)` for step :math:`s`, calls
    :meth:`step` after every step that updated the weights (not after an AMP
    overflow step, which changes nothing) and saves :attr:`current_step` in
    its ``state_dict()``. Do not call :meth:`step` yourself then.

    Args:
        start_wd (float): The coefficient of the first step, ``>= 0``.
        end_wd (float): The coefficient from step ``total_steps`` on, ``>= 0``.
            Equal to ``start_wd`` for style ``constant``.
        total_steps (int): Length :math:`T` of the ramp in optimizer steps,
            ``>= 0`` (``0``: ``end_wd`` from the first step).
        style (str, optional): ``"constant"``, ``"linear"`` or ``"cosine"``.
            Default ``"constant"`` (Megatron-LM's, and the Trainer field
            ``weight_decay_incr_style``'s): a ramp names its style.
        current_step (int, optional): Keyword only. Steps already taken, to
            start part-way (a checkpoint restores it through
            :meth:`set_state_dict`). Default 0.

    Raises:
        TypeError: a coefficient is not a real number, a step count not an
            int, or ``style`` not a str.
        ValueError: a coefficient is negative or not finite, a step count is
            negative, ``style`` is unknown, or style ``constant`` is given
            ``start_wd != end_wd``.

    Examples:
        >>> from paddle_llrd import WeightDecaySchedule
        >>> schedule = WeightDecaySchedule(0.0, 0.1, total_steps=4, style="linear")
        >>> [round(schedule(s), 4) for s in range(6)]
        [0.0, 0.025, 0.05, 0.075, 0.1, 0.1]
        >>> schedule(), schedule.current_step
        (0.0, 0)
        >>> schedule.step()
        >>> schedule()
        0.025
        >>> cosine = WeightDecaySchedule(0.0, 0.1, total_steps=4, style="cosine")
        >>> [round(cosine(s), 4) for s in range(5)]
        [0.0, 0.0146, 0.05, 0.0854, 0.1]

        With AdamWDL, which steps the schedule itself:

        >>> import paddle
        >>> from paddle_llrd import AdamWDL
        >>> linear = paddle.nn.Linear(4, 4)
        >>> opt = AdamWDL(learning_rate=0.01, parameters=linear.parameters(),
        ...               weight_decay=WeightDecaySchedule(0.0, 0.1, total_steps=4, style="linear"))
        >>> for _ in range(3):
        ...     linear(paddle.ones([2, 4])).sum().backward()
        ...     opt.step()
        ...     opt.clear_grad()
        >>> opt.weight_decay_schedule.current_step, round(opt.weight_decay_schedule(), 4)
        (3, 0.075)
        >>> opt.state_dict()["weight_decay_schedule"]["current_step"]
        3
    """

    def __init__(
        self,
        start_wd: float,
        end_wd: float,
        total_steps: int,
        style: str = "constant",
        *,
        current_step: int = 0,
    ) -> None:
        start_wd = checked_non_negative(start_wd, "start_wd", owner="WeightDecaySchedule")
        end_wd = checked_non_negative(end_wd, "end_wd", owner="WeightDecaySchedule")
        total_steps = _checked_step_count(total_steps, "total_steps")
        if not isinstance(style, str):
            raise TypeError(
                f"WeightDecaySchedule: `style` must be one of {WEIGHT_DECAY_STYLES}, "
                f"got {type(style).__name__} {style!r}."
            )
        if style not in WEIGHT_DECAY_STYLES:
            raise ValueError(f"WeightDecaySchedule: `style` must be one of {WEIGHT_DECAY_STYLES}, got {style!r}.")
        if style == "constant" and start_wd != end_wd:
            raise ValueError(
                "WeightDecaySchedule: style 'constant' keeps one coefficient, so `end_wd` must equal "
                f"`start_wd`; got start_wd={start_wd!r}, end_wd={end_wd!r} (use style 'linear' or "
                "'cosine' for a ramp)."
            )
        self.start_wd = start_wd
        self.end_wd = end_wd
        self.total_steps = total_steps
        self.style = style
        self.current_step = _checked_step_count(current_step, "current_step")

    def __call__(self, step: int | None = None) -> float:
        """The coefficient :math:`\\lambda(s)` at ``step`` (default: :attr:`current_step`)."""
        step = self.current_step if step is None else _checked_step_count(step, "step")
        if step >= self.total_steps or self.style == "constant":
            return self.end_wd
        progress = step / self.total_steps
        if self.style == "linear":
            fraction = progress
        else:
            fraction = 0.5 * (math.cos(math.pi * (1.0 - progress)) + 1.0)
        return self.start_wd + (self.end_wd - self.start_wd) * fraction

    def step(self) -> None:
        """Advance by one optimizer step."""
        self.current_step += 1

    def state_dict(self) -> dict[str, Any]:
        """``{"current_step": int, "start_wd", "end_wd", "total_steps", "style"}``.

        Only ``current_step`` is restored by :meth:`set_state_dict`; the
        settings are saved so a resumed run can tell that they changed.
        """
        return {
            "current_step": self.current_step,
            "start_wd": self.start_wd,
            "end_wd": self.end_wd,
            "total_steps": self.total_steps,
            "style": self.style,
        }

    def set_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore the position :attr:`current_step` from :meth:`state_dict`'s output.

        The schedule keeps its own ``start_wd``/``end_wd``/``total_steps``/
        ``style`` (as Paddle's ``LRScheduler`` keeps its settings); a
        :class:`~paddle_llrd.CheckpointMatchWarning` names those that differ
        from the checkpoint's.

        Raises:
            TypeError: ``state_dict`` is not a mapping, or its ``current_step``
                is not an int.
            KeyError: ``state_dict`` has no ``current_step``.
            ValueError: ``current_step`` is negative.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(
                f"WeightDecaySchedule.set_state_dict: `state_dict` must be a dict from state_dict(), "
                f"got {type(state_dict).__name__}."
            )
        if "current_step" not in state_dict:
            raise KeyError(
                "WeightDecaySchedule.set_state_dict: `state_dict` has no 'current_step' "
                f"(keys: {sorted(state_dict)}); pass the output of WeightDecaySchedule.state_dict()."
            )
        current_step = _checked_step_count(state_dict["current_step"], "current_step")
        changed = [
            key for key in _CONFIG_KEYS if key in state_dict and state_dict[key] != getattr(self, key)
        ]
        if changed:
            warnings.warn(
                "WeightDecaySchedule.set_state_dict: the checkpoint's "
                + ", ".join(f"{key}={state_dict[key]!r}" for key in changed)
                + " differ from this schedule's "
                + ", ".join(f"{key}={getattr(self, key)!r}" for key in changed)
                + "; the schedule keeps its own settings and resumes at step "
                f"{current_step}.",
                CheckpointMatchWarning,
                stacklevel=stacklevel_outside_package(),  # (the user's line, also through an optimizer's load)
            )
        self.current_step = current_step

    def __repr__(self) -> str:
        return (
            f"WeightDecaySchedule(start_wd={self.start_wd!r}, end_wd={self.end_wd!r}, "
            f"total_steps={self.total_steps!r}, style={self.style!r}, current_step={self.current_step!r})"
        )


# The optimizer that follows each schedule, held weakly on both sides: a
# schedule whose optimizer is gone (or a copy of a schedule) is free again.
_OWNERS: weakref.WeakKeyDictionary[WeightDecaySchedule, weakref.ref[Any]] = weakref.WeakKeyDictionary()


def check_unclaimed(schedule: WeightDecaySchedule, argument: str, *, owner: str = "AdamWDL") -> None:
    """``ValueError`` naming ``argument`` if another live optimizer already follows ``schedule``.

    Each optimizer advances its schedule after its own step, so one schedule
    shared by two optimizers would advance twice per training iteration
    (step 10 after 5 iterations) and give both the wrong coefficient.

    Examples:
        >>> import paddle
        >>> from paddle_llrd import AdamWDL, WeightDecaySchedule
        >>> schedule = WeightDecaySchedule(0.0, 0.1, total_steps=10, style="linear")
        >>> first = AdamWDL(parameters=paddle.nn.Linear(2, 2).parameters(), weight_decay=schedule)
        >>> second = AdamWDL(parameters=paddle.nn.Linear(2, 2).parameters(), weight_decay=schedule)
        Traceback (most recent call last):
        ...
        ValueError: AdamWDL: `weight_decay` is a WeightDecaySchedule that another optimizer (AdamWDL) already follows; ...
        >>> import copy
        >>> second = AdamWDL(parameters=paddle.nn.Linear(2, 2).parameters(),
        ...                  weight_decay=copy.deepcopy(schedule))
    """
    holder = _OWNERS.get(schedule)
    other = None if holder is None else holder()
    if other is not None:
        raise ValueError(
            f"{owner}: `{argument}` is a WeightDecaySchedule that another optimizer "
            f"({type(other).__name__}) already follows; each optimizer advances its schedule after "
            "its own step, so a shared one would advance twice per iteration. Give each optimizer "
            "its own schedule (copy.deepcopy(schedule), or build a second one)."
        )


def claim_schedule(schedule: WeightDecaySchedule, optimizer: Any) -> None:
    """Record that ``optimizer`` follows ``schedule`` (:func:`check_unclaimed` refuses it to others)."""
    _OWNERS[schedule] = weakref.ref(optimizer)
