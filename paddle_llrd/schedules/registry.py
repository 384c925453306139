r"""Schedules by name: the one table of the schedules, and :func:`get_scheduler`, as PaddleNLP's Trainer and Hugging Face call it.

Hugging Face's shape: each schedule is a factor function (:mod:`.factors`),
a ``get_*`` function (:mod:`.functions`, :mod:`.plateau`, and
:func:`get_sequential_schedule` here) and one line of the table below: its
name, its function and whether it has a warmup. Everything else is read from
there: :data:`BUILTIN_SCHEDULES` (each name's
:class:`~.schedule_info.ScheduleInfo`), :class:`SchedulerType` (the names),
:data:`TYPE_TO_SCHEDULER_FUNCTION` (PaddleNLP's dict), and each schedule's
options, their types and defaults (:func:`schedule_options`, read once from
the function's signature), which :func:`get_scheduler`, the Trainers'
``lr_scheduler_kwargs`` check and ``python -m paddle_llrd schedules`` use.
:func:`register_scheduler` adds a schedule; the story is in
docs/schedules.rst.

:func:`get_scheduler` takes PaddleNLP's call (a learning rate; the caller
hands the scheduler to the optimizer) and Hugging Face's (an optimizer, which
gets the scheduler: :mod:`.optimizer_link`).
"""
from __future__ import annotations

import enum
import types
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from paddle.optimizer.lr import LRScheduler

from ..checks import checked_non_negative, did_you_mean
from . import functions, sequential, wsd
from .long_warmup import called_as
from .name_suggestions import closest_schedule
from .optimizer_link import optimizer_of, peak_lr_of
from .plateau import get_reduce_on_plateau_schedule
from .schedule_checks import lr_warmup_init_fraction
from .schedule_info import REQUIRED, ScheduleInfo, ScheduleOption, SchedulerFunction

__all__ = [
    "BUILTIN_SCHEDULES",
    "REQUIRED",
    "ScheduleInfo",
    "ScheduleOption",
    "SchedulerType",
    "TYPE_TO_SCHEDULER_FUNCTION",
    "canonical_name",
    "get_scheduler",
    "get_sequential_schedule",
    "register_scheduler",
    "schedule_function",
    "schedule_info",
    "schedule_options",
]


def get_sequential_schedule(
    learning_rate: float, stages: List[Mapping], num_warmup_steps: Optional[int] = None,
    num_training_steps: Optional[int] = None, num_cycles: Optional[float] = None, lr_end: Optional[float] = None,
    power: Optional[float] = None, min_lr: Optional[float] = None, lr_warmup_init: Optional[float] = None,
    last_epoch: int = -1,
) -> sequential.SequentialSchedule:
    r"""Registry schedules one after another (``"sequential"``): a :class:`~paddle_llrd.SequentialSchedule`.

    Each entry of ``stages`` is a dict ``{"name": ..., "num_steps": ...,
    **options}``: the stage is ``get_scheduler(name, learning_rate,
    num_training_steps=num_steps, **options)`` and starts, at its own step 0,
    where the stages before it end. ``options`` may hold the stage's own
    ``learning_rate`` (its peak; the run's by default), ``num_warmup_steps``
    and any argument of its schedule. The last stage may leave ``num_steps``
    out: it then takes what is left of ``num_training_steps``; otherwise the
    lengths must add up to ``num_training_steps`` (when it is given).

    The run's ``num_warmup_steps`` and ``lr_warmup_init`` (a Trainer's
    ``warmup_steps`` / ``warmup_ratio``) are the first stage's, unless it sets
    its own (a different non-zero value for both raises ``ValueError``; so
    does a warmup for a first stage whose schedule has none, ``"constant"``,
    which would drop it); later stages have no warmup unless they set
    ``num_warmup_steps``.
    ``num_cycles``, ``lr_end``, ``power`` and ``min_lr``, when given, go to
    every stage that takes them and does not set its own.

    Args:
        learning_rate (float): The peak lr of every stage that does not set its own.
        stages (list[dict]): The stages, as above.
        num_warmup_steps (int, optional): The first stage's warmup.
        num_training_steps (int, optional): The whole run's steps.
        num_cycles, lr_end, power, min_lr (float, optional): Shared stage options.
        lr_warmup_init (float, optional): The first stage's warmup start.
        last_epoch (int, optional): The last step already taken. Default: ``-1``.

    Raises:
        ValueError / TypeError: a stage that is not a dict, lacks ``name`` or
            (but for the last) ``num_steps``, sets ``last_epoch``, or that its
            schedule refuses; the message names the stage (``stages[i]``).

    Examples:
        >>> from paddle_llrd import get_scheduler
        >>> from paddle_llrd.schedules.curve import lr_curve
        >>> scheduler = get_scheduler(
        ...     "sequential", 1.0, num_warmup_steps=2, num_training_steps=8,
        ...     stages=[{"name": "inverse_sqrt", "num_steps": 4},
        ...             {"name": "cosine", "learning_rate": 0.5}])
        >>> [round(lr, 6) for lr in lr_curve(scheduler, 8)]
        [0.0, 0.5, 1.0, 0.816497, 0.5, 0.426777, 0.25, 0.073223, 0.0]
    """
    # Here, beside get_scheduler, because its stages are schedules by name: sequential.py gets the
    # builder and the warmup answer from the registry, and so needs no table of names itself.
    shared = {
        key: value
        for key, value in (("num_cycles", num_cycles), ("lr_end", lr_end), ("power", power), ("min_lr", min_lr))
        if value is not None
    }
    return sequential.schedule_of_stages(
        learning_rate, stages, get_scheduler, lambda name: schedule_info(name).warmup,
        num_warmup_steps=num_warmup_steps, num_training_steps=num_training_steps, shared=shared,
        lr_warmup_init=lr_warmup_init, last_epoch=last_epoch,
    )


