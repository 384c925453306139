r"""The one rule of a warmup longer than training: accepted, with a :class:`~paddle_llrd.LongWarmupWarning`.

Every schedule with a warmup of :math:`W` steps that knows the training's
length :math:`T` calls :func:`warn_if_warmup_outlasts_training` once, after it
is built: the scheduler classes (``total_steps``), the ``get_*`` functions
(``num_training_steps``) and so :func:`~paddle_llrd.get_scheduler` and the
Trainers. PaddleNLP accepts :math:`W > T` and so does this package, with
PaddleNLP's values, but the lr is still climbing when training ends and drops
when the warmup ends, which is rarely what was meant. The schedules whose
decay stage must fit after the warmup (``"warmup_stable_decay"``, the
annealing schedules) refuse it instead (``ValueError``).

The warning names the call the user made: the class or function and its
arguments; inside :func:`~paddle_llrd.get_scheduler`, :func:`called_as`
gives ``get_scheduler('linear')`` as the owner.
"""
from __future__ import annotations

import contextlib
import warnings
from contextvars import ContextVar
from typing import Iterator, Optional

from ..warning_classes import LongWarmupWarning, stacklevel_outside_package

__all__ = ["called_as", "warn_if_warmup_outlasts_training"]

# The owner a long-warmup warning names while get_scheduler builds a built-in schedule.
_CALLER: ContextVar[Optional[str]] = ContextVar("paddle_llrd_schedule_caller", default=None)


@contextlib.contextmanager
def called_as(owner: str) -> Iterator[None]:
    """Inside, a long-warmup warning names ``owner`` (e.g. ``"get_scheduler('linear')"``) instead of the function.

    The argument names stay those of the ``get_*`` function, which are
    :func:`~paddle_llrd.get_scheduler`'s too (``num_warmup_steps``,
    ``num_training_steps``). Nested calls (a ``"sequential"`` schedule's
    stages) name their own.

    Examples:
        >>> import warnings
        >>> from paddle_llrd import get_linear_schedule_with_warmup
        >>> with called_as("my_trainer"), warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     _ = get_linear_schedule_with_warmup(1.0, 8, 4)
        >>> str(caught[0].message).split(":")[0]
        'my_trainer'
    """
    token = _CALLER.set(owner)
    try:
        yield
    finally:
        _CALLER.reset(token)


def warn_if_warmup_outlasts_training(
    warmup_steps: int, total_steps: int, owner: str, warmup_name: str = "warmup", total_name: str = "total_steps"
) -> None:
    """A :class:`~paddle_llrd.LongWarmupWarning` when ``warmup_steps > total_steps``, naming ``owner``'s arguments.

    The warning points at the first line outside the package (the user's
    call), and says at what share of the peak the last step trains.

    Args:
        warmup_steps (int): :math:`W`.
        total_steps (int): :math:`T`.
        owner (str): The class or function called (replaced by :func:`called_as`'s, when active).
        warmup_name, total_name (str): The names of :math:`W` and :math:`T` among ``owner``'s arguments.

    Examples:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     warn_if_warmup_outlasts_training(12, 8, "LinearDecayWithWarmup")
        >>> caught[0].category.__name__, str(caught[0].message)[:76]
        ('LongWarmupWarning', 'LinearDecayWithWarmup: the warmup (`warmup` = 12 steps) is longer than train')
    """
    if warmup_steps <= total_steps:
        return
    owner = _CALLER.get() or owner
    last = total_steps - 1
    warnings.warn(
        f"{owner}: the warmup (`{warmup_name}` = {warmup_steps} steps) is longer than training "
        f"(`{total_name}` = {total_steps}): the lr is still climbing when training ends (step {last} "
        f"trains at {last / warmup_steps:.3g} of the peak), then it drops when the warmup ends at step {warmup_steps}. "
        f"Accepted, as PaddleNLP accepts it; make `{warmup_name}` at most `{total_name}` unless that is "
        "what you want.",
        LongWarmupWarning,
        stacklevel=stacklevel_outside_package(),
    )
