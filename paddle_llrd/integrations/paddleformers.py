"""PaddleFormers' ``Trainer`` and ``TrainingArguments`` that train with :class:`paddle_llrd.AdamWDL`.

:class:`LLRDTrainingArguments` adds the fields, :class:`LLRDTrainer` reads
them. The fields and their checks: :doc:`/migration` ("Switching a Trainer
script"); what differs from PaddleFormers: :doc:`/paddleformers`.

Raises:
    ImportError: on import, without a working ``paddleformers==1.2.0``
        (the message says what to install).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

PADDLEFORMERS_REQUIREMENT = "pip install paddleformers==1.2.0 'numpy<=1.26.4' 'pyarrow<26'"

try:
    from paddleformers.trainer import Trainer, TrainerCallback, TrainingArguments
    from paddleformers.trainer.integrations import VisualDLCallback
    from paddleformers.trainer.trainer_callback import TrainerState
    from paddleformers.trainer.trainer_utils import TrainOutput
    from paddleformers.utils.env import TRAINER_STATE_NAME
    from paddleformers.utils.log import logger
except ImportError as exc:  # absent, or present without the pins it needs
    from paddle_llrd.integrations.requirements import framework_import_error

    raise framework_import_error(__name__, "PaddleFormers 1.2.0", PADDLEFORMERS_REQUIREMENT, exc) from exc

from paddle_llrd.integrations.training_arguments import LLRDArgumentsMixin, SchedulerKwargs
from paddle_llrd.integrations.trainer import LLRDTrainerMixin, last_complete_checkpoint
from paddle_llrd.integrations.resume import CheckpointResumeError
from paddle_llrd.integrations.run_state import STATE_FILE
from paddle_llrd.layer_decay.layer_maps import no_decay_parameter_names

__all__ = ["STATE_FILE", "CheckpointResumeError", "LLRDTrainer", "LLRDTrainingArguments", "SchedulerKwargs",
           "get_last_checkpoint", "no_decay_parameter_names"]


def _load_trainer_state(checkpoint: str) -> TrainerState:
    """A checkpoint's ``TrainerState``, read as PaddleFormers' resume reads it."""
    path = os.path.join(checkpoint, TRAINER_STATE_NAME)
    return TrainerState.load_from_json(path) if path.endswith(".json") else TrainerState.load(path)


def get_last_checkpoint(folder: str) -> Optional[str]:
    """PaddleFormers' ``get_last_checkpoint`` for checkpoints that may be incomplete: the newest complete
    checkpoint in ``folder`` (``None`` without one); a newer folder whose save did not finish, or a file
    of which was truncated or deleted since, is skipped, with one line on PaddleFormers' logger each.

    Examples:
        >>> import tempfile
        >>> get_last_checkpoint(tempfile.mkdtemp()) is None
        True
    """
    return last_complete_checkpoint(folder, logger.warning)

_RESUMABLE_FORMAT = "unified_checkpoint"
# PaddleFormers' default; without AMP its stage1 refuses to start on more than one rank
# (the parameter split needs amp_master_grad, and without the split it fails on grad clipping).
_SHARDING_WITH_AMP = TrainingArguments.__dataclass_fields__["sharding"].default


@dataclass
class LLRDTrainingArguments(LLRDArgumentsMixin, TrainingArguments):
    """PaddleFormers' ``TrainingArguments`` plus paddle_llrd's fields (``layerwise_decay``,
    ``layer_map``, ``lr_scheduler_kwargs``, ``weight_decay_end``, ``weight_decay_incr_style``,
    ``ema_decay``, ``ema_eval``, ``log_grad_norms``; ``lr_scheduler_type`` takes any registry name),
    with three defaults of its own (:doc:`/paddleformers`).

    Raises:
        ValueError, TypeError: a field's bad value, naming the field, when the arguments are built.

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
    """PaddleFormers' ``Trainer`` with :class:`paddle_llrd.AdamWDL`, its schedule, weight-decay
    schedule and EMA set by the fields of :class:`LLRDTrainingArguments`.

    Takes every argument of ``paddleformers.trainer.Trainer``, and the keywords
    ``layerwise_decay``, ``n_layers`` and ``set_param_lr_fun``, which win over the
    fields (:doc:`/migration`, "Switching a Trainer script").

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
        >>> args = LLRDTrainingArguments(output_dir=tempfile.mkdtemp(), max_steps=3,
        ...                              per_device_train_batch_size=4, learning_rate=1e-3,
        ...                              lr_scheduler_type="warmup_stable_decay",
        ...                              layerwise_decay=0.5, weight_decay=0.0, weight_decay_end=0.1,
        ...                              weight_decay_incr_style="linear", ema_decay=0.9,
        ...                              save_strategy="no", disable_tqdm=True)
        >>> trainer = LLRDTrainer(model=model, args=args, train_dataset=data)
        >>> _ = trainer.train()
        >>> trainer.n_layers, trainer.ema.num_updates, trainer.optimizer.weight_decay_schedule.current_step
        (2, 3, 3)
        >>> [trainer.layer_map.ratio(name, 0.5) for name in
        ...  ("model.embed_tokens.weight", "model.layers.0.mlp.up_proj.weight",
        ...   "model.layers.1.mlp.up_proj.weight", "model.norm.weight")]
        [0.125, 0.25, 0.5, 1.0]
    """

    callback_class = TrainerCallback
    visualdl_callback_class = VisualDLCallback
    train_output_class = TrainOutput
    load_trainer_state = staticmethod(_load_trainer_state)
    logger = logger
    parameter_lists_keep_no_decay = True  # a plain list (what its CLI workflows pass) keeps no-decay for biases
