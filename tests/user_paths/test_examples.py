"""examples/dygraph_finetune.py with its documented short command line, in
its own process (``python examples/dygraph_finetune.py --steps 5``; the
other examples run as their own processes too: static_graph.py in
tests/test_execution_modes.py, data_parallel.py in tests/test_distributed.py,
the Trainer examples in their virtualenvs' test folders)."""
from __future__ import annotations

import pytest

import harness

STEPS = 5
harness.register(harness.UserScript(
    "example-dygraph-finetune", path=harness.ROOT / "examples" / "dygraph_finetune.py",
    args=("--steps", str(STEPS), "--batch-size", "8"),
))


@pytest.mark.user_path("example-dygraph-finetune")
def test_dygraph_finetune_short_run_prints_its_schedule(user_path):
    """One line per step (``--steps 5``: every step) with the lr of
    ``LinearDecayWithWarmup(3e-3, 5, warmup=0.1)`` (``floor(0.5) = 0`` warm-up
    steps, then ``3e-3 * (5 - s) / 5``), then the summary."""
    stdout = user_path("example-dygraph-finetune").check().stdout
    rows = harness.lines_matching(stdout, r"^step\s+(\d+)\s+lr (\S+)\s+loss (\S+)$")
    assert [int(step) for step, _, _ in rows] == list(range(STEPS)), stdout
    for step, lr, _ in rows:
        assert float(lr) == pytest.approx(3e-3 * (STEPS - int(step)) / STEPS, rel=5e-3), (step, lr)
    (summary,) = harness.lines_matching(
        stdout, r"^(\d+) steps: loss (\S+) -> (\S+), held-out accuracy (\S+) -> (\S+) \(EMA of the weights: (\S+)\)$")
    assert int(summary[0]) == STEPS
    assert all(0.0 <= float(accuracy) <= 1.0 for accuracy in summary[3:])
