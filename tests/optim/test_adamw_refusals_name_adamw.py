"""``paddle_llrd.AdamW`` checks its arguments once, with AdamWDL's checks, and every refusal names
``AdamW``: in the constructor and for a parameter group added later (docs/adamwdl.rst)."""
from __future__ import annotations

import paddle
import pytest

from paddle_llrd import AdamW
from paddle_llrd.optim import optimizer_checks


def test_the_constructor_checks_each_argument_once(monkeypatch):
    """beta1, beta2 and epsilon are checked once each, the parameter list once."""
    counted = {"check_beta_or_epsilon": 0, "check_distinct": 0}
    for name in counted:
        original = getattr(optimizer_checks, name)

        def counting(*args, _original=original, _name=name, **kwargs):
            counted[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(optimizer_checks, name, counting)
    AdamW(learning_rate=0.01, parameters=paddle.nn.Linear(2, 2).parameters())
    assert counted == {"check_beta_or_epsilon": 3, "check_distinct": 1}


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"beta1": 1.5}, ValueError, "AdamW: `beta1` must be in [0, 1), got 1.5."),
        ({"weight_decay": -1.0}, ValueError, "AdamW: `weight_decay` must be a finite number >= 0, got -1.0."),
        ({"learning_rate": 1}, TypeError, "AdamW: `learning_rate` must be a float or a paddle.optimizer.lr"),
        ({"weight_decay": 2e6}, ValueError, "AdamW: `weight_decay` = 2000000.0 with learning rate 0.001"),
    ],
)
def test_a_refused_argument_names_adamw(kwargs, error, message):
    with pytest.raises(error) as raised:
        AdamW(parameters=paddle.nn.Linear(2, 2).parameters(), **kwargs)
    assert str(raised.value).startswith(message)


def test_a_group_added_later_is_refused_naming_adamw():
    first, second = paddle.nn.Linear(2, 2), paddle.nn.Linear(2, 2)
    optimizer = AdamW(learning_rate=0.01, parameters=[{"params": first.parameters()}])
    with pytest.raises(ValueError, match=r"^AdamW: parameter group 1's `beta1` must be in \[0, 1\), got 2.0"):
        optimizer._add_param_group({"params": second.parameters(), "beta1": 2.0})
    assert len(optimizer._param_groups) == 1
