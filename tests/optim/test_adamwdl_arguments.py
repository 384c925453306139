"""AdamWDL checks its parameter groups as its top-level arguments, refuses a
parameter listed twice and a weight-decay schedule shared by two optimizers,
each error naming the argument (or the group and key), nothing half-applied
(docs/adamwdl.rst)."""
from __future__ import annotations

import copy
import gc

import numpy as np
import paddle
import pytest
from paddle import nn

from paddle_llrd import AdamWDL, WeightDecaySchedule


def _lr_factors(layer: nn.Layer) -> dict[str, float]:
    return {p.name: p.optimize_attr["learning_rate"] for p in layer.parameters()}


# ---------------------------------------------------------- parameter groups
@pytest.mark.parametrize(
    "key, bad, error, expected",
    [
        ("beta1", 1.5, ValueError, r"in \[0, 1\), got 1.5"),
        ("beta1", -0.1, ValueError, r"in \[0, 1\)"),
        ("beta2", 1.0, ValueError, r"in \[0, 1\), got 1.0"),
        ("epsilon", -1e-8, ValueError, "a finite number >= 0"),
        ("epsilon", float("nan"), ValueError, "a finite number >= 0"),
        ("beta1", "0.9", TypeError, "real number in"),
        ("epsilon", None, TypeError, "real number >= 0 or a Tensor, got NoneType"),
        ("weight_decay", "0.01", TypeError, "real number >= 0 or a Tensor, got str"),
        ("learning_rate", "0.5", TypeError, "real number >= 0 or a Tensor, got str"),
        ("coeff", True, TypeError, "got bool True"),
    ],
)
def test_bad_group_setting_names_the_group_and_key_and_applies_no_group(key, bad, error, expected):
    """beta1=1.5 in a group gave NaN weights at the first step, a string
    weight_decay a bare TypeError there; the top level refuses both."""
    linear = nn.Linear(3, 2)
    before = _lr_factors(linear)
    groups = [{"params": [linear.weight], "learning_rate": 0.5}, {"params": [linear.bias], key: bad}]
    with pytest.raises(error, match=rf"parameter group 1's `{key}` must be .*{expected}"):
        AdamWDL(learning_rate=0.01, parameters=groups)
    assert _lr_factors(linear) == before  # group 0's factor was not written into its parameter


def test_the_same_values_are_refused_at_the_top_level():
    linear = nn.Linear(3, 2)
    with pytest.raises(ValueError, match=r"AdamWDL: `beta1` must be in \[0, 1\), got 1.5"):
        AdamWDL(parameters=linear.parameters(), beta1=1.5)
    with pytest.raises(ValueError, match=r"AdamWDL: `epsilon` must be a finite number >= 0"):
        AdamWDL(parameters=linear.parameters(), epsilon=-1.0)


def test_tensor_group_beta_is_checked_by_value_in_dygraph():
    linear = nn.Linear(3, 2)
    with pytest.raises(ValueError, match=r"parameter group 0's `beta2` must be in \[0, 1\), got 1.5"):
        AdamWDL(parameters=[{"params": linear.parameters(), "beta2": paddle.to_tensor(1.5)}])


def test_group_without_params_is_named():
    with pytest.raises(ValueError, match="parameter group 0 has no 'params'"):
        AdamWDL(parameters=[{"learning_rate": 0.5}])


