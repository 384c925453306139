"""The schedule formulas of docs/schedules.rst (PaddleNLP's, Hugging Face's, Megatron-LM's),
written out in float64 with the math module, and the helpers that run a
scheduler against them; shared by the scheduler, registry and table tests.

Every formula takes the peak lr first and the step ``s`` last; ``warmup`` and
``total`` are step counts.
"""
from __future__ import annotations

import contextlib
import inspect
import math

import numpy as np
import pytest

from paddle_llrd import TYPE_TO_SCHEDULER_FUNCTION, LongWarmupWarning


def warns_if_warmup_outlasts(warmup, total):
    """``pytest.warns`` the :class:`~paddle_llrd.LongWarmupWarning` when the warmup (steps or fraction) is longer
    than training."""
    if warmup_steps(warmup, total) > total:
        return pytest.warns(LongWarmupWarning)
    return contextlib.nullcontext()


def warmup_steps(warmup, total):
    """An int warmup as is, a float one as floor(warmup * total)."""
    return warmup if isinstance(warmup, int) else int(math.floor(warmup * total))


def linear(lr, warmup, total, s):
    if s < warmup:
        return lr * s / max(1, warmup)
    return lr * max(0.0, (total - s) / max(1, total - warmup))


def constant_with_warmup(lr, warmup, s):
    return lr * s / max(1, warmup) if s < warmup else lr


def cosine(lr, warmup, total, s, cycles=0.5, min_lr=0.0, hold_after_end=True):
    """``cycles`` waves down to ``min_lr``; ``hold_after_end`` keeps the value of step ``total`` afterwards."""
    if s < warmup:
        return lr * s / max(1, warmup)
    progress = (s - warmup) / max(1, total - warmup)
    if hold_after_end:
        progress = min(1.0, progress)
    wave = max(0.0, 0.5 * (1.0 + math.cos(2.0 * math.pi * cycles * progress)))
    return min_lr + (lr - min_lr) * wave


def hard_restarts(lr, warmup, total, cycles, s):
    """Hugging Face's get_cosine_with_hard_restarts_schedule_with_warmup."""
    if s < warmup:
        return lr * s / max(1, warmup)
    progress = (s - warmup) / max(1, total - warmup)
    if progress >= 1.0:
        return 0.0
    return lr * max(0.0, 0.5 * (1.0 + math.cos(math.pi * ((cycles * progress) % 1.0))))


def polynomial(lr, warmup, total, s, lr_end, power):
    if s < warmup:
        return lr * s / max(1, warmup)
    if s > total:
        return lr_end
    # max(1, .): with warmup == total PaddleNLP divides by zero at step `total`.
    remaining = 1.0 - (s - warmup) / max(1, total - warmup)
    return (lr - lr_end) * remaining**power + lr_end


def annealing(max_lr, min_lr, warmup, decay, shape, s):
    """CosineAnnealingWithWarmupDecay (``shape="cosine"``) / LinearAnnealingWithWarmupDecay (``"linear"``)."""
    if warmup > 0 and s <= warmup:
        return max_lr * s / warmup
    if s > decay:
        return min_lr
    r = (s - warmup) / (decay - warmup)
    a = 0.5 * (math.cos(math.pi * r) + 1.0) if shape == "cosine" else 1.0 - r
    return min_lr + a * (max_lr - min_lr)


def inverse_sqrt(lr, warmup, s):
    """paddlenlp.ops.optimizer.InverseSquareRootSchedule: lr * sqrt(W) / sqrt(s) after warmup."""
    return lr * s / warmup if s < warmup else lr * math.sqrt(warmup) / math.sqrt(s)


def inverse_sqrt_timescale(lr, warmup, timescale, s):
    """Hugging Face's get_inverse_sqrt_schedule with an explicit timescale."""
    if s < warmup:
        return lr * s / max(1, warmup)
    shift = timescale - warmup
    return lr / math.sqrt((s + shift) / timescale)


def wsd(lr, warmup, total, decay, style, min_ratio, s):
    """Warmup-stable-decay as documented: warmup from 0, stable, decay over the last `decay` steps, floor from T."""
    if s < warmup:
        return lr * s / max(1, warmup)
    if s < total - decay:
        return lr
    if s >= total:
        return lr * min_ratio
    r = (s - (total - decay)) / decay
    shape = {
        "linear": 1.0 - r,
        "cosine": 0.5 * (1.0 + math.cos(math.pi * r)),
        "exponential": 2.0 * 0.5**r - 1.0,
        "1-sqrt": 1.0 - math.sqrt(r),
    }[style]
    return lr * (min_ratio + (1.0 - min_ratio) * shape)


def hugging_face_wsd(lr, s, warmup, stable, decay, warmup_type="linear", decay_type="cosine", min_ratio=0.0,
                     cycles=0.5):
    """transformers' get_wsd_schedule at step ``s``: the rise from min_ratio over the warmup, the stable stage,
    the decay back to min_ratio, min_ratio afterwards; written out from its documented formula."""
    if s < warmup:
        p = s / max(1, warmup)
        if warmup_type == "linear":
            rise = p
        elif warmup_type == "cosine":
            rise = 0.5 * (1.0 - math.cos(math.pi * p))
        else:
            rise = 1.0 - math.sqrt(1.0 - p)
        return lr * max(0.0, rise * (1.0 - min_ratio) + min_ratio)
    if s < warmup + stable:
        return lr
    if s < warmup + stable + decay:
        p = (s - warmup - stable) / max(1, decay)
        if decay_type == "linear":
            left = 1.0 - p
        elif decay_type == "cosine":
            left = 0.5 * (1.0 + math.cos(math.pi * cycles * 2.0 * p))
        else:
            left = 1.0 - math.sqrt(p)
        return lr * max(0.0, left * (1.0 - min_ratio) + min_ratio)
    return lr * min_ratio


def signature_text(fn):
    """``fn``'s signature as docs/schedules.rst writes it: names and defaults, no annotations."""
    signature = inspect.signature(fn)
    plain = [parameter.replace(annotation=inspect.Parameter.empty) for parameter in signature.parameters.values()]
    return str(signature.replace(parameters=plain, return_annotation=inspect.Signature.empty))


def run(scheduler, n_steps):
    """The lr of steps 0..n_steps-1, advancing the scheduler as a training loop does."""
    values = []
    for _ in range(n_steps):
        values.append(scheduler())
        scheduler.step()
    return np.array(values, dtype=np.float64)


def expected(fn, n_steps):
    return np.array([fn(s) for s in range(n_steps)], dtype=np.float64)


def assert_run(scheduler, fn, n_steps, rtol=1e-12):
    np.testing.assert_allclose(run(scheduler, n_steps), expected(fn, n_steps), rtol=rtol, atol=1e-18)


@pytest.fixture
def restore_registry():
    """Undo whatever a test registers in TYPE_TO_SCHEDULER_FUNCTION."""
    saved = dict(TYPE_TO_SCHEDULER_FUNCTION)
    yield
    TYPE_TO_SCHEDULER_FUNCTION.clear()
    TYPE_TO_SCHEDULER_FUNCTION.update(saved)
