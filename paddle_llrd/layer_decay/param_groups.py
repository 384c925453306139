r"""Layer-wise learning-rate decay as parameter groups, for any Paddle optimizer.

MAE's and BEiT's ``param_groups_lrd`` and timm's ``param_groups_layer_decay``
do not subclass an optimizer: they give every layer's parameters a group with
an lr scale and a weight decay, and hand the groups to the framework's own
optimizer. :func:`layer_decay_param_groups` builds those groups for Paddle
from a :class:`~paddle_llrd.layer_decay.layer_maps.LayerMap`, so they work with
``paddle.optimizer.AdamW``, ``Momentum``, ``Lamb``, ``SGD``, ... A Paddle
group's ``learning_rate`` is a factor of the optimizer's learning rate, so a
group's parameters learn at :math:`\eta\, r` with :math:`r` the layer ratio
:math:`d^{\,n_\text{layers}+1-k}` of ``LayerMap`` (the numbers
:meth:`~paddle_llrd.AdamWDL.param_lr_table` shows for the same map).

One difference from :class:`~paddle_llrd.AdamWDL`: Paddle's ``AdamW`` decays a
parameter with *its* learning rate, the group's included, so a parameter of
layer ratio :math:`r` decays by :math:`p \leftarrow p\,(1 - \eta\, r\, \lambda)`
(as in MAE, BEiT and timm), where ``AdamWDL`` decays it by
:math:`p \leftarrow p\,(1 - \eta \lambda)`. With ``weight_decay=0`` both give
the same weights.

**Which parameters decay.** A parameter gets ``weight_decay`` unless

* its structured name contains ``bias`` or ``norm``
  (:func:`~paddle_llrd.no_decay_parameter_names`, PaddleNLP's ``Trainer`` rule),
* it has at most one dimension (every bias and norm weight, whatever its
  name: MAE's, BEiT's and timm's rule),
* it is a ViT token: its last name part is ``cls_token``, ``pos_embed`` or
  ``dist_token`` (what MAE's, BEiT's and timm's ViTs list in
  ``no_weight_decay()``), or
* its structured name matches one of ``no_weight_decay`` (exact names or
  :mod:`fnmatch` patterns such as ``"*.relative_position_bias_table"``).

Embedding tables (BERT's, GPT's and LLaMA's word and position embeddings,
ViT's ``patch_embed``) are decayed, as in the PaddleNLP and Hugging Face
``Trainer`` and in the MAE/BEiT/timm recipes.

Example:
    >>> import paddle
    >>> from paddle_llrd import layer_decay_param_groups
    >>> from paddle_llrd.models.skeletons import build_skeleton
    >>> # cls_token, pos_embed, patch_embed, blocks.0-1, norm, head
    >>> model = build_skeleton("vit", 2)
    >>> groups = layer_decay_param_groups(model, layer_decay=0.5, weight_decay=0.05)
    >>> [(g["learning_rate"], g["weight_decay"], len(g["params"])) for g in groups]
    [(0.125, 0.05, 1), (0.125, 0.0, 3), (0.25, 0.05, 2), (0.25, 0.0, 4),
     (0.5, 0.05, 2), (0.5, 0.0, 4), (1.0, 0.05, 1), (1.0, 0.0, 3)]
    >>> opt = paddle.optimizer.AdamW(learning_rate=1e-3, parameters=groups)
"""
from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from paddle import nn

from ..checks import checked_non_negative
from .layerwise import (
    checked_layerwise_decay,
    deepest_block_read,
    warn_if_decay_above_one,
    warn_if_n_layers_exceeds_blocks,
)
from .layer_maps import LayerMap, build_name_dict, no_decay_parameter_names, resolve_layer_map

__all__ = [
    "VIT_NO_DECAY_NAMES",
    "ParamGroupRow",
    "format_param_groups_table",
    "layer_decay_param_groups",
    "param_groups_table",
]

#: Last name parts that never decay: the tokens MAE's, BEiT's and timm's ViTs list in ``no_weight_decay()``.
VIT_NO_DECAY_NAMES = ("cls_token", "pos_embed", "dist_token")
# A terminal's width, which also fits the docs' code blocks: a group's
# parameter span wraps rather than run past it.
TABLE_WIDTH = 80


