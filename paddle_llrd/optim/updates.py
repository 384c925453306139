"""AdamWDL's update paths as plain functions, one per path, for every IR.

* :func:`adamw_update`: the ``adamw`` kernel, with its decay fused in or off,
  and the ``adam`` kernel for sparse (``SelectedRows``) gradients; with a
  float32 fallback for float16/bfloat16 parameters on CPU (no half-precision
  kernel there): the master weight is updated and cast into the parameter;
* :func:`decoupled_decay`: the separate decay op, ``target *= factor``;
* :func:`densify`: a sparse gradient as a dense one (non-lazy mode), and
  :func:`is_static_sparse`, whether a program's gradient is sparse;
* :func:`advance_beta_pows`: the beta powers after a sparse ``adam`` update.

Dygraph and PIR programs call ``_C_ops``; a legacy (non-PIR) program gets the
same operators appended to its block. The optimizer passes what a function
needs: the parameter's :class:`~paddle_llrd.optim.plan.UpdatePlan` and an
:class:`AdamSettings` of its group.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import paddle
from paddle import _C_ops, pir
from paddle.base import core, framework, unique_name
from paddle.base.framework import Variable, in_dynamic_or_pir_mode

from .ratios import is_tensor
from .plan import UpdatePlan

# Paddle's own AdamW passes the same value.
MIN_ROW_SIZE_TO_USE_MULTITHREAD = 1000
# The initial beta power of a program whose beta is a Tensor: its value is
# known only when the program runs, so the first update sets the power to it
# (see start_beta_pows). A power is in (0, 1] otherwise.
UNSET_BETA_POW = -1.0


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