#: Each built-in schedule, declared once, in :class:`SchedulerType`'s order: its
#: name, its function and whether it has a warmup of ``num_warmup_steps`` steps
#: (``"sequential"``: its first stage's). PaddleNLP's five names come first.
_BUILT_IN: Tuple[Tuple[str, SchedulerFunction, bool], ...] = (
    ("linear", functions.get_linear_schedule_with_warmup, True),
    ("cosine", functions.get_cosine_schedule_with_warmup, True),
    ("constant", functions.get_constant_schedule, False),
    ("constant_with_warmup", functions.get_constant_schedule_with_warmup, True),
    ("polynomial", functions.get_polynomial_decay_schedule_with_warmup, True),
    # Hugging Face's
    ("cosine_with_restarts", functions.get_cosine_with_hard_restarts_schedule_with_warmup, True),
    ("inverse_sqrt", functions.get_inverse_sqrt_schedule, True),
    ("cosine_with_min_lr", functions.get_cosine_with_min_lr_schedule_with_warmup, True),
    ("warmup_stable_decay", functions.get_wsd_schedule, True),
    # Megatron-LM's annealing
    ("cosine_annealing_with_warmup", functions.get_cosine_annealing_schedule_with_warmup, True),
    ("linear_annealing_with_warmup", functions.get_linear_annealing_schedule_with_warmup, True),
    # composed of other schedules, or stepped with a metric
    ("sequential", get_sequential_schedule, True),
    ("reduce_lr_on_plateau", get_reduce_on_plateau_schedule, False),
)


class _StrEnum(str, enum.Enum):
    def __str__(self) -> str:
        return self.value


SchedulerType = _StrEnum("SchedulerType", [(name.upper(), name) for name, _, _ in _BUILT_IN], module=__name__)
SchedulerType.__doc__ = """The built-in schedule names (a ``str`` enum), one per entry of :data:`BUILTIN_SCHEDULES`.

    The first five are PaddleNLP's ``lr_scheduler_type`` values; then come
    Hugging Face's ``cosine_with_restarts``, ``inverse_sqrt``,
    ``cosine_with_min_lr`` and ``warmup_stable_decay``, the Megatron-style
    annealing schedulers, ``sequential`` (schedules one after another) and
    Hugging Face's ``reduce_lr_on_plateau``.

    Examples:
        >>> from paddle_llrd import SchedulerType
        >>> SchedulerType("cosine") is SchedulerType.COSINE, SchedulerType.COSINE == "cosine"
        (True, True)
        >>> str(SchedulerType.WARMUP_STABLE_DECAY)
        'warmup_stable_decay'
    """


