r"""Layer maps: a layer id for every parameter of any common architecture.

:func:`~paddle_llrd.layerwise_lr_decay` understands BERT/ERNIE names only
(``encoder.layers.N``). :class:`LayerMap` reads the block index of the common
Transformer families from a parameter's *structured* name:

=================  ==========================================================
family             block names (``N`` = block index)
=================  ==========================================================
``bert``           ``encoder.layers.N`` (PaddleNLP), ``encoder.layer.N`` (HF)
``gpt``            ``decoder.layers.N``, ``h.N`` (GPT-2's ``transformer.h.N``)
``llama``          ``model.layers.N``, ``layers.N`` (LLaMA, Qwen, Mistral)
``vit``            ``blocks.N`` (ViT, DeiT)
=================  ==========================================================

and gives:

* layer id ``0`` to embeddings (any name containing ``embed``, plus GPT-2's
  ``wte``/``wpe`` and ViT's ``cls_token``/``pos_embed``/``patch_embed``,
  DeiT's ``dist_token``, BEiT's ``mask_token``),
* layer id ``N + 1`` to block ``N``,
* layer id ``n_layers + 1`` to everything else (heads, poolers, final norms).

The learning-rate ratio of a parameter with layer id :math:`k` is

.. math::

    r = d^{\,n_\text{layers} + 1 - k}

with :math:`d` the decay rate: heads train at the full rate, the top block at
:math:`d`, the embeddings at :math:`d^{\,n_\text{layers}+1}` — the same numbers as
:func:`~paddle_llrd.layerwise_lr_decay` on BERT names. ``n_layers`` is counted
from the names (largest block index + 1) when not given. For anything else,
pass ``pattern``: a regular expression whose one group is the block index.

A ``LayerMap`` is a drop-in ``set_param_lr_fun`` for :class:`~paddle_llrd.AdamWDL`
(it is called as ``fn(decay_rate, name_dict, n_layers, param)``). Its ratios
depend on the parameter's name only (``pure_in_name = True``), so AdamWDL
computes them once per parameter, not at every step. A map that knows its
``n_layers`` refuses a different one from the optimizer, rather than giving
every parameter a silently wrong ratio (AdamWDL's default is ``n_layers=12``).

A pipeline-parallel model (a ``PipelineLayer``, PaddleFormers' ``*Pipe``
models) names its parameters by position; :class:`PipelineLayerMap` gives
them the layer ids of the whole model on every stage, and
:meth:`LayerMap.from_model` and :func:`resolve_layer_map` pick it.

Examples:
    >>> import paddle
    >>> from paddle_llrd import AdamWDL
    >>> from paddle_llrd.layer_decay.layer_maps import LayerMap, build_name_dict
    >>> class Block(paddle.nn.Layer):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.mlp = paddle.nn.Linear(4, 4)
    >>> class TinyLlama(paddle.nn.Layer):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.embed_tokens = paddle.nn.Embedding(10, 4)
    ...         self.layers = paddle.nn.LayerList([Block() for _ in range(3)])
    ...         self.norm = paddle.nn.LayerNorm(4)
    >>> model = TinyLlama()
    >>> layer_map = LayerMap.from_model(model)
    >>> layer_map.n_layers
    3
    >>> layer_map.layer_id("layers.2.mlp.weight"), layer_map.layer_id("norm.weight")
    (3, 4)
    >>> layer_map.ratio("embed_tokens.weight", 0.5)
    0.0625
    >>> opt = AdamWDL(parameters=model.parameters(), layerwise_decay=0.5,
    ...               n_layers=layer_map.n_layers, name_dict=build_name_dict(model),
    ...               set_param_lr_fun=layer_map)
"""
from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from paddle import nn

# The block-name rules, importable from here as before.
from .block_names import EMBEDDING_NAME, FAMILY_PATTERNS, block_regex_problem, checked_block_regex, checked_n_layers

__all__ = [
    "EMBEDDING_NAME",
    "FAMILY_PATTERNS",
    "NO_DECAY_NAME_PARTS",
    "LayerMap",
    "PipelineLayerMap",
    "block_regex_problem",
    "build_name_dict",
    "checked_block_regex",
    "checked_n_layers",
    "find_pipeline_layer",
    "make_layerwise_fn",
    "no_decay_parameter_names",
    "resolve_layer_map",
]


