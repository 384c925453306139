"""One implementation of ``LLRDTrainer`` for PaddleNLP's and PaddleFormers' ``Trainer``.

The two frameworks share the ``Trainer`` API this needs (``create_optimizer``,
``create_scheduler``, ``train``, ``_save_checkpoint``, ``save_model``,
``evaluate`` and the callbacks ``on_train_begin``/``on_optimizer_end``), so
:class:`LLRDTrainerMixin` holds everything and each integration module only
mixes it into its framework's classes. Nothing here imports a framework.

What a run keeps beyond the framework's own checkpoint files goes into one
more file per checkpoint, ``paddle_llrd_state.pdparams`` (:data:`STATE_FILE`):
the EMA's state and the weight-decay schedule's position (the frameworks'
unified-checkpoint format keeps only the optimizer's tensors).
"""
from __future__ import annotations

import functools
import inspect
import logging
import os
import warnings
from typing import Any, Callable, Dict, Optional

import paddle
from paddle.optimizer.lr import ReduceOnPlateau

from paddle_llrd.optim.adamwdl import EXTRA_STATE_KEYS, WEIGHT_DECAY_SCHEDULE_KEY, AdamWDL
from paddle_llrd.argument_checks import checked_count
from paddle_llrd.optim.ema import ExponentialMovingAverage
from paddle_llrd.integrations._arguments import (
    EMA_DIRECTORY,
    check_ema_decay,
    check_layerwise_decay,
    plain_name,
)
from paddle_llrd.layer_decay.grad_norms import TOTAL, group_grad_norms, layer_group_name, layer_groups
from paddle_llrd.argument_checks import LAYERWISE_DECAY_ABOVE_ONE
from paddle_llrd.layer_decay.group_names import LayerGroupNames, layer_group_names
from paddle_llrd.layer_decay.layer_maps import build_name_dict, no_decay_parameter_names, resolve_layer_map
from paddle_llrd.schedules import registry
from paddle_llrd.schedules.registry import get_scheduler
from paddle_llrd.schedules.weight_decay import WeightDecaySchedule

__all__ = ["STATE_FILE", "LLRDTrainerMixin", "TrainerAdamWDL", "TrainerHooks", "framework_import_error",
           "metric_stepped"]

#: The file each checkpoint directory gets for the EMA and the weight-decay schedule.
STATE_FILE = "paddle_llrd_state.pdparams"
# Both frameworks name checkpoint directories f"{PREFIX_CHECKPOINT_DIR}-{global_step}".
_CHECKPOINT_PREFIX = "checkpoint"


def framework_import_error(module: str, framework: str, install: str, cause: ImportError) -> ImportError:
    """The :class:`ImportError` the integration module ``module`` raises when
    its framework (``framework``, e.g. ``"PaddleFormers 1.2.0"``) does not
    import: what to install (``install``, or the repository's
    ``requirements-<integration>.txt``) and the original failure.

    Examples:
        >>> print(framework_import_error("paddle_llrd.integrations.x", "X 1.0", "pip install x==1.0",
        ...                              ModuleNotFoundError("No module named 'x'")))
        paddle_llrd.integrations.x needs X 1.0 and versions of its dependencies that import beside Paddle 3; install them with: pip install x==1.0 (or `pip install -r requirements-x.txt` from the paddle_llrd repository). The import failed with: No module named 'x'
    """
    integration = module.rsplit(".", 1)[-1]
    return ImportError(
        f"{module} needs {framework} and versions of its dependencies that import beside Paddle 3; "
        f"install them with: {install} (or `pip install -r requirements-{integration}.txt` from the "
        f"paddle_llrd repository). The import failed with: {cause}"
    )


def _step_changed_weights(args: Any, scaler: Any) -> bool:
    """Whether the optimizer step the Trainer just took changed the weights."""
    if getattr(args, "freeze_training", False):  # PaddleFormers' debugging switch skips the step
        return False
    if scaler is None:
        return True
    # An AMP step that found inf/nan skipped the update (Paddle 2.6 spelled the flag "founf").
    found_inf = getattr(scaler, "_cache_found_inf", getattr(scaler, "_cache_founf_inf", False))
    return not bool(found_inf)