#: The built-in schedules by :class:`SchedulerType`, each with its :class:`ScheduleInfo`.
BUILTIN_SCHEDULES: Mapping[SchedulerType, ScheduleInfo] = types.MappingProxyType({
    SchedulerType(name): ScheduleInfo.of(function, warmup=warmup, built_in=True)
    for name, function, warmup in _BUILT_IN
})


class _ScheduleTable(dict):
    """Schedule name -> schedule function, as used by :func:`get_scheduler`.

    Built-in schedules are keyed by :class:`SchedulerType`, schedules added by
    :func:`register_scheduler` by their name (a plain ``dict`` otherwise; its
    own class exists so that the documentation shows this text).
    """


TYPE_TO_SCHEDULER_FUNCTION: Dict[Union[SchedulerType, str], SchedulerFunction] = _ScheduleTable(
    (key, info.function) for key, info in BUILTIN_SCHEDULES.items()
)

# ScheduleInfo by function: a function put into TYPE_TO_SCHEDULER_FUNCTION by
# hand (PaddleNLP's way) is read at its first use, every other at registration.
_INFO: Dict[Any, ScheduleInfo] = {info.function: info for info in BUILTIN_SCHEDULES.values()}
_BUILT_IN_FUNCTIONS = frozenset(_INFO)


def _known_info(fn: Any) -> Optional[ScheduleInfo]:
    try:
        return _INFO.get(fn)
    except TypeError:  # an unhashable callable: read again at each use
        return None


def _is_built_in(fn: Any) -> bool:
    try:
        return fn in _BUILT_IN_FUNCTIONS
    except TypeError:
        return False


def _remember(info: ScheduleInfo) -> ScheduleInfo:
    try:
        _INFO[info.function] = info
    except TypeError:
        pass
    return info


def canonical_name(name: Any) -> Union[SchedulerType, str]:
    """The table's key for ``name``: the :class:`SchedulerType` of a built-in name, else the string.

    Any :class:`enum.Enum` with a string value is taken, so PaddleNLP's own
    ``SchedulerType`` (which ``TrainingArguments`` stores) works too.

    Raises:
        TypeError: ``name`` is neither a str nor such an enum.

    Examples:
        >>> from paddle_llrd.schedules.registry import canonical_name
        >>> canonical_name("cosine"), canonical_name("my-schedule")
        (<SchedulerType.COSINE: 'cosine'>, 'my-schedule')
    """
    if isinstance(name, enum.Enum) and not isinstance(name, SchedulerType):
        name = name.value
    if not isinstance(name, str):
        raise TypeError(f"`name` must be a str or a SchedulerType, got {name!r} of type {type(name).__name__}.")
    if name in SchedulerType._value2member_map_:
        return SchedulerType(name)
    return str(name)


def schedule_function(name: Union[str, SchedulerType]) -> SchedulerFunction:
    """The schedule function registered as ``name``: what :func:`get_scheduler` calls.

    Raises:
        ValueError: ``name`` is not registered; the message lists the valid
            names and ends with the one it meant (:mod:`.name_suggestions`:
            ``"cosine_warmup"`` and ``"get_cosine_schedule_with_warmup"``
            meant ``"cosine"``).

    Examples:
        >>> from paddle_llrd.schedules.registry import schedule_function
        >>> schedule_function("cosine").__name__
        'get_cosine_schedule_with_warmup'
        >>> schedule_function("cosin")
        Traceback (most recent call last):
        ...
        ValueError: Unknown scheduler name 'cosin'; valid names are: ... Did you mean 'cosine'?
    """
    key = canonical_name(name)
    if key not in TYPE_TO_SCHEDULER_FUNCTION:
        valid = ", ".join(str(known) for known in TYPE_TO_SCHEDULER_FUNCTION)
        raise ValueError(
            f"Unknown scheduler name {str(key)!r}; valid names are: {valid}."
            f"{closest_schedule(key, TYPE_TO_SCHEDULER_FUNCTION)}"
        )
    return TYPE_TO_SCHEDULER_FUNCTION[key]


def schedule_info(name: Union[str, SchedulerType]) -> ScheduleInfo:
    """The :class:`ScheduleInfo` of the schedule registered as ``name``; its ``warmup`` is the one answer to
    "does it have a warmup" (the Trainers read it).

    Raises:
        ValueError: ``name`` is not registered (as :func:`schedule_function`).

    Examples:
        >>> from paddle_llrd.schedules.registry import schedule_info
        >>> [schedule_info(name).warmup for name in ("linear", "constant", "sequential", "reduce_lr_on_plateau")]
        [True, False, True, False]
    """
    fn = schedule_function(name)
    known = _known_info(fn)
    return known if known is not None else _remember(ScheduleInfo.of(fn))