def build_name_dict(model: nn.Layer) -> dict[str, str]:
    """Map each parameter's Paddle name (``param.name``) to its structured name.

    >>> import paddle
    >>> build_name_dict(paddle.nn.Sequential(paddle.nn.Linear(2, 2)))  # doctest: +ELLIPSIS
    {'linear_...w_0': '0.weight', 'linear_...b_0': '0.bias'}
    """
    if not isinstance(model, nn.Layer):
        raise TypeError(f"`model` must be a paddle.nn.Layer, got {type(model).__name__}")
    return {param.name: structured for structured, param in model.named_parameters()}


# PaddleNLP's Trainer leaves a parameter out of weight decay when any of these
# occurs in its structured name (biases and LayerNorm weights).
NO_DECAY_NAME_PARTS = ("bias", "norm")


def no_decay_parameter_names(model: nn.Layer) -> set[str]:
    """The ``param.name`` of every parameter kept out of weight decay.

    As PaddleNLP's ``Trainer.create_optimizer``: a parameter is excluded when
    its structured name (from ``model.named_parameters()``) contains ``"bias"``
    or ``"norm"``. PaddleNLP's models name their LayerNorms ``norm``,
    ``norm1``, ``layer_norm`` ...; a model that names them otherwise keeps
    them in weight decay, exactly as under PaddleNLP's own ``Trainer``.

    Args:
        model: the model whose parameters are classified.

    Returns:
        The set of excluded ``param.name`` values.

    Examples:
        >>> import paddle
        >>> model = paddle.nn.LayerDict({"linear": paddle.nn.Linear(2, 2),
        ...                              "norm": paddle.nn.LayerNorm(2)})
        >>> excluded = no_decay_parameter_names(model)
        >>> [(n, p.name in excluded) for n, p in model.named_parameters()]
        [('linear.weight', False), ('linear.bias', True),
         ('norm.weight', True), ('norm.bias', True)]
    """
    return {
        param.name
        for structured_name, param in model.named_parameters()
        if any(part in structured_name for part in NO_DECAY_NAME_PARTS)
    }


