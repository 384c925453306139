"""The optimizer's argument checks: each refuses a bad argument by name, before anything is built.

Paddle's ``AdamW`` guards some of these with bare ``assert`` statements (gone
under ``python -O``), answers others with an error that names no argument
(``'<=' not supported between instances of 'int' and 'str'``) and takes the
rest as given (``weight_decay=True`` as 1.0, a parameter listed twice updated
twice). A parameter group's ``beta1``/``beta2``/``epsilon``/``learning_rate``/
``weight_decay`` are checked as the optimizer-wide ones, the message naming
the group by its index; the constructor checks every group before the first
is applied, and a group added later is checked before it changes anything.

The messages name the optimizer: ``AdamWDL``, or the class whose constructor
runs the checks under :func:`~paddle_llrd.checks.checks_named` (``paddle_llrd.AdamW`` runs
AdamWDL's constructor, and so its checks, once, named ``AdamW``). Each check
is made of the primitives of :mod:`paddle_llrd.checks`.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from paddle.base import framework
from paddle.optimizer.lr import LRScheduler

from ..checks import checked_in_range, checked_non_negative, is_real_number, optimizer_name, refusal
from ..layer_decay.layer_maps import checked_n_layers
from ..layer_decay.layerwise import (
    NAME_DICT_ADVICE,
    checked_layerwise_decay,
    decay_is_off,
    reads_optimizer_n_layers,
    warn_if_decay_above_one,
    warn_if_n_layers_exceeds_read_blocks,
    warn_if_no_encoder_layers,
)
from .kernels import is_tensor
from ..schedules.weight_decay import WeightDecaySchedule, check_unclaimed


def _named(owner: str | None) -> str:
    return optimizer_name() if owner is None else owner


class MissingParametersError(TypeError, AttributeError):
    """``parameters`` missing in dygraph mode: a ``TypeError`` (a required argument), and the
    ``AttributeError`` ``paddle.optimizer.AdamW`` raises there, so code written for either catches it."""


def _decay_type_hint(value: Any) -> str:
    """What to write instead of an int ``layerwise_decay``, for the value given."""
    if not isinstance(value, int) or isinstance(value, bool):
        return ""
    if value <= 0:
        return " (a decay must be > 0, usually in (0, 1], e.g. 0.8; 1.0 turns layer-wise decay off)"
    if value == 1:
        return " (write 1.0, not 1)"
    return (f" (write {float(value)!r}, not {value}; a decay above 1 makes lower layers train faster than the "
            "head: layer-wise decay usually takes a value in (0, 1), e.g. 0.8)")


def check_layerwise_arguments(
    layerwise_decay: Any, n_layers: Any, set_param_lr_fun: Any, name_dict: Any, *, owner: str | None = None
) -> None:
    """The layer-wise decay arguments: types, ranges, and a ``name_dict`` where the ratio function needs one.

    What the ratio function reads is what it declares (see
    :func:`~paddle_llrd.layerwise_lr_decay`): one whose ``n_layers`` is None
    takes the optimizer's, checked as a number of blocks
    (:func:`~paddle_llrd.layer_decay.layer_maps.checked_n_layers`); one that
    ``needs_name_dict`` needs it unless the decay is off
    (:func:`~paddle_llrd.layer_decay.layerwise.decay_is_off`: a real 1.0, not a Tensor).
    A known decay above 1 warns (:class:`~paddle_llrd.DecayAboveOneWarning`).

    Examples:
        >>> from paddle_llrd import layerwise_lr_decay
        >>> check_layerwise_arguments(2, 12, layerwise_lr_decay, None)
        Traceback (most recent call last):
        ...
        TypeError: AdamWDL: `layerwise_decay` must be a Python float or a Paddle Tensor, got int 2 (write 2.0, not 2; ...).
    """
    owner = _named(owner)
    if not isinstance(layerwise_decay, float) and not is_tensor(layerwise_decay):
        raise TypeError(refusal(
            "layerwise_decay", "a Python float or a Paddle Tensor", f"{type(layerwise_decay).__name__} "
            f"{layerwise_decay!r}{_decay_type_hint(layerwise_decay)}", owner=owner))
    known = _known_value(layerwise_decay)  # a float, or a dygraph Tensor's value
    if known is not None:
        warn_if_decay_above_one(checked_layerwise_decay(known, owner=owner), owner=owner)
    if reads_optimizer_n_layers(set_param_lr_fun):
        checked_n_layers(n_layers, owner=owner)
    if set_param_lr_fun is not None and not callable(set_param_lr_fun):
        raise TypeError(
            f"{owner}: `set_param_lr_fun` must be callable "
            "(fn(layerwise_decay, name_dict, n_layers, param) -> ratio or None) or None, "
            f"got {type(set_param_lr_fun).__name__}."
        )
    if name_dict is not None and not isinstance(name_dict, Mapping):
        raise TypeError(
            f"{owner}: `name_dict` must be a dict or None, got {type(name_dict).__name__}; "
            f"{NAME_DICT_ADVICE}."
        )
    if getattr(set_param_lr_fun, "needs_name_dict", False) and name_dict is None and not decay_is_off(layerwise_decay):
        raise ValueError(
            f"{owner}: layerwise_decay={layerwise_decay!r} needs `name_dict` to find "
            f"each parameter's layer; {NAME_DICT_ADVICE} and pass "
            "name_dict=name_dict."
        )


# Paddle's AdamW keeps these per parameter group (its _default_dict), and
# AdamWDL adds PaddleNLP's legacy name `coeff` of `weight_decay`.
_GROUP_RATES = ("learning_rate", "weight_decay", "coeff")
_GROUP_BETAS = ("beta1", "beta2")


def check_non_negative(value: Any, argument: str, *, owner: str | None = None) -> None:
    """``ValueError`` naming ``argument`` if ``value`` is a number (or a dygraph Tensor) that is
    NaN, infinite or negative (:func:`~paddle_llrd.checks.checked_non_negative` of its known value).

    Other types are left to :func:`check_rate` or Paddle's own checks (an
    ``LRScheduler`` checks its values where it is built).

    Examples:
        >>> check_non_negative(0.01, "weight_decay")
        >>> check_non_negative(float("nan"), "learning_rate")
        Traceback (most recent call last):
        ...
        ValueError: AdamWDL: `learning_rate` must be a finite number >= 0, got nan.
    """
    number = _known_value(value)
    if number is not None:
        checked_non_negative(number, argument, owner=_named(owner))


def _known_value(value: Any) -> float | None:
    """``value`` as a float where it is known now: a real number or a one-element dygraph Tensor."""
    if is_tensor(value):
        if not framework.in_dygraph_mode() or value.size != 1:
            return None  # a program's value is known when it runs
        return float(value.item())
    if is_real_number(value):
        return float(value)
    return None


def _refuse_unless_number_or_tensor(value: Any, argument: str, expected: str, owner: str) -> None:
    if not (is_real_number(value) or is_tensor(value)):
        raise TypeError(refusal(argument, f"{expected} or a Tensor", f"{type(value).__name__} {value!r}", owner=owner))


def check_rate(value: Any, argument: str, *, owner: str | None = None) -> None:
    """A learning-rate factor or weight decay: a real number (not a bool) or a Tensor, finite and >= 0.

    Examples:
        >>> check_rate(0.5, "parameter group 1's `learning_rate`")
        >>> check_rate("0.5", "parameter group 1's `learning_rate`")
        Traceback (most recent call last):
        ...
        TypeError: AdamWDL: parameter group 1's `learning_rate` must be a real number >= 0
            or a Tensor, got str '0.5'.
    """
    owner = _named(owner)
    _refuse_unless_number_or_tensor(value, argument, "a real number >= 0", owner)
    check_non_negative(value, argument, owner=owner)


def check_beta_or_epsilon(value: Any, argument: str, *, key: str, owner: str | None = None) -> None:
    """``beta1``/``beta2`` in [0, 1), ``epsilon`` finite and >= 0 (``key`` says which),
    each a real number (not a bool) or a Tensor, as ``paddle.optimizer.AdamW`` wants them
    (a Tensor is checked where its value is known now: in dygraph).

    Examples:
        >>> check_beta_or_epsilon(0.9, "beta1", key="beta1")
        >>> check_beta_or_epsilon("0.9", "beta1", key="beta1")
        Traceback (most recent call last):
        ...
        TypeError: AdamWDL: `beta1` must be a real number in [0, 1) or a Tensor,
            got str '0.9'.
        >>> check_beta_or_epsilon(1.5, "parameter group 0's `beta1`", key="beta1")
        Traceback (most recent call last):
        ...
        ValueError: AdamWDL: parameter group 0's `beta1` must be in [0, 1), got 1.5.
    """
    owner = _named(owner)
    if key == "epsilon":
        check_rate(value, argument, owner=owner)
        return
    _refuse_unless_number_or_tensor(value, argument, "a real number in [0, 1)", owner)
    number = _known_value(value)
    if number is not None:
        checked_in_range(number, argument, low=0.0, high=1.0, high_open=True, owner=owner)


def check_group(group: Any, where: str, *, owner: str | None = None) -> None:
    """A parameter group's ``params`` and its own settings; ``where`` names the group.

    The settings are checked as the optimizer-wide arguments of the same name
    (:func:`check_rate`, :func:`check_beta_or_epsilon`).

    Examples:
        >>> check_group({"params": [], "beta1": 1.5}, "parameter group 2")
        Traceback (most recent call last):
        ...
        ValueError: AdamWDL: parameter group 2's `beta1` must be in [0, 1), got 1.5.
    """
    owner = _named(owner)
    if not isinstance(group, Mapping):
        raise TypeError(f"{owner}: {where} must be a dict with a 'params' list, got {type(group).__name__}.")
    if "params" not in group:
        raise ValueError(
            f"{owner}: {where} has no 'params' (keys: {sorted(map(str, group))}); "
            "a parameter group is a dict {'params': [...], <settings>}."
        )
    for key in ("weight_decay", "coeff"):
        if isinstance(group.get(key), WeightDecaySchedule):
            raise TypeError(
                f"{owner}: {where}'s `{key}` must be a float; a WeightDecaySchedule "
                f"goes in {owner}(weight_decay=...), and groups without their own "
                "`weight_decay` follow it."
            )
    for key in _GROUP_RATES:
        if key in group:
            check_rate(group[key], f"{where}'s `{key}`", owner=owner)
    for key in (*_GROUP_BETAS, "epsilon"):
        if key in group:
            check_beta_or_epsilon(group[key], f"{where}'s `{key}`", key=key, owner=owner)


def group_parameters(group: Mapping[str, Any], where: str, *, owner: str | None = None) -> list[Any]:
    """A group's ``params`` as a list (Paddle takes one parameter or an ordered collection), each a parameter."""
    owner = _named(owner)
    params = group["params"]
    if is_tensor(params):
        params = [params]
    elif isinstance(params, (set, frozenset)):
        raise TypeError(f"{owner}: {where}'s 'params' must be an ordered collection (a list), not a set.")
    elif isinstance(params, (str, Mapping)) or not hasattr(params, "__iter__"):
        raise TypeError(
            f"{owner}: {where}'s 'params' must be a list of parameters, got {type(params).__name__} {params!r}."
        )
    params = list(params)
    for index, param in enumerate(params):
        if not is_tensor(param):
            raise TypeError(
                f"{owner}: {where}'s 'params' item {index} must be a Paddle parameter, "
                f"got {type(param).__name__} {param!r}."
            )
    return params


