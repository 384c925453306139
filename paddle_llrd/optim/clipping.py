"""Paddle's gradient clipping for the flat step: its values, and its gradients where it writes them.

The flat step applies ``paddle.nn.ClipGradByGlobalNorm``, ``ClipGradByNorm``
and ``ClipGradByValue`` (Paddle 3.3.1, ``paddle/nn/clip.py``, ``_dygraph_clip``)
itself, to Paddle's own gradient tensors. :func:`group_clip`
computes what the clip computes before its elementwise op, with the ops
Paddle calls, in its order and dtypes (each squared norm by Paddle's own
``_squared_l2_norm``, their sums by ``stack(...).sum()`` per dtype group, the
scale by ``divide``/``maximum`` as ``ClipGradByGlobalNorm`` does), except
that the squared norms of float32 CPU gradients and their sum come from one
call of the fused operators' ``paddle_llrd_squared_norms``, which adds in
Eigen's order as those kernels do (where it serves: it is checked against
them first, see :mod:`~paddle_llrd.optim.fused_operator`); the
elementwise op then runs per flat range (in the fused operator, or by
:func:`kernel_gradient` with Paddle's ops), which gives the same bits
because an elementwise op's result for one element does not depend on the
tensor around it.

Where the result goes is Paddle's too: ``ClipGradByGlobalNorm`` scales each
gradient in place (``p.grad`` holds the clipped gradient after the step),
except a 0-D one, which it scales out of place; ``ClipGradByNorm`` and
``ClipGradByValue`` return new tensors and leave ``p.grad`` as it was. A
parameter with ``need_clip=False`` takes no part (Paddle tests ``is False``).
"""
from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import paddle
from paddle import _C_ops
from paddle.nn.clip import _squared_l2_norm

from . import fused_operator

__all__ = [
    "FLAT_CLIP_CLASSES", "NO_CLIP", "NORM", "SCALE", "VALUE", "GroupClip", "flat_clip_refusal", "group_clip",
    "kernel_gradient", "squared_norms",
]

_DTYPE = operator.attrgetter("dtype")
# The dtypes whose squared norm Paddle takes as they are (no float32 cast).
_FULL_PRECISION = {paddle.float32, paddle.float64}

# The classes whose _dygraph_clip the flat step reproduces. Only these exact
# types: a subclass (fleet's HybridParallelClipGrad, a user's) may override
# _dygraph_clip, e.g. to all-reduce the norm across ranks.
FLAT_CLIP_CLASSES = (paddle.nn.ClipGradByGlobalNorm, paddle.nn.ClipGradByNorm, paddle.nn.ClipGradByValue)

_APPLIED = "the flat step applies Paddle's ClipGradByGlobalNorm, ClipGradByNorm and ClipGradByValue"

# The gradient dtypes each clip's kernels take, where they do not take every float dtype
# (phi's registrations: CPU clip_by_norm float32 only, the CPU clip and squared_l2_norm
# float32/float64; GPU clip_by_norm float32/float16/bfloat16). Paddle's clip of another
# dtype raises before the step updates anything; the per-parameter path raises the same.
_CLIP_KERNEL_DTYPES = {
    (paddle.nn.ClipGradByNorm, True): {paddle.float32},
    (paddle.nn.ClipGradByValue, True): _FULL_PRECISION,
    (paddle.nn.ClipGradByGlobalNorm, True): _FULL_PRECISION,
    (paddle.nn.ClipGradByNorm, False): {paddle.float32, paddle.float16, paddle.bfloat16},
}

# What a clip does to the gradients of its group at this step (the fused operator's clip modes).
NO_CLIP, SCALE, VALUE, NORM = 0, 1, 2, 3


class GroupClip(NamedTuple):
    """One parameter group's clip at this step: ``mode`` (:data:`NO_CLIP`, :data:`SCALE`,
    :data:`VALUE`, :data:`NORM`), the global-norm ``scale`` tensor (``SCALE``), the bounds
    ``low``/``high`` (``VALUE``) and ``max_norm`` (``NORM``)."""

    mode: int
    scale: Any = None
    low: float = 0.0
    high: float = 0.0
    max_norm: float = 0.0


