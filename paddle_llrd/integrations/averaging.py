"""The EMA of the weights in a Trainer: what it is built from, when it is updated and what is evaluated with it.

:func:`trainer_ema` builds it from the ``ema_*`` fields; :class:`EMACallback`
starts the average when training begins (warning when it cannot fit the run,
:func:`warn_if_longer_than_the_run`) and updates it after each optimizer step
that changed the weights; :func:`evaluates_the_average` is the rule by which
``LLRDTrainer.evaluation_loop`` evaluates the averaged weights beside the
trained ones.
"""
from __future__ import annotations

import warnings
from typing import Any, Optional

from paddle_llrd.integrations.training_arguments import check_ema_decay
from paddle_llrd.optim.ema import ExponentialMovingAverage, ema_horizon
from paddle_llrd.warning_classes import EMAHorizonWarning, stacklevel_outside_package

__all__ = [
    "EMA_EVALUATION",
    "EVALUATION",
    "EMACallback",
    "evaluates_the_average",
    "step_changed_weights",
    "trainer_ema",
    "warn_if_longer_than_the_run",
]

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


def trainer_ema(args: Any, model: Any) -> Optional[ExponentialMovingAverage]:
    """The EMA of a Trainer's ``model`` from the ``TrainingArguments``:
    ``None`` when ``ema_decay`` is 0 (or absent), else an
    :class:`~paddle_llrd.ExponentialMovingAverage` of decay ``ema_decay``,
    with timm's warm-up of power ``ema_warmup_power`` when ``ema_warmup``.

    Examples:
        >>> import paddle
        >>> from types import SimpleNamespace
        >>> ema = trainer_ema(SimpleNamespace(ema_decay=0.999, ema_warmup=True, ema_warmup_power=0.75),
        ...                   paddle.nn.Linear(2, 2))
        >>> ema.decay, ema.warmup, ema.warmup_style, ema.warmup_power
        (0.999, True, 'timm', 0.75)
    """
    decay = check_ema_decay(getattr(args, "ema_decay", 0.0))
    if decay == 0.0:
        return None
    return ExponentialMovingAverage(model, decay=decay, warmup=bool(getattr(args, "ema_warmup", False)),
                                    warmup_style="timm", warmup_power=getattr(args, "ema_warmup_power", 2.0 / 3.0))


def warn_if_longer_than_the_run(ema: ExponentialMovingAverage, planned_updates: int) -> None:
    """An :class:`~paddle_llrd.EMAHorizonWarning` naming ``ema_decay`` when
    the average, without warm-up, covers more updates (its horizon
    ``1 / (1 - ema_decay)``) than the run plans: it would end close to the
    initial weights. A run of unknown length (``planned_updates <= 0``) is
    not judged."""
    if ema.warmup or planned_updates <= 0:
        return
    horizon = ema_horizon(ema.decay)
    if horizon > planned_updates:
        warnings.warn(
            f"ema_decay={ema.decay} averages over about {horizon:.0f} updates (1 / (1 - ema_decay)), more than "
            f"the {planned_updates} steps this run plans: the average would end close to the initial weights "
            f"(their share {ema.decay ** planned_updates:.2f}). Set ema_warmup: true (timm's warm-up) or an "
            f"ema_decay of at most {1 - 1 / planned_updates:.3g}",
            EMAHorizonWarning,
            stacklevel=stacklevel_outside_package(),
        )


class EMACallback:
    """Trainer callback: ``ema.register()`` when training begins (after the
    framework has loaded a resumed checkpoint's weights, and with
    :func:`warn_if_longer_than_the_run` for the run's ``max_steps``),
    ``ema.update()`` after each optimizer step that changed the weights
    (:func:`step_changed_weights`)."""

    def __init__(self, ema: ExponentialMovingAverage) -> None:
        self.ema = ema

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        warn_if_longer_than_the_run(self.ema, int(getattr(state, "max_steps", 0) or 0))
        self.ema.register()

    def on_optimizer_end(self, args: Any, state: Any, control: Any, scaler: Any = None, **kwargs: Any) -> None:
        if self.ema.registered and step_changed_weights(args, scaler):
            self.ema.update()
