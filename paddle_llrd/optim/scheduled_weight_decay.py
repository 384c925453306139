"""How an optimizer follows a :class:`~paddle_llrd.WeightDecaySchedule`: the
mixin :class:`ScheduledWeightDecay` that :class:`~paddle_llrd.AdamWDL` puts
before ``paddle.optimizer.AdamW`` in its bases.

Step :math:`s` (counted over the steps that updated the weights) uses the
schedule's value for every parameter outside a parameter group with its own
``weight_decay``; the schedule is read before each step or ``minimize`` and
advanced after it, except after an AMP overflow step (``found_inf``), which
changes nothing. Its position is saved in ``state_dict()`` and restored by
``set_state_dict()``. A static program fixes the coefficient when it is
built, so it refuses a schedule.
"""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from paddle.base import framework

from .ratios import is_tensor
from ..schedules.weight_decay import WeightDecaySchedule

if TYPE_CHECKING:
    from paddle import Tensor

# The entry of the optimizer's state_dict() that holds its schedule's state.
WEIGHT_DECAY_SCHEDULE_KEY = "weight_decay_schedule"


class ScheduledWeightDecay:
    """Weight-decay schedule support for a ``paddle.optimizer.AdamW`` subclass (a mixin before it)."""

    _weight_decay_schedule: WeightDecaySchedule | None
    _groups_following_schedule: list[dict[str, Any]]

    def _follow_schedule(self, weight_decay: Any) -> Any:
        """Keep ``weight_decay`` if it is a schedule; the coefficient to give Paddle's constructor.

        Called before that constructor, which adds the parameter groups.
        """
        self._groups_following_schedule = []
        self._weight_decay_schedule = None
        if isinstance(weight_decay, WeightDecaySchedule):
            self._weight_decay_schedule = weight_decay
            return weight_decay()
        return weight_decay

    @property
    def weight_decay_schedule(self) -> WeightDecaySchedule | None:
        """The :class:`~paddle_llrd.WeightDecaySchedule` given as ``weight_decay``, or None."""
        return self._weight_decay_schedule

    @property
    def _coeff(self) -> float:
        """The weight decay :math:`\\lambda` (of the group being updated, in a pass)."""
        return self._weight_decay

    @_coeff.setter
    def _coeff(self, value: float) -> None:
        self._weight_decay = float(value)
        self._default_dict["weight_decay"] = float(value)

    def _add_param_group(self, param_group: dict[str, Any]) -> None:
        follows_default = "weight_decay" not in param_group
        super()._add_param_group(param_group)
        if follows_default:
            self._groups_following_schedule.append(param_group)

    def _sync_weight_decay(self) -> None:
        """Set the coefficient of the next step from the schedule, if there is one."""
        schedule = self._weight_decay_schedule
        if schedule is None:
            return
        coeff = float(schedule())
        self._coeff = coeff
        for group in self._groups_following_schedule:
            group["weight_decay"] = coeff

    def _finish_scheduled_step(self) -> None:
        """Advance the schedule after a step, unless the step was an AMP overflow (a no-op)."""
        found_inf = self._get_auxiliary_var("found_inf")
        # The optimisation pass has turned a dygraph found_inf tensor into a bool.
        if found_inf is not None and bool(found_inf.item() if is_tensor(found_inf) else found_inf):
            return
        self._weight_decay_schedule.step()
        self._sync_weight_decay()

    def _refuse_schedule_outside_dygraph(self) -> None:
        if self._weight_decay_schedule is not None and not framework.in_dygraph_mode():
            raise NotImplementedError(
                "AdamWDL: a WeightDecaySchedule as `weight_decay` needs dygraph execution "
                "(eager, or paddle.jit.to_static, whose optimizer step runs eagerly): a static "
                "program fixes the weight-decay coefficient when it is built. Give a float "
                "`weight_decay` for static programs."
            )

    def step(self) -> None:
        grouped = bool(self._parameter_list) and isinstance(self._parameter_list[0], dict)
        if not grouped or self._weight_decay_schedule is None:
            # Without groups, _apply_optimize (one call per step) reads and
            # advances the schedule itself.
            return super().step()
        # Groups make one _apply_optimize call each: the schedule around them all.
        self._sync_weight_decay()
        super().step()
        self._finish_scheduled_step()
        return None

    def minimize(self, loss: Tensor, startup_program: Any = None, parameters: Any = None, no_grad_set: Any = None) -> Any:
        """As ``paddle.optimizer.AdamW.minimize``; refused in a static program with a
        weight-decay schedule (``NotImplementedError``), before anything is added to it."""
        self._refuse_schedule_outside_dygraph()
        return super().minimize(loss, startup_program=startup_program, parameters=parameters, no_grad_set=no_grad_set)

    def _apply_optimize(self, loss: Any, startup_program: Any, params_grads: Any, param_group_idx: int = 0) -> Any:
        # One call per step without parameter groups, whoever makes it
        # (step(), minimize(), fleet's sharding optimizer); groups call it once
        # per group, and step() handles the schedule around them.
        if self._weight_decay_schedule is None or isinstance(params_grads, dict):
            return super()._apply_optimize(loss, startup_program, params_grads, param_group_idx=param_group_idx)
        self._refuse_schedule_outside_dygraph()
        self._sync_weight_decay()
        result = super()._apply_optimize(loss, startup_program, params_grads, param_group_idx=param_group_idx)
        self._finish_scheduled_step()
        return result

    def state_dict(self) -> dict[str, Any]:
        """``paddle.optimizer.AdamW``'s state dict, plus ``"weight_decay_schedule"``
        (the schedule's :meth:`~paddle_llrd.WeightDecaySchedule.state_dict`) when
        ``weight_decay`` is a schedule."""
        state = super().state_dict()
        if self._weight_decay_schedule is not None:
            state[WEIGHT_DECAY_SCHEDULE_KEY] = self._weight_decay_schedule.state_dict()
        return state

    def set_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Paddle's ``set_state_dict``, and the schedule's position from ``"weight_decay_schedule"``
        (a ``UserWarning`` without it; a bad entry changes nothing)."""
        schedule_state = state_dict.get(WEIGHT_DECAY_SCHEDULE_KEY)
        if schedule_state is not None:
            state_dict = {k: v for k, v in state_dict.items() if k != WEIGHT_DECAY_SCHEDULE_KEY}
        schedule = self._weight_decay_schedule
        if schedule is None:
            super().set_state_dict(state_dict)
            return
        if schedule_state is None:
            warnings.warn(
                f"AdamWDL.set_state_dict: the checkpoint has no {WEIGHT_DECAY_SCHEDULE_KEY!r} "
                f"entry; the weight-decay schedule stays at step {schedule.current_step}.",
                UserWarning,
                stacklevel=3,
            )
            super().set_state_dict(state_dict)
            return
        previous_step = schedule.current_step
        schedule.set_state_dict(schedule_state)  # checks the entry before changing anything
        try:
            super().set_state_dict(state_dict)
        except BaseException:
            schedule.current_step = previous_step
            raise
        self._sync_weight_decay()