def check_distinct(params: list[Any], where: list[str], seen: dict[int, str], *, owner: str | None = None) -> None:
    """``ValueError`` for a parameter listed twice (``where[i]`` names ``params[i]``'s place;
    ``seen`` maps the ids already listed to their place and is extended).

    A parameter listed twice would be updated twice per step; Paddle refuses
    the same parameter in two groups, and so does this within a list.
    """
    owner = _named(owner)
    for param, place in zip(params, where):
        first = seen.get(id(param))
        if first is not None:
            raise ValueError(
                f"{owner}: parameter {param.name!r} is listed twice in `parameters` ({first} and {place}); "
                "each step would update it twice. List each parameter once "
                "(model.parameters() already does, also for shared weights)."
            )
        seen[id(param)] = place


def check_added_group(group: Any, groups: list[Mapping[str, Any]], *, owner: str | None = None) -> None:
    """A group about to join ``groups`` (the optimizer's, in order): :func:`check_group`, and
    none of its parameters listed twice or already in one of ``groups``.

    The constructor's groups come here one by one after :func:`checked_parameters`
    has checked them all (so a bad later group leaves the earlier ones
    unapplied); a group added later is checked before it changes anything.
    """
    where = f"parameter group {len(groups)}"
    check_group(group, where, owner=owner)
    seen = {id(p): f"parameter group {i}" for i, listed in enumerate(groups) for p in listed["params"]}
    params = group_parameters(group, where, owner=owner)
    check_distinct(params, [f"{where}'s item {i}" for i in range(len(params))], seen, owner=owner)


