"""An EMA state records how many optimizer steps it followed, and loading it beside weights of another
step count says so by class (CheckpointMatchWarning), naming both counts: the plain loop that saves the
model, the optimizer and the EMA with three ``paddle.save`` calls and is killed between them."""
from __future__ import annotations

import warnings

import numpy as np
import paddle
import pytest

from paddle_llrd import AdamWDL, CheckpointMatchWarning, ExponentialMovingAverage


def _model() -> paddle.nn.Layer:
    return paddle.nn.Sequential(paddle.nn.Linear(4, 8), paddle.nn.Tanh(), paddle.nn.Linear(8, 1))


def _train(model, optimizer, ema, steps):
    """``steps`` steps of a plain loop on fixed data, the EMA updated after each."""
    x = paddle.to_tensor(np.linspace(-1, 1, 32, dtype="float32").reshape(8, 4))
    for _ in range(steps):
        loss = (model(x) ** 2).mean()
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        ema.update()


def _loop():
    model = _model()
    optimizer = AdamWDL(learning_rate=0.1, parameters=model.parameters(), layerwise_decay=1.0)
    ema = ExponentialMovingAverage(model, decay=0.9)
    ema.register()
    return model, optimizer, ema


def test_an_ema_saved_steps_before_the_weights_is_loaded_with_a_warning_naming_both_counts(tmp_path):
    model, optimizer, ema = _loop()
    _train(model, optimizer, ema, 2)
    paddle.save(ema.state_dict(), str(tmp_path / "ema.pdparams"))  # the loop was killed after this save...
    _train(model, optimizer, ema, 4)
    paddle.save(model.state_dict(), str(tmp_path / "model.pdparams"))  # ...and these come from a later one
    step = 6

    resumed_model, _, resumed_ema = _loop()
    resumed_model.set_state_dict(paddle.load(str(tmp_path / "model.pdparams")))
    with pytest.warns(CheckpointMatchWarning) as caught:
        resumed_ema.set_state_dict(paddle.load(str(tmp_path / "ema.pdparams")), optimizer_steps=step)
    (warning,) = caught
    assert "followed 2 optimizer steps, the weights it is loaded beside 6" in str(warning.message)
    assert warning.filename == __file__  # the caller's line, not the package's
    assert resumed_ema.num_updates == 2  # loaded all the same: the caller decides


def test_an_ema_saved_with_the_weights_loads_without_a_word(tmp_path):
    model, optimizer, ema = _loop()
    _train(model, optimizer, ema, 3)
    state = ema.state_dict()
    assert state["optimizer_steps"] == 3
    paddle.save(state, str(tmp_path / "ema.pdparams"))
    _, _, resumed_ema = _loop()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CheckpointMatchWarning)
        resumed_ema.set_state_dict(paddle.load(str(tmp_path / "ema.pdparams")), optimizer_steps=3)
        resumed_ema.set_state_dict(paddle.load(str(tmp_path / "ema.pdparams")))  # no count given: nothing compared


def test_a_caller_that_skips_updates_records_its_own_step_count():
    """A Trainer does not update the average after an AMP overflow step: it passes the optimizer's count."""
    model, optimizer, ema = _loop()
    _train(model, optimizer, ema, 2)
    state = ema.state_dict(optimizer_steps=3)  # one more step, which changed no weight
    assert (state["num_updates"], state["optimizer_steps"]) == (2, 3)
    _, _, resumed_ema = _loop()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CheckpointMatchWarning)
        resumed_ema.set_state_dict(state, optimizer_steps=3)
    with pytest.warns(CheckpointMatchWarning, match="followed 3 optimizer steps, the weights it is loaded beside 2"):
        resumed_ema.set_state_dict(state, optimizer_steps=2)


def test_a_state_written_before_the_count_was_recorded_compares_its_updates():
    model, optimizer, ema = _loop()
    _train(model, optimizer, ema, 2)
    state = {key: value for key, value in ema.state_dict().items() if key != "optimizer_steps"}
    _, _, resumed_ema = _loop()
    with pytest.warns(CheckpointMatchWarning, match="followed 2 optimizer steps, the weights it is loaded beside 5"):
        resumed_ema.set_state_dict(state, optimizer_steps=5)


@pytest.mark.parametrize("steps, error", [(-1, ValueError), (1.5, TypeError), ("3", TypeError)])
def test_a_bad_step_count_is_refused_naming_it_and_changes_nothing(steps, error):
    model, optimizer, ema = _loop()
    _train(model, optimizer, ema, 1)
    saved = {name: value.numpy().copy() for name, value in ema.shadow.items()}
    with pytest.raises(error, match="optimizer_steps"):
        ema.state_dict(optimizer_steps=steps)
    other = ExponentialMovingAverage(model, decay=0.5)
    other.register()
    before = {name: value.numpy().copy() for name, value in other.shadow.items()}
    with pytest.raises(error, match="optimizer_steps"):
        other.set_state_dict(ema.state_dict(), optimizer_steps=steps)
    assert other.decay == 0.5 and other.num_updates == 0
    for name, value in before.items():
        np.testing.assert_array_equal(other.shadow[name].numpy(), value)
    for name, value in saved.items():
        np.testing.assert_array_equal(ema.shadow[name].numpy(), value)
