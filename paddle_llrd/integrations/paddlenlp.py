"""PaddleNLP ``Trainer`` with layer-wise learning-rate decay.

:class:`LLRDTrainer` is a :class:`paddlenlp.trainer.Trainer` whose optimizer is
:class:`paddle_llrd.AdamWDL` and whose learning-rate schedule comes from
:func:`paddle_llrd.get_scheduler`. Everything is driven by the ordinary
``TrainingArguments`` fields, plus the constructor keywords ``layerwise_decay``
and ``n_layers`` (and ``set_param_lr_fun`` for models whose layers are not
named ``encoder.layers.N``).

With ``lr_t`` the schedule's learning rate at step ``t`` (``learning_rate``
times the ``lr_scheduler_type`` factor, after ``warmup_steps`` or
``floor(warmup_ratio * num_training_steps)`` warmup steps) and ``L =
n_layers``, each parameter ``p`` (structured name ``n``) is updated with

.. code-block:: text

    ratio(p) = layerwise_decay ** (L - i)   if n contains "encoder.layers.i."
               layerwise_decay ** (L + 1)   elif n contains "embedding"
               1                            otherwise (pooler, classifier)
    p <- p * (1 - lr_t * weight_decay)      unless n contains "bias" or "norm"
    p <- p - lr_t * ratio(p) * adam_direction(p)

where ``adam_direction`` is Adam's bias-corrected ``m / (sqrt(v) + eps)`` with
``adam_beta1``, ``adam_beta2`` and ``adam_epsilon``. Gradients are clipped to a
global norm of ``max_grad_norm`` first (when it is positive), and
``fp16_opt_level="O2"`` keeps float32 master weights (``multi_precision``).

PaddleNLP is optional: importing this module without a working
``paddlenlp==2.8.1`` raises :class:`ImportError` that says what to install.

Examples:
    >>> import tempfile
    >>> import paddle
    >>> from paddlenlp.trainer import TrainingArguments
    >>> from paddlenlp.transformers import BertConfig, BertForSequenceClassification
    >>> from paddle_llrd.integrations.paddlenlp import LLRDTrainer
    >>> config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
    ...                     num_attention_heads=2, intermediate_size=64,
    ...                     max_position_embeddings=16, num_labels=2)
    >>> model = BertForSequenceClassification(config)
    >>> data = [{"input_ids": [1 + (i * 7 + j) % 99 for j in range(8)], "labels": i % 2}
    ...         for i in range(16)]
    >>> args = TrainingArguments(output_dir=tempfile.mkdtemp(), max_steps=4,
    ...                          per_device_train_batch_size=8, learning_rate=1e-3,
    ...                          warmup_steps=2, lr_scheduler_type="cosine",
    ...                          logging_steps=1, save_strategy="no", report_to=[],
    ...                          disable_tqdm=True)
    >>> trainer = LLRDTrainer(model=model, args=args, train_dataset=data,
    ...                       layerwise_decay=0.5)
    >>> result = trainer.train()
    >>> type(trainer.optimizer).__name__, trainer.n_layers
    ('AdamWDL', 2)
    >>> [round(record["learning_rate"], 6) for record in trainer.state.log_history[:-1]]
    [0.0005, 0.001, 0.0005, 0.0]

    Each parameter's share of that learning rate (``ratio`` above):

    >>> from paddle_llrd import layerwise_lr_decay
    >>> name_dict = {p.name: n for n, p in model.named_parameters()}
    >>> params = dict(model.named_parameters())
    >>> for name in ("bert.embeddings.word_embeddings.weight", "bert.encoder.layers.0.linear1.weight",
    ...              "bert.encoder.layers.1.linear1.weight", "classifier.weight"):
    ...     print(name, layerwise_lr_decay(0.5, name_dict, trainer.n_layers, params[name]))
    bert.embeddings.word_embeddings.weight 0.125
    bert.encoder.layers.0.linear1.weight 0.25
    bert.encoder.layers.1.linear1.weight 0.5
    classifier.weight 1.0
"""
from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional

PADDLENLP_REQUIREMENT = (
    "pip install paddlenlp==2.8.1 'huggingface_hub<0.26' aistudio-sdk==0.1.7 "
    "'datasets<3' 'pyarrow<17'"
)

