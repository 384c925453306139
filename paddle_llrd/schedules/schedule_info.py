"""What a schedule function takes, read once from its signature: :class:`ScheduleInfo` and :class:`ScheduleOption`.

The registry (:mod:`.registry`) keeps one :class:`ScheduleInfo` per schedule
function; :func:`~paddle_llrd.get_scheduler` passes each schedule only the
options it takes, the Trainers check ``lr_scheduler_kwargs`` against them and
``python -m paddle_llrd schedules`` lists them.

Examples:
    >>> from paddle_llrd.schedules.schedule_info import ScheduleInfo
    >>> def get_halving_schedule(learning_rate, num_warmup_steps, factor: float = 0.5, last_epoch=-1):
    ...     ...
    >>> info = ScheduleInfo.of(get_halving_schedule)
    >>> list(info.options), info.options["factor"].types, info.warmup
    (['num_warmup_steps', 'factor', 'last_epoch'], (<class 'float'>,), True)
"""
from __future__ import annotations

import inspect
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Tuple, Union

from paddle.optimizer.lr import LRScheduler

__all__ = ["REQUIRED", "ScheduleInfo", "ScheduleOption", "SchedulerFunction"]

#: A schedule function: ``fn(learning_rate, **options) -> LRScheduler``.
SchedulerFunction = Callable[..., LRScheduler]


class _Required:
    """The default of an option the caller must give."""

    def __repr__(self) -> str:
        return "REQUIRED"


#: :attr:`ScheduleOption.default` of an option without a default.
REQUIRED: Any = _Required()


@dataclass(frozen=True)
class ScheduleOption:
    """One argument a schedule function takes besides ``learning_rate``.

    Attributes:
        name (str): The keyword.
        default: Its default, or :data:`REQUIRED`.
        types (tuple[type, ...]): The types its annotation names
            (``Optional[int]`` gives ``(int, NoneType)``, ``List[dict]``
            gives ``(list,)``); ``()`` when it has none that resolves.
    """

    name: str
    default: Any
    types: Tuple[type, ...]

    @property
    def required(self) -> bool:
        """Whether a caller must give it (it has no default)."""
        return self.default is REQUIRED


@dataclass(frozen=True)
class ScheduleInfo:
    """A registered schedule: its function and what it takes, read once from its signature.

    Attributes:
        function (callable): The schedule function.
        options (dict[str, ScheduleOption]): Its arguments after
            ``learning_rate``, in signature order (then ``lr_warmup_init``,
            see ``start_warmup``).
        any_option (bool): It takes ``**kwargs`` (any keyword reaches it).
        warmup (bool): It has a warmup of ``num_warmup_steps`` steps (what a
            Trainer's ``warmup_steps``/``warmup_ratio`` set): declared for a
            built-in schedule, for a registered one whether it takes
            ``num_warmup_steps`` (or ``**kwargs``).
        start_warmup (bool): :func:`get_scheduler` takes Megatron-LM's
            ``lr_warmup_init`` for it and starts the warmup of the scheduler
            the function returns there (``start_warmup_at``): a built-in
            schedule with a warmup whose function does not take it itself.
    """

    function: SchedulerFunction
    options: Mapping[str, ScheduleOption]
    any_option: bool
    warmup: bool
    start_warmup: bool = False

    @classmethod
    def of(cls, fn: SchedulerFunction, *, warmup: Optional[bool] = None, built_in: bool = False) -> "ScheduleInfo":
        """Read ``fn``'s signature; ``warmup`` as declared (``None``: whether it takes ``num_warmup_steps``).

        Raises:
            TypeError: ``fn`` has no signature, or cannot take the learning rate as its first positional argument.
        """
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"`fn` {fn!r} has no inspectable signature, so get_scheduler cannot call it.") from exc
        parameters = list(signature.parameters.values())
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                      inspect.Parameter.VAR_POSITIONAL)
        if not parameters or parameters[0].kind not in positional:
            raise TypeError(
                f"`fn` {fn!r} must take the learning rate as its first positional argument, "
                f"its signature is {signature}."
            )
        try:
            hints = typing.get_type_hints(fn)
        except Exception:  # an annotation that does not resolve: the option accepts any type
            hints = {}
        keywords = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        options = {
            p.name: ScheduleOption(
                p.name,
                REQUIRED if p.default is inspect.Parameter.empty else p.default,
                _accepted_types(hints.get(p.name)),
            )
            for p in parameters[1:]
            if p.kind in keywords
        }
        any_option = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
        if warmup is None:
            warmup = any_option or "num_warmup_steps" in options
        start_warmup = built_in and warmup and "lr_warmup_init" not in options
        if start_warmup:
            options["lr_warmup_init"] = ScheduleOption("lr_warmup_init", 0.0, (float,))
        return cls(fn, types.MappingProxyType(options), any_option, warmup, start_warmup)


def _accepted_types(annotation: Any) -> Tuple[type, ...]:
    if annotation is None or annotation is Any:
        return ()
    if typing.get_origin(annotation) is Union or isinstance(annotation, getattr(types, "UnionType", ())):
        members = [_accepted_types(member) for member in typing.get_args(annotation)]
        return () if any(not member for member in members) else tuple(t for member in members for t in member)
    origin = typing.get_origin(annotation)
    if origin is not None:
        return (origin,) if isinstance(origin, type) else ()
    return (annotation,) if isinstance(annotation, type) else ()
