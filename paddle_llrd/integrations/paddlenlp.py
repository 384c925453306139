"""PaddleNLP's ``Trainer`` and ``TrainingArguments`` that train with :class:`paddle_llrd.AdamWDL`.

:class:`LLRDTrainingArguments` adds the fields of the PaddleFormers
integration (one implementation serves both), :class:`LLRDTrainer` reads
them and keeps the constructor keywords of PaddleNLP's ``AdamWDL``. What each
field and keyword does: :doc:`/migration` ("Switching a Trainer script").

Raises:
    ImportError: on import, without a working ``paddlenlp==2.8.1`` (the
        message says what to install).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

PADDLENLP_REQUIREMENT = (
    "pip install paddlenlp==2.8.1 'huggingface_hub<0.26' aistudio-sdk==0.1.7 "
    "'datasets<3' 'pyarrow<17'"
)

try:
    from paddlenlp.trainer import Trainer, TrainerCallback, TrainingArguments
    from paddlenlp.trainer.integrations import VisualDLCallback
    from paddlenlp.trainer.trainer_callback import TrainerState
    from paddlenlp.trainer.trainer import TRAINER_STATE_NAME
    from paddlenlp.trainer.trainer_utils import TrainOutput
    from paddlenlp.utils.log import logger
except ImportError as exc:  # absent, or present without the pins it needs
    from paddle_llrd.integrations.requirements import framework_import_error

    raise framework_import_error(__name__, "PaddleNLP 2.8.1", PADDLENLP_REQUIREMENT, exc) from exc

from paddle_llrd.integrations.training_arguments import LLRDArgumentsMixin, SchedulerKwargs
from paddle_llrd.integrations.trainer import LLRDTrainerMixin, last_complete_checkpoint
from paddle_llrd.integrations.resume import CheckpointResumeError
from paddle_llrd.integrations.run_state import STATE_FILE
from paddle_llrd.layer_decay.layer_maps import no_decay_parameter_names

__all__ = ["STATE_FILE", "CheckpointResumeError", "LLRDTrainer", "LLRDTrainingArguments", "SchedulerKwargs",
           "get_last_checkpoint", "no_decay_parameter_names"]


def _load_trainer_state(checkpoint: str) -> TrainerState:
    """A checkpoint's ``TrainerState``, read as PaddleNLP's resume reads it."""
    return TrainerState.load_from_json(os.path.join(checkpoint, TRAINER_STATE_NAME))


def get_last_checkpoint(folder: str) -> Optional[str]:
    """PaddleNLP's ``get_last_checkpoint`` for checkpoints that may be incomplete: the newest complete
    checkpoint in ``folder`` (``None`` without one); a newer folder whose save did not finish, or a file
    of which was truncated or deleted since, is skipped, with one line on PaddleNLP's logger each.

    Examples:
        >>> import tempfile
        >>> get_last_checkpoint(tempfile.mkdtemp()) is None
        True
    """
    return last_complete_checkpoint(folder, logger.warning)


@dataclass
class LLRDTrainingArguments(LLRDArgumentsMixin, TrainingArguments):
    """PaddleNLP's ``TrainingArguments`` plus paddle_llrd's fields (``layerwise_decay``,
    ``layer_map``, ``lr_scheduler_kwargs``, ``weight_decay_end``, ``weight_decay_incr_style``,
    ``ema_decay``, ``ema_eval``, ``log_grad_norms``); ``lr_scheduler_type`` takes any registry
    name, where PaddleNLP's own class takes five.

    Raises:
        ValueError, TypeError: a field's bad value, naming the field, when the arguments are built.

    Examples:
        >>> import tempfile
        >>> args = LLRDTrainingArguments(output_dir=tempfile.mkdtemp(), lr_scheduler_type="warmup_stable_decay",
        ...                              layerwise_decay=0.8, ema_decay=0.99)
        >>> args.lr_scheduler_type, args.layerwise_decay, args.layer_map, args.ema_decay
        ('warmup_stable_decay', 0.8, 'auto', 0.99)
    """


class LLRDTrainer(LLRDTrainerMixin, Trainer):
    """PaddleNLP's ``Trainer`` with :class:`paddle_llrd.AdamWDL`, its schedule, weight-decay
    schedule and EMA set by the ``TrainingArguments`` fields (and those of
    :class:`LLRDTrainingArguments`).

    Takes every argument of ``paddlenlp.trainer.Trainer``, and PaddleNLP's ``AdamWDL``
    keywords ``layerwise_decay``, ``n_layers`` and ``set_param_lr_fun``, which win over
    the fields (:doc:`/migration`, "Switching a Trainer script").

    Examples:
        >>> import tempfile
        >>> import paddle
        >>> import paddle_llrd
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
        ...                          logging_steps=1, save_strategy="no", disable_tqdm=True)
        >>> trainer = LLRDTrainer(model=model, args=args, train_dataset=data,
        ...                       layerwise_decay=0.5)
        >>> result = trainer.train()
        >>> isinstance(trainer.optimizer, paddle_llrd.AdamWDL), trainer.n_layers
        (True, 2)
        >>> [round(record["learning_rate"], 6) for record in trainer.state.log_history[:-1]]
        [0.0005, 0.001, 0.0005, 0.0]
        >>> from paddle_llrd import layerwise_lr_decay  # the ratio of each parameter's lr
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

    callback_class = TrainerCallback
    visualdl_callback_class = VisualDLCallback
    train_output_class = TrainOutput
    load_trainer_state = staticmethod(_load_trainer_state)
    logger = logger
