r"""Layer ids for pipeline-parallel models: every stage gives each parameter
the id it has in the whole model.

A ``paddle.distributed.fleet.meta_parallel.PipelineLayer`` (PaddleFormers'
``*Pipe`` models, e.g. ``LlamaForCausalLMPipe``) builds on each stage only its
own slice of a sequence of layer descriptions, and names the parameters by
their *global* position in that sequence (``"3.mlp.up_proj.weight"``), or,
with virtual stages, by the chunk's first position plus the position inside
the chunk (``"3.1.mlp.up_proj.weight"``); weights shared between stages (a
tied embedding and head) live under ``shared_layers.<key>``. None of these
names says ``layers.N``, so :class:`~paddle_llrd.LayerMap` alone finds no
block, and counting blocks on one stage would give that stage's count, not
the model's.

:class:`PipelineLayerMap` reads the model's ``get_sequential_name_prefixes()``
(position -> the single-model prefix, e.g. ``"2" -> "model.layers.1"``, the
same on every stage) and its layer descriptions:

* a parameter at position ``p`` is named ``prefix(p) + rest``
  (``"2.mlp.up_proj.weight"`` -> ``"model.layers.1.mlp.up_proj.weight"``),
  then classified as :class:`~paddle_llrd.LayerMap` classifies that name;
* a shared weight (``shared_layers.<key>...``) gets the id of the *first*
  description that uses the key, on every stage: a tied LLaMA embedding/head
  is the embeddings (id 0) on the first stage and on the last, as the tied
  weight of the single model is, and the copies the stages keep in sync get
  the same learning rate (PaddleFormers' own name mapping uses each stage's
  own description instead, ``lm_head`` on the last stage);
* ``n_layers`` is counted from all prefixes, every stage's blocks.

Examples:
    >>> layer_map = PipelineLayerMap(
    ...     prefixes=["model", "model.layers.0", "model.layers.1", "model.norm", "lm_head"],
    ...     shared_positions={"model_shared_weight": 0})
    >>> layer_map.n_layers
    2
    >>> layer_map.global_name("2.mlp.up_proj.weight"), layer_map.global_name("3.weight")
    ('model.layers.1.mlp.up_proj.weight', 'model.norm.weight')
    >>> [layer_map.layer_id(name) for name in ("1.mlp.up_proj.weight", "3.weight", "4.weight",
    ...                                        "shared_layers.model_shared_weight.weight")]
    [1, 3, 3, 0]
    >>> layer_map.ratio("shared_layers.model_shared_weight.embed_tokens.weight", 0.5)
    0.125
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from paddle import nn

from paddle_llrd.layer_decay.layer_maps import LayerMap

__all__ = ["PipelineLayerMap", "find_pipeline_layer"]

_SHARED_CONTAINERS = ("shared_layers", "local_shared_layers")


def find_pipeline_layer(model: nn.Layer) -> tuple[str, nn.Layer] | None:
    """``(path, layer)`` of the first layer in ``model`` (``model`` itself
    included, ``path`` ``""`` then) that is a pipeline layer with sequential
    name prefixes (a PaddleFormers ``*Pipe`` model, also inside a LoRA
    wrapper), else ``None``."""
    if not isinstance(model, nn.Layer):
        raise TypeError(f"`model` must be a paddle.nn.Layer, got {type(model).__name__}")
    for path, layer in model.named_sublayers(include_self=True):
        if callable(getattr(layer, "get_sequential_name_prefixes", None)) and hasattr(layer, "_layers_desc"):
            return path, layer
    return None


class PipelineLayerMap(LayerMap):
    """A :class:`~paddle_llrd.LayerMap` over a pipeline layer's parameter
    names (see the module documentation).

    Args:
        prefixes: the single-model name prefix of each position of the
            layer sequence (``get_sequential_name_prefixes()``, as a sequence
            or a ``{position: prefix}`` mapping); ``""`` for none.
        shared_positions: each shared layer's key and the first position
            that uses it.
        path: where the pipeline layer sits in the model whose names are
            given (``"model"`` inside a LoRA wrapper), ``""`` for the model
            itself.
        n_layers, family, pattern: as for :class:`~paddle_llrd.LayerMap`;
            ``n_layers`` defaults to the blocks counted over all prefixes.

    Raises:
        ValueError: ``n_layers`` below the block count of the prefixes, a
            shared position outside the sequence, or positions that are not
            ``0 .. len - 1``.
    """

    def __init__(
        self,
        prefixes: Sequence[str] | Mapping[Any, str],
        shared_positions: Mapping[str, int] | None = None,
        path: str = "",
        n_layers: int | None = None,
        family: str = "auto",
        pattern: str | None = None,
    ):
        super().__init__(n_layers=None, family=family, pattern=pattern)
        if isinstance(prefixes, Mapping):
            positions = sorted(int(key) for key in prefixes)
            if positions != list(range(len(positions))):
                raise ValueError(f"`prefixes` must have the positions 0 .. {len(positions) - 1}, got {positions}")
            prefixes = [prefixes[key] for key in sorted(prefixes, key=int)]
        self.prefixes = list(prefixes)
        self.shared_positions = dict(shared_positions or {})
        for key, position in self.shared_positions.items():
            if not 0 <= position < len(self.prefixes):
                raise ValueError(f"shared layer {key!r} is at position {position}, outside 0 .. {len(self.prefixes) - 1}")
        self.path = path
        blocks = [self.block_index(prefix + ".") for prefix in self.prefixes]
        found = [index for index in blocks if index is not None]
        counted = max(found) + 1 if found else 0
        if n_layers is None:
            n_layers = counted
        elif n_layers < counted:
            raise ValueError(
                f"`n_layers`={n_layers} but the pipeline's layer sequence has a block with index {counted - 1}; "
                f"n_layers must be at least {counted} (or None, to count it)"
            )
        self.n_layers = n_layers
        block_positions = [position for position, index in enumerate(blocks) if index is not None]
        self._first_block = block_positions[0] if block_positions else len(self.prefixes)
        self._block_of_position = blocks

    @classmethod
    def from_model(cls, model: nn.Layer, n_layers: int | None = None, family: str = "auto", pattern: str | None = None) -> "PipelineLayerMap":
        """The map of the pipeline layer in ``model`` (see :func:`find_pipeline_layer`).

        Raises:
            ValueError: ``model`` holds no pipeline layer.
        """
        found = find_pipeline_layer(model)
        if found is None:
            raise ValueError(
                f"{type(model).__name__} holds no pipeline layer with get_sequential_name_prefixes(): "
                "use LayerMap.from_model"
            )
        path, pipeline = found
        shared: dict[str, int] = {}
        for position, desc in enumerate(pipeline._layers_desc):
            key = getattr(desc, "layer_name", None)
            if key is not None and key not in shared:
                shared[key] = position
        return cls(pipeline.get_sequential_name_prefixes(), shared, path=path, n_layers=n_layers, family=family,
                   pattern=pattern)

    @classmethod
    def from_names(cls, names: Iterable[str], n_layers: int | None = None, family: str = "auto", pattern: str | None = None) -> "LayerMap":
        raise TypeError("a PipelineLayerMap is built from the model (PipelineLayerMap.from_model), not from names")

    def _local(self, structured_name: str) -> str | None:
        """The name inside the pipeline layer, or ``None`` for a name outside it."""
        if not self.path:
            return structured_name
        if structured_name.startswith(self.path + "."):
            return structured_name[len(self.path) + 1:]
        return None

    def _split(self, local: str) -> tuple[str | None, int | None, str]:
        """``(shared key, position, rest)`` of a name inside the pipeline layer."""
        parts = local.split(".")
        if parts[0] in _SHARED_CONTAINERS and len(parts) > 1:
            return parts[1], None, ".".join(parts[2:])
        if parts[0].isdigit():
            if len(parts) > 1 and parts[1].isdigit():  # virtual stages: chunk start + position in the chunk
                return None, int(parts[0]) + int(parts[1]), ".".join(parts[2:])
            if len(parts) > 1 and parts[1] in self.shared_positions:  # a shared layer inside a virtual chunk
                return parts[1], None, ".".join(parts[2:])
            return None, int(parts[0]), ".".join(parts[1:])
        return None, None, local

    def global_name(self, structured_name: str) -> str:
        """The single-model name of a pipeline parameter name (a shared
        weight's: the first description's prefix and the stage's own rest)."""
        local = self._local(structured_name)
        if local is None:
            return structured_name
        key, position, rest = self._split(local)
        if key is not None:
            position = self.shared_positions.get(key)
            if position is None:
                raise ValueError(f"parameter {structured_name!r} is in shared layer {key!r}, which no layer description uses")
        if position is None:
            return local
        if position >= len(self.prefixes):
            raise ValueError(f"parameter {structured_name!r} is at position {position}, past the {len(self.prefixes)} layers")
        return ".".join(part for part in (self.prefixes[position], rest) if part)

    def layer_id(self, structured_name: str, n_layers: int | None = None) -> int:
        """The global layer id: ``0`` embeddings, ``N + 1`` block ``N``, ``n_layers + 1`` the rest."""
        n_layers = self._resolve_n_layers(n_layers)
        local = self._local(structured_name)
        if local is not None:
            key, _, _ = self._split(local)
            if key is not None:
                return self._shared_layer_id(structured_name, key, n_layers)
        return super().layer_id(self.global_name(structured_name), n_layers)

    def _shared_layer_id(self, structured_name: str, key: str, n_layers: int) -> int:
        position = self.shared_positions.get(key)
        if position is None:
            raise ValueError(f"parameter {structured_name!r} is in shared layer {key!r}, which no layer description uses")
        block = self._block_of_position[position]
        if block is not None:
            return super().layer_id(self.prefixes[position] + ".", n_layers)
        return 0 if position < self._first_block else n_layers + 1

    def __repr__(self) -> str:
        return f"PipelineLayerMap(n_layers={self.n_layers}, positions={len(self.prefixes)}, shared={self.shared_positions})"

