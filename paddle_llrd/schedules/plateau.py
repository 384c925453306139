r"""Lowering the lr when a metric stops improving: Paddle's ``ReduceOnPlateau``, checked.

:class:`ReduceOnPlateauSchedule` is a :class:`paddle.optimizer.lr.ReduceOnPlateau`
(so ``isinstance(scheduler, paddle.optimizer.lr.ReduceOnPlateau)`` holds and
the numbers are Paddle's), whose arguments are checked with errors that name
them and whose ``set_state_dict`` checks every entry before it changes
anything. ``get_scheduler("reduce_lr_on_plateau", ...)`` returns one.

It is stepped with the metric, ``scheduler.step(metric)``, not once per
optimizer step: after ``patience + 1`` calls in a row without an improvement
(``metric < best * (1 - threshold)`` in ``"min"`` mode with the default
``"rel"`` threshold) the lr becomes ``max(lr * factor, min_lr)``, then
``cooldown`` calls are not counted. As with every ``LRScheduler``, layer-wise
ratios of :class:`~paddle_llrd.AdamWDL` multiply the lr it gives.
"""
from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any, Optional

from paddle.optimizer.lr import ReduceOnPlateau

from ..checks import checked_choice, checked_finite, checked_non_negative, checked_step_index
from .optimizer_link import FollowedScheduler
from .schedule_checks import checked_step_count

__all__ = ["ReduceOnPlateauSchedule", "get_reduce_on_plateau_schedule"]