NONE = GroupClip(NO_CLIP)


def flat_clip_refusal(grad_clip: Any, grads: Sequence[paddle.Tensor] = ()) -> str | None:
    """Why the flat step cannot apply ``grad_clip`` to ``grads`` itself, or None where it can.

    It can for None (no clipping) and for an instance whose type is exactly
    ``paddle.nn.ClipGradByGlobalNorm``, ``ClipGradByNorm`` or
    ``ClipGradByValue``, except a ``ClipGradByGlobalNorm`` that auto-parallel
    set to all-reduce its norm (``should_comm_on_shard_dim``): the flat step
    sums this rank's norms only; and except gradients of a dtype Paddle's
    kernels of that clip lack (``ClipGradByNorm`` of float64 on CPU): Paddle's
    step raises there before it updates anything, and so does the
    per-parameter path.

    Examples:
        >>> import paddle
        >>> flat_clip_refusal(paddle.nn.ClipGradByGlobalNorm(1.0)) is None
        True
        >>> class MyClip(paddle.nn.ClipGradByNorm):
        ...     pass
        >>> print(flat_clip_refusal(MyClip(1.0)))
        gradient clipping by MyClip (the flat step applies Paddle's ClipGradByGlobalNorm, ClipGradByNorm and ClipGradByValue)
    """
    if grad_clip is None:
        return None
    name = type(grad_clip).__name__
    if type(grad_clip) not in FLAT_CLIP_CLASSES:
        return f"gradient clipping by {name} ({_APPLIED})"
    # clip.py:828-841: with this flag (and the groups auto-parallel adds) the
    # squared global norm is all-reduced over sharding/mp/fsdp groups.
    if getattr(grad_clip, "should_comm_on_shard_dim", False):
        return f"gradient clipping by {name} with should_comm_on_shard_dim (its norm is all-reduced across ranks)"
    if not grads:
        return None
    on_cpu = grads[0].place.is_cpu_place()
    taken = _CLIP_KERNEL_DTYPES.get((type(grad_clip), on_cpu))
    lacking = None if taken is None else set(map(_DTYPE, grads)) - taken
    if lacking:
        dtype = str(sorted(lacking, key=str)[0]).replace("paddle.", "")
        return f"gradient clipping by {name} of {dtype} gradients (Paddle's {'CPU' if on_cpu else 'GPU'} kernel has none)"
    return None


def group_clip(grad_clip: Any, clipped_grads: Sequence[paddle.Tensor], threads: int | None = None) -> GroupClip:
    """What ``grad_clip`` (None, or a class :func:`flat_clip_refusal` accepts) does to a group
    whose gradients with ``need_clip`` are ``clipped_grads``, in the optimizer's order (the
    global norm sums the squared norms in it): Paddle's values, computed as Paddle computes them.
    ``threads``: the gradients are on the CPU, and their squared norms may be taken by the
    fused operator on this many threads (None: by Paddle's kernels).

    Examples:
        >>> import paddle
        >>> clip = group_clip(paddle.nn.ClipGradByGlobalNorm(1.0), [paddle.to_tensor([3.0, 4.0])])
        >>> clip.mode == SCALE, round(clip.scale.item(), 4)   # 1 / max(5, 1)
        (True, 0.2)
        >>> group_clip(paddle.nn.ClipGradByValue(0.5), []).mode == VALUE
        True
    """
    if grad_clip is None or (not clipped_grads and type(grad_clip) is paddle.nn.ClipGradByGlobalNorm):
        return NONE  # (clip.py:768-775: all filtered out, the gradients are returned as they are)
    if type(grad_clip) is paddle.nn.ClipGradByValue:
        if clipped_grads:
            _check_bounds(grad_clip.min, grad_clip.max, clipped_grads)
        return GroupClip(VALUE, low=grad_clip.min, high=grad_clip.max)
    if type(grad_clip) is paddle.nn.ClipGradByNorm:
        if clipped_grads and not np.float32(grad_clip.clip_norm) > 0:  # (the kernel's float attribute)
            raise ValueError(f"ClipGradByNorm: `clip_norm` must be > 0, got {grad_clip.clip_norm}; Paddle's "
                             "clip_by_norm kernel refuses it too (no parameter was updated)")
        return GroupClip(NORM, max_norm=grad_clip.clip_norm)
    scale = _global_norm_scale(grad_clip, clipped_grads, threads)
    return NONE if scale is None else GroupClip(SCALE, scale=scale)


