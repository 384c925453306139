"""What a Trainer's logs add per layer group: the lrs, the weight decay and the gradient norms.

:class:`LayerLoggingCallback` finds the layer groups and their lr ratios
when training begins (and logs the one-line summary of the run's settings),
keeps the gradient norms of each optimizer step, and gives the entries
``LLRDTrainer.log`` adds to each training log (:meth:`~LayerLoggingCallback.entries`).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from paddle_llrd.integrations.training_arguments import plain_name
from paddle_llrd.integrations.builders import LayerSettings
from paddle_llrd.layer_decay.grad_norms import TOTAL, group_grad_norms, layer_group_name, layer_groups
from paddle_llrd.layer_decay.group_names import LayerGroupNames, layer_group_names
from paddle_llrd.optim.adamwdl import AdamWDL

__all__ = ["LayerLoggingCallback", "group_lr_ratios", "inner_optimizer", "summary_line"]


def inner_optimizer(optimizer: Any) -> Any:
    """The optimizer under the frameworks' distributed wrappers (two for sharding)."""
    while getattr(optimizer, "_inner_opt", None) is not None:
        optimizer = optimizer._inner_opt
    return optimizer


def group_lr_ratios(model: Any, settings: LayerSettings, optimizer: Any, names: LayerGroupNames) -> Dict[str, float]:
    """Each layer group's lr ratio, by its name in ``names``; empty when every
    ratio is 1 or ``optimizer`` is no :class:`~paddle_llrd.AdamWDL`. With a
    ``set_param_lr_fun`` of the caller's, the ratios its table shows: a group
    with several is left out, and none are given when a parameter has no layer id."""
    ratios: Dict[str, set] = {}
    if not isinstance(optimizer, AdamWDL):
        return {}
    if settings.set_param_lr_fun is settings.layer_map:
        # every trainable parameter of the model, also those a sharded optimizer keeps on other ranks
        for name, param in model.named_parameters():
            if not param.stop_gradient:
                layer_id = settings.layer_map.layer_id(name, settings.n_layers)
                ratio = float(settings.layer_map.ratio(name, optimizer.layerwise_decay, settings.n_layers))
                ratios.setdefault(names.of(layer_id), set()).add(ratio)
    else:
        for row in optimizer.param_lr_table():
            if row.layer_id is None:
                return {}
            ratios.setdefault(names.of(row.layer_id), set()).add(row.ratio)
    if not any(ratio != 1.0 for values in ratios.values() for ratio in values):
        return {}
    return {name: values.pop() for name, values in ratios.items() if len(values) == 1}


def _sampled_ratios(ratios: Dict[str, float], names: LayerGroupNames, n_layers: int) -> str:
    """The embeddings', the first and last blocks' and the head's ratios, ``...`` where blocks between
    are left out (the logs carry every group's lr).

    Examples:
        >>> from paddle_llrd.layer_decay.group_names import LayerGroupNames
        >>> ratios = {"embeddings": 0.41, "layer_0": 0.51, "layer_1": 0.64, "layer_2": 0.8, "head": 1.0}
        >>> _sampled_ratios(ratios, LayerGroupNames(3), 3)
        'embeddings 0.41, layer_0 0.51, ..., layer_2 0.8, head 1'
        >>> _sampled_ratios({"embeddings": 0.5, "layer_0": 1.0, "head": 1.0}, LayerGroupNames(1), 1)
        'embeddings 0.5, layer_0 1, head 1'
    """
    first, last = (0, 1), (n_layers, n_layers + 1)
    shown = [f"{names.of(k)} {ratios[names.of(k)]:.4g}" for k in sorted(set(first + last)) if names.of(k) in ratios]
    if n_layers > 2:  # blocks between the first and the last are left out: say so
        shown.insert(len([k for k in first if names.of(k) in ratios]), "...")
    return ", ".join(shown)


