"""The kernels of an AdamWDL update, for every IR: the one eager ``adamw_`` call and its graph counterpart.

:func:`adamw_kernel` (and :func:`bound_adamw_kernel`, the same call bound
to its arguments once for the multi-tensor step, which repeats it every
step) is the only place that calls ``_C_ops.adamw_`` (or ``adam_``, for
sparse gradients) in dygraph and PIR programs, with the
float32 fallback of float16/bfloat16 parameters on CPU (no half-precision
kernel there: the float32 master weight takes the step, then is cast into the
parameter). The per-parameter update (:func:`adamw_update`) and the
multi-tensor step call it alike; a legacy (non-PIR) program gets the same
operators appended to its block (:func:`legacy_adamw_op`). The separate
decay op is :func:`decoupled_decay` with the factor of :func:`decay_factor`.
"""
from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import paddle
from paddle import _C_ops, pir
from paddle.base import core, framework, unique_name
from paddle.base.framework import Variable, in_dynamic_or_pir_mode

from ..checks import optimizer_name
from .buffers import numel

__all__ = [
    "MIN_ROW_SIZE_TO_USE_MULTITHREAD", "adamw_kernel", "adamw_update", "advance_beta_pows", "bound_adamw_kernel",
    "check_kernel_inputs", "check_learning_rate_dtype", "decay_factor", "decoupled_decay", "is_tensor", "legacy_adamw_op",
    "mismatched_gradient", "start_beta_pows",
]

# Paddle's own AdamW passes the same value.
MIN_ROW_SIZE_TO_USE_MULTITHREAD = 1000

_TENSOR_TYPES = (paddle.Tensor, framework.Variable, pir.Value)


def is_tensor(value: Any) -> bool:
    """Whether ``value`` is a Paddle tensor of any IR (eager, legacy program, PIR)."""
    return isinstance(value, _TENSOR_TYPES)


def adamw_kernel(
    param: Any,
    grad: Any,
    lr: Any,
    moments: tuple[Any, ...],
    master_weight: Any,
    beta1: Any,
    beta2: Any,
    epsilon: Any,
    coeff: float | None,
    lazy_mode: bool,
    amsgrad: bool,
    fp32_fallback: bool,
    global_beta_pow: bool = False,
    found_inf: Any = None,
    adam_kernel: bool = False,
) -> None:
    r"""One kernel call: decay :math:`1 - \mathrm{lr}\cdot\mathrm{coeff}` fused in
    (``coeff`` None: no decay), then the Adam step with ``lr``, in place.

    Args:
        moments: ``(moment1, moment2, moment2_max or None, beta1_pow, beta2_pow)``.
        master_weight: the float32 copy of a float16/bfloat16 ``param``, else None.
        fp32_fallback: the master weight takes the step from the float32 cast
            of ``grad`` and is cast into ``param`` (CPU has no half-precision kernel).
        global_beta_pow: leave the beta powers alone (the caller advances them).
        found_inf: a program's AMP overflow flag (the kernel skips the update).
        adam_kernel: the ``adam`` kernel (``coeff`` must be None), for
            ``SelectedRows`` gradients, whose ``adamw`` kernel in Paddle 3.3.1
            reads its attributes wrongly; it runs with ``global_beta_pow``
            (see :func:`advance_beta_pows`).

    Examples:
        >>> import paddle
        >>> p, g = paddle.ones([2]), paddle.full([2], 0.5)
        >>> moments = (paddle.zeros([2]), paddle.zeros([2]), None,
        ...            paddle.full([1], 0.9), paddle.full([1], 0.999))
        >>> adamw_kernel(p, g, paddle.full([1], 0.1), moments, None, 0.9, 0.999, 1e-8,
        ...              coeff=0.5, lazy_mode=False, amsgrad=False, fp32_fallback=False)
        >>> [round(v, 4) for v in p.numpy().tolist()]  # 1 * (1 - 0.1 * 0.5) - 0.1
        [0.85, 0.85]
    """
    if fp32_fallback:
        kernel_param, kernel_grad, kernel_master = master_weight, _C_ops.cast(grad, paddle.float32), None
    else:
        kernel_param, kernel_grad, kernel_master = param, grad, master_weight
    if adam_kernel:
        moment1, moment2, moment2_max, beta1_pow, beta2_pow = moments
        _C_ops.adam_(
            kernel_param, kernel_grad, lr, moment1, moment2, moment2_max, beta1_pow, beta2_pow, kernel_master,
            found_inf, beta1, beta2, epsilon, lazy_mode, MIN_ROW_SIZE_TO_USE_MULTITHREAD,
            kernel_master is not None, True, amsgrad,
        )
    else:
        _C_ops.adamw_(*_adamw_arguments(
            kernel_param, kernel_grad, lr, moments, kernel_master, beta1, beta2, epsilon, coeff, lazy_mode, amsgrad,
            global_beta_pow, found_inf,
        ))
    if fp32_fallback:
        _C_ops.assign_out_(_C_ops.cast(master_weight, param.dtype), param)


