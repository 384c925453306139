"""The update of an EMA's shadows over flat segments, one pass over memory where it can be.

:class:`~paddle_llrd.optim.ema.ExponentialMovingAverage` keeps its shadows as
views of flat buffers, laid out by :func:`flat_segments` (from the present
storage of the parameters, laid out anew when a parameter moved), and each
update runs :func:`fused_update` (the fused CPU operator, one call for every
segment) or, where that cannot run, :meth:`FlatSegment.update` per segment
(Paddle's ops, chunked over a thread pool): the same bits, those of
:func:`update_flat` per parameter.
"""
from __future__ import annotations

import functools
import operator
from typing import Any

import paddle
from paddle import _C_ops

from .buffers import alias_of_run, gathered, numel, share_flat, storage_runs
from .fused_operator import ema_update, unavailable_reason, warn_unavailable
from .threads import FlatThreads

__all__ = [
    "UPDATED_ALONE_NUMEL", "FlatSegment", "check_shadow_shape", "checked_shadows", "flat_segments", "fused_update",
    "storage", "update_flat",
]

# A parameter this large that does not share a buffer with its neighbours is
# updated in place on its own: three more ops cost less than copying it
# into a gathered tensor at every update (on one CPU core, 32 tensors of
# 8,192 elements update in 0.39 ms gathered and 1.0 ms one by one; of
# 16,384, 2.2 ms gathered and 1.5 ms one by one).
UPDATED_ALONE_NUMEL = 1 << 14
# The shadow dtypes the fused operator updates (others, assigned by a user, take Paddle's ops).
_OPERATOR_SHADOW_DTYPES = (paddle.float32, paddle.float64)


class FlatSegment:
    """Shadows that one set of ops updates: views of one flat buffer, in the
    order of a flat tensor of their parameters' values, which is either an
    alias of the range the parameters tile in a buffer of theirs (as
    AdamWDL's multi-tensor step lays them out) or gathered at each update.
    A large CPU segment is updated in contiguous chunks on a thread pool
    (:class:`~paddle_llrd.optim.threads.FlatThreads`), the same bits."""

    __slots__ = ("params", "shadow_flat", "params_alias", "bounds", "shadow_chunks", "alias_chunks", "threads")

    def __init__(self, params: list[paddle.Tensor], shadows: list[paddle.Tensor], aliased: bool,
                 threads: FlatThreads) -> None:
        self.params = params
        self.shadow_flat = share_flat(shadows)
        self.params_alias = alias_of_run(params) if aliased else None
        self.threads = threads
        self.bounds = threads.bounds(0, numel(self.shadow_flat), self.shadow_flat.place)
        self.shadow_chunks = [self.shadow_flat._slice(a, b) for a, b in self.bounds]
        self.alias_chunks = None if self.params_alias is None else [self.params_alias._slice(a, b) for a, b in self.bounds]

    def update(self, decay: float) -> None:
        """The shadows' update of :meth:`~paddle_llrd.optim.ema.ExponentialMovingAverage.update` for ``0 <= decay < 1``."""
        if len(self.bounds) == 1:
            values = self.params_alias if self.params_alias is not None else gathered(self.params)
            update_flat(self.shadow_flat, values, decay)
            return
        if self.alias_chunks is not None:
            chunks = self.alias_chunks
        else:
            values = gathered(self.params)
            chunks = [values._slice(a, b) for a, b in self.bounds]
        self.threads.run([
            functools.partial(update_flat, shadow, values, decay) for shadow, values in zip(self.shadow_chunks, chunks)
        ])


def update_flat(shadow: paddle.Tensor, values: paddle.Tensor, decay: float) -> None:
    """``shadow = d * shadow + (1 - d) * values`` in place (flat tensors, or chunks of them; on any thread)."""
    if values.dtype != shadow.dtype:
        values = _C_ops.cast(values, shadow.dtype)
    if decay == 0.0:
        _C_ops.assign_out_(values, shadow)
        return
    # d * s + (1 - d) * p without a temporary for (1 - d) * p.
    shadow.scale_(decay / (1.0 - decay))
    shadow.add_(values)
    shadow.scale_(1.0 - decay)