class LayerMap:
    """Assigns layer ids from structured names; see the module docstring.

    Args:
        n_layers (int|None): Number of blocks. ``None`` counts it from the names
            given to :meth:`from_names`/:meth:`from_model`; a map built directly
            with ``None`` must be given ``n_layers`` when called.
        family (str): ``"auto"`` (try every family), or one of ``FAMILY_PATTERNS``.
        pattern (str|None): A regex whose one group is the block index, used
            instead of the family patterns.

    Raises:
        TypeError: ``pattern`` is not a str, ``n_layers`` not an int
            (:func:`checked_n_layers`).
        ValueError: ``pattern`` is no regular expression with exactly one
            group, ``family`` is unknown or ``n_layers`` is negative.
    """

    #: Ratios depend on the structured name only: AdamWDL may cache them.
    pure_in_name = True
    #: The ratios are read from the structured names: AdamWDL refuses to build without ``name_dict``.
    needs_name_dict = True

    def __init__(self, n_layers: int | None = None, family: str = "auto", pattern: str | None = None):
        if n_layers is not None:
            n_layers = checked_n_layers(n_layers, owner="LayerMap")
        if pattern is not None:
            self._patterns = (re.compile(checked_block_regex(pattern, "pattern")),)
        elif family == "auto":
            self._patterns = tuple(re.compile(p) for group in FAMILY_PATTERNS.values() for p in group)
        elif family in FAMILY_PATTERNS:
            self._patterns = tuple(re.compile(p) for p in FAMILY_PATTERNS[family])
        else:
            raise ValueError(f"`family` must be 'auto' or one of {sorted(FAMILY_PATTERNS)}, got {family!r}")
        self.family = family
        self.pattern = pattern
        self.n_layers = n_layers

    def block_index(self, structured_name: str) -> int | None:
        r"""The block index in ``structured_name``, or ``None`` outside the blocks.

        Raises:
            ValueError: the pattern matches but its first group captures no
                whole number (``r"layers\.(\w+)\."`` on ``"layers.q.weight"``);
                the message names the pattern and the parameter.
        """
        for compiled in self._patterns:
            match = compiled.search(structured_name)
            if match:
                index_text = match.group(1)
                # isdecimal, as int() reads: no sign, no spaces, no underscores
                if index_text is None or not index_text.isdecimal():
                    raise ValueError(
                        f"layer_map pattern {compiled.pattern!r} matches parameter {structured_name!r} but its "
                        f"first group captured {index_text!r}, not a block index; `layer_map` must be a regular "
                        r"expression whose first group captures the block's digits only, e.g. r'^stages\.(\d+)\.'"
                    )
                return int(index_text)
        return None

    def layer_id(self, structured_name: str, n_layers: int | None = None) -> int:
        """``0`` for embeddings, ``N + 1`` for block ``N``, ``n_layers + 1`` otherwise."""
        n_layers = self._resolve_n_layers(n_layers)
        index = self.block_index(structured_name)
        if index is not None:
            if index >= n_layers:
                raise ValueError(
                    f"parameter {structured_name!r} is in block {index} but n_layers={n_layers}; "
                    "pass the model's number of blocks"
                )
            return index + 1
        if EMBEDDING_NAME.search(structured_name):
            return 0
        return n_layers + 1

    def ratio(self, structured_name: str, decay_rate: float, n_layers: int | None = None) -> float:
        """``decay_rate ** (n_layers + 1 - layer_id)``."""
        n_layers = self._resolve_n_layers(n_layers)
        return decay_rate ** (n_layers + 1 - self.layer_id(structured_name, n_layers))

    def __call__(self, decay_rate: float, name_dict: Mapping[str, str], n_layers: int, param: Any) -> float:
        """The ``set_param_lr_fun`` protocol of :class:`~paddle_llrd.AdamWDL`."""
        if name_dict is None:
            raise TypeError("LayerMap needs `name_dict`: pass name_dict=build_name_dict(model) to AdamWDL")
        try:
            structured = name_dict[param.name]
        except KeyError:
            raise KeyError(
                f"parameter {param.name!r} is not in `name_dict`; build it with "
                "`paddle_llrd.layer_decay.layer_maps.build_name_dict(model)` from the model whose parameters you optimise"
            ) from None
        if self.n_layers is not None and n_layers is not None and n_layers != self.n_layers:
            raise ValueError(
                f"this LayerMap has n_layers={self.n_layers} but was called with n_layers={n_layers}; "
                "pass AdamWDL(..., n_layers=layer_map.n_layers)"
            )
        return self.ratio(structured, decay_rate, n_layers if n_layers is not None else self.n_layers)

    def _resolve_n_layers(self, n_layers: int | None) -> int:
        n_layers = self.n_layers if n_layers is None else n_layers
        if n_layers is None:
            raise ValueError("`n_layers` is unknown: pass it, or build the map with LayerMap.from_model(model)")
        return n_layers

    @classmethod
    def from_names(cls, names: Iterable[str], n_layers: int | None = None, family: str = "auto", pattern: str | None = None) -> "LayerMap":
        """A map whose ``n_layers`` (when not given) is the largest block index + 1."""
        layer_map = cls(n_layers=n_layers, family=family, pattern=pattern)
        if n_layers is None:
            indices = [i for i in (layer_map.block_index(n) for n in names) if i is not None]
            layer_map.n_layers = max(indices) + 1 if indices else 0
        return layer_map

    @classmethod
    def from_model(cls, model: nn.Layer, n_layers: int | None = None, family: str = "auto", pattern: str | None = None) -> "LayerMap":
        """:meth:`from_names` over ``model.named_parameters()``; for a
        pipeline-parallel model (a ``PipelineLayer`` such as PaddleFormers'
        ``LlamaForCausalLMPipe``, whose names are positions), the
        :class:`PipelineLayerMap` that gives
        the model's global layer ids on every stage."""
        pipeline_map = _pipeline_layer_map(model, n_layers, family, pattern)
        if pipeline_map is not None:
            return pipeline_map
        return cls.from_names(build_name_dict(model).values(), n_layers=n_layers, family=family, pattern=pattern)

    def table(self, model: nn.Layer, decay_rate: float) -> list[tuple[str, int, float]]:
        """``(structured name, layer id, ratio)`` for each parameter of ``model``."""
        return [(name, self.layer_id(name), self.ratio(name, decay_rate)) for name, _ in model.named_parameters()]


def make_layerwise_fn(model: nn.Layer, n_layers: int | None = None, family: str = "auto", pattern: str | None = None) -> tuple[LayerMap, dict[str, str]]:
    """``(set_param_lr_fun, name_dict)`` for :class:`~paddle_llrd.AdamWDL` from a model.

    >>> import paddle
    >>> from paddle_llrd import AdamWDL
    >>> from paddle_llrd.models import tiny_bert
    >>> config = tiny_bert.TinyBertConfig(num_hidden_layers=3)
    >>> model = tiny_bert.TinyBertForSequenceClassification(config)
    >>> fn, name_dict = make_layerwise_fn(model)
    >>> opt = AdamWDL(parameters=model.parameters(), layerwise_decay=0.9,
    ...               n_layers=fn.n_layers, name_dict=name_dict, set_param_lr_fun=fn)
    >>> make_layerwise_fn(model, family="vit")  # (no ``blocks.N`` in a BERT)
    Traceback (most recent call last):
    ...
    ValueError: layer_map=LayerMap(family='vit', pattern=None): no parameter name has a block index ...

    The map is :func:`resolve_layer_map`'s, as every other entry point's: a
    model in which the family or ``pattern`` finds no block is refused (every
    ratio would be 1), and ``n_layers`` below the block count too.
    """
    layer_map = _pipeline_layer_map(model, n_layers, family, pattern)
    if layer_map is None:
        layer_map = resolve_layer_map(LayerMap(family=family, pattern=pattern), model, n_layers)
    return layer_map, build_name_dict(model)


