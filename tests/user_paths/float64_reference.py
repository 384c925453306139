"""Float64 NumPy training of ``user_model.BertNamedLinear``, from the formulas.

The gradients are worked out by hand (``pred = sum_k x W_k + b_k``,
``L = mean((pred - y)^2)``, so ``dL/dpred = 2 (pred - y) / pred.size``,
``dL/dW_k = x^T dL/dpred`` and ``dL/db_k = sum_rows dL/dpred`` for every
part ``k``), the update is ``tests/helpers/reference_adamw.py``'s AdamW with a
per-parameter ratio on the Adam step's lr, never the code under test.
"""
from __future__ import annotations

from typing import Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from reference_adamw import AdamWState, adamw_update, clip_by_global_norm
from user_model import INIT_SCALE, N_FEATURES, N_OUTPUTS, initial_value


def parameter_names(n_layers: int) -> list:
    prefixes = ["embeddings"] + [f"encoder.layers.{i}" for i in range(n_layers)] + ["classifier"]
    return [f"{prefix}.{kind}" for prefix in prefixes for kind in ("weight", "bias")]


def llama_parameter_names(n_layers: int) -> list:
    """``user_model.LlamaNamedLinear``'s names."""
    prefixes = ["model.embed_tokens"] + [f"model.layers.{i}" for i in range(n_layers)] + ["lm_head"]
    return [f"{prefix}.{kind}" for prefix in prefixes for kind in ("weight", "bias")]


def initial_weights(n_layers: int, init_scale: float = INIT_SCALE,
                    names: Optional[Sequence[str]] = None) -> Dict[str, np.ndarray]:
    """The initial weights of ``names`` (default: ``BertNamedLinear``'s)."""
    shapes = {"weight": (N_FEATURES, N_OUTPUTS), "bias": (N_OUTPUTS,)}
    return {
        name: initial_value(name, shapes[name.rsplit(".", 1)[1]], init_scale).astype(np.float64)
        for name in (parameter_names(n_layers) if names is None else names)
    }


def gradients(params: Dict[str, np.ndarray], x: np.ndarray, y: np.ndarray) -> Dict[str, np.ndarray]:
    x = x.astype(np.float64)
    prediction = sum(x @ params[name] for name in params if name.endswith(".weight"))
    prediction = prediction + sum(params[name] for name in params if name.endswith(".bias"))
    d_prediction = 2.0 * (prediction - y) / prediction.size
    return {name: (x.T @ d_prediction if name.endswith(".weight") else d_prediction.sum(axis=0)) for name in params}


def train(
    batches: Sequence[Tuple[np.ndarray, np.ndarray]],
    lrs: Sequence[float],
    *,
    n_layers: int,
    ratio: Callable[[str], float] = lambda name: 1.0,
    lr_scale: Callable[[str], float] = lambda name: 1.0,
    weight_decay: Callable[[int, str], float] = lambda step, name: 0.0,
    clip_norm: Optional[float] = None,
    beta1: float = 0.9,
    beta2: float = 0.999,
    epsilon: float = 1e-8,
    init_scale: float = INIT_SCALE,
    names: Optional[Sequence[str]] = None,
) -> Dict[str, np.ndarray]:
    """The weights after one AdamW(DL) update per batch.

    ``lrs[step]`` is the global lr of that step; a parameter's Adam step runs
    at ``lr * lr_scale(name) * ratio(name)``, its decoupled decay at
    ``lr * lr_scale(name)`` with ``weight_decay(step, name)`` (0: not decayed).
    """
    params = initial_weights(n_layers, init_scale, names)
    states = {name: AdamWState.zeros_like(value) for name, value in params.items()}
    for step, ((x, y), lr) in enumerate(zip(batches, lrs)):
        grads = gradients(params, x, y)
        if clip_norm is not None:
            grads = clip_by_global_norm(grads, clip_norm)
        for name in params:
            params[name], states[name] = adamw_update(
                params[name], grads[name], states[name],
                lr=lr * lr_scale(name) * ratio(name), decay_lr=lr * lr_scale(name),
                coeff=weight_decay(step, name), beta1=beta1, beta2=beta2, epsilon=epsilon,
            )
    return params


def assert_trained_like(actual: Dict[str, np.ndarray], expected: Dict[str, np.ndarray], what: str,
                        n_layers: int, init_scale: float = INIT_SCALE, rtol: float = 1e-3,
                        names: Optional[Sequence[str]] = None) -> None:
    """Each parameter's change from its initial value equals the reference's
    within ``rtol`` of the largest reference change (float32 rounding of the
    weights aside)."""
    init = initial_weights(n_layers, init_scale, names)
    assert sorted(actual) == sorted(expected), (what, sorted(actual), sorted(expected))
    failures = []
    for name in expected:
        expected_change = expected[name] - init[name]
        actual_change = actual[name].astype(np.float64) - init[name]
        scale = float(np.max(np.abs(expected_change)))
        tolerance = rtol * scale + 8 * np.finfo(np.float32).eps * float(np.max(np.abs(init[name])))
        error = float(np.max(np.abs(actual_change - expected_change)))
        if not error <= tolerance:
            failures.append((name, error, tolerance))
    assert not failures, f"{what}: (parameter, |change - float64 change|, tolerance) {failures[:4]}"


def assert_differs(left: Dict[str, np.ndarray], right: Dict[str, np.ndarray], name: str, n_layers: int,
                   init_scale: float = INIT_SCALE, factor: float = 10.0, rtol: float = 1e-3,
                   names: Optional[Sequence[str]] = None) -> None:
    """``left`` and ``right`` differ at ``name`` by ``factor`` times the
    tolerance of :func:`assert_trained_like`: the check can tell them apart."""
    init = initial_weights(n_layers, init_scale, names)[name]
    scale = float(np.max(np.abs(right[name] - init)))
    difference = float(np.max(np.abs(left[name] - right[name])))
    assert difference > factor * rtol * scale, (name, difference, scale)
