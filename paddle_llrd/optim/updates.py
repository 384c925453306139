"""One parameter's AdamWDL update, as plain functions and two small objects, for every IR.

:meth:`AdamWDL._append_optimize_op <paddle_llrd.AdamWDL>` reads as the outline
of an update; the pieces it calls, in the order it calls them, are here:

1. :class:`UpdatePass`: what the updates of one optimisation pass share (the
   Adam step's lr factor and ``apply_decay_param_fun``'s answer of each
   parameter, asked before the pass changed anything; one lr tensor per
   distinct factor; the decay factor per lr tensor; the group's
   :class:`AdamSettings`). A pass is one dygraph step
   (one per parameter group) or one static program's ``minimize``.
2. :class:`UpdatePlan` (built by :func:`plan_update`): what one parameter's
   update reuses across dygraph steps (its accumulators, its master weight,
   whether it decays, the decay decision).
3. The decay decision, :meth:`UpdatePlan.fused_coeff_for` with
   :func:`decay_scale` (*which* lr the decay uses, the one rule that tells
   AdamWDL from Paddle's ``lr_ratio``) and :func:`fused_decay_coeff` (whether
   the fused kernel can express it).
4. The kernels: :func:`decoupled_decay` (the separate decay op) and
   :func:`adamw_update` (the ``adamw`` kernel with its decay fused in or
   off, the ``adam`` kernel for sparse gradients, the float32 fallback of
   float16/bfloat16 parameters on CPU, the legacy program's op).

Dygraph and PIR programs call ``_C_ops``; a legacy (non-PIR) program gets the
same operators appended to its block.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Callable, NamedTuple, Union

import paddle
from paddle import _C_ops, pir
from paddle.base import core, framework, unique_name
from paddle.base.framework import Variable, in_dynamic_or_pir_mode

LrScale = Union[float, "paddle.Tensor"]
"""A factor of the global lr: a number, or a Tensor (then the general path is taken)."""

# Paddle's own AdamW passes the same value.
MIN_ROW_SIZE_TO_USE_MULTITHREAD = 1000
# The initial beta power of a program whose beta is a Tensor: its value is
# known only when the program runs, so the first update sets the power to it
# (see start_beta_pows). A power is in (0, 1] otherwise.
UNSET_BETA_POW = -1.0

_TENSOR_TYPES = (paddle.Tensor, framework.Variable, pir.Value)


def is_tensor(value: Any) -> bool:
    """Whether ``value`` is a Paddle tensor of any IR (eager, legacy program, PIR)."""
    return isinstance(value, _TENSOR_TYPES)


def _is_number(value: Any) -> bool:
    # As paddle_llrd.argument_checks.is_real_number; here so that an update reads in two files.
    return type(value) is float or (isinstance(value, numbers.Real) and not isinstance(value, bool))


def lr_attributes(param: Any) -> dict[str, Any] | None:
    """``param.optimize_attr`` if it holds a ``'learning_rate'`` (a Paddle parameter's does), else None."""
    optimize_attr = getattr(param, "optimize_attr", None)
    if optimize_attr is None or "learning_rate" not in optimize_attr:
        return None
    return optimize_attr


def base_scale_of(optimize_attr: dict[str, Any] | None) -> LrScale:
    """:math:`s_p`, the parameter's own lr factor (1 without an ``optimize_attr``)."""
    return 1.0 if optimize_attr is None else optimize_attr["learning_rate"]


# --------------------------------------------------------------- 1. the pass
class AdamSettings(NamedTuple):
    """The kernel settings of a parameter group, read once per pass and group."""

    beta1: Any
    """As given: a float or a Tensor (a legacy program feeds a Tensor to the op)."""
    beta2: Any
    beta1_value: Any
    """``beta1`` as the eager and PIR kernels take it (a Tensor's value read once, not per parameter)."""
    beta2_value: Any
    epsilon: Any
    lazy_mode: bool
    amsgrad: bool
    found_inf: Any
    """The AMP overflow flag of a static program (None in dygraph, which skips the whole pass)."""
    dygraph: bool

    @classmethod
    def of(cls, optimizer: Any) -> AdamSettings:
        """The settings of ``optimizer``'s current parameter group."""
        dygraph = framework.in_dygraph_mode()
        beta1, beta2 = optimizer._beta1, optimizer._beta2
        return cls(
            beta1,
            beta2,
            _beta_value(beta1, dygraph),
            _beta_value(beta2, dygraph),
            optimizer._epsilon,
            optimizer._lazy_mode,
            optimizer._amsgrad,
            None if dygraph else optimizer._get_auxiliary_var("found_inf"),
            dygraph,
        )


def _beta_value(beta: Any, dygraph: bool) -> Any:
    """A dygraph Tensor beta's value; a PIR program passes the Value itself (a legacy op, see ``beta1``)."""
    if dygraph and is_tensor(beta):
        return beta.item(0)
    return beta


class UpdatePass:
    """What the updates of one optimisation pass share; dropped when the pass ends.

    ``update_scales``: :math:`s_p r_p` by parameter name, asked of
    ``set_param_lr_fun`` before the pass changed anything; ``cached_ratios``
    the ratios :math:`r_p` of a function pure in the name (its
    :class:`~paddle_llrd.optim.ratios.RatioCache`); ``ask(param,
    optimize_attr, base_scale)`` the factor of a parameter neither holds (an
    update outside a pass). ``decay_answers``: ``apply_decay_param_fun``'s
    answer by parameter name, asked before the pass changed anything;
    ``ask_decay(param)`` the answer of a parameter it lacks. ``global_lr``
    gives the pass's global lr when first needed.
    """

    __slots__ = (
        "update_scales", "cached_ratios", "ask", "decay_answers", "ask_decay", "_global_lr_fn", "_global_lr",
        "scaled_lrs", "decay_factors", "fused_coeffs", "_settings",
    )

    def __init__(
        self,
        global_lr: Callable[[], Any],
        ask: Callable[[Any, Any, LrScale], LrScale],
        update_scales: dict[str, LrScale] | None = None,
        cached_ratios: dict[str, float] | None = None,
        *,
        ask_decay: Callable[[Any], bool],
        decay_answers: dict[str, bool] | None = None,
    ) -> None:
        self.update_scales = {} if update_scales is None else update_scales
        self.cached_ratios = {} if cached_ratios is None else cached_ratios
        self.ask = ask
        self.decay_answers = {} if decay_answers is None else decay_answers
        self.ask_decay = ask_decay
        self._global_lr_fn = global_lr
        self._global_lr: Any = None
        self.scaled_lrs: dict[float, Any] = {}
        # 1 - lr * coeff per lr tensor (AdamWDL._lr_to_coeff)
        self.decay_factors: dict[Any, Any] = {}
        # the fused-decay decision per (coeff, base scale, update scale); see UpdatePlan.fused_coeff_for
        self.fused_coeffs: dict[Any, float | None] = {}
        self._settings: AdamSettings | None = None

    def update_scale(self, param: Any, optimize_attr: dict[str, Any] | None, base_scale: LrScale) -> LrScale:
        """:math:`s_p r_p`, the lr factor of ``param``'s Adam step (``base_scale`` is :math:`s_p`)."""
        scale = self.update_scales.get(param.name)
        if scale is not None:
            return scale
        ratio = self.cached_ratios.get(param.name)
        if ratio is not None:
            return base_scale * ratio
        return self.ask(param, optimize_attr, base_scale)

    def decays(self, param: Any) -> bool:
        """Whether ``param`` decays at this update: the answer asked before the pass, else asked now."""
        answer = self.decay_answers.get(param.name)
        return self.ask_decay(param) if answer is None else answer

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

    def decay_factor(self, lr: Any, coeff: Any, found_inf: Any) -> Any:
        """:func:`decay_factor` of ``lr``, once per lr tensor and pass."""
        factor = self.decay_factors.get(lr)
        if factor is None:
            factor = self.decay_factors[lr] = decay_factor(lr, coeff, found_inf)
        return factor

    def settings(self, optimizer: Any) -> AdamSettings:
        """The :class:`AdamSettings` of the group being updated (read once per group)."""
        settings = self._settings
        if settings is None:
            settings = self._settings = AdamSettings.of(optimizer)
        return settings

    def next_group(self) -> None:
        """The next parameter group's settings are read afresh."""
        self._settings = None


def _scale_lr(global_lr: Any, scale: Any) -> Any:
    if framework.in_dygraph_mode():
        return global_lr * scale
    with paddle.static.default_main_program()._lr_schedule_guard(
        is_with_opt=True
    ), framework.name_scope("scale_with_param_lr"):
        return global_lr * scale


# --------------------------------------------------------------- 2. the plan
_NOT_DECIDED = object()


class UpdatePlan:
    """One parameter's update: its state tensors and the kernel's settings.

    In dygraph the optimizer keeps a plan per parameter and reuses it across
    steps (the lookups ``paddle.optimizer.AdamW`` repeats every step, done
    once) while the parameter keeps the dtype it was planned for
    (:meth:`fits`); in a static program every update builds its own, as the
    program is built once anyway.

    ``decays`` is whether the parameter decays, or None where
    ``apply_decay_param_fun`` is asked at every update (a function that does
    not declare ``pure_in_name = True``); ``moments`` are ``(moment1,
    moment2, moment2_max or None, beta1_pow, beta2_pow)``; ``master_weight``
    the float32 copy of a float16/bfloat16 parameter under
    ``multi_precision`` (else None); ``fp32_fallback`` whether the float32
    kernel updates the master weight and casts it into the parameter (no
    half-precision ``adamw`` kernel on CPU).
    """

    __slots__ = (
        "decays", "moments", "master_weight", "fp32_fallback", "dtype", "place", "_decision_key", "_fused_coeff",
    )

    def __init__(
        self,
        decays: bool | None,
        moments: tuple[Any, ...],
        master_weight: Any,
        fp32_fallback: bool,
        dtype: Any = None,
        place: Any = None,
    ) -> None:
        self.decays = decays
        self.moments = moments
        self.master_weight = master_weight
        self.fp32_fallback = fp32_fallback
        self.dtype = dtype
        self.place = place
        self._decision_key: Any = _NOT_DECIDED
        self._fused_coeff: float | None = None

    def fits(self, param: Any) -> bool:
        """Whether ``param`` still has the dtype (and, with a master weight, the place) the plan was made for.

        A cast or, for a master weight, a move (which decides the CPU
        fallback) needs another plan. Otherwise a move keeps the state where
        it is, as ``paddle.optimizer.AdamW`` does, and so does the plan.
        """
        dtype = param.dtype
        if dtype is not self.dtype and dtype != self.dtype:  # `is`: Paddle's dtypes are singletons, == is slow
            return False
        return self.master_weight is None or param.place._equals(self.place)

    def decay_target(self, param: Any) -> Any:
        """What the decay multiplies: the float32 master weight, else the parameter."""
        return param if self.master_weight is None else self.master_weight

    def fused_coeff_for(
        self,
        decays: bool,
        coeff: Any,
        base_scale: LrScale,
        update_scale: LrScale,
        *,
        with_ratio: bool,
        force_general: bool,
        decided: dict[Any, Any],
    ) -> float | None:
        """The fused kernel's coefficient for this update, None for the separate decay op (or no decay).

        ``decays``: whether the parameter decays at this update;
        ``with_ratio``: the decay's lr rule (:func:`decay_scale`). Kept while
        ``coeff`` (the weight decay), ``base_scale`` (:math:`s_p`) and
        ``update_scale`` (:math:`s_p r_p`) are the same numbers; when one
        changes (a weight-decay schedule's next value) the decision is taken
        once per distinct key and pass (``decided``, the pass's
        ``fused_coeffs``), not per parameter. A Tensor among them always
        takes the separate op.
        """
        if not decays or force_general:
            return None
        if type(base_scale) is float and type(update_scale) is float and type(coeff) is float:
            key = (coeff, base_scale, update_scale)
            if key != self._decision_key:
                fused = decided.get(key, _NOT_DECIDED)
                if fused is _NOT_DECIDED:
                    fused = decided[key] = fused_decay_coeff(
                        coeff, decay_scale(base_scale, update_scale, with_ratio=with_ratio), update_scale
                    )
                self._fused_coeff, self._decision_key = fused, key
            return self._fused_coeff
        # None for a Tensor among them
        return fused_decay_coeff(coeff, decay_scale(base_scale, update_scale, with_ratio=with_ratio), update_scale)


def plan_update(optimizer: Any, param: Any, *, cache_decay: bool, decays: bool | None = None) -> UpdatePlan:
    """The plan of ``param``'s update with ``optimizer`` (an ``AdamWDL``) as it is now.

    The accumulators must exist (Paddle creates them at the start of a pass).
    ``cache_decay``: keep ``apply_decay_param_fun``'s answer (``decays`` if
    it was asked already, else asked now), rather than ask at every update.
    """
    get = optimizer._get_accumulator_master
    moments = (
        get(optimizer._moment1_acc_str, param),
        get(optimizer._moment2_acc_str, param),
        get(optimizer._moment2_acc_max_str, param) if optimizer._amsgrad else None,
        get(optimizer._beta1_pow_acc_str, param),
        get(optimizer._beta2_pow_acc_str, param),
    )
    master = uses_master(optimizer, param)
    dygraph = framework.in_dygraph_mode()
    return UpdatePlan(
        decays=(optimizer._decays(param) if decays is None else decays) if cache_decay else None,
        moments=moments,
        master_weight=optimizer._master_weights[param.name] if master else None,
        fp32_fallback=master and _on_cpu(param),
        dtype=param.dtype,
        place=param.place if dygraph else None,
    )


def uses_master(optimizer: Any, param: Any) -> bool:
    """Whether ``optimizer`` updates ``param`` through a float32 master weight (``multi_precision``, float16/bfloat16)."""
    return optimizer._multi_precision and optimizer._is_dtype_fp16_or_bf16(param.dtype)


def _on_cpu(param: Any) -> bool:
    """Where Paddle has no half-precision ``adamw`` kernel (CPU: float32/float64 only)."""
    if framework.in_dygraph_mode():
        return param.place.is_cpu_place()
    return paddle.device.get_device() == "cpu"


# ---------------------------------------------------- 3. the decay decision
def decay_scale(base_scale: LrScale, update_scale: LrScale, *, with_ratio: bool) -> LrScale:
    """The lr factor of the decoupled decay: the one place that rule is written.

    The Adam step uses ``update_scale``, :math:`s_p r_p` (the parameter's lr
    factor times its ratio). AdamWDL decays with the lr *before* the ratio,
    :math:`1 - \\eta s_p \\lambda` (``with_ratio=False``: ``base_scale``,
    :math:`s_p`); Paddle's ``AdamW(lr_ratio=...)`` decays with it,
    :math:`1 - \\eta s_p r_p \\lambda` (``with_ratio=True``).

    Examples:
        >>> decay_scale(2.0, 0.5, with_ratio=False), decay_scale(2.0, 0.5, with_ratio=True)
        (2.0, 0.5)
    """
    return update_scale if with_ratio else base_scale


# A fused update folds the ratio into the kernel's decay coefficient
# (coeff * decay_scale / update_scale); beyond this range of
# update_scale / decay_scale, float32 rounding of that coefficient and of the
# scaled learning rate is no longer negligible, so the separate decay op is used.
FUSED_RATIO_RANGE = (1e-12, 1e12)


def fused_decay_coeff(coeff: Any, decay_scale: Any, update_scale: Any) -> float | None:
    """The kernel coefficient that makes its decay ``1 - lr*decay_scale*coeff``.

    The kernel decays by ``1 - lr_k * coeff_k`` with its own learning rate
    ``lr_k = lr * update_scale``; ``coeff_k = coeff * decay_scale / update_scale``
    makes that product ``lr * decay_scale * coeff``. None when the kernel
    cannot express it.

    Examples:
        >>> fused_decay_coeff(0.01, 1.0, 0.5)
        0.02
        >>> fused_decay_coeff(0.01, 1.0, 0.0) is None  # a ratio of 0
        True
    """
    if not (_is_number(decay_scale) and _is_number(update_scale) and _is_number(coeff)):
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


# ------------------------------------------------------------ 4. the kernels
def decay_factor(lr: Any, coeff: Any, found_inf: Any) -> Any:
    """``1 - lr * coeff``, the separate decay's factor; 1 on an AMP overflow step of a program.

    Dygraph skips the whole pass on overflow (``found_inf`` None here); a
    program has to turn the decay into a no-op itself.
    """
    factor = 1.0 - lr * coeff
    if is_tensor(found_inf):
        factor = paddle.where(paddle.reshape(found_inf, []), paddle.ones_like(factor), factor)
    return factor


def decoupled_decay(block: Any, target: Any, factor: Any) -> Any:
    """The separate decay op: ``target *= factor`` (``factor`` cast to ``target``'s dtype)."""
    if factor.dtype != target.dtype:
        factor = paddle.cast(factor, target.dtype)
    if in_dynamic_or_pir_mode():
        _C_ops.multiply_(target, factor)
        return None
    return block.append_op(
        type="elementwise_mul",
        inputs={"X": [target], "Y": [factor]},
        outputs={"Out": [target]},
        attrs={"axis": -1},
        stop_gradient=True,
    )


def adamw_update(
    block: Any,
    param: Any,
    grad: Any,
    lr: Any,
    plan: UpdatePlan,
    settings: AdamSettings,
    *,
    coeff: float | None,
    adam_kernel: bool = False,
) -> Any:
    """One kernel update of ``param``: decay ``1 - lr*coeff`` fused in (``coeff`` None: no decay), then Adam with ``lr``.

    ``adam_kernel``: the ``adam`` kernel (``coeff`` must be None), for
    ``SelectedRows`` gradients: Paddle 3.3.1's ``adamw`` kernel for them reads
    its attributes wrongly and crashes.
    """
    if settings.dygraph and not (adam_kernel or plan.fp32_fallback):
        # The update of nearly every parameter, with as little Python as
        # paddle.optimizer.AdamW's own call.
        moment1, moment2, moment2_max, beta1_pow, beta2_pow = plan.moments
        master_weight = plan.master_weight
        _C_ops.adamw_(
            param, grad, lr, moment1, moment2, moment2_max, beta1_pow, beta2_pow, master_weight, None,
            settings.beta1_value, settings.beta2_value, settings.epsilon, 1.0,
            0.0 if coeff is None else coeff, coeff is not None,
            settings.lazy_mode, MIN_ROW_SIZE_TO_USE_MULTITHREAD, master_weight is not None, False, settings.amsgrad,
        )
        return None
    if not settings.dygraph and (is_tensor(settings.beta1) or is_tensor(settings.beta2)):
        start_beta_pows(plan.moments[3], plan.moments[4], settings)
    if not in_dynamic_or_pir_mode():
        return _legacy_adamw_op(block, param, grad, lr, plan, settings, coeff=coeff, adam_kernel=adam_kernel)
    master_weight = plan.master_weight
    if plan.fp32_fallback:
        # What the GPU kernel does in one go: update the float32 master
        # weight, then cast it into the parameter.
        kernel_param, kernel_grad = master_weight, _C_ops.cast(grad, paddle.float32)
        kernel_master, multi_precision = None, False
    else:
        kernel_param, kernel_grad = param, grad
        kernel_master, multi_precision = master_weight, master_weight is not None
    moment1, moment2, moment2_max, beta1_pow, beta2_pow = plan.moments
    common = (
        kernel_param, kernel_grad, lr, moment1, moment2, moment2_max, beta1_pow, beta2_pow,
        kernel_master, settings.found_inf,
        settings.beta1_value, settings.beta2_value, settings.epsilon,
    )
    tail = (settings.lazy_mode, MIN_ROW_SIZE_TO_USE_MULTITHREAD, multi_precision, adam_kernel, settings.amsgrad)
    if adam_kernel:
        _C_ops.adam_(*common, *tail)  # use_global_beta_pow: see advance_beta_pows
        advance_beta_pows(beta1_pow, beta2_pow, settings)
    else:
        _C_ops.adamw_(*common, 1.0, 0.0 if coeff is None else coeff, coeff is not None, *tail)
    if plan.fp32_fallback:
        _C_ops.assign_out_(_C_ops.cast(master_weight, param.dtype), param)
    return None


def _legacy_adamw_op(
    block: Any, param: Any, grad: Any, lr: Any, plan: UpdatePlan, settings: AdamSettings, *, coeff: float | None, adam_kernel: bool
) -> Any:
    """:func:`adamw_update` as an ``adamw`` (or ``adam``) op of a legacy (non-PIR) program."""
    moment1, moment2, moment2_max, beta1_pow, beta2_pow = plan.moments
    master_weight = plan.master_weight
    kernel_param, kernel_grad = param, grad
    if plan.fp32_fallback:
        kernel_param = master_weight
        kernel_grad = block.create_var(
            name=unique_name.generate(grad.name + "_fp32"),
            shape=grad.shape,
            dtype=core.VarDesc.VarType.FP32,
            persistable=False,
        )
        block.append_op(
            type="cast",
            inputs={"X": [grad]},
            outputs={"Out": [kernel_grad]},
            attrs={"in_dtype": grad.dtype, "out_dtype": core.VarDesc.VarType.FP32},
        )
    inputs = {
        "Param": [kernel_param], "Grad": [kernel_grad], "LearningRate": [lr],
        "Moment1": [moment1], "Moment2": [moment2], "Beta1Pow": [beta1_pow], "Beta2Pow": [beta2_pow],
    }
    outputs = {
        "ParamOut": [kernel_param], "Moment1Out": [moment1], "Moment2Out": [moment2],
        "Beta1PowOut": [beta1_pow], "Beta2PowOut": [beta2_pow],
    }
    if settings.found_inf:
        inputs["SkipUpdate"] = settings.found_inf
    use_kernel_master = master_weight is not None and not plan.fp32_fallback
    attrs = {
        "lazy_mode": settings.lazy_mode,
        "min_row_size_to_use_multithread": MIN_ROW_SIZE_TO_USE_MULTITHREAD,
        "multi_precision": use_kernel_master,
        "amsgrad": settings.amsgrad,
    }
    if adam_kernel:
        attrs["use_global_beta_pow"] = True  # see advance_beta_pows
    else:
        attrs.update(with_decay=coeff is not None, coeff=0.0 if coeff is None else coeff, lr_ratio=1.0)
    for key, tensor_key, value in (
        ("beta1", "Beta1Tensor", settings.beta1),
        ("beta2", "Beta2Tensor", settings.beta2),
        ("epsilon", "EpsilonTensor", settings.epsilon),
    ):
        if isinstance(value, Variable):
            inputs[tensor_key] = value
        else:
            attrs[key] = value
    if settings.amsgrad:
        inputs["Moment2Max"] = [moment2_max]
        outputs["Moment2MaxOut"] = [moment2_max]
    if use_kernel_master:
        inputs["MasterParam"] = master_weight
        outputs["MasterParamOut"] = master_weight
    op = block.append_op(
        type="adam" if adam_kernel else "adamw", inputs=inputs, outputs=outputs, attrs=attrs, stop_gradient=True
    )
    if plan.fp32_fallback:
        block.append_op(
            type="cast",
            inputs={"X": [master_weight]},
            outputs={"Out": [param]},
            attrs={"in_dtype": core.VarDesc.VarType.FP32, "out_dtype": param.dtype},
        )
    if adam_kernel:
        advance_beta_pows(beta1_pow, beta2_pow, settings)
    return op


def advance_beta_pows(beta1_pow: Any, beta2_pow: Any, settings: AdamSettings) -> None:
    """``beta_pow *= beta`` after a sparse ``adam`` update (not on an overflow step).

    Paddle 3.3.1's CPU ``adam`` kernel for SelectedRows gradients advances the
    in-place beta powers before it reads them, so its bias correction is that
    of step ``t + 1``. Running it with ``use_global_beta_pow=True`` (powers
    left alone) and advancing them here gives step ``t``'s.
    """
    for beta_pow, beta in ((beta1_pow, settings.beta1), (beta2_pow, settings.beta2)):
        if settings.dygraph:
            if is_tensor(beta):
                _C_ops.multiply_(beta_pow, paddle.cast(beta, beta_pow.dtype))
            else:
                _C_ops.scale_(beta_pow, float(beta), 0.0, True)
            continue
        advanced = beta_pow * beta
        if is_tensor(settings.found_inf):
            advanced = paddle.where(paddle.reshape(settings.found_inf, [1]), beta_pow, advanced)
        paddle.assign(advanced, output=beta_pow)


def initial_beta_pow(beta: Any) -> Any:
    """The value a beta power accumulator starts at: ``beta`` itself, a dygraph
    Tensor's value, or in a program :data:`UNSET_BETA_POW` for a Tensor."""
    if not is_tensor(beta):
        return beta
    return float(beta.item()) if framework.in_dygraph_mode() else UNSET_BETA_POW


def start_beta_pows(beta1_pow: Any, beta2_pow: Any, settings: AdamSettings) -> None:
    """In a program, ``beta_pow = beta`` where a Tensor beta's power is still :data:`UNSET_BETA_POW`.

    Paddle 3.3.1's AdamW starts the powers at 0.9 and 0.999 whatever a Tensor
    beta holds, which makes the bias correction that of other betas.
    """
    for beta_pow, beta in ((beta1_pow, settings.beta1), (beta2_pow, settings.beta2)):
        if is_tensor(beta):
            beta = paddle.cast(paddle.reshape(beta, [1]), beta_pow.dtype)
            paddle.assign(paddle.where(beta_pow < 0, beta, beta_pow), output=beta_pow)


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