def fused_update(segments: list[FlatSegment], decay: float, threads: int) -> bool:
    """The update of every segment by one call of the fused operator (one pass over memory on
    ``threads`` threads, the bits of :func:`update_flat`); False where it cannot run (not
    built, a segment off the CPU), and the segments are then updated by Paddle's ops."""
    reason = unavailable_reason()
    if reason is not None:
        warn_unavailable(reason)
        return False
    if not all(segment.shadow_flat.place.is_cpu_place() and segment.shadow_flat.dtype in _OPERATOR_SHADOW_DTYPES
               for segment in segments):
        return False
    values = [segment.params_alias if segment.params_alias is not None else gathered(segment.params)
              for segment in segments]
    ema_update([segment.shadow_flat for segment in segments], values,
               [entry for index in range(len(segments)) for entry in (index, 0)], decay, threads)
    return True


def checked_shadows(params: dict[str, paddle.Tensor], shadow: dict[str, Any]) -> list[paddle.Tensor]:
    """The shadow of each of ``params`` (by name), in their order, to be laid out; a shadow
    a user assigned since must still be a floating-point Tensor of its parameter's shape
    (one of another size would put every later shadow of its buffer out of place).

    Raises:
        KeyError: ``shadow`` has no entry for a parameter.
        TypeError: a shadow is not a floating-point Tensor.
        ValueError: a shadow's shape is not its parameter's.
    """
    shadows = []
    for name, param in params.items():
        if name not in shadow:
            raise KeyError(f"ema.shadow has no entry for parameter {name!r} (register() makes one per parameter)")
        value = shadow[name]
        if not isinstance(value, paddle.Tensor) or not value.is_floating_point():
            kind = f"dtype {value.dtype}" if isinstance(value, paddle.Tensor) else type(value).__name__
            raise TypeError(f"ema.shadow[{name!r}] must be a floating-point paddle.Tensor, got {kind}")
        check_shadow_shape(f"ema.shadow[{name!r}]", value, param)
        shadows.append(value)
    return shadows


def check_shadow_shape(where: str, value: Any, param: paddle.Tensor) -> None:
    """Raise ValueError, naming ``where``, if the shadow ``value`` is not of ``param``'s shape."""
    if list(value.shape) != list(param.shape):
        raise ValueError(f"{where} has shape {list(value.shape)}, the parameter has shape {list(param.shape)}")


_DTYPE = operator.attrgetter("dtype")


def storage(tensors: list[paddle.Tensor]) -> tuple[list[int], list[Any]]:
    """Where each of ``tensors`` holds its values, and as what: its data pointer and dtype, by
    C-level passes. A segment reads its tensors there; ``paddle.assign`` of another dtype into a
    tensor changes its dtype in place, at a new pointer or at the same one."""
    return list(map(paddle.Tensor.data_ptr, tensors)), list(map(_DTYPE, tensors))


def flat_segments(params: list[paddle.Tensor], shadows: list[paddle.Tensor], threads: FlatThreads) -> list[FlatSegment]:
    """The segments for the present storage of ``params`` (their shadows are
    laid out anew, values kept): one per run of two or more parameters that
    tile a range of one buffer, or of one large parameter; the others
    gathered, one segment per (place, parameter dtype, shadow dtype)."""
    groups: dict[tuple[str, Any, str, Any], list[int]] = {}
    for index, (param, shadow) in enumerate(zip(params, shadows)):
        if numel(param) > 0:  # (an empty one has nothing to update)
            groups.setdefault((str(param.place), param.dtype, str(shadow.place), shadow.dtype), []).append(index)
    segments = []
    with paddle.no_grad():
        for indices in groups.values():
            gathered = []
            for run in storage_runs([params[i] for i in indices]):
                run = [indices[i] for i in run]
                if len(run) > 1 or numel(params[run[0]]) >= UPDATED_ALONE_NUMEL:
                    segments.append(
                        FlatSegment([params[i] for i in run], [shadows[i] for i in run], aliased=True, threads=threads)
                    )
                else:
                    gathered.extend(run)
            if gathered:
                gathered.sort()
                segments.append(
                    FlatSegment(
                        [params[i] for i in gathered], [shadows[i] for i in gathered], aliased=False, threads=threads
                    )
                )
    return segments
