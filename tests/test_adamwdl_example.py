"""examples/dygraph_finetune.py in its short mode (its command line runs in its
own process in tests/user_paths/test_examples.py)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import paddle
import pytest

from paddle_llrd import ExponentialMovingAverage

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "dygraph_finetune.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("dygraph_finetune", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_short_run_follows_the_warmup_schedule(example):
    steps, peak = 10, 3e-3
    history = example.train(steps=steps, batch_size=8, learning_rate=peak)
    warmup = int(0.1 * steps)  # docs/schedules.rst: a float warmup is floor(warmup * total_steps) steps
    expected = [peak * (s / warmup if s < warmup else (steps - s) / (steps - warmup)) for s in range(steps)]
    np.testing.assert_allclose(history["lrs"], expected, rtol=1e-6, atol=1e-12)
    assert len(history["losses"]) == steps and np.all(np.isfinite(history["losses"]))
    assert 0.0 <= history["accuracy_after"] <= 1.0


def _trainable_weights(model) -> dict[str, np.ndarray]:
    return {n: p.numpy().astype(np.float64) for n, p in model.named_parameters() if not p.stop_gradient}


def test_ema_averages_the_trained_weights_and_evaluates_with_them(example, monkeypatch):
    """The example's EMA against a float64 average of the weights after each step
    (decay with warm-up: d_n = min(d, (1 + n) / (10 + n)) at the n-th update);
    its EMA accuracy is that of the averaged weights, and the live weights come back."""
    recorded: list[ExponentialMovingAverage] = []

    class RecordingEMA(ExponentialMovingAverage):
        def register(self):
            super().register()
            self.snapshots = [_trainable_weights(self.model)]
            recorded.append(self)

        def update(self):
            self.snapshots.append(_trainable_weights(self.model))
            super().update()

    monkeypatch.setattr(example, "ExponentialMovingAverage", RecordingEMA)
    steps, batch_size, decay = 12, 8, 0.9
    history = example.train(steps=steps, batch_size=batch_size, ema_decay=decay)
    (ema,) = recorded
    assert len(ema.snapshots) == steps + 1  # registered, then one update per optimizer step

    average = dict(ema.snapshots[0])
    for n, weights in enumerate(ema.snapshots[1:]):
        d = min(decay, (1 + n) / (10 + n))
        average = {name: d * average[name] + (1 - d) * weights[name] for name in average}
    for name, value in average.items():
        np.testing.assert_allclose(ema.shadow[name].numpy(), value, rtol=1e-5, atol=1e-6, err_msg=name)
    # the average differs from the live weights, which are back in the model
    live = _trainable_weights(ema.model)
    for name, value in live.items():
        np.testing.assert_array_equal(value, ema.snapshots[-1][name], err_msg=name)
    assert any(not np.allclose(average[name], live[name], rtol=1e-3, atol=1e-5) for name in live)

    # the reported accuracies: the share of held-out labels the model's argmax
    # gets right, with the live weights and with the float64 average loaded
    _, _, test_ids, test_labels = example.make_datasets(steps, batch_size)
    assert history["accuracy_after"] == _held_out_accuracy(ema.model, test_ids, test_labels)
    with paddle.no_grad():
        for name, param in ema.model.named_parameters():
            if name in average:
                param.set_value(average[name].astype(np.float32))
    assert history["accuracy_after_ema"] == _held_out_accuracy(ema.model, test_ids, test_labels)


def _held_out_accuracy(model, input_ids: np.ndarray, labels: np.ndarray) -> float:
    """Counted here, in evaluation mode (no dropout), not with the example's own function."""
    model.eval()
    with paddle.no_grad():
        logits = model(paddle.to_tensor(input_ids)).numpy()
    model.train()
    return float(np.count_nonzero(logits.argmax(axis=-1) == labels)) / len(labels)