def schedule_options(name: Union[str, SchedulerType]) -> Mapping[str, ScheduleOption]:
    """The options of the schedule registered as ``name``: keyword -> :class:`ScheduleOption`.

    A read-only mapping, in the function's signature order, of every argument
    after ``learning_rate`` (each with ``.name``, ``.default`` —
    :data:`REQUIRED` when it has none — ``.required`` and ``.types``, the
    annotation's types), then ``lr_warmup_init`` for a built-in schedule
    with a warmup whose function does not take it. A schedule that takes
    ``**kwargs`` accepts more (:attr:`ScheduleInfo.any_option`).

    Raises:
        ValueError: ``name`` is not registered (as :func:`schedule_function`).

    Examples:
        >>> from paddle_llrd import schedule_options
        >>> list(schedule_options("constant_with_warmup"))
        ['num_warmup_steps', 'last_epoch', 'num_training_steps', 'lr_warmup_init']
        >>> schedule_options("polynomial")["power"]
        ScheduleOption(name='power', default=1.0, types=(<class 'float'>,))
        >>> schedule_options("linear")["num_training_steps"].required
        True
    """
    return schedule_info(name).options


def register_scheduler(
    name: Union[str, SchedulerType], fn: SchedulerFunction, *, overwrite: bool = False
) -> SchedulerFunction:
    """Add the schedule function ``fn`` under ``name``, for :func:`get_scheduler`.

    ``fn`` is called as ``fn(learning_rate, **arguments)`` with those of
    ``num_warmup_steps``, ``num_training_steps``, ``num_cycles``, ``lr_end``,
    ``power``, ``min_lr`` and ``get_scheduler``'s extra keyword arguments that
    its signature accepts (all of them if it takes ``**kwargs``), and must
    return a :class:`paddle.optimizer.lr.LRScheduler` (``get_scheduler``
    raises ``TypeError`` naming ``name`` when it returns anything else: only a
    call can tell). Of ``num_cycles``, ``lr_end``, ``power`` and ``min_lr``,
    one that the caller of ``get_scheduler`` leaves out reaches ``fn`` as
    ``get_scheduler``'s default only where ``fn`` has no default of its own
    for it. The signature is read here, once (:func:`schedule_options`); the
    schedule has a warmup when it takes ``num_warmup_steps``.

    Args:
        name (str|SchedulerType): The new name. Replacing an existing schedule
            (a built-in one included) needs ``overwrite=True``.
        fn (callable): The schedule function.
        overwrite (bool, optional): Replace an existing schedule. Default: ``False``.

    Returns:
        ``fn``, unchanged.

    Raises:
        TypeError: ``name`` not a str, ``fn`` not callable or without a learning-rate argument.
        ValueError: ``name`` empty, or already registered without ``overwrite=True``.

    Examples:
        >>> from paddle.optimizer.lr import LambdaDecay
        >>> from paddle_llrd import TYPE_TO_SCHEDULER_FUNCTION
        >>> from paddle_llrd import get_scheduler, register_scheduler
        >>> def get_halving_schedule(learning_rate, num_warmup_steps, last_epoch=-1):
        ...     def factor(step):
        ...         return 0.5 ** (step // max(1, num_warmup_steps))
        ...     return LambdaDecay(learning_rate, factor, last_epoch)
        >>> _ = register_scheduler("halving", get_halving_schedule)
        >>> scheduler = get_scheduler(
        ...     "halving", 0.8, num_warmup_steps=2, num_training_steps=10)
        >>> from paddle_llrd.schedules.curve import lr_curve
        >>> lr_curve(scheduler, 4)
        [0.8, 0.8, 0.4, 0.4, 0.2]
        >>> del TYPE_TO_SCHEDULER_FUNCTION["halving"]
    """
    if not isinstance(overwrite, bool):
        raise TypeError(f"`overwrite` must be a bool, got {overwrite!r}.")
    key = canonical_name(name)
    if not key:
        raise ValueError("`name` must be a non-empty string.")
    if not callable(fn):
        raise TypeError(f"`fn` must be callable (a schedule function), got {fn!r}.")
    info = ScheduleInfo.of(fn)
    if key in TYPE_TO_SCHEDULER_FUNCTION and not overwrite:
        kind = "built-in" if isinstance(key, SchedulerType) else "registered"
        raise ValueError(
            f"`name` {str(key)!r} is already a {kind} schedule; pass overwrite=True to replace it."
        )
    if _known_info(fn) is None:  # a built-in function registered again keeps its ScheduleInfo
        _remember(info)
    TYPE_TO_SCHEDULER_FUNCTION[key] = fn
    return fn


