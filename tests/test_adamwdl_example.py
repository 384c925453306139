"""examples/dygraph_finetune.py in its short mode."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

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
    warmup = int(0.1 * steps)  # SPEC: a float warmup is floor(warmup * total_steps) steps
    expected = [peak * (s / warmup if s < warmup else (steps - s) / (steps - warmup)) for s in range(steps)]
    np.testing.assert_allclose(history["lrs"], expected, rtol=1e-6, atol=1e-12)
    assert len(history["losses"]) == steps and np.all(np.isfinite(history["losses"]))
    assert 0.0 <= history["accuracy_after"] <= 1.0


def test_main_short_mode(example, capsys):
    assert example.main(["--steps", "5", "--batch-size", "8"]) == 0
    assert "5 steps: loss" in capsys.readouterr().out
