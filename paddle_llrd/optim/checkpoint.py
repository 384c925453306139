"""Which parameter a loaded optimizer state belongs to, and when loading it by name would be wrong.

Paddle keys an optimizer's state by the parameter's *Paddle* name
(``linear_3.w_0_moment1_0``, ``master_weights['linear_3.w_0']``), which counts
the layers a process has built: one more layer (or a loss module) built
before the model in the resume script, and every name moves. The model's own
``set_state_dict`` matches by structured name and does not notice;
``paddle.optimizer.AdamW`` then asserts (``Optimizer set error, ... should in
state dict``). AdamWDL starts the state of a parameter that has none in the
checkpoint afresh (it was frozen when the checkpoint was saved; Paddle
asserts there), which alone would restart every renamed parameter at zero
without a word.

:func:`check_state_names` tells the two apart before anything is loaded:
entries that belong to no parameter of the optimizer mean the names moved.
With parameters left without state too it raises ``ValueError`` naming both
(loading would restart them, or give their moments to other parameters);
with every parameter served it warns, naming the entries it leaves unused
(a checkpoint of more parameters than this optimizer trains).
"""
from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MASTER_WEIGHTS_KEY", "check_state_names", "saved_parameter_names"]

# The entry of Paddle's state dict that maps parameter names to float32 master weights.
MASTER_WEIGHTS_KEY = "master_weights"
# Paddle names a float16/bfloat16 parameter's float32 master weight
# `<param name>_fp32_master_<n>`, and under multi_precision its moments after it.
_MASTER_WEIGHT_NAME = re.compile(r"^(?P<param>.+)_fp32_master_\d+$")
# How many names an error or warning shows (a checkpoint of a large model has thousands).
_SHOWN = 5


def _accumulator_pattern(optimizer: Any) -> re.Pattern[str]:
    """``<param name>_<accumulator>_<n>``, as Paddle's ``_add_accumulator`` names a state tensor."""
    accumulators = sorted(
        {
            getattr(optimizer, attribute)
            for attribute in (
                "_moment1_acc_str", "_moment2_acc_str", "_moment2_acc_max_str",
                "_beta1_pow_acc_str", "_beta2_pow_acc_str",
            )
            if isinstance(getattr(optimizer, attribute, None), str)
        },
        key=len,
        reverse=True,  # moment2_max before moment2
    )
    prefix = re.escape(optimizer._name) + "_" if getattr(optimizer, "_name", None) else ""
    return re.compile(rf"^(?P<param>.+)_{prefix}(?:{'|'.join(map(re.escape, accumulators))})_\d+$")


def saved_parameter_names(optimizer: Any, state_dict: Mapping[str, Any]) -> dict[str, list[str]]:
    """``{parameter name: its entries}`` of the parameter state in ``state_dict`` (accumulators
    and master weights); other entries (the lr schedule's, a weight-decay schedule's) are not parameter state.

    The moments of a float16/bfloat16 parameter under ``multi_precision`` are
    named after its master weight (``<param>_fp32_master_0_moment1_0``) and
    belong to the parameter.

    Examples:
        >>> import paddle
        >>> from paddle_llrd import AdamWDL
        >>> linear = paddle.nn.Linear(2, 2)
        >>> opt = AdamWDL(parameters=linear.parameters())
        >>> saved = {f"{linear.weight.name}_moment1_0": None, "LR_Scheduler": {},
        ...          f"{linear.bias.name}_fp32_master_0_moment2_0": None}
        >>> list(saved_parameter_names(opt, saved)) == [linear.weight.name, linear.bias.name]
        True
    """
    pattern = _accumulator_pattern(optimizer)
    names: dict[str, list[str]] = {}
    for key in state_dict:
        if not isinstance(key, str):
            continue
        if key == MASTER_WEIGHTS_KEY and isinstance(state_dict[key], Mapping):
            for param_name in state_dict[key]:
                names.setdefault(str(param_name), []).append(f"{MASTER_WEIGHTS_KEY}[{param_name!r}]")
            continue
        match = pattern.match(key)
        if match:
            owner = match.group("param")
            master = _MASTER_WEIGHT_NAME.match(owner)
            names.setdefault(master.group("param") if master else owner, []).append(key)
    return names


def _shown(names: list[str]) -> str:
    listed = ", ".join(repr(name) for name in names[:_SHOWN])
    return listed + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def check_state_names(
    optimizer: Any,
    state_dict: Mapping[str, Any],
    parameters: Iterable[Any],
    *,
    name_dict: Mapping[str, str] | None = None,
    owner: str = "AdamWDL",
) -> None:
    """Refuse (or warn about) a checkpoint whose parameter state belongs to parameters this optimizer lacks.

    ``parameters`` are the optimizer's, frozen ones included (a parameter
    frozen when the checkpoint was saved has no state in it and starts afresh;
    that alone is no sign of moved names). ``name_dict``, when given, adds the
    structured names to the message.

    Raises:
        ValueError: some entries match no parameter and some parameter has no
            state: Paddle's names moved since the checkpoint was saved.

    Warns:
        UserWarning: some entries match no parameter while every parameter has
            state: those entries are left unused.
    """
    saved = saved_parameter_names(optimizer, state_dict)
    if not saved:
        return  # no parameter state at all (a fresh optimizer's state dict, an lr schedule only)
    params = list(parameters)
    listed = {param.name for param in params}
    unmatched = [entry for name, entries in saved.items() if name not in listed for entry in entries]
    if not unmatched:
        return
    stateless = [param.name for param in params if param.name not in saved]
    if not stateless:
        warnings.warn(
            f"{owner}.set_state_dict: {len(unmatched)} checkpoint entries belong to no parameter of this "
            f"optimizer and are left unused: {_shown(unmatched)}. (Every parameter of the optimizer has "
            "its state in the checkpoint; the checkpoint holds more parameters than it trains.)",
            UserWarning,
            stacklevel=3,
        )
        return
    if name_dict:
        stateless = [f"{name} ({name_dict[name]})" if name in name_dict else name for name in stateless]
    raise ValueError(
        f"{owner}.set_state_dict: {len(unmatched)} checkpoint entries belong to no parameter of this optimizer "
        f"({_shown(unmatched)}) while {len(stateless)} of its parameters have no saved state "
        f"({_shown(stateless)}): Paddle's parameter names have moved since the checkpoint was saved "
        "(a layer or loss module built before the model in one script and not the other, or layers built "
        "in another order). Loading by name would restart those parameters' moments and beta powers at "
        "zero, or give them another parameter's. Build the model in the resume script as in the script "
        "that saved the checkpoint (the same layers created before it, in the same order), or rename the "
        "checkpoint's entries from the old parameter names to the new ones before loading it."
    )
