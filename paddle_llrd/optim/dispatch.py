"""Which update path an AdamWDL step takes: the one place each of these decisions is made.

Per step, :func:`multi_tensor_refusal`: the multi-tensor step
(:mod:`~paddle_llrd.optim.multi_tensor`, one kernel call per group of
parameters over flat buffers) or, for the reason it returns, Paddle's
per-parameter pass (:meth:`AdamWDL._append_optimize_op
<paddle_llrd.AdamWDL>`). The multi-tensor step may still hand a step back
when its layout cannot hold a parameter (its ``last_reason`` says why).

Per parameter (and per kernel group of the multi-tensor step),
:func:`decay_route`: the decay fused into the ``adamw`` kernel or the
separate decay op; :func:`parameter_route` adds the sparse-gradient rule
(``adam`` kernel and the separate op). Both paths then call the one kernel
helper, :func:`~paddle_llrd.optim.kernels.adamw_kernel`.
"""
from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import paddle
from paddle.base import framework

from ..checks import is_real_number
from .kernels import is_tensor
from .multi_tensor import LayoutInput, StepContext
from .updates import AdamSettings, LrScale, densify, is_static_sparse

__all__ = ["FUSED_RATIO_RANGE", "Route", "decay_route", "decay_scale", "fused_decay_coeff", "layout_inputs", "multi_tensor_context",
           "multi_tensor_refusal", "multi_tensor_step", "parameter_route"]

# A fused update folds the ratio into the kernel's decay coefficient
# (coeff * decay_scale / update_scale); beyond this range of
# update_scale / decay_scale, float32 rounding of that coefficient and of the
# scaled learning rate is no longer negligible, so the separate decay op is used.
FUSED_RATIO_RANGE = (1e-12, 1e12)


# ------------------------------------------------------------------ per step
def multi_tensor_refusal(optimizer: Any) -> str | None:
    """Why ``optimizer``'s step takes the per-parameter path, or None for the multi-tensor step.

    The multi-tensor step needs ``use_multi_tensor`` not False, a dygraph
    step outside ``to_static`` translation, no gradient clipping, float
    betas, epsilon and weight decay (a ``WeightDecaySchedule`` gives floats),
    layer ratios that are cached (a function pure in the name with a float
    ``layerwise_decay``) or none, and no AMP overflow (such a step changes no
    number; the per-parameter pass also creates the accumulators of new
    parameters then).
    """
    multi_tensor = optimizer._multi_tensor
    if multi_tensor is None:
        return "use_multi_tensor=False"
    if multi_tensor.disabled is not None:
        return multi_tensor.disabled
    if not framework.in_dygraph_mode() or paddle.base.dygraph.base.in_to_static_mode():
        return "not a dygraph step"
    if optimizer.set_param_lr_fun is not None and optimizer._active_ratio_cache() is None:
        return "set_param_lr_fun is not pure in the parameter name (its ratios are asked every step)"
    defaults = optimizer._default_dict
    groups = optimizer._param_groups if optimizer._grouped() else [defaults]
    if optimizer._grad_clip is not None or any(g.get("grad_clip") is not None for g in groups):
        return "gradient clipping"
    for group in groups:
        for key in ("beta1", "beta2", "epsilon", "weight_decay"):
            if is_tensor(group.get(key, defaults.get(key))):
                return f"a Tensor {key}"
    if optimizer._overflow_step():
        return "an AMP overflow step"
    return None


def multi_tensor_step(optimizer: Any) -> bool:
    """The step on the multi-tensor path, where :func:`multi_tensor_refusal` allows it
    and the layout holds every trained parameter; False (nothing changed) otherwise,
    and the per-parameter pass runs."""
    multi_tensor = optimizer._multi_tensor
    reason = multi_tensor_refusal(optimizer)
    if reason is not None:
        multi_tensor.refuse(reason)
        return False
    optimizer._sync_weight_decay()  # (each a no-op without a weight-decay schedule)
    if not multi_tensor.step(multi_tensor_context(optimizer)):
        return False
    optimizer._finish_scheduled_step()
    return True


def multi_tensor_context(optimizer: Any) -> StepContext:
    """The :class:`~paddle_llrd.optim.multi_tensor.StepContext` of ``optimizer``'s step now:
    its parameter groups with their settings and weight decay, the global lr, the decay rule."""
    groups = optimizer._listed_groups()
    defaults = optimizer._default_dict
    return StepContext(
        groups=groups,
        settings=[AdamSettings.of_group(optimizer, group) for group, _ in groups],
        coeffs=[
            optimizer._weight_decay if group is None else group.get("weight_decay", defaults["weight_decay"])
            for group, _ in groups
        ],
        global_lr=optimizer._global_lr_tensor(),
        decay_rule=optimizer._apply_decay_param_fun,
        decay_route=decay_route,
        with_ratio=optimizer._decay_with_ratio,
        force_general=optimizer._force_general_decay,
        prepare=functools.partial(layout_inputs, optimizer),
    )


def layout_inputs(
    optimizer: Any, trained: list[tuple[dict[str, Any] | None, list[Any]]], decay_answers: dict[int, bool]
) -> list[list[LayoutInput]]:
    """What a multi-tensor layout needs of ``optimizer``'s state: the ratio function
    asked and the plans fitted first (``_before_updates``), the accumulators and plans
    made, then per trained parameter its plan, cached ratio and decay answer
    (``decay_answers``'s, by id of the parameter, where this step asked already)."""
    optimizer._before_updates([param for _, params in trained for param in params])
    block = framework.default_main_program().global_block()
    cache = optimizer._active_ratio_cache()
    inputs = []
    for group, params in trained:
        if params:
            optimizer._create_accumulators(block, params if group is None else dict(group, params=params))
        group_inputs = []
        for param in params:
            plan, decays = optimizer._plan_and_decays(param, decay_answers.get(id(param)))
            group_inputs.append(LayoutInput(plan, 1.0 if cache is None else cache.ratio(param), decays))
        inputs.append(group_inputs)
    return inputs