try:
    import paddlenlp  # noqa: F401
    from paddlenlp.trainer import Trainer, TrainingArguments
except ImportError as exc:  # absent, or present without the pins it needs
    raise ImportError(
        "paddle_llrd.integrations.paddlenlp needs PaddleNLP 2.8.1 and the versions "
        "of its dependencies that still work beside Paddle 3; install them with: "
        f"{PADDLENLP_REQUIREMENT} (or `pip install -r requirements-paddlenlp.txt` "
        f"from the paddle_llrd repository). The import failed with: {exc}"
    ) from exc

import paddle

from paddle_llrd import registry
from paddle_llrd.adamwdl import AdamWDL
from paddle_llrd.layer_maps import no_decay_parameter_names
from paddle_llrd.layerwise import layerwise_lr_decay
from paddle_llrd.registry import get_scheduler

__all__ = ["LLRDTrainer", "LLRDTrainingArguments", "no_decay_parameter_names"]


def _plain_name(value: Any) -> str:
    """An argument such as ``lr_scheduler_type`` or ``optim`` as a plain string (PaddleNLP stores enums)."""
    return str(getattr(value, "value", value))


class SchedulerKwargs(dict):
    """``lr_scheduler_kwargs``: a dict of keyword arguments, or (on the command
    line) a JSON object such as ``'{"min_lr_rate": 0.1}'``.

    Raises:
        ValueError: a string that is not JSON.
        TypeError: not a mapping with string keys.
    """

    def __init__(self, options: Any = None) -> None:
        if options is None:
            options = {}
        elif isinstance(options, str):
            try:
                options = json.loads(options)
            except json.JSONDecodeError as exc:
                raise ValueError(f"lr_scheduler_kwargs must be a JSON object, got {options!r}: {exc}") from None
        if not isinstance(options, Mapping) or not all(isinstance(key, str) for key in options):
            raise TypeError(
                "lr_scheduler_kwargs must be a dict from argument names to values, "
                f"got {type(options).__name__} {options!r}"
            )
        super().__init__(options)


