"""AdamWDL's inputs: values refused with an error naming the argument, values
still accepted, and Tensor betas, which must give Adam's float64 numbers.

PyTorch's AdamW refuses a NaN, infinite or negative learning rate or weight
decay with a ``ValueError``; AdamWDL does the same for a float
``learning_rate`` (a scheduler's values are checked where it is built) and a
float or Tensor ``weight_decay``, also inside parameter groups, before anything
is built. ``parameters=None`` in dygraph is a ``TypeError`` that says what to
pass. ``beta1``/``beta2`` given as Tensors follow the Adam formula with the
Tensors' values (Paddle 3.3.1's own AdamW starts its beta powers at
0.9/0.999 whatever the Tensors hold).
"""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import paddle
import pytest
from paddle import nn

from paddle_llrd import AdamWDifferenceWarning, AdamWDL, LinearDecayWithWarmup
from reference_adamw import ReferenceAdamW, layer_ratio
from adamwdl_runs import N_LAYERS, bert_like, name_dict_of, train_and_compare, weights_of

NOT_FINITE_OR_NEGATIVE = [math.nan, math.inf, -math.inf, -0.01]
NOT_FINITE_IDS = ["nan", "inf", "-inf", "negative"]


def _linear() -> nn.Linear:
    paddle.seed(1)
    return nn.Linear(3, 2)


def _groups(linear: nn.Linear, **first_group: Any) -> list[dict[str, Any]]:
    return [{"params": [linear.weight], **first_group}, {"params": [linear.bias]}]


# ------------------------------------------------------------- refused
@pytest.mark.parametrize("value", NOT_FINITE_OR_NEGATIVE, ids=NOT_FINITE_IDS)
def test_learning_rate_not_finite_or_negative_is_a_value_error(value):
    with pytest.raises(ValueError, match="learning_rate"):
        AdamWDL(learning_rate=value, parameters=_linear().parameters())


@pytest.mark.parametrize("value", NOT_FINITE_OR_NEGATIVE, ids=NOT_FINITE_IDS)
def test_weight_decay_not_finite_or_negative_is_a_value_error(value):
    with pytest.raises(ValueError, match="weight_decay"):
        AdamWDL(learning_rate=0.01, parameters=_linear().parameters(), weight_decay=value)


@pytest.mark.parametrize("value", [math.nan, -0.5], ids=["nan", "negative"])
def test_weight_decay_tensor_not_finite_or_negative_is_a_value_error(value):
    with pytest.raises(ValueError, match="weight_decay"):
        AdamWDL(learning_rate=0.01, parameters=_linear().parameters(), weight_decay=paddle.to_tensor(value))


@pytest.mark.parametrize("value", NOT_FINITE_OR_NEGATIVE, ids=NOT_FINITE_IDS)
def test_group_learning_rate_not_finite_or_negative_is_a_value_error(value):
    linear = _linear()
    with pytest.raises(ValueError, match="learning_rate"):
        AdamWDL(learning_rate=0.01, parameters=_groups(linear, learning_rate=value))


@pytest.mark.parametrize("key", ["weight_decay", "coeff"])
@pytest.mark.parametrize("value", NOT_FINITE_OR_NEGATIVE, ids=NOT_FINITE_IDS)
def test_group_weight_decay_not_finite_or_negative_is_a_value_error(value, key):
    """``coeff`` is PaddleNLP's name of a group's weight decay: either name will do."""
    linear = _linear()
    with pytest.raises(ValueError, match=f"{key}|weight_decay"):
        AdamWDL(learning_rate=0.01, parameters=_groups(linear, **{key: value}))


def test_parameters_none_in_dygraph_is_a_type_error_saying_what_to_pass():
    with pytest.raises(TypeError, match="parameters") as info:
        AdamWDL(learning_rate=0.01)
    # it says what to pass: the model's parameters (or parameter groups)
    assert "parameters()" in str(info.value), str(info.value)


# ------------------------------------------------------- still accepted
def test_zero_learning_rate_and_weight_decay_are_accepted_and_change_nothing():
    linear = _linear()
    before = {n: p.numpy().copy() for n, p in linear.named_parameters()}
    optimizer = AdamWDL(learning_rate=0.0, parameters=linear.parameters(), weight_decay=0.0)
    for _ in range(2):
        linear(paddle.ones([4, 3])).sum().backward()
        optimizer.step()
        optimizer.clear_grad()
    for name, param in linear.named_parameters():
        np.testing.assert_array_equal(param.numpy(), before[name], err_msg=name)


