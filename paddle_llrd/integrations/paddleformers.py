"""PaddleFormers ``Trainer`` with layer-wise learning-rate decay, registry
schedules, weight-decay schedules and an EMA of the weights.

PaddleFormers, PaddleNLP's successor, dropped ``AdamWDL``,
``layerwise_lr_decay``, ``ExponentialMovingAverage``,
``InverseSquareRootSchedule`` and the warmup schedule classes
(``LinearDecayWithWarmup``, ...).
:class:`LLRDTrainer` is a :class:`paddleformers.trainer.Trainer` that trains
with :class:`paddle_llrd.AdamWDL` and :func:`paddle_llrd.get_scheduler`, and
:class:`LLRDTrainingArguments` is PaddleFormers' ``TrainingArguments`` with
the fields that switch everything on from a config file or command line:

``layerwise_decay`` (default ``1.0``, off) and ``layer_map`` (default ``"auto"``)
    ratio ``d ** (L + 1 - k)`` for a parameter of layer id ``k`` (see
    :class:`paddle_llrd.LayerMap`): for LLaMA, the embeddings get
    ``d ** (L + 1)``, block ``i`` (``model.layers.i``) ``d ** (L - i)``, the
    final norm and the head ``1``. ``layer_map`` is ``"auto"``, a family
    (``bert``, ``gpt``, ``llama``, ``vit``) or a regular expression whose
    one group captures the block index; ``L`` is ``config.num_hidden_layers``,
    else counted from the names. A tied head (``tie_word_embeddings=True``,
    LLaMA's default) *is* the embedding weight, one parameter that
    ``named_parameters()`` lists once, as ``model.embed_tokens.weight``: it
    trains at the embeddings' ``d ** (L + 1)``; the logs name that group
    ``embeddings_tied_head`` (and the one left at ``1``, ``model.norm`` alone,
    ``final_norm``) and the summary line at train start says the head is
    tied. Untie the head to train it at ``1``.
``lr_scheduler_type`` and ``lr_scheduler_kwargs``
    any name of paddle_llrd's registry (``warmup_stable_decay``,
    ``cosine_with_min_lr``, ``inverse_sqrt``, names added with
    :func:`paddle_llrd.register_scheduler`, ...), with its options as a dict
    (a JSON object on the command line). PaddleFormers' ``min_lr`` passes
    through to the schedules that have a floor.
``weight_decay_end`` and ``weight_decay_incr_style``
    Megatron-LM's weight-decay ramp: a :class:`paddle_llrd.WeightDecaySchedule`
    from ``weight_decay`` to ``weight_decay_end`` over the run's steps,
    ``constant`` (the default), ``linear`` or ``cosine``.
``ema_decay`` (default ``0``, off) and ``ema_eval`` (default ``True``)
    ``trainer.ema`` is a :class:`paddle_llrd.ExponentialMovingAverage` of the
    weights, updated after every optimizer step that changed them (not after
    a skipped AMP overflow step), kept in every checkpoint and restored by
    ``train(resume_from_checkpoint=...)``. While ``ema_eval`` is on,
    ``evaluate`` also evaluates the averaged weights and reports them beside
    the trained weights' ``eval_loss`` as ``eval_ema_loss`` (and
    ``eval_ema_<metric>``), and ``save_model(output_dir)`` also writes the
    averaged model to ``<output_dir>/ema`` (load it with ``from_pretrained``).
``log_grad_norms`` (default ``True``)
    every training log carries the global gradient norm ``grad_norm`` and
    each layer group's ``grad_norm/<group>`` (the gradients the step just
    taken used, before clipping), beside each group's
    ``learning_rate/<group>`` and the scheduled ``weight_decay`` of the step
    PaddleFormers' ``learning_rate`` describes (the coming one), so that
    ``learning_rate/<group>`` is ``learning_rate`` times the group's ratio.

``lr_scheduler_type="reduce_lr_on_plateau"`` is stepped on
``metric_for_best_model`` after each evaluation. PaddleFormers'
``Trainer.train()`` does not read ``resume_from_checkpoint`` from the
arguments: pass it (``trainer.train(resume_from_checkpoint=...)``).

Some defaults differ from PaddleFormers' ``TrainingArguments`` so that a run
on CPUs works and resumes without further flags:
``save_checkpoint_format`` and ``load_checkpoint_format`` are
``"unified_checkpoint"`` (PaddleFormers' ``"flex_checkpoint"`` resumes only in
a process that has initialised ``fleet``, e.g. under
``paddle.distributed.launch``), and ``amp_master_grad`` follows AMP (on with
``bf16``/``fp16``, off without, where PaddleFormers refuses ``True``), and
so does ``sharding`` (PaddleFormers' ``"stage1"`` with AMP, ``""``, plain data
parallel, without: PaddleFormers' ``stage1`` refuses to start on several
ranks without AMP). An
``LLRDTrainer`` given PaddleFormers' own ``TrainingArguments`` keeps
PaddleFormers' defaults: set both formats to ``"unified_checkpoint"`` there
to resume in one process. Each checkpoint directory also gets
``paddle_llrd_state.pdparams`` (the EMA and the weight-decay schedule's
position); a resumed run keeps the ``ema_decay`` of its own arguments.

PaddleFormers is optional: importing this module without a working
``paddleformers==1.2.0`` raises :class:`ImportError` that says what to install.

Examples:
    >>> import tempfile
    >>> import paddle
    >>> from paddleformers.transformers import LlamaConfig, LlamaForCausalLM
    >>> from paddle_llrd.integrations.paddleformers import LLRDTrainer, LLRDTrainingArguments
    >>> paddle.seed(0)  # doctest: +ELLIPSIS
    <...>
    >>> config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
    ...                      num_attention_heads=4, max_position_embeddings=32, fuse_rms_norm=False)
    >>> model = LlamaForCausalLM(config)
    >>> data = [{"input_ids": [(i * 5 + j) % 64 for j in range(16)],
    ...          "labels": [(i * 5 + j) % 64 for j in range(16)]} for i in range(8)]
    >>> args = LLRDTrainingArguments(output_dir=tempfile.mkdtemp(), max_steps=3, per_device_train_batch_size=4,
    ...                              learning_rate=1e-3, lr_scheduler_type="warmup_stable_decay",
    ...                              layerwise_decay=0.5, weight_decay=0.0, weight_decay_end=0.1,
    ...                              weight_decay_incr_style="linear", ema_decay=0.9,
    ...                              save_strategy="no", disable_tqdm=True)
    >>> trainer = LLRDTrainer(model=model, args=args, train_dataset=data)
    >>> _ = trainer.train()
    >>> trainer.n_layers, trainer.ema.num_updates, trainer.optimizer.weight_decay_schedule.current_step
    (2, 3, 3)
    >>> [trainer.layer_map.ratio(name, 0.5) for name in
    ...  ("model.embed_tokens.weight", "model.layers.0.mlp.up_proj.weight", "model.layers.1.mlp.up_proj.weight",
    ...   "model.norm.weight")]
    [0.125, 0.25, 0.5, 1.0]
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

PADDLEFORMERS_REQUIREMENT = "pip install paddleformers==1.2.0 'numpy<=1.26.4' 'pyarrow<26'"

try:
    from paddleformers.trainer import Trainer, TrainerCallback, TrainingArguments
    from paddleformers.trainer.integrations import VisualDLCallback
    from paddleformers.trainer.trainer_utils import get_last_checkpoint
    from paddleformers.utils.log import logger
except ImportError as exc:  # absent, or present without the pins it needs
    from paddle_llrd.integrations.requirements import framework_import_error

    raise framework_import_error(__name__, "PaddleFormers 1.2.0", PADDLEFORMERS_REQUIREMENT, exc) from exc

from paddle_llrd.integrations.training_arguments import LLRDArgumentsMixin, SchedulerKwargs
from paddle_llrd.integrations.trainer import LLRDTrainerMixin
from paddle_llrd.integrations.run_state import STATE_FILE
from paddle_llrd.layer_decay.layer_maps import no_decay_parameter_names

__all__ = ["STATE_FILE", "LLRDTrainer", "LLRDTrainingArguments", "SchedulerKwargs", "no_decay_parameter_names"]

_RESUMABLE_FORMAT = "unified_checkpoint"
# PaddleFormers' default; without AMP its stage1 refuses to start on more than one rank
# (the parameter split needs amp_master_grad, and without the split it fails on grad clipping).
_SHARDING_WITH_AMP = TrainingArguments.__dataclass_fields__["sharding"].default


@dataclass
class LLRDTrainingArguments(LLRDArgumentsMixin, TrainingArguments):
    """PaddleFormers' ``TrainingArguments`` plus paddle_llrd's fields (see the
    module documentation): ``lr_scheduler_type`` (any registry name),
    ``lr_scheduler_kwargs``, ``layerwise_decay``, ``layer_map``,
    ``weight_decay_end``, ``weight_decay_incr_style``, ``ema_decay``,
    ``ema_eval`` and ``log_grad_norms``, each a field of a JSON/YAML config or a ``PdArgumentParser``
    command line; a bad value raises ``ValueError``/``TypeError`` naming it
    when the arguments are built. The checkpoint formats default to
    ``"unified_checkpoint"``, ``amp_master_grad`` to ``bf16 or fp16``, and
    ``sharding`` to PaddleFormers' ``"stage1"`` with AMP, ``""`` without.

    Examples:
        >>> import tempfile
        >>> args = LLRDTrainingArguments(output_dir=tempfile.mkdtemp(), lr_scheduler_type="cosine_with_min_lr",
        ...                              lr_scheduler_kwargs={"min_lr_rate": 0.1}, ema_decay=0.999)
        >>> args.lr_scheduler_type, args.save_checkpoint_format, args.amp_master_grad
        ('cosine_with_min_lr', 'unified_checkpoint', False)
    """

    save_checkpoint_format: Optional[str] = field(
        default=_RESUMABLE_FORMAT,
        metadata={"help": "Checkpoint format to save: unified_checkpoint (resumes in one process), "
                          "flex_checkpoint or sharding_io."},
    )
    load_checkpoint_format: Optional[str] = field(
        default=_RESUMABLE_FORMAT,
        metadata={"help": "Checkpoint format to load: unified_checkpoint, flex_checkpoint or sharding_io."},
    )
    amp_master_grad: Optional[bool] = field(
        default=None,
        metadata={"help": "float32 gradients for AMP O2; by default on when bf16 or fp16 is."},
    )
    sharding: Optional[str] = field(
        default=None,
        metadata={"help": "Sharded data parallel: stage1, stage2 or stage3 (with offload), or '' for plain data "
                          "parallel; by default PaddleFormers' stage1 with bf16/fp16 and '' without, where "
                          "stage1 cannot run."},
    )

    def __post_init__(self) -> None:
        amp = bool(self.bf16 or self.fp16)
        if self.amp_master_grad is None:
            self.amp_master_grad = amp
        if self.sharding is None:
            self.sharding = _SHARDING_WITH_AMP if amp else ""
        super().__post_init__()


class LLRDTrainer(LLRDTrainerMixin, Trainer):
    """A PaddleFormers ``Trainer`` that trains with :class:`paddle_llrd.AdamWDL`
    (see the module documentation).

    Takes every argument of :class:`paddleformers.trainer.Trainer`; with
    :class:`LLRDTrainingArguments` its fields drive layer decay, the schedule,
    the weight-decay schedule and the EMA. The constructor keywords, the
    attributes and the errors are those of the PaddleNLP integration (one
    ``LLRDTrainerMixin`` serves both): ``layerwise_decay``, ``n_layers`` and
    ``set_param_lr_fun`` win over the fields.
    """

    callback_class = TrainerCallback
    visualdl_callback_class = VisualDLCallback
    find_last_checkpoint = staticmethod(get_last_checkpoint)
    logger = logger
    parameter_lists_keep_no_decay = True  # a plain list (what its CLI workflows pass) keeps no-decay for biases