# How many parameter names a "no recognisable blocks" error quotes.
_NAMES_QUOTED = 6


def resolve_layer_map(
    layer_map: str | LayerMap,
    model_or_names: nn.Layer | Iterable[str],
    n_layers: int | None = None,
    *,
    require_blocks: bool = True,
) -> LayerMap:
    r"""The :class:`LayerMap` a ``layer_map`` argument means for a model, with its ``n_layers`` known.

    Every API of the package that takes a ``layer_map`` argument (the
    parameter groups, the Trainer integration) resolves it here, so the same
    value gives the same ratios everywhere.

    Args:
        layer_map: ``"auto"`` (every family's block names), a family
            (``"bert"``, ``"gpt"``, ``"llama"``, ``"vit"``), a regular
            expression with exactly one group, which captures the block index
            (e.g. ``r"^stages\.(\d+)\."``), or a :class:`LayerMap` (used as it
            is; a copy gets the ``n_layers`` it lacks).
        model_or_names: the model (a ``paddle.nn.Layer``), or its structured
            parameter names. Frozen parameters count: the blocks are the
            model's, whatever is trained.
        n_layers: the number of blocks; ``None`` counts them from the names
            (largest block index + 1). It may exceed the count (a model cut
            down from a deeper one), never fall below it.

    Returns:
        A :class:`LayerMap` whose ``n_layers`` is set.

    Raises:
        TypeError: ``layer_map`` is not a str or a ``LayerMap``; ``model_or_names``
            is neither a Layer nor an iterable of str; ``n_layers`` is not an
            int (:func:`checked_n_layers`).
        ValueError: ``layer_map`` is an unknown family or a regex without exactly
            one group; no parameter name has a block index the map recognises
            (the message quotes some of the names); ``n_layers`` is negative,
            below the model's block count, or differs from a given
            ``LayerMap``'s own.

    ``require_blocks=False`` accepts a model without blocks (the map then has
    ``n_layers`` as given, else 0), for callers whose decay is off.

    Examples:
        >>> from paddle_llrd.layer_decay.layer_maps import resolve_layer_map
        >>> names = ["embed_tokens.weight", "layers.0.mlp.weight",
        ...          "layers.1.mlp.weight", "norm.weight"]
        >>> resolve_layer_map("auto", names).n_layers
        2
        >>> by_regex = resolve_layer_map(r"^layers\.(\d+)\.", names, n_layers=4)
        >>> by_regex.layer_id("layers.1.mlp.weight")
        2
        >>> resolve_layer_map("vit", names)
        Traceback (most recent call last):
        ...
        ValueError: layer_map='vit': no parameter name has a block index this map
        recognises ...
        >>> resolve_layer_map("resnet", names)
        Traceback (most recent call last):
        ...
        ValueError: `layer_map` must be 'auto', a family (bert, gpt, llama, vit) or a
        regular expression whose one group captures the block index; 'resnet' is no
        family and has 0 groups; it needs exactly one, ...
    """
    names = _structured_names(model_or_names)
    if n_layers is not None:
        n_layers = checked_n_layers(n_layers, owner="resolve_layer_map")
    if isinstance(layer_map, str) and isinstance(model_or_names, nn.Layer):
        family, pattern = (layer_map, None) if layer_map == "auto" or layer_map in FAMILY_PATTERNS else (
            "auto", checked_block_regex(layer_map, "layer_map", families=FAMILY_PATTERNS))
        pipeline_map = _pipeline_layer_map(model_or_names, n_layers, family, pattern)
        if pipeline_map is not None:
            if require_blocks and pipeline_map.n_layers == 0:
                raise ValueError(
                    f"layer_map={layer_map!r}: no prefix of the pipeline's layer sequence has a block index this "
                    f"map recognises (prefixes: {pipeline_map.prefixes}); pass `layer_map` a family or a regular "
                    "expression whose one group captures the block index"
                )
            return pipeline_map
    if isinstance(layer_map, LayerMap):
        if layer_map.n_layers is not None and n_layers is not None and n_layers != layer_map.n_layers:
            raise ValueError(
                f"`n_layers`={n_layers} but the LayerMap given as `layer_map` has n_layers={layer_map.n_layers}; "
                "pass one of them"
            )
        resolved = copy.copy(layer_map)  # the caller's map keeps its n_layers
        resolved.n_layers = layer_map.n_layers if layer_map.n_layers is not None else n_layers
    elif isinstance(layer_map, str):
        if layer_map == "auto" or layer_map in FAMILY_PATTERNS:
            resolved = LayerMap(n_layers=n_layers, family=layer_map)
        else:
            pattern = checked_block_regex(layer_map, "layer_map", families=FAMILY_PATTERNS)
            resolved = LayerMap(n_layers=n_layers, pattern=pattern)
    else:
        raise TypeError(
            "`layer_map` must be 'auto', a family name, a regular expression (str) or a LayerMap, "
            f"got {type(layer_map).__name__} {layer_map!r}"
        )
    indices = [index for index in map(resolved.block_index, names) if index is not None]
    if not indices and not require_blocks:
        if resolved.n_layers is None:
            resolved.n_layers = 0
        return resolved
    if not indices:
        shown = ", ".join(repr(name) for name in names[:_NAMES_QUOTED])
        more = f", ... ({len(names)} in all)" if len(names) > _NAMES_QUOTED else ""
        described = (
            repr(layer_map) if isinstance(layer_map, str)
            else f"LayerMap(family={layer_map.family!r}, pattern={layer_map.pattern!r})"
        )
        raise ValueError(
            f"layer_map={described}: no parameter name has a block index this map recognises "
            f"(names seen: {shown}{more}); pass `layer_map` a family (bert, gpt, llama, vit) or a regular "
            r"expression whose one group captures the block index, e.g. r'^stages\.(\d+)\.'"
        )
    counted = max(indices) + 1
    if resolved.n_layers is None:
        resolved.n_layers = counted
    elif resolved.n_layers < counted:
        raise ValueError(
            f"`n_layers`={resolved.n_layers} but the model has a block with index {counted - 1}; "
            f"n_layers must be at least {counted} (or None, to count it)"
        )
    return resolved


