"""AdamWDL's per-parameter path: one kernel call per parameter, for every IR.

Paddle's pass (``_create_optimization_pass``) calls
:meth:`AdamWDL._append_optimize_op <paddle_llrd.AdamWDL>` once per
parameter; it hands :func:`update_parameter` the parameter, its gradient and
the :class:`ParameterPass` the optimizer opened for the pass, which holds
everything the updates of one pass share (asked before the first update).
The rule that decides between the decay fused into the ``adamw`` kernel and
the separate decay op (:func:`decay_route`) is written here once, and so is
that op (:func:`append_decoupled_weight_decay`, the optimizer's
``_append_decoupled_weight_decay``); the multi-tensor step
(:mod:`~paddle_llrd.optim.flat_update`) applies the rule per segment.
The kernels are :mod:`~paddle_llrd.optim.kernels`.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import paddle
from paddle import pir
from paddle.base import core, framework

from ..checks import is_real_number
from .adamw_differences import warn_if_tensor_lr_factor
from .kernels import adamw_kernel, adamw_update, decay_factor, decoupled_decay, is_tensor
from .param_state import ParamState
from .ratios import LayerRatios, LrScale, base_scale_of, lr_attributes
from .update_batch import AdamSettings

__all__ = [
    "FUSED_RATIO_RANGE", "ParameterPass", "Route", "decay_route", "decay_scale", "densify",
    "append_decoupled_weight_decay", "append_optimize_op", "dygraph_gradient", "fused_decay_coeff", "is_static_sparse",
    "update_parameter", "updated_parameters",
]

# A fused update folds the ratio into the kernel's decay coefficient
# (coeff * decay_scale / update_scale); beyond this range of
# update_scale / decay_scale, float32 rounding of that coefficient and of the
# scaled learning rate is no longer negligible, so the separate decay op is used.
FUSED_RATIO_RANGE = (1e-12, 1e12)


# ------------------------------------------------------------------ the decay rule
class Route(NamedTuple):
    """How one update runs: ``fused_coeff`` the ``adamw`` kernel's decay coefficient
    (None: no decay in the kernel); ``separate_decay_scale`` the lr factor of the
    separate decay op before the kernel (None: no such op); ``adam_kernel`` the
    ``adam`` kernel of a sparse gradient."""

    fused_coeff: float | None
    separate_decay_scale: LrScale | None
    adam_kernel: bool = False


NO_DECAY = Route(None, None)


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
    if not (type(decay_scale) is float and type(update_scale) is float and type(coeff) is float) and not (
            is_real_number(decay_scale) and is_real_number(update_scale) and is_real_number(coeff)):
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


def decay_route(decays: bool, coeff: Any, base_scale: LrScale, update_scale: LrScale, *, with_ratio: bool) -> Route:
    """Fused decay or separate decay op: the fused kernel where :func:`fused_decay_coeff`
    can express the decay of :func:`decay_scale`, else the separate op.

    Examples:
        >>> decay_route(True, 0.01, 1.0, 0.5, with_ratio=False)
        Route(fused_coeff=0.02, separate_decay_scale=None, adam_kernel=False)
        >>> decay_route(True, 0.01, 1.0, 0.0, with_ratio=False)
        Route(fused_coeff=None, separate_decay_scale=1.0, adam_kernel=False)
    """
    if not decays:
        return NO_DECAY
    scale = decay_scale(base_scale, update_scale, with_ratio=with_ratio)
    fused = fused_decay_coeff(coeff, scale, update_scale)
    return Route(fused, scale if fused is None else None)


# ------------------------------------------------------------------ the pass
class ParameterPass:
    """What the updates of one optimisation pass share; dropped when the pass ends.

    A pass is one dygraph step (one per parameter group) or one static
    program's ``minimize``. ``update_scales``: :math:`s_p r_p` by parameter
    name, asked of ``set_param_lr_fun`` before the pass changed anything;
    ``ratios`` the optimizer's :class:`~paddle_llrd.optim.ratios.LayerRatios`,
    whose cache serves the ratios :math:`r_p` of a function pure in the name;
    ``decay_answers`` ``apply_decay_param_fun``'s answer by name; ``states``
    the :class:`~paddle_llrd.optim.param_state.ParamState` by name, read from the
    accumulators when the pass opened. Where one is missing (an update outside a
    pass), ``ratios`` (scale), ``ask_decays`` and ``state_of`` are asked; ``decay_op(block, (param, grad),
    lr_scale, decays=True)`` appends the separate decay op (the optimizer's
    ``_append_decoupled_weight_decay``, which subclasses may extend). ``settings``: the :class:`AdamSettings`
    of the group being updated (set as Paddle selects it; :meth:`next_group`).
    """

    __slots__ = (
        "update_scales", "cached_ratios", "ask", "decay_answers", "ask_decays", "states", "state_of", "decay_op",
        "with_ratio", "settings", "_global_lr_fn", "_global_lr", "scaled_lrs", "decay_factors", "routes",
    )

    def __init__(
        self,
        global_lr: Callable[[], Any],
        settings: AdamSettings,
        *,
        ratios: LayerRatios,
        ask_decays: Callable[[Any], bool],
        state_of: Callable[[Any], ParamState],
        decay_op: Callable[..., Any],
        update_scales: dict[str, LrScale] | None = None,
        decay_answers: dict[str, bool] | None = None,
        states: dict[str, ParamState] | None = None,
        with_ratio: bool = False,
    ) -> None:
        self.update_scales = {} if update_scales is None else update_scales
        self.cached_ratios = {} if ratios.cache is None else ratios.cache.ratios
        self.ask, self.ask_decays, self.state_of, self.decay_op = ratios.update_scale, ask_decays, state_of, decay_op
        self.decay_answers = {} if decay_answers is None else decay_answers
        self.states = {} if states is None else states
        self.with_ratio = with_ratio
        self.settings = settings
        self._global_lr_fn = global_lr
        self._global_lr: Any = None
        self.scaled_lrs: dict[float, Any] = {}
        self.decay_factors: dict[Any, Any] = {}  # 1 - lr * coeff per lr tensor (AdamWDL._lr_to_coeff)
        self.routes: dict[Any, Route] = {}  # the decay route per (coeff, base scale, update scale)

    def next_group(self) -> None:
        """A parameter group's own pass begins (Paddle runs one per group): its lrs and decay
        factors are its own (``_lr_to_coeff`` holds one group's), its settings set as Paddle
        selects the group."""
        self.scaled_lrs, self.decay_factors, self.routes = {}, {}, {}

    def update_scale(self, param: Any, optimize_attr: dict[str, Any] | None, base_scale: LrScale) -> LrScale:
        """:math:`s_p r_p`, the lr factor of ``param``'s Adam step (``base_scale`` is :math:`s_p`)."""
        scale = self.update_scales.get(param.name)
        if scale is not None:
            return scale
        ratio = self.cached_ratios.get(param.name)
        if ratio is not None:
            return base_scale * ratio
        return self.ask(param, optimize_attr, base_scale)

    def lr(self, scale: LrScale) -> Any:
        """The global lr times ``scale``: one tensor per distinct float per pass."""
        global_lr = self._global_lr
        if global_lr is None:
            global_lr = self._global_lr = self._global_lr_fn()
        if type(scale) is not float:
            if is_tensor(scale):
                return _scale_lr(global_lr, scale)
            scale = float(scale)
        if scale == 1.0:
            return global_lr
        scaled = self.scaled_lrs.get(scale)
        if scaled is None:
            scaled = self.scaled_lrs[scale] = _scale_lr(global_lr, scale)
        return scaled

    def decay_factor(self, lr: Any) -> Any:
        """:func:`~paddle_llrd.optim.kernels.decay_factor` of ``lr`` with this group's
        weight decay, once per lr tensor and pass."""
        factor = self.decay_factors.get(lr)
        if factor is None:
            factor = self.decay_factors[lr] = decay_factor(lr, self.settings.coeff, self.settings.found_inf)
        return factor

    def route(self, decays: bool, base_scale: LrScale, update_scale: LrScale) -> Route:
        """:func:`decay_route` with this group's weight decay, decided once per distinct float triple."""
        if not decays:
            return NO_DECAY
        coeff = self.settings.coeff
        if type(base_scale) is float and type(update_scale) is float and type(coeff) is float:
            key = (coeff, base_scale, update_scale)
            route = self.routes.get(key)
            if route is None:
                route = self.routes[key] = decay_route(True, coeff, base_scale, update_scale,
                                                       with_ratio=self.with_ratio)
            return route
        return decay_route(True, coeff, base_scale, update_scale, with_ratio=self.with_ratio)


def _scale_lr(global_lr: Any, scale: Any) -> Any:
    if framework.in_dygraph_mode():
        return global_lr * scale
    with paddle.static.default_main_program()._lr_schedule_guard(
        is_with_opt=True
    ), framework.name_scope("scale_with_param_lr"):
        return global_lr * scale


# ------------------------------------------------------------------ one update
def append_optimize_op(optimizer: Any, block: Any, param_and_grad: Any) -> Any:
    """``AdamWDL._append_optimize_op``: Paddle's pass hands it one parameter (with its
    group's settings, in a grouped pass), which :func:`update_parameter` updates in the
    :class:`ParameterPass` the optimizer opened (one opened now where none is, kept until
    the next pass ends). PaddleNLP's contract, which its subclasses rely on: the lr factor
    is scaled by the layer ratio for this update only, the separate decay goes through
    ``_append_decoupled_weight_decay`` and its ``_lr_to_coeff`` cache, and float16/bfloat16
    parameters take their master weights under ``multi_precision``.
    """
    param_and_grad = _selected(optimizer, param_and_grad)
    return update_parameter(_current_pass(optimizer), block, *param_and_grad)


def append_decoupled_weight_decay(
    optimizer: Any, block: Any, param_and_grad: Any, lr_scale: LrScale | None = None, *, decays: bool | None = None
) -> Any:
    r"""``AdamWDL._append_decoupled_weight_decay``, the separate decay op: ``target *= 1 -
    lr * lr_scale * coeff`` on the master weight (``multi_precision``) or the parameter, if
    it ``decays`` (default: ``apply_decay_param_fun``'s answer); ``lr_scale`` defaults to
    :math:`s_p`. The factor is made once per lr tensor and pass (``_lr_to_coeff``).
    """
    param = _selected(optimizer, param_and_grad)[0]
    if not (optimizer._decays(param) if decays is None else decays):
        return None
    update = _current_pass(optimizer)
    if lr_scale is None:
        lr_scale = base_scale_of(lr_attributes(param))
    state = update.states.get(param.name) or update.state_of(param)
    return decoupled_decay(block, state.decay_target(param), update.decay_factor(update.lr(lr_scale)))


def _selected(optimizer: Any, param_and_grad: Any) -> Any:
    """``(param, grad)``; a grouped pass's dict selects its group's settings in the optimizer first."""
    if isinstance(param_and_grad, dict):
        return optimizer._update_param_group(param_and_grad)
    return param_and_grad


def _current_pass(optimizer: Any) -> ParameterPass:
    """The pass under way, or one opened for an update outside one (a subclass's own call)."""
    return optimizer._pass or optimizer._open_pass()


def update_parameter(update: ParameterPass, block: Any, param: Any, grad: Any) -> Any:
    """One parameter's update in ``update``'s pass: the separate decay op where the
    route says so, then the kernel (:func:`~paddle_llrd.optim.kernels.adamw_update`).

    ``param.optimize_attr['learning_rate']`` holds :math:`s_p r_p` during the
    update and :math:`s_p` again after it (PaddleNLP's contract, which
    subclasses reading it rely on).
    """
    optimize_attr = getattr(param, "optimize_attr", None)
    if optimize_attr is not None and "learning_rate" not in optimize_attr:
        optimize_attr = None
    base_scale = 1.0 if optimize_attr is None else optimize_attr["learning_rate"]
    if type(base_scale) is not float and is_tensor(base_scale):
        warn_if_tensor_lr_factor(param, base_scale)
    update_scale = update.update_scale(param, optimize_attr, base_scale)
    if optimize_attr is not None:
        optimize_attr["learning_rate"] = update_scale  # for this update only
    try:
        state = update.states.get(param.name) or update.state_of(param)
        decays = update.decay_answers.get(param.name)
        if decays is None:
            decays = update.ask_decays(param)
        settings = update.settings
        sparse = grad.is_selected_rows() if settings.dygraph else is_static_sparse(grad)
        if sparse and not settings.lazy_mode and settings.dygraph:
            grad, sparse = densify(param, grad), False
        if sparse:
            # Paddle 3.3.1's adamw kernel for SelectedRows reads its attributes
            # wrongly and crashes (as paddle.optimizer.AdamW does): adam + the separate decay.
            route = Route(None, decay_scale(base_scale, update_scale, with_ratio=update.with_ratio)
                          if decays else None, adam_kernel=True)
        else:
            route = update.route(decays, base_scale, update_scale)
        if route.separate_decay_scale is not None:
            update.decay_op(block, (param, grad), route.separate_decay_scale, decays=True)
        lr = update.lr(update_scale)
        if settings.dygraph and not route.adam_kernel:
            return adamw_kernel(
                param, grad, lr, state.moments, state.master_weight, settings.beta1_value, settings.beta2_value,
                settings.epsilon, route.fused_coeff, settings.lazy_mode, settings.amsgrad, state.fp32_fallback,
            )
        return adamw_update(block, param, grad, lr, state, settings, coeff=route.fused_coeff,
                            adam_kernel=route.adam_kernel)
    finally:
        if optimize_attr is not None:
            optimize_attr["learning_rate"] = base_scale


# ------------------------------------------------------------------ sparse gradients
def densify(param: Any, grad: Any) -> Any:
    """A SelectedRows gradient as a dense one (duplicate rows summed).

    Without lazy mode every row takes an Adam step, which is the dense update
    with zeros where rows are absent; Paddle 3.3.1's CPU ``adam`` kernel for
    SelectedRows corrupts the moments in that mode.
    """
    values = grad._get_tensor_from_selected_rows()
    dense = paddle.zeros(param.shape, dtype=values.dtype)
    rows = grad.rows()
    if not rows:
        return dense
    return paddle.scatter(dense, paddle.to_tensor(rows, dtype="int64"), values, overwrite=False)


def is_static_sparse(grad: Any) -> bool:
    """Whether ``grad`` of a program is a SelectedRows gradient (e.g. of ``Embedding(sparse=True)``)."""
    if isinstance(grad, pir.Value):
        return grad.is_selected_row_type()
    return grad.type == core.VarDesc.VarType.SELECTED_ROWS


def dygraph_gradient(param: Any) -> Any:
    """The gradient Paddle's dygraph step hands its pass: a ``main_grad`` where one is set."""
    main_grad = getattr(param, "main_grad", None)
    return param._grad_ivar() if main_grad is None else main_grad


def updated_parameters(params_grads: Sequence[tuple[Any, Any]]) -> list[Any]:
    """The parameters of ``(parameter, gradient)`` pairs that a pass updates: trained, with a gradient."""
    return [param for param, grad in params_grads if grad is not None and not param.stop_gradient]