def layer_decay_param_groups(
    model: nn.Layer,
    layer_decay: float,
    weight_decay: float = 0.0,
    no_weight_decay: Iterable[str] | None = None,
    layer_map: str | LayerMap = "auto",
    n_layers: int | None = None,
) -> list[dict[str, Any]]:
    """Parameter groups with layer-wise learning rates for any Paddle optimizer.

    One group per (layer id, decays or not, own lr factor), in that order, each
    ``{"params": [...], "learning_rate": ratio, "weight_decay": wd}``, with
    ``ratio = layer_decay ** (n_layers + 1 - layer_id)`` exactly as
    :class:`~paddle_llrd.layer_decay.layer_maps.LayerMap` gives it (0 = embeddings,
    ``N + 1`` = block ``N``, ``n_layers + 1`` = heads and final norms). Frozen
    parameters (``stop_gradient=True``) are left out; the module docstring
    says which parameters decay.

    Paddle's optimizers set each parameter's lr factor to its group's
    ``learning_rate``, replacing a ``ParamAttr(learning_rate=...)`` factor:
    so a parameter with such a factor ``s`` (PaddleFormers' LoRA+
    ``lora_plus_scale`` on ``lora_B``, for one) gets a group of its own whose
    ``learning_rate`` is ``ratio * s``, which keeps it as
    :class:`~paddle_llrd.AdamWDL` does.
    ``AdamW`` reads a group's ``weight_decay`` as its decoupled decay
    coefficient; ``Momentum``, ``SGD``, ``Adam`` and ``Lamb`` read it as L2
    regularisation added to the gradient (``Lamb`` has its own decoupled
    decay, a group's ``lamb_weight_decay``). Static programs
    (``paddle.static``) do not take parameter groups: see :doc:`/layer_maps`.

    Args:
        model: the model; its structured parameter names give the layers.
        layer_decay: the ratio between adjacent layers, a finite number > 0
            (usually in ``(0, 1]``; 1 gives every group the full rate; above 1
            a :class:`~paddle_llrd.DecayAboveOneWarning` says lower layers train faster than the head).
        weight_decay: the coefficient of the decayed groups, a finite number
            >= 0; the others get ``0.0``.
        no_weight_decay: further structured names (or :mod:`fnmatch` patterns)
            kept out of weight decay, e.g. a ported model's
            ``model.no_weight_decay()``; names no parameter has are ignored.
        layer_map: ``"auto"``, a family (``"bert"``, ``"gpt"``, ``"llama"``,
            ``"vit"``), a regex with one group capturing the block index, or a
            ``LayerMap``; see :func:`~paddle_llrd.layer_decay.layer_maps.resolve_layer_map`.
        n_layers: the number of blocks; ``None`` counts them from the names.

    Returns:
        The list of group dicts, for ``parameters=`` of a Paddle optimizer.

    Raises:
        TypeError: ``model`` is not a Layer; ``layer_decay``/``weight_decay`` is
            not a real number; ``no_weight_decay`` is not an iterable of str;
            ``layer_map`` has the wrong type.
        ValueError: ``layer_decay`` is not finite and > 0, ``weight_decay`` not
            finite and >= 0; ``layer_map`` is unknown, or finds no block in the
            model; ``n_layers`` is wrong; every parameter is frozen.

    Examples:
        >>> import paddle
        >>> from paddle_llrd import layer_decay_param_groups
        >>> from paddle_llrd.models.skeletons import build_skeleton
        >>> model = build_skeleton("llama", 3)
        >>> groups = layer_decay_param_groups(model, 0.5, weight_decay=0.1)
        >>> sorted({g["learning_rate"] for g in groups})
        [0.0625, 0.125, 0.25, 0.5, 1.0]
        >>> opt = paddle.optimizer.Momentum(
        ...     learning_rate=0.1, momentum=0.9, parameters=groups)
        >>> layer_decay_param_groups(model, 0)
        Traceback (most recent call last):
        ...
        ValueError: layer_decay_param_groups: `layer_decay` must be ... > 0, got 0 ...
    """
    if not isinstance(model, nn.Layer):
        raise TypeError(f"`model` must be a paddle.nn.Layer, got {type(model).__name__}")
    decay = checked_layerwise_decay(layer_decay, "layer_decay", owner="layer_decay_param_groups")
    warn_if_decay_above_one(decay, "layer_decay", owner="layer_decay_param_groups")
    coefficient = checked_non_negative(weight_decay, "weight_decay", owner="layer_decay_param_groups")
    patterns = _name_patterns(no_weight_decay)
    resolved = resolve_layer_map(layer_map, model, n_layers=n_layers)
    trainable = [name for name, param in model.named_parameters() if not param.stop_gradient]
    warn_if_n_layers_exceeds_blocks(
        resolved.n_layers, deepest_block_read(resolved, trainable), decay, "layer_decay_param_groups"
    )

    kept_from_decay = no_decay_parameter_names(model)
    members: dict[tuple[int, bool, float], list[Any]] = {}
    ratios: dict[int, float] = {}
    for name, param in model.named_parameters():
        if param.stop_gradient:
            continue
        layer_id = resolved.layer_id(name)
        ratios.setdefault(layer_id, resolved.ratio(name, decay))
        factor = _own_lr_factor(param, name)
        decays = not (
            param.name in kept_from_decay
            or len(param.shape) <= 1
            or name.rsplit(".", 1)[-1] in VIT_NO_DECAY_NAMES
            or any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)
        )
        members.setdefault((layer_id, decays, factor), []).append(param)
    if not members:
        raise ValueError("`model` has no trainable parameter (every one has stop_gradient=True)")
    return [
        {
            "params": members[key],
            "learning_rate": float(ratios[key[0]]) * key[2],
            # Paddle turns only a float (not an int) group weight_decay into a decay coefficient.
            "weight_decay": coefficient if key[1] else 0.0,
        }
        for key in sorted(members, key=lambda key: (key[0], not key[1], key[2]))
    ]