def summary_line(
    settings: LayerSettings,
    args: Any,
    ratios: Dict[str, float],
    names: LayerGroupNames,
    weight_decay_schedule: Any,
    ema_decay: Optional[float],
) -> str:
    """The line that opens a run: layer decay (with the embeddings', the first
    and last blocks' and the head's ratios, ``...`` for the blocks between),
    the lr schedule, a weight-decay ramp, the EMA."""
    parts = [f"layerwise_decay={settings.layerwise_decay} over L={settings.n_layers} blocks"]
    if ratios:
        ties = "".join(f"; {tie}" for tie in names.ties if tie.group in ratios)
        parts[0] += f" (lr ratios: {_sampled_ratios(ratios, names, settings.n_layers)}{ties})"
    parts.append(f"lr_scheduler_type={plain_name(args.lr_scheduler_type)}")
    if weight_decay_schedule is not None:
        schedule = weight_decay_schedule
        parts.append(f"weight_decay {schedule.start_wd} -> {schedule.end_wd} ({schedule.style})")
    if ema_decay is not None:
        warmup = f" (timm warm-up, power {args.ema_warmup_power:.3g})" if getattr(args, "ema_warmup", False) else ""
        parts.append(f"ema_decay={ema_decay}{warmup}")
    return "paddle_llrd: " + "; ".join(parts)


class LayerLoggingCallback:
    """Trainer callback behind the per-group entries of the training logs.

    Args:
        settings: the Trainer's layer ratios.
        logger: where the summary line goes when training begins.
        ema_decay: the EMA's decay, for the summary (``None``: no EMA).
    """

    def __init__(self, settings: LayerSettings, logger: Any, ema_decay: Optional[float]) -> None:
        self.settings = settings
        self.logger = logger
        self.ema_decay = ema_decay
        self.lr_ratios: Dict[str, float] = {}
        self.weight_decay_schedule: Any = None
        self.grad_groups: Optional[Dict[str, List[Any]]] = None
        self.step_grad_norms: Dict[str, Any] = {}

    def on_train_begin(
        self, args: Any, state: Any, control: Any, model: Any = None, optimizer: Any = None, **kwargs: Any
    ) -> None:
        settings = self.settings
        optimizer = inner_optimizer(optimizer)
        names = layer_group_names(model, settings.layer_map)
        self.lr_ratios = group_lr_ratios(model, settings, optimizer, names)
        self.weight_decay_schedule = getattr(optimizer, "weight_decay_schedule", None)
        self.grad_groups = None
        if getattr(args, "log_grad_norms", True):
            # layer_groups names them plainly: the logs use the same names as the lrs (a tied head's included)
            renamed = {layer_group_name(k, settings.n_layers): names.of(k) for k in range(settings.n_layers + 2)}
            self.grad_groups = {renamed[name]: params
                                for name, params in layer_groups(model, settings.layer_map).items()}
        self.logger.info(summary_line(settings, args, self.lr_ratios, names, self.weight_decay_schedule,
                                      self.ema_decay))

    def on_optimizer_begin(self, args: Any, state: Any, control: Any, scaler: Any = None, **kwargs: Any) -> None:
        # Both frameworks call this with the step's gradients in place (all-reduced, divided by the
        # accumulation steps, still carrying an AMP loss scale) and the schedule at the step's lr.
        if self.grad_groups is not None:
            loss_scale = getattr(scaler, "_scale", None) if scaler is not None else None
            self.step_grad_norms = group_grad_norms(self.grad_groups, 1.0 if loss_scale is None else loss_scale)

    def entries(self, lr: float) -> Dict[str, float]:
        """What a training log adds for the schedule's ``lr`` of the step it
        describes: ``learning_rate/<group>`` (``lr`` times the group's ratio),
        ``weight_decay`` (when scheduled; the schedule's value at that step,
        read at the same moment as ``lr``) and the norms of the gradients the
        last step used, before clipping (``grad_norm``, ``grad_norm/<group>``)."""
        entries = {f"learning_rate/{name}": lr * ratio for name, ratio in self.lr_ratios.items()}
        if self.weight_decay_schedule is not None:
            entries["weight_decay"] = float(self.weight_decay_schedule())
        for name, norm in self.step_grad_norms.items():
            entries["grad_norm" if name == TOTAL else f"grad_norm/{name}"] = float(norm)
        return entries
