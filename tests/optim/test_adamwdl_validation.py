"""AdamWDL refuses learning rates, weight decays and parameter lists that would
corrupt training, naming the argument, before anything is applied (PyTorch's
AdamW refuses the same values; Paddle's takes them)."""
from __future__ import annotations

import math

import numpy as np
import paddle
import pytest
from paddle import nn

from paddle_llrd import AdamWDL, WeightDecaySchedule


def _lr_factors(layer: nn.Layer) -> dict[str, float]:
    return {p.name: p.optimize_attr["learning_rate"] for p in layer.parameters()}


@pytest.mark.parametrize("argument", ["learning_rate", "weight_decay"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, -0.1])
def test_bad_float_is_a_value_error_naming_the_argument(argument, bad):
    linear = nn.Linear(3, 2)
    with pytest.raises(ValueError, match=f"`{argument}` must be a finite number >= 0"):
        AdamWDL(parameters=linear.parameters(), **{argument: bad})


def test_bad_tensor_weight_decay_is_a_value_error():
    linear = nn.Linear(3, 2)
    with pytest.raises(ValueError, match="`weight_decay`"):
        AdamWDL(parameters=linear.parameters(), weight_decay=paddle.to_tensor(-0.5))


@pytest.mark.parametrize("key", ["learning_rate", "weight_decay", "coeff"])
@pytest.mark.parametrize("bad", [math.nan, -1.0])
def test_bad_group_value_names_the_group_and_changes_no_parameter(key, bad):
    linear = nn.Linear(3, 2)
    before = _lr_factors(linear)
    groups = [{"params": [linear.weight], "learning_rate": 0.5}, {"params": [linear.bias], key: bad}]
    with pytest.raises(ValueError, match=f"parameter group 1's `{key}`"):
        AdamWDL(parameters=groups)
    # the first group's lr factor was not written into its parameter
    assert _lr_factors(linear) == before


def test_schedule_in_a_later_group_changes_no_parameter():
    linear = nn.Linear(3, 2)
    before = _lr_factors(linear)
    groups = [{"params": [linear.weight], "learning_rate": 0.5},
              {"params": [linear.bias], "weight_decay": WeightDecaySchedule(0.0, 0.1, 5, style="linear")}]
    with pytest.raises(TypeError, match="parameter group 1's `weight_decay`"):
        AdamWDL(parameters=groups)
    assert _lr_factors(linear) == before


def test_zero_learning_rate_and_weight_decay_are_accepted():
    """0 is a legitimate value of both (a frozen warm-up start, no decay): the weights stay."""
    linear = nn.Linear(3, 2)
    before = [p.numpy().copy() for p in linear.parameters()]
    optimizer = AdamWDL(learning_rate=0.0, weight_decay=0.0, parameters=linear.parameters())
    linear(paddle.ones([4, 3])).sum().backward()
    optimizer.step()
    for param, value in zip(linear.parameters(), before):
        np.testing.assert_array_equal(param.numpy(), value)


def test_parameters_none_in_dygraph_is_a_type_error_saying_what_to_pass():
    with pytest.raises(TypeError, match=r"`parameters` is required in dygraph mode: pass model.parameters\(\)"):
        AdamWDL(learning_rate=0.01)


def test_parameters_from_a_generator_are_read_once():
    linear = nn.Linear(3, 2)
    optimizer = AdamWDL(learning_rate=0.1, weight_decay=0.0, parameters=(p for p in linear.parameters()))
    assert [p.name for p in optimizer._parameter_list] == [p.name for p in linear.parameters()]


def test_parameters_none_in_a_static_program_trains_every_parameter():
    """In a static program ``parameters=None`` means the program's parameters, as in Paddle:
    one step with zero gradients and lr 0.1, weight decay 0.5 scales every weight by 0.95."""
    paddle.enable_static()
    try:
        with paddle.pir_utils.IrGuard():
            main, startup = paddle.static.Program(), paddle.static.Program()
            with paddle.static.program_guard(main, startup):
                x = paddle.static.data("x", [2, 3], "float32")
                linear = nn.Linear(3, 2)
                loss = (linear(x) * 0.0).sum()
                AdamWDL(learning_rate=0.1, weight_decay=0.5).minimize(loss)
            executor = paddle.static.Executor(paddle.CPUPlace())
            executor.run(startup)
            scope = paddle.static.global_scope()
            names = [linear.weight.name, linear.bias.name]
            before = {n: np.array(scope.var(n).get_tensor()) for n in names}
            executor.run(main, feed={"x": np.ones([2, 3], "float32")}, fetch_list=[loss])
            for name in names:
                np.testing.assert_allclose(np.array(scope.var(name).get_tensor()), before[name] * 0.95, rtol=1e-6)
    finally:
        paddle.disable_static()