def group_with_weight_decay(param_group: dict[str, Any], *, owner: str | None = None) -> dict[str, Any]:
    """``param_group`` with PaddleNLP's legacy ``coeff`` as AdamW's ``weight_decay``
    (in place); ``ValueError`` when it gives both, and they differ."""
    owner = _named(owner)
    if "coeff" in param_group:
        coeff = param_group["coeff"]
        if "weight_decay" in param_group and param_group["weight_decay"] != coeff:
            raise ValueError(
                f"{owner}: a parameter group sets both `weight_decay` "
                f"({param_group['weight_decay']!r}) and its legacy name `coeff` "
                f"({coeff!r}); give one of them."
            )
        param_group["weight_decay"] = coeff
    return param_group


def check_use_multi_tensor(use_multi_tensor: Any, *, owner: str | None = None) -> None:
    """``TypeError`` unless ``use_multi_tensor`` is None, True or False."""
    if not (use_multi_tensor is None or isinstance(use_multi_tensor, bool)):
        raise TypeError(f"{_named(owner)}: `use_multi_tensor` must be None, True or False, got {use_multi_tensor!r}.")


def refuse_groups_in_program(grouped: bool, *, owner: str | None = None) -> None:
    """``TypeError`` for parameter groups in a static program, which Paddle 3.3.1's
    optimizers cannot build (``Value Wrapper is only support None and pir.Value``,
    or with the legacy program a ``parameter_list[0]`` type error, from ``minimize``).

    Examples:
        >>> import paddle
        >>> paddle.enable_static()
        >>> refuse_groups_in_program(True)
        Traceback (most recent call last):
        ...
        TypeError: AdamWDL: `parameters` as parameter groups (dicts) is not supported ...
        >>> paddle.disable_static()
    """
    if grouped and not framework.in_dygraph_mode():
        raise TypeError(
            f"{_named(owner)}: `parameters` as parameter groups (dicts) is not supported in a static program "
            "(paddle.enable_static()): Paddle's backward and optimizer passes take a plain list of "
            "parameters there. Pass the parameters as one list, with each one's lr factor in "
            "param.optimize_attr['learning_rate'] and `apply_decay_param_fun` choosing the decayed ones "
            "(docs/layer_maps.rst, 'Static programs'), or train in dygraph or under paddle.jit.to_static."
        )


