"""One implementation of ``LLRDTrainer`` for PaddleNLP's and PaddleFormers' ``Trainer``.

:class:`LLRDTrainerMixin` only overrides the Trainer's hooks and delegates:
the optimizer and the lr schedule come from
:mod:`~paddle_llrd.integrations.builders`; four callbacks do the rest
(:mod:`~paddle_llrd.integrations.averaging`: the EMA,
:mod:`~paddle_llrd.integrations.run_state`: what a resume restores,
:mod:`~paddle_llrd.integrations.plateau_callback`: ``reduce_lr_on_plateau`` on the
evaluation metric, :mod:`~paddle_llrd.integrations.layer_logging`: the
per-group logs). Nothing here imports a framework: each integration module
mixes the class into its framework's ``Trainer`` and binds the framework's
classes (:attr:`~LLRDTrainerMixin.callback_class`, ...).
"""
from __future__ import annotations

import functools
import logging
import os
import time
from typing import Any, Callable, Dict, Optional

from paddle.optimizer.lr import LRScheduler

from paddle_llrd.integrations.training_arguments import EMA_DIRECTORY
from paddle_llrd.integrations.averaging import EMA_EVALUATION, EMACallback, evaluates_the_average, trainer_ema
from paddle_llrd.integrations.builders import (
    build_optimizer,
    build_scheduler,
    check_optim,
    check_trainer_keywords,
    layer_settings,
    optimizer_parameters,
)
from paddle_llrd.integrations.layer_logging import LayerLoggingCallback
from paddle_llrd.integrations.plateau_callback import PlateauCallback
from paddle_llrd.integrations.checkpoints import newest_complete_checkpoint, read_manifest
from paddle_llrd.integrations.resume import (
    ACCEPT_FIELD,
    CheckpointResumeError,
    check_resumable,
    resolved_checkpoint,
    run_settings,
)
from paddle_llrd.integrations.run_state import RunStateCallback, checkpoint_directory, save_run_state
from paddle_llrd.integrations.saving import save_checkpoint_staged, save_final_staged
from paddle_llrd.integrations.visualdl import IntHyperparametersCallback
from paddle_llrd.optim.ema import ExponentialMovingAverage

__all__ = ["LLRDTrainerMixin", "last_complete_checkpoint", "with_framework_events"]


@functools.lru_cache(maxsize=None)
def with_framework_events(callback_class: type, framework_class: type) -> type:
    """``callback_class`` mixed in before a framework's callback class
    (its ``TrainerCallback``, which handles every event ``callback_class``
    does not, or a callback to extend such as its ``VisualDLCallback``).

    Examples:
        >>> class FrameworkCallback:
        ...     def on_log(self, *args, **kwargs):
        ...         return "framework"
        >>> class Mine:
        ...     def on_train_begin(self, *args, **kwargs):
        ...         return "mine"
        >>> callback = with_framework_events(Mine, FrameworkCallback)()
        >>> callback.on_train_begin(), callback.on_log(), type(callback).__name__
        ('mine', 'framework', 'Mine')
    """
    return type(callback_class.__name__, (callback_class, framework_class), {"__module__": callback_class.__module__})


def last_complete_checkpoint(folder: str, say: Callable[[str], None]) -> Optional[str]:
    """The newest complete checkpoint in ``folder`` (``None`` without one), each newer folder it skips said
    in one line through ``say``: the frameworks' ``get_last_checkpoint``, which takes the highest number
    whether or not its save finished. Each integration module has it as ``get_last_checkpoint(folder)``,
    saying through its framework's logger."""
    checkpoint, skipped = newest_complete_checkpoint(folder)
    for line in skipped:
        say(line)
    return checkpoint


