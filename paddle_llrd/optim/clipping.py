"""Paddle's gradient clipping, applied in place for the flat step.

:func:`clip_gradients` leaves in each gradient, bit for bit, what the dygraph
``_dygraph_clip`` of ``paddle.nn.ClipGradByGlobalNorm``, ``ClipGradByNorm``
or ``ClipGradByValue`` (Paddle 3.3.1, ``paddle/nn/clip.py``) returns for it,
but writes it into the gradient's own storage, so gradients that are views
of a flat buffer stay views. The bits agree because every value is made by
the ops Paddle calls, in its order and dtypes: each squared norm by Paddle's
own ``_squared_l2_norm``, their sums by ``stack(...).sum()`` per dtype group,
the scale by ``divide``/``maximum``/``astype`` as ``ClipGradByGlobalNorm``
does, each per-tensor clip by the ``clip_by_norm`` kernel. Only the final
elementwise op changes form (its in-place twin, or one call over a flat
buffer instead of one per gradient), and an elementwise op's result for one
element does not depend on the tensor around it.
"""
from __future__ import annotations

import functools
import math
import operator
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import paddle
from paddle import _C_ops
from paddle.nn.clip import _squared_l2_norm


_DTYPE = operator.attrgetter("dtype")
_SHAPE = operator.attrgetter("shape")
_IS_DENSE = paddle.Tensor.is_dense
# The dtypes whose squared norm Paddle takes as they are (no float32 cast).
_FULL_PRECISION = {paddle.float32, paddle.float64}

__all__ = ["FLAT_CLIP_CLASSES", "clip_gradients", "flat_clip_refusal"]

# The classes whose _dygraph_clip this module reproduces. Only these exact
# types: a subclass (fleet's HybridParallelClipGrad, a user's) may override
# _dygraph_clip, e.g. to all-reduce the norm across ranks.
FLAT_CLIP_CLASSES = (paddle.nn.ClipGradByGlobalNorm, paddle.nn.ClipGradByNorm, paddle.nn.ClipGradByValue)

_APPLIED = "the flat step applies Paddle's ClipGradByGlobalNorm, ClipGradByNorm and ClipGradByValue"

Task = Callable[[], Any]