def _pipeline_layer_map(model: nn.Layer, n_layers: int | None, family: str, pattern: str | None) -> LayerMap | None:
    """The pipeline map of a model holding a pipeline layer, else ``None``."""
    if find_pipeline_layer(model) is None:
        return None
    return PipelineLayerMap.from_model(model, n_layers=n_layers, family=family, pattern=pattern)


def _structured_names(model_or_names: nn.Layer | Iterable[str]) -> list[str]:
    if isinstance(model_or_names, nn.Layer):
        return list(build_name_dict(model_or_names).values())
    if isinstance(model_or_names, str) or not isinstance(model_or_names, Iterable):
        raise TypeError(
            "`model_or_names` must be a paddle.nn.Layer or an iterable of structured parameter names, "
            f"got {type(model_or_names).__name__}"
        )
    names = list(model_or_names)
    if not all(isinstance(name, str) for name in names):
        raise TypeError("`model_or_names` must hold structured parameter names (str) only")
    return names


# --- pipeline-parallel models ---

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
    """A :class:`LayerMap` over a pipeline layer's parameter names: every
    stage gives each parameter the layer id it has in the whole model.

    A parameter at position ``p`` of the layer sequence is named
    ``prefix(p) + rest`` (``"2.mlp.up_proj.weight"`` ->
    ``"model.layers.1.mlp.up_proj.weight"``) and classified as
    :class:`LayerMap` classifies that name; a shared weight
    (``shared_layers.<key>...``) gets the id of the first description that
    uses the key, on every stage; ``n_layers`` is counted over all prefixes
    (see :doc:`/layer_maps`).

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

    Examples:
        >>> layer_map = PipelineLayerMap(
        ...     prefixes=["model", "model.layers.0", "model.layers.1",
        ...               "model.norm", "lm_head"],
        ...     shared_positions={"tied": 0})
        >>> layer_map.n_layers
        2
        >>> layer_map.global_name("2.mlp.up_proj.weight")
        'model.layers.1.mlp.up_proj.weight'
        >>> names = ("1.mlp.up_proj.weight", "3.weight", "4.weight",
        ...          "shared_layers.tied.weight")
        >>> [layer_map.layer_id(name) for name in names]
        [1, 3, 3, 0]
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
        elif checked_n_layers(n_layers, owner="PipelineLayerMap") < counted:
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

