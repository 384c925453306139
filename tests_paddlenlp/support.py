"""Helpers for the PaddleNLP integration tests.

Everything here is real PaddleNLP 2.8.1: a tiny ``BertForSequenceClassification``
built from a ``BertConfig`` (no downloads) and a synthetic classification data
set small enough that a Trainer run takes well under a second on a CPU.
"""
from __future__ import annotations

import functools

import numpy as np
import paddle
from paddlenlp.trainer import PdArgumentParser, TrainerCallback, TrainingArguments
from paddlenlp.transformers import BertConfig, BertForSequenceClassification
from trainer_checks import Kit, layer_ratio, quiet_run_settings

from paddle_llrd.integrations.paddlenlp import LLRDTrainer, LLRDTrainingArguments, get_last_checkpoint

VOCAB_SIZE = 100
SEQ_LEN = 8
N_LAYERS = 2


def make_bert(num_hidden_layers: int = N_LAYERS, seed: int = 7) -> BertForSequenceClassification:
    """A 2-layer, 32-wide BERT classifier, without dropout so that runs repeat."""
    paddle.seed(seed)
    config = BertConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=32,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=16,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        num_labels=2,
    )
    return BertForSequenceClassification(config)


def make_dataset(n_examples: int = 32, seed: int = 0) -> list:
    """Label 1 when token 1 occurs in the sequence, 0 when token 2 does."""
    rng = np.random.default_rng(seed)
    examples = []
    for i in range(n_examples):
        ids = rng.integers(3, VOCAB_SIZE, SEQ_LEN)
        label = i % 2
        ids[rng.integers(0, SEQ_LEN)] = 1 if label else 2
        examples.append({"input_ids": ids.tolist(), "labels": label})
    return examples


def make_args(output_dir, **overrides) -> TrainingArguments:
    """Quiet CPU arguments (``quiet_run_settings()``), six steps at lr 1e-3."""
    settings = {**quiet_run_settings(), "output_dir": str(output_dir), "max_steps": 6, "learning_rate": 1e-3, **overrides}
    args_class = settings.pop("args_class", TrainingArguments)
    return args_class(**settings)


#: Layer-wise lr ratio of a PaddleNLP BERT parameter: ``(structured name, d, L) -> ratio``.
expected_ratio = functools.partial(layer_ratio, block=r"encoder\.layers\.(\d+)\.", embedding="embeddings")


def classification_loss(model, examples) -> float:
    """The model's own cross-entropy over all ``examples`` as one batch."""
    input_ids = paddle.to_tensor([example["input_ids"] for example in examples])
    labels = paddle.to_tensor([example["labels"] for example in examples])
    with paddle.no_grad():
        loss, _ = model(input_ids=input_ids, labels=labels)
    return float(loss)


KIT = Kit(
    trainer_class=LLRDTrainer,
    arguments_class=LLRDTrainingArguments,
    parser_class=PdArgumentParser,
    callback_class=TrainerCallback,
    make_model=lambda seed=7: make_bert(seed=seed),
    make_dataset=make_dataset,
    family="bert",
    block_regex=r"encoder\.layers\.(\d+)\.",
    expected_ratio=expected_ratio,
    n_layers=N_LAYERS,
    loss=classification_loss,
    last_checkpoint=get_last_checkpoint,
    load_model=BertForSequenceClassification.from_pretrained,
    zero_gradient_suffixes=("k_proj.bias",),
)
