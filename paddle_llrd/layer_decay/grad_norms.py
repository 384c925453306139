r"""Gradient norms per layer group, for monitoring a run early in training.

The layer groups are those of layer-wise lr decay (one per layer id of a
:class:`~paddle_llrd.LayerMap`): ``"embeddings"`` (layer id 0),
``"layer_<i>"`` for block ``i`` (layer id ``i + 1``) and ``"head"`` (layer id
``L + 1``: the head, the final norm, a pooler). :func:`layer_grad_norms` gives
the L2 norm of each group's gradients and of all of them together (the global
norm that :class:`paddle.nn.ClipGradByGlobalNorm` compares with its
``clip_norm``):

.. math::

    \|g\|_G = \sqrt{\sum_{p \in G} \sum_j g_{p,j}^2}, \qquad
    \|g\| = \sqrt{\sum_G \|g\|_G^2}

Call it between ``loss.backward()`` and ``optimizer.step()``: those are the
gradients the step uses, before the optimizer's gradient clipping (the norm a
``grad_clip`` measures, and what the Trainer integrations log as
``grad_norm``). A parameter's ``main_grad`` (float32 gradients under AMP
``amp_master_grad``) is read where it has one; ``loss_scale`` divides out an
AMP loss scale that the gradients still carry. Only the parameters the step
updates count, as in the optimizer's ``grad_clip``: a frozen parameter
(``stop_gradient=True``) is left out even when it still holds a gradient from
before it was frozen (``clear_grad`` skips frozen parameters), and a parameter
without a gradient (unused by the loss) counts as zero; a group none of whose
parameters counts is left out.

Examples:
    >>> import paddle
    >>> from paddle_llrd import layer_grad_norms
    >>> from paddle_llrd.models.tiny_bert import (
    ...     TinyBertConfig, TinyBertForSequenceClassification)
    >>> paddle.seed(0)  # doctest: +ELLIPSIS
    <...>
    >>> model = TinyBertForSequenceClassification(TinyBertConfig(num_hidden_layers=2))
    >>> ids = paddle.randint(1, 100, [4, 8])
    >>> model(ids).mean().backward()
    >>> norms = layer_grad_norms(model, "bert")
    >>> list(norms)
    ['total', 'embeddings', 'layer_0', 'layer_1', 'head']
    >>> total = sum(value ** 2 for name, value in norms.items() if name != "total") ** 0.5
    >>> abs(norms["total"] - total) < 1e-4 * total
    True
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping

import paddle
from paddle import nn

from ..checks import checked_positive
from .layer_maps import LayerMap, resolve_layer_map

__all__ = ["TOTAL", "layer_grad_norms", "layer_group_name", "layer_groups", "group_grad_norms"]

#: The key of the global norm in :func:`layer_grad_norms`' result.
TOTAL = "total"


def layer_group_name(layer_id: int, n_layers: int) -> str:
    """The name of the layer group of ``layer_id`` in a model of ``n_layers`` blocks.

    Examples:
        >>> [layer_group_name(k, 2) for k in range(4)]
        ['embeddings', 'layer_0', 'layer_1', 'head']
    """
    if layer_id == 0:
        return "embeddings"
    if layer_id <= n_layers:
        return f"layer_{layer_id - 1}"
    return "head"


def layer_groups(model: nn.Layer, layer_map: str | LayerMap = "auto", n_layers: int | None = None) -> Dict[str, List[Any]]:
    """The parameters of ``model`` by layer group, in layer-id order (groups without a parameter left out).

    ``layer_map`` and ``n_layers`` mean what they mean for
    :func:`~paddle_llrd.resolve_layer_map`; a model without blocks is one
    ``"head"`` group (and ``"embeddings"`` if it has embeddings).

    Examples:
        >>> from paddle_llrd.models.tiny_bert import (
        ...     TinyBertConfig, TinyBertForSequenceClassification)
        >>> model = TinyBertForSequenceClassification(TinyBertConfig(num_hidden_layers=2))
        >>> groups = layer_groups(model)
        >>> {name: len(params) for name, params in groups.items()}
        {'embeddings': 5, 'layer_0': 16, 'layer_1': 16, 'head': 4}
    """
    resolved = resolve_layer_map(layer_map, model, n_layers, require_blocks=False)
    by_id: Dict[int, List[Any]] = {}
    for name, param in model.named_parameters():
        by_id.setdefault(resolved.layer_id(name), []).append(param)
    return {layer_group_name(k, resolved.n_layers): by_id[k] for k in sorted(by_id)}


def _gradient(param: Any) -> Any:
    """The gradient the optimizer step uses, or ``None`` where the step leaves ``param`` alone."""
    if param.stop_gradient:  # frozen: the optimizer skips it, whatever stale gradient it holds
        return None
    main_grad = getattr(param, "main_grad", None)
    return main_grad if main_grad is not None else param.grad


def group_grad_norms(groups: Mapping[str, List[Any]], loss_scale: Any = 1.0) -> Dict[str, paddle.Tensor]:
    """The norms of :func:`layer_grad_norms` as float32 scalar tensors
    (``loss_scale`` a float or a scalar tensor),
    ``{"total": ..., group: ...}``, over groups from :func:`layer_groups`;
    nothing is copied to the host (no device synchronisation), so a training
    loop can take them at every step and read them only when it logs."""
    squares: Dict[str, paddle.Tensor] = {}
    with paddle.no_grad():
        for name, params in groups.items():
            sums = [paddle.sum(paddle.square(grad.astype("float32")))
                    for grad in (_gradient(param) for param in params) if grad is not None]
            if sums:
                squares[name] = paddle.add_n(sums) if len(sums) > 1 else sums[0]
        if not squares:
            return {}
        # a float, or the AMP scaler's scale tensor (kept on the device)
        norms = {TOTAL: paddle.sqrt(paddle.add_n(list(squares.values()))) / loss_scale}
        norms.update({name: paddle.sqrt(value) / loss_scale for name, value in squares.items()})
    return norms


def layer_grad_norms(
    model: nn.Layer, layer_map: str | LayerMap = "auto", n_layers: int | None = None, *, loss_scale: float = 1.0
) -> Dict[str, float]:
    """The global gradient norm and the norm per layer group of ``model``, as floats.

    Args:
        model: the model whose parameters hold gradients (after ``backward``).
        layer_map: ``"auto"``, a family, a block regex or a
            :class:`~paddle_llrd.LayerMap` (see :func:`~paddle_llrd.resolve_layer_map`).
        n_layers: the number of blocks; by default counted from the names.
        loss_scale: an AMP loss scale the gradients still carry (divided out).

    Returns:
        ``{"total": ..., "embeddings": ..., "layer_0": ..., ..., "head": ...}``
        (groups in layer-id order; see the module documentation).

    Raises:
        TypeError: ``loss_scale`` is not a real number.
        ValueError: ``loss_scale`` is not a finite number > 0, or
            ``layer_map`` is not one (see :func:`~paddle_llrd.resolve_layer_map`).
    """
    checked_positive(loss_scale, "loss_scale", owner="layer_grad_norms")
    norms = group_grad_norms(layer_groups(model, layer_map, n_layers), loss_scale)
    return {name: float(value) for name, value in norms.items()}