_AS_NUMPY = {paddle.float64: np.float64, paddle.float16: np.float16}  # (bfloat16 compared as float32)


def _check_bounds(low: Any, high: Any, clipped_grads: Sequence[paddle.Tensor]) -> None:
    """Refuse ``ClipGradByValue`` bounds that Paddle's ``clip`` kernel refuses: ``min > max`` in
    the dtype of a clipped gradient (the kernel casts them to it), before anything is updated."""
    if low <= high:  # (the casts keep the order)
        return
    as_numpy = {_AS_NUMPY.get(grad.dtype, np.float32) for grad in clipped_grads}
    if any(not np.asarray(low, dtype) <= np.asarray(high, dtype) for dtype in as_numpy):
        raise ValueError(f"ClipGradByValue: `max` ({high}) must be >= `min` ({low}); Paddle's clip kernel "
                         "refuses it too (no parameter was updated)")


def _add_n(tensors: list[paddle.Tensor]) -> paddle.Tensor:
    """clip.py:777-778 (async_add_n): a stack, then one sum, in list order."""
    return paddle.stack(tensors).sum()


def squared_norms(grads: Sequence[paddle.Tensor], threads: int | None = None) -> paddle.Tensor:
    """Each gradient's squared L2 norm as Paddle's kernel computes it, stacked (``ClipGradByNorm``'s
    ``clip_by_norm`` kernel computes the same sum; the fused operator scales from it).
    ``threads``: as :func:`group_clip`'s."""
    by_operator = _operator_norms(grads, threads)
    if by_operator is not None:
        return by_operator[0]
    return paddle.stack(list(map(_C_ops.squared_l2_norm, grads))).reshape([-1])


def _operator_norms(grads: Sequence[paddle.Tensor], threads: int | None) -> tuple[paddle.Tensor, paddle.Tensor] | None:
    """The squared norms of ``grads`` and their sum by ``paddle_llrd_squared_norms``, or None
    where it does not serve them (``threads`` None, a gradient not float32, the operator
    unavailable or unlike Paddle's kernels here, a NaN)."""
    if threads is None or not grads or fused_operator.norms_unavailable_reason() is not None:
        return None
    # (-1, which no sum of squares is, stays where a gradient is not float32: the operator
    # checks the dtypes, at a fraction of the cost of reading them here)
    squares, total = paddle.empty([len(grads)], dtype="float32"), paddle.full([], -1.0, dtype="float32")
    fused_operator.squared_norms(list(grads), squares, total, threads)
    value = total.item()
    # Of two NaN operands, an addition keeps one, and which one (so the sign bit of a NaN
    # norm) is the compiler's choice in Paddle's build: a NaN sum is left to Paddle's kernels.
    return None if value < 0 or math.isnan(value) else (squares, total)


