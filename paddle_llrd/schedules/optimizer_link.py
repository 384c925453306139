"""A scheduler and the optimizer that follows it.

A Paddle optimizer follows the scheduler it was given as ``learning_rate``
(or with ``optimizer.set_lr_scheduler``), reading its lr at every step; an
optimizer given a float keeps that float, whatever a scheduler built beside
it does. Hugging Face's habit is the other way round: the scheduler is built
from the optimizer (``get_scheduler(name, optimizer=optimizer, ...)``) and
drives it. Both ways work here:

* :func:`optimizer_of` and :func:`peak_lr_of` read Hugging Face's call:
  :func:`~paddle_llrd.get_scheduler` builds the schedule from the optimizer's
  learning rate and attaches it with ``optimizer.set_lr_scheduler`` (Paddle
  3.0 and later), so ``optimizer.step(); lr_scheduler.step()`` trains with
  the schedule's lr, as in Hugging Face's loop.
* :class:`FollowedScheduler`, mixed into every scheduler of the package,
  says so once (:class:`~paddle_llrd.DetachedSchedulerWarning`) when it is
  stepped twice but no optimizer follows it: nothing has read its lr and no
  optimizer holds it.

Examples:
    >>> import paddle
    >>> from paddle_llrd import get_scheduler
    >>> model = paddle.nn.Linear(2, 2)
    >>> optimizer = paddle.optimizer.AdamW(learning_rate=0.1,
    ...                                    parameters=model.parameters())
    >>> lr_scheduler = get_scheduler("linear", optimizer=optimizer,
    ...                              num_warmup_steps=2, num_training_steps=4)
    >>> lrs = []
    >>> for _ in range(4):
    ...     model(paddle.ones([1, 2])).sum().backward()
    ...     lrs.append(optimizer.get_lr())
    ...     optimizer.step()
    ...     lr_scheduler.step()
    ...     optimizer.clear_grad()
    >>> lrs
    [0.0, 0.05, 0.1, 0.05]
"""
from __future__ import annotations

import gc
import warnings
from typing import Any, List, Optional

from paddle.optimizer.lr import LRScheduler

from ..warning_classes import DetachedSchedulerWarning, stacklevel_outside_package

__all__ = ["FollowedScheduler", "follows", "mark_followed", "optimizer_of", "peak_lr_of"]


def _is_optimizer(value: Any) -> bool:
    """Whether ``value`` can follow a scheduler: a Paddle optimizer, or a wrapper that hands the calls on (fleet's)."""
    return callable(getattr(value, "set_lr_scheduler", None)) and callable(getattr(value, "get_lr", None))


def optimizer_of(learning_rate: Any, optimizer: Any) -> Optional[Any]:
    """The optimizer of a :func:`~paddle_llrd.get_scheduler` call, or ``None`` for PaddleNLP's call.

    Hugging Face's call passes it as ``optimizer=`` or positionally, where
    PaddleNLP's call passes ``learning_rate``; both are taken.

    Raises:
        TypeError: ``optimizer`` is not an optimizer, or an optimizer is given both ways.

    Examples:
        >>> import paddle
        >>> optimizer = paddle.optimizer.SGD(learning_rate=0.1, parameters=paddle.nn.Linear(2, 2).parameters())
        >>> optimizer_of(optimizer, None) is optimizer, optimizer_of(0.1, None)
        (True, None)
    """
    if optimizer is not None and not _is_optimizer(optimizer):
        raise TypeError(
            f"`optimizer` must be a paddle.optimizer.Optimizer (it gets the schedule with set_lr_scheduler), "
            f"got {type(optimizer).__name__}."
        )
    if _is_optimizer(learning_rate):
        if optimizer is not None:
            raise TypeError(
                "get_scheduler got an optimizer both in `learning_rate`'s place and as `optimizer`; pass it once, "
                "as get_scheduler(name, optimizer=optimizer, ...)."
            )
        return learning_rate
    return optimizer


# Where a Paddle optimizer keeps its learning rate, a float or the scheduler it follows: ``set_lr_scheduler`` sets
# it and Paddle has no public getter. Read by follows() and _held_by_an_optimizer() only.
_PADDLE_LR_ATTRIBUTE = "_learning_rate"


def follows(optimizer: Any) -> Optional[LRScheduler]:
    """The scheduler ``optimizer`` follows, or ``None`` when its learning rate is a number."""
    learning_rate = getattr(optimizer, _PADDLE_LR_ATTRIBUTE, None)
    return learning_rate if isinstance(learning_rate, LRScheduler) else None


