"""What one parameter's AdamWDL update needs, as two small objects and plain functions, for every IR.

1. :class:`UpdatePass`: what the updates of one optimisation pass share (the
   Adam step's lr factor and ``apply_decay_param_fun``'s answer of each
   parameter, asked before the pass changed anything; one lr tensor per
   distinct factor; the decay factor per lr tensor; the decay routes; the
   group's :class:`AdamSettings`). A pass is one dygraph step (one per
   parameter group) or one static program's ``minimize``.
2. :class:`UpdatePlan` (built by :func:`plan_update`): what one parameter's
   update reuses across dygraph steps (its accumulators, its master weight,
   whether it decays).
3. Beta powers and sparse gradients: :func:`initial_beta_pow`,
   :func:`densify`, :func:`is_static_sparse`.

Which path an update takes is :mod:`~paddle_llrd.optim.dispatch`; the kernels
are :mod:`~paddle_llrd.optim.kernels`.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Callable, NamedTuple, Union

import paddle
from paddle import pir
from paddle.base import core, framework

from .checkpoint import has_saved_state
from .kernels import decay_factor, is_tensor

LrScale = Union[float, "paddle.Tensor"]
"""A factor of the global lr: a number, or a Tensor (then the general path is taken)."""

# The initial beta power of a program whose beta is a Tensor: its value is
# known only when the program runs, so the first update sets the power to it
# (see kernels.start_beta_pows). A power is in (0, 1] otherwise.
UNSET_BETA_POW = -1.0


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
    def of_group(cls, optimizer: Any, group: dict[str, Any] | None) -> AdamSettings:
        """The settings of ``optimizer``'s parameter group ``group`` (None: the
        optimizer's own), read without selecting the group in the optimizer."""
        if group is None:
            return cls.of(optimizer)
        defaults = optimizer._default_dict
        dygraph = framework.in_dygraph_mode()
        beta1, beta2 = group.get("beta1", defaults["beta1"]), group.get("beta2", defaults["beta2"])
        return cls(
            beta1, beta2, _beta_value(beta1, dygraph), _beta_value(beta2, dygraph),
            group.get("epsilon", defaults["epsilon"]), group.get("lazy_mode", defaults["lazy_mode"]),
            optimizer._amsgrad, None if dygraph else optimizer._get_auxiliary_var("found_inf"), dygraph,
        )

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
    answer by parameter name, asked before the pass changed anything. ``global_lr``
    gives the pass's global lr when first needed.
    """

    __slots__ = (
        "update_scales", "cached_ratios", "ask", "decay_answers", "_global_lr_fn", "_global_lr",
        "scaled_lrs", "decay_factors", "routes", "_settings",
    )

    def __init__(
        self,
        global_lr: Callable[[], Any],
        ask: Callable[[Any, Any, LrScale], LrScale] | None = None,
        update_scales: dict[str, LrScale] | None = None,
        cached_ratios: dict[str, float] | None = None,
        *,
        decay_answers: dict[str, bool] | None = None,
    ) -> None:
        self.update_scales = {} if update_scales is None else update_scales
        self.cached_ratios = {} if cached_ratios is None else cached_ratios
        self.ask = ask
        self.decay_answers = {} if decay_answers is None else decay_answers
        self._global_lr_fn = global_lr
        self._global_lr: Any = None
        self.scaled_lrs: dict[float, Any] = {}
        # 1 - lr * coeff per lr tensor (AdamWDL._lr_to_coeff)
        self.decay_factors: dict[Any, Any] = {}
        # the decay route per (coeff, base scale, update scale): dispatch.parameter_route's memo
        self.routes: dict[Any, Any] = {}
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
        "decays", "moments", "master_weight", "fp32_fallback", "dtype", "place",
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


def refit_plans(optimizer: Any, params: list[Any]) -> None:
    """Drop the plans of ``params`` that no longer fit them (cast to another dtype since
    they were made), fitting ``optimizer``'s state to the new dtype; refuse, naming the
    parameter and before anything changes, a cast the state cannot serve (``RuntimeError``).

    A parameter cast to float16/bfloat16 under ``multi_precision`` gets its
    float32 master weight (from its value now) and keeps its float32 moments,
    under the names an optimizer built for the cast model gives them, so that
    checkpoints load either way; a move keeps the state as it is (as
    ``paddle.optimizer.AdamW`` does).
    """
    plans = optimizer._plans
    stale = []
    for param in params:
        plan = plans.get(param.name)
        if plan is not None and not plan.fits(param):
            stale.append((param, plan))
    for param, plan in stale:
        _check_cast(optimizer, param, plan)
    for param, _ in stale:
        if uses_master(optimizer, param) and param.name not in optimizer._master_weights:
            master = optimizer._create_master_weight(param)
            _rename_accumulators(optimizer._accumulators, param.name, master.name)
        del plans[param.name]


def _check_cast(optimizer: Any, param: Any, stale: UpdatePlan) -> None:
    wants_master = uses_master(optimizer, param)
    master = optimizer._master_weights.get(param.name)
    moment_dtype = stale.moments[0].dtype
    state_dtype = paddle.float32 if optimizer._is_dtype_fp16_or_bf16(param.dtype) else param.dtype
    if moment_dtype != state_dtype or (master is not None and not wants_master):
        held = f"{moment_dtype} moments" + (" and a float32 master weight" if master is not None else "")
        raise RuntimeError(
            f"AdamWDL: parameter {param.name!r} was cast from {stale.dtype} to {param.dtype} after the "
            f"optimizer created its state ({held}), which cannot serve a {param.dtype} parameter; "
            "cast the model before building the optimizer."
        )


def _rename_accumulators(accumulators: dict[str, dict[str, Any]], old: str, new: str) -> None:
    """Key ``old``'s accumulators by ``new`` (a master weight's name), and name them so.

    Paddle keys and names the accumulators of a float16/bfloat16 parameter
    under ``multi_precision`` after its master weight
    (``<param>_fp32_master_0_moment1_0``), and a checkpoint by those names.
    """
    for per_param in accumulators.values():
        accumulator = per_param.pop(old, None)
        if accumulator is None:
            continue
        if accumulator.name.startswith(old):
            accumulator.name = new + accumulator.name[len(old):]
        per_param[new] = accumulator


def uses_master(optimizer: Any, param: Any) -> bool:
    """Whether ``optimizer`` updates ``param`` through a float32 master weight (``multi_precision``, float16/bfloat16)."""
    return optimizer._multi_precision and optimizer._is_dtype_fp16_or_bf16(param.dtype)


def _on_cpu(param: Any) -> bool:
    """Where Paddle has no half-precision ``adamw`` kernel (CPU: float32/float64 only)."""
    if framework.in_dygraph_mode():
        return param.place.is_cpu_place()
    return paddle.device.get_device() == "cpu"


# ------------------------------------------------------------ 3. beta powers and sparse gradients
def initial_beta_pow(beta: Any) -> Any:
    """The value a beta power accumulator starts at: ``beta`` itself, a dygraph
    Tensor's value, or in a program :data:`UNSET_BETA_POW` for a Tensor."""
    if not is_tensor(beta):
        return beta
    return float(beta.item()) if framework.in_dygraph_mode() else UNSET_BETA_POW


@contextlib.contextmanager
def accumulators_as_started(optimizer: Any, param: Any) -> Iterator[None]:
    """While Paddle creates ``param``'s accumulators (``_add_moments_pows``), start them
    as an uninterrupted run would: with no loaded state for a parameter the loaded
    checkpoint has none of (it was frozen then; Paddle would assert, the uninterrupted
    run starts its moments at zero), and with beta powers at a Tensor beta's value
    (:func:`initial_beta_pow`; Paddle 3.3.1 starts them at 0.9/0.999)."""
    holder, beta1, beta2 = optimizer._accumulators_holder, optimizer._beta1, optimizer._beta2
    if holder and not has_saved_state(holder, param.name):
        optimizer._accumulators_holder = {}
    optimizer._beta1, optimizer._beta2 = initial_beta_pow(beta1), initial_beta_pow(beta2)
    try:
        yield
    finally:
        optimizer._accumulators_holder, optimizer._beta1, optimizer._beta2 = holder, beta1, beta2


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
