"""One element of phi's two CPU AdamW kernels, written out from their source, each
operation rounded where the kernel rounds it (exact fractions for the fused
multiply-adds): what the fused operator must reproduce in each arithmetic.

- :func:`generated_step`: ``jit/gen/adamw.cc`` (float32, AVX-512: three fused multiply-adds);
- :func:`reference_step`: ``jit/refer/refer.h`` (moments in float32, the last line in double).

Both take and return ``(param, moment1, moment2)`` of one element at one step, with the
step's ``lr``, betas, ``eps``, weight decay ``coeff`` and beta powers ``b1p``, ``b2p``.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

__all__ = ["generated_step", "reference_step"]


def round32(value: Fraction) -> np.float32:
    """``value`` rounded to the nearest float32 (ties to even), exactly."""
    guess = np.float32(float(value))
    candidates = [guess, np.nextafter(guess, np.float32(np.inf)), np.nextafter(guess, np.float32(-np.inf))]
    return min(candidates, key=lambda c: (abs(Fraction(float(c)) - value), int(c.view(np.int32)) & 1))


def fma(a, b, c) -> np.float32:
    """``a * b + c`` rounded once to float32, as a fused multiply-add."""
    return round32(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)))


def generated_step(p, g, m1, m2, lr, beta1, beta2, eps, coeff, b1p, b2p):
    """jit/gen/adamw.cc for one element: its vmulps, vfmadd and vfnmadd, each rounded once."""
    f = np.float32
    learning_rate = f(lr) * f(np.sqrt(f(1) - b2p) / (f(1) - b1p))
    epsilon = f(eps) * f(np.sqrt(f(1) - b2p))
    decay = f(f(lr) * f(1.0)) * f(coeff)
    p = fma(-decay, p, p)
    m1 = fma(f(beta1), m1, f(f(f(1) - f(beta1)) * g))
    m2 = fma(f(beta2), m2, f(f(f(1) - f(beta2)) * f(g * g)))
    step = f(m1 / f(np.sqrt(m2) + epsilon))
    return fma(step, -learning_rate, p), m1, m2


def reference_step(p, g, m1, m2, lr, beta1, beta2, eps, coeff, b1p, b2p):
    """jit/refer/refer.h for one element: moments in float32, the last line in double."""
    f = np.float32
    learning_rate = f(lr) * f(np.sqrt(f(1) - b2p) / (f(1) - b1p))
    epsilon = f(eps) * f(np.sqrt(f(1) - b2p))
    p = f(p - f(f(f(lr) * f(1.0)) * f(coeff)) * p)
    m1 = f(f(f(beta1) * m1) + f(f(f(1) - f(beta1)) * g))
    m2 = f(f(f(beta2) * m2) + f(f(f(f(1) - f(beta2)) * g) * g))
    return f(float(p) + float(-learning_rate) * (float(m1) / (np.sqrt(float(m2)) + float(epsilon)))), m1, m2