def peak_lr_of(optimizer: Any) -> float:
    """The peak learning rate Hugging Face's call builds a schedule from: the optimizer's own.

    The optimizer's float ``learning_rate``; for an optimizer that already
    follows a scheduler, that scheduler's ``base_lr`` (the lr it was built
    from, as torch's ``initial_lr``), not its current value, which a warmup
    may have at 0: calling ``get_scheduler`` again builds the same schedule.

    Examples:
        >>> import paddle
        >>> from paddle_llrd import get_scheduler
        >>> optimizer = paddle.optimizer.SGD(learning_rate=0.1, parameters=paddle.nn.Linear(2, 2).parameters())
        >>> _ = get_scheduler("linear", optimizer=optimizer, num_warmup_steps=10, num_training_steps=20)
        >>> optimizer.get_lr(), peak_lr_of(optimizer)
        (0.0, 0.1)
    """
    followed = follows(optimizer)
    return float(followed.base_lr) if followed is not None else float(optimizer.get_lr())


def _held_by_an_optimizer(scheduler: LRScheduler) -> bool:
    """Whether an object holds ``scheduler`` as its learning rate, as a Paddle optimizer does.

    Asked once per scheduler, at its second step that nothing had read: a
    user who steps a scheduler ahead before the first ``optimizer.step()``
    (a resumed run) is followed all the same.
    """
    for holder in gc.get_referrers(scheduler):
        try:  # an instance's attributes are its dict, or (Python 3.11's inline values) the instance itself
            held = holder.get(_PADDLE_LR_ATTRIBUTE) if isinstance(holder, dict) else follows(holder)
        except Exception:  # an object whose attribute lookup raises holds no learning rate
            continue
        if held is scheduler:
            return True
    return False


class FollowedScheduler:
    """Mixed into every scheduler of the package, before Paddle's class: a word when no optimizer follows it.

    An optimizer reads its scheduler's lr by calling it (``scheduler()``) at
    every step. A scheduler stepped twice although nothing has read it since
    it was built, and that no optimizer holds, gives a
    :class:`~paddle_llrd.DetachedSchedulerWarning` once, naming the ways to
    attach it. Reading ``scheduler()`` counts as following it (as
    :func:`~paddle_llrd.schedules.curve.lr_curve` does); reading
    ``last_lr`` does not.

    It also gives torch's and Hugging Face's ``get_last_lr()``.
    """

    # None while Paddle's constructor takes its first step; then the steps taken with nothing reading the lr.
    _steps_not_followed: Optional[int] = None
    _followed = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._steps_not_followed = 0

    def __call__(self) -> float:
        self._followed = True
        return super().__call__()

    def step(self, *args: Any, **kwargs: Any) -> None:
        super().step(*args, **kwargs)
        if self._followed or self._steps_not_followed is None:
            return
        self._steps_not_followed += 1
        if self._steps_not_followed != 2:
            return  # a loop may step before its first read (torch's order); past 2, it warned already
        if _held_by_an_optimizer(self):
            self._followed = True
            return
        # the user's class, or the first public scheduler class it derives from (LambdaDecay for get_cosine_...)
        name = next(cls.__name__ for cls in type(self).__mro__
                    if issubclass(cls, LRScheduler) and not cls.__name__.startswith("_"))
        warnings.warn(
            f"{name} was stepped, but no optimizer follows it (nothing has read its lr and no optimizer holds it): "
            "an optimizer given a float learning_rate keeps that float. Pass the scheduler as the optimizer's "
            "learning_rate (paddle.optimizer.AdamW(learning_rate=scheduler, ...)), attach it with "
            "optimizer.set_lr_scheduler(scheduler), or build it with get_scheduler(name, optimizer=optimizer, ...).",
            DetachedSchedulerWarning,
            stacklevel=stacklevel_outside_package(),
        )

    def get_last_lr(self) -> List[float]:
        """The lr of the current step, as torch's and Hugging Face's ``get_last_lr()`` give it: a list.

        One entry: a Paddle optimizer has one learning rate, which a parameter
        group's ``learning_rate`` scales.
        """
        return [self.last_lr]


def mark_followed(scheduler: LRScheduler) -> None:
    """Record that something other than an optimizer follows ``scheduler`` (a :class:`~paddle_llrd.SequentialSchedule` its stages)."""
    if isinstance(scheduler, FollowedScheduler):
        scheduler._followed = True
