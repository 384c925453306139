r"""Schedules by name: ``get_scheduler("cosine", ...)``, as PaddleNLP's Trainer calls it.

The names are the ``lr_scheduler_type`` strings of PaddleNLP's
``TrainingArguments``. Every schedule function takes ``learning_rate`` first
and returns a :class:`paddle.optimizer.lr.LambdaDecay` whose lr at step
:math:`s` is ``learning_rate * f(s)``, with :math:`W` = ``num_warmup_steps``,
:math:`T` = ``num_training_steps`` and the linear warmup
:math:`f(s) = s / \max(1, W)` for :math:`s < W`.

:func:`register_scheduler` adds a schedule under a new name;
:func:`get_scheduler` passes each schedule only the arguments it accepts.
"""
from __future__ import annotations

import enum
import inspect
from typing import Any, Callable, Dict, Optional, Union

from paddle.optimizer.lr import LambdaDecay, LRScheduler

from .schedulers import (
    ConstScheduleWithWarmup,
    LinearDecayWithWarmup,
    PolyDecayWithWarmup,
    _constant,
    _cosine_waves,
    _finite_real,
    _last_epoch,
    _learning_rate,
    _lr_lambda,
    _step_count,
)

__all__ = [
    "SchedulerType",
    "TYPE_TO_SCHEDULER_FUNCTION",
    "get_constant_schedule",
    "get_constant_schedule_with_warmup",
    "get_cosine_schedule_with_warmup",
    "get_linear_schedule_with_warmup",
    "get_polynomial_decay_schedule_with_warmup",
    "get_scheduler",
    "register_scheduler",
]


class SchedulerType(str, enum.Enum):
    """The built-in schedule names (PaddleNLP's ``lr_scheduler_type`` values).

    Examples:
        >>> from paddle_llrd import SchedulerType
        >>> SchedulerType("cosine") is SchedulerType.COSINE, SchedulerType.COSINE == "cosine"
        (True, True)
    """

    LINEAR = "linear"
    COSINE = "cosine"
    CONSTANT = "constant"
    CONSTANT_WITH_WARMUP = "constant_with_warmup"
    POLYNOMIAL = "polynomial"

    def __str__(self) -> str:
        return self.value


def get_linear_schedule_with_warmup(
    learning_rate: float, num_warmup_steps: int, num_training_steps: int, last_epoch: int = -1
) -> LambdaDecay:
    r"""Linear warmup, then linear decay to 0 at ``num_training_steps`` (``"linear"``).

    .. math:: f(s) = \max\!\left(0, \frac{T - s}{\max(1, T - W)}\right), \quad s \ge W

    Returns a :class:`~paddle_llrd.LinearDecayWithWarmup`.

    Examples:
        >>> from paddle_llrd import get_linear_schedule_with_warmup
        >>> scheduler = get_linear_schedule_with_warmup(0.1, num_warmup_steps=2, num_training_steps=10)
        >>> lrs = []
        >>> for _ in range(5):
        ...     lrs.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> lrs
        [0.0, 0.05, 0.1, 0.0875, 0.075]
    """
    warmup = _step_count(num_warmup_steps, "num_warmup_steps")
    total = _step_count(num_training_steps, "num_training_steps", minimum=1)
    return LinearDecayWithWarmup(learning_rate, total, warmup, last_epoch=last_epoch)