def flat_clip_refusal(grad_clip: Any) -> str | None:
    """Why the flat step cannot apply ``grad_clip`` itself, or None where it can.

    It can for None (no clipping) and for an instance whose type is exactly
    ``paddle.nn.ClipGradByGlobalNorm``, ``ClipGradByNorm`` or
    ``ClipGradByValue``, except a ``ClipGradByGlobalNorm`` that auto-parallel
    set to all-reduce its norm (``should_comm_on_shard_dim``): the flat step
    sums this rank's norms only.

    Args:
        grad_clip: an optimizer's ``grad_clip`` (or a parameter group's).

    Returns:
        None, or the reason, naming the class.

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
    return None


def clip_gradients(
    grad_clip: Any,
    grads: Sequence[paddle.Tensor],
    need_clip: Sequence[bool],
    *,
    flat_grads: Sequence[paddle.Tensor] | None = None,
    run: Callable[[list[Task]], None] | None = None,
) -> None:
    r"""Clip the dense gradients ``grads`` in place as ``grad_clip`` would in dygraph.

    Each gradient ends up holding, bit for bit, what
    ``grad_clip(list(zip(params, grads)))`` returns for it, given
    ``need_clip[i] = getattr(params[i], "need_clip", True)``; gradient ``i``
    is left alone where ``need_clip[i] is False`` (Paddle tests ``is False``).
    With ``C`` the clipped gradients (the others take no part):

    - ``ClipGradByGlobalNorm(clip_norm, auto_skip_clip=False)``:
      :math:`g \leftarrow g \cdot \frac{clip\_norm}{\max(\|C\|_2, clip\_norm)}`,
      :math:`\|C\|_2 = \sqrt{\sum_{c \in C} \|c\|_2^2}`; with
      ``auto_skip_clip=True`` the scale is :math:`clip\_norm / \|C\|_2` and
      the gradients are left untouched unless :math:`\|C\|_2 > clip\_norm`.
    - ``ClipGradByNorm(clip_norm)``: each gradient on its own,
      :math:`g \leftarrow g \cdot clip\_norm / \|g\|_2` where
      :math:`\|g\|_2 > clip\_norm` (Paddle's ``clip_by_norm`` kernel).
    - ``ClipGradByValue(max, min)``: :math:`g \leftarrow \min(\max(g, min), max)`.

    All values (norms, the scale, each ``clip_by_norm`` result) are computed
    before the first write, so an error leaves every gradient as it was.
    ``ClipGradByNorm`` holds one new tensor per clipped gradient until the
    writes, as Paddle's (which returns new tensors) does.

    Args:
        grad_clip: None (nothing is done) or an instance that
            :func:`flat_clip_refusal` accepts.
        grads: dense eager tensors, in the order Paddle would see them (the
            optimizer's parameter order: trained parameters with a gradient).
            Order matters: the global norm sums the squared norms in it.
        need_clip: one flag per gradient, its parameter's ``need_clip``.
        flat_grads: optional flat tensors whose storage is exactly that of the
            gradients with ``need_clip`` (the flat buffers or their chunks).
            Where given, the elementwise write of ``ClipGradByGlobalNorm``
            (multiply by the scale) and ``ClipGradByValue`` (clip) runs once
            per flat tensor instead of once per gradient: the same bits.
            ``ClipGradByNorm``, whose scale is per gradient, does not use them.
        run: runs a list of independent zero-argument callables, the writes
            (one per flat tensor, else one per gradient), e.g.
            :meth:`~paddle_llrd.optim.threads.FlatThreads.run`. Default: each
            in turn on this thread.

    Raises:
        RuntimeError: not in dygraph mode.
        ValueError: ``grad_clip`` is refused by :func:`flat_clip_refusal`;
            ``need_clip`` is not as long as ``grads``; ``flat_grads`` do not
            hold as many elements of each dtype as the clipped gradients.
        TypeError: a gradient to clip, or a flat tensor, is not a dense eager
            tensor (a SelectedRows or distributed one).

    Examples:
        >>> import paddle
        >>> grads = [paddle.to_tensor([3.0, 4.0]), paddle.to_tensor([10.0])]
        >>> clip_gradients(paddle.nn.ClipGradByGlobalNorm(1.0), grads, [True, False])
        >>> grads[0].numpy().tolist(), grads[1].numpy().tolist()
        ([0.6000000238418579, 0.800000011920929], [10.0])

        With a flat buffer whose views are the gradients:

        >>> from paddle_llrd.optim.buffers import share_flat
        >>> a, b = paddle.to_tensor([[2.0, -5.0]]), paddle.to_tensor([0.5])
        >>> flat = share_flat([a, b])
        >>> clip_gradients(paddle.nn.ClipGradByValue(1.0), [a, b], [True, True], flat_grads=[flat])
        >>> a.numpy().tolist(), b.numpy().tolist()
        ([[1.0, -1.0]], [0.5])
    """
    if grad_clip is None:
        return
    refusal = flat_clip_refusal(grad_clip)
    if refusal is not None:
        raise ValueError(f"clip_gradients cannot apply {refusal}")
    if not paddle.in_dynamic_mode():
        raise RuntimeError("clip_gradients runs in dygraph mode only")
    if len(need_clip) != len(grads):
        raise ValueError(f"clip_gradients: {len(grads)} gradients but {len(need_clip)} need_clip flags")
    # `is False`, as clip.py:465/567/729 test getattr(p, 'need_clip', True);
    # the others Paddle does not look at, so neither is checked here.
    clipped_at = [index for index, flag in enumerate(need_clip) if flag is not False]
    _check_dense([grads[index] for index in clipped_at], clipped_at, "gradient")
    clipped = [grads[index] for index in clipped_at]
    if flat_grads is not None:
        flat_grads = list(flat_grads)
        _check_dense(flat_grads, range(len(flat_grads)), "flat tensor")
        _check_flat_sizes(clipped, flat_grads)
    if not clipped:  # (clip.py:768-775: all filtered out, the gradients are returned as they are)
        return
    run = _in_turn if run is None else run
    with paddle.no_grad():
        if type(grad_clip) is paddle.nn.ClipGradByGlobalNorm:
            _clip_by_global_norm(grad_clip, clipped, clipped if flat_grads is None else flat_grads, run)
        elif type(grad_clip) is paddle.nn.ClipGradByNorm:
            _clip_by_norm(grad_clip, clipped, run)
        else:
            _clip_by_value(grad_clip, clipped if flat_grads is None else flat_grads, run)


def _in_turn(tasks: list[Task]) -> None:
    for task in tasks:
        task()


def _check_dense(tensors: Sequence[Any], indices: Sequence[int], what: str) -> None:
    """Refuse what the in-place ops cannot write (clip.py:243-252 writes only
    dense or distributed tensors in place; a distributed one also needs
    Paddle's mesh handling, which this module leaves out)."""
    try:
        if all(map(_IS_DENSE, tensors)):  # (one C-level pass: this runs at every step)
            return
    except TypeError:  # something that is no Tensor: found and named below
        pass
    for index, tensor in zip(indices, tensors):
        if not isinstance(tensor, paddle.Tensor) or not tensor.is_dense():
            raise TypeError(f"clip_gradients: {what} {index} is not a dense eager tensor: {type(tensor).__name__}")


def _check_flat_sizes(clipped: Sequence[paddle.Tensor], flat_grads: Sequence[paddle.Tensor]) -> None:
    """The flat tensors must cover as many elements of each dtype as the
    clipped gradients (their storage cannot be compared cheaply; their sizes can)."""
    wanted, given = Counter(), Counter()
    # (C-level passes: this runs at every step for every gradient)
    for dtype, size in zip(map(_DTYPE, clipped), map(math.prod, map(_SHAPE, clipped))):
        wanted[dtype] += size
    for dtype, size in zip(map(_DTYPE, flat_grads), map(math.prod, map(_SHAPE, flat_grads))):
        given[dtype] += size
    if wanted != given:
        raise ValueError(
            "clip_gradients: flat_grads must hold exactly the gradients with need_clip: "
            f"elements per dtype {dict(given)}, gradients {dict(wanted)}"
        )


def _add_n(tensors: list[paddle.Tensor]) -> paddle.Tensor:
    """clip.py:777-778 (async_add_n): a stack, then one sum, in list order."""
    return paddle.stack(tensors).sum()


def _global_norm_scale(grad_clip: paddle.nn.ClipGradByGlobalNorm,
                       clipped: Sequence[paddle.Tensor]) -> paddle.Tensor | None:
    """``clip_var`` of clip.py:715-858, or None where ``auto_skip_clip`` clips nothing."""
    # clip.py:726-766: a squared norm per gradient (float16/bfloat16 ones in
    # float32 where Paddle's mp-type flag says so: its own helper decides),
    # listed by the norm's dtype; any dtype not half or single goes with float64.
    dtypes = set(map(_DTYPE, clipped))
    if dtypes <= _FULL_PRECISION:
        # No half-precision gradient: Paddle's helper would call the kernel
        # unchanged on each, at ~10 us of Python per gradient; one C-level map.
        squares = list(map(_C_ops.squared_l2_norm, clipped))
        single = squares if paddle.float64 not in dtypes else [s for s in squares if s.dtype == paddle.float32]
        double = [] if paddle.float64 not in dtypes else [s for s in squares if s.dtype == paddle.float64]
        half: list[paddle.Tensor] = []
    else:
        half, single, double = [], [], []
        for grad in clipped:
            square = _squared_l2_norm(grad)
            if square.dtype == paddle.float16 or square.dtype == paddle.bfloat16:
                half.append(square)
            elif square.dtype == paddle.float32:
                single.append(square)
            else:
                double.append(square)
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


def _clip_by_global_norm(grad_clip: paddle.nn.ClipGradByGlobalNorm, clipped: Sequence[paddle.Tensor],
                         targets: Sequence[paddle.Tensor], run: Callable[[list[Task]], None]) -> None:
    clip_var = _global_norm_scale(grad_clip, clipped)
    if clip_var is None:
        return
    # clip.py:868-872: the scale cast to each gradient's dtype; the cast is
    # deterministic, so one per dtype serves every target of that dtype.
    by_dtype: dict[Any, paddle.Tensor] = {}
    for target in targets:
        if target.dtype not in by_dtype:
            by_dtype[target.dtype] = clip_var.astype(target.dtype) if clip_var.dtype != target.dtype else clip_var
    # clip.py:906-911 multiplies in place (g.multiply_) all but a 0-D gradient,
    # which it multiplies out of place into a [1] tensor: the same value,
    # written here in place through a 0-D scale (the gradient keeps its shape).
    factors = [by_dtype[t.dtype] if t.shape else by_dtype[t.dtype].reshape([]) for t in targets]
    run([functools.partial(_C_ops.multiply_, target, factor) for target, factor in zip(targets, factors)])


def _clip_by_norm(grad_clip: paddle.nn.ClipGradByNorm, clipped: Sequence[paddle.Tensor],
                  run: Callable[[list[Task]], None]) -> None:
    # clip.py:562-573 (clip_by_norm, clip.py:43-86): the clip_by_norm
    # kernel per gradient, out of place. It has no in-place form, and its
    # norm, rounding and scale differ by device, so its own results are copied in.
    results = [_C_ops.clip_by_norm(grad, grad_clip.clip_norm) for grad in clipped]
    run([functools.partial(_C_ops.assign_out_, result, grad) for result, grad in zip(results, clipped)])


def _clip_by_value(grad_clip: paddle.nn.ClipGradByValue, targets: Sequence[paddle.Tensor],
                   run: Callable[[list[Task]], None]) -> None:
    # clip.py:460-470: paddle.clip(g, min, max), which for a float gradient and
    # float bounds is _C_ops.clip (tensor/math.py:3391); clip_ is its in-place kernel.
    run([functools.partial(_C_ops.clip_, target, grad_clip.min, grad_clip.max) for target in targets])
