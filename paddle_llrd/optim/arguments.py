"""AdamWDL's constructor checks: each refuses a bad argument by name, before anything is built.

Paddle's ``AdamW`` guards some of these with bare ``assert`` statements (gone
under ``python -O``) and takes others as given.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from paddle.base import framework

from ..argument_checks import checked_count, checked_real, is_real_number
from ..layer_decay.layerwise import NAME_DICT_ADVICE, layerwise_lr_decay
from .updates import is_tensor
from ..schedules.weight_decay import WeightDecaySchedule


def check_not_none(**arguments: Any) -> None:
    """``TypeError`` naming the first argument that is None.

    Examples:
        >>> check_not_none(beta1=0.9, epsilon=None)
        Traceback (most recent call last):
        ...
        TypeError: AdamWDL: `epsilon` must not be None.
    """
    for argument, value in arguments.items():
        if value is None:
            raise TypeError(f"AdamWDL: `{argument}` must not be None.")


def check_layerwise_arguments(layerwise_decay: Any, n_layers: Any, set_param_lr_fun: Any, name_dict: Any) -> None:
    """The layer-wise decay arguments: types, ranges, and a ``name_dict`` where the default function needs one."""
    if not isinstance(layerwise_decay, float) and not is_tensor(layerwise_decay):
        raise TypeError(
            "AdamWDL: `layerwise_decay` must be a Python float or a Paddle Tensor, "
            f"got {type(layerwise_decay).__name__} {layerwise_decay!r}"
            + (" (write 1.0, not 1)" if isinstance(layerwise_decay, int) else "")
            + "."
        )
    if isinstance(layerwise_decay, float):
        checked_real(layerwise_decay, "layerwise_decay", owner="AdamWDL", advice="usually in (0, 1]")
    # A custom set_param_lr_fun receives n_layers as given and may read it its own way.
    if set_param_lr_fun is layerwise_lr_decay:
        checked_count(n_layers, "n_layers", owner="AdamWDL", meaning="the number of encoder layers")
    if set_param_lr_fun is not None and not callable(set_param_lr_fun):
        raise TypeError(
            "AdamWDL: `set_param_lr_fun` must be callable "
            "(fn(layerwise_decay, name_dict, n_layers, param) -> ratio or None) or None, "
            f"got {type(set_param_lr_fun).__name__}."
        )
    if name_dict is not None and not isinstance(name_dict, Mapping):
        raise TypeError(
            f"AdamWDL: `name_dict` must be a dict or None, got {type(name_dict).__name__}; "
            f"{NAME_DICT_ADVICE}."
        )
    needs_names = not (isinstance(layerwise_decay, float) and layerwise_decay == 1.0)
    if set_param_lr_fun is layerwise_lr_decay and name_dict is None and needs_names:
        raise ValueError(
            f"AdamWDL: layerwise_decay={layerwise_decay!r} needs `name_dict` to find "
            f"each parameter's layer; {NAME_DICT_ADVICE} and pass "
            "name_dict=name_dict."
        )


def check_non_negative(value: Any, argument: str) -> None:
    """``ValueError`` naming ``argument`` (as the message should show it) if ``value`` is a number
    (or a dygraph Tensor) that is NaN, infinite or negative.

    Other types are left to Paddle's own checks (an ``LRScheduler`` checks
    its values where it is built).

    Examples:
        >>> check_non_negative(0.01, "`weight_decay`")
        >>> check_non_negative(float("nan"), "`learning_rate`")
        Traceback (most recent call last):
        ...
        ValueError: AdamWDL: `learning_rate` must be a finite number >= 0, got nan.
    """
    number = value
    if is_tensor(value):
        if not framework.in_dygraph_mode() or value.size != 1:
            return  # a program's value is known when it runs
        number = float(value.item())
    elif not is_real_number(value):
        return
    if not (math.isfinite(number) and number >= 0.0):
        raise ValueError(f"AdamWDL: {argument} must be a finite number >= 0, got {number!r}.")


def check_group(group: Any, where: str) -> None:
    """A parameter group's ``learning_rate`` and ``weight_decay``/``coeff``; ``where`` names the group."""
    if not isinstance(group, Mapping):
        return  # Paddle's own check names it
    for key in ("weight_decay", "coeff"):
        if isinstance(group.get(key), WeightDecaySchedule):
            raise TypeError(
                f"AdamWDL: {where}'s `{key}` must be a float; a WeightDecaySchedule "
                "goes in AdamWDL(weight_decay=...), and groups without their own "
                "`weight_decay` follow it."
            )
    for key in ("learning_rate", "weight_decay", "coeff"):
        if key in group:
            check_non_negative(group[key], f"{where}'s `{key}`")


def checked_parameters(parameters: Any) -> Any:
    """``parameters`` as a list (a generator is read once), its groups checked; refuses None in dygraph.

    In a static program ``parameters=None`` means every trainable parameter
    of the program, as in Paddle.
    """
    if parameters is None:
        if framework.in_dygraph_mode():
            raise TypeError(
                "AdamWDL: `parameters` is required in dygraph mode: pass model.parameters() "
                "(or a list of parameter-group dicts, each with a 'params' list)."
            )
        return None
    if is_tensor(parameters) or isinstance(parameters, (str, Mapping)):
        return parameters  # Paddle's own check names it
    parameters = list(parameters)
    for index, group in enumerate(parameters):
        check_group(group, f"parameter group {index}")
    return parameters