@dataclass
class LLRDTrainingArguments(TrainingArguments):
    """``TrainingArguments`` whose ``lr_scheduler_type`` may be any name in
    paddle_llrd's registry (including those added with
    :func:`paddle_llrd.register_scheduler`), not only PaddleNLP's five.

    PaddleNLP 2.8.1's ``TrainingArguments`` converts ``lr_scheduler_type`` to
    its own ``SchedulerType`` enum and so refuses every other name; this class
    checks the name against paddle_llrd's registry instead and keeps it as a
    string. ``lr_scheduler_kwargs`` (as in Hugging Face's arguments) carries
    the options of the schedules beyond PaddleNLP's (``min_lr_rate``,
    ``num_decay_steps``, ``decay_style``, ...) to
    :func:`paddle_llrd.get_scheduler`, and takes precedence over the
    ``num_cycles``, ``lr_end`` and ``power`` fields; on the command line
    (``PdArgumentParser``) it is a JSON object. Everything else is PaddleNLP's.

    Examples:
        >>> import tempfile
        >>> args = LLRDTrainingArguments(output_dir=tempfile.mkdtemp(),
        ...                              lr_scheduler_type="cosine", report_to=[])
        >>> args.lr_scheduler_type
        'cosine'
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

    def __post_init__(self) -> None:
        name = _plain_name(self.lr_scheduler_type)
        _check_registered(name)
        self.lr_scheduler_kwargs = SchedulerKwargs(self.lr_scheduler_kwargs)
        # PaddleNLP's own check only knows its five names: give it one of them
        # and put the requested name back afterwards, whatever happens.
        self.lr_scheduler_type = "linear"
        try:
            super().__post_init__()
        finally:
            self.lr_scheduler_type = name


def _registered_scheduler_names() -> "list[str]":
    # read at call time: register_scheduler may have added names since import
    return sorted(_plain_name(key) for key in registry.TYPE_TO_SCHEDULER_FUNCTION)


def _check_registered(name: str) -> None:
    valid = _registered_scheduler_names()
    if name not in valid:
        raise ValueError(
            f"lr_scheduler_type must be one of paddle_llrd's registered schedules "
            f"{valid} (add others with paddle_llrd.register_scheduler), got {name!r}"
        )


def _check_layerwise_decay(layerwise_decay: Any) -> float:
    if isinstance(layerwise_decay, bool) or not isinstance(layerwise_decay, numbers.Real):
        raise TypeError(
            f"layerwise_decay must be a real number such as 0.8, got "
            f"{type(layerwise_decay).__name__} {layerwise_decay!r}"
        )
    value = float(layerwise_decay)
    if not (math.isfinite(value) and value > 0.0):
        raise ValueError(f"layerwise_decay must be a finite number > 0, got {layerwise_decay!r}")
    return value


def _check_n_layers(n_layers: Any, source: str) -> int:
    if isinstance(n_layers, bool) or not isinstance(n_layers, numbers.Integral):
        raise TypeError(f"n_layers must be an int ({source}), got {type(n_layers).__name__} {n_layers!r}")
    if n_layers < 1:
        raise ValueError(f"n_layers must be >= 1 ({source}), got {n_layers}")
    return int(n_layers)


class LLRDTrainer(Trainer):
    """A PaddleNLP ``Trainer`` that trains with :class:`paddle_llrd.AdamWDL`.

    Takes every argument of :class:`paddlenlp.trainer.Trainer`, plus:

    Args:
        layerwise_decay: the per-layer decay ``d`` of the learning rate: the
            top encoder layer ``L-1`` gets ``d``, layer ``i`` gets
            ``d ** (L - i)``, the embeddings ``d ** (L + 1)``, the pooler and the
            task head ``1``. ``1.0`` (the default) means no layer decay.
        n_layers: the number of encoder layers ``L``; by default the model
            config's ``num_hidden_layers``.
        set_param_lr_fun: the function that gives each parameter its ratio,
            called as ``set_param_lr_fun(layerwise_decay, name_dict, n_layers,
            param)`` with ``name_dict = {p.name: structured_name}`` built from
            the model. The default, :func:`paddle_llrd.layerwise_lr_decay`,
            knows BERT-style names (``encoder.layers.N``); pass another one for
            models named otherwise (for instance a
            ``paddle_llrd.layer_maps.LayerMap`` for GPT's ``decoder.layers.N``).

    The optimizer (:meth:`create_optimizer`) and the schedule
    (:meth:`create_scheduler`) follow the ``TrainingArguments`` exactly as
    PaddleNLP's ``Trainer`` does (see the module documentation for the
    formulas); ``lr_scheduler_type`` may be any name in paddle_llrd's registry
    when the arguments are :class:`LLRDTrainingArguments`. An optimizer passed
    through ``optimizers=(optimizer, scheduler)`` is used as it is.

    Raises:
        TypeError: ``layerwise_decay`` is not a real number, ``n_layers``
            not an int, or ``set_param_lr_fun`` not callable.
        ValueError: ``layerwise_decay <= 0``, ``n_layers < 1``, ``n_layers``
            not given for a model without ``config.num_hidden_layers``, or
            ``TrainingArguments.optim`` other than ``"adamw"``.
    """

    def __init__(
        self,
        *args: Any,
        layerwise_decay: float = 1.0,
        n_layers: Optional[int] = None,
        set_param_lr_fun: Callable[..., Optional[float]] = layerwise_lr_decay,
        **kwargs: Any,
    ):
        self.layerwise_decay = _check_layerwise_decay(layerwise_decay)
        if not callable(set_param_lr_fun):
            raise TypeError(
                "set_param_lr_fun must be callable as fn(layerwise_decay, name_dict, n_layers, param), "
                f"got {type(set_param_lr_fun).__name__} {set_param_lr_fun!r}"
            )
        self.set_param_lr_fun = set_param_lr_fun
        if n_layers is not None:
            n_layers = _check_n_layers(n_layers, "the n_layers keyword")
        super().__init__(*args, **kwargs)
        if n_layers is None:
            config_layers = getattr(getattr(self.model, "config", None), "num_hidden_layers", None)
            if config_layers is None:
                raise ValueError(
                    "n_layers was not given and the model has no config.num_hidden_layers: "
                    "pass LLRDTrainer(..., n_layers=<number of encoder layers>)"
                )
            n_layers = _check_n_layers(config_layers, "from model.config.num_hidden_layers")
        self.n_layers = n_layers
        optim = _plain_name(self.args.optim)
        if optim != "adamw":
            raise ValueError(
                f"LLRDTrainer always trains with paddle_llrd.AdamWDL, so TrainingArguments.optim "
                f"must be 'adamw', got {optim!r}"
            )

    def _parameter_name_dict(self) -> Dict[str, str]:
        return {param.name: name for name, param in self.model.named_parameters()}

    def _apply_decay_param_fun(self) -> Callable[[str], bool]:
        excluded = no_decay_parameter_names(self.model)
        decayed = {param.name for param in self.model.parameters() if param.name not in excluded}

        def apply_decay_param_fun(param_name: str) -> bool:
            return param_name in decayed

        return apply_decay_param_fun

    def create_optimizer(self, lr_scheduler: Optional[paddle.optimizer.lr.LRScheduler] = None):
        """Build :class:`paddle_llrd.AdamWDL` from the ``TrainingArguments``.

        ``learning_rate`` is ``lr_scheduler`` (else the trainer's scheduler,
        else ``args.learning_rate``); ``adam_beta1``, ``adam_beta2``,
        ``adam_epsilon`` and ``weight_decay`` pass through; bias and norm
        parameters are kept out of weight decay unless parameter groups were
        set with ``set_optimizer_grouped_parameters`` (then each group's own
        ``weight_decay`` rules, as in PaddleNLP); ``max_grad_norm > 0`` clips
        by global norm; ``fp16_opt_level == "O2"`` sets ``multi_precision``.
        """
        if self.optimizer is not None:
            return self.optimizer
        args = self.args
        if self.optimizer_grouped_parameters is not None:
            parameters = self.optimizer_grouped_parameters
            apply_decay_param_fun = None
        else:
            parameters = self.model.parameters()
            apply_decay_param_fun = self._apply_decay_param_fun()
        learning_rate = lr_scheduler if lr_scheduler is not None else self.lr_scheduler
        if learning_rate is None:
            learning_rate = args.learning_rate
        grad_clip = paddle.nn.ClipGradByGlobalNorm(args.max_grad_norm) if args.max_grad_norm > 0 else None
        self.optimizer = AdamWDL(
            learning_rate=learning_rate,
            beta1=args.adam_beta1,
            beta2=args.adam_beta2,
            epsilon=args.adam_epsilon,
            parameters=parameters,
            weight_decay=args.weight_decay,
            apply_decay_param_fun=apply_decay_param_fun,
            grad_clip=grad_clip,
            multi_precision=args.fp16_opt_level == "O2",
            layerwise_decay=self.layerwise_decay,
            n_layers=self.n_layers,
            set_param_lr_fun=self.set_param_lr_fun,
            name_dict=self._parameter_name_dict(),
        )
        return self.optimizer

    def create_scheduler(self, num_training_steps: int):
        """Build the schedule with :func:`paddle_llrd.get_scheduler`.

        ``lr_scheduler_type`` names it; warmup is ``warmup_steps`` when
        positive, else ``floor(warmup_ratio * num_training_steps)``; the
        schedule spans ``decay_steps`` when the arguments have a positive one,
        else ``num_training_steps``; ``num_cycles``, ``lr_end`` and ``power``
        pass through (as in PaddleNLP's ``Trainer.create_scheduler``), and so
        does ``lr_scheduler_kwargs`` of :class:`LLRDTrainingArguments`, whose
        entries win over those three.
        """
        if self.lr_scheduler is None:
            args = self.args
            if args.warmup_steps > 0:
                warmup = args.warmup_steps
            else:
                warmup = int(args.warmup_ratio * num_training_steps)
            decay_steps = getattr(args, "decay_steps", 0) or 0
            options = {
                "num_cycles": args.num_cycles,
                "lr_end": args.lr_end,
                "power": args.power,
                **(getattr(args, "lr_scheduler_kwargs", None) or {}),
            }
            self.lr_scheduler = get_scheduler(
                _plain_name(args.lr_scheduler_type),
                learning_rate=args.learning_rate,
                num_warmup_steps=warmup,
                num_training_steps=decay_steps if decay_steps > 0 else num_training_steps,
                **options,
            )
        return self.lr_scheduler