def get_cosine_schedule_with_warmup(
    learning_rate: float,
    num_warmup_steps: int,
    num_training_steps: int,
    num_cycles: float = 0.5,
    last_epoch: int = -1,
    min_lr: float = 0.0,
) -> LambdaDecay:
    r"""Linear warmup, then a cosine from ``learning_rate`` down to ``min_lr`` (``"cosine"``).

    With :math:`\eta` = ``learning_rate``, :math:`c` = ``num_cycles``,
    :math:`m = \eta_{\min} / \eta` and :math:`p = \min\!\left(1, \frac{s - W}{\max(1, T - W)}\right)`:

    .. math::

        f(s) = m + (1 - m) \max\!\left(0, \tfrac12 \left(1 + \cos(2 \pi c\, p)\right)\right), \quad s \ge W

    The default ``num_cycles=0.5`` is a half cosine reaching ``min_lr`` at
    :math:`T`. With ``min_lr=0`` the values are PaddleNLP's up to :math:`T`;
    after :math:`T` the value reached at :math:`T` is held (PaddleNLP's curve
    climbs back up).

    Args:
        learning_rate (float): The peak learning rate.
        num_warmup_steps (int): Warmup steps :math:`W`.
        num_training_steps (int): Training steps :math:`T`.
        num_cycles (float, optional): Number of cosine waves over the decay phase. Default: ``0.5``.
        last_epoch (int, optional): The last step already taken. Default: ``-1``.
        min_lr (float, optional): The floor, ``0 <= min_lr <= learning_rate``. Default: ``0.0``.

    Examples:
        >>> from paddle_llrd import get_cosine_schedule_with_warmup
        >>> scheduler = get_cosine_schedule_with_warmup(1.0, 2, 6, min_lr=0.2)
        >>> lrs = []
        >>> for _ in range(8):
        ...     lrs.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> lrs
        [0.0, 0.5, 1.0, 0.882843, 0.6, 0.317157, 0.2, 0.2]
    """
    learning_rate = _learning_rate(learning_rate)
    warmup = _step_count(num_warmup_steps, "num_warmup_steps")
    total = _step_count(num_training_steps, "num_training_steps", minimum=1)
    num_cycles = _finite_real(num_cycles, "num_cycles")
    if num_cycles < 0:
        raise ValueError(f"`num_cycles` must be >= 0, got {num_cycles!r}.")
    min_lr = _learning_rate(min_lr, "min_lr")
    if min_lr > learning_rate:
        raise ValueError(f"`min_lr` ({min_lr!r}) must be <= `learning_rate` ({learning_rate!r}).")
    floor = min_lr / learning_rate if learning_rate > 0 else 0.0
    lr_lambda = _lr_lambda(
        _cosine_waves, warmup, total_steps=total, num_cycles=num_cycles, floor=floor, hold_after_end=True
    )
    return LambdaDecay(learning_rate, lr_lambda, last_epoch=_last_epoch(last_epoch))


def get_constant_schedule(learning_rate: float, last_epoch: int = -1) -> LambdaDecay:
    r"""A constant ``learning_rate`` (``"constant"``): :math:`f(s) = 1`.

    Examples:
        >>> from paddle_llrd import get_constant_schedule
        >>> get_constant_schedule(0.3)()
        0.3
    """
    learning_rate = _learning_rate(learning_rate)
    return LambdaDecay(learning_rate, _lr_lambda(_constant, 0), last_epoch=_last_epoch(last_epoch))


def get_constant_schedule_with_warmup(
    learning_rate: float, num_warmup_steps: int, last_epoch: int = -1
) -> LambdaDecay:
    r"""Linear warmup, then constant (``"constant_with_warmup"``): :math:`f(s) = 1` for :math:`s \ge W`.

    Returns a :class:`~paddle_llrd.ConstScheduleWithWarmup`.

    Examples:
        >>> from paddle_llrd import get_constant_schedule_with_warmup
        >>> scheduler = get_constant_schedule_with_warmup(0.2, num_warmup_steps=4)
        >>> lrs = []
        >>> for _ in range(6):
        ...     lrs.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> lrs
        [0.0, 0.05, 0.1, 0.15, 0.2, 0.2]
    """
    warmup = _step_count(num_warmup_steps, "num_warmup_steps")
    return ConstScheduleWithWarmup(learning_rate, warmup, last_epoch=last_epoch)


def get_polynomial_decay_schedule_with_warmup(
    learning_rate: float,
    num_warmup_steps: int,
    num_training_steps: int,
    lr_end: float = 1e-7,
    power: float = 1.0,
    last_epoch: int = -1,
) -> LambdaDecay:
    r"""Linear warmup, then polynomial decay to ``lr_end`` (``"polynomial"``).

    .. math::

        f(s) = \frac{(\eta - \eta_{end}) \left(1 - \frac{s - W}{\max(1, T - W)}\right)^{power} + \eta_{end}}{\eta}
        \ (W \le s \le T), \qquad f(s) = \frac{\eta_{end}}{\eta}\ (s > T)

    ``lr_end >= learning_rate`` raises ``ValueError``. Returns a
    :class:`~paddle_llrd.PolyDecayWithWarmup`.

    Examples:
        >>> from paddle_llrd import get_polynomial_decay_schedule_with_warmup
        >>> scheduler = get_polynomial_decay_schedule_with_warmup(1.0, 0, 4, lr_end=0.2)
        >>> lrs = []
        >>> for _ in range(6):
        ...     lrs.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> lrs
        [1.0, 0.8, 0.6, 0.4, 0.2, 0.2]
    """
    warmup = _step_count(num_warmup_steps, "num_warmup_steps")
    total = _step_count(num_training_steps, "num_training_steps", minimum=1)
    return PolyDecayWithWarmup(learning_rate, total, warmup, lr_end=lr_end, power=power, last_epoch=last_epoch)


