"""AdamW's ``clear_grad``, with the large CPU gradients zeroed in one call of the operators.

Paddle's ``clear_gradient(True)`` does two things to a parameter's gradient: it
writes zeros into it (``set_constant``, one core, plain stores), and it marks
the parameter's gradient accumulation empty, so that the next backward
replaces the buffer instead of adding into it (the gradient's data pointer
changes, and a gradient of -0.0 keeps its sign). :func:`clear_gradients` leaves
every gradient exactly so, in less time:

- the large CPU gradients (at least the crossover of the step's threads) are
  zeroed by one call of the operators' ``paddle_llrd_zero_fill``, on all the
  step's threads, with streaming stores (a plain store first reads the line it
  writes: 438 MB of BERT-base's gradients took Paddle 58 ms on one core, the
  operator 24 ms on one thread and 13 ms on two); Paddle's own
  ``clear_gradient(True)`` then marks each, called while the gradient has
  no elements (``DenseTensor._set_dims``, as Paddle's fused-buffer helpers
  resize their tensors), so that it has nothing left to zero;
- the rest are cleared by Paddle's ``clear_gradient``, one at a time.

Where the operators are not there, or the mark does not behave as described
on this Paddle (:func:`marking_unavailable_reason`, found once per process),
Paddle zeroes the large gradients itself, shared among the threads.
"""
from __future__ import annotations

import functools
import math
import operator
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import paddle

from .fused_operator import unavailable_reason, zero_gradients
from .threads import FlatThreads, is_cpu_place

__all__ = ["clear_gradients", "large_parameters", "marking_unavailable_reason"]

_SHAPE = operator.attrgetter("shape")
_GRAD_OF = paddle.Tensor._grad_ivar
_ZEROED_DTYPES = (paddle.float32, paddle.float64, paddle.float16, paddle.bfloat16)  # (zero: every bit clear)
_marking: dict[str, Any] = {"checked": False, "reason": None}
_marking_lock = threading.Lock()


def clear_gradients(params: Sequence[Any], set_to_zero: bool, threads: FlatThreads | None = None,
                    large: Sequence[Any] | None = None) -> None:
    """``p.clear_gradient(set_to_zero)`` for each of ``params``, the call Paddle's optimizers
    make in ``clear_grad``, with its result: where it zeroes and ``threads`` are given, the
    CPU gradients of at least their crossover are zeroed by the operators and marked by
    Paddle (see the module), or, without the operators, shared among the threads.

    ``large``: the parameters of at least the crossover, largest first, where the caller
    knows them (a flat layout's :attr:`~paddle_llrd.optim.multi_tensor.FlatLayout.large_params`);
    those not among ``params`` are passed over. Which way a gradient is zeroed changes no
    value, so a stale list costs time only; None: found from the shapes of ``params``, a
    pass that takes 0.6 ms over 1,537 parameters.

    Examples:
        >>> import paddle
        >>> params = [paddle.create_parameter(shape, "float32") for shape in ([512, 512], [512, 512], [512])]
        >>> sum(p.sum() for p in params).backward()
        >>> clear_gradients(params, True, FlatThreads(2))  # (both weights zeroed together)
        >>> [float(p.grad.abs().max()) for p in params]
        [0.0, 0.0, 0.0]
    """
    clear = operator.methodcaller("clear_gradient", set_to_zero)
    if not set_to_zero or threads is None:
        large = []
    elif large is None:
        large = large_parameters(params, map(math.prod, map(_SHAPE, params)), threads.min_chunk_numel)
    elif large:
        listed = set(map(id, params))
        large = [param for param in large if id(param) in listed and is_cpu_place(param.place)]
    if large and unavailable_reason() is None and marking_unavailable_reason() is None:
        zeroed = _zero_and_mark(large, threads.count)
        _clear_each(clear, [param for param in params if id(param) not in zeroed])
    elif threads is not None and threads.count > 1 and len(large) > 1:
        shared = set(map(id, large))
        threads.run([functools.partial(clear, param) for param in large]
                    + [functools.partial(_clear_each, clear, [param for param in params if id(param) not in shared])])
    else:
        _clear_each(clear, params)


