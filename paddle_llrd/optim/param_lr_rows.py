"""What each parameter gets at the coming step: the rows of :meth:`AdamWDL.param_lr_table <paddle_llrd.AdamWDL.param_lr_table>`."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

from .ratios import LayerRatios, base_scale_of, lr_attributes


class ParamLrRow(NamedTuple):
    """One row of :meth:`AdamWDL.param_lr_table`: what a parameter gets at the current step."""

    name: str
    """The structured name (``name_dict[param.name]``), or ``param.name`` without a ``name_dict`` entry."""
    param_name: str
    """Paddle's name of the parameter (``param.name``)."""
    layer_id: int | None
    """``0`` embeddings, ``i + 1`` block ``i``, ``n_layers + 1`` the rest; None if the ratio function has no layers."""
    ratio: float
    """The layer ratio :math:`r_p` that scales the Adam step (``nan`` if a lr factor of 0 hides an uncached ratio)."""
    lr: float
    """The Adam step's learning rate: global lr times ParamAttr (or group) lr factor times ``ratio``."""
    decayed: bool
    """Whether ``apply_decay_param_fun`` lets the parameter decay."""
    weight_decay: float
    """The coefficient :math:`\\lambda` its decay uses this step (``0.0`` if not decayed)."""


def param_lr_rows(
    optimizer: Any,
    params: list[Any],
    *,
    weight_decays: dict[int, Any],
    ratios: LayerRatios,
    decays: Callable[[Any], bool],
) -> list[ParamLrRow]:
    """:meth:`AdamWDL.param_lr_table <paddle_llrd.AdamWDL.param_lr_table>` of ``optimizer``
    (its public lr, ``name_dict``, ``n_layers`` and ``set_param_lr_fun``) for ``params``:
    ``weight_decays`` by id of the parameter, ``ratios`` the optimizer's
    :class:`~paddle_llrd.optim.ratios.LayerRatios` (:math:`s_p r_p`, a pure function's cached
    ratio), ``decays(param)`` the decay rule."""
    global_lr = float(optimizer.get_lr())
    rows = []
    for param in params:
        optimize_attr = lr_attributes(param)
        base_scale = base_scale_of(optimize_attr)
        scale = float(ratios.update_scale(param, optimize_attr, base_scale))
        base_scale = float(base_scale)
        if base_scale != 0.0:
            ratio = scale / base_scale
        else:
            ratio = math.nan if ratios.cache is None else ratios.cache.ratio(param)
        decayed = decays(param)
        structured = _structured_name(optimizer, param)
        rows.append(
            ParamLrRow(
                name=structured,
                param_name=param.name,
                layer_id=_layer_id(optimizer, structured),
                ratio=ratio,
                lr=global_lr * scale,
                decayed=decayed,
                weight_decay=float(weight_decays[id(param)]) if decayed else 0.0,
            )
        )
    return rows


def _structured_name(optimizer: Any, param: Any) -> str:
    if optimizer.name_dict is None:
        return param.name
    return optimizer.name_dict.get(param.name, param.name)


def _layer_id(optimizer: Any, structured_name: str) -> int | None:
    fun = getattr(optimizer.set_param_lr_fun, "func", None)
    layer_id = getattr(fun, "layer_id", None)
    if not callable(layer_id) or (optimizer.name_dict is None and getattr(fun, "needs_name_dict", False)):
        return None
    return int(layer_id(structured_name, optimizer.n_layers))
