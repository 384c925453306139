r"""The ``LLRDTrainingArguments`` fields shared by the Trainer integrations,
and their checks.

Framework-free: :class:`LLRDArgumentsMixin` is a dataclass mixed in before a
framework's ``TrainingArguments`` (PaddleNLP's or PaddleFormers'), so that one
definition gives both integrations the same fields, defaults, help texts and
checks. Every check runs in ``__post_init__``, before the framework's own, and
raises ``ValueError``/``TypeError`` naming the field, so a bad config file or
command line fails when the arguments are built, before any training.

Examples:
    >>> check_layer_map("llama"), check_layer_map(r"(?:^|\.)blocks\.(\d+)\.") == r"(?:^|\.)blocks\.(\d+)\."
    ('llama', True)
    >>> check_layer_map("lama")
    Traceback (most recent call last):
    ...
    ValueError: `layer_map` must be 'auto', a family (bert, gpt, llama, vit) or a regular expression whose one group captures the block index; 'lama' is no family and has 0 groups; it needs exactly one, ...
    >>> check_ema_decay(0.999)
    0.999
    >>> check_ema_decay(1.0)
    Traceback (most recent call last):
    ...
    ValueError: `ema_decay` must be in [0, 1), got 1.0 (0 turns the average off).
"""
from __future__ import annotations

import ast
import dataclasses
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from paddle_llrd.checks import (
    checked_bool,
    checked_choice,
    checked_non_negative,
    checked_positive,
    did_you_mean,
    is_real_number,
    refusal,
)
from paddle_llrd.layer_decay.layer_maps import FAMILY_PATTERNS, checked_block_regex
from paddle_llrd.layer_decay.layerwise import checked_layerwise_decay
from paddle_llrd.optim.ema import checked_ema_decay
from paddle_llrd.schedules import registry
from paddle_llrd.schedules.registry import ScheduleOption
from paddle_llrd.schedules.weight_decay import WEIGHT_DECAY_STYLES

__all__ = [
    "EMA_DIRECTORY",
    "LLRDArgumentsMixin",
    "SchedulerKwargs",
    "check_ema_decay",
    "check_layer_map",
    "check_fields",
    "check_layerwise_decay",
    "check_scheduler_kwargs",
    "number_from_text",
    "plain_name",
    "schedule_takes_warmup",
]

#: Where :meth:`LLRDTrainer.save_model` writes the averaged model, under its output directory.
EMA_DIRECTORY = "ema"

# Keys of lr_scheduler_kwargs that give a schedule's floor another way than PaddleFormers' min_lr.
_FLOOR_OPTIONS = ("min_lr", "min_lr_rate", "min_lr_ratio")
# The framework's fields (not the mixin's) that check_fields reads.
_FRAMEWORK_FIELDS_READ = ("weight_decay", "min_lr")
# Schedule arguments the Trainer computes itself (from warmup_steps/warmup_ratio, the run's length, a resume).
_SET_BY_THE_TRAINER = {
    "num_warmup_steps": "warmup_steps or warmup_ratio",
    "num_training_steps": "max_steps, num_train_epochs or decay_steps",
    "last_epoch": "resume_from_checkpoint",
}
_NUMERIC_ANNOTATIONS = {
    "float": float, "Optional[float]": float, "float|None": float, "Union[float,NoneType]": float,
    "int": int, "Optional[int]": int, "int|None": int, "Union[int,NoneType]": int,
}


def plain_name(value: Any) -> str:
    """An argument such as ``lr_scheduler_type`` or ``optim`` as a plain string (the frameworks store enums)."""
    return str(getattr(value, "value", value))


