r"""Schedules run one after another: :class:`SequentialSchedule` (torch's ``SequentialLR``).

``SequentialSchedule([a, b, c], milestones=[m1, m2])`` gives ``a``'s lr for
steps ``0 .. m1-1``, ``b``'s from ``m1`` and ``c``'s from ``m2``; each stage
counts its own steps from 0 at its milestone, so the lr at step ``s`` is that
of stage ``i`` at its step ``s - milestones[i-1]``. The stages are stepped
one step at a time, as in training, so schedules whose lr depends on their
history (Paddle's ``MultiplicativeDecay``, ``CosineAnnealingWarmRestarts``)
work too. ``get_scheduler("sequential", ..., stages=[...])`` builds one by name:
:func:`~paddle_llrd.get_sequential_schedule` (in :mod:`.registry`, which
knows the names) builds each stage with ``get_scheduler`` and hands them to
:func:`schedule_of_stages` here, which knows the rules of ``stages`` and no
names.
"""
from __future__ import annotations

import bisect
import copy
from collections.abc import Mapping
from typing import Any, Callable, Dict, List, Optional, Sequence

from paddle.optimizer.lr import LRScheduler, ReduceOnPlateau

from ..checks import checked_non_negative, checked_step_index, is_integer
from .optimizer_link import FollowedScheduler, mark_followed
from .schedule_checks import checked_step_count

__all__ = ["SequentialSchedule", "StageBuilder", "schedule_of_stages"]

_STAGE_PREFIX = "stage_"


