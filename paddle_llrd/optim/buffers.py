"""Flat buffers over many tensors: the storage helpers of the multi-tensor step and the EMA.

A flat buffer holds the values of several tensors (same dtype and place) one
after the other; the tensors become views of it (:func:`share_flat`), so
that one elementwise op on the buffer updates them all. The views use
Paddle's own storage-sharing calls (those of its fused ``ParamStorage``):
``flat._slice(a, b)._share_buffer_to(t)`` then ``t.get_tensor()._set_dims(shape)``.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import paddle
from paddle import _C_ops

__all__ = ["alias_of_run", "empty_flat", "flat_copy", "gathered", "numel", "own_storage", "share_flat", "storage_runs"]

# The dtypes ``coalesce_tensor`` has kernels for on CPU and GPU alike; other
# tensors are gathered by ``concat``.
_COALESCED = (paddle.float32, paddle.float64)


def numel(tensor: Any) -> int:
    """The number of elements of ``tensor``, from its shape (no op)."""
    return int(math.prod(tensor.shape))


def flat_copy(tensors: Sequence[Any]) -> Any:
    """A new flat tensor holding the values of ``tensors`` (same dtype and place) in order, outside autograd."""
    with paddle.no_grad():
        return _C_ops.concat([_C_ops.reshape(t, [-1]) for t in tensors], 0)


def gathered(tensors: Sequence[Any]) -> Any:
    """:func:`flat_copy` by one ``coalesce_tensor`` where Paddle has the kernel (float32, float64)."""
    if tensors[0].dtype in _COALESCED:
        return _C_ops.coalesce_tensor(list(tensors), tensors[0].dtype, True, False, False, 0.0, False, 0, -1, [], [])[1]
    return flat_copy(tensors)


def empty_flat(tensors: Sequence[Any]) -> Any:
    """A new uninitialised flat tensor with room for ``tensors`` (same dtype and place), outside autograd.

    Uninitialised on purpose: the host allocator maps large buffers lazily, so
    the memory it occupies grows only as the copies into it are written (see
    :func:`share_flat`).
    """
    return _C_ops.empty([sum(numel(t) for t in tensors)], tensors[0].dtype, tensors[0].place)


def share_flat(tensors: Sequence[Any]) -> Any:
    """Make ``tensors`` (same dtype and place) views of one new flat buffer holding
    their values in order; returns the buffer. Each keeps its shape and Python object.

    One tensor at a time: each is copied into its range and re-pointed at it
    at once, which releases its own storage (unless something else holds it).
    The layout so never holds a second copy of more than one tensor besides
    the buffer's written part, rather than of every tensor at once (a
    ``concat`` of them all would).

    Examples:
        >>> import paddle
        >>> a, b = paddle.ones([2, 2]), paddle.full([3], 2.0)
        >>> flat = share_flat([a, b])
        >>> list(flat.shape), a._is_shared_buffer_with(flat)
        ([7], True)
        >>> flat.scale_(10.0).numpy().tolist()[3:], b.numpy().tolist()
        ([10.0, 20.0, 20.0, 20.0], [20.0, 20.0, 20.0])
    """
    with paddle.no_grad():
        flat = empty_flat(tensors)
        offset = 0
        for tensor in tensors:
            size, shape = numel(tensor), list(tensor.shape)
            view = flat._slice(offset, offset + size)
            _C_ops.assign_out_(_C_ops.reshape(tensor, [-1]), view)
            view._share_buffer_to(tensor)
            tensor.get_tensor()._set_dims(shape)
            offset += size
    return flat


def own_storage(tensor: Any) -> None:
    """Give ``tensor`` a buffer of its own (it leaves a flat buffer, which can then be freed)."""
    shape = list(tensor.shape)
    with paddle.no_grad():
        _C_ops.assign(tensor)._share_buffer_to(tensor)
    tensor.get_tensor()._set_dims(shape)


def alias_of_run(run: Sequence[Any]) -> Any:
    """A flat tensor over the storage that ``run`` tiles (its tensors follow each
    other in one buffer, in order): writes to it are writes to them."""
    alias = paddle.Tensor()
    run[0]._share_buffer_to(alias)  # the buffer and run[0]'s offset in it
    alias.get_tensor()._set_dims([sum(numel(t) for t in run)])
    return alias


def storage_runs(tensors: Sequence[Any]) -> list[list[int]]:
    """The positions in ``tensors`` (same dtype and place) as runs of tensors
    that follow each other in one buffer, in storage order; a tensor with a
    buffer of its own is a run of one."""
    by_buffer: dict[int, list[int]] = {}
    for index, tensor in enumerate(tensors):
        by_buffer.setdefault(tensor.data_ptr() - tensor._offset(), []).append(index)
    runs = []
    for indices in by_buffer.values():
        indices.sort(key=lambda i: tensors[i]._offset())
        run = [indices[0]]
        for index in indices[1:]:
            last, tensor = tensors[run[-1]], tensors[index]
            follows = tensor._offset() == last._offset() + numel(last) * last.element_size()
            if follows and tensor._is_shared_buffer_with(last):
                run.append(index)
            else:
                runs.append(run)
                run = [index]
        runs.append(run)
    return runs