def checked_parameters(parameters: Any, *, owner: str | None = None) -> Any:
    """``parameters`` as a list (a generator is read once), its items and groups checked; refuses None in dygraph.

    Each item is a parameter, or each a parameter-group dict (:func:`check_group`);
    a parameter listed twice, in the list or in two groups, is refused
    (:func:`check_distinct`). In a static program ``parameters=None`` means
    every trainable parameter of the program, as in Paddle, and parameter
    groups are refused (:func:`refuse_groups_in_program`); in dygraph it is a
    :class:`MissingParametersError` (a ``TypeError``, and the ``AttributeError``
    ``paddle.optimizer.AdamW`` raises).

    Examples:
        >>> checked_parameters([1, 2])
        Traceback (most recent call last):
        ...
        TypeError: AdamWDL: `parameters` item 0 must be a Paddle parameter or a
            parameter-group dict, got int 1.
    """
    owner = _named(owner)
    if parameters is None:
        if framework.in_dygraph_mode():
            raise MissingParametersError(
                f"{owner}: `parameters` is required in dygraph mode: pass model.parameters() "
                "(or a list of parameter-group dicts, each with a 'params' list)."
            )
        return None
    if is_tensor(parameters) or isinstance(parameters, (str, Mapping)) or not hasattr(parameters, "__iter__"):
        raise TypeError(
            f"{owner}: `parameters` must be a list of parameters (model.parameters()) or of "
            f"parameter-group dicts, got {type(parameters).__name__}."
        )
    parameters = list(parameters)
    grouped = bool(parameters) and isinstance(parameters[0], Mapping)
    refuse_groups_in_program(grouped, owner=owner)
    seen: dict[int, str] = {}
    for index, item in enumerate(parameters):
        if grouped:
            where = f"parameter group {index}"
            check_group(item, where, owner=owner)
            params = group_parameters(item, where, owner=owner)
            check_distinct(params, [f"{where}'s item {i}" for i in range(len(params))], seen, owner=owner)
        elif not is_tensor(item):
            raise TypeError(
                f"{owner}: `parameters` item {index} must be a Paddle parameter"
                + (" like item 0 (do not mix parameters and parameter-group dicts)" if index else
                   " or a parameter-group dict")
                + f", got {type(item).__name__} {item!r}."
            )
    if not grouped:
        check_distinct(parameters, [f"item {i}" for i in range(len(parameters))], seen, owner=owner)
    return parameters