# Where the first call keeps a parameter's own factor: an optimizer given the groups overwrites
# optimize_attr["learning_rate"] with its group's, which a second call must not read back (and square).
_OWN_FACTOR_ATTRIBUTE = "_paddle_llrd_own_lr_factor"


def _own_lr_factor(param: Any, name: str) -> float:
    """The parameter's ``ParamAttr(learning_rate=...)`` factor (1 without one), e.g. PaddleFormers' LoRA+ scale."""
    kept = getattr(param, _OWN_FACTOR_ATTRIBUTE, None)
    if kept is not None:
        return kept
    factor = (getattr(param, "optimize_attr", None) or {}).get("learning_rate", 1.0)
    factor = checked_non_negative(factor, f"parameter {name!r}'s lr factor `optimize_attr['learning_rate']`")
    try:
        setattr(param, _OWN_FACTOR_ATTRIBUTE, factor)
    except AttributeError:  # a static program's pir.Value takes no attribute (nor parameter groups)
        pass
    return factor


def _name_patterns(no_weight_decay: Iterable[str] | None) -> tuple[str, ...]:
    if no_weight_decay is None:
        return ()
    if isinstance(no_weight_decay, str) or not isinstance(no_weight_decay, Iterable):
        raise TypeError(
            "`no_weight_decay` must be an iterable of structured names or fnmatch patterns "
            f"(e.g. ['pos_embed', '*.rel_pos_bias']), got {type(no_weight_decay).__name__} {no_weight_decay!r}"
        )
    patterns = tuple(no_weight_decay)
    bad = [pattern for pattern in patterns if not isinstance(pattern, str)]
    if bad:
        raise TypeError(f"`no_weight_decay` must hold str names or patterns only, got {bad[0]!r}")
    return patterns


class ParamGroupRow(NamedTuple):
    """One row of :func:`param_groups_table`: one parameter group."""

    layer_ids: tuple[int, ...]
    """The layer ids of the group's parameters (one, for groups from :func:`layer_decay_param_groups`)."""
    learning_rate: float
    """The group's lr factor (``1.0`` when the group has no ``learning_rate``)."""
    weight_decay: float | None
    """The group's ``weight_decay`` (``None`` when it has none: the optimizer's default applies)."""
    tensors: int
    """How many parameter tensors the group holds."""
    elements: int
    """How many scalar weights they hold together."""
    names: tuple[str, ...]
    """The structured names of the group's parameters, in the group's order."""