# ------------------------------------------------------------- per parameter
class Route(NamedTuple):
    """How one update runs: ``fused_coeff`` the ``adamw`` kernel's decay coefficient
    (None: no decay in the kernel); ``separate_decay_scale`` the lr factor of the
    separate decay op before the kernel (None: no such op); ``adam_kernel`` the
    ``adam`` kernel of a sparse gradient."""

    fused_coeff: float | None
    separate_decay_scale: LrScale | None
    adam_kernel: bool = False


_NO_DECAY = Route(None, None)


def decay_scale(base_scale: LrScale, update_scale: LrScale, *, with_ratio: bool) -> LrScale:
    r"""The lr factor of the decoupled decay: the one place that rule is written.

    The Adam step uses ``update_scale``, :math:`s_p r_p` (the parameter's lr
    factor times its ratio). AdamWDL decays with the lr *before* the ratio,
    :math:`1 - \eta s_p \lambda` (``with_ratio=False``: ``base_scale``,
    :math:`s_p`); Paddle's ``AdamW(lr_ratio=...)`` decays with it,
    :math:`1 - \eta s_p r_p \lambda` (``with_ratio=True``).

    Examples:
        >>> decay_scale(2.0, 0.5, with_ratio=False), decay_scale(2.0, 0.5, with_ratio=True)
        (2.0, 0.5)
    """
    return update_scale if with_ratio else base_scale


def fused_decay_coeff(coeff: Any, decay_scale: Any, update_scale: Any) -> float | None:
    """The kernel coefficient that makes its decay ``1 - lr*decay_scale*coeff``.

    The kernel decays by ``1 - lr_k * coeff_k`` with its own learning rate
    ``lr_k = lr * update_scale``; ``coeff_k = coeff * decay_scale / update_scale``
    makes that product ``lr * decay_scale * coeff``. None when the kernel
    cannot express it (a Tensor, a non-finite number, a ratio of 0, a ratio
    outside :data:`FUSED_RATIO_RANGE`).

    Examples:
        >>> fused_decay_coeff(0.01, 1.0, 0.5)
        0.02
        >>> fused_decay_coeff(0.01, 1.0, 0.0) is None  # a ratio of 0
        True
    """
    if not (is_real_number(decay_scale) and is_real_number(update_scale) and is_real_number(coeff)):
        return None
    if not (math.isfinite(decay_scale) and math.isfinite(update_scale) and math.isfinite(coeff)):
        return None
    if decay_scale == update_scale:
        return coeff
    if decay_scale == 0.0:
        return 0.0 if update_scale != 0.0 else None
    low, high = FUSED_RATIO_RANGE
    if not low <= abs(update_scale / decay_scale) <= high:
        return None
    return coeff * decay_scale / update_scale


def decay_route(
    decays: bool, coeff: Any, base_scale: LrScale, update_scale: LrScale, *, with_ratio: bool, force_general: bool
) -> Route:
    """Fused decay or separate decay op: the fused kernel where :func:`fused_decay_coeff`
    can express the decay of :func:`decay_scale`, else the separate op
    (always with ``force_general``, which tests set).

    Examples:
        >>> decay_route(True, 0.01, 1.0, 0.5, with_ratio=False, force_general=False)
        Route(fused_coeff=0.02, separate_decay_scale=None, adam_kernel=False)
        >>> decay_route(True, 0.01, 1.0, 0.0, with_ratio=False, force_general=False)
        Route(fused_coeff=None, separate_decay_scale=1.0, adam_kernel=False)
    """
    if not decays:
        return _NO_DECAY
    scale = decay_scale(base_scale, update_scale, with_ratio=with_ratio)
    fused = None if force_general else fused_decay_coeff(coeff, scale, update_scale)
    return Route(fused, scale if fused is None else None)


def parameter_route(
    param: Any,
    grad: Any,
    decays: bool,
    coeff: Any,
    base_scale: LrScale,
    update_scale: LrScale,
    settings: AdamSettings,
    *,
    with_ratio: bool,
    force_general: bool,
    memo: dict[Any, Route],
) -> tuple[Any, Route]:
    """The gradient to give the kernel and the :class:`Route` of one per-parameter update.

    A ``SelectedRows`` gradient takes the ``adam`` kernel and the separate
    decay (Paddle 3.3.1's ``adamw`` kernel for them reads its attributes
    wrongly and crashes, as ``paddle.optimizer.AdamW`` does); in dygraph
    without ``lazy_mode`` it is made dense instead, since every row then
    takes a step. Otherwise :func:`decay_route`, decided once per distinct
    float ``(coeff, base_scale, update_scale)`` in ``memo`` (the pass's).
    """
    sparse = grad.is_selected_rows() if settings.dygraph else is_static_sparse(grad)
    if sparse and not settings.lazy_mode and settings.dygraph:
        grad, sparse = densify(param, grad), False
    if sparse:
        route = decay_route(decays, coeff, base_scale, update_scale, with_ratio=with_ratio, force_general=True)
        return grad, route._replace(adam_kernel=True)
    if not decays:
        return grad, _NO_DECAY
    if type(base_scale) is float and type(update_scale) is float and type(coeff) is float:
        key = (coeff, base_scale, update_scale)
        route = memo.get(key)
        if route is None:
            route = memo[key] = decay_route(
                True, coeff, base_scale, update_scale, with_ratio=with_ratio, force_general=force_general
            )
        return grad, route
    return grad, decay_route(True, coeff, base_scale, update_scale, with_ratio=with_ratio, force_general=force_general)
