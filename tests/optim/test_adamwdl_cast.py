"""Parameters cast to another dtype after a step get a new update plan (docs/adamwdl.rst).

A model cast to float16/bfloat16 after some steps, with ``multi_precision``,
trains on: each parameter gets a float32 master weight (from its value after
the cast) and keeps its moments, so the run follows a float64 reference of
AdamW that rounds the weights at the cast; on CPU the float32 kernel updates
the master weight and casts it into the parameter (the package's fallback).
Its checkpoint loads into an optimizer built for the cast model and resumes
the same run. A cast the optimizer state cannot serve is a ``RuntimeError``
naming the parameter, raised before any parameter changes. (Without
``multi_precision`` the state after a cast is what ``paddle.optimizer.AdamW``
uses too: the same moments, no master weight.)
"""
from __future__ import annotations

import numpy as np
import paddle
import pytest

from paddle_llrd import AdamWDL

LR, WEIGHT_DECAY, BETA1, BETA2, EPSILON = 0.01, 0.1, 0.9, 0.999, 1e-8
BEFORE_CAST, AFTER_CAST = 2, 3


def _model() -> paddle.nn.Layer:
    paddle.seed(5)
    return paddle.nn.Sequential(paddle.nn.Linear(4, 3), paddle.nn.Linear(3, 2))


def _gradients(model: paddle.nn.Layer, step: int) -> dict[str, np.ndarray]:
    """Fixed gradients for ``step`` by parameter name (the loss is ``sum(p * G)``)."""
    rng = np.random.RandomState(100 + step)
    return {name: rng.randn(*p.shape).astype("float32") for name, p in model.named_parameters()}


def _step(model: paddle.nn.Layer, optimizer: AdamWDL, grads: dict[str, np.ndarray]) -> None:
    params = dict(model.named_parameters())
    paddle.add_n([(params[n].astype("float32") * paddle.to_tensor(g)).sum() for n, g in grads.items()]).backward()
    optimizer.step()
    optimizer.clear_grad()


def _reference_step(state: dict, grads: dict[str, np.ndarray], t: int) -> None:
    """Float64 AdamW (decay ``1 - lr*wd``, then the bias-corrected Adam step), in place."""
    for name, g in grads.items():
        p, m, v = state[name]
        p = p * (1 - LR * WEIGHT_DECAY)
        m = BETA1 * m + (1 - BETA1) * g
        v = BETA2 * v + (1 - BETA2) * g * g
        p = p - LR * np.sqrt(1 - BETA2**t) / (1 - BETA1**t) * m / (np.sqrt(v) + EPSILON * np.sqrt(1 - BETA2**t))
        state[name] = (p, m, v)


def _half(values: np.ndarray, dtype: str) -> np.ndarray:
    """``values`` rounded to ``dtype`` as Paddle rounds (float64 out)."""
    return paddle.to_tensor(values.astype("float32")).astype(dtype).astype("float32").numpy().astype("float64")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_model_cast_after_steps_trains_on_float32_master_weights(dtype):
    model = _model()
    optimizer = AdamWDL(LR, parameters=model.parameters(), weight_decay=WEIGHT_DECAY, multi_precision=True)
    state = {n: (p.numpy().astype("float64"), 0.0, 0.0) for n, p in model.named_parameters()}
    for t in range(1, BEFORE_CAST + 1):
        grads = _gradients(model, t)
        _step(model, optimizer, grads)
        _reference_step(state, {n: g.astype("float64") for n, g in grads.items()}, t)

    model.to(dtype=dtype)
    # the master weights start from the cast weights: the reference rounds there too
    state = {n: (_half(p, dtype), m, v) for n, (p, m, v) in state.items()}
    for t in range(BEFORE_CAST + 1, BEFORE_CAST + AFTER_CAST + 1):
        grads = _gradients(model, t)
        _step(model, optimizer, grads)
        _reference_step(state, {n: _half(g, dtype) for n, g in grads.items()}, t)

    for name, param in model.named_parameters():
        assert param.dtype == getattr(paddle, dtype)
        master = optimizer._master_weights[param.name]
        assert master.dtype == paddle.float32
        np.testing.assert_allclose(master.numpy(), state[name][0], rtol=1e-5, atol=1e-6, err_msg=name)
        np.testing.assert_array_equal(  # the parameter is its master weight, rounded
            param.astype("float32").numpy(), master.astype(dtype).astype("float32").numpy(), err_msg=name
        )


