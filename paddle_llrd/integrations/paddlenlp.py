"""PaddleNLP's ``Trainer`` and ``TrainingArguments`` with layer-wise lr decay, registry
schedules, a weight-decay ramp and an EMA of the weights.

:class:`LLRDTrainer` trains with :class:`paddle_llrd.AdamWDL` and
:func:`paddle_llrd.get_scheduler`, driven by the ``TrainingArguments`` fields;
:class:`LLRDTrainingArguments` adds the fields of the PaddleFormers
integration (one implementation serves both), and the constructor keywords
``layerwise_decay``, ``n_layers`` and ``set_param_lr_fun`` of PaddleNLP's
``AdamWDL`` keep working. What each field and keyword does, the update it
gives and the logs: :doc:`/migration` ("Switching a Trainer script").
Importing this module without a working ``paddlenlp==2.8.1`` raises an
:class:`ImportError` that says what to install.

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

    Each parameter's share of that learning rate, its layer ratio:

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

from dataclasses import dataclass

PADDLENLP_REQUIREMENT = (
    "pip install paddlenlp==2.8.1 'huggingface_hub<0.26' aistudio-sdk==0.1.7 "
    "'datasets<3' 'pyarrow<17'"
)

try:
    from paddlenlp.trainer import Trainer, TrainerCallback, TrainingArguments
    from paddlenlp.trainer.integrations import VisualDLCallback
    from paddlenlp.trainer.trainer_utils import get_last_checkpoint
    from paddlenlp.utils.log import logger
except ImportError as exc:  # absent, or present without the pins it needs
    from paddle_llrd.integrations.requirements import framework_import_error

    raise framework_import_error(__name__, "PaddleNLP 2.8.1", PADDLENLP_REQUIREMENT, exc) from exc

from paddle_llrd.integrations.training_arguments import LLRDArgumentsMixin, SchedulerKwargs
from paddle_llrd.integrations.trainer import LLRDTrainerMixin
from paddle_llrd.integrations.run_state import STATE_FILE
from paddle_llrd.layer_decay.layer_maps import no_decay_parameter_names

__all__ = ["STATE_FILE", "LLRDTrainer", "LLRDTrainingArguments", "SchedulerKwargs", "no_decay_parameter_names"]


@dataclass
class LLRDTrainingArguments(LLRDArgumentsMixin, TrainingArguments):
    """PaddleNLP's ``TrainingArguments`` plus paddle_llrd's fields
    (see the module documentation): ``lr_scheduler_type`` may be any name in
    paddle_llrd's registry (PaddleNLP's own class refuses all but its five),
    ``lr_scheduler_kwargs``, ``layerwise_decay``, ``layer_map``,
    ``weight_decay_end``, ``weight_decay_incr_style``, ``ema_decay``,
    ``ema_eval`` and ``log_grad_norms``. Each is a field of a JSON/YAML config or a
    ``PdArgumentParser`` command line (``lr_scheduler_kwargs`` as a JSON
    object), and a bad value raises ``ValueError``/``TypeError`` naming it
    when the arguments are built.

    Examples:
        >>> import tempfile
        >>> args = LLRDTrainingArguments(output_dir=tempfile.mkdtemp(), lr_scheduler_type="warmup_stable_decay",
        ...                              layerwise_decay=0.8, ema_decay=0.99)
        >>> args.lr_scheduler_type, args.layerwise_decay, args.layer_map, args.ema_decay
        ('warmup_stable_decay', 0.8, 'auto', 0.99)
    """


class LLRDTrainer(LLRDTrainerMixin, Trainer):
    """A PaddleNLP ``Trainer`` that trains with :class:`paddle_llrd.AdamWDL`
    (see the module documentation for the formulas).

    Takes every argument of :class:`paddlenlp.trainer.Trainer`; with
    :class:`LLRDTrainingArguments` its fields drive layer decay, the schedule,
    the weight-decay schedule and the EMA. The keywords ``layerwise_decay``,
    ``n_layers`` and ``set_param_lr_fun`` of PaddleNLP's ``AdamWDL`` remain
    (and win over the fields); they, the attributes (``ema``, ``layer_map``,
    ``n_layers``, ...) and the errors are those of the shared
    ``LLRDTrainerMixin``.
    """

    callback_class = TrainerCallback
    visualdl_callback_class = VisualDLCallback
    find_last_checkpoint = staticmethod(get_last_checkpoint)
    logger = logger