def _squares_by_dtype(clipped: Sequence[paddle.Tensor]) -> tuple[list[Any], list[Any], list[Any]]:
    """clip.py:726-766: a squared norm per gradient by Paddle's kernels (float16/bfloat16 ones
    in float32 where Paddle's mp-type flag says so: its own helper decides), listed by the
    norm's dtype (half, single, double); any dtype not half or single goes with float64."""
    dtypes = set(map(_DTYPE, clipped))
    if dtypes <= _FULL_PRECISION:
        # No half-precision gradient: Paddle's helper would call the kernel
        # unchanged on each, at ~10 us of Python per gradient; one C-level map.
        squares = list(map(_C_ops.squared_l2_norm, clipped))
        if paddle.float64 not in dtypes:
            return [], squares, []
        return ([], [s for s in squares if s.dtype == paddle.float32],
                [s for s in squares if s.dtype == paddle.float64])
    half, single, double = [], [], []
    for grad in clipped:
        square = _squared_l2_norm(grad)
        if square.dtype == paddle.float16 or square.dtype == paddle.bfloat16:
            half.append(square)
        elif square.dtype == paddle.float32:
            single.append(square)
        else:
            double.append(square)
    return half, single, double


def _global_norm_scale(grad_clip: paddle.nn.ClipGradByGlobalNorm, clipped: Sequence[paddle.Tensor],
                       threads: int | None) -> paddle.Tensor | None:
    """``clip_var`` of clip.py:715-858, or None where ``auto_skip_clip`` clips nothing."""
    by_operator = _operator_norms(clipped, threads)
    if by_operator is not None:  # (all float32: their sum is the single list, whose sum is itself)
        half, single, double = [], [by_operator[1]], []
    else:
        half, single, double = _squares_by_dtype(clipped)
    # clip.py:780-795: each list summed on its own, cast to the sum dtype,
    # then the partial sums summed, half + single + double in that order.
    sum_dtype = "float64" if double else "float32"
    partial_sums = []
    if half:
        partial_sums.append(_add_n(half).astype(sum_dtype))
    if single:
        single_sum = _add_n(single)
        partial_sums.append(single_sum if sum_dtype == "float32" else single_sum.astype(sum_dtype))
    if double:
        partial_sums.append(_add_n(double))
    # clip.py:843-858: a 0-D norm against a [1] clip_norm of the sum dtype.
    global_norm = paddle.sqrt(_add_n(partial_sums))
    max_global_norm = paddle.full(shape=[1], dtype=sum_dtype, fill_value=grad_clip.clip_norm)
    if not grad_clip.auto_skip_clip:
        return paddle.divide(x=max_global_norm, y=paddle.maximum(x=global_norm, y=max_global_norm))
    if global_norm > max_global_norm:  # (a NaN norm compares False: left alone, as in Paddle)
        return paddle.divide(x=max_global_norm, y=global_norm)
    return None


def kernel_gradient(clip: GroupClip, grad: paddle.Tensor, *, writes: bool,
                    views: Sequence[paddle.Tensor] = ()) -> paddle.Tensor:
    """The gradient a Paddle kernel takes for the flat range ``grad`` under ``clip``, by
    Paddle's own ops: scaled in place where Paddle's clip writes it (``writes``), else a new
    tensor. ``NORM`` needs the gradient ``views`` of the parameters that tile the range
    (each clipped by its own norm).

    Examples:
        >>> import paddle
        >>> grad = paddle.to_tensor([2.0, -3.0])
        >>> kernel_gradient(GroupClip(VALUE, low=-1.0, high=1.0), grad, writes=False).numpy().tolist()
        [1.0, -1.0]
        >>> grad.numpy().tolist()   # ClipGradByValue leaves the gradient as it was
        [2.0, -3.0]
    """
    if clip.mode == SCALE:
        factor = clip.scale.astype(grad.dtype) if clip.scale.dtype != grad.dtype else clip.scale
        if writes:  # clip.py:906-911: g.multiply_(clip_input)
            return _C_ops.multiply_(grad, factor)
        return _C_ops.multiply(grad, factor)
    if clip.mode == VALUE:  # clip.py:460-470: paddle.clip, out of place
        return _C_ops.clip(grad, clip.low, clip.high)
    if clip.mode == NORM:  # clip.py:562-573: the clip_by_norm kernel per gradient, out of place
        return _C_ops.concat([_C_ops.reshape(_C_ops.clip_by_norm(view, clip.max_norm), [-1]) for view in views], 0)
    return grad
