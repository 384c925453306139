"""Tiny Paddle layer stacks named like each common Transformer family.

They exist so that ``python -m paddle_llrd lr-table --arch FAMILY`` can show
how a :class:`~paddle_llrd.layer_decay.layer_maps.LayerMap` assigns layers for each family
without downloading a model. Widths are tiny: only the parameter *names* and
the block structure matter.

The ``llama`` skeleton has the parameter names of PaddleFormers'
``LlamaForCausalLM`` (no biases; RMS norms with a weight only), tied or not;
:func:`llama_for_lr_table` is PaddleFormers' own model where PaddleFormers
imports, that skeleton otherwise.

Example:
    >>> from paddle_llrd.models.skeletons import build_skeleton
    >>> [n for n, _ in build_skeleton("llama", 2).named_parameters()][:3]
    ['model.embed_tokens.weight', 'model.layers.0.self_attn.q_proj.weight', 'model.layers.0.self_attn.k_proj.weight']
    >>> [n for n, _ in build_skeleton("llama", 2).named_parameters()][-2:]
    ['model.norm.weight', 'lm_head.weight']
    >>> tied = build_skeleton("llama", 2, tie_word_embeddings=True)  # lm_head.weight is the embedding
    >>> [n for n, _ in tied.named_parameters()][-2:]
    ['model.layers.1.post_attention_layernorm.weight', 'model.norm.weight']
"""
from __future__ import annotations

from typing import Any

import paddle
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


class _RMSNorm(nn.Layer):
    """A norm with a weight and no bias, as LLaMA's ``LlamaRMSNorm``."""

    def __init__(self):
        super().__init__()
        self.weight = self.create_parameter([_WIDTH])


def _projections(*names: str) -> nn.Layer:
    layer = nn.Layer()
    for name in names:
        setattr(layer, name, nn.Linear(_WIDTH, _WIDTH, bias_attr=False))
    return layer


class _LMHead(nn.Layer):
    """A head whose ``weight`` is ``[vocab, width]`` (as the embedding's, so that it can be the embedding's)."""

    def __init__(self, weight: Any = None):
        super().__init__()
        self.weight = weight if weight is not None else self.create_parameter([16, _WIDTH])

    def forward(self, hidden: Any) -> Any:
        return paddle.matmul(hidden, self.weight, transpose_y=True)


class _LlamaBlock(nn.Layer):
    def __init__(self):
        super().__init__()
        self.self_attn = _projections("q_proj", "k_proj", "v_proj", "o_proj")
        self.mlp = _projections("gate_proj", "up_proj", "down_proj")
        self.input_layernorm = _RMSNorm()
        self.post_attention_layernorm = _RMSNorm()


class LlamaSkeleton(nn.Layer):
    """LLaMA/Qwen with PaddleFormers' ``LlamaForCausalLM`` names: ``model.embed_tokens``,
    ``model.layers.N.{self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj,
    input_layernorm, post_attention_layernorm}``, ``model.norm``, ``lm_head``;
    with ``tie_word_embeddings`` (PaddleFormers' default; here off unless asked)
    ``lm_head.weight`` is ``model.embed_tokens.weight``, listed once by
    ``named_parameters()``."""

    def __init__(self, n_layers: int, tie_word_embeddings: bool = False):
        super().__init__()
        self.model = nn.Layer()
        self.model.embed_tokens = nn.Embedding(16, _WIDTH)
        self.model.layers = nn.LayerList([_LlamaBlock() for _ in range(n_layers)])
        self.model.norm = _RMSNorm()
        self.lm_head = _LMHead(self.model.embed_tokens.weight if tie_word_embeddings else None)


def llama_for_lr_table(n_layers: int, tie_word_embeddings: bool = True) -> tuple[nn.Layer, str]:
    """A tiny PaddleFormers ``LlamaForCausalLM`` where PaddleFormers imports, else
    :class:`LlamaSkeleton` (the same names), and which of the two it is."""
    try:
        from paddleformers.transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        return LlamaSkeleton(n_layers, tie_word_embeddings), "a stand-in with PaddleFormers LlamaForCausalLM's names"
    config = LlamaConfig(vocab_size=16, hidden_size=_WIDTH, intermediate_size=_WIDTH, num_hidden_layers=n_layers,
                         num_attention_heads=1, num_key_value_heads=1, max_position_embeddings=8,
                         tie_word_embeddings=tie_word_embeddings)
    return LlamaForCausalLM(config), "PaddleFormers LlamaForCausalLM"


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


def build_skeleton(arch: str, n_layers: int, **options: Any) -> nn.Layer:
    """A tiny model named like ``arch`` (one of ``SKELETONS``) with ``n_layers`` blocks
    (``options``: ``tie_word_embeddings`` for ``llama``)."""
    if arch not in SKELETONS:
        raise ValueError(f"`arch` must be one of {sorted(SKELETONS)}, got {arch!r}")
    if isinstance(n_layers, bool) or not isinstance(n_layers, int) or n_layers < 1:
        raise ValueError(f"`n_layers` must be an int >= 1, got {n_layers!r}")
    return SKELETONS[arch](n_layers, **options)