class ReduceOnPlateauSchedule(FollowedScheduler, ReduceOnPlateau):
    r"""Paddle's :class:`~paddle.optimizer.lr.ReduceOnPlateau` with checked arguments and resume.

    Call ``scheduler.step(metric)`` after each evaluation (or each step, with
    the loss). With :math:`b` the best metric so far, a call *improves* when

    ============  =========================  ======================
    ``mode``      ``threshold_mode="rel"``   ``threshold_mode="abs"``
    ============  =========================  ======================
    ``"min"``     :math:`m < b (1 - t)`      :math:`m < b - t`
    ``"max"``     :math:`m > b (1 + t)`      :math:`m > b + t`
    ============  =========================  ======================

    and each call that does not (outside a cooldown) counts as bad. When the
    bad calls in a row exceed ``patience``, the lr becomes
    :math:`\max(\mathrm{lr} \cdot \mathrm{factor}, \mathrm{min\_lr})` (unless that
    lowers it by ``epsilon`` or less), the count restarts and the next
    ``cooldown`` calls are skipped.

    Args:
        learning_rate (float): The starting lr, ``>= 0``.
        mode (str, optional): ``"min"`` (a loss) or ``"max"`` (an accuracy). Default: ``"min"``.
        factor (float, optional): The lr's multiplier at a reduction, in ``[0, 1)``. Default: ``0.1``.
        patience (int, optional): Bad calls tolerated before a reduction, ``>= 0``. Default: ``10``.
        threshold (float, optional): The least change that counts as an improvement, ``>= 0``. Default: ``1e-4``.
        threshold_mode (str, optional): ``"rel"`` or ``"abs"``. Default: ``"rel"``.
        cooldown (int, optional): Calls skipped after a reduction, ``>= 0``. Default: ``0``.
        min_lr (float, optional): The floor, ``0 <= min_lr <= learning_rate``. Default: ``0.0``.
        epsilon (float, optional): A reduction by ``epsilon`` or less is not made, ``>= 0``. Default: ``1e-8``.
        verbose (bool, optional): Print the lr at each reduction. Default: ``False``.

    Examples:
        >>> import paddle
        >>> from paddle_llrd.schedules.plateau import ReduceOnPlateauSchedule
        >>> scheduler = ReduceOnPlateauSchedule(1.0, factor=0.5, patience=1)
        >>> lrs = []
        >>> for loss in [3.0, 2.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0]:
        ...     scheduler.step(loss)
        ...     lrs.append(scheduler())
        >>> lrs
        [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25]
        >>> isinstance(scheduler, paddle.optimizer.lr.ReduceOnPlateau)
        True
    """

    def __init__(
        self,
        learning_rate: float,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr: float = 0.0,
        epsilon: float = 1e-8,
        verbose: bool = False,
    ) -> None:
        learning_rate = checked_non_negative(learning_rate, "learning_rate")
        mode = checked_choice(mode, "mode", ("min", "max"))
        factor = checked_finite(factor, "factor")
        if not 0.0 <= factor < 1.0:
            raise ValueError(f"`factor` must lie in [0, 1) (the lr's multiplier at a reduction), got {factor!r}.")
        patience = checked_step_count(patience, "patience")
        threshold = checked_non_negative(threshold, "threshold")
        threshold_mode = checked_choice(threshold_mode, "threshold_mode", ("rel", "abs"))
        cooldown = checked_step_count(cooldown, "cooldown")
        min_lr = checked_non_negative(min_lr, "min_lr")
        if min_lr > learning_rate:
            raise ValueError(f"`min_lr` ({min_lr!r}) must be <= `learning_rate` ({learning_rate!r}).")
        epsilon = checked_non_negative(epsilon, "epsilon")
        if not isinstance(verbose, bool):
            raise TypeError(f"`verbose` must be a bool, got {verbose!r}.")
        super().__init__(
            learning_rate,
            mode=mode,
            factor=factor,
            patience=patience,
            threshold=threshold,
            threshold_mode=threshold_mode,
            cooldown=cooldown,
            min_lr=min_lr,
            epsilon=epsilon,
            verbose=verbose,
        )

    def step(self, metrics: Any, epoch: Optional[int] = None) -> None:
        """Count ``metrics`` (see the class docstring); ``epoch``, when given, is the step to move to (an int >= 0).

        Raises:
            TypeError: ``epoch`` is not an int.
            ValueError: ``epoch`` is negative.
        """
        super().step(metrics, None if epoch is None else checked_step_index(epoch, "epoch"))

    def set_state_dict(self, state_dict: Mapping) -> None:
        """Resume from a :meth:`state_dict`; every entry is checked before any is set.

        Raises:
            TypeError: ``state_dict`` is not a mapping, or an entry has the wrong type.
            KeyError: an entry of :meth:`state_dict` is missing.
            ValueError: an entry is out of range.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(
                f"`state_dict` must be a mapping from the scheduler's state_dict(), got {type(state_dict).__name__}."
            )
        self.state_keys()
        missing = [key for key in self.keys if key not in state_dict]
        if missing:
            raise KeyError(f"`state_dict` lacks {', '.join(f'`{key}`' for key in missing)}; it needs {self.keys}.")
        best = state_dict["best"]
        if best is not None and (isinstance(best, bool) or not isinstance(best, numbers.Real)):
            raise TypeError(f"`best` must be None (no metric yet) or a real number, got {best!r}.")
        checked = {
            "cooldown_counter": checked_step_count(state_dict["cooldown_counter"], "cooldown_counter"),
            "best": best,
            "num_bad_epochs": checked_step_count(state_dict["num_bad_epochs"], "num_bad_epochs"),
            "last_epoch": checked_step_index(state_dict["last_epoch"]),
            "last_lr": checked_non_negative(state_dict["last_lr"], "last_lr"),
        }
        super().set_state_dict(checked)

    set_dict = set_state_dict  # Paddle's alias would call the unchecked method


def get_reduce_on_plateau_schedule(
    learning_rate: float, mode: str = "min", factor: float = 0.1, patience: int = 10, threshold: float = 1e-4,
    threshold_mode: str = "rel", cooldown: int = 0, min_lr: float = 0.0, epsilon: float = 1e-8,
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
        >>> lrs = []
        >>> for loss in [1.0, 0.5, 0.6, 0.7]:
        ...     scheduler.step(loss)
        ...     lrs.append(scheduler())
        >>> lrs
        [0.1, 0.1, 0.05, 0.025]
    """
    if num_warmup_steps is not None and checked_step_count(num_warmup_steps, "num_warmup_steps") > 0:
        raise ValueError(
            f"`num_warmup_steps` is {num_warmup_steps}, but 'reduce_lr_on_plateau' has no warmup (its lr moves "
            "only with the metric): set the warmup to 0."
        )
    return ReduceOnPlateauSchedule(learning_rate, mode, factor, patience, threshold, threshold_mode, cooldown,
                                   min_lr, epsilon)
