"""``reduce_lr_on_plateau`` in a Trainer: stepped on the evaluation metric.

Both frameworks step ``trainer.lr_scheduler`` without an argument after
every optimizer step, which a ``ReduceOnPlateau`` cannot take. An
``LLRDTrainer`` therefore holds the plateau in a
:class:`MetricSteppedSchedule`, whose step without a metric does nothing, and
:class:`PlateauCallback` steps it with ``metric_for_best_model`` after each
evaluation during training (what Hugging Face's ``Trainer`` does).
"""
from __future__ import annotations

import warnings
from typing import Any, Dict, Mapping, Optional

from paddle.optimizer.lr import LRScheduler, ReduceOnPlateau

from paddle_llrd.integrations.training_arguments import plain_name
from paddle_llrd.schedules.optimizer_link import mark_followed
from paddle_llrd.warning_classes import TrainerSettingWarning, stacklevel_outside_package

__all__ = ["MetricSteppedSchedule", "PlateauCallback", "check_plateau", "metric_key"]


def metric_key(args: Any) -> str:
    """The key of ``metric_for_best_model`` in the metrics of ``evaluate`` (default: the eval loss).

    Examples:
        >>> from types import SimpleNamespace
        >>> [metric_key(SimpleNamespace(metric_for_best_model=name)) for name in (None, "accuracy")]
        ['eval_loss', 'eval_accuracy']
    """
    metric = getattr(args, "metric_for_best_model", None) or "loss"
    return metric if metric.startswith("eval_") else f"eval_{metric}"


def check_plateau(args: Any, plateau: ReduceOnPlateau) -> None:
    """A plateau follows the evaluation metric: its ``mode`` must agree with
    ``greater_is_better`` (``ValueError``), and training should evaluate
    (:class:`~paddle_llrd.TrainerSettingWarning` when ``evaluation_strategy`` is ``"no"``)."""
    greater_is_better = getattr(args, "greater_is_better", None)
    if greater_is_better is None:
        greater_is_better = not metric_key(args).endswith("loss")  # the frameworks' rule
    name = plain_name(args.lr_scheduler_type)
    if (plateau.mode == "max") != bool(greater_is_better):
        raise ValueError(
            f"lr_scheduler_type={name!r} lowers the lr when "
            f"{metric_key(args)} (metric_for_best_model) stops {'rising' if plateau.mode == 'max' else 'falling'} "
            f"(mode={plateau.mode!r}) but greater_is_better={greater_is_better}: set lr_scheduler_kwargs "
            f"{{'mode': {'max' if greater_is_better else 'min'!r}}} or greater_is_better"
        )
    if plain_name(getattr(args, "evaluation_strategy", getattr(args, "eval_strategy", "no"))) == "no":
        warnings.warn(
            f"lr_scheduler_type={name!r} is stepped on {metric_key(args)} after "
            "each evaluation, but evaluation_strategy is 'no': the lr stays at learning_rate unless you call "
            "evaluate() during training",
            TrainerSettingWarning,
            stacklevel=stacklevel_outside_package(),
        )


class MetricSteppedSchedule(LRScheduler):
    """The Trainer's lr schedule over ``plateau``: the lr, ``state_dict`` and
    ``set_state_dict`` are the plateau's (checkpoints hold its entries);
    ``step()`` without a metric, the Trainer's call after every optimizer
    step, does nothing; ``step(metric)`` steps the plateau.

    Args:
        plateau: a ``paddle.optimizer.lr.ReduceOnPlateau`` (or a subclass).

    Examples:
        >>> from paddle.optimizer.lr import ReduceOnPlateau
        >>> schedule = MetricSteppedSchedule(ReduceOnPlateau(1.0, factor=0.5, patience=0))
        >>> schedule.step()  # after an optimizer step: the lr stays
        >>> schedule.step(1.0)
        >>> schedule.step(2.0)  # no improvement: halved
        >>> schedule(), schedule.plateau.last_lr
        (0.5, 0.5)
    """

    def __init__(self, plateau: ReduceOnPlateau) -> None:
        self.plateau = plateau
        mark_followed(plateau)  # the optimizer reads this schedule, which holds the plateau's lr
        super().__init__(plateau.last_lr, last_epoch=plateau.last_epoch)

    def step(self, metrics: Any = None, epoch: Optional[int] = None) -> None:
        if metrics is None:
            return
        self.plateau.step(metrics, epoch)
        self._follow_plateau()

    def get_lr(self) -> float:
        return self.plateau.last_lr

    def state_dict(self) -> Dict[str, Any]:
        return self.plateau.state_dict()

    def set_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        self.plateau.set_state_dict(state_dict)
        self._follow_plateau()

    set_dict = set_state_dict

    def _follow_plateau(self) -> None:
        self.last_lr = self.plateau.last_lr
        self.last_epoch = self.plateau.last_epoch


class PlateauCallback:
    """Trainer callback: after each evaluation during training, steps a
    :class:`MetricSteppedSchedule` schedule with ``metric_for_best_model``.

    Raises:
        ValueError: the evaluation did not give that metric.
    """

    def __init__(self) -> None:
        self.training = False

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.training = True

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.training = False

    def on_evaluate(
        self, args: Any, state: Any, control: Any, metrics: Optional[Dict[str, float]] = None,
        lr_scheduler: Any = None, **kwargs: Any,
    ) -> None:
        if not (self.training and isinstance(lr_scheduler, MetricSteppedSchedule)):
            return
        key = metric_key(args)
        metrics = metrics or {}
        if key not in metrics:
            raise ValueError(
                f"lr_scheduler_type={plain_name(args.lr_scheduler_type)!r} is stepped on {key} "
                f"(metric_for_best_model), which the evaluation did not give; it gave {sorted(metrics)}"
            )
        lr_scheduler.step(metrics[key])