def _adamw_arguments(
    param: Any, grad: Any, lr: Any, moments: tuple[Any, ...], master_weight: Any, beta1: Any, beta2: Any,
    epsilon: Any, coeff: float | None, lazy_mode: bool, amsgrad: bool, global_beta_pow: bool, found_inf: Any,
) -> tuple[Any, ...]:
    """The arguments of ``_C_ops.adamw_`` for :func:`adamw_kernel`'s (no fallback) call."""
    moment1, moment2, moment2_max, beta1_pow, beta2_pow = moments
    return (
        param, grad, lr, moment1, moment2, moment2_max, beta1_pow, beta2_pow, master_weight,
        found_inf, beta1, beta2, epsilon, 1.0, 0.0 if coeff is None else coeff, coeff is not None,
        lazy_mode, MIN_ROW_SIZE_TO_USE_MULTITHREAD, master_weight is not None, global_beta_pow, amsgrad,
    )


def bound_adamw_kernel(
    param: Any,
    grad: Any,
    lr: Any,
    moments: tuple[Any, ...],
    master_weight: Any,
    beta1: Any,
    beta2: Any,
    epsilon: Any,
    coeff: float | None,
    lazy_mode: bool,
    amsgrad: bool,
    fp32_fallback: bool,
    global_beta_pow: bool = False,
) -> Callable[[], Any]:
    """:func:`adamw_kernel` with these arguments, as a callable to call at every step.

    For a caller that makes the same call at every step on the same tensors
    (their values change, not the tensors): the arguments are put together
    once, and without the float32 fallback the callable is the kernel itself
    bound to them (no Python frame per call).

    Examples:
        >>> import paddle
        >>> p, g = paddle.ones([2]), paddle.full([2], 0.5)
        >>> moments = (paddle.zeros([2]), paddle.zeros([2]), None,
        ...            paddle.full([1], 0.9), paddle.full([1], 0.999))
        >>> lr = paddle.full([1], 0.1)
        >>> update = bound_adamw_kernel(p, g, lr, moments, None, 0.9, 0.999, 1e-8, coeff=None,
        ...                             lazy_mode=False, amsgrad=False, fp32_fallback=False)
        >>> _ = update()
        >>> [round(v, 4) for v in p.numpy().tolist()]  # 1 - 0.1
        [0.9, 0.9]
    """
    if fp32_fallback:
        return functools.partial(
            adamw_kernel, param, grad, lr, moments, master_weight, beta1, beta2, epsilon, coeff, lazy_mode,
            amsgrad, fp32_fallback, global_beta_pow,
        )
    return functools.partial(_C_ops.adamw_, *_adamw_arguments(
        param, grad, lr, moments, master_weight, beta1, beta2, epsilon, coeff, lazy_mode, amsgrad,
        global_beta_pow, None,
    ))


def adamw_update(
    block: Any, param: Any, grad: Any, lr: Any, plan: Any, settings: Any, *, coeff: float | None, adam_kernel: bool = False
) -> Any:
    """One parameter's kernel update with ``plan``'s state tensors and ``settings``
    (:class:`~paddle_llrd.optim.per_parameter.AdamSettings`): :func:`adamw_kernel`, or
    in a legacy program :func:`legacy_adamw_op`."""
    if not settings.dygraph:
        if is_tensor(settings.beta1) or is_tensor(settings.beta2):
            start_beta_pows(plan.moments[3], plan.moments[4], settings)
        if not in_dynamic_or_pir_mode():
            return legacy_adamw_op(block, param, grad, lr, plan, settings, coeff=coeff, adam_kernel=adam_kernel)
    adamw_kernel(
        param, grad, lr, plan.moments, plan.master_weight, settings.beta1_value, settings.beta2_value,
        settings.epsilon, coeff, settings.lazy_mode, settings.amsgrad, plan.fp32_fallback,
        found_inf=settings.found_inf, adam_kernel=adam_kernel,
    )
    if adam_kernel:
        advance_beta_pows(plan.moments[3], plan.moments[4], settings)
    return None


def legacy_adamw_op(
    block: Any, param: Any, grad: Any, lr: Any, plan: Any, settings: Any, *, coeff: float | None, adam_kernel: bool
) -> Any:
    """The update of :func:`adamw_update` as an ``adamw`` (or ``adam``) op of a legacy (non-PIR) program."""
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


def advance_beta_pows(beta1_pow: Any, beta2_pow: Any, settings: Any) -> None:
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


def start_beta_pows(beta1_pow: Any, beta2_pow: Any, settings: Any) -> None:
    """In a program, ``beta_pow = beta`` where a Tensor beta's power is still :data:`UNSET_BETA_POW`.

    Paddle 3.3.1's AdamW starts the powers at 0.9 and 0.999 whatever a Tensor
    beta holds, which makes the bias correction that of other betas.
    """
    for beta_pow, beta in ((beta1_pow, settings.beta1), (beta2_pow, settings.beta2)):
        if is_tensor(beta):
            beta = paddle.cast(paddle.reshape(beta, [1]), beta_pow.dtype)
            paddle.assign(paddle.where(beta_pow < 0, beta, beta_pow), output=beta_pow)