def check_adamw_arguments(
    *,
    learning_rate: Any,
    beta1: Any,
    beta2: Any,
    epsilon: Any,
    weight_decay: Any,
    apply_decay_param_fun: Any,
    owner: str | None = None,
) -> None:
    """The optimizer-wide arguments ``paddle.optimizer.AdamW`` shares, each checked by name.

    ``weight_decay`` is a real number (not a bool: ``True`` is no coefficient),
    a Tensor or a :class:`~paddle_llrd.WeightDecaySchedule` not used by another
    optimizer; ``apply_decay_param_fun`` a callable or None.

    Examples:
        >>> check_adamw_arguments(learning_rate=0.01, beta1=0.9, beta2=0.999, epsilon=1e-8,
        ...                       weight_decay=True, apply_decay_param_fun=None)
        Traceback (most recent call last):
        ...
        TypeError: AdamWDL: `weight_decay` must be a real number >= 0, a Tensor or a
            WeightDecaySchedule, got bool True.
    """
    owner = _named(owner)
    values = {"learning_rate": learning_rate, "beta1": beta1, "beta2": beta2, "epsilon": epsilon}
    for argument, value in values.items():
        if value is None:
            raise TypeError(f"{owner}: `{argument}` must not be None.")
    if not isinstance(learning_rate, (float, LRScheduler)):  # Paddle's rule: an int is refused too
        raise TypeError(
            f"{owner}: `learning_rate` must be a float or a paddle.optimizer.lr.LRScheduler, "
            f"got {type(learning_rate).__name__} {learning_rate!r}."
        )
    check_non_negative(learning_rate, "learning_rate", owner=owner)
    for key in ("beta1", "beta2", "epsilon"):
        check_beta_or_epsilon(values[key], key, key=key, owner=owner)
    if isinstance(weight_decay, WeightDecaySchedule):
        check_unclaimed(weight_decay, "weight_decay", owner=owner)
    elif not (is_real_number(weight_decay) or is_tensor(weight_decay)):
        raise TypeError(
            f"{owner}: `weight_decay` must be a real number >= 0, a Tensor or a WeightDecaySchedule, "
            f"got {type(weight_decay).__name__} {weight_decay!r}."
        )
    else:
        check_non_negative(weight_decay, "weight_decay", owner=owner)
    if apply_decay_param_fun is not None and not callable(apply_decay_param_fun):
        raise TypeError(
            f"{owner}: `apply_decay_param_fun` must be callable (fn(param.name) -> bool, True to decay "
            f"the parameter) or None, got {type(apply_decay_param_fun).__name__} {apply_decay_param_fun!r}."
        )


def peak_learning_rate(learning_rate: Any) -> float | None:
    """The largest global lr known at construction: a float, or an ``LRScheduler``'s
    ``base_lr`` and current ``last_lr`` (a later rise, as in a cyclic schedule, is not known)."""
    if is_real_number(learning_rate):
        return float(learning_rate)
    known = [
        float(value)
        for value in (getattr(learning_rate, "base_lr", None), getattr(learning_rate, "last_lr", None))
        if is_real_number(value) and math.isfinite(value)
    ]
    return max(known) if known else None


def _largest_coefficient(weight_decay: Any) -> float | None:
    if isinstance(weight_decay, WeightDecaySchedule):
        return max(weight_decay.start_wd, weight_decay.end_wd)
    return _known_value(weight_decay)