SchedulerFunction = Callable[..., LRScheduler]

class _ScheduleTable(dict):
    """Schedule name -> schedule function, as used by :func:`get_scheduler`.

    Built-in schedules are keyed by :class:`SchedulerType`, schedules added by
    :func:`register_scheduler` by their name (a plain ``dict`` otherwise; its
    own class exists so that the documentation shows this text).
    """


TYPE_TO_SCHEDULER_FUNCTION: Dict[Union[SchedulerType, str], SchedulerFunction] = _ScheduleTable({
    SchedulerType.LINEAR: get_linear_schedule_with_warmup,
    SchedulerType.COSINE: get_cosine_schedule_with_warmup,
    SchedulerType.CONSTANT: get_constant_schedule,
    SchedulerType.CONSTANT_WITH_WARMUP: get_constant_schedule_with_warmup,
    SchedulerType.POLYNOMIAL: get_polynomial_decay_schedule_with_warmup,
})

_BUILTIN_VALUES = frozenset(member.value for member in SchedulerType)


def _registry_key(name: Any) -> Union[SchedulerType, str]:
    """The dict key for ``name``: a :class:`SchedulerType` for built-in names, else the string.

    Any :class:`enum.Enum` with a string value is accepted, so PaddleNLP's own
    ``SchedulerType`` (which ``TrainingArguments`` stores) works too.
    """
    if isinstance(name, enum.Enum) and not isinstance(name, SchedulerType):
        name = name.value
    if not isinstance(name, str):
        raise TypeError(f"`name` must be a str or a SchedulerType, got {name!r} of type {type(name).__name__}.")
    if name in _BUILTIN_VALUES:
        return SchedulerType(name)
    return str(name)


def _valid_names() -> list:
    return [str(key) for key in TYPE_TO_SCHEDULER_FUNCTION]


def _lr_position_ok(signature: inspect.Signature) -> bool:
    """Whether the function can receive ``learning_rate`` as its first positional argument."""
    for parameter in signature.parameters.values():
        return parameter.kind in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.VAR_POSITIONAL,
        )
    return False


def register_scheduler(
    name: Union[str, SchedulerType], fn: SchedulerFunction, *, overwrite: bool = False
) -> SchedulerFunction:
    """Add the schedule function ``fn`` under ``name``, for :func:`get_scheduler`.

    ``fn`` is called as ``fn(learning_rate, **arguments)`` with those of
    ``num_warmup_steps``, ``num_training_steps``, ``num_cycles``, ``lr_end``,
    ``power``, ``min_lr`` and ``get_scheduler``'s extra keyword arguments that
    its signature accepts (all of them if it takes ``**kwargs``), and should
    return a :class:`paddle.optimizer.lr.LRScheduler`.

    Args:
        name (str|SchedulerType): The new name. Replacing an existing schedule
            (a built-in one included) needs ``overwrite=True``.
        fn (callable): The schedule function.
        overwrite (bool, optional): Replace an existing schedule. Default: ``False``.

    Returns:
        ``fn``, unchanged.

    Examples:
        >>> from paddle.optimizer.lr import LambdaDecay
        >>> from paddle_llrd import TYPE_TO_SCHEDULER_FUNCTION, get_scheduler, register_scheduler
        >>> def get_halving_schedule(learning_rate, num_warmup_steps, last_epoch=-1):
        ...     return LambdaDecay(learning_rate, lambda s: 0.5 ** (s // max(1, num_warmup_steps)), last_epoch)
        >>> _ = register_scheduler("halving", get_halving_schedule)
        >>> scheduler = get_scheduler("halving", 0.8, num_warmup_steps=2, num_training_steps=10)
        >>> lrs = []
        >>> for _ in range(5):
        ...     lrs.append(scheduler())
        ...     scheduler.step()
        >>> lrs
        [0.8, 0.8, 0.4, 0.4, 0.2]
        >>> del TYPE_TO_SCHEDULER_FUNCTION["halving"]
    """
    if not isinstance(overwrite, bool):
        raise TypeError(f"`overwrite` must be a bool, got {overwrite!r}.")
    key = _registry_key(name)
    if not key:
        raise ValueError("`name` must be a non-empty string.")
    if not callable(fn):
        raise TypeError(f"`fn` must be callable (a schedule function), got {fn!r}.")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"`fn` {fn!r} has no inspectable signature, so get_scheduler cannot call it.") from exc
    if not _lr_position_ok(signature):
        raise TypeError(
            f"`fn` {fn!r} must take the learning rate as its first positional argument, "
            f"its signature is {signature}."
        )
    if key in TYPE_TO_SCHEDULER_FUNCTION and not overwrite:
        kind = "built-in" if isinstance(key, SchedulerType) else "registered"
        raise ValueError(
            f"`name` {str(key)!r} is already a {kind} schedule; pass overwrite=True to replace it."
        )
    TYPE_TO_SCHEDULER_FUNCTION[key] = fn
    return fn