class _Default(float):
    """A :func:`get_scheduler` default: the documented number, marked as not passed by the caller.

    It prints as the plain number (so the signature reads ``num_cycles=0.5``)
    and ``get_scheduler`` leaves it to the schedule function's own default,
    so that an option the caller did not give never collides with another
    way of saying the same thing (``min_lr`` and ``min_lr_rate``).
    """

    __slots__ = ()


#: The options :func:`get_scheduler` names in its signature: each schedule takes those it has, ignores the rest.
_NAMED_OPTIONS = ("num_warmup_steps", "num_training_steps", "num_cycles", "lr_end", "power", "min_lr")


def _offered_options(named: Dict[str, Any], kwargs: Dict[str, Any], scheduler_specific_kwargs: Any) -> Dict[str, Any]:
    """Every option a :func:`get_scheduler` call offers: its named arguments, ``**kwargs`` and Hugging Face's
    ``scheduler_specific_kwargs`` (an option given in two of them raises ``TypeError`` naming it)."""
    offered = {**named, **kwargs}
    if scheduler_specific_kwargs is None:
        return offered
    if not isinstance(scheduler_specific_kwargs, Mapping):
        raise TypeError(
            "`scheduler_specific_kwargs` must be a dict of the schedule's options (Hugging Face's), got "
            f"{type(scheduler_specific_kwargs).__name__}."
        )
    for option, value in scheduler_specific_kwargs.items():
        given = offered.get(option)
        if option in kwargs or (given is not None and not isinstance(given, _Default)):
            raise TypeError(
                f"get_scheduler got `{option}` twice, as an argument and in `scheduler_specific_kwargs`; pass it once."
            )
        offered[option] = value
    return offered


