"""An optimizer's weight-decay coefficient following a :class:`~paddle_llrd.WeightDecaySchedule`.

:class:`ScheduledDecay` holds the schedule and the parameter groups that
follow it (those given no ``weight_decay`` of their own); ``AdamWDL`` sets
its coefficient from it before each step (:meth:`ScheduledDecay.coefficient`)
and advances it after (:meth:`ScheduledDecay.finish_step`). Without a
schedule (``ScheduledDecay(None)``) each method does nothing, so that the
optimizer's checks, groups and checkpoints need no case of their own; its
step reads ``schedule`` first and calls nothing here without one. See
:doc:`/weight_decay`.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from paddle.base import framework

from ..checks import optimizer_name
from ..schedules.weight_decay import WeightDecaySchedule
from ..warning_classes import CheckpointMatchWarning, stacklevel_outside_package

__all__ = ["ScheduledDecay"]


class ScheduledDecay:
    """A weight-decay schedule and the parameter groups whose ``weight_decay`` follows it.

    Args:
        schedule (WeightDecaySchedule|None): The schedule given as ``weight_decay``; None:
            a fixed coefficient, which nothing here changes.
        owner (str|None): The optimizer its messages name; None: the one being built
            (:func:`~paddle_llrd.checks.optimizer_name`, ``AdamW`` for ``paddle_llrd.AdamW``).

    Examples:
        >>> from paddle_llrd import WeightDecaySchedule
        >>> decay = ScheduledDecay(WeightDecaySchedule(0.04, 0.4, total_steps=10, style="linear"))
        >>> group = {"params": []}
        >>> decay.follow(group)
        >>> decay.coefficient(), group["weight_decay"]
        (0.04, 0.04)
        >>> ScheduledDecay(None).coefficient() is None
        True
    """

    def __init__(self, schedule: WeightDecaySchedule | None, owner: str | None = None) -> None:
        self.schedule = schedule
        self.owner = optimizer_name() if owner is None else owner
        self.groups: list[dict[str, Any]] = []

    def follow(self, group: dict[str, Any]) -> None:
        """Let ``group``'s ``weight_decay`` follow the schedule from the next step on."""
        self.groups.append(group)

    def coefficient(self) -> float | None:
        """The schedule's coefficient for the coming step, set in every following group too
        (None without a schedule)."""
        if self.schedule is None:
            return None
        coeff = float(self.schedule())
        for group in self.groups:
            group["weight_decay"] = coeff
        return coeff

    def finish_step(self, overflow: bool) -> bool:
        """Advance the schedule after a step, unless the step was an AMP ``overflow`` (it
        updated nothing); whether it advanced."""
        if self.schedule is None or overflow:
            return False
        self.schedule.step()
        return True

    def refuse_outside_dygraph(self) -> None:
        """``NotImplementedError`` when building a static program: it would fix the coefficient."""
        if self.schedule is not None and not framework.in_dygraph_mode():
            raise NotImplementedError(
                f"{self.owner}: a WeightDecaySchedule as `weight_decay` needs dygraph execution "
                "(eager, or paddle.jit.to_static, whose optimizer step runs eagerly): a static "
                "program fixes the weight-decay coefficient when it is built. Give a float "
                "`weight_decay` for static programs."
            )

    def load(self, schedule_state: Any, load_optimizer_state: Callable[[], None], key: str) -> None:
        """Restore the schedule's position from ``schedule_state`` (the checkpoint's ``key``
        entry) together with the optimizer state (``load_optimizer_state``): both or
        neither; a checkpoint without the entry warns (:class:`~paddle_llrd.CheckpointMatchWarning`)
        and leaves the schedule where it is. Without a schedule, only the optimizer state loads."""
        if self.schedule is None:
            load_optimizer_state()
            return
        if schedule_state is None:
            warnings.warn(
                f"{self.owner}.set_state_dict: the checkpoint has no {key!r} entry; the weight-decay "
                f"schedule stays at step {self.schedule.current_step}.", CheckpointMatchWarning,
                stacklevel=stacklevel_outside_package())
            load_optimizer_state()
            return
        previous_step = self.schedule.current_step
        self.schedule.set_state_dict(schedule_state)  # checks the entry before changing anything
        try:
            load_optimizer_state()
        except BaseException:
            self.schedule.current_step = previous_step
            raise
