"""The multi-tensor step by Paddle's own kernels: where the fused operator does not serve a bank.

:func:`paddle_kernels_update` updates one bank of a
:class:`~paddle_llrd.optim.multi_tensor.FlatLayout` as the per-parameter path
would, one ``adamw_`` call per segment (split into chunks run on the thread
pool on CPU, :mod:`~paddle_llrd.optim.threads`): the separate decay op where
the segment's route says so; the clip by Paddle's own ops, written into the
gradients only where Paddle's clip writes it
(:func:`~paddle_llrd.optim.clipping.kernel_gradient`); the segment's
gradients gathered into one tensor the kernel reads; the kernel; then the
beta powers. GPU banks, and every bank where the operator is not built, take
this path.
"""
from __future__ import annotations

import functools
from typing import Any

import paddle
from paddle import _C_ops

from .clipping import NO_CLIP, SCALE, GroupClip, kernel_gradient
from .kernels import adamw_kernel, decay_factor, decoupled_decay

__all__ = ["paddle_kernels_update"]


class _LrTable:
    """The kernel lrs of one parameter group: ``global lr * update scale`` for each distinct
    scale, by one in-place multiply into a buffer whose ``[1]`` slices the kernels read
    (bit-identical to ``global_lr * scale``)."""

    def __init__(self, scales: list[float], global_lr: Any) -> None:
        self.index = {scale: i for i, scale in enumerate(scales)}
        self.scales = paddle.to_tensor(scales, dtype=global_lr.dtype, place=global_lr.place)
        self.values = _C_ops.assign(self.scales)
        self.slices = [self.values._slice(i, i + 1) for i in range(len(scales))]

    def refresh(self, global_lr: Any) -> _LrTable:
        _C_ops.assign_out_(self.scales, self.values)
        _C_ops.multiply_(self.values, global_lr)
        return self


def _layout_lrs(layout: Any, group: int, global_lr: Any) -> _LrTable:
    """The group's :class:`_LrTable`, made once per layout and refreshed at each step."""
    table = layout.lr_tables.get(group)
    if table is None:
        scales = sorted({segment.update_scale for bank in layout.banks_of(group) for segment in bank.segments})
        table = layout.lr_tables[group] = _LrTable(scales, global_lr)
    return table.refresh(global_lr)


def _chunks(bank: Any, layout: Any) -> list[list[tuple[int, int, tuple[Any, ...]]]]:
    """Per segment, its chunks ``(start, stop, (param, moments..., master))`` as views, made once."""
    if bank.chunks is None:
        flats = (bank.param_flat, bank.moment1, bank.moment2, bank.moment2_max, bank.master_flat)
        bank.chunks = [
            [(a, b, tuple(None if flat is None else flat._slice(a, b) for flat in flats))
             for a, b in layout.threads.bounds(segment.start, segment.stop, bank.param_flat.place)]
            for segment in bank.segments
        ]
    return bank.chunks


def _segment_gradient(segment: Any, grads: list[Any], clip: GroupClip) -> Any:
    """The segment's gradients as the one flat tensor its kernels read, clipped as Paddle clips
    them (written into the gradients themselves only where Paddle's clip writes them)."""
    clipped = segment.need_clip and clip.mode != NO_CLIP
    if clipped and clip.mode == SCALE and not segment.zero_dim:
        grads = [kernel_gradient(clip, grad, writes=True) for grad in grads]
        clipped = False
    flat = _C_ops.reshape(grads[0], [-1]) if len(grads) == 1 else _C_ops.concat(
        [_C_ops.reshape(grad, [-1]) for grad in grads], 0)
    return kernel_gradient(clip, flat, writes=False, views=grads) if clipped else flat


def paddle_kernels_update(layout: Any, bank: Any, grads: list[Any], settings: Any, clip: GroupClip,
                          global_lr: Any, routes: list[Any]) -> None:
    """One step of ``bank`` of ``layout`` (its parameters' ``grads``) by Paddle's kernels, each
    segment by its decay ``route``: the separate decay op where it says so, then ``adamw_``
    per chunk (on the thread pool where a segment is split), then the beta powers advance."""
    lrs = _layout_lrs(layout, bank.group, global_lr)
    target = bank.master_flat if bank.master else bank.param_flat
    calls = []
    pows = (bank.beta1_pows._slice(0, 1), bank.beta2_pows._slice(0, 1))
    for segment, members, route, chunks in zip(bank.segments, bank.segment_params, routes, _chunks(bank, layout)):
        grad = _segment_gradient(segment, grads[members], clip)
        if route.separate_decay_scale is not None:  # as the per-parameter path: before the kernel
            scale = route.separate_decay_scale
            lr = global_lr if scale == 1.0 else global_lr * scale  # (ParameterPass.lr's tensor)
            decoupled_decay(None, target._slice(segment.start, segment.stop), decay_factor(lr, settings.coeff, None))
        lr = lrs.slices[lrs.index[segment.update_scale]]
        for start, stop, (param, moment1, moment2, moment2_max, master) in chunks:
            calls.append(functools.partial(
                adamw_kernel, param, grad._slice(start - segment.start, stop - segment.start), lr,
                (moment1, moment2, moment2_max, *pows), master, settings.beta1_value, settings.beta2_value,
                settings.epsilon, route.fused_coeff, settings.lazy_mode, settings.amsgrad, bank.fp32_fallback, True,
            ))
    # (each call touches only its own chunk's views, the decays above ran first: any thread, any order)
    if any(len(chunks) > 1 for chunks in bank.chunks):
        layout.threads.run(calls)
    else:  # (small calls: handing them to the pool costs more than it saves)
        for call in calls:
            call()
    # What the kernel does to one parameter's powers (use_global_beta_pow=False), for all.
    _C_ops.scale_(bank.beta1_pows, float(settings.beta1_value), 0.0, True)
    _C_ops.scale_(bank.beta2_pows, float(settings.beta2_value), 0.0, True)