def test_scheduler_as_learning_rate_is_still_accepted():
    """A warmup scheduler starts at lr 0, which is not refused; each step uses the
    scheduler's lr (a longer run: test_adamwdl.test_paddle_llrd_warmup_scheduler)."""
    scheduler = LinearDecayWithWarmup(0.02, total_steps=4, warmup=2)
    expected_lrs = [0.0, 0.01, 0.02, 0.01]  # docs/schedules.rst: 0.02 * s/2 during warmup, then 0.02 * (4-s)/(4-2)
    linear = _linear()
    reference = ReferenceAdamW({n: p.numpy() for n, p in linear.named_parameters()}, weight_decay=0.1)
    optimizer = AdamWDL(learning_rate=scheduler, parameters=linear.parameters(), weight_decay=0.1)
    rng = np.random.default_rng(0)
    for lr in expected_lrs:
        linear(paddle.to_tensor(rng.standard_normal((4, 3)).astype("float32"))).sum().backward()
        grads = {n: p.grad.numpy() for n, p in linear.named_parameters()}
        optimizer.step()
        optimizer.clear_grad()
        scheduler.step()
        reference.step(grads, lr)
        for name, param in linear.named_parameters():
            np.testing.assert_allclose(param.numpy(), reference.params[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_a_tensor_lr_factor_multiplies_the_global_lr_and_warns_that_adamw_reads_it_otherwise():
    """A Tensor in ``optimize_attr['learning_rate']`` is the factor s_p, as a float is; Paddle's
    AdamW takes a Tensor there as the parameter's whole learning rate, which each step says, at
    the user's line, naming the parameter."""
    linear = _linear()
    linear.weight.optimize_attr["learning_rate"] = paddle.to_tensor(0.5)
    reference = ReferenceAdamW({n: p.numpy() for n, p in linear.named_parameters()}, weight_decay=0.1)
    optimizer = AdamWDL(learning_rate=0.02, parameters=linear.parameters(), weight_decay=0.1)
    rng = np.random.default_rng(2)
    for _ in range(4):
        linear(paddle.to_tensor(rng.standard_normal((4, 3)).astype("float32"))).sum().backward()
        grads = {n: p.grad.numpy() for n, p in linear.named_parameters()}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            optimizer.step()
        said = [w for w in caught if issubclass(w.category, AdamWDifferenceWarning)]
        assert len(said) == 1 and said[0].filename == __file__, [str(w.message) for w in caught]
        assert f"parameter {linear.weight.name!r} has a Tensor optimize_attr['learning_rate']" in str(said[0].message)
        assert "paddle.optimizer.AdamW as the parameter's whole learning rate" in str(said[0].message)
        optimizer.clear_grad()
        reference.step(grads, 0.02, lr_scale={"weight": 0.5, "bias": 1.0})
        for name, param in linear.named_parameters():
            np.testing.assert_allclose(param.numpy(), reference.params[name], rtol=1e-5, atol=1e-7, err_msg=name)


# ---------------------------------------------------------- Tensor betas
BETA1, BETA2 = 0.8, 0.99


def _zero_ratio_for_layer0(decay_rate, name_dict, n_layers, param):
    """0 for encoder layer 0 (an update the fused kernel cannot serve), else the layer ratio."""
    structured = name_dict[param.name]
    return 0.0 if ".layers.0." in structured else layer_ratio(structured, decay_rate, n_layers)


SETUPS = {
    # name: (AdamWDL keyword arguments, reference ratio, sparse embedding)
    "layerwise": (dict(layerwise_decay=0.5), lambda n: layer_ratio(n, 0.5, N_LAYERS), False),
    "general_path": (
        dict(layerwise_decay=0.5, set_param_lr_fun=_zero_ratio_for_layer0),
        lambda n: 0.0 if ".layers.0." in n else layer_ratio(n, 0.5, N_LAYERS),
        False,
    ),
    "no_ratio_function": (dict(set_param_lr_fun=None), lambda n: 1.0, False),
    "sparse_lazy": (dict(layerwise_decay=0.5, lazy_mode=True), lambda n: layer_ratio(n, 0.5, N_LAYERS), True),
    "amsgrad": (dict(layerwise_decay=0.5, amsgrad=True), lambda n: layer_ratio(n, 0.5, N_LAYERS), False),
}


@pytest.mark.parametrize("setup", SETUPS)
def test_tensor_betas_give_the_float64_adam_numbers(setup):
    """beta1=Tensor(0.8), beta2=Tensor(0.99): the bias corrections are 1 - 0.8**t
    and 1 - 0.99**t from the first step on, as with floats."""
    kwargs, ratio, sparse = SETUPS[setup]
    model = bert_like(sparse=sparse)
    reference = ReferenceAdamW(
        weights_of(model), weight_decay=0.1, beta1=BETA1, beta2=BETA2, amsgrad=kwargs.get("amsgrad", False)
    )
    optimizer = AdamWDL(
        learning_rate=0.02,
        beta1=paddle.to_tensor(BETA1, dtype="float32"),
        beta2=paddle.to_tensor(BETA2, dtype="float32"),
        parameters=model.parameters(),
        weight_decay=0.1,
        n_layers=N_LAYERS,
        name_dict=name_dict_of(model),
        **kwargs,
    )
    # float32 Tensors hold 0.8 and 0.99 to about 1e-8: within the tolerances
    train_and_compare(model, optimizer, reference, steps=5, lr_at=lambda step: 0.02, reference_options={"ratio": ratio})

