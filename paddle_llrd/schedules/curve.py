"""A schedule's lr step by step, read from a real scheduler as an optimizer sees it.

The docstring examples of the schedules print curves with :func:`lr_curve`;
the table and plots of ``python -m paddle_llrd schedules``
(:mod:`paddle_llrd.cli.schedule_table`) read theirs with it too.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Union

from paddle.optimizer.lr import LRScheduler, ReduceOnPlateau

__all__ = ["lr_curve"]


def lr_curve(
    schedule: Union[LRScheduler, Callable[[], LRScheduler]],
    last_step: int,
    metric: Optional[Callable[[int], float]] = None,
) -> List[float]:
    """The lr at steps ``0..last_step``, advancing the scheduler with ``step()`` as in training.

    Args:
        schedule: A scheduler (stepped in place) or a function building a fresh one.
        last_step (int): The last step whose lr is read.
        metric (callable, optional): For a :class:`~paddle.optimizer.lr.ReduceOnPlateau`,
            which is stepped with ``metric(step)`` instead.

    Raises:
        TypeError: a ``ReduceOnPlateau`` without ``metric``.

    Examples:
        >>> from paddle_llrd import LinearDecayWithWarmup
        >>> lr_curve(LinearDecayWithWarmup(1.0, total_steps=4, warmup=2), 5)
        [0.0, 0.5, 1.0, 0.5, 0.0, 0.0]
    """
    scheduler = schedule if isinstance(schedule, LRScheduler) else schedule()
    if isinstance(scheduler, ReduceOnPlateau) and metric is None:
        raise TypeError("A ReduceOnPlateau is stepped with a metric: pass `metric`, a function of the step.")
    values = [scheduler()]
    for step in range(last_step):
        if isinstance(scheduler, ReduceOnPlateau):
            scheduler.step(metric(step))
        else:
            scheduler.step()
        values.append(scheduler())
    return values
