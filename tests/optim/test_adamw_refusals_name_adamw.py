"""``paddle_llrd.AdamW`` checks its arguments with AdamWDL's checks, and every refusal and
warning names ``AdamW``, never ``AdamWDL``: in the constructor, for a parameter group added
later, at a step on either update path, building a static program, and loading a checkpoint."""
from __future__ import annotations

import warnings

import paddle
import pytest

from paddle_llrd import AdamW, CheckpointMatchWarning, WeightDecaySchedule
from paddle_llrd.optim.checkpoint import STRUCTURED_NAMES_KEY


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"beta1": 1.5}, ValueError, "AdamW: `beta1` must be in [0, 1), got 1.5."),
        ({"beta2": 1.0}, ValueError, "AdamW: `beta2` must be in [0, 1), got 1.0."),
        ({"beta1": "0.9"}, TypeError, "AdamW: `beta1` must be a real number in [0, 1) or a Tensor, got str '0.9'."),
        ({"epsilon": -1.0}, ValueError, "AdamW: `epsilon` must be a finite number >= 0, got -1.0."),
        ({"weight_decay": -1.0}, ValueError, "AdamW: `weight_decay` must be a finite number >= 0, got -1.0."),
        ({"learning_rate": 1}, TypeError, "AdamW: `learning_rate` must be a float or a paddle.optimizer.lr"),
        ({"weight_decay": 2e6}, ValueError, "AdamW: `weight_decay` = 2000000.0 with learning rate 0.001"),
    ],
)
def test_a_refused_argument_names_adamw(kwargs, error, message):
    with pytest.raises(error) as raised:
        AdamW(parameters=paddle.nn.Linear(2, 2).parameters(), **kwargs)
    assert str(raised.value).startswith(message)
    assert "AdamWDL" not in str(raised.value)  # (refused by AdamW's own check, not first by AdamWDL's)


def test_a_parameter_listed_twice_is_refused_naming_adamw():
    linear = paddle.nn.Linear(2, 2)
    with pytest.raises(ValueError, match=r"^AdamW: parameter 'linear_\d+\.w_0' is listed twice in `parameters` "
                                         r"\(item 0 and item 2\)"):
        AdamW(parameters=linear.parameters() + [linear.weight])


def test_a_group_added_later_is_refused_naming_adamw():
    first, second = paddle.nn.Linear(2, 2), paddle.nn.Linear(2, 2)
    optimizer = AdamW(learning_rate=0.01, parameters=[{"params": first.parameters()}])
    with pytest.raises(ValueError, match=r"^AdamW: parameter group 1's `beta1` must be in \[0, 1\), got 2.0"):
        optimizer._add_param_group({"params": second.parameters(), "beta1": 2.0})
    assert len(optimizer._param_groups) == 1


def _hooked_to_a_slice(model: paddle.nn.LayerList, optimizer: AdamW) -> None:
    model[0].weight.register_hook(lambda grad: grad[:1])


def _second_layer_float64(model: paddle.nn.LayerList, optimizer: AdamW) -> None:
    model[1].to(dtype="float64")


def _amsgrad_switched_on(model: paddle.nn.LayerList, optimizer: AdamW) -> None:
    optimizer._amsgrad = True


# What a user does after the first step, and the start of the step's refusal.
STEP_REFUSALS = {
    "gradient_of_another_size": (_hooked_to_a_slice, ValueError,
                                 r"^AdamW: the gradient of parameter 'linear_\d+\.w_0' is paddle.float32 \[1, 2\]"),
    "parameters_of_two_dtypes": (_second_layer_float64, ValueError,
                                 r"^AdamW: parameter 'linear_\d+\.w_0' is float64 but the learning rate is float32"),
    "amsgrad_switched_on_later": (_amsgrad_switched_on, RuntimeError,
                                  r"^AdamW: parameter 'linear_\d+\.w_0' has no moment2_max accumulator"),
}


def _backward(model: paddle.nn.LayerList) -> None:
    hidden = model[0](paddle.ones([1, 2]))
    model[1](hidden.astype(model[1].weight.dtype)).sum().backward()


@pytest.mark.parametrize("tensor_epsilon", [False, True], ids=["multi_tensor", "per_parameter"])
@pytest.mark.parametrize("change", STEP_REFUSALS)
def test_a_refused_step_names_adamw_on_either_path(change, tensor_epsilon):
    make_change, error, message = STEP_REFUSALS[change]
    paddle.seed(0)
    model = paddle.nn.LayerList([paddle.nn.Linear(2, 2), paddle.nn.Linear(2, 2)])
    epsilon = paddle.to_tensor(1e-8) if tensor_epsilon else 1e-8  # (a Tensor epsilon: the per-parameter path)
    optimizer = AdamW(learning_rate=0.01, epsilon=epsilon, parameters=model.parameters())
    _backward(model)
    optimizer.step()
    optimizer.clear_grad()
    assert (optimizer.last_update_path.path == "per_parameter") == tensor_epsilon
    make_change(model, optimizer)
    _backward(model)
    with pytest.raises(error, match=message) as raised:
        optimizer.step()
    assert "AdamWDL" not in str(raised.value)


def test_a_static_program_refuses_a_weight_decay_schedule_naming_adamw():
    paddle.enable_static()
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        loss = paddle.mean(paddle.nn.Linear(4, 2)(paddle.static.data("x", [-1, 4], "float32")))
        optimizer = AdamW(learning_rate=0.01, weight_decay=WeightDecaySchedule(0.0, 0.1, 5, style="linear"))
        with pytest.raises(NotImplementedError, match=r"^AdamW: a WeightDecaySchedule as `weight_decay` needs "
                                                      r"dygraph execution"):
            optimizer.minimize(loss)


@pytest.mark.parametrize("load", ["set_state_dict", "load_state_dict"])
def test_a_refused_checkpoint_names_adamw(load):
    optimizer = AdamW(parameters=paddle.nn.Linear(2, 2).parameters())
    with pytest.raises(ValueError, match=r"^AdamW\.set_state_dict: the checkpoint's '\w+' entry must map") as raised:
        getattr(optimizer, load)({STRUCTURED_NAMES_KEY: ["not", "a", "mapping"]})
    assert "AdamWDL" not in str(raised.value)


def test_a_checkpoint_without_the_schedules_position_warns_naming_adamw():
    linear = paddle.nn.Linear(2, 2)
    saved = AdamW(parameters=linear.parameters()).state_dict()
    optimizer = AdamW(parameters=linear.parameters(), weight_decay=WeightDecaySchedule(0.0, 0.1, 5, style="linear"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        optimizer.set_state_dict(saved)
    matched = [w for w in caught if issubclass(w.category, CheckpointMatchWarning)]
    assert len(matched) == 1 and str(matched[0].message).startswith("AdamW.set_state_dict: the checkpoint has no ")
    assert matched[0].filename == __file__  # (the line that loads, not AdamW's override)
