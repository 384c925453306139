r"""Schedules by name: ``get_scheduler("cosine", ...)``, as PaddleNLP's Trainer calls it.

The names are the ``lr_scheduler_type`` strings of PaddleNLP's
``TrainingArguments``, then Hugging Face's ``cosine_with_restarts``,
``inverse_sqrt``, ``cosine_with_min_lr`` and ``warmup_stable_decay`` (with
Megatron-LM's decay styles), the Megatron-style annealing schedulers,
``sequential`` (stages one after another, :class:`~paddle_llrd.SequentialSchedule`)
and ``reduce_lr_on_plateau`` (Paddle's ``ReduceOnPlateau``, stepped with a
metric). :data:`BUILTIN_SCHEDULES` below declares each of them once; the
functions are in :mod:`.functions`, :mod:`.sequential` and :mod:`.plateau`,
the lookup (:func:`get_scheduler`, :func:`register_scheduler`,
:func:`schedule_options`) in :mod:`.catalog`. Everything is importable from here.
"""
from __future__ import annotations

from typing import Dict

from . import functions
from .catalog import (
    REQUIRED,
    TYPE_TO_SCHEDULER_FUNCTION,
    ScheduleInfo,
    ScheduleOption,
    SchedulerType,
    _register_builtin,
    canonical_name,
    get_scheduler,
    register_scheduler,
    schedule_function,
    schedule_info,
    schedule_options,
)
from .functions import (  # in the order of BUILTIN_SCHEDULES
    get_linear_schedule_with_warmup,
    get_cosine_schedule_with_warmup,
    get_constant_schedule,
    get_constant_schedule_with_warmup,
    get_polynomial_decay_schedule_with_warmup,
    get_cosine_with_hard_restarts_schedule_with_warmup,
    get_inverse_sqrt_schedule,
    get_cosine_with_min_lr_schedule_with_warmup,
    get_wsd_schedule,
    get_cosine_annealing_schedule_with_warmup,
    get_linear_annealing_schedule_with_warmup,
    DEFAULT_INVERSE_SQRT_TIMESCALE,
    DEFAULT_WSD_DECAY_RATIO,
)
from .plateau import get_reduce_on_plateau_schedule
from .sequential import get_sequential_schedule

__all__ = [
    "BUILTIN_SCHEDULES",
    "SchedulerType",
    "TYPE_TO_SCHEDULER_FUNCTION",
    "ScheduleInfo",
    "ScheduleOption",
    "REQUIRED",
    "canonical_name",
    "schedule_function",
    "schedule_info",
    "schedule_options",
    "register_scheduler",
    "get_scheduler",
    "get_linear_schedule_with_warmup",
    "get_cosine_schedule_with_warmup",
    "get_constant_schedule",
    "get_constant_schedule_with_warmup",
    "get_polynomial_decay_schedule_with_warmup",
    "get_cosine_with_hard_restarts_schedule_with_warmup",
    "get_inverse_sqrt_schedule",
    "get_cosine_with_min_lr_schedule_with_warmup",
    "get_wsd_schedule",
    "get_cosine_annealing_schedule_with_warmup",
    "get_linear_annealing_schedule_with_warmup",
    "get_sequential_schedule",
    "get_reduce_on_plateau_schedule",
    "DEFAULT_INVERSE_SQRT_TIMESCALE",
    "DEFAULT_WSD_DECAY_RATIO",
]

#: Each built-in schedule, declared once: its function (whose signature gives
#: its options, their types and defaults), whether it warms up (then it takes
#: ``lr_warmup_init`` through get_scheduler) and the body get_scheduler calls.
BUILTIN_SCHEDULES: Dict[SchedulerType, ScheduleInfo] = {
    name: ScheduleInfo.of(function, warmup=build is not None, build=build)
    for name, function, build in [
        (SchedulerType.LINEAR, get_linear_schedule_with_warmup, functions._linear),
        (SchedulerType.COSINE, get_cosine_schedule_with_warmup, functions._cosine),
        (SchedulerType.CONSTANT, get_constant_schedule, None),
        (SchedulerType.CONSTANT_WITH_WARMUP, get_constant_schedule_with_warmup, functions._constant_with_warmup),
        (SchedulerType.POLYNOMIAL, get_polynomial_decay_schedule_with_warmup, functions._polynomial),
        (SchedulerType.COSINE_WITH_RESTARTS, get_cosine_with_hard_restarts_schedule_with_warmup,
         functions._cosine_with_hard_restarts),
        (SchedulerType.INVERSE_SQRT, get_inverse_sqrt_schedule, functions._inverse_sqrt),
        (SchedulerType.COSINE_WITH_MIN_LR, get_cosine_with_min_lr_schedule_with_warmup,
         functions._cosine_with_min_lr),
        (SchedulerType.WARMUP_STABLE_DECAY, get_wsd_schedule, functions._wsd),
        (SchedulerType.COSINE_ANNEALING_WITH_WARMUP, get_cosine_annealing_schedule_with_warmup,
         functions._cosine_annealing),
        (SchedulerType.LINEAR_ANNEALING_WITH_WARMUP, get_linear_annealing_schedule_with_warmup,
         functions._linear_annealing),
        (SchedulerType.SEQUENTIAL, get_sequential_schedule, None),  # its first stage takes lr_warmup_init
        (SchedulerType.REDUCE_LR_ON_PLATEAU, get_reduce_on_plateau_schedule, None),
    ]
}

for _name, _info in BUILTIN_SCHEDULES.items():
    _register_builtin(_name, _info)
del _name, _info
