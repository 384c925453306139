"""A float64 NumPy reference of AdamW and AdamWDL updates, written from the
formulas (Paddle's conventions), independent of the code under test.

One update of a parameter ``p`` with gradient ``g`` at step ``t`` (``t`` counts
the updates this parameter received, starting at 1)::

    p <- p * (1 - decay_lr * coeff)                    # decoupled decay, if decayed
    m <- b1*m + (1-b1)*g ;  v <- b2*v + (1-b2)*g*g     # (amsgrad: v_max <- max(v_max, v))
    p <- p - lr * sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps*sqrt(1-b2^t))

For ``paddle.optimizer.AdamW`` ``decay_lr == lr`` (the global lr times the
parameter's ParamAttr lr). For AdamWDL ``decay_lr`` is that same lr and ``lr``
is it times the layer ratio.

With ``rows`` (lazy mode with a sparse gradient) the moments and the Adam step
touch those rows only; the decay still scales the whole parameter.

Two levels of API:

* :func:`adamw_update` -- one update of one array, returns new arrays;
* :class:`ReferenceAdamW` -- named parameters, per-parameter options, the way
  an optimizer steps them (used with ``step(grads, lr, ...)`` once per step).

:func:`layer_ratio` is the layer-wise ratio rule, :func:`clip_by_global_norm`
Paddle's ``ClipGradByGlobalNorm``.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Union

import numpy as np

__all__ = [
    "AdamWState",
    "ReferenceAdamW",
    "adamw_update",
    "clip_by_global_norm",
    "layer_ratio",
]

PerParam = Union[Any, Mapping[str, Any], Callable[[str], Any]]


@dataclasses.dataclass
class AdamWState:
    """Moments of one parameter, in float64; ``step`` is the number of updates so far."""

    moment1: np.ndarray
    moment2: np.ndarray
    moment2_max: np.ndarray
    step: int = 0

    @classmethod
    def zeros_like(cls, param: np.ndarray) -> "AdamWState":
        zeros = np.zeros(np.shape(param), dtype=np.float64)
        return cls(zeros.copy(), zeros.copy(), zeros.copy(), 0)


def adamw_update(
    param: np.ndarray,
    grad: np.ndarray,
    state: AdamWState,
    *,
    lr: float,
    decay_lr: float | None = None,
    coeff: float = 0.0,
    beta1: float = 0.9,
    beta2: float = 0.999,
    epsilon: float = 1e-8,
    rows: Iterable[int] | None = None,
    amsgrad: bool = False,
) -> tuple[np.ndarray, AdamWState]:
    """One AdamW update in float64; returns ``(new_param, new_state)``.

    ``lr`` is the learning rate of the Adam step, ``decay_lr`` (default
    ``lr``) the one of the decoupled decay ``p *= 1 - decay_lr * coeff``;
    ``coeff=0`` means no decay. ``rows``: update only these rows' moments and
    values (lazy mode); the decay still applies to every row.
    """
    p = np.array(param, dtype=np.float64)
    g = np.asarray(grad, dtype=np.float64)
    decay_lr = lr if decay_lr is None else decay_lr
    p = p * (1.0 - decay_lr * coeff)

    t = state.step + 1
    m, v, v_max = state.moment1.copy(), state.moment2.copy(), state.moment2_max.copy()
    index = slice(None) if rows is None else np.unique(np.asarray(list(rows), dtype=np.int64))
    m[index] = beta1 * m[index] + (1.0 - beta1) * g[index]
    v[index] = beta2 * v[index] + (1.0 - beta2) * g[index] * g[index]
    if amsgrad:
        v_max[index] = np.maximum(v_max[index], v[index])
        denominator_v = v_max
    else:
        denominator_v = v
    step_size = lr * math.sqrt(1.0 - beta2**t) / (1.0 - beta1**t)
    eps_hat = epsilon * math.sqrt(1.0 - beta2**t)
    p[index] = p[index] - step_size * m[index] / (np.sqrt(denominator_v[index]) + eps_hat)
    return p, AdamWState(m, v, v_max, t)


def layer_ratio(structured_name: str, decay_rate: float, n_layers: int) -> float:
    """``decay_rate**(n_layers - i)`` in encoder layer ``i``, ``decay_rate**(n_layers + 1)``
    for embeddings, else 1."""
    marker = "encoder.layers."
    if marker in structured_name:
        layer = int(structured_name.split(marker, 1)[1].split(".", 1)[0])
        return decay_rate ** (n_layers - layer)
    if "embedding" in structured_name:
        return decay_rate ** (n_layers + 1)
    return 1.0


def clip_by_global_norm(grads: Mapping[str, np.ndarray], clip_norm: float) -> dict[str, np.ndarray]:
    """``g * clip_norm / max(global_norm, clip_norm)`` for every gradient."""
    global_norm = math.sqrt(sum(float(np.sum(np.asarray(g, np.float64) ** 2)) for g in grads.values()))
    scale = clip_norm / max(global_norm, clip_norm)
    return {name: np.asarray(g, np.float64) * scale for name, g in grads.items()}


def _for(option: PerParam, name: str) -> Any:
    if callable(option):
        return option(name)
    if isinstance(option, Mapping):
        return option[name]
    return option


class ReferenceAdamW:
    """Float64 model of AdamW / AdamWDL over named parameters.

    Every per-parameter option of :meth:`step` is a single value, a mapping
    from name to value, or a function of the name.

    Example::

        ref = ReferenceAdamW({"w": w0}, weight_decay=0.1)
        ref.step({"w": g}, lr=0.01, ratio=0.5)       # AdamWDL, ratio 0.5
        ref.params["w"]
    """

    def __init__(
        self,
        params: Mapping[str, np.ndarray],
        *,
        weight_decay: float = 0.01,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        amsgrad: bool = False,
    ) -> None:
        self.params = {name: np.array(value, dtype=np.float64) for name, value in params.items()}
        self.state = {name: AdamWState.zeros_like(value) for name, value in self.params.items()}
        self.weight_decay = weight_decay
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.amsgrad = amsgrad

    def step(
        self,
        grads: Mapping[str, np.ndarray],
        lr: float,
        *,
        ratio: PerParam = 1.0,
        lr_scale: PerParam = 1.0,
        decay: PerParam = True,
        weight_decay: PerParam = None,
        beta1: PerParam = None,
        beta2: PerParam = None,
        epsilon: PerParam = None,
        rows: PerParam = None,
    ) -> dict[str, np.ndarray]:
        """Update every parameter that has a gradient in ``grads``.

        ``lr``: the global learning rate; ``lr_scale``: the ParamAttr (or group)
        lr factor; ``ratio``: the layer ratio (Adam step only); ``decay``: whether
        the parameter is decayed; ``weight_decay``/``beta1``/``beta2``/``epsilon``
        override the constructor's values; ``rows``: lazy-mode rows or None.
        """
        for name, grad in grads.items():
            scale = float(_for(lr_scale, name))
            coeff = _for(weight_decay, name)
            coeff = self.weight_decay if coeff is None else coeff
            options = {
                key: (default if _for(value, name) is None else _for(value, name))
                for key, value, default in (
                    ("beta1", beta1, self.beta1),
                    ("beta2", beta2, self.beta2),
                    ("epsilon", epsilon, self.epsilon),
                )
            }
            self.params[name], self.state[name] = adamw_update(
                self.params[name],
                grad,
                self.state[name],
                lr=lr * scale * float(_for(ratio, name)),
                decay_lr=lr * scale,
                coeff=float(coeff) if _for(decay, name) else 0.0,
                rows=_for(rows, name),
                amsgrad=self.amsgrad,
                **options,
            )
        return self.params
