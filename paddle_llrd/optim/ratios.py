"""Layer ratios: asking ``set_param_lr_fun``, checking its answers, caching the pure ones.

AdamWDL scales a parameter's Adam step by :math:`s_p r_p`: its own lr factor
``param.optimize_attr['learning_rate']`` (:math:`s_p`) times the ratio
``set_param_lr_fun(param)`` (:math:`r_p`). This module turns a function's
answer into that factor (the *update scale*) and refuses answers that would
corrupt the weights, naming the parameter.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Union

import paddle

from ..checks import is_real_number
from .kernels import is_tensor

LrScale = Union[float, "paddle.Tensor"]
"""A factor of the global lr: a number, or a Tensor (then the general path is taken)."""


def lr_attributes(param: Any) -> dict[str, Any] | None:
    """``param.optimize_attr`` if it holds a ``'learning_rate'`` (a Paddle parameter's does), else None."""
    optimize_attr = getattr(param, "optimize_attr", None)
    if optimize_attr is None or "learning_rate" not in optimize_attr:
        return None
    return optimize_attr


def base_scale_of(optimize_attr: dict[str, Any] | None) -> LrScale:
    """:math:`s_p`, the parameter's own lr factor (1 without an ``optimize_attr``)."""
    return 1.0 if optimize_attr is None else optimize_attr["learning_rate"]


def is_pure_in_name(set_param_lr_fun: Any) -> bool:
    """Whether the ratio of ``set_param_lr_fun`` depends on the parameter's name only.

    A callable declares it with ``pure_in_name = True``, as
    :func:`~paddle_llrd.layerwise_lr_decay` and a
    :class:`~paddle_llrd.layer_decay.layer_maps.LayerMap` do.

    Examples:
        >>> from paddle_llrd import layerwise_lr_decay
        >>> is_pure_in_name(layerwise_lr_decay), is_pure_in_name(lambda *a: 1.0)
        (True, False)
    """
    return getattr(set_param_lr_fun, "pure_in_name", False) is True


def checked_lr_factor(value: Any, param: Any, *, edited: bool = False) -> LrScale:
    """``value``, what ``set_param_lr_fun`` gave ``param``, if it is a finite number >= 0 or a Tensor.

    ``edited``: the value is the ``optimize_attr['learning_rate']`` a function
    returning None set, not a returned ratio.

    Examples:
        >>> import paddle
        >>> p = paddle.create_parameter([1], "float32")
        >>> checked_lr_factor(0.5, p)
        0.5
        >>> checked_lr_factor(-1.0, p)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: AdamWDL: `set_param_lr_fun` returned -1.0 for ...; ... >= 0.
    """
    what = "set param.optimize_attr['learning_rate'] to" if edited else "returned"
    if is_real_number(value):
        if not (math.isfinite(value) and value >= 0.0):
            raise ValueError(
                f"AdamWDL: `set_param_lr_fun` {what} {value!r} for {param.name!r}; a learning-rate "
                "ratio must be a finite number >= 0."
            )
        return value
    if is_tensor(value):
        return value
    raise TypeError(
        f"AdamWDL: `set_param_lr_fun` {what} {type(value).__name__} {value!r} for {param.name!r}; "
        "it must return a number (the lr ratio), a Tensor, or None after setting "
        "param.optimize_attr['learning_rate'] to a number itself."
    )


class RatioCache:
    """The ratios of a function pure in the parameter name, each asked for once.

    Examples:
        >>> import paddle
        >>> p = paddle.create_parameter([1], "float32")
        >>> cache = RatioCache(lambda param: 0.25)
        >>> cache.ratio(p), cache.ratio(p), len(cache.ratios)
        (0.25, 0.25, 1)
    """

    def __init__(self, fun: Callable[[Any], Any]) -> None:
        self.fun = fun
        self.ratios: dict[str, float] = {}

    @classmethod
    def asked_of(cls, fun: Callable[[Any], Any], params: Iterable[Any]) -> RatioCache:
        """A cache of ``fun`` that has asked about the trained ``params`` (:meth:`ask`)."""
        cache = cls(fun)
        cache.ask(params)
        return cache

    def ask(self, params: Iterable[Any]) -> None:
        """Ask about every trained parameter of ``params`` not asked yet: a bad ratio is
        refused, naming the parameter, before anything changes."""
        for param in params:
            if param.name not in self.ratios and not param.stop_gradient:
                self.ratio(param)

    def ratio(self, param: Any) -> float:
        ratio = self.ratios.get(param.name)
        if ratio is None:
            ratio = self.fun(param)
            if ratio is None:
                raise TypeError(
                    f"AdamWDL: `set_param_lr_fun` returned None for {param.name!r}, but its ratios "
                    "are cached (it is pure in the parameter name); return the ratio instead."
                )
            ratio = float(checked_lr_factor(ratio, param))
            self.ratios[param.name] = ratio
        return ratio


class LayerRatios:
    """The ratio function an optimizer's updates ask, and its cached ratios where it is pure in the name.

    ``unbound`` is the ``set_param_lr_fun`` given to the constructor, ``settings`` the
    ``(layerwise_decay, name_dict, n_layers)`` it is bound to, ``fun`` the function the
    updates ask (``fn(param) -> ratio``), ``cache`` its :class:`RatioCache` or None. A
    new binding replaces the old one whole: a pure function is asked about every trained
    parameter when the binding is made, so that a bad ratio is refused before it replaces it.

    Examples:
        >>> import paddle
        >>> from paddle_llrd import layerwise_lr_decay
        >>> p = paddle.create_parameter([1], "float32", name="w")
        >>> ratios = LayerRatios.bound(layerwise_lr_decay, (0.5, {"w": "encoder.layers.0.w"}, 2), [p])
        >>> ratios.cache.ratios, ratios.update_scale(p, None, 1.0)
        ({'w': 0.25}, 0.25)
    """

    __slots__ = ("unbound", "settings", "fun", "cache")

    def __init__(self, unbound: Callable[..., Any] | None, settings: tuple[Any, Any, Any],
                 fun: Callable[[Any], Any] | None, pure: bool, params: Iterable[Any]) -> None:
        self.unbound, self.settings, self.fun = unbound, settings, fun
        self.cache = RatioCache.asked_of(fun, params) if pure else None

    @classmethod
    def bound(cls, unbound: Callable[..., Any] | None, settings: Sequence[Any], params: Iterable[Any]) -> LayerRatios:
        """``unbound`` bound to ``settings``; cached where it is pure in the name and the decay a float."""
        fun = None if unbound is None else functools.partial(unbound, *settings)
        pure = is_pure_in_name(unbound) and isinstance(settings[0], float)
        return cls(unbound, tuple(settings), fun, pure, params)

    def replaced(self, fun: Callable[[Any], Any] | None, params: Iterable[Any]) -> LayerRatios:
        """``fun`` asked instead (an assigned ``set_param_lr_fun``), cached where it declares ``pure_in_name``."""
        return LayerRatios(self.unbound, self.settings, fun, is_pure_in_name(fun), params)

    def update_scale(self, param: Any, optimize_attr: dict[str, Any] | None, base_scale: LrScale) -> LrScale:
        """:func:`update_scale` of ``param`` with this function and cache."""
        return update_scale(self.fun, self.cache, param, optimize_attr, base_scale)


def update_scale(
    fun: Callable[[Any], Any] | None,
    cache: RatioCache | None,
    param: Any,
    optimize_attr: dict[str, Any] | None,
    base_scale: LrScale,
) -> LrScale:
    """:math:`s_p r_p`, the lr factor of the parameter's Adam step (``base_scale`` is :math:`s_p`).

    ``cache`` serves ``fun`` when it is pure in the name. Calls ``fun``
    otherwise and leaves ``optimize_attr`` as it was, also when ``fun`` raises.
    """
    if fun is None:
        return base_scale
    if cache is not None:
        return base_scale * cache.ratio(param)
    try:
        ratio = fun(param)
        edited_scale = None if optimize_attr is None else optimize_attr["learning_rate"]
    finally:
        if optimize_attr is not None:
            optimize_attr["learning_rate"] = base_scale
    if ratio is not None:
        return base_scale * checked_lr_factor(ratio, param)
    if optimize_attr is None:
        raise TypeError(
            f"AdamWDL: `set_param_lr_fun` returned None for {param.name!r}, "
            "which has no optimize_attr to have edited; return the ratio instead."
        )
    return checked_lr_factor(edited_scale, param, edited=True)


def resolve_update_scales(
    fun: Callable[[Any], Any] | None, cache: RatioCache | None, params: Iterable[Any]
) -> dict[str, LrScale]:
    """Ask ``fun`` about every parameter of a step before any update.

    Returns :func:`update_scale` by parameter name where the ratio is not
    cached; a cached ratio is only made sure of (a parameter unfrozen since
    the optimizer was built may be missing from ``name_dict``), as updates
    read the cache.
    """
    if fun is None:
        return {}
    if cache is not None:
        cache.ask(params)
        return {}
    scales = {}
    for param in params:
        optimize_attr = lr_attributes(param)
        scales[param.name] = update_scale(fun, None, param, optimize_attr, base_scale_of(optimize_attr))
    return scales
