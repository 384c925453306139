"""A small ViT-style image classifier, built in so the demo needs no downloads.

Parameter names follow the ViT/DeiT convention that
:class:`~paddle_llrd.layer_decay.layer_maps.LayerMap` reads for the ``"vit"`` family:
``cls_token``, ``pos_embed`` and ``patch_embed.proj`` (layer id 0),
``blocks.N.*`` (layer id ``N + 1``), and ``norm``/``head`` (the top id).
Blocks are pre-norm Transformer encoder layers, as in ViT.

Example:
    >>> import paddle
    >>> from paddle_llrd.layer_decay.layer_maps import LayerMap
    >>> from paddle_llrd.models.vit import TinyViT, TinyViTConfig
    >>> config = TinyViTConfig(image_size=8, patch_size=2, num_layers=2, num_classes=5)
    >>> model = TinyViT(config)
    >>> list(model(paddle.rand([3, 1, 8, 8])).shape)
    [3, 5]
    >>> list(model.features(paddle.rand([3, 1, 8, 8])).shape)
    [3, 64]
    >>> layer_map = LayerMap.from_model(model)
    >>> layer_map.n_layers, layer_map.layer_id("pos_embed")
    (2, 0)
    >>> layer_map.layer_id("blocks.1.linear1.weight")
    2
"""
from __future__ import annotations

import dataclasses

import paddle
from paddle import nn


@dataclasses.dataclass
class TinyViTConfig:
    """Shape of the model; the defaults suit 8x8 grey images and train in seconds on a CPU."""

    image_size: int = 8
    patch_size: int = 2
    in_channels: int = 1
    hidden_size: int = 64
    num_layers: int = 4
    num_heads: int = 4
    mlp_ratio: int = 2
    num_classes: int = 10

    def __post_init__(self):
        for name in ("image_size", "patch_size", "in_channels", "hidden_size", "num_layers", "num_heads", "mlp_ratio", "num_classes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"TinyViTConfig: `{name}` must be an int >= 1, got {value!r}")
        if self.image_size % self.patch_size:
            raise ValueError(f"TinyViTConfig: `patch_size` ({self.patch_size}) must divide `image_size` ({self.image_size})")
        if self.hidden_size % self.num_heads:
            raise ValueError(f"TinyViTConfig: `num_heads` ({self.num_heads}) must divide `hidden_size` ({self.hidden_size})")

    @property
    def num_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2


class PatchEmbedding(nn.Layer):
    """Cuts an image into non-overlapping patches and projects each to ``hidden_size``."""

    def __init__(self, config: TinyViTConfig):
        super().__init__()
        self.proj = nn.Conv2D(config.in_channels, config.hidden_size, config.patch_size, stride=config.patch_size)

    def forward(self, images):
        return self.proj(images).flatten(2).transpose([0, 2, 1])  # [batch, patches, hidden]


class TinyViT(nn.Layer):
    """``[CLS]`` + patch tokens + position embeddings, ``blocks``, final ``norm``, linear ``head``."""

    def __init__(self, config: TinyViTConfig | None = None):
        super().__init__()
        config = config or TinyViTConfig()
        self.config = config
        small_normal = nn.initializer.TruncatedNormal(std=0.02)
        self.cls_token = self.create_parameter([1, 1, config.hidden_size], default_initializer=small_normal)
        self.pos_embed = self.create_parameter([1, config.num_patches + 1, config.hidden_size], default_initializer=small_normal)
        self.patch_embed = PatchEmbedding(config)
        self.blocks = nn.LayerList(
            [
                nn.TransformerEncoderLayer(
                    config.hidden_size,
                    config.num_heads,
                    config.mlp_ratio * config.hidden_size,
                    dropout=0.0,
                    activation="gelu",
                    normalize_before=True,
                )
                for _ in range(config.num_layers)
            ]
        )
        self.norm = nn.LayerNorm(config.hidden_size)
        self.head = nn.Linear(config.hidden_size, config.num_classes)

    def features(self, images):
        """The normalised ``[CLS]`` output, ``[batch, hidden_size]``: what the head reads."""
        patches = self.patch_embed(images)
        cls = self.cls_token.expand([patches.shape[0], -1, -1])
        tokens = paddle.concat([cls, patches], axis=1) + self.pos_embed
        for block in self.blocks:
            tokens = block(tokens)
        return self.norm(tokens[:, 0])

    def forward(self, images):
        return self.head(self.features(images))