def _numeric_type(annotation: Any, default: Any) -> Optional[type]:
    """``float`` or ``int`` for a field or parameter annotated (or defaulting to) a number, else ``None``."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    text = text.replace("typing.", "").replace(" ", "")
    if text in _NUMERIC_ANNOTATIONS:
        return _NUMERIC_ANNOTATIONS[text]
    if type(default) in (int, float):
        return type(default)
    return None


def number_from_text(text: str, kind: type, name: str) -> Any:
    """``text`` (a numeric string, as PyYAML reads ``2e-1``) as a ``kind``
    (``int`` or ``float``), else ``ValueError`` naming ``name``.

    Examples:
        >>> number_from_text("2e-1", float, "learning_rate"), number_from_text("1e3", int, "max_steps")
        (0.2, 1000)
        >>> number_from_text("fast", float, "learning_rate")
        Traceback (most recent call last):
        ...
        ValueError: learning_rate must be a float, got the string 'fast'
    """
    stripped = text.strip()
    try:
        return kind(stripped)
    except ValueError:
        pass
    try:
        number = float(stripped)
    except ValueError:
        raise ValueError(f"{name} must be a{'n' if kind is int else ''} {kind.__name__}, got the string {text!r}") from None
    if kind is int:
        if not number.is_integer():
            raise ValueError(f"{name} must be an int, got the string {text!r}")
        return int(number)
    return number


def _numbers_from_text(arguments: Any) -> None:
    """Numeric fields given as strings (a YAML ``2e-1``, a dict built by hand) become numbers, in place."""
    for spec in dataclasses.fields(arguments):
        value = getattr(arguments, spec.name, None)
        if not isinstance(value, str):
            continue
        kind = _numeric_type(spec.type, spec.default)
        if kind is not None:
            setattr(arguments, spec.name, number_from_text(value, kind, spec.name))


def _field_number(value: Any, field: str, expected: str) -> float:
    """A field that must be a real number, as a float; ``TypeError`` naming ``field`` and ``expected``."""
    if not is_real_number(value):
        raise TypeError(refusal(field, expected, f"{type(value).__name__} {value!r}"))
    return float(value)


def check_layerwise_decay(value: Any) -> float:
    """``layerwise_decay`` as a float: finite and ``> 0`` (``1.0`` is no decay), the rule of
    :func:`~paddle_llrd.layer_decay.layerwise.checked_layerwise_decay`. A decay above 1 is
    warned about once, by the optimizer the Trainer builds from it."""
    return checked_layerwise_decay(_field_number(value, "layerwise_decay", "a real number such as 0.8"))


def check_layer_map(value: Any) -> str:
    """``layer_map``: ``"auto"``, a family of ``FAMILY_PATTERNS`` or a regex with exactly one group."""
    return checked_block_regex(value, "layer_map", families=FAMILY_PATTERNS)


def check_ema_decay(value: Any) -> float:
    """``ema_decay`` as a float in ``[0, 1)``, the EMA's own rule
    (:func:`~paddle_llrd.optim.ema.checked_ema_decay`); ``0`` turns the average off."""
    return checked_ema_decay(value, "ema_decay", advice="0 turns the average off")


def _check_weight_decay_schedule(weight_decay: Any, end: Any, style: Any) -> Optional[float]:
    """``weight_decay_end`` as a float (or ``None``: no schedule) after checking it against the style.

    The style's rule is :class:`~paddle_llrd.WeightDecaySchedule`'s (``constant``,
    Megatron-LM's default, keeps one coefficient: a ramp names its style)."""
    style = checked_choice(style, "weight_decay_incr_style", WEIGHT_DECAY_STYLES, ignore_case=False)
    if end is None:
        if style != "constant":
            raise ValueError(
                f"weight_decay_incr_style={style!r} ramps the weight decay from weight_decay to "
                "weight_decay_end: set weight_decay_end too"
            )
        return None
    end = checked_non_negative(end, "weight_decay_end")
    start = checked_non_negative(weight_decay, "weight_decay", advice="the start of the weight-decay schedule")
    if style == "constant" and end != start:
        raise ValueError(
            f"weight_decay_end={end!r} differs from weight_decay={start!r} but weight_decay_incr_style is "
            "'constant': set weight_decay_incr_style to 'linear' or 'cosine' for a ramp"
        )
    return end


class SchedulerKwargs(dict):
    """``lr_scheduler_kwargs``: a dict of keyword arguments, or (on the command
    line) a JSON object such as ``'{"min_lr_rate": 0.1}'``. A Python dict
    literal is read too: PaddleNLP's ``PdArgumentParser.parse_json_file``
    hands a config file's object over as ``str(dict)``.

    Raises:
        ValueError: a string that is neither JSON nor a Python literal.
        TypeError: not a mapping with string keys.

    Examples:
        >>> SchedulerKwargs('{"min_lr_rate": 0.1}'), SchedulerKwargs("{'decay_style': 'cosine'}")
        ({'min_lr_rate': 0.1}, {'decay_style': 'cosine'})
    """

    def __init__(self, options: Any = None) -> None:
        if options is None:
            options = {}
        elif isinstance(options, Iterator):  # (key, value) pairs: how dataclasses.asdict rebuilds a dict subclass
            options = dict(options)
        elif isinstance(options, str):
            try:
                options = json.loads(options)
            except json.JSONDecodeError as exc:
                try:
                    options = ast.literal_eval(options)
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    raise ValueError(f"lr_scheduler_kwargs must be a JSON object, got {options!r}: {exc}") from None
        if not isinstance(options, Mapping) or not all(isinstance(key, str) for key in options):
            raise TypeError(
                "lr_scheduler_kwargs must be a dict from argument names to values, "
                f"got {type(options).__name__} {options!r}"
            )
        super().__init__(options)


def _option_number_kind(option: ScheduleOption) -> Optional[type]:
    """``float`` or ``int`` for a schedule option annotated (or defaulting to) a number, else ``None``."""
    kinds = tuple(kind for kind in option.types if kind is not type(None))
    if kinds in ((float,), (int,)):
        return kinds[0]
    if type(option.default) in (int, float):
        return type(option.default)
    return None


def schedule_takes_warmup(name: str) -> bool:
    """Whether schedule ``name`` has a warmup: the registry's answer (``ScheduleInfo.warmup``).

    Examples:
        >>> schedule_takes_warmup("cosine"), schedule_takes_warmup("reduce_lr_on_plateau")
        (True, False)
    """
    return registry.schedule_info(name).warmup


def check_scheduler_kwargs(name: str, options: Mapping[str, Any]) -> SchedulerKwargs:
    """``lr_scheduler_kwargs`` checked against the options of schedule
    ``name`` (:func:`~paddle_llrd.schedules.registry.schedule_options`): each key must be one of its arguments (a
    function taking ``**kwargs`` accepts any), none of those the Trainer sets
    itself, and a numeric string (a YAML ``2e-1``) for an argument annotated
    or defaulting to a number becomes that number.

    Raises:
        ValueError: a schedule ``name`` that is not registered (the
            registry's message), a key the schedule does not take (the
            message lists those it takes and ends with the closest one), a
            key the Trainer sets, or a numeric argument given a string that
            is no number.

    Examples:
        >>> check_scheduler_kwargs("warmup_stable_decay", {"decay_style": "linear", "min_lr_ratio": "2e-1"})
        {'decay_style': 'linear', 'min_lr_ratio': 0.2}
        >>> check_scheduler_kwargs("warmup_stable_decay", {"decay_styl": "linear"})
        Traceback (most recent call last):
        ...
        ValueError: lr_scheduler_kwargs has the key 'decay_styl', which lr_scheduler_type='warmup_stable_decay' does not take; valid keys: decay_ratio, decay_style, decay_type, lr_warmup_init, min_lr, min_lr_ratio, num_cycles, num_decay_steps, num_stable_steps, warmup_type. Did you mean 'decay_style'?
    """
    info = registry.schedule_info(name)
    named, takes_any = info.options, info.any_option
    valid = sorted(key for key in named if key not in _SET_BY_THE_TRAINER)
    checked = SchedulerKwargs()
    for key, value in options.items():
        if key in _SET_BY_THE_TRAINER or key == "learning_rate":
            source = _SET_BY_THE_TRAINER.get(key, "learning_rate")
            raise ValueError(
                f"lr_scheduler_kwargs has the key {key!r}, which the Trainer sets itself (from {source}): "
                "set that field instead"
            )
        option = named.get(key)
        if option is None and not takes_any:
            raise ValueError(
                f"lr_scheduler_kwargs has the key {key!r}, which lr_scheduler_type={name!r} does not take; "
                f"valid keys: {', '.join(valid) or 'none'}.{did_you_mean(key, valid)}"
            )
        if option is not None and isinstance(value, str):
            kind = _option_number_kind(option)
            if kind is not None:
                value = number_from_text(value, kind, f"lr_scheduler_kwargs[{key!r}]")
        checked[key] = value
    return checked


def _check_registered(name: str) -> None:
    # read at call time: register_scheduler may have added names since import
    try:
        registry.schedule_function(name)
    except ValueError as exc:
        raise ValueError(
            "lr_scheduler_type must be one of paddle_llrd's registered schedules (add others with "
            f"paddle_llrd.register_scheduler): {exc}"
        ) from None


def _field_default(spec: dataclasses.Field) -> Any:
    if spec.default_factory is not dataclasses.MISSING:
        return spec.default_factory()
    return spec.default


def check_fields(values: Mapping[str, Any]) -> Dict[str, Any]:
    """Every :class:`LLRDArgumentsMixin` field, checked and converted as
    ``LLRDTrainingArguments`` does when it is built: from ``values`` (a field
    it lacks at its default), with the framework's ``weight_decay`` and
    ``min_lr`` (PaddleFormers' field; PaddleNLP has none) read from it too.

    A config can thus be checked before any arguments class is built (what
    ``python -m paddle_llrd train`` does before the model loads), by the same
    code as the class's ``__post_init__``.

    Raises:
        ValueError, TypeError: the first bad field, named, with what was expected.

    Examples:
        >>> checked = check_fields({"layerwise_decay": "0.8", "lr_scheduler_type": "cosine"})
        >>> checked["layerwise_decay"], checked["lr_scheduler_type"], checked["ema_decay"]
        (0.8, 'cosine', 0.0)
        >>> check_fields({"lr_scheduler_type": "cosin"})
        Traceback (most recent call last):
        ...
        ValueError: lr_scheduler_type must be one of paddle_llrd's registered schedules (add others with paddle_llrd.register_scheduler): Unknown scheduler name 'cosin'; valid names are: ... Did you mean 'cosine'?
    """
    checked: Dict[str, Any] = {}
    for spec in dataclasses.fields(LLRDArgumentsMixin):
        value = values.get(spec.name, _field_default(spec))
        kind = _numeric_type(spec.type, spec.default)
        if isinstance(value, str) and kind is not None:
            value = number_from_text(value, kind, spec.name)
        checked[spec.name] = value
    name = plain_name(checked["lr_scheduler_type"])
    _check_registered(name)
    checked["lr_scheduler_type"] = name
    checked["lr_scheduler_kwargs"] = check_scheduler_kwargs(name, SchedulerKwargs(checked["lr_scheduler_kwargs"]))
    checked["layerwise_decay"] = check_layerwise_decay(checked["layerwise_decay"])
    checked["layer_map"] = check_layer_map(checked["layer_map"])
    weight_decay = values.get("weight_decay", 0.0)
    if isinstance(weight_decay, str):
        weight_decay = number_from_text(weight_decay, float, "weight_decay")
    checked["weight_decay_end"] = _check_weight_decay_schedule(
        weight_decay, checked["weight_decay_end"], checked["weight_decay_incr_style"]
    )
    checked["ema_decay"] = check_ema_decay(checked["ema_decay"])
    checked["ema_warmup"] = checked_bool(checked["ema_warmup"], "ema_warmup")
    checked["ema_warmup_power"] = checked_positive(checked["ema_warmup_power"], "ema_warmup_power")
    checked["ema_eval"] = checked_bool(checked["ema_eval"], "ema_eval")
    checked["log_grad_norms"] = checked_bool(checked["log_grad_norms"], "log_grad_norms")
    checked["resume_with_new_settings"] = checked_bool(checked["resume_with_new_settings"], "resume_with_new_settings")
    min_lr = values.get("min_lr", 0.0)
    clashing = [key for key in _FLOOR_OPTIONS if key in checked["lr_scheduler_kwargs"]]
    if min_lr and clashing:
        raise ValueError(
            f"min_lr={min_lr!r} and lr_scheduler_kwargs {clashing} both set the schedule's floor: keep one"
        )
    return checked


@dataclass
class LLRDArgumentsMixin:
    """The fields ``LLRDTrainingArguments`` adds to a framework's ``TrainingArguments``.

    Mixed in first (``class LLRDTrainingArguments(LLRDArgumentsMixin,
    TrainingArguments)``); see the integration modules for what each field does.
    """

    lr_scheduler_type: str = field(
        default="linear",
        metadata={"help": "The scheduler type: any name in paddle_llrd's scheduler registry."},
    )
    lr_scheduler_kwargs: SchedulerKwargs = field(
        default_factory=SchedulerKwargs,
        metadata={"help": "Extra keyword arguments of the schedule, passed to paddle_llrd.get_scheduler "
                          "(a JSON object on the command line)."},
    )
    layerwise_decay: float = field(
        default=1.0,
        metadata={"help": "Layer-wise lr decay d > 0: block i of L gets d**(L-i) of the lr, the embeddings "
                          "d**(L+1), the head and final norm 1. 1.0 turns it off; above 1 the optimizer warns."},
    )
    layer_map: str = field(
        default="auto",
        metadata={"help": "How parameter names give block indices: 'auto', a family (bert, gpt, llama, vit) or "
                          "a regular expression with one group, which captures the block index."},
    )
    weight_decay_end: Optional[float] = field(
        default=None,
        metadata={"help": "Weight decay at the end of the run; weight_decay is the start (Megatron-LM's "
                          "--end-weight-decay). None keeps weight_decay constant."},
    )
    weight_decay_incr_style: str = field(
        default="constant",
        metadata={"help": "How the weight decay moves from weight_decay to weight_decay_end over the run: "
                          "constant, linear or cosine (Megatron-LM's --weight-decay-incr-style)."},
    )
    ema_decay: float = field(
        default=0.0,
        metadata={"help": "Decay of an exponential moving average of the weights, in [0, 1); 0 turns it off."},
    )
    ema_warmup: bool = field(
        default=False,
        metadata={"help": "Warm the EMA's decay up as timm's ModelEmaV3 does: update t (from 0) uses "
                          "min(ema_decay, 1 - (1 + t) ** -ema_warmup_power), so that a short run's average "
                          "follows the weights."},
    )
    ema_warmup_power: float = field(
        default=2.0 / 3.0,
        metadata={"help": "The power p of the EMA warm-up, > 0: timm's 2/3 reaches a decay of 0.999 after "
                          "31.6k updates, 3/4 after 10k."},
    )
    ema_eval: bool = field(
        default=True,
        metadata={"help": "Evaluate with the averaged weights when ema_decay > 0 (logged as eval_ema_*)."},
    )
    log_grad_norms: bool = field(
        default=True,
        metadata={"help": "Log the global gradient norm (grad_norm) and the norm of each layer group "
                          "(grad_norm/embeddings, grad_norm/layer_<i>, grad_norm/head) every logging_steps: the "
                          "norms of the gradients the step used, before clipping."},
    )
    resume_with_new_settings: bool = field(
        default=False,
        metadata={"help": "Resume a checkpoint whose paddle_llrd settings (layer decay, layer map, schedule, "
                          "weight-decay schedule, EMA) differ from these, or are unknown, and train on with "
                          "these; each difference is warned about. Off: such a resume stops before training."},
    )

    def __post_init__(self) -> None:
        _numbers_from_text(self)
        read = {name: getattr(self, name) for name in _FRAMEWORK_FIELDS_READ if hasattr(self, name)}
        read.update((spec.name, getattr(self, spec.name)) for spec in dataclasses.fields(LLRDArgumentsMixin))
        for name, value in check_fields(read).items():
            setattr(self, name, value)
        # The framework's own check only knows its five names: give it one of
        # them and put the requested name back afterwards, whatever happens.
        name = self.lr_scheduler_type
        self.lr_scheduler_type = "linear"
        try:
            super().__post_init__()
        finally:
            self.lr_scheduler_type = name

    def to_sanitized_dict(self) -> Dict[str, Any]:
        """The framework's hyperparameter dict (what VisualDL's ``add_hparams``
        records), with bools as ints: VisualDL's protobuf refuses a bool
        (``Expected an int, got a boolean``), which PaddleNLP 2.8.1 passes on."""
        sanitized = super().to_sanitized_dict()
        return {key: int(value) if isinstance(value, bool) else value for key, value in sanitized.items()}