def test_good_group_settings_train_as_the_reference():
    """Group betas/epsilon within range are taken (one step against the formula,
    the group's own beta1/beta2/epsilon; zero weight decay)."""
    linear = nn.Linear(3, 2)
    weight = linear.weight.numpy().astype(np.float64)
    optimizer = AdamWDL(
        learning_rate=0.1, weight_decay=0.0,
        parameters=[{"params": [linear.weight], "beta1": 0.5, "beta2": 0.75, "epsilon": 1e-3},
                    {"params": [linear.bias]}],
    )
    x = paddle.ones([4, 3])
    linear(x).sum().backward()
    grad = linear.weight.grad.numpy().astype(np.float64)
    optimizer.step()
    m, v = 0.5 * grad, 0.25 * grad**2
    m_hat, v_hat = m / (1 - 0.5), v / (1 - 0.75)
    expected = weight - 0.1 * m_hat / (np.sqrt(v_hat) + 1e-3)
    np.testing.assert_allclose(linear.weight.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_a_group_added_later_is_checked_before_it_changes_anything():
    first, second = nn.Linear(3, 2), nn.Linear(3, 2)
    optimizer = AdamWDL(learning_rate=0.01, parameters=[{"params": first.parameters()}])
    before = _lr_factors(second)
    with pytest.raises(ValueError, match=r"parameter group 1's `beta1` must be in \[0, 1\)"):
        optimizer._add_param_group({"params": second.parameters(), "beta1": 2.0, "learning_rate": 0.5})
    with pytest.raises(TypeError, match="parameter group 1's `weight_decay`"):
        optimizer._add_param_group({"params": second.parameters(), "weight_decay": "0.1", "learning_rate": 0.5})
    assert len(optimizer._param_groups) == 1 and _lr_factors(second) == before
    optimizer._add_param_group({"params": second.parameters(), "beta1": 0.5})
    assert len(optimizer._param_groups) == 2


# ---------------------------------------------------- top-level arguments
@pytest.mark.parametrize(
    "kwargs, error, argument",
    [
        ({"beta1": "0.9"}, TypeError, "`beta1` must be a real number in [0, 1) or a Tensor, got str '0.9'"),
        ({"beta2": True}, TypeError, "`beta2` must be a real number in [0, 1) or a Tensor, got bool"),
        ({"epsilon": "1e-8"}, TypeError, "`epsilon` must be a real number"),
        ({"apply_decay_param_fun": "bias"}, TypeError, "`apply_decay_param_fun` must be callable"),
        ({"weight_decay": True}, TypeError, "`weight_decay` must be a real number >= 0, a Tensor or a "
                                            "WeightDecaySchedule, got bool True"),
        ({"weight_decay": "0.01"}, TypeError, "`weight_decay` must be a real number"),
        ({"learning_rate": 1}, TypeError, "`learning_rate` must be a float or a paddle.optimizer.lr.LRScheduler"),
        ({"learning_rate": "0.1"}, TypeError, "`learning_rate` must be a float"),
    ],
)
def test_unnamed_errors_now_name_the_argument(kwargs, error, argument):
    linear = nn.Linear(3, 2)
    with pytest.raises(error) as raised:
        AdamWDL(parameters=linear.parameters(), **kwargs)
    assert argument in str(raised.value)


@pytest.mark.parametrize(
    "parameters, expected",
    [
        ([1, 2], "`parameters` item 0 must be a Paddle parameter or a parameter-group dict, got int 1"),
        ("weights", "`parameters` must be a list of parameters"),
        (5, "`parameters` must be a list of parameters"),
        ([{"params": [1]}], "parameter group 0's 'params' item 0 must be a Paddle parameter, got int 1"),
        ([{"params": {"a"}}], "parameter group 0's 'params' must be an ordered collection"),
    ],
)
def test_parameters_that_are_not_parameters_are_a_type_error_naming_parameters(parameters, expected):
    with pytest.raises(TypeError) as raised:
        AdamWDL(parameters=parameters)
    assert expected in str(raised.value)


def test_mixed_parameters_and_groups_are_refused():
    linear = nn.Linear(3, 2)
    with pytest.raises(TypeError, match=r"`parameters` item 1 must be a Paddle parameter like item 0"):
        AdamWDL(parameters=[linear.weight, {"params": [linear.bias]}])


# ------------------------------------------------------------ weight-decay bound
def test_weight_decay_that_makes_the_decay_factor_negative_is_refused():
    """2e6 with lr 1e-3: every step multiplies the weights by 1 - 2000 (Paddle's
    AdamW takes it and trains to NaN); the bound is 1 / lr."""
    linear = nn.Linear(3, 2)
    with pytest.raises(ValueError) as raised:
        AdamWDL(learning_rate=1e-3, parameters=linear.parameters(), weight_decay=2e6)
    message = str(raised.value)
    assert "`weight_decay` = 2000000.0" in message and "1 / lr = 1000.0" in message and "negative" in message
    # right at the bound the factor is 0, still a (degenerate) decay: accepted
    AdamWDL(learning_rate=0.5, parameters=linear.parameters(), weight_decay=2.0)


def test_weight_decay_bound_uses_a_schedulers_peak_and_a_groups_factor():
    linear = nn.Linear(3, 2)
    warmup = paddle.optimizer.lr.LambdaDecay(learning_rate=0.1, lr_lambda=lambda step: min(1.0, step / 10))
    with pytest.raises(ValueError, match=r"`weight_decay` = 20.0 with learning rate 0.1"):
        AdamWDL(learning_rate=warmup, parameters=linear.parameters(), weight_decay=20.0)
    groups = [{"params": [linear.weight], "learning_rate": 10.0}, {"params": [linear.bias], "weight_decay": 0.0}]
    with pytest.raises(ValueError, match=r"`weight_decay` in parameter group 0 = 0.2 with learning rate 1.0 "
                                         r"times the group's factor 10.0"):
        AdamWDL(learning_rate=1.0, parameters=groups, weight_decay=0.2)
    with pytest.raises(ValueError, match=r"parameter group 1's `coeff` = 50.0"):
        AdamWDL(learning_rate=0.1, parameters=[{"params": [linear.weight]}, {"params": [linear.bias], "coeff": 50.0}])
    schedule = WeightDecaySchedule(0.0, 30.0, total_steps=5, style="linear")
    with pytest.raises(ValueError, match=r"`weight_decay` = 30.0"):
        AdamWDL(learning_rate=0.1, parameters=linear.parameters(), weight_decay=schedule)


# -------------------------------------------------------- a parameter twice
def test_a_parameter_listed_twice_is_refused_naming_it():
    """Paddle's AdamW updates a parameter listed twice in a list twice per step."""
    linear = nn.Linear(3, 2)
    with pytest.raises(ValueError) as raised:
        AdamWDL(parameters=[linear.weight, linear.bias, linear.weight])
    message = str(raised.value)
    assert f"parameter {linear.weight.name!r} is listed twice in `parameters` (item 0 and item 2)" in message


def test_a_parameter_in_two_groups_or_twice_in_one_is_refused_before_any_group_applies():
    linear = nn.Linear(3, 2)
    before = _lr_factors(linear)
    with pytest.raises(ValueError, match="parameter group 0's item 0 and parameter group 1's item 1"):
        AdamWDL(parameters=[{"params": [linear.weight], "learning_rate": 0.5},
                            {"params": [linear.bias, linear.weight]}])
    with pytest.raises(ValueError, match="parameter group 0's item 0 and parameter group 0's item 1"):
        AdamWDL(parameters=[{"params": [linear.weight, linear.weight], "learning_rate": 0.5}])
    assert _lr_factors(linear) == before


def test_a_group_added_later_with_a_listed_parameter_is_refused():
    linear = nn.Linear(3, 2)
    optimizer = AdamWDL(parameters=[{"params": [linear.weight]}])
    with pytest.raises(ValueError, match=f"{linear.weight.name!r} is listed twice.*parameter group 0 and "
                                         "parameter group 1's item 1"):
        optimizer._add_param_group({"params": [linear.bias, linear.weight], "learning_rate": 0.5})
    assert len(optimizer._param_groups) == 1 and linear.bias.optimize_attr["learning_rate"] == 1.0


def test_shared_weights_listed_once_by_model_parameters_are_fine():
    class Tied(nn.Layer):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(5, 3)
            self.head = nn.Linear(3, 5)
            self.head.weight = self.embedding.weight  # tied (shapes differ: only listing matters here)

    model = Tied()
    AdamWDL(parameters=model.parameters())


# ------------------------------------------------- a shared weight-decay schedule
def test_one_schedule_for_two_optimizers_is_refused_naming_weight_decay():
    schedule = WeightDecaySchedule(0.0, 0.1, total_steps=10, style="linear")
    first, second = nn.Linear(3, 2), nn.Linear(3, 2)
    optimizer = AdamWDL(learning_rate=0.01, parameters=first.parameters(), weight_decay=schedule)
    with pytest.raises(ValueError, match=r"`weight_decay` is a WeightDecaySchedule that another optimizer "
                                         r"\(AdamWDL\) already follows"):
        AdamWDL(learning_rate=0.01, parameters=second.parameters(), weight_decay=schedule)
    assert optimizer.weight_decay_schedule is schedule


def test_each_optimizer_with_its_own_copy_advances_once_per_iteration():
    """The advice of the error: two optimizers, one deepcopy each, five iterations: both at step 5."""
    schedule = WeightDecaySchedule(0.0, 0.1, total_steps=10, style="linear")
    layers = [nn.Linear(3, 2), nn.Linear(3, 2)]
    optimizers = [
        AdamWDL(learning_rate=0.01, parameters=layer.parameters(), weight_decay=copy.deepcopy(schedule))
        for layer in layers
    ]
    for _ in range(5):
        for layer, optimizer in zip(layers, optimizers):
            layer(paddle.ones([2, 3])).sum().backward()
            optimizer.step()
            optimizer.clear_grad()
    assert [o.weight_decay_schedule.current_step for o in optimizers] == [5, 5]
    assert schedule.current_step == 0


def test_a_schedule_is_free_again_once_its_optimizer_is_gone_or_failed():
    schedule = WeightDecaySchedule(0.0, 0.1, total_steps=10, style="linear")
    with pytest.raises(TypeError):
        AdamWDL(parameters=[1], weight_decay=schedule)  # failed: claims nothing
    optimizer = AdamWDL(parameters=nn.Linear(3, 2).parameters(), weight_decay=schedule)
    del optimizer
    gc.collect()
    AdamWDL(parameters=nn.Linear(3, 2).parameters(), weight_decay=schedule)
