"""One rule for an EMA's decay at every entry point (docs/ema.rst, docs/migration.rst
"LLRDTrainer"): a real number in [0, 1), accepted or refused alike by the
``ExponentialMovingAverage`` constructor, its ``decay`` setter, its
``set_state_dict``, the Trainer's ``ema_decay`` field and a config's
``ema_decay`` key as ``python -m paddle_llrd train`` checks it. A value one
of them takes and another refuses fails here."""
from __future__ import annotations

import math

import paddle
import pytest

from paddle_llrd import ExponentialMovingAverage
from paddle_llrd.integrations.training_arguments import check_ema_decay, check_fields

VALUES = [0.0, 0.5, 0.999, 1.0 - 1e-12, 1.0, 1.5, -0.1, -0.0, math.nan, math.inf, True, None]
# What the rule says, written out: a real number (not a bool) in [0, 1).
EXPECTED = {repr(value): (isinstance(value, float) and 0.0 <= value < 1.0) for value in VALUES}


def _model() -> paddle.nn.Layer:
    return paddle.nn.Linear(2, 2)


def _constructor(value):
    return ExponentialMovingAverage(_model(), decay=value).decay


def _setter(value):
    ema = ExponentialMovingAverage(_model(), decay=0.5)
    ema.decay = value
    return ema.decay


def _state_dict(value):
    ema = ExponentialMovingAverage(_model(), decay=0.5)
    ema.register()
    ema.set_state_dict({**ema.state_dict(), "decay": value})
    return ema.decay


def _trainer_field(value):
    return check_ema_decay(value)


def _config_key(value):
    return check_fields({"ema_decay": value})["ema_decay"]


ENTRY_POINTS = {"constructor": _constructor, "decay setter": _setter, "set_state_dict": _state_dict,
                "Trainer field": _trainer_field, "config key": _config_key}


def _outcome(entry, value):
    try:
        return ("accepted", entry(value))
    except (TypeError, ValueError) as exc:
        return ("refused", type(exc).__name__)


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_every_entry_point_accepts_or_refuses_an_ema_decay_alike(value):
    outcomes = {name: _outcome(entry, value) for name, entry in ENTRY_POINTS.items()}
    assert len(set(outcomes.values())) == 1, outcomes
    verdict, result = next(iter(outcomes.values()))
    assert (verdict == "accepted") == EXPECTED[repr(value)], outcomes
    if verdict == "accepted":
        assert result == value
    else:  # a number out of range is a ValueError, anything else a TypeError
        assert result == ("ValueError" if isinstance(value, float) else "TypeError")


@pytest.mark.parametrize("name, entry", ENTRY_POINTS.items())
def test_a_refused_decay_names_its_argument_and_the_range(name, entry):
    with pytest.raises(ValueError, match=r"decay[^ ]*` must be in \[0, 1\), got 1\.0"):
        entry(1.0)