def get_scheduler(
    name: Union[str, SchedulerType],
    learning_rate: Optional[float] = None,
    num_warmup_steps: Optional[int] = None,
    num_training_steps: Optional[int] = None,
    num_cycles: float = _Default(0.5),
    lr_end: float = _Default(1e-7),
    power: float = _Default(1.0),
    min_lr: float = _Default(0.0),
    *,
    optimizer: Any = None,
    scheduler_specific_kwargs: Optional[Mapping[str, Any]] = None,
    **kwargs: Any,
) -> LRScheduler:
    """Build the schedule called ``name``, as PaddleNLP's ``Trainer.create_scheduler`` or Hugging Face calls it.

    Two calls, one schedule:

    * PaddleNLP's, ``get_scheduler(name, learning_rate, num_warmup_steps,
      num_training_steps, ...)``: the scheduler goes to the optimizer as its
      ``learning_rate`` (``paddle.optimizer.AdamW(learning_rate=scheduler,
      ...)``).
    * Hugging Face's, ``get_scheduler(name, optimizer=optimizer,
      num_warmup_steps=..., num_training_steps=...,
      scheduler_specific_kwargs={...})`` (the optimizer may also stand in
      ``learning_rate``'s place): the peak is the optimizer's learning rate
      (:func:`~.optimizer_link.peak_lr_of`) and the scheduler is attached to
      it (``optimizer.set_lr_scheduler``), so ``optimizer.step();
      lr_scheduler.step()`` trains with Hugging Face's learning rates.
      ``"warmup_stable_decay"`` then reads its keywords as Hugging Face's.

    Each schedule gets only the options it takes (:func:`schedule_options`),
    so ``num_cycles``/``lr_end``/``power``/``min_lr`` can always be passed.
    Of those four, one the caller does not pass goes to the schedule only if
    its function has no default of its own for it (or takes ``**kwargs``);
    otherwise the function's default applies. For the five PaddleNLP names the
    two defaults are the same numbers; ``"cosine_with_restarts"`` thus gets
    Hugging Face's ``num_cycles=1``, and ``"cosine_with_min_lr"`` /
    ``"warmup_stable_decay"`` see ``min_lr`` only when it is passed.

    Args:
        name (str|SchedulerType): A :class:`SchedulerType` value or a name added
            by :func:`register_scheduler`.
        learning_rate (float, optional): The peak learning rate; with an
            ``optimizer``, its own by default.
        num_warmup_steps (int, optional): Warmup steps; required by every
            built-in schedule but ``"constant"``.
        num_training_steps (int, optional): Training steps; required by every
            built-in schedule but ``"constant"``, ``"constant_with_warmup"``
            and ``"inverse_sqrt"`` (``"warmup_stable_decay"`` takes Hugging
            Face's ``num_stable_steps`` instead).
        num_cycles (float, optional): Cosine waves (``"cosine"``,
            ``"cosine_with_min_lr"``, ``"warmup_stable_decay"``'s Hugging Face
            cosine) or cycles (``"cosine_with_restarts"``, whose own default
            is ``1``). Default: ``0.5``.
        lr_end (float, optional): Final lr (``"polynomial"``). Default: ``1e-7``.
        power (float, optional): Polynomial power (``"polynomial"``). Default: ``1.0``.
        min_lr (float, optional): The floor as an lr (``"cosine"``,
            ``"cosine_with_min_lr"``, ``"warmup_stable_decay"``, the annealing
            schedules). Default: ``0.0``.
        optimizer (paddle.optimizer.Optimizer, optional): Hugging Face's call:
            the optimizer whose learning rate the schedule starts from and
            which follows the scheduler.
        scheduler_specific_kwargs (dict, optional): Hugging Face's way to pass
            the options below; the same as passing them as keywords.
        **kwargs: Further options of the schedule (:func:`schedule_options`):
            ``last_epoch``; ``lr_warmup_init`` (every schedule with a warmup:
            Megatron-LM's warmup start, ``0 <= lr_warmup_init <=
            learning_rate``; the lr at step :math:`s < W` is then
            ``lr_warmup_init + (learning_rate - lr_warmup_init) * s / W``);
            ``min_lr_rate`` (``"cosine_with_min_lr"``); ``timescale``
            (``"inverse_sqrt"``); ``num_decay_steps``, ``min_lr_ratio``,
            Megatron-LM's ``decay_ratio``, ``decay_style`` or Hugging Face's
            ``warmup_type``, ``decay_type``, ``num_stable_steps``
            (``"warmup_stable_decay"``); ``stages`` (``"sequential"``);
            ``mode``, ``factor``, ``patience``, ``threshold``,
            ``threshold_mode``, ``cooldown``, ``epsilon``
            (``"reduce_lr_on_plateau"``); or those of a registered schedule.
            One it does not accept raises ``TypeError``.

    Raises:
        ValueError: ``name`` is unknown (the message lists the valid names
            and ends with the closest one, as :func:`schedule_function`'s),
            the schedule needs an argument that is ``None`` or missing, or
            ``lr_warmup_init`` is not finite, negative or above ``learning_rate``.
        TypeError: neither ``learning_rate`` nor ``optimizer``; an
            ``optimizer`` that is none, or given twice; an option given twice;
            an argument the schedule does not take (``lr_warmup_init``
            for one without a warmup, such as ``"constant"``; the message
            lists those it takes and ends with the closest one), or the schedule
            function returns something that is not an ``LRScheduler`` (the
            message names the registered name).

    Nothing is attached to the optimizer when the call raises. A warmup
    longer than ``num_training_steps`` is accepted with a
    :class:`~paddle_llrd.LongWarmupWarning` that names ``get_scheduler(name)``,
    ``num_warmup_steps`` and ``num_training_steps`` (every built-in schedule
    with a warmup and an end; ``"warmup_stable_decay"`` and the annealing
    schedules refuse it).

    Examples:
        >>> from paddle_llrd import get_scheduler
        >>> from paddle_llrd.schedules.curve import lr_curve
        >>> scheduler = get_scheduler(
        ...     "linear", learning_rate=0.1, num_warmup_steps=2, num_training_steps=10,
        ...     num_cycles=0.5, lr_end=1e-7, power=1.0)
        >>> [round(lr, 6) for lr in lr_curve(scheduler, 4)]
        [0.0, 0.05, 0.1, 0.0875, 0.075]
        >>> get_scheduler("cosine_annealing", 0.1)
        Traceback (most recent call last):
        ...
        ValueError: Unknown scheduler name 'cosine_annealing'; valid names are: ...

        Hugging Face's call, the optimizer's lr as the peak:

        >>> import paddle
        >>> model = paddle.nn.Linear(2, 2)
        >>> optimizer = paddle.optimizer.AdamW(learning_rate=0.2, parameters=model.parameters())
        >>> lr_scheduler = get_scheduler("cosine", optimizer=optimizer, num_warmup_steps=0, num_training_steps=4)
        >>> model(paddle.ones([1, 2])).sum().backward()
        >>> optimizer.step(); lr_scheduler.step()
        >>> round(optimizer.get_lr(), 6)
        0.170711
    """
    key = canonical_name(name)
    info = schedule_info(key)
    optimizer = optimizer_of(learning_rate, optimizer)
    if optimizer is not None and (learning_rate is None or learning_rate is optimizer):
        learning_rate = peak_lr_of(optimizer)
    elif learning_rate is None:
        raise TypeError(
            f"get_scheduler({str(key)!r}) needs the peak lr: get_scheduler(name, learning_rate, ...) as PaddleNLP "
            "calls it, or get_scheduler(name, optimizer=optimizer, ...) as Hugging Face does (the optimizer's lr, "
            "and the scheduler attached to it)."
        )
    named = dict(zip(_NAMED_OPTIONS, (num_warmup_steps, num_training_steps, num_cycles, lr_end, power, min_lr)))
    offered = _offered_options(named, kwargs, scheduler_specific_kwargs)
    if optimizer is not None and key is SchedulerType.WARMUP_STABLE_DECAY:
        offered.update(wsd.hugging_face_reading({k: v for k, v in offered.items() if not isinstance(v, _Default)}))
    scheduler = _build(key, info, learning_rate, offered)
    if optimizer is not None:
        optimizer.set_lr_scheduler(scheduler)
    return scheduler