class _MetricStepped:
    """A ``ReduceOnPlateau`` (mixed in before it) for a Trainer: the step
    without a metric that the Trainer takes after every optimizer step does
    nothing; the ``LLRDTrainer`` steps it with the evaluation metric after
    each evaluation instead (Hugging Face's Trainer does the same)."""

    def step(self, metrics: Any = None, epoch: Optional[int] = None) -> None:
        if metrics is None:
            return None
        return super().step(metrics, epoch)


@functools.lru_cache(maxsize=None)
def metric_stepped(plateau_class: type) -> type:
    """``plateau_class`` (``ReduceOnPlateau`` or a subclass) whose ``step()`` without a metric does nothing."""
    return type(f"MetricStepped{plateau_class.__name__}", (_MetricStepped, plateau_class), {})


def _metric_key(args: Any) -> str:
    """The key of ``metric_for_best_model`` in the metrics of ``evaluate`` (default: the eval loss)."""
    metric = getattr(args, "metric_for_best_model", None) or "loss"
    return metric if metric.startswith("eval_") else f"eval_{metric}"


class TrainerAdamWDL(AdamWDL):
    """The :class:`~paddle_llrd.AdamWDL` an ``LLRDTrainer`` builds: its
    ``state_dict`` holds tensors only, because PaddleFormers' unified
    checkpoint renames every entry as a parameter's state and fails on any
    other; the trainer keeps the weight-decay schedule's position in
    :data:`STATE_FILE` instead, so a state dict without it is expected here
    (nor are the structured names kept: the trainer builds the same model
    when it resumes, and the state is matched by Paddle's names)."""

    def state_dict(self) -> Dict[str, Any]:
        state = super().state_dict()
        for key in EXTRA_STATE_KEYS:
            state.pop(key, None)
        return state

    def set_state_dict(self, state_dict: Dict[str, Any]) -> None:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=f".*no '{WEIGHT_DECAY_SCHEDULE_KEY}' entry", category=UserWarning)
            super().set_state_dict(state_dict)

    load_state_dict = set_state_dict


class TrainerHooks:
    """Callback events of the ``LLRDTrainer`` itself; mixed with the framework's ``TrainerCallback``."""

    def __init__(self, trainer: "LLRDTrainerMixin") -> None:
        self.trainer = trainer

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # Both frameworks call this after the model, optimizer and schedule are loaded.
        self.trainer._begin_run()

    def on_optimizer_begin(self, args: Any, state: Any, control: Any, scaler: Any = None, **kwargs: Any) -> None:
        # Both frameworks call this with the step's gradients in place (all-reduced, divided by the
        # accumulation steps, still carrying an AMP loss scale) and the schedule at the step's lr.
        self.trainer._record_step(scaler)

    def on_optimizer_end(self, args: Any, state: Any, control: Any, scaler: Any = None, **kwargs: Any) -> None:
        ema = self.trainer.ema
        if ema is not None and ema.registered and _step_changed_weights(args, scaler):
            ema.update()