def check_learning_rate_dtype(params: Iterable[Any], lr_dtype: Any) -> None:
    """Refuse an update of ``params`` that compute in another dtype than the global learning
    rate's, before anything changes.

    Paddle's ``adamw`` kernels read the learning rate in the dtype they compute in (the
    parameter's; float32 for float16/bfloat16 parameters) and raise otherwise; the learning
    rate takes the first parameter's dtype, so ``paddle.optimizer.AdamW`` over float32 and
    float64 parameters updates those before the first of the other dtype, then raises.

    Examples:
        >>> import paddle
        >>> check_learning_rate_dtype([paddle.create_parameter([2], "float32", name="w")], paddle.float32)
        >>> check_learning_rate_dtype([paddle.create_parameter([2], "float64", name="w64")], paddle.float32)
        Traceback (most recent call last):
        ...
        ValueError: AdamWDL: parameter 'w64' is float64 but the learning rate is float32 (...
    """
    params = list(params)
    dtypes = list(map(_DTYPE, params))
    if all(map(operator.is_, dtypes, itertools.repeat(lr_dtype))):  # (Paddle's dtypes are singletons: one C pass)
        return
    expected = _computes_in(lr_dtype)
    for dtype in set(dtypes):
        if _computes_in(dtype) != expected:
            name = next(param.name for param in params if param.dtype == dtype)
            raise ValueError(
                f"{optimizer_name()}: parameter {name!r} is {_computes_in(dtype)} but the learning rate is {expected} "
                "(the dtype of the optimizer's first parameter); Paddle's adamw kernels take no other, and "
                "paddle.optimizer.AdamW would raise after updating the parameters before it: give the "
                "parameters of each dtype an optimizer of their own (nothing was updated)"
            )


_DTYPE = operator.attrgetter("dtype")
_SHAPE = operator.attrgetter("shape")


def mismatched_gradient(params: Sequence[Any], grads: Sequence[Any], *, dtypes: bool = True) -> ValueError | None:
    """The error naming the first of ``params`` whose dense gradient has another number of
    elements than it (a gradient hook that returned a slice) or, with ``dtypes``, another
    dtype; None where every gradient fits.

    An ``adamw`` kernel reads as many gradient elements as its parameter has: past the end
    of a shorter gradient, the first elements of a longer one. (Not the place: Paddle 3.0's
    places compare by identity, and the kernels refuse another place themselves.)

    Examples:
        >>> import paddle
        >>> w = paddle.create_parameter([2, 3], "float32", name="hooked")
        >>> mismatched_gradient([w], [paddle.zeros([3, 2])]) is None  # (the same elements)
        True
        >>> print(mismatched_gradient([w], [paddle.zeros([2, 2])]))
        AdamWDL: the gradient of parameter 'hooked' is paddle.float32 [2, 2], the parameter paddle.float32 [2, 3] (...
    """
    fits = list(map(operator.eq, map(_SHAPE, params), map(_SHAPE, grads)))
    if dtypes:
        fits = list(map(operator.and_, fits, map(operator.is_, map(_DTYPE, params), map(_DTYPE, grads))))
    if all(fits):  # (by C-level passes: every step takes this check)
        return None
    for param, grad in itertools.compress(zip(params, grads), map(operator.not_, fits)):
        size, grad_size = numel(param), numel(grad)
        if dtypes and grad.dtype != param.dtype:
            other, effect = "dtype", "raises: its adamw kernel takes a gradient of the parameter's dtype"
        elif size != grad_size and not grad.is_selected_rows():
            other, effect = "size", ("would read past the gradient's end" if grad_size < size
                                     else f"would update it from the gradient's first {size} elements")
        else:
            continue
        return ValueError(
            f"{optimizer_name()}: the gradient of parameter {param.name!r} is {grad.dtype} {list(grad.shape)}, the "
            f"parameter {param.dtype} {list(param.shape)} (a gradient hook that returns another {other}?); nothing was "
            f"updated (paddle.optimizer.AdamW {effect})")
    return None


def check_kernel_inputs(batches: Iterable[Any], lr_dtype: Any) -> None:
    """Refuse, before anything changes, a per-parameter update of ``batches``
    (:class:`~paddle_llrd.optim.update_batch.UpdateBatch` per group) that Paddle's kernels
    would update in part and then refuse (:func:`check_learning_rate_dtype`), or with a
    gradient of another size (:func:`mismatched_gradient`; one of another dtype is left to the
    kernels, which take a float32 ``main_grad`` of a half-precision parameter on a GPU)."""
    batches = list(batches)
    check_learning_rate_dtype((param for batch in batches for param in batch.params), lr_dtype)
    for batch in batches:
        mismatch = mismatched_gradient(batch.params, batch.grads, dtypes=False)
        if mismatch is not None:
            raise mismatch


def _computes_in(dtype: Any) -> str:
    """The dtype an ``adamw`` kernel computes a parameter of ``dtype`` in (float32 for half precision)."""
    name = str(dtype).replace("paddle.", "")
    return "float32" if name in ("float16", "bfloat16") else name
