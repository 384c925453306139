"""The fused operators checked against Paddle's own kernels, once, when they are loaded.

:func:`operator_mismatch` runs ``paddle_llrd_fused_adamw`` on a small
problem (three steps; decayed and undecayed segments, one with a layer
ratio; a global-norm clip written back; with and without AMSGrad) beside
Paddle's ``adamw_`` kernel on copies of the same tensors, and
``paddle_llrd_ema_update`` beside the EMA's three Paddle ops, and says what
differs; :func:`norms_mismatch` does the same for ``paddle_llrd_squared_norms``
against ``squared_l2_norm`` and ``stack(...).sum()``, over sizes that take
each branch of Eigen's reduction. Paddle's CPU kernels compute differently on different CPUs (phi's
generated AVX-512 code, or its reference loop); the operator mirrors both,
and this check makes sure the one it picked is the one Paddle runs here.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import paddle
from paddle import _C_ops


__all__ = ["norms_mismatch", "operator_mismatch"]

_SIZES = (1029, 2048, 515)
_SCALES = (1.0, 0.5, 1.0)
_DECAYS = (True, True, False)
_COEFF = 0.01
# Gradient sizes for the squared norms: each branch of Eigen's reduction (leftover
# elements only, one packet, pairs of packets and an odd one, leftovers after
# packets, and ranges cut in two, once and again, at packet boundaries).
_NORM_SIZES = (1, 7, 8, 24, 33, 1000, 8192, 8193, 20000, 70001)
# Gradients of one element each, more than one leaf of the sum over gradients.
_MANY_GRADS = 9000


def operator_mismatch(fused_adamw: Callable[..., None], ema_update: Callable[..., None]) -> str | None:
    """What the operators, called by ``fused_adamw`` and ``ema_update`` (those of
    :mod:`~paddle_llrd.optim.fused_operator`), compute otherwise than Paddle's kernels (None:
    every bit agrees)."""
    with paddle.no_grad():
        for amsgrad in (False, True):
            found = _adamw_mismatch(fused_adamw, amsgrad)
            if found is not None:
                return found
        for dtype in ("float16", "bfloat16"):
            found = _master_cast_mismatch(fused_adamw, dtype)
            if found is not None:
                return found
        return _ema_mismatch(ema_update)


def _adamw_mismatch(fused_adamw: Callable[..., None], amsgrad: bool) -> str | None:
    rng = np.random.default_rng(7)
    total = sum(_SIZES)
    start = rng.standard_normal(total).astype("float32")
    # (float32 given: a default dtype of float64 must not fail the check of float32 kernels)
    flat = [paddle.to_tensor(start)] + [paddle.zeros([total], "float32") for _ in range(3)]
    pows = [paddle.full([len(_SIZES)], 0.9, "float32"), paddle.full([len(_SIZES)], 0.999, "float32")]
    pieces, offset = [], 0
    for size in _SIZES:
        pieces.append([paddle.to_tensor(start[offset:offset + size])]
                      + [paddle.zeros([size], "float32") for _ in range(3)]
                      + [paddle.full([1], 0.9, "float32"), paddle.full([1], 0.999, "float32")])
        offset += size
    lr = paddle.full([1], 1e-3, "float32")
    layout = [1, len(_SIZES), int(amsgrad), 0, 2, 1, 0, len(_SIZES), 0]  # one bank of three parameters
    scalars = [0.9, 0.999, 1e-8, 0.0, 0.0, _COEFF]
    offset = 0
    for size, scale, decays in zip(_SIZES, _SCALES, _DECAYS):
        layout += [0, offset, offset + size, (1 if decays else 0) | 2 | 4]
        scalars += [scale, _COEFF / scale, 1.0]
        offset += size
    for step in range(3):
        grads = rng.standard_normal(total).astype("float32") * np.float32(10.0 ** (step - 1))
        clip_scale = paddle.full([1], 0.75, "float32")
        starts = np.cumsum((0,) + _SIZES)
        own_grads = [paddle.to_tensor(grads[a:b]) for a, b in zip(starts, starts[1:])]
        fused_adamw([flat[0]], own_grads, [flat[1]], [flat[2]], [flat[3] if amsgrad else flat[2]], [flat[0]],
                    [pows[0]], [pows[1]], [clip_scale], [paddle.to_tensor(starts, dtype="int64")], lr, layout, scalars)
        flat_grad = np.concatenate([grad.numpy() for grad in own_grads])
        offset = 0
        for (param, m1, m2, m2_max, b1, b2), size, scale, decays in zip(pieces, _SIZES, _SCALES, _DECAYS):
            grad = paddle.to_tensor(grads[offset:offset + size])
            grad.multiply_(clip_scale)
            if not np.array_equal(grad.numpy(), flat_grad[offset:offset + size]):
                return "the clipped gradients written into the gradients"
            kernel_lr = lr if scale == 1.0 else lr * scale
            _C_ops.adamw_(param, grad, kernel_lr, m1, m2, m2_max if amsgrad else None, b1, b2, None, None, 0.9, 0.999,
                          1e-8, 1.0, _COEFF / scale, decays, False, 1000, False, False, amsgrad)
            offset += size
    expected = np.concatenate([piece[0].numpy() for piece in pieces])
    if not np.array_equal(expected.view(np.int32), flat[0].numpy().view(np.int32)):
        return f"the parameters after three adamw steps{' with amsgrad' if amsgrad else ''}"
    if not np.array_equal(np.concatenate([piece[2].numpy() for piece in pieces]), flat[2].numpy()):
        return "the second moments"
    if not np.array_equal(pows[0].numpy(), np.full(len(_SIZES), pieces[0][4].numpy()[0])):
        return "the beta powers"
    return None


def _master_cast_mismatch(fused_adamw: Callable[..., None], dtype: str) -> str | None:
    """The float32 master weights' cast into ``dtype`` parameters, against Paddle's ``cast``
    (Paddle 3.0 rounds float16 toward zero, later versions to nearest: the operator takes
    the conversion of the installed Paddle's headers, and this makes sure it is the one
    Paddle's own build runs)."""
    rng = np.random.default_rng(13)
    size = 4096
    master = paddle.to_tensor(rng.standard_normal(size).astype("float32"))
    param = paddle.cast(master, dtype)
    grad = paddle.cast(paddle.to_tensor(rng.standard_normal(size).astype("float32")), dtype)
    moments = [paddle.zeros([size], "float32"), paddle.zeros([size], "float32")]
    pows = [paddle.full([1], 0.9, "float32"), paddle.full([1], 0.999, "float32")]
    starts = paddle.to_tensor([0, size], dtype="int64")
    layout = [1, 1, 0, 0, 1, 0, 1, 1, 0, 0, 0, size, 1]  # one bank with master weights, one decayed segment
    scalars = [0.9, 0.999, 1e-8, 0.0, 0.0, _COEFF, 1.0, _COEFF, 1.0]
    fused_adamw([param], [grad], [moments[0]], [moments[1]], [moments[1]], [master], [pows[0]], [pows[1]], [starts],
                [starts], paddle.full([1], 1e-3, "float32"), layout, scalars)
    if not np.array_equal(param.numpy().view(np.int16), paddle.cast(master, dtype).numpy().view(np.int16)):
        return f"the cast of float32 master weights into {dtype} parameters"
    return None


def _ema_mismatch(ema_update: Callable[..., None]) -> str | None:
    rng = np.random.default_rng(11)
    values = [paddle.to_tensor(rng.standard_normal(size).astype("float32")) for size in _SIZES]
    shadow = paddle.to_tensor(rng.standard_normal(sum(_SIZES)).astype("float32"))
    expected = [paddle.to_tensor(part) for part in np.split(shadow.numpy(), np.cumsum(_SIZES)[:-1])]
    spans, offset = [], 0
    for size in _SIZES:
        spans += [0, offset]
        offset += size
    for decay in (0.9, 0.0):
        ema_update([shadow], values, spans, decay, 2)
        for target, value in zip(expected, values):
            if decay == 0.0:
                _C_ops.assign_out_(value, target)
            else:
                target.scale_(decay / (1.0 - decay))
                target.add_(value)
                target.scale_(1.0 - decay)
    if not np.array_equal(np.concatenate([t.numpy() for t in expected]).view(np.int32), shadow.numpy().view(np.int32)):
        return "the EMA's shadows"
    return None


def norms_mismatch(squared_norms: Callable[..., None]) -> str | None:
    """What ``paddle_llrd_squared_norms``, called by ``squared_norms`` (that of
    :mod:`~paddle_llrd.optim.fused_operator`), computes otherwise than Paddle's
    ``squared_l2_norm`` per gradient and ``stack(...).sum()`` over them (None: every bit agrees)."""
    rng = np.random.default_rng(17)
    grads = [paddle.to_tensor((rng.standard_normal(size) * rng.uniform(0.01, 100.0)).astype("float32"))
             for size in _NORM_SIZES]
    grads += paddle.unbind(paddle.to_tensor(rng.standard_normal([_MANY_GRADS, 1]).astype("float32")))
    for count in (len(_NORM_SIZES), len(grads)):
        squares, total = paddle.empty([count], dtype="float32"), paddle.empty([], dtype="float32")
        squared_norms(grads[:count], squares, total, 2)
        expected = paddle.stack(list(map(_C_ops.squared_l2_norm, grads[:count])))
        if not np.array_equal(expected.reshape([-1]).numpy().view(np.int32), squares.numpy().view(np.int32)):
            return "the gradients' squared norms"
        if expected.sum().numpy().view(np.int32) != total.numpy().view(np.int32):
            return f"the sum of {count} squared norms"
    return None
