"""Tensor ``beta1``/``beta2`` give Adam's numbers in every execution mode.

Paddle 3.3.1's ``AdamW`` starts the beta-power accumulators at 0.9 and 0.999
whatever a Tensor beta holds, so its bias correction is that of other betas;
AdamWDL starts them at the Tensor's value. Each test runs several steps and
compares every weight with the float64 reference (tests/helpers/reference_adamw.py).
"""
from __future__ import annotations

import re
import warnings

import numpy as np
import paddle
import pytest
from paddle import nn

from reference_adamw import ReferenceAdamW
from adamwdl_runs import (
    decays_structured,
    make_adamwdl,
    name_dict_of,
    no_bias_or_norm,
    ratio_fn,
    split_parameters,
    tiny_bert,
    to_static_train_and_compare,
    train_and_compare,
    weights_of,
)

from paddle_llrd import AdamWDifferenceWarning, AdamWDL
from decay_routes import separate_decay

BETA1, BETA2 = 0.8, 0.99
# The betas as float32 Tensors hold these values; the reference uses them.
BETA1_F32, BETA2_F32 = float(np.float32(BETA1)), float(np.float32(BETA2))


@pytest.mark.parametrize("betas, as_tensors, said", [
    ((BETA1, BETA2), True, ["beta1", "beta2"]),
    ((0.9, BETA2), True, ["beta2"]),
    ((0.9, 0.999), True, []),  # where Paddle's AdamW starts a Tensor beta's power
    ((BETA1, BETA2), False, []),
])
def test_tensor_betas_whose_powers_paddles_adamw_starts_elsewhere_warn_naming_them(betas, as_tensors, said):
    """Paddle's AdamW starts a Tensor beta's power at 0.9 or 0.999: a Tensor holding another value
    gives other numbers than AdamW's, said at the first step, at the user's line."""
    model = nn.Linear(3, 2)
    beta1, beta2 = (paddle.to_tensor(beta) for beta in betas) if as_tensors else betas
    optimizer = AdamWDL(0.01, beta1=beta1, beta2=beta2, parameters=model.parameters())
    model(paddle.ones([1, 3])).sum().backward()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        optimizer.step()
    differences = [w for w in caught if issubclass(w.category, AdamWDifferenceWarning)]
    assert sorted({re.match(r"AdamWDL: (beta\d) is a Tensor", str(w.message)).group(1) for w in differences}) == said
    assert all(w.filename == __file__ for w in differences)


@pytest.mark.parametrize("general", [False, True], ids=["fused", "general"])
def test_dygraph_tensor_betas_match_the_reference(general):
    model = tiny_bert()
    names = name_dict_of(model)
    optimizer = make_adamwdl(
        model,
        general=general,
        learning_rate=0.02,
        beta1=paddle.to_tensor(BETA1),
        beta2=paddle.to_tensor(BETA2),
        weight_decay=0.1,
        layerwise_decay=0.5,
        apply_decay_param_fun=no_bias_or_norm(names),
    )
    reference = ReferenceAdamW(weights_of(model), weight_decay=0.1, beta1=BETA1_F32, beta2=BETA2_F32)
    train_and_compare(
        model, optimizer, reference, steps=4, lr_at=lambda step: 0.02,
        reference_options={"ratio": ratio_fn(0.5), "decay": decays_structured},
    )


def test_group_tensor_betas_match_the_reference():
    """A group's own Tensor betas start its parameters' powers; the other group keeps the float defaults."""
    model = tiny_bert()
    encoder, rest = split_parameters(model, ".encoder.")
    optimizer = make_adamwdl(
        model,
        learning_rate=0.02,
        parameters=[
            {"params": encoder, "beta1": paddle.to_tensor(BETA1), "beta2": paddle.to_tensor(BETA2)},
            {"params": rest},
        ],
        weight_decay=0.1,
        layerwise_decay=0.5,
    )
    in_encoder = lambda name: ".encoder." in name  # noqa: E731
    reference = ReferenceAdamW(weights_of(model), weight_decay=0.1)
    train_and_compare(
        model, optimizer, reference, steps=4, lr_at=lambda step: 0.02,
        reference_options={
            "ratio": ratio_fn(0.5),
            "beta1": lambda name: BETA1_F32 if in_encoder(name) else None,
            "beta2": lambda name: BETA2_F32 if in_encoder(name) else None,
        },
    )


def test_to_static_tensor_betas_match_the_reference():
    model = tiny_bert()
    optimizer = make_adamwdl(
        model, learning_rate=0.02, beta1=paddle.to_tensor(BETA1), beta2=paddle.to_tensor(BETA2),
        weight_decay=0.1, layerwise_decay=0.5,
    )
    reference = ReferenceAdamW(weights_of(model), weight_decay=0.1, beta1=BETA1_F32, beta2=BETA2_F32)
    to_static_train_and_compare(
        model, optimizer, reference, steps=4, lr_at=lambda step: 0.02, reference_options={"ratio": ratio_fn(0.5)}
    )


def _linear_gradients(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gradients of ``mean((x @ weight + bias) ** 2)``, in float64."""
    y = x @ weight + bias
    dy = 2.0 * y / y.size
    return x.T @ dy, dy.sum(axis=0)


@pytest.mark.parametrize("general", [False, True], ids=["fused", "general"])
@pytest.mark.parametrize("ir", ["pir", "legacy"])
def test_static_program_tensor_betas_match_the_reference(ir, general):
    """``minimize`` in a static program (without a parameter list, which a program allows)."""
    x = np.random.RandomState(0).randn(4, 3).astype("float32")
    guard = paddle.pir_utils.IrGuard() if ir == "pir" else paddle.pir_utils.OldIrGuard()
    paddle.enable_static()
    try:
        with guard:
            main, startup = paddle.static.Program(), paddle.static.Program()
            with paddle.static.program_guard(main, startup):
                data = paddle.static.data("x", [4, 3], "float32")
                linear = nn.Linear(3, 2)
                loss = (linear(data) ** 2).mean()
                optimizer = AdamWDL(
                    learning_rate=0.1,
                    beta1=paddle.full([1], BETA1, "float32"),
                    beta2=paddle.full([1], BETA2, "float32"),
                    weight_decay=0.1,
                )
                separate_decay(optimizer, general)
                optimizer.minimize(loss)
            executor = paddle.static.Executor(paddle.CPUPlace())
            executor.run(startup)
            scope = paddle.static.global_scope()
            weight_name, bias_name = linear.weight.name, linear.bias.name

            def value(name: str) -> np.ndarray:
                return np.array(scope.var(name).get_tensor())

            reference = ReferenceAdamW(
                {weight_name: value(weight_name), bias_name: value(bias_name)},
                weight_decay=0.1, beta1=BETA1_F32, beta2=BETA2_F32,
            )
            for step in range(4):
                weight_grad, bias_grad = _linear_gradients(
                    x.astype(np.float64), reference.params[weight_name], reference.params[bias_name]
                )
                executor.run(main, feed={"x": x}, fetch_list=[loss])
                reference.step({weight_name: weight_grad, bias_name: bias_grad}, 0.1)
                for name in (weight_name, bias_name):
                    np.testing.assert_allclose(
                        value(name), reference.params[name], rtol=1e-5, atol=1e-6, err_msg=f"{name} {step}"
                    )
    finally:
        paddle.disable_static()
