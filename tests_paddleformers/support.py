"""Helpers for the PaddleFormers integration tests.

Everything here is real PaddleFormers 1.2.0: a tiny ``LlamaForCausalLM`` built
from a ``LlamaConfig`` (no downloads) and generated token sequences, small
enough that a Trainer run takes well under a second on a CPU.

Two CPU facts shape the defaults: the fused RMSNorm kernel is GPU-only
(``fuse_rms_norm=False``), and ``TrainingArguments`` refuses its default
``amp_master_grad=True`` without fp16/bf16. Checkpoints use
``"unified_checkpoint"``, the one format that resumes in a single CPU process
(the default ``"flex_checkpoint"`` needs a hybrid-parallel group).
"""
from __future__ import annotations

import numpy as np
import paddle
from paddleformers.trainer import TrainerCallback, TrainingArguments
from paddleformers.transformers import LlamaConfig, LlamaForCausalLM

VOCAB_SIZE = 64
SEQ_LEN = 8
N_LAYERS = 2


def make_llama(
    num_hidden_layers: int = N_LAYERS, seed: int = 7, tie_word_embeddings: bool = True
) -> LlamaForCausalLM:
    """A 32-wide LLaMA language model. With ``tie_word_embeddings`` (the
    config's default) the head reuses ``model.embed_tokens.weight`` and has no
    parameter of its own; without it the head is ``lm_head.weight``."""
    paddle.seed(seed)
    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=4,
        max_position_embeddings=32,
        fuse_rms_norm=False,
        tie_word_embeddings=tie_word_embeddings,
    )
    return LlamaForCausalLM(config)


class TokenDataset(paddle.io.Dataset):
    """Sequences that count up by a per-sequence stride (mod the vocabulary),
    so the next token is predictable; the model shifts the labels itself."""

    def __init__(self, n_examples: int = 48, seed: int = 0):
        rng = np.random.default_rng(seed)
        starts = rng.integers(0, VOCAB_SIZE, n_examples)
        strides = rng.integers(1, 4, n_examples)
        positions = np.arange(SEQ_LEN)
        self.tokens = (starts[:, None] + strides[:, None] * positions) % VOCAB_SIZE

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, index: int) -> dict:
        ids = self.tokens[index].tolist()
        return {"input_ids": ids, "labels": ids}


def make_args(output_dir, **overrides) -> TrainingArguments:
    """Quiet CPU arguments: log every step, save nothing, report nowhere.
    ``args_class`` picks the dataclass (e.g. ``LLRDTrainingArguments``)."""
    settings = dict(
        output_dir=str(output_dir),
        max_steps=6,
        per_device_train_batch_size=8,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        disable_tqdm=True,
        seed=11,
        amp_master_grad=False,
        save_checkpoint_format="unified_checkpoint",
        load_checkpoint_format="unified_checkpoint",
    )
    settings.update(overrides)
    args_class = settings.pop("args_class", TrainingArguments)
    return args_class(**settings)


def parameters_numpy(model) -> dict:
    """Structured name -> float64 copy of every parameter."""
    return {name: param.numpy().astype(np.float64) for name, param in model.named_parameters()}


class LogRecorder(TrainerCallback):
    """Keeps every ``logs`` dict: PaddleFormers' ``Trainer.log`` empties
    ``state.log_history`` each time, so the history must be caught here."""

    def __init__(self):
        self.logs = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.logs.append(dict(logs or {}))

    def values(self, key: str) -> list:
        """The logged values of ``key``, in order (records without it skipped)."""
        return [record[key] for record in self.logs if key in record]


class GradientRecorder(TrainerCallback):
    """Records, just before every optimizer step, each parameter and its
    gradient (float64 copies), keyed by structured name."""

    def __init__(self):
        self.steps = []

    def on_optimizer_begin(self, args, state, control, model=None, **kwargs):
        self.steps.append(
            {
                name: (param.numpy().astype(np.float64), param.grad.numpy().astype(np.float64))
                for name, param in model.named_parameters()
            }
        )
