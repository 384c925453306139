"""Tiny Paddle layer stacks named like each common Transformer family.

They exist so that ``python -m paddle_llrd lr-table --arch FAMILY`` can show
how a :class:`~paddle_llrd.layer_decay.layer_maps.LayerMap` assigns layers for each family
without downloading a model. Widths are tiny: only the parameter *names* and
the block structure matter.

Example:
    >>> from paddle_llrd.models.skeletons import build_skeleton
    >>> [n for n, _ in build_skeleton("llama", 2).named_parameters()][:3]
    ['model.embed_tokens.weight', 'model.layers.0.self_attn.weight', 'model.layers.0.self_attn.bias']
"""
from __future__ import annotations

from paddle import nn

from .tiny_bert import TinyBertConfig, TinyBertForSequenceClassification

_WIDTH = 4


class _Block(nn.Layer):
    def __init__(self):
        super().__init__()
        self.self_attn = nn.Linear(_WIDTH, _WIDTH)
        self.mlp = nn.Linear(_WIDTH, _WIDTH)
        self.norm = nn.LayerNorm(_WIDTH)


def _blocks(n_layers: int) -> nn.LayerList:
    return nn.LayerList([_Block() for _ in range(n_layers)])


class GPT2Skeleton(nn.Layer):
    """``transformer.wte``, ``transformer.wpe``, ``transformer.h.N``, ``transformer.ln_f``, ``lm_head``."""

    def __init__(self, n_layers: int):
        super().__init__()
        self.transformer = nn.Layer()
        self.transformer.wte = nn.Embedding(16, _WIDTH)
        self.transformer.wpe = nn.Embedding(8, _WIDTH)
        self.transformer.h = _blocks(n_layers)
        self.transformer.ln_f = nn.LayerNorm(_WIDTH)
        self.lm_head = nn.Linear(_WIDTH, 16)


class GPTDecoderSkeleton(nn.Layer):
    """PaddleNLP GPT: ``gpt.embeddings``, ``gpt.decoder.layers.N``, ``gpt.decoder.norm``."""

    def __init__(self, n_layers: int):
        super().__init__()
        self.gpt = nn.Layer()
        self.gpt.embeddings = nn.Embedding(16, _WIDTH)
        self.gpt.decoder = nn.Layer()
        self.gpt.decoder.layers = _blocks(n_layers)
        self.gpt.decoder.norm = nn.LayerNorm(_WIDTH)


class LlamaSkeleton(nn.Layer):
    """LLaMA/Qwen: ``model.embed_tokens``, ``model.layers.N``, ``model.norm``, ``lm_head``."""

    def __init__(self, n_layers: int):
        super().__init__()
        self.model = nn.Layer()
        self.model.embed_tokens = nn.Embedding(16, _WIDTH)
        self.model.layers = _blocks(n_layers)
        self.model.norm = nn.LayerNorm(_WIDTH)
        self.lm_head = nn.Linear(_WIDTH, 16)


class ViTSkeleton(nn.Layer):
    """ViT/DeiT: ``cls_token``, ``pos_embed``, ``patch_embed.proj``, ``blocks.N``, ``norm``, ``head``."""

    def __init__(self, n_layers: int):
        super().__init__()
        self.cls_token = self.create_parameter([1, 1, _WIDTH])
        self.pos_embed = self.create_parameter([1, 5, _WIDTH])
        self.patch_embed = nn.Layer()
        self.patch_embed.proj = nn.Conv2D(3, _WIDTH, 2, 2)
        self.blocks = _blocks(n_layers)
        self.norm = nn.LayerNorm(_WIDTH)
        self.head = nn.Linear(_WIDTH, 3)


class HFBertSkeleton(nn.Layer):
    """Hugging Face-style BERT: ``bert.embeddings``, ``bert.encoder.layer.N``, ``bert.pooler``, ``classifier``."""

    def __init__(self, n_layers: int):
        super().__init__()
        self.bert = nn.Layer()
        self.bert.embeddings = nn.Layer()
        self.bert.embeddings.word_embeddings = nn.Embedding(16, _WIDTH)
        self.bert.embeddings.LayerNorm = nn.LayerNorm(_WIDTH)
        self.bert.encoder = nn.Layer()
        self.bert.encoder.layer = _blocks(n_layers)
        self.bert.pooler = nn.Layer()
        self.bert.pooler.dense = nn.Linear(_WIDTH, _WIDTH)
        self.classifier = nn.Linear(_WIDTH, 2)


def _bert(n_layers: int) -> nn.Layer:
    return TinyBertForSequenceClassification(
        TinyBertConfig(num_hidden_layers=n_layers, hidden_size=_WIDTH, num_attention_heads=1, intermediate_size=_WIDTH)
    )


SKELETONS = {
    "bert": _bert,
    "hf_bert": HFBertSkeleton,
    "gpt2": GPT2Skeleton,
    "gpt": GPTDecoderSkeleton,
    "llama": LlamaSkeleton,
    "vit": ViTSkeleton,
}


def build_skeleton(arch: str, n_layers: int) -> nn.Layer:
    """A tiny model named like ``arch`` (one of ``SKELETONS``) with ``n_layers`` blocks."""
    if arch not in SKELETONS:
        raise ValueError(f"`arch` must be one of {sorted(SKELETONS)}, got {arch!r}")
    if isinstance(n_layers, bool) or not isinstance(n_layers, int) or n_layers < 1:
        raise ValueError(f"`n_layers` must be an int >= 1, got {n_layers!r}")
    return SKELETONS[arch](n_layers)