def param_groups_table(
    groups: Sequence[Mapping[str, Any]],
    model: nn.Layer,
    layer_map: str | LayerMap = "auto",
    n_layers: int | None = None,
) -> list[ParamGroupRow]:
    """One :class:`ParamGroupRow` per group: its layers, lr factor, weight decay and size.

    The check to make before a long run. ``layer_map`` and ``n_layers`` name
    the layers as in :func:`layer_decay_param_groups` (pass the same values).

    Raises:
        TypeError: ``groups`` is not a sequence of dicts with ``"params"``.
        ValueError: a group holds a parameter that ``model`` does not have.

    Examples:
        >>> from paddle_llrd import layer_decay_param_groups, param_groups_table
        >>> from paddle_llrd.models.skeletons import build_skeleton
        >>> model = build_skeleton("gpt2", 1)
        >>> rows = param_groups_table(layer_decay_param_groups(model, 0.5, 0.1), model)
        >>> [(row.layer_ids, row.learning_rate, row.weight_decay, row.tensors)
        ...  for row in rows]
        [((0,), 0.25, 0.1, 2), ((1,), 0.5, 0.1, 2), ((1,), 0.5, 0.0, 4),
         ((2,), 1.0, 0.1, 1), ((2,), 1.0, 0.0, 3)]
    """
    if isinstance(groups, Mapping) or not isinstance(groups, Sequence):
        raise TypeError(f"`groups` must be a list of parameter-group dicts, got {type(groups).__name__}")
    resolved = resolve_layer_map(layer_map, model, n_layers=n_layers)
    structured = build_name_dict(model)
    rows = []
    for index, group in enumerate(groups):
        if not isinstance(group, Mapping) or "params" not in group:
            raise TypeError(f"`groups[{index}]` must be a dict with a 'params' list, got {group!r:.80}")
        names = []
        for param in group["params"]:
            name = structured.get(getattr(param, "name", None))
            if name is None:
                raise ValueError(f"`groups[{index}]` holds a parameter that `model` does not have: {param.name!r}")
            names.append(name)
        weight_decay = group.get("weight_decay")
        rows.append(
            ParamGroupRow(
                layer_ids=tuple(sorted({resolved.layer_id(name) for name in names})),
                learning_rate=float(group.get("learning_rate", 1.0)),
                weight_decay=None if weight_decay is None else float(weight_decay),
                tensors=len(names),
                elements=sum(math.prod(param.shape) for param in group["params"]),
                names=tuple(names),
            )
        )
    return rows


def format_param_groups_table(rows: Sequence[ParamGroupRow], learning_rate: float | None = None) -> str:
    """:func:`param_groups_table`'s rows as aligned text, one line per group.

    With ``learning_rate`` an ``effective lr`` column (``learning_rate`` times
    the group's factor) is added. The last column names the group's first and
    last parameter; where both would run past 80 characters (``TABLE_WIDTH``),
    the last one goes on a line of its own below the first.

    Examples:
        >>> from paddle_llrd import layer_decay_param_groups, param_groups_table
        >>> from paddle_llrd.layer_decay.param_groups import format_param_groups_table
        >>> from paddle_llrd.models.skeletons import build_skeleton
        >>> model = build_skeleton("gpt2", 1)
        >>> rows = param_groups_table(layer_decay_param_groups(model, 0.5, 0.1), model)
        >>> print(format_param_groups_table(rows))
        layer  lr factor  weight decay  tensors  elements  parameters
            0       0.25           0.1        2        96  transformer.wte.weight
                                                           .. transformer.wpe.weight
            1        0.5           0.1        2        32  transformer.h.0.self_attn.weight
                                                           .. transformer.h.0.mlp.weight
            1        0.5             0        4        16  transformer.h.0.self_attn.bias
                                                           .. transformer.h.0.norm.bias
            2          1           0.1        1        64  lm_head.weight
            2          1             0        3        24  transformer.ln_f.weight
                                                           .. lm_head.bias
    """
    header = ["layer", "lr factor"] + (["effective lr"] if learning_rate is not None else [])
    header += ["weight decay", "tensors", "elements"]
    lines = []
    for row in rows:
        cells = [",".join(map(str, row.layer_ids)), f"{row.learning_rate:.4g}"]
        if learning_rate is not None:
            cells.append(f"{learning_rate * row.learning_rate:.4g}")
        cells += ["default" if row.weight_decay is None else f"{row.weight_decay:.4g}", str(row.tensors), str(row.elements)]
        span = row.names[0] if len(row.names) == 1 else f"{row.names[0]} .. {row.names[-1]}"
        lines.append((cells, span))
    widths = [max([len(title)] + [len(cells[i]) for cells, _ in lines]) for i, title in enumerate(header)]
    text = ["  ".join(title.rjust(width) for title, width in zip(header, widths)) + "  parameters"]
    for cells, span in lines:
        row = "  ".join(cell.rjust(width) for cell, width in zip(cells, widths)) + "  "
        first, _, last = span.partition(" .. ")
        if last and len(row) + len(span) > TABLE_WIDTH:
            text += [row + first, " " * len(row) + ".. " + last]
        else:
            text.append(row + span)
    return "\n".join(text)