class LLRDTrainerMixin:
    """A framework ``Trainer`` that trains with :class:`paddle_llrd.AdamWDL`,
    schedules from paddle_llrd's registry, an optional weight-decay schedule
    and an optional EMA of the weights; mixed in first
    (``class LLRDTrainer(LLRDTrainerMixin, Trainer)``).

    The settings come from ``LLRDTrainingArguments`` (``layerwise_decay``,
    ``layer_map``, ``lr_scheduler_type``/``lr_scheduler_kwargs``,
    ``weight_decay_end``/``weight_decay_incr_style``, ``ema_decay``/
    ``ema_eval``); with the framework's plain ``TrainingArguments`` they take
    their defaults (all off). The constructor keywords ``layerwise_decay``,
    ``n_layers`` and ``set_param_lr_fun`` also set them and win over the
    arguments.

    Subclasses set :attr:`hooks_class` (``TrainerHooks`` mixed with the
    framework's ``TrainerCallback``) and :attr:`find_last_checkpoint` (the
    framework's ``get_last_checkpoint``).
    """

    hooks_class: type
    find_last_checkpoint: Callable[[str], Optional[str]]
    #: Where the one-line summary at train start goes (each integration sets its framework's logger).
    logger: Any = logging.getLogger("paddle_llrd")

    def __init__(
        self,
        *args: Any,
        layerwise_decay: Optional[float] = None,
        n_layers: Optional[int] = None,
        set_param_lr_fun: Optional[Callable[..., Optional[float]]] = None,
        **kwargs: Any,
    ):
        if layerwise_decay is not None:
            layerwise_decay = check_layerwise_decay(layerwise_decay)
        if set_param_lr_fun is not None and not callable(set_param_lr_fun):
            raise TypeError(
                "set_param_lr_fun must be callable as fn(layerwise_decay, name_dict, n_layers, param), "
                f"got {type(set_param_lr_fun).__name__} {set_param_lr_fun!r}"
            )
        if n_layers is not None:
            n_layers = checked_count(
                n_layers, "n_layers", owner="LLRDTrainer", meaning="the number of encoder layers", minimum=1
            )
        super().__init__(*args, **kwargs)
        optim = plain_name(self.args.optim)
        if optim != "adamw":
            raise ValueError(
                f"LLRDTrainer always trains with paddle_llrd.AdamWDL, so TrainingArguments.optim "
                f"must be 'adamw', got {optim!r}"
            )
        self.layerwise_decay = self._keyword_or_argument("layerwise_decay", layerwise_decay, 1.0)
        self._refuse_settings_for_a_given_optimizer(set_param_lr_fun)
        self._set_layer_ratios(n_layers, set_param_lr_fun)
        ema_decay = check_ema_decay(getattr(self.args, "ema_decay", 0.0))
        #: The :class:`~paddle_llrd.ExponentialMovingAverage` of the weights when
        #: ``ema_decay > 0`` (registered when training begins), else ``None``.
        self.ema: Optional[ExponentialMovingAverage] = (
            ExponentialMovingAverage(self.model, decay=ema_decay) if ema_decay > 0 else None
        )
        self._resume_checkpoint: Optional[str] = None
        self._num_training_steps: Optional[int] = None
        self._saving_checkpoint = False
        self._training = False  # inside train(): evaluations step a ReduceOnPlateau schedule
        self._evaluating = False  # inside evaluate(): evaluation_loop adds the EMA's evaluation
        # What the training logs add (see log()): set when training begins, and at every optimizer step.
        self._group_names: Optional[LayerGroupNames] = None
        self._lr_ratios: Dict[str, float] = {}
        self._grad_groups: Optional[Dict[str, list]] = None
        self._step_grad_norms: Dict[str, Any] = {}
        self.add_callback(self.hooks_class(self))

    # ------------------------------------------------------------------ settings
    def _keyword_or_argument(self, name: str, keyword: Any, default: Any) -> Any:
        argument = getattr(self.args, name, default)
        if keyword is None:
            return argument
        if argument != default and argument != keyword:
            raise ValueError(
                f"{name} is {keyword!r} as an LLRDTrainer keyword but {argument!r} in the TrainingArguments: "
                "set it in one place"
            )
        return keyword

    def _refuse_settings_for_a_given_optimizer(self, set_param_lr_fun: Optional[Callable[..., Any]]) -> None:
        """An optimizer passed in is used as it is: settings of the one LLRDTrainer
        would build cannot reach it, so they are refused rather than ignored."""
        if self.optimizer is None:
            return
        settings = {
            "layerwise_decay": self.layerwise_decay != 1.0,
            "layer_map": getattr(self.args, "layer_map", "auto") != "auto",
            "set_param_lr_fun": set_param_lr_fun is not None,
            "weight_decay_end": getattr(self.args, "weight_decay_end", None) is not None,
        }
        given = [name for name, is_set in settings.items() if is_set]
        if given:
            raise ValueError(
                f"{', '.join(given)} configure the optimizer LLRDTrainer builds, but an optimizer was passed "
                "in through optimizers=(optimizer, scheduler) and is used as it is: set them on that optimizer, "
                "or let LLRDTrainer build it"
            )

    def _set_layer_ratios(self, n_layers: Optional[int], set_param_lr_fun: Optional[Callable[..., Any]]) -> None:
        layer_map = getattr(self.args, "layer_map", "auto")
        if set_param_lr_fun is not None and layer_map != "auto":
            raise ValueError(
                f"set_param_lr_fun was passed and layer_map={layer_map!r} is set: both give the layer ratios, "
                "use one of them"
            )
        if n_layers is None:
            config_layers = getattr(getattr(self.model, "config", None), "num_hidden_layers", None)
            if config_layers is not None:
                n_layers = checked_count(
                    config_layers,
                    "model.config.num_hidden_layers",
                    owner="LLRDTrainer",
                    meaning="the number of encoder layers, read as n_layers",
                    minimum=1,
                )
        #: The :class:`~paddle_llrd.LayerMap` of the ``layer_map`` field (and ``n_layers``).
        # Without layer decay every ratio is 1: a model without blocks needs no map then.
        decays = set_param_lr_fun is None and self.layerwise_decay != 1.0
        self.layer_map = resolve_layer_map(layer_map, self.model, n_layers, require_blocks=decays)
        self.n_layers = self.layer_map.n_layers
        self.set_param_lr_fun = set_param_lr_fun if set_param_lr_fun is not None else self.layer_map

    # ------------------------------------------------------------------ optimizer and schedules
    def _apply_decay_param_fun(self) -> Callable[[str], bool]:
        excluded = no_decay_parameter_names(self.model)
        decayed = {param.name for param in self.model.parameters() if param.name not in excluded}

        def apply_decay_param_fun(param_name: str) -> bool:
            return param_name in decayed

        return apply_decay_param_fun

    def _grouped_parameters_decay_fun(self, parameters: Any) -> Optional[Callable[[str], bool]]:
        """The decay filter for ``set_optimizer_grouped_parameters(parameters)``:
        none, so every parameter decays by its group's rule, as PaddleNLP's
        ``Trainer`` has it (the PaddleFormers integration overrides this)."""
        return None

    def _weight_decay(self) -> Any:
        """``weight_decay``, or a :class:`~paddle_llrd.WeightDecaySchedule` over the run's steps."""
        args = self.args
        end = getattr(args, "weight_decay_end", None)
        if end is None:
            return args.weight_decay
        steps = self._num_training_steps if self._num_training_steps is not None else args.max_steps
        if steps is None or steps < 0:
            raise ValueError(
                "weight_decay_end needs the number of training steps: build the optimizer through "
                "create_optimizer_and_scheduler(num_training_steps) or set max_steps"
            )
        return WeightDecaySchedule(args.weight_decay, end, total_steps=steps, style=args.weight_decay_incr_style)

    def create_optimizer_and_scheduler(self, num_training_steps: int):
        """The framework's method, remembering ``num_training_steps`` for the weight-decay schedule."""
        self._num_training_steps = num_training_steps
        return super().create_optimizer_and_scheduler(num_training_steps)

    def create_optimizer(self, lr_scheduler: Optional[paddle.optimizer.lr.LRScheduler] = None):
        """Build :class:`paddle_llrd.AdamWDL` from the ``TrainingArguments``.

        ``learning_rate`` is ``lr_scheduler`` (else the trainer's scheduler,
        else ``args.learning_rate``); ``adam_beta1``, ``adam_beta2``,
        ``adam_epsilon`` pass through; ``weight_decay`` is the coefficient, or
        with ``weight_decay_end`` the start of a
        :class:`~paddle_llrd.WeightDecaySchedule` (style
        ``weight_decay_incr_style``) that reaches ``weight_decay_end`` at the
        run's last step; bias and norm parameters are kept out of weight decay
        unless parameter groups were set with
        ``set_optimizer_grouped_parameters`` (then each group's own
        ``weight_decay`` rules, as in the frameworks); ``max_grad_norm > 0``
        clips by global norm; ``fp16_opt_level == "O2"`` sets
        ``multi_precision``. Frozen parameters (``stop_gradient``) are left out.
        """
        if self.optimizer is not None:
            return self.optimizer
        args = self.args
        if self.optimizer_grouped_parameters is not None:
            parameters = self.optimizer_grouped_parameters
            apply_decay_param_fun = self._grouped_parameters_decay_fun(parameters)
        else:
            parameters = [param for param in self.model.parameters() if not param.stop_gradient]
            apply_decay_param_fun = self._apply_decay_param_fun()
        learning_rate = lr_scheduler if lr_scheduler is not None else self.lr_scheduler
        if learning_rate is None:
            learning_rate = args.learning_rate
        grad_clip = paddle.nn.ClipGradByGlobalNorm(args.max_grad_norm) if args.max_grad_norm > 0 else None
        with warnings.catch_warnings():
            # The arguments (or the LLRDTrainer keyword) already warned about a layerwise_decay above 1.
            warnings.filterwarnings("ignore", message=f".*{LAYERWISE_DECAY_ABOVE_ONE}", category=UserWarning)
            self.optimizer = TrainerAdamWDL(
                learning_rate=learning_rate,
                beta1=args.adam_beta1,
                beta2=args.adam_beta2,
                epsilon=args.adam_epsilon,
                parameters=parameters,
                weight_decay=self._weight_decay(),
                apply_decay_param_fun=apply_decay_param_fun,
                grad_clip=grad_clip,
                multi_precision=args.fp16_opt_level == "O2",
                layerwise_decay=self.layerwise_decay,
                n_layers=self.n_layers,
                set_param_lr_fun=self.set_param_lr_fun,
                name_dict=build_name_dict(self.model),
            )
        return self.optimizer

    def create_scheduler(self, num_training_steps: int):
        """Build the schedule with :func:`paddle_llrd.get_scheduler`.

        ``lr_scheduler_type`` names it; warmup is ``warmup_steps`` when
        positive, else ``floor(warmup_ratio * num_training_steps)``; the
        schedule spans ``decay_steps`` when the arguments have a positive one,
        else ``num_training_steps``; ``num_cycles``, ``lr_end``, ``power`` and
        (PaddleFormers) a non-zero ``min_lr`` pass through, as in the
        frameworks' ``Trainer.create_scheduler``, and so does
        ``lr_scheduler_kwargs``, whose entries win over those fields.
        """
        if self.lr_scheduler is None:
            args = self.args
            if args.warmup_steps > 0:
                warmup = args.warmup_steps
            else:
                warmup = int(args.warmup_ratio * num_training_steps)
            decay_steps = getattr(args, "decay_steps", 0) or 0
            options: Dict[str, Any] = {"num_cycles": args.num_cycles, "lr_end": args.lr_end, "power": args.power}
            # 0 is PaddleFormers' "no floor"; passed on, it would clash with a min_lr_rate in lr_scheduler_kwargs
            if getattr(args, "min_lr", 0.0):
                options["min_lr"] = args.min_lr
            options.update(getattr(args, "lr_scheduler_kwargs", None) or {})
            name = plain_name(args.lr_scheduler_type)
            self._warn_about_an_ignored_warmup(name, warmup)
            scheduler = get_scheduler(
                name,
                learning_rate=args.learning_rate,
                num_warmup_steps=warmup,
                num_training_steps=decay_steps if decay_steps > 0 else num_training_steps,
                **options,
            )
            if isinstance(scheduler, ReduceOnPlateau):
                self._check_plateau(scheduler)
                scheduler.__class__ = metric_stepped(type(scheduler))
            self.lr_scheduler = scheduler
        return self.lr_scheduler

    @staticmethod
    def _warn_about_an_ignored_warmup(name: str, warmup: int) -> None:
        function = registry.TYPE_TO_SCHEDULER_FUNCTION[registry._registry_key(name)]
        parameters = inspect.signature(function).parameters
        takes = "num_warmup_steps" in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())
        if warmup > 0 and not takes:
            warnings.warn(
                f"lr_scheduler_type={name!r} has no warmup: the {warmup} warmup steps that warmup_steps/"
                "warmup_ratio ask for are not taken",
                UserWarning,
                stacklevel=3,
            )

    def _check_plateau(self, scheduler: ReduceOnPlateau) -> None:
        """A ``ReduceOnPlateau`` follows the evaluation metric: its mode must
        agree with ``greater_is_better``, and training must evaluate."""
        args = self.args
        greater_is_better = getattr(args, "greater_is_better", None)
        if greater_is_better is None:
            greater_is_better = not _metric_key(args).endswith("loss")  # the frameworks' rule
        if (scheduler.mode == "max") != bool(greater_is_better):
            raise ValueError(
                f"lr_scheduler_type={plain_name(args.lr_scheduler_type)!r} lowers the lr when "
                f"{_metric_key(args)} (metric_for_best_model) stops {'rising' if scheduler.mode == 'max' else 'falling'} "
                f"(mode={scheduler.mode!r}) but greater_is_better={greater_is_better}: set lr_scheduler_kwargs "
                f"{{'mode': {'max' if greater_is_better else 'min'!r}}} or greater_is_better"
            )
        if plain_name(getattr(args, "evaluation_strategy", getattr(args, "eval_strategy", "no"))) == "no":
            warnings.warn(
                f"lr_scheduler_type={plain_name(args.lr_scheduler_type)!r} is stepped on {_metric_key(args)} after "
                "each evaluation, but evaluation_strategy is 'no': the lr stays at learning_rate unless you call "
                "evaluate() during training",
                UserWarning,
                stacklevel=3,
            )

    def _step_plateau(self, metrics: Dict[str, float]) -> None:
        scheduler = self.lr_scheduler
        if not (self._training and isinstance(scheduler, _MetricStepped)):
            return
        key = _metric_key(self.args)
        if key not in metrics:
            raise ValueError(
                f"lr_scheduler_type={plain_name(self.args.lr_scheduler_type)!r} is stepped on {key} "
                f"(metric_for_best_model), which the evaluation did not give; it gave {sorted(metrics)}"
            )
        scheduler.step(metrics[key])

    # ------------------------------------------------------------------ runs and checkpoints
    def train(self, resume_from_checkpoint: Any = None, *args: Any, **kwargs: Any):
        """The framework's ``train``; ``resume_from_checkpoint=True`` means the
        last checkpoint in ``output_dir``, whose :data:`STATE_FILE` restores
        the EMA and the weight-decay schedule."""
        if isinstance(resume_from_checkpoint, bool):
            if resume_from_checkpoint:
                resume_from_checkpoint = type(self).find_last_checkpoint(self.args.output_dir)
                if resume_from_checkpoint is None:
                    raise ValueError(f"resume_from_checkpoint=True but {self.args.output_dir} has no checkpoint")
            else:
                resume_from_checkpoint = None
        self._resume_checkpoint = resume_from_checkpoint
        self._training = True
        try:
            return super().train(resume_from_checkpoint, *args, **kwargs)
        finally:
            self._training = False

    def _begin_run(self) -> None:
        """Start the EMA at the weights training starts from, restore a resumed
        run's state, find the layer groups the logs report, and log the summary line."""
        self._restore_run_state()
        self._set_up_logged_groups()
        self.logger.info(self._summary())

    def _optimizer(self) -> Any:
        """The AdamWDL (or an optimizer passed in) under the framework's distributed wrappers (two for sharding)."""
        optimizer = self.optimizer
        while getattr(optimizer, "_inner_opt", None) is not None:
            optimizer = optimizer._inner_opt
        return optimizer

    def _set_up_logged_groups(self) -> None:
        optimizer = self._optimizer()
        names = self._group_names = layer_group_names(self.model, self.layer_map)
        self._lr_ratios = {}
        ratios: Dict[str, set] = {}
        if self.set_param_lr_fun is self.layer_map and isinstance(optimizer, AdamWDL):
            # every trainable parameter of the model, also those a sharded optimizer keeps on other ranks
            for name, param in self.model.named_parameters():
                if not param.stop_gradient:
                    layer_id = self.layer_map.layer_id(name, self.n_layers)
                    ratio = float(self.layer_map.ratio(name, optimizer.layerwise_decay, self.n_layers))
                    ratios.setdefault(names.of(layer_id), set()).add(ratio)
        elif isinstance(optimizer, AdamWDL):  # a set_param_lr_fun: the ratios the optimizer's table shows
            for row in optimizer.param_lr_table():
                if row.layer_id is None:
                    ratios = {}
                    break
                ratios.setdefault(names.of(row.layer_id), set()).add(row.ratio)
        if ratios:
            if any(ratio != 1.0 for values in ratios.values() for ratio in values):
                # one ratio per group with a LayerMap; a set_param_lr_fun may give several (then left out)
                self._lr_ratios = {name: values.pop() for name, values in ratios.items() if len(values) == 1}
        self._grad_groups = None
        if getattr(self.args, "log_grad_norms", True):
            # layer_groups names them plainly: the logs use the same names as the lrs (a tied head's included)
            renamed = {layer_group_name(k, self.n_layers): names.of(k) for k in range(self.n_layers + 2)}
            self._grad_groups = {renamed[name]: params for name, params in layer_groups(self.model, self.layer_map).items()}

    def _summary(self) -> str:
        args = self.args
        parts = [f"layerwise_decay={self.layerwise_decay} over L={self.n_layers} blocks"]
        if self._lr_ratios:
            names = self._group_names
            shown = [names.of(k) for k in (0, 1, self.n_layers + 1)]
            ratios = ", ".join(f"{name} {self._lr_ratios[name]:.4g}" for name in shown if name in self._lr_ratios)
            ties = "".join(f"; {tie}" for tie in names.ties if tie.group in self._lr_ratios)
            parts[0] += f" (lr ratios: {ratios}{ties})"
        parts.append(f"lr_scheduler_type={plain_name(args.lr_scheduler_type)}")
        schedule = getattr(self._optimizer(), "weight_decay_schedule", None)
        if schedule is not None:
            parts.append(f"weight_decay {schedule.start_wd} -> {schedule.end_wd} ({schedule.style})")
        if self.ema is not None:
            parts.append(f"ema_decay={self.ema.decay}")
        return "paddle_llrd: " + "; ".join(parts)

    def _record_step(self, scaler: Any) -> None:
        """The gradients the coming optimizer step uses (their norms, kept on the device)."""
        if self._grad_groups is not None:
            loss_scale = getattr(scaler, "_scale", None) if scaler is not None else None
            self._step_grad_norms = group_grad_norms(self._grad_groups, 1.0 if loss_scale is None else loss_scale)

    def _training_log_entries(self) -> Dict[str, float]:
        entries: Dict[str, float] = {}
        # The framework logs learning_rate as _get_learning_rate() after the schedule has stepped: the lr of
        # the coming step. The groups' lrs and the weight decay are read at the same moment, so that every
        # schedule value in one log describes the same step.
        lr = float(self._get_learning_rate())
        entries.update({f"learning_rate/{name}": lr * ratio for name, ratio in self._lr_ratios.items()})
        schedule = getattr(self._optimizer(), "weight_decay_schedule", None)
        if schedule is not None:
            entries["weight_decay"] = float(schedule())
        for name, norm in self._step_grad_norms.items():
            entries["grad_norm" if name == TOTAL else f"grad_norm/{name}"] = float(norm)
        return entries

    def log(self, logs: Dict[str, float], *args: Any, **kwargs: Any) -> None:
        """The framework's ``log``; a training log (one with ``loss``) also
        gets, for the step the framework's ``learning_rate`` describes (the
        coming one: the frameworks read it after the schedule has stepped),
        ``learning_rate/<group>`` (that lr times the layer group's ratio) and
        ``weight_decay`` (when scheduled); and with ``log_grad_norms``, for
        the step just taken, ``grad_norm`` and ``grad_norm/<group>`` (the
        norms of the gradients it used, before clipping)."""
        if "loss" in logs:
            logs.update(self._training_log_entries())
        return super().log(logs, *args, **kwargs)

    def _restore_run_state(self) -> None:
        saved: Dict[str, Any] = {}
        if self._resume_checkpoint is not None:
            path = os.path.join(self._resume_checkpoint, STATE_FILE)
            if os.path.isfile(path):
                saved = paddle.load(path)
        resumed = self._resume_checkpoint is not None and self.state.global_step > 0
        if self.ema is not None:
            self.ema.register()
            if saved.get("ema") is not None:
                self.ema.set_state_dict(saved["ema"])
                self.ema.decay = check_ema_decay(self.args.ema_decay)  # this run's setting, as for the lr schedule
            elif resumed:
                warnings.warn(
                    f"{self._resume_checkpoint} has no EMA in {STATE_FILE}: the average starts again at the "
                    f"resumed weights (step {self.state.global_step})",
                    UserWarning,
                    stacklevel=2,
                )
        schedule = getattr(self.optimizer, "weight_decay_schedule", None)
        if schedule is None:
            return
        if saved.get("weight_decay_schedule") is not None:
            schedule.set_state_dict(saved["weight_decay_schedule"])
        elif resumed and schedule.current_step == 0:  # not restored by an optimizer of the caller's either
            warnings.warn(
                f"{self._resume_checkpoint} has no weight-decay schedule position in {STATE_FILE}: the schedule "
                f"resumes at the trainer's global step {self.state.global_step}",
                UserWarning,
                stacklevel=2,
            )
            schedule.current_step = self.state.global_step
        self.optimizer._sync_weight_decay()  # the coefficient of the next step

    def _run_state(self) -> Dict[str, Any]:
        state: Dict[str, Any] = {}
        if self.ema is not None and self.ema.registered:
            state["ema"] = self.ema.state_dict()
        schedule = getattr(self.optimizer, "weight_decay_schedule", None)
        if schedule is not None:
            state["weight_decay_schedule"] = schedule.state_dict()
        return state

    def _save_checkpoint(self, model: Any, metrics: Optional[Dict[str, float]] = None):
        """The framework's checkpoint, plus :data:`STATE_FILE` when there is an EMA or a weight-decay schedule."""
        self._saving_checkpoint = True
        try:
            result = super()._save_checkpoint(model, metrics=metrics)
        finally:
            self._saving_checkpoint = False
        state = self._run_state()
        directory = os.path.join(self.args.output_dir, f"{_CHECKPOINT_PREFIX}-{self.state.global_step}")
        if state and self.args.should_save and os.path.isdir(directory):
            paddle.save(state, os.path.join(directory, STATE_FILE))
        return result

    def save_model(self, output_dir: Optional[str] = None, *args: Any, **kwargs: Any):
        """The framework's ``save_model``; with an EMA, the averaged model is
        saved too, in the same format, under ``<output_dir>/ema`` (loadable
        with ``from_pretrained``). Checkpoints keep the average in
        :data:`STATE_FILE` instead."""
        result = super().save_model(output_dir, *args, **kwargs)
        if not self._saving_checkpoint and self.ema is not None and self.ema.registered:
            target = os.path.join(output_dir if output_dir is not None else self.args.output_dir, EMA_DIRECTORY)
            with self.ema.average_parameters():
                super().save_model(target, *args, **kwargs)
        return result

    def evaluate(self, *args: Any, **kwargs: Any) -> Dict[str, float]:
        """The framework's ``evaluate`` of the trained weights (``eval_loss``,
        ...); when there is an EMA and ``ema_eval`` is on, the averaged
        weights are evaluated too, and their metrics logged and returned
        beside under their own prefix (``eval_ema_loss``, ...; the trained
        weights are back afterwards). During training, a ``ReduceOnPlateau``
        schedule is then stepped on ``metric_for_best_model``."""
        self._evaluating = True
        try:
            metrics = super().evaluate(*args, **kwargs)
        finally:
            self._evaluating = False
        self._step_plateau(metrics)
        return metrics

    def evaluation_loop(self, *args: Any, **kwargs: Any) -> Any:
        """The framework's ``evaluation_loop``; in ``evaluate`` with an EMA
        and ``ema_eval``, once more with the averaged weights, its metrics
        (prefix ``<metric_key_prefix>_ema``) merged into the output's."""
        output = super().evaluation_loop(*args, **kwargs)
        ema = self.ema
        if not (self._evaluating and ema is not None and ema.registered and not ema.applied
                and getattr(self.args, "ema_eval", True)):
            return output
        prefix = kwargs.get("metric_key_prefix", "eval")
        ema_kwargs = {**kwargs, "metric_key_prefix": f"{prefix}_ema", "description": "Evaluation of the EMA weights"}
        self._evaluating = False  # one nested loop, not a recursion
        try:
            with ema.average_parameters():
                averaged = super().evaluation_loop(*args, **ema_kwargs)
        finally:
            self._evaluating = True
        output.metrics.update(averaged.metrics)
        return output
