"""What an ``LLRDTrainer`` builds from its ``TrainingArguments`` and model:
the layer ratios (:func:`layer_settings`), the optimizer
(:func:`build_optimizer`) and the lr schedule (:func:`build_scheduler`).

Plain functions of the arguments, the model and the Trainer's keywords; no
Trainer is needed and no framework is imported, so both integrations build
the same objects from the same fields.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple, Union

import paddle
from paddle.optimizer.lr import LRScheduler, ReduceOnPlateau

from paddle_llrd.integrations.training_arguments import check_layerwise_decay, plain_name, schedule_takes_warmup
from paddle_llrd.integrations.plateau_callback import MetricSteppedSchedule, check_plateau
from paddle_llrd.layer_decay.layer_maps import (
    LayerMap,
    build_name_dict,
    checked_n_layers,
    no_decay_parameter_names,
    resolve_layer_map,
)
from paddle_llrd.optim.adamwdl import AdamWDL
from paddle_llrd.optim.checkpoint import EXTRA_STATE_KEYS, WEIGHT_DECAY_SCHEDULE_KEY
from paddle_llrd.schedules.registry import get_scheduler
from paddle_llrd.schedules.weight_decay import WeightDecaySchedule
from paddle_llrd.warning_classes import TrainerSettingWarning, stacklevel_outside_package

__all__ = [
    "LayerSettings",
    "TrainerAdamWDL",
    "build_optimizer",
    "build_scheduler",
    "check_optim",
    "check_trainer_keywords",
    "decay_filter",
    "layer_settings",
    "optimizer_parameters",
    "trainer_weight_decay",
    "warmup_steps",
]


# ------------------------------------------------------------------ layer ratios
@dataclass(frozen=True)
class LayerSettings:
    """How an ``LLRDTrainer`` gives each parameter its lr ratio.

    Attributes:
        layerwise_decay: the decay ``d`` (``1.0``: every ratio is 1).
        layer_map: the :class:`~paddle_llrd.LayerMap` of the ``layer_map`` field and ``n_layers``.
        n_layers: the number of blocks ``L``.
        set_param_lr_fun: the ratio function :class:`~paddle_llrd.AdamWDL` calls
            (``layer_map`` itself unless one was passed to the Trainer).
    """

    layerwise_decay: float
    layer_map: LayerMap
    n_layers: int
    set_param_lr_fun: Callable[..., Optional[float]]


def check_trainer_keywords(
    layerwise_decay: Any, n_layers: Any, set_param_lr_fun: Any
) -> Tuple[Optional[float], Optional[int]]:
    """The ``LLRDTrainer`` keywords ``layerwise_decay`` and ``n_layers``, checked
    (``None`` where not given), after checking that ``set_param_lr_fun`` is
    ``None`` or callable.

    Raises:
        TypeError: a ``layerwise_decay`` that is no real number, an ``n_layers``
            that is no int, a ``set_param_lr_fun`` that is not callable.
        ValueError: ``layerwise_decay <= 0`` or ``n_layers < 0`` (the rules of
            :class:`~paddle_llrd.AdamWDL`'s arguments of the same names).

    Examples:
        >>> check_trainer_keywords(0.8, 12, None)
        (0.8, 12)
    """
    if layerwise_decay is not None:
        layerwise_decay = check_layerwise_decay(layerwise_decay)
    if set_param_lr_fun is not None and not callable(set_param_lr_fun):
        raise TypeError(
            "set_param_lr_fun must be callable as fn(layerwise_decay, name_dict, n_layers, param), "
            f"got {type(set_param_lr_fun).__name__} {set_param_lr_fun!r}"
        )
    if n_layers is not None:
        n_layers = checked_n_layers(n_layers, owner="LLRDTrainer")
    return layerwise_decay, n_layers


def check_optim(args: Any) -> None:
    """Refuse a ``TrainingArguments.optim`` other than ``"adamw"``: the Trainer builds an AdamWDL."""
    optim = plain_name(args.optim)
    if optim != "adamw":
        raise ValueError(
            f"LLRDTrainer always trains with paddle_llrd.AdamWDL, so TrainingArguments.optim "
            f"must be 'adamw', got {optim!r}"
        )


def _keyword_or_argument(args: Any, name: str, keyword: Any, default: Any) -> Any:
    argument = getattr(args, name, default)
    if keyword is None:
        return argument
    if argument != default and argument != keyword:
        raise ValueError(
            f"{name} is {keyword!r} as an LLRDTrainer keyword but {argument!r} in the TrainingArguments: "
            "set it in one place"
        )
    return keyword


def _refuse_settings_for_a_given_optimizer(
    args: Any, layerwise_decay: float, set_param_lr_fun: Optional[Callable[..., Any]]
) -> None:
    # An optimizer passed in is used as it is: settings of the one LLRDTrainer
    # would build cannot reach it, so they are refused rather than ignored.
    settings = {
        "layerwise_decay": layerwise_decay != 1.0,
        "layer_map": getattr(args, "layer_map", "auto") != "auto",
        "set_param_lr_fun": set_param_lr_fun is not None,
        "weight_decay_end": getattr(args, "weight_decay_end", None) is not None,
    }
    given = [name for name, is_set in settings.items() if is_set]
    if given:
        raise ValueError(
            f"{', '.join(given)} configure the optimizer LLRDTrainer builds, but an optimizer was passed "
            "in through optimizers=(optimizer, scheduler) and is used as it is: set them on that optimizer, "
            "or let LLRDTrainer build it"
        )


def _configured_n_layers(model: Any) -> Optional[int]:
    config_layers = getattr(getattr(model, "config", None), "num_hidden_layers", None)
    if config_layers is None:
        return None
    return checked_n_layers(config_layers, owner="LLRDTrainer (read from model.config.num_hidden_layers)")


def layer_settings(
    args: Any,
    model: paddle.nn.Layer,
    *,
    layerwise_decay: Optional[float] = None,
    n_layers: Optional[int] = None,
    set_param_lr_fun: Optional[Callable[..., Optional[float]]] = None,
    optimizer_given: bool = False,
) -> LayerSettings:
    """The layer ratios of a Trainer over ``model``: ``layerwise_decay`` (the
    keyword, else the field, else ``1.0``), the ``layer_map`` field resolved
    over the model's names with ``n_layers`` (the keyword, else
    ``model.config.num_hidden_layers``, else counted from the names), and the
    ratio function (``set_param_lr_fun``, else that map).

    Raises:
        ValueError: a keyword that contradicts its field; ``set_param_lr_fun``
            with a ``layer_map`` other than ``"auto"``; settings of the
            optimizer the Trainer would build when ``optimizer_given``; a
            ``layerwise_decay != 1`` for a model whose names ``layer_map``
            finds no block in.

    Examples:
        >>> from types import SimpleNamespace
        >>> from paddle_llrd.models.skeletons import build_skeleton
        >>> settings = layer_settings(SimpleNamespace(layerwise_decay=0.5), build_skeleton("llama", 2))
        >>> settings.n_layers, settings.layer_map.ratio("model.layers.0.mlp.up_proj.weight", 0.5)
        (2, 0.25)
    """
    layerwise_decay = _keyword_or_argument(args, "layerwise_decay", layerwise_decay, 1.0)
    if optimizer_given:
        _refuse_settings_for_a_given_optimizer(args, layerwise_decay, set_param_lr_fun)
    layer_map = getattr(args, "layer_map", "auto")
    if set_param_lr_fun is not None and layer_map != "auto":
        raise ValueError(
            f"set_param_lr_fun was passed and layer_map={layer_map!r} is set: both give the layer ratios, "
            "use one of them"
        )
    if n_layers is None:
        n_layers = _configured_n_layers(model)
    # Without layer decay every ratio is 1: a model without blocks needs no map then.
    decays = set_param_lr_fun is None and layerwise_decay != 1.0
    resolved = resolve_layer_map(layer_map, model, n_layers, require_blocks=decays)
    return LayerSettings(
        layerwise_decay=layerwise_decay,
        layer_map=resolved,
        n_layers=resolved.n_layers,
        set_param_lr_fun=set_param_lr_fun if set_param_lr_fun is not None else resolved,
    )


# ------------------------------------------------------------------ optimizer
class TrainerAdamWDL(AdamWDL):
    """The :class:`~paddle_llrd.AdamWDL` an ``LLRDTrainer`` builds: its
    ``state_dict`` holds tensors only, because PaddleFormers' unified
    checkpoint renames every entry as a parameter's state and fails on any
    other; the trainer keeps the weight-decay schedule's position in its run
    state file instead (:class:`~paddle_llrd.integrations.run_state.RunStateCallback`
    restores it), so loading a state dict without it leaves the schedule where
    it is, as it is (nor are the structured names kept: the trainer builds the
    same model when it resumes, and the state is matched by Paddle's names)."""

    def state_dict(self) -> Dict[str, Any]:
        state = super().state_dict()
        for key in EXTRA_STATE_KEYS:
            state.pop(key, None)
        return state

    def set_state_dict(self, state_dict: Dict[str, Any]) -> None:
        schedule = self.weight_decay_schedule
        if schedule is not None and WEIGHT_DECAY_SCHEDULE_KEY not in state_dict:
            # The position is the run state file's to restore: load the schedule's own, changing nothing.
            state_dict = {**state_dict, WEIGHT_DECAY_SCHEDULE_KEY: schedule.state_dict()}
        super().set_state_dict(state_dict)

    load_state_dict = set_state_dict


def decay_filter(model: paddle.nn.Layer) -> Callable[[str], bool]:
    """``apply_decay_param_fun`` that decays every parameter of ``model``
    but biases, norms and other 1-D parameters (:func:`~paddle_llrd.no_decay_parameter_names`)."""
    excluded = no_decay_parameter_names(model)
    decayed = frozenset(param.name for param in model.parameters() if param.name not in excluded)

    def apply_decay_param_fun(param_name: str) -> bool:
        return param_name in decayed

    return apply_decay_param_fun


def optimizer_parameters(
    model: paddle.nn.Layer, grouped_parameters: Any, *, lists_keep_the_exclusion: bool
) -> Tuple[Any, Optional[Callable[[str], bool]]]:
    """The parameters of the Trainer's optimizer and their decay filter.

    Without ``grouped_parameters`` (what ``set_optimizer_grouped_parameters``
    set): the trainable parameters of ``model`` with :func:`decay_filter`.
    With them: those, and no filter (each group's ``weight_decay`` rules, as
    in PaddleNLP's ``Trainer``), except that with ``lists_keep_the_exclusion``
    (PaddleFormers' rule) a plain list of parameters keeps :func:`decay_filter`.
    """
    if grouped_parameters is None:
        return [param for param in model.parameters() if not param.stop_gradient], decay_filter(model)
    dict_groups = (isinstance(grouped_parameters, (list, tuple)) and grouped_parameters
                   and isinstance(grouped_parameters[0], dict))
    if lists_keep_the_exclusion and not dict_groups:
        return grouped_parameters, decay_filter(model)
    return grouped_parameters, None


def trainer_weight_decay(args: Any, num_training_steps: Optional[int]) -> Union[float, WeightDecaySchedule]:
    """``args.weight_decay``, or with ``weight_decay_end`` a
    :class:`~paddle_llrd.WeightDecaySchedule` from it to ``weight_decay_end``
    (style ``weight_decay_incr_style``) over ``num_training_steps`` (else ``max_steps``).

    Raises:
        ValueError: a schedule without a number of training steps.
    """
    end = getattr(args, "weight_decay_end", None)
    if end is None:
        return args.weight_decay
    steps = num_training_steps if num_training_steps is not None else args.max_steps
    if steps is None or steps < 0:
        raise ValueError(
            "weight_decay_end needs the number of training steps: build the optimizer through "
            "create_optimizer_and_scheduler(num_training_steps) or set max_steps"
        )
    return WeightDecaySchedule(args.weight_decay, end, total_steps=steps, style=args.weight_decay_incr_style)


def build_optimizer(
    args: Any,
    model: paddle.nn.Layer,
    settings: LayerSettings,
    *,
    learning_rate: Union[float, LRScheduler],
    parameters: Any,
    apply_decay_param_fun: Optional[Callable[[str], bool]],
    num_training_steps: Optional[int] = None,
) -> TrainerAdamWDL:
    """The :class:`TrainerAdamWDL` of ``args`` over ``parameters``.

    ``adam_beta1``, ``adam_beta2`` and ``adam_epsilon`` pass through; the
    weight decay is :func:`trainer_weight_decay`; ``max_grad_norm > 0`` clips
    by global norm; ``fp16_opt_level == "O2"`` sets ``multi_precision``; the
    ratios are ``settings``'; ``name_dict`` comes from ``model``.
    """
    grad_clip = paddle.nn.ClipGradByGlobalNorm(args.max_grad_norm) if args.max_grad_norm > 0 else None
    # The one warning of a layerwise_decay above 1 is the optimizer's (the field and keyword checks do not warn).
    return TrainerAdamWDL(
        learning_rate=learning_rate,
        beta1=args.adam_beta1,
        beta2=args.adam_beta2,
        epsilon=args.adam_epsilon,
        parameters=parameters,
        weight_decay=trainer_weight_decay(args, num_training_steps),
        apply_decay_param_fun=apply_decay_param_fun,
        grad_clip=grad_clip,
        multi_precision=args.fp16_opt_level == "O2",
        layerwise_decay=settings.layerwise_decay,
        n_layers=settings.n_layers,
        set_param_lr_fun=settings.set_param_lr_fun,
        name_dict=build_name_dict(model),
    )


# ------------------------------------------------------------------ lr schedule
def warmup_steps(args: Any, num_training_steps: int) -> int:
    """``warmup_steps`` when positive, else ``floor(warmup_ratio * num_training_steps)``.

    Examples:
        >>> from types import SimpleNamespace
        >>> warmup_steps(SimpleNamespace(warmup_steps=0, warmup_ratio=0.25), 10)
        2
    """
    if args.warmup_steps > 0:
        return args.warmup_steps
    return int(args.warmup_ratio * num_training_steps)


def _scheduler_options(args: Any) -> Dict[str, Any]:
    options: Dict[str, Any] = {"num_cycles": args.num_cycles, "lr_end": args.lr_end, "power": args.power}
    # 0 is PaddleFormers' "no floor"; passed on, it would clash with a min_lr_rate in lr_scheduler_kwargs
    if getattr(args, "min_lr", 0.0):
        options["min_lr"] = args.min_lr
    options.update(getattr(args, "lr_scheduler_kwargs", None) or {})
    return options


def build_scheduler(args: Any, num_training_steps: int) -> LRScheduler:
    """The schedule ``lr_scheduler_type`` names, from :func:`paddle_llrd.get_scheduler`.

    Warmup is :func:`warmup_steps` (a :class:`~paddle_llrd.TrainerSettingWarning` when the
    registry says the schedule takes none: it is built without it); the schedule spans ``decay_steps`` when the arguments have a
    positive one, else ``num_training_steps``; ``num_cycles``, ``lr_end``,
    ``power`` and (PaddleFormers) a non-zero ``min_lr`` pass through, as in
    the frameworks' ``Trainer.create_scheduler``, and so does
    ``lr_scheduler_kwargs``, whose entries win over those fields. A
    ``ReduceOnPlateau`` is checked against the evaluation settings
    (:func:`~paddle_llrd.integrations.plateau_callback.check_plateau`) and comes back
    as a :class:`~paddle_llrd.integrations.plateau_callback.MetricSteppedSchedule`.

    Examples:
        >>> from types import SimpleNamespace
        >>> args = SimpleNamespace(lr_scheduler_type="linear", learning_rate=1.0, warmup_steps=2,
        ...                        warmup_ratio=0.0, num_cycles=0.5, lr_end=1e-7, power=1.0)
        >>> schedule, lrs = build_scheduler(args, num_training_steps=4), []
        >>> for _ in range(4):
        ...     lrs.append(schedule())
        ...     schedule.step()
        >>> lrs
        [0.0, 0.5, 1.0, 0.5]
    """
    name = plain_name(args.lr_scheduler_type)
    warmup = warmup_steps(args, num_training_steps)
    has_warmup = schedule_takes_warmup(name)
    if warmup > 0 and not has_warmup:
        warnings.warn(
            f"lr_scheduler_type={name!r} has no warmup: the {warmup} warmup steps that warmup_steps/"
            "warmup_ratio ask for are not taken",
            TrainerSettingWarning,
            stacklevel=stacklevel_outside_package(),
        )
    decay_steps = getattr(args, "decay_steps", 0) or 0
    scheduler = get_scheduler(
        name,
        learning_rate=args.learning_rate,
        num_warmup_steps=warmup if has_warmup else 0,
        num_training_steps=decay_steps if decay_steps > 0 else num_training_steps,
        **_scheduler_options(args),
    )
    if isinstance(scheduler, ReduceOnPlateau):
        check_plateau(args, scheduler)
        return MetricSteppedSchedule(scheduler)
    return scheduler