class LLRDTrainerMixin:
    """A framework ``Trainer`` that trains with :class:`paddle_llrd.AdamWDL`,
    schedules from paddle_llrd's registry, an optional weight-decay schedule
    and an optional EMA of the weights; mixed in first
    (``class LLRDTrainer(LLRDTrainerMixin, Trainer)``).

    The settings come from ``LLRDTrainingArguments`` (``layerwise_decay``,
    ``layer_map``, ``lr_scheduler_type``/``lr_scheduler_kwargs``,
    ``weight_decay_end``/``weight_decay_incr_style``, ``ema_decay``/
    ``ema_eval``); with the framework's plain ``TrainingArguments`` they take
    their defaults (all off).

    Args:
        layerwise_decay: the per-layer decay ``d`` (default: the field, else
            ``1.0``, no decay).
        n_layers: the number of blocks ``L``; by default the model config's
            ``num_hidden_layers``, else counted from the parameter names.
        set_param_lr_fun: a ratio function called as
            ``set_param_lr_fun(layerwise_decay, name_dict, n_layers, param)``
            with ``name_dict = {p.name: structured_name}``, instead of the
            ``layer_map`` field (e.g. :func:`paddle_llrd.layerwise_lr_decay`).

    The keywords win over the fields. An optimizer passed through
    ``optimizers=(optimizer, scheduler)`` is used as it is.

    Attributes:
        ema: the :class:`paddle_llrd.ExponentialMovingAverage` when
            ``ema_decay > 0``, else ``None``.
        layer_map: the :class:`paddle_llrd.LayerMap` giving the ratios.
        layer_settings: the :class:`~paddle_llrd.integrations.builders.LayerSettings`
            (``layerwise_decay``, ``layer_map``, ``n_layers`` and
            ``set_param_lr_fun``, each also an attribute of its own).

    Raises:
        TypeError: ``layerwise_decay`` is not a real number, ``n_layers``
            not an int, or ``set_param_lr_fun`` not callable.
        ValueError: ``layerwise_decay <= 0``, ``n_layers < 1``, a keyword
            that contradicts its field, layer-decay or weight-decay-ramp
            settings with an optimizer passed in, ``layerwise_decay != 1``
            for a model whose names ``layer_map`` finds no block in, or
            ``TrainingArguments.optim`` other than ``"adamw"``.
    """

    #: The framework's ``TrainerCallback``: the base of this trainer's callbacks.
    callback_class: type
    #: The framework's ``VisualDLCallback``, which gets the arguments' bools as ints.
    visualdl_callback_class: Optional[type] = None
    #: The framework's ``TrainOutput``, which ``train`` returns.
    train_output_class: Callable[..., Any]
    #: Reads a checkpoint folder's ``TrainerState`` as the framework's resume does.
    load_trainer_state: Callable[[str], Any]
    #: Where the one-line summary at train start goes (each integration sets its framework's logger).
    logger: Any = logging.getLogger("paddle_llrd")
    #: Whether a plain list given to ``set_optimizer_grouped_parameters`` keeps
    #: biases and norms out of weight decay (PaddleFormers' rule; PaddleNLP
    #: decays every parameter of the groups).
    parameter_lists_keep_no_decay: bool = False

    def __init__(
        self,
        *args: Any,
        layerwise_decay: Optional[float] = None,
        n_layers: Optional[int] = None,
        set_param_lr_fun: Optional[Callable[..., Optional[float]]] = None,
        **kwargs: Any,
    ):
        layerwise_decay, n_layers = check_trainer_keywords(layerwise_decay, n_layers, set_param_lr_fun)
        super().__init__(*args, **kwargs)
        check_optim(self.args)
        settings = layer_settings(
            self.args, self.model, layerwise_decay=layerwise_decay, n_layers=n_layers,
            set_param_lr_fun=set_param_lr_fun, optimizer_given=self.optimizer is not None,
        )
        self.layer_settings = settings
        self.layerwise_decay = settings.layerwise_decay
        self.layer_map = settings.layer_map
        self.n_layers = settings.n_layers
        self.set_param_lr_fun = settings.set_param_lr_fun
        self.ema: Optional[ExponentialMovingAverage] = trainer_ema(self.args, self.model)
        self._num_training_steps: Optional[int] = None
        self._saving_checkpoint = False  # while the framework writes a checkpoint (save_model then stages nothing)
        self._train_started = time.monotonic()
        # In this order when training begins: the EMA registers, then the run state restores it.
        if self.ema is not None:
            self.add_callback(self._framework_callback(EMACallback, self.ema))
        self._run_state = self._framework_callback(RunStateCallback, self.ema)
        self._layer_logging = self._framework_callback(
            LayerLoggingCallback, settings, self.logger, self.ema.decay if self.ema is not None else None
        )
        for callback in (self._run_state, self._framework_callback(PlateauCallback), self._layer_logging):
            self.add_callback(callback)
        self._fix_visualdl_callbacks()

    def _framework_callback(self, callback_class: type, *args: Any) -> Any:
        return with_framework_events(callback_class, self.callback_class)(*args)

    def _fix_visualdl_callbacks(self) -> None:
        # report_to's VisualDL (the frameworks' default), whatever TrainingArguments the trainer was given
        framework_class = self.visualdl_callback_class
        if framework_class is None:
            return
        fixed = with_framework_events(IntHyperparametersCallback, framework_class)
        callbacks = self.callback_handler.callbacks
        for index, callback in enumerate(callbacks):
            if type(callback) is framework_class:
                callbacks[index] = fixed(callback.vdl_writer)

    # ------------------------------------------------------------------ optimizer and schedule
    def create_optimizer_and_scheduler(self, num_training_steps: int):
        """The framework's method, remembering ``num_training_steps`` for the weight-decay schedule."""
        self._num_training_steps = num_training_steps
        return super().create_optimizer_and_scheduler(num_training_steps)

    def create_optimizer(self, lr_scheduler: Optional[LRScheduler] = None):
        """Build the :class:`~paddle_llrd.AdamWDL` of the ``TrainingArguments``
        (:func:`~paddle_llrd.integrations.builders.build_optimizer`), unless
        one was passed in.

        ``learning_rate`` is ``lr_scheduler`` (else the trainer's scheduler,
        else ``args.learning_rate``); ``weight_decay`` is the coefficient, or
        with ``weight_decay_end`` the start of a
        :class:`~paddle_llrd.WeightDecaySchedule` that reaches
        ``weight_decay_end`` at the run's last step; bias and norm parameters
        are kept out of weight decay unless parameter groups were set with
        ``set_optimizer_grouped_parameters`` (then each group's own
        ``weight_decay`` rules, as in the frameworks). Frozen parameters
        (``stop_gradient``) are left out.
        """
        if self.optimizer is not None:
            return self.optimizer
        parameters, apply_decay_param_fun = optimizer_parameters(
            self.model, self.optimizer_grouped_parameters, lists_keep_the_exclusion=self.parameter_lists_keep_no_decay
        )
        learning_rate = lr_scheduler if lr_scheduler is not None else self.lr_scheduler
        self.optimizer = build_optimizer(
            self.args, self.model, self.layer_settings,
            learning_rate=learning_rate if learning_rate is not None else self.args.learning_rate,
            parameters=parameters, apply_decay_param_fun=apply_decay_param_fun,
            num_training_steps=self._num_training_steps,
        )
        return self.optimizer

    def create_scheduler(self, num_training_steps: int):
        """Build the schedule ``lr_scheduler_type`` names with
        :func:`paddle_llrd.get_scheduler`
        (:func:`~paddle_llrd.integrations.builders.build_scheduler`), unless one was passed in."""
        if self.lr_scheduler is None:
            self.lr_scheduler = build_scheduler(self.args, num_training_steps)
        return self.lr_scheduler

    # ------------------------------------------------------------------ runs, logs and checkpoints
    def train(self, resume_from_checkpoint: Any = None, *args: Any, **kwargs: Any):
        """The framework's ``train``, resuming only what this run can continue.

        ``resume_from_checkpoint=True`` means the newest complete checkpoint
        in ``output_dir`` (a folder whose save did not finish is skipped, said
        in one line). A checkpoint that is incomplete, lacks paddle_llrd's
        manifest or was saved with other paddle_llrd settings stops the run
        before it trains (:func:`~paddle_llrd.integrations.resume.check_resumable`;
        ``resume_with_new_settings`` lets the last two go on). A checkpoint at
        ``max_steps`` is a finished run: the weights, the optimizer, the
        schedule and the EMA are loaded as saved, nothing is trained, and one
        line says so; one past ``max_steps`` stops the run.

        Raises:
            CheckpointResumeError: a resume that cannot be served, in one line.
        """
        self._train_started = time.monotonic()
        checkpoint = resolved_checkpoint(resume_from_checkpoint, self.args.output_dir, self.logger.warning)
        if checkpoint is not None:
            check_resumable(str(checkpoint), self.run_settings, accept=bool(getattr(self.args, ACCEPT_FIELD, False)),
                            say=self.logger.warning)
        self._run_state.resume_from = checkpoint
        return super().train(checkpoint, *args, **kwargs)

    @property
    def run_settings(self) -> Dict[str, Any]:
        """This run's paddle_llrd settings, which each checkpoint records and a resume must match
        (:func:`~paddle_llrd.integrations.resume.run_settings`)."""
        return run_settings(self.args, self.layer_settings)

    def _inner_training_loop(self, args: Any, model: Any, train_dataloader: Any, len_dataloader: Any,
                             max_steps: int, *rest: Any, **kwargs: Any):
        # Both frameworks load the checkpoint, then (here) run the loop, which takes a step before it
        # compares the global step with max_steps: a finished run is answered here instead.
        checkpoint = self._run_state.resume_from
        manifest = read_manifest(checkpoint) if checkpoint is not None else None
        step = None if manifest is None else int(manifest["global_step"])
        if step is None or step < max_steps:
            return super()._inner_training_loop(args, model, train_dataloader, len_dataloader, max_steps,
                                                *rest, **kwargs)
        if step > max_steps:
            raise CheckpointResumeError(
                f"cannot resume {checkpoint}: it is at step {step}, past this run's max_steps {max_steps}; set "
                f"max_steps to {step} or more, resume from a checkpoint at step {max_steps} or before, or write "
                "to a fresh output_dir"
            )
        return self._finished_run(checkpoint, max_steps)

    def _finished_run(self, checkpoint: str, max_steps: int) -> Any:
        """``train``'s answer for a checkpoint at ``max_steps``: its state as saved (the weights, optimizer
        and schedule are loaded already; here the trainer state, the EMA and the weight-decay schedule),
        nothing trained, one line."""
        self.state = self.load_trainer_state(checkpoint)
        self.state.max_steps = int(max_steps)
        if self.ema is not None:
            self.ema.register()
        self._run_state.restore(self.state.global_step, self.optimizer)
        self.is_in_train = False
        self.logger.warning(f"{checkpoint} is at max_steps {max_steps}: the run is finished and trains no "
                            "further (weights, optimizer, schedule and EMA as saved there)")
        runtime = max(time.monotonic() - self._train_started, 1e-4)
        metrics = {"train_runtime": round(runtime, 4), "train_samples_per_second": 0.0,
                   "train_steps_per_second": 0.0, "progress_or_epoch": self.state.epoch}
        return self.train_output_class(self.state.global_step, 0.0, metrics)

    def log(self, logs: Dict[str, float], *args: Any, **kwargs: Any) -> None:
        """The framework's ``log``; a training log (one with ``loss``) also
        gets, for the step the framework's ``learning_rate`` describes (the
        coming one: the frameworks read it after the schedule has stepped),
        ``learning_rate/<group>`` (that lr times the layer group's ratio) and
        ``weight_decay`` (when scheduled); and with ``log_grad_norms``, for
        the step just taken, ``grad_norm`` and ``grad_norm/<group>`` (the
        norms of the gradients it used, before clipping)."""
        if "loss" in logs:
            logs.update(self._layer_logging.entries(float(self._get_learning_rate())))
        return super().log(logs, *args, **kwargs)

    def _save_checkpoint(self, model: Any, metrics: Optional[Dict[str, float]] = None):
        """The framework's checkpoint plus :data:`~paddle_llrd.integrations.run_state.STATE_FILE`
        (when there is an EMA or a weight-decay schedule), written whole or not at all
        (:func:`~paddle_llrd.integrations.saving.save_checkpoint_staged`): a run killed while it saves
        leaves the earlier checkpoints and a ``tmp-checkpoint-N`` folder that no resume takes."""

        def save() -> Any:
            self._saving_checkpoint = True
            try:
                result = super(LLRDTrainerMixin, self)._save_checkpoint(model, metrics=metrics)
            finally:
                self._saving_checkpoint = False
            if self.args.should_save:
                directory = checkpoint_directory(self.args.output_dir, self.state.global_step)  # the staged one
                save_run_state(directory, self.state.global_step, self.ema, self.optimizer)
            return result

        return save_checkpoint_staged(self, save, self._manifest_record())

    def _manifest_record(self) -> Dict[str, Any]:
        return {"global_step": int(self.state.global_step), "max_steps": int(self.state.max_steps or 0),
                "settings": self.run_settings}

    def save_model(self, output_dir: Optional[str] = None, *args: Any, **kwargs: Any):
        """The framework's ``save_model``; with an EMA, the averaged model is
        saved too, in the same format, under ``<output_dir>/ema`` (loadable
        with ``from_pretrained``). Checkpoints keep the average in
        :data:`~paddle_llrd.integrations.run_state.STATE_FILE` instead.

        The model and its EMA are written into ``<output_dir>/tmp-final-model``
        first, then moved into ``output_dir`` with the manifest last, so that
        a complete final save is one whose manifest is there and matches
        (:func:`~paddle_llrd.integrations.checkpoints.incompleteness`)."""
        if self._saving_checkpoint:  # a checkpoint's model, in its staging folder
            return super().save_model(output_dir, *args, **kwargs)
        target = output_dir if output_dir is not None else self.args.output_dir

        def save(folder: str) -> Any:
            result = super(LLRDTrainerMixin, self).save_model(folder, *args, **kwargs)
            if self.ema is not None and self.ema.registered:
                with self.ema.average_parameters():
                    super(LLRDTrainerMixin, self).save_model(os.path.join(folder, EMA_DIRECTORY), *args, **kwargs)
            return result

        return save_final_staged(self.args, target, save, self._manifest_record())

    def evaluation_loop(self, dataloader: Any, description: str, *args: Any, **kwargs: Any) -> Any:
        """The framework's ``evaluation_loop``; the loop of ``evaluate``, with
        an EMA and ``ema_eval``, runs once more with the averaged weights
        (:func:`~paddle_llrd.integrations.averaging.evaluates_the_average`),
        whose metrics (prefix ``<metric_key_prefix>_ema``: ``eval_ema_loss``,
        ...) join the output's; the trained weights are back afterwards."""
        output = super().evaluation_loop(dataloader, description, *args, **kwargs)
        if evaluates_the_average(self.ema, self.args, description):
            prefix = kwargs.get("metric_key_prefix", "eval")
            with self.ema.average_parameters():
                averaged = super().evaluation_loop(
                    dataloader, EMA_EVALUATION, *args, **{**kwargs, "metric_key_prefix": f"{prefix}_ema"}
                )
            output.metrics.update(averaged.metrics)
        return output