def large_parameters(params: Sequence[Any], sizes: Iterable[int], min_numel: int) -> list[Any]:
    """The CPU parameters of ``params`` with at least ``min_numel`` elements (``sizes``, in
    their order), largest first: those whose gradients :func:`clear_gradients` zeroes
    by the operators (or shares among the threads).

    Examples:
        >>> import paddle
        >>> params = [paddle.zeros([4]), paddle.zeros([9]), paddle.zeros([2])]
        >>> [list(p.shape) for p in large_parameters(params, [4, 9, 2], min_numel=3)]
        [[9], [4]]
    """
    sized = [(size, index) for index, size in enumerate(sizes) if size >= min_numel]
    return [params[index] for _, index in sorted(sized, reverse=True) if is_cpu_place(params[index].place)]


def marking_unavailable_reason() -> str | None:
    """Why Paddle's ``clear_gradient(True)`` cannot mark a gradient zeroed by the operators
    on this Paddle (None: it can), found once per process on a two-element tensor: called
    while the gradient has no elements, it must keep its buffer and values, and the next
    backward must replace them rather than add into them."""
    if not _marking["checked"]:
        with _marking_lock:
            if not _marking["checked"]:
                try:
                    _marking["reason"] = _marking_mismatch()
                except Exception as error:  # (a Paddle without the calls: its own clear_gradient zeroes)
                    _marking["reason"] = f"its check failed: {type(error).__name__}: {error}"
                _marking["checked"] = True
    return _marking["reason"]


def _marking_mismatch() -> str | None:
    with paddle.enable_grad():
        leaf = paddle.to_tensor([1.0, 2.0], dtype="float32", place=paddle.CPUPlace(), stop_gradient=False)
        (leaf * 3.0).sum().backward()
        grad = _GRAD_OF(leaf)
        pointer = grad.data_ptr()
        _mark_cleared(leaf, grad)  # (not zeroed: the values show what the mark wrote and what the backward adds)
        if list(grad.shape) != [2] or grad.data_ptr() != pointer or grad.numpy().tolist() != [3.0, 3.0]:
            return "clear_gradient changed a gradient with no elements"
        (leaf * 5.0).sum().backward()
        if _GRAD_OF(leaf).numpy().tolist() != [5.0, 5.0]:
            return "the backward after clear_gradient added into the gradient instead of replacing it"
    return None


def _zero_and_mark(params: list[Any], threads: int) -> set[int]:
    """Zero the gradients of ``params`` that the operator can (dense, contiguous, floating
    point, on the CPU) in one call, and mark them; the ids of the parameters done."""
    done = [(param, grad) for param, grad in zip(params, map(_GRAD_OF, params)) if _zeroable(grad)]
    if done:
        zero_gradients([grad for _, grad in done], threads)
        for param, grad in done:
            _mark_cleared(param, grad)
    return {id(param) for param, _ in done}


def _zeroable(grad: Any) -> bool:
    # (a strided gradient would reach the operator as a contiguous copy: Paddle clears those)
    return (grad is not None and grad._is_initialized() and grad.is_dense() and grad.dtype in _ZEROED_DTYPES
            and grad.is_contiguous() and is_cpu_place(grad.place))


def _mark_cleared(param: Any, grad: Any) -> None:
    """Paddle's ``clear_gradient(True)`` of ``param`` with its gradient ``grad`` (already
    zero) resized to no elements for the call: the mark without the zeroing."""
    dense = grad.get_tensor()
    shape = list(grad.shape)
    dense._set_dims([0])
    try:
        param.clear_gradient(True)
    finally:
        dense._set_dims(shape)


def _clear_each(clear: Callable[[Any], Any], params: list[Any]) -> None:
    for _ in map(clear, params):
        pass