def _non_empty_list(value: Any, argument: str, expected: str, item: str) -> list:
    """``value`` as a list: ``TypeError`` naming ``expected`` unless a sequence (not a str or dict), ``ValueError`` if empty."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise TypeError(f"`{argument}` must be {expected}, got {type(value).__name__}.")
    if not value:
        raise ValueError(f"`{argument}` must hold at least one {item}.")
    return list(value)


def _check_schedules(schedules: Any) -> List[LRScheduler]:
    schedules = _non_empty_list(schedules, "schedules", "a list of LRScheduler objects", "LRScheduler")
    for index, schedule in enumerate(schedules):
        if not isinstance(schedule, LRScheduler):
            raise TypeError(
                f"`schedules[{index}]` must be a paddle.optimizer.lr.LRScheduler, got {type(schedule).__name__}."
            )
        if isinstance(schedule, ReduceOnPlateau):
            raise TypeError(
                f"`schedules[{index}]` is a ReduceOnPlateau, which is stepped with a metric, not once per step; "
                "it cannot be a stage."
            )
        if schedule.last_epoch != 0:
            raise ValueError(
                f"`schedules[{index}]` is at step {schedule.last_epoch}; every stage must be a fresh scheduler at "
                "step 0 (built with last_epoch=-1), since each counts its steps from 0 at its milestone. "
                "Pass last_epoch to SequentialSchedule to resume."
            )
        if any(schedule is other for other in schedules[:index]):
            raise ValueError(f"`schedules[{index}]` is the same object as an earlier stage; pass a new scheduler.")
    return schedules


def _check_milestones(milestones: Any, n_schedules: int) -> List[int]:
    if isinstance(milestones, (str, bytes, Mapping)) or not isinstance(milestones, Sequence):
        raise TypeError(f"`milestones` must be a list of step numbers, got {type(milestones).__name__}.")
    milestones = list(milestones)
    if len(milestones) != n_schedules - 1:
        raise ValueError(
            f"`milestones` must have one entry fewer than `schedules` ({n_schedules - 1} for {n_schedules} "
            f"schedules), got {len(milestones)}: {milestones!r}."
        )
    for index, milestone in enumerate(milestones):
        if not is_integer(milestone):
            raise TypeError(f"`milestones[{index}]` must be an int (a step), got {milestone!r}.")
    if milestones and milestones[0] < 1:
        raise ValueError(f"`milestones` must start at step 1 or later (the first stage starts at 0), got {milestones!r}.")
    if any(later <= earlier for earlier, later in zip(milestones, milestones[1:])):
        raise ValueError(f"`milestones` must be strictly increasing, got {milestones!r}.")
    return [int(milestone) for milestone in milestones]


class SequentialSchedule(FollowedScheduler, LRScheduler):
    r"""Run ``schedules[i]`` from step ``milestones[i-1]`` on, each stage counting its own steps from 0.

    With milestones :math:`m_1 < \dots < m_{n-1}` (and :math:`m_0 = 0`), the lr
    at step :math:`s` with :math:`m_i \le s < m_{i+1}` is the lr of
    ``schedules[i]`` at its step :math:`s - m_i`: torch's ``SequentialLR``.
    The last stage runs on after its milestone for as long as training does.

    Every stage must be a fresh scheduler (at step 0, built with
    ``last_epoch=-1``); a stage is stepped once for every step of its own
    stretch, never before. ``state_dict()`` holds the position and every
    stage's state (flat, under ``stage_<i>.<key>``), so ``set_state_dict``
    resumes mid-stage exactly where an uninterrupted run would be.

    Args:
        schedules (list[LRScheduler]): The stages, in order; not
            ``ReduceOnPlateau`` (it is stepped with a metric).
        milestones (list[int]): The steps at which stages 1, 2, ... start:
            ``len(schedules) - 1`` strictly increasing ints ``>= 1``.
        last_epoch (int, optional): The last step already taken; the schedule
            starts at step ``last_epoch + 1`` (the stages are stepped there).
            Default: ``-1``.
        verbose (bool, optional): Print the lr at every step. Default: ``False``.

    Raises:
        ValueError: ``milestones`` not increasing, not ``len(schedules) - 1``
            long or below 1; a stage not at step 0, or given twice.
        TypeError: a stage that is not an ``LRScheduler``, or is a ``ReduceOnPlateau``.

    Examples:
        >>> from paddle.optimizer.lr import LambdaDecay
        >>> from paddle_llrd import SequentialSchedule, get_scheduler
        >>> warmup = get_scheduler("inverse_sqrt", 1.0, num_warmup_steps=2)
        >>> decay = LambdaDecay(0.5, lambda step: 0.5 ** step)
        >>> from paddle_llrd.schedules.curve import lr_curve
        >>> scheduler = SequentialSchedule([warmup, decay], milestones=[4])
        >>> [round(lr, 6) for lr in lr_curve(scheduler, 6)]
        [0.0, 0.5, 1.0, 0.816497, 0.5, 0.25, 0.125]
    """

    def __init__(
        self,
        schedules: Sequence[LRScheduler],
        milestones: Sequence[int],
        last_epoch: int = -1,
        verbose: bool = False,
    ) -> None:
        self.schedules = _check_schedules(schedules)
        self.milestones = _check_milestones(milestones, len(self.schedules))
        last_epoch = checked_step_index(last_epoch)
        for schedule in self.schedules:
            mark_followed(schedule)  # this schedule reads and steps its stages, not an optimizer
        # The global step the stages stand at: 0 while every stage is fresh.
        self._stage_position = 0
        super().__init__(self.schedules[0].base_lr, last_epoch, verbose)

    def stage_index(self, step: int) -> int:
        """The stage that gives the lr of global step ``step``."""
        return bisect.bisect_right(self.milestones, step)

    def stage_step(self, step: int) -> int:
        """Global step ``step`` as a step of its stage (0 at the stage's milestone)."""
        index = self.stage_index(step)
        return step - (self.milestones[index - 1] if index > 0 else 0)

    def _advance_stages(self, target: int) -> None:
        for step in range(self._stage_position + 1, target + 1):
            if self.stage_step(step) > 0:  # at its milestone a stage is fresh, at its step 0
                self.schedules[self.stage_index(step)].step()
        self._stage_position = max(self._stage_position, target)

    def step(self, epoch: Optional[int] = None) -> None:
        """Advance to the next step, or to step ``epoch`` (not before the current one)."""
        target = self.last_epoch + 1 if epoch is None else checked_step_index(epoch, "epoch")
        if target < self._stage_position:
            raise ValueError(
                f"`epoch` ({target}) lies before the current step ({self._stage_position}): the stages cannot "
                "be stepped back; build a new SequentialSchedule with last_epoch to restart earlier."
            )
        self._advance_stages(target)
        self.last_epoch = target
        self.last_lr = self.get_lr()
        if self.verbose:
            print(f"Epoch {self.last_epoch}: {type(self).__name__} set learning rate to {self.last_lr}.")

    def get_lr(self) -> float:
        return self.schedules[self.stage_index(self.last_epoch)]()

    def state_dict(self) -> Dict[str, Any]:
        """``last_epoch``, ``last_lr`` and each stage's ``state_dict()`` entries as ``stage_<i>.<key>``."""
        state = {"last_epoch": self.last_epoch, "last_lr": self.last_lr}
        for index, schedule in enumerate(self.schedules):
            for key, value in schedule.state_dict().items():
                state[f"{_STAGE_PREFIX}{index}.{key}"] = value
        return state

    def _stage_states(self, state_dict: Mapping) -> List[Dict[str, Any]]:
        states: List[Dict[str, Any]] = [{} for _ in self.schedules]
        for key, value in state_dict.items():
            if not (isinstance(key, str) and key.startswith(_STAGE_PREFIX) and "." in key):
                continue
            index_text, stage_key = key[len(_STAGE_PREFIX):].split(".", 1)
            if not index_text.isdigit() or int(index_text) >= len(self.schedules):
                raise ValueError(
                    f"`state_dict` has an entry {key!r} for a stage this schedule of {len(self.schedules)} "
                    "stages does not have: it comes from another schedule."
                )
            states[int(index_text)][stage_key] = value
        return states

    def set_state_dict(self, state_dict: Mapping) -> None:
        """Resume from a :meth:`state_dict`: the position and every stage's state.

        Everything is checked first; a refused ``state_dict`` (or a stage that
        refuses its part) leaves the schedule as it was.

        Raises:
            TypeError: ``state_dict`` is not a mapping, or an entry has the wrong type.
            KeyError: ``last_epoch``, ``last_lr`` or a stage's entries are missing.
            ValueError: an entry is out of range, or the state is from other stages or milestones.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(
                f"`state_dict` must be a mapping from the scheduler's state_dict(), got {type(state_dict).__name__}."
            )
        missing = [key for key in ("last_epoch", "last_lr") if key not in state_dict]
        if missing:
            raise KeyError(f"`state_dict` lacks {' and '.join(f'`{key}`' for key in missing)}.")
        last_epoch = checked_step_index(state_dict["last_epoch"])
        last_lr = checked_non_negative(state_dict["last_lr"], "last_lr")
        states = self._stage_states(state_dict)
        empty = [index for index, state in enumerate(states) if not state]
        if empty:
            raise KeyError(
                f"`state_dict` has no entries for stage(s) {empty} (`{_STAGE_PREFIX}<i>.last_epoch`, ...): "
                "it is not a SequentialSchedule's state_dict."
            )
        position = max(last_epoch, 0)
        active = self.stage_index(position)
        for index, state in enumerate(states):
            prefix = f"{_STAGE_PREFIX}{index}."
            missing = [prefix + key for key in ("last_epoch", "last_lr") if key not in state]
            if missing:
                raise KeyError(f"`state_dict` lacks {' and '.join(f'`{key}`' for key in missing)}.")
            # Paddle's own schedulers take any value; check the two entries every LRScheduler has here.
            try:
                stage_epoch = checked_step_index(state["last_epoch"])
                checked_non_negative(state["last_lr"], "last_lr")
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"stage {index} of `state_dict` ({prefix}*): {exc}") from exc
            expected = self.stage_step(position) if index == active else (0 if index > active else None)
            if expected is not None and stage_epoch != expected:
                raise ValueError(
                    f"`state_dict` has stage {index} at its step {state['last_epoch']}, but step {last_epoch} with "
                    f"milestones {self.milestones} puts it at {expected}: the state is from other milestones."
                )
        saved = [copy.deepcopy(schedule.state_dict()) for schedule in self.schedules]
        try:
            for schedule, state in zip(self.schedules, states):
                schedule.set_state_dict(state)
        except Exception:
            for schedule, state in zip(self.schedules, saved):
                schedule.set_state_dict(state)
            raise
        self.last_epoch = last_epoch
        self.last_lr = last_lr
        self._stage_position = position

    set_dict = set_state_dict  # Paddle's alias would call the base class's method


#: Keys of a ``"sequential"`` stage that are not arguments of the stage's schedule.
_STAGE_KEYS = ("name", "num_steps")


def _stage_spec(stages: Any) -> List[Mapping]:
    stages = _non_empty_list(
        stages, "stages", 'a list of dicts such as {"name": "cosine", "num_steps": 1000, ...}', "stage"
    )
    for index, stage in enumerate(stages):
        if not isinstance(stage, Mapping):
            raise TypeError(
                f'`stages[{index}]` must be a dict such as {{"name": "cosine", "num_steps": 1000}}, '
                f"got {type(stage).__name__} {stage!r}."
            )
        if "name" not in stage:
            raise ValueError(f"`stages[{index}]` lacks 'name', the registry name of its schedule: {dict(stage)!r}.")
        if "num_training_steps" in stage:
            raise ValueError(
                f"`stages[{index}]` sets 'num_training_steps'; a stage's length is its 'num_steps' "
                "(the stage's schedule spans it)."
            )
        if "last_epoch" in stage:
            raise ValueError(
                f"`stages[{index}]` sets 'last_epoch'; every stage starts at its own step 0, "
                "pass last_epoch to the sequential schedule to resume."
            )
    return stages


def _stage_lengths(stages: List[Mapping], num_training_steps: Optional[int]) -> List[Optional[int]]:
    """Each stage's ``num_steps``; the last one's may be left out, it then fills up ``num_training_steps``."""
    lengths: List[Optional[int]] = []
    for index, stage in enumerate(stages):
        if "num_steps" in stage:
            lengths.append(checked_step_count(stage["num_steps"], f"stages[{index}]['num_steps']", minimum=1))
        elif index < len(stages) - 1:
            raise ValueError(
                f"`stages[{index}]` lacks 'num_steps' (the stage's length); only the last stage may leave it out."
            )
        else:
            lengths.append(None)
    earlier = sum(lengths[:-1])
    if num_training_steps is None:
        return lengths
    if lengths[-1] is None:
        if num_training_steps - earlier < 1:
            raise ValueError(
                f"The stages before the last take {earlier} steps, which leaves no step of `num_training_steps` "
                f"({num_training_steps}) for `stages[{len(stages) - 1}]`."
            )
        lengths[-1] = num_training_steps - earlier
    elif earlier + lengths[-1] != num_training_steps:
        raise ValueError(
            f"The stages' 'num_steps' add up to {earlier + lengths[-1]}, but `num_training_steps` is "
            f"{num_training_steps}; leave out the last stage's 'num_steps' to let it fill the rest."
        )
    return lengths


def _first_stage_option(stage: Mapping, key: str, value: Any, given: bool) -> Dict[str, Any]:
    """The run's ``num_warmup_steps`` / ``lr_warmup_init`` for the first stage, unless it sets its own."""
    if key in stage:
        if given and stage[key] != value:
            raise ValueError(
                f"`stages[0]['{key}']` ({stage[key]!r}) contradicts `{key}` ({value!r}) given to the sequential "
                "schedule, which applies to the first stage: keep one."
            )
        return {}
    return {key: value} if given else {}


def _check_first_stage_warms_up(stage: Mapping, num_warmup_steps: Any, given: bool,
                                stage_warms_up: Callable[[str], bool]) -> None:
    """The run's warmup goes to the first stage: refuse it when that stage's schedule has none (it would be dropped)."""
    if not given or "num_warmup_steps" in stage:
        return
    try:
        warms_up = stage_warms_up(stage["name"])
    except (TypeError, ValueError):
        return  # an unknown name: building the stage says so, naming the stage
    if not warms_up:
        raise ValueError(
            f"`stages[0]` ({stage['name']!r}) has no warmup, but the run's `num_warmup_steps` ({num_warmup_steps}) "
            "goes to the first stage and would not be taken: set the warmup to 0, or start with a schedule "
            "that warms up."
        )


#: Builds one stage: ``build_stage(name, learning_rate, num_training_steps=..., **options)`` (the registry's
#: ``get_scheduler``, which hands itself to :func:`schedule_of_stages`).
StageBuilder = Callable[..., LRScheduler]


def schedule_of_stages(
    learning_rate: float, stages: Any, build_stage: StageBuilder, stage_warms_up: Callable[[str], bool], *,
    num_warmup_steps: Optional[int] = None, num_training_steps: Optional[int] = None,
    shared: Optional[Mapping[str, Any]] = None, lr_warmup_init: Optional[float] = None, last_epoch: int = -1,
) -> SequentialSchedule:
    """The :class:`SequentialSchedule` of ``stages`` (``[{"name": ..., "num_steps": ..., **options}, ...]``).

    What ``get_sequential_schedule`` (the registry's ``"sequential"``)
    builds; the rules of ``stages`` are its. Each stage is
    ``build_stage(name, learning_rate, num_training_steps=num_steps,
    **options)`` and ``stage_warms_up(name)`` says whether its schedule has a
    warmup: the registry passes its own ``get_scheduler`` and answer, so this
    module needs no table of names. ``shared`` holds the options that go to
    every stage that does not set its own.
    """
    stages = _stage_spec(stages)
    if num_training_steps is not None:
        num_training_steps = checked_step_count(num_training_steps, "num_training_steps", minimum=1)
    lengths = _stage_lengths(stages, num_training_steps)
    given_warmup = num_warmup_steps is not None and num_warmup_steps != 0
    schedules = []
    for index, (stage, length) in enumerate(zip(stages, lengths)):
        options = {key: value for key, value in stage.items() if key not in _STAGE_KEYS}
        stage_lr = options.pop("learning_rate", learning_rate)
        if index == 0:
            _check_first_stage_warms_up(stage, num_warmup_steps, given_warmup, stage_warms_up)
            options.update(_first_stage_option(stage, "num_warmup_steps", num_warmup_steps, given_warmup))
            options.update(_first_stage_option(stage, "lr_warmup_init", lr_warmup_init, lr_warmup_init is not None))
        options.setdefault("num_warmup_steps", 0)
        options = {**(shared or {}), **options}
        try:
            schedule = build_stage(stage["name"], stage_lr, num_training_steps=length, **options)
        except (TypeError, ValueError, KeyError) as exc:
            raise type(exc)(f"`stages[{index}]` ({stage['name']!r}): {exc}") from exc
        schedules.append(schedule)
    milestones = []
    for length in lengths[:-1]:
        milestones.append((milestones[-1] if milestones else 0) + length)
    try:
        return SequentialSchedule(schedules, milestones, last_epoch=last_epoch)
    except TypeError as exc:  # a stage the sequence cannot hold (reduce_lr_on_plateau)
        raise TypeError(str(exc).replace("`schedules[", "`stages[")) from exc
