"""Helpers for the PaddleFormers integration tests.

Everything here is real PaddleFormers 1.2.0: a tiny ``LlamaForCausalLM`` built
from a ``LlamaConfig`` (no downloads) and generated token sequences, small
enough that a Trainer run takes well under a second on a CPU.

The fused RMSNorm kernel is GPU-only, hence ``fuse_rms_norm=False``.
"""
from __future__ import annotations

import numpy as np
import paddle
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

