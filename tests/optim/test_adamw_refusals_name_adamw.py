"""``paddle_llrd.AdamW`` checks its arguments with AdamWDL's checks, and every refusal names
``AdamW``, never ``AdamWDL``: in the constructor and for a parameter group added later
(docs/adamwdl.rst)."""
from __future__ import annotations

import paddle
import pytest

from paddle_llrd import AdamW


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