def test_the_checkpoint_of_a_cast_model_resumes_in_an_optimizer_built_for_it(tmp_path):
    def fresh(cast_first: bool) -> tuple[paddle.nn.Layer, AdamWDL]:
        model = _model()
        if cast_first:
            model.to(dtype="float16")
        return model, AdamWDL(LR, parameters=model.parameters(), weight_decay=WEIGHT_DECAY, multi_precision=True)

    with paddle.utils.unique_name.guard():  # each run names its accumulators alike
        model, optimizer = fresh(cast_first=False)
        _step(model, optimizer, _gradients(model, 1))
        model.to(dtype="float16")
        _step(model, optimizer, _gradients(model, 2))
        paddle.save(model.state_dict(), str(tmp_path / "model.pdparams"))
        paddle.save(optimizer.state_dict(), str(tmp_path / "opt.pdopt"))
        saved_keys = set(optimizer.state_dict())
        for t in (3, 4):
            _step(model, optimizer, _gradients(model, t))
        uninterrupted = {n: p.astype("float32").numpy() for n, p in model.named_parameters()}
        uninterrupted_masters = {n: optimizer._master_weights[p.name].numpy() for n, p in model.named_parameters()}

    with paddle.utils.unique_name.guard():
        model, optimizer = fresh(cast_first=True)
        _step(model, optimizer, _gradients(model, 1))
        assert saved_keys == set(optimizer.state_dict())  # the names of an optimizer built for float16

    with paddle.utils.unique_name.guard():
        model, optimizer = fresh(cast_first=True)
        model.set_state_dict(paddle.load(str(tmp_path / "model.pdparams")))
        optimizer.set_state_dict(paddle.load(str(tmp_path / "opt.pdopt")))
        for t in (3, 4):
            _step(model, optimizer, _gradients(model, t))
        for name, param in model.named_parameters():
            np.testing.assert_array_equal(param.astype("float32").numpy(), uninterrupted[name], err_msg=name)
            np.testing.assert_array_equal(
                optimizer._master_weights[param.name].numpy(), uninterrupted_masters[name], err_msg=name
            )


@pytest.mark.parametrize(
    ("start", "cast", "match"),
    [
        ("float32", "float64", r"'linear_\d+\.w_0' was cast from paddle.float32 to paddle.float64 .*float32 moments\)"),
        ("float16", "float32", r"'linear_\d+\.w_0' was cast from float16 or bfloat16 to paddle.float32 .*a float32 master weight"),
    ],
    ids=["float32-to-float64", "float16-to-float32"],
)
def test_a_cast_the_state_cannot_serve_is_refused_before_anything_changes(start, cast, match):
    model = _model()
    model.to(dtype=start)
    optimizer = AdamWDL(LR, parameters=model.parameters(), weight_decay=WEIGHT_DECAY, multi_precision=True)
    _step(model, optimizer, _gradients(model, 1))
    model.to(dtype=cast)
    before = {n: p.numpy().copy() for n, p in model.named_parameters()}
    state = {k: v.numpy().copy() for k, v in optimizer.state_dict().items() if isinstance(v, paddle.Tensor)}
    with pytest.raises(RuntimeError, match=match):
        _step(model, optimizer, _gradients(model, 2))
    for name, param in model.named_parameters():
        np.testing.assert_array_equal(param.numpy(), before[name], err_msg=name)
    for key, value in optimizer.state_dict().items():
        if key in state:
            np.testing.assert_array_equal(value.numpy(), state[key], err_msg=key)
