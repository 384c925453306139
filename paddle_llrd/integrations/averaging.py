"""The EMA of the weights in a Trainer: when it is updated and what is evaluated with it.

:class:`EMACallback` starts the average when training begins and updates it
after each optimizer step that changed the weights; :func:`evaluates_the_average`
is the rule by which ``LLRDTrainer.evaluation_loop`` evaluates the averaged
weights beside the trained ones.
"""
from __future__ import annotations

from typing import Any, Optional

from paddle_llrd.optim.ema import ExponentialMovingAverage

__all__ = ["EMA_EVALUATION", "EVALUATION", "EMACallback", "evaluates_the_average", "step_changed_weights"]

#: The ``description`` both frameworks' ``evaluate`` gives ``evaluation_loop`` (``predict`` gives another).
EVALUATION = "Evaluation"
#: The ``description`` of the second loop, over the averaged weights.
EMA_EVALUATION = "Evaluation of the EMA weights"


def step_changed_weights(args: Any, scaler: Any) -> bool:
    """Whether the optimizer step the Trainer just took changed the weights:
    not with PaddleFormers' ``freeze_training``, nor after an AMP step whose
    ``scaler`` found inf/nan (the update was skipped).

    Examples:
        >>> from types import SimpleNamespace
        >>> step_changed_weights(SimpleNamespace(), None), step_changed_weights(
        ...     SimpleNamespace(), SimpleNamespace(_cache_found_inf=True))
        (True, False)
    """
    if getattr(args, "freeze_training", False):
        return False
    if scaler is None:
        return True
    # Paddle 2.6 spelled the flag "founf".
    found_inf = getattr(scaler, "_cache_found_inf", getattr(scaler, "_cache_founf_inf", False))
    return not bool(found_inf)


def evaluates_the_average(ema: Optional[ExponentialMovingAverage], args: Any, description: str) -> bool:
    """Whether the ``evaluation_loop`` with ``description`` also runs over the
    averaged weights: in ``evaluate`` (:data:`EVALUATION`), with a registered
    EMA whose weights are not already applied, while ``ema_eval`` is on."""
    return (description == EVALUATION and ema is not None and ema.registered and not ema.applied
            and getattr(args, "ema_eval", True))


class EMACallback:
    """Trainer callback: ``ema.register()`` when training begins (after the
    framework has loaded a resumed checkpoint's weights), ``ema.update()``
    after each optimizer step that changed the weights (:func:`step_changed_weights`)."""

    def __init__(self, ema: ExponentialMovingAverage) -> None:
        self.ema = ema

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.ema.register()

    def on_optimizer_end(self, args: Any, state: Any, control: Any, scaler: Any = None, **kwargs: Any) -> None:
        if self.ema.registered and step_changed_weights(args, scaler):
            self.ema.update()
