"""What each parameter gets at the coming step: the rows of :meth:`AdamWDL.param_lr_table <paddle_llrd.AdamWDL.param_lr_table>`."""
from __future__ import annotations

import math
from typing import Any, NamedTuple

from .updates import base_scale_of, lr_attributes


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


def param_lr_rows(optimizer: Any) -> list[ParamLrRow]:
    """:meth:`AdamWDL.param_lr_table <paddle_llrd.AdamWDL.param_lr_table>` of ``optimizer``."""
    optimizer._sync_weight_decay()
    global_lr = float(optimizer.get_lr())
    group_decays = {}
    if optimizer._parameter_list and isinstance(optimizer._parameter_list[0], dict):
        for group in optimizer._param_groups:
            for param in group["params"]:
                group_decays[id(param)] = group.get("weight_decay", optimizer._default_dict["weight_decay"])
    default_decay = optimizer._default_dict["weight_decay"]
    cache = optimizer._active_ratio_cache()
    rows = []
    for param in optimizer._listed_parameters():
        if param.stop_gradient:
            continue
        optimize_attr = lr_attributes(param)
        base_scale = base_scale_of(optimize_attr)
        update_scale = float(optimizer._update_scale(param, optimize_attr, base_scale))
        base_scale = float(base_scale)
        if base_scale != 0.0:
            ratio = update_scale / base_scale
        else:
            ratio = math.nan if cache is None else cache.ratio(param)
        decayed = optimizer._decays(param)
        structured = _structured_name(optimizer, param)
        rows.append(
            ParamLrRow(
                name=structured,
                param_name=param.name,
                layer_id=_layer_id(optimizer, structured),
                ratio=ratio,
                lr=global_lr * update_scale,
                decayed=decayed,
                weight_decay=float(group_decays.get(id(param), default_decay)) if decayed else 0.0,
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