def check_decay_factor(learning_rate: Any, weight_decay: Any, parameters: Any, *, owner: str | None = None) -> None:
    r"""``ValueError`` when the decoupled decay's factor :math:`1 - \eta s \lambda` would be negative.

    Each step multiplies a decayed weight by :math:`1 - \eta s \lambda`
    (:math:`\eta` the global lr, :math:`s` a group's lr factor, :math:`\lambda`
    the weight decay). At :math:`\eta s \lambda > 1` that factor is negative and
    every step flips the weights' sign and grows them: no weight decay means
    that (usual coefficients are 0 to 0.1, with lrs far below 1). Paddle's
    ``AdamW`` takes any coefficient (``weight_decay=2e6`` trains to NaN); this
    check refuses such a value where the lr is known at construction (a
    float, or an ``LRScheduler``'s ``base_lr`` and current value,
    :func:`peak_learning_rate`), for the optimizer-wide coefficient and each
    group's (a ratio, unknown before the first step, is not counted).

    Examples:
        >>> check_decay_factor(0.001, 2e6, None)
        Traceback (most recent call last):
        ...
        ValueError: AdamWDL: `weight_decay` = 2000000.0 with learning rate 0.001 makes the
            decay factor 1 - lr * weight_decay = -1999.0 negative (each step would flip the
            weights' sign); `weight_decay` must be <= 1 / lr = 1000.0.
    """
    owner = _named(owner)
    lr = peak_learning_rate(learning_rate)
    if lr is None or lr == 0.0:
        return
    default = _largest_coefficient(weight_decay)
    checks: list[tuple[str, float | None, float | None]] = [("`weight_decay`", default, 1.0)]
    if parameters and isinstance(parameters[0], Mapping):
        for index, group in enumerate(parameters):
            key = "weight_decay" if "weight_decay" in group else "coeff" if "coeff" in group else None
            coefficient = default if key is None else _known_value(group[key])
            scale = _known_value(group.get("learning_rate", 1.0))
            name = f"parameter group {index}'s `{key}`" if key else f"`weight_decay` in parameter group {index}"
            checks.append((name, coefficient, scale))
    for name, coefficient, scale in checks:
        if coefficient is None or scale is None:
            continue
        group_lr = lr * scale
        if group_lr * coefficient > 1.0:
            shown_lr = f"learning rate {lr!r}" + (f" times the group's factor {scale!r}" if scale != 1.0 else "")
            raise ValueError(
                f"{owner}: {name} = {coefficient!r} with {shown_lr} makes the decay factor "
                f"1 - lr * weight_decay = {1.0 - group_lr * coefficient!r} negative (each step would flip "
                f"the weights' sign); {name.split(' in ')[0]} must be <= 1 / lr = {1.0 / group_lr!r}."
            )


def checked_adamwdl_arguments(
    *, learning_rate: Any, beta1: Any, beta2: Any, epsilon: Any, parameters: Any, weight_decay: Any,
    apply_decay_param_fun: Any, layerwise_decay: Any, n_layers: Any, set_param_lr_fun: Any, name_dict: Any,
    use_multi_tensor: Any, owner: str | None = None,
) -> Any:
    """Every check of :class:`~paddle_llrd.AdamWDL`'s constructor, before anything is built
    (the warnings of a ratio function that reads no block, or fewer than ``n_layers``
    blocks, included); the checked ``parameters``.

    Raises:
        TypeError, ValueError: as :class:`~paddle_llrd.AdamWDL` lists them, naming the argument.
    """
    owner = _named(owner)
    check_adamw_arguments(
        learning_rate=learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon,
        weight_decay=weight_decay, apply_decay_param_fun=apply_decay_param_fun, owner=owner,
    )
    parameters = checked_parameters(parameters, owner=owner)
    check_decay_factor(learning_rate, weight_decay, parameters, owner=owner)
    check_layerwise_arguments(layerwise_decay, n_layers, set_param_lr_fun, name_dict, owner=owner)
    warn_if_no_encoder_layers(set_param_lr_fun, layerwise_decay, name_dict, parameters)
    warn_if_n_layers_exceeds_read_blocks(set_param_lr_fun, layerwise_decay, n_layers, name_dict, parameters)
    check_use_multi_tensor(use_multi_tensor, owner=owner)
    return parameters