def _build(key: Union[SchedulerType, str], info: ScheduleInfo, learning_rate: Any,
           offered: Dict[str, Any]) -> LRScheduler:
    """Call the schedule function of ``key`` with the ``offered`` options it takes."""
    options = info.options
    unknown = sorted(k for k in offered if k not in options and k not in _NAMED_OPTIONS)
    if unknown and not info.any_option:
        accepted = list(options)
        raise TypeError(
            f"Scheduler {str(key)!r} does not accept the argument(s) {', '.join(unknown)}; "
            f"it takes: {', '.join(accepted) or 'nothing besides learning_rate'}.{did_you_mean(unknown[0], accepted)}"
        )
    arguments = {}
    for arg_name, value in offered.items():
        if value is None:
            continue  # leave the function's own default, or report it missing below
        option = options.get(arg_name)
        if option is None and not info.any_option:
            continue
        if isinstance(value, _Default):
            if option is not None and not option.required:
                continue  # not passed by the caller: the function's own default applies
            value = float(value)
        arguments[arg_name] = value
    for option in options.values():
        if option.required and option.name not in arguments:
            raise ValueError(f"Scheduler {str(key)!r} requires `{option.name}`, please provide that argument.")
    warmup_start = None
    if info.start_warmup and "lr_warmup_init" in arguments:
        peak = checked_non_negative(learning_rate, "learning_rate")
        warmup_start = lr_warmup_init_fraction(arguments.pop("lr_warmup_init"), peak)
    if _is_built_in(info.function):  # its long-warmup warning names this call
        with called_as(f"get_scheduler({str(key)!r})"):
            scheduler = info.function(learning_rate, **arguments)
    else:
        scheduler = info.function(learning_rate, **arguments)
    if not isinstance(scheduler, LRScheduler):
        fn = info.function
        raise TypeError(
            f"The schedule function registered as {str(key)!r} ({getattr(fn, '__qualname__', fn)!r}) returned "
            f"{scheduler!r} of type {type(scheduler).__name__}, not a paddle.optimizer.lr.LRScheduler; "
            "make it return the scheduler it builds."
        )
    if warmup_start is not None:
        scheduler.start_warmup_at(warmup_start)
    return scheduler
