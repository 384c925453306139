"""What a Trainer run keeps beyond the framework's checkpoint files, and its resume.

Each checkpoint directory gets one more file, :data:`STATE_FILE`, with the
EMA's state and the weight-decay schedule's position (the frameworks'
unified-checkpoint format keeps only the optimizer's tensors):
:func:`save_run_state` writes it after the framework's checkpoint, and
:class:`RunStateCallback` reads it back when a resumed run begins (or, for a
run already finished, when ``train`` finds it so).
"""
from __future__ import annotations

import os
import warnings
from typing import Any, Dict, Optional

import paddle

from paddle_llrd.integrations.checkpoints import atomic_write
from paddle_llrd.optim.ema import ExponentialMovingAverage
from paddle_llrd.warning_classes import CheckpointMatchWarning

__all__ = ["STATE_FILE", "RunStateCallback", "checkpoint_directory", "run_state", "save_run_state"]

#: The file each checkpoint directory gets for the EMA and the weight-decay schedule.
STATE_FILE = "paddle_llrd_state.pdparams"
# What a resumed EMA keeps of this run's arguments (the checkpoint gives the shadows and the update count).
_EMA_SETTINGS = ("decay", "warmup", "warmup_style", "warmup_power", "warmup_gamma")
# Both frameworks name checkpoint directories f"{PREFIX_CHECKPOINT_DIR}-{global_step}" in output_dir.
_CHECKPOINT_PREFIX = "checkpoint"


def checkpoint_directory(output_dir: str, global_step: int) -> str:
    """The directory the frameworks' ``_save_checkpoint`` writes at ``global_step``.

    Examples:
        >>> checkpoint_directory("out", 3)
        'out/checkpoint-3'
    """
    return os.path.join(output_dir, f"{_CHECKPOINT_PREFIX}-{global_step}")


def run_state(ema: Optional[ExponentialMovingAverage], optimizer: Any, global_step: int) -> Dict[str, Any]:
    """The entries of :data:`STATE_FILE`: ``"ema"`` (a registered EMA's state, which records that it
    followed ``global_step`` optimizer steps) and ``"weight_decay_schedule"`` (the optimizer's
    schedule's), where there are any."""
    state: Dict[str, Any] = {}
    if ema is not None and ema.registered:
        state["ema"] = ema.state_dict(optimizer_steps=global_step)
    schedule = getattr(optimizer, "weight_decay_schedule", None)
    if schedule is not None:
        state["weight_decay_schedule"] = schedule.state_dict()
    return state


def save_run_state(directory: str, global_step: int, ema: Optional[ExponentialMovingAverage], optimizer: Any) -> None:
    """Write :func:`run_state` into the checkpoint ``directory`` when there is any (under a temporary name,
    then renamed: a kill leaves no half-written file)."""
    state = run_state(ema, optimizer, global_step)
    if state:
        atomic_write(os.path.join(directory, STATE_FILE), lambda path: paddle.save(state, path))


class RunStateCallback:
    """Trainer callback: when a run resumed from :attr:`resume_from` begins,
    the EMA and the optimizer's weight-decay schedule continue from its
    :data:`STATE_FILE` (:meth:`restore`).

    Comes after :class:`~paddle_llrd.integrations.averaging.EMACallback`,
    which registers the EMA.
    """

    def __init__(self, ema: Optional[ExponentialMovingAverage]) -> None:
        self.ema = ema
        #: The checkpoint directory the coming ``train`` resumes from (set by it), or ``None``.
        self.resume_from: Optional[str] = None

    def on_train_begin(self, args: Any, state: Any, control: Any, optimizer: Any = None, **kwargs: Any) -> None:
        self.restore(state.global_step, optimizer)

    def restore(self, global_step: int, optimizer: Any) -> None:
        """The EMA (registered) and the weight-decay schedule of ``optimizer`` as :attr:`resume_from`'s
        :data:`STATE_FILE` has them, at the resumed ``global_step``. The EMA keeps this run's ``decay`` and
        warm-up, as the lr schedule keeps this run's settings (the warm-up continues from the checkpoint's
        update count); an EMA that followed another step count than the weights is loaded with a
        :class:`~paddle_llrd.CheckpointMatchWarning` naming both. Without the file both restart (the schedule
        at the global step), with a :class:`~paddle_llrd.CheckpointMatchWarning` each."""
        saved: Dict[str, Any] = {}
        if self.resume_from is not None:
            path = os.path.join(self.resume_from, STATE_FILE)
            if os.path.isfile(path):
                saved = paddle.load(path)
        resumed = self.resume_from is not None and global_step > 0
        if self.ema is not None:
            self._restore_ema(saved.get("ema"), global_step, resumed)
        schedule = getattr(optimizer, "weight_decay_schedule", None)
        if schedule is None:
            return
        if saved.get("weight_decay_schedule") is not None:
            schedule.set_state_dict(saved["weight_decay_schedule"])
        elif resumed and schedule.current_step == 0:  # not restored by an optimizer of the caller's either
            warnings.warn(
                f"{self.resume_from} has no weight-decay schedule position in {STATE_FILE}: the schedule "
                f"resumes at the trainer's global step {global_step}",
                CheckpointMatchWarning,
                stacklevel=2,
            )
            schedule.current_step = global_step

    def _restore_ema(self, saved: Optional[Dict[str, Any]], global_step: int, resumed: bool) -> None:
        if saved is not None:
            settings = {name: getattr(self.ema, name) for name in _EMA_SETTINGS}
            self.ema.set_state_dict(saved, optimizer_steps=global_step)
            for name, value in settings.items():
                setattr(self.ema, name, value)
        elif resumed:
            warnings.warn(
                f"{self.resume_from} has no EMA in {STATE_FILE}: the average starts again at the "
                f"resumed weights (step {global_step})",
                CheckpointMatchWarning,
                stacklevel=3,
            )