def get_scheduler(
    name: Union[str, SchedulerType],
    learning_rate: float,
    num_warmup_steps: Optional[int] = None,
    num_training_steps: Optional[int] = None,
    num_cycles: float = 0.5,
    lr_end: float = 1e-7,
    power: float = 1.0,
    min_lr: float = 0.0,
    **kwargs: Any,
) -> LRScheduler:
    """Build the schedule called ``name``, as PaddleNLP's ``Trainer.create_scheduler`` does.

    Each schedule gets only the arguments its function accepts, so
    ``num_cycles``/``lr_end``/``power``/``min_lr`` can always be passed.

    Args:
        name (str|SchedulerType): A :class:`SchedulerType` value or a name added
            by :func:`register_scheduler`.
        learning_rate (float): The peak learning rate.
        num_warmup_steps (int, optional): Warmup steps; required by every
            built-in schedule but ``"constant"``.
        num_training_steps (int, optional): Training steps; required by
            ``"linear"``, ``"cosine"`` and ``"polynomial"``.
        num_cycles (float, optional): Cosine waves (``"cosine"``). Default: ``0.5``.
        lr_end (float, optional): Final lr (``"polynomial"``). Default: ``1e-7``.
        power (float, optional): Polynomial power (``"polynomial"``). Default: ``1.0``.
        min_lr (float, optional): Cosine floor (``"cosine"``). Default: ``0.0``.
        **kwargs: Further arguments for the schedule function (``last_epoch``,
            or those of a registered schedule); one it does not accept raises
            ``TypeError``.

    Raises:
        ValueError: ``name`` is unknown (the message lists the valid names),
            or the schedule needs an argument that is ``None`` or missing.

    Examples:
        >>> from paddle_llrd import get_scheduler
        >>> scheduler = get_scheduler("linear", learning_rate=0.1, num_warmup_steps=2,
        ...                           num_training_steps=10, num_cycles=0.5, lr_end=1e-7, power=1.0)
        >>> lrs = []
        >>> for _ in range(5):
        ...     lrs.append(round(scheduler(), 6))
        ...     scheduler.step()
        >>> lrs
        [0.0, 0.05, 0.1, 0.0875, 0.075]
        >>> get_scheduler("cosine_annealing", 0.1)
        Traceback (most recent call last):
        ...
        ValueError: Unknown scheduler name 'cosine_annealing'; valid names are: linear, cosine, constant, ...
    """
    key = _registry_key(name)
    if key not in TYPE_TO_SCHEDULER_FUNCTION:
        raise ValueError(f"Unknown scheduler name {str(key)!r}; valid names are: {', '.join(_valid_names())}.")
    fn = TYPE_TO_SCHEDULER_FUNCTION[key]
    parameters = list(inspect.signature(fn).parameters.values())[1:]  # the first one takes learning_rate
    named = {
        p.name: p
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    takes_any_keyword = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)

    unknown = sorted(k for k in kwargs if k not in named)
    if unknown and not takes_any_keyword:
        raise TypeError(
            f"Scheduler {str(key)!r} does not accept the argument(s) {', '.join(unknown)}; "
            f"it takes: {', '.join(named) or 'nothing besides learning_rate'}."
        )
    offered: Dict[str, Any] = {
        "num_warmup_steps": num_warmup_steps,
        "num_training_steps": num_training_steps,
        "num_cycles": num_cycles,
        "lr_end": lr_end,
        "power": power,
        "min_lr": min_lr,
        **kwargs,
    }
    arguments = {}
    for arg_name, value in offered.items():
        if value is None:
            continue  # leave the function's own default, or report it missing below
        if arg_name in named or takes_any_keyword:
            arguments[arg_name] = value
    for parameter in named.values():
        if parameter.default is inspect.Parameter.empty and parameter.name not in arguments:
            raise ValueError(
                f"Scheduler {str(key)!r} requires `{parameter.name}`, please provide that argument."
            )
    return fn(learning_rate, **arguments)
