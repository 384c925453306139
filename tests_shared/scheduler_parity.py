"""paddle_llrd.get_scheduler against a framework's own get_scheduler, step by
step over whole runs: the check both integrations' parity tests share
(tests_paddlenlp/ and tests_paddleformers/test_scheduler_parity.py)."""
from __future__ import annotations

from typing import Any, Callable, Dict

import pytest

import paddle_llrd

FIVE_NAMES = ["linear", "cosine", "constant", "constant_with_warmup", "polynomial"]

# The keywords the frameworks' Trainer.create_scheduler passes, in several
# shapes: no warmup, warmup, a cosine with 1.5 waves and a polynomial to 0 with
# a square-root power, and warmup as long as the whole run.
RUNS: Dict[str, Dict[str, Any]] = {
    "no-warmup": dict(learning_rate=1e-3, num_warmup_steps=0, num_training_steps=10),
    "warmup": dict(
        learning_rate=5e-4, num_warmup_steps=3, num_training_steps=12, num_cycles=0.5, lr_end=1e-6, power=2.0
    ),
    "odd-shapes": dict(
        learning_rate=2e-5, num_warmup_steps=4, num_training_steps=9, num_cycles=1.5, lr_end=0.0, power=0.5
    ),
    "all-warmup": dict(learning_rate=1.0, num_warmup_steps=10, num_training_steps=10),
}


def assert_same_learning_rates_over_a_whole_run(theirs_get_scheduler: Callable[..., Any], name: str,
                                                settings: Dict[str, Any]) -> None:
    """Every step from 0 to num_training_steps, the steps a Trainer takes.

    (Past the end, paddle_llrd's cosine holds its final value where the
    frameworks' climbs back up: a deliberate difference, see
    docs/migration.rst.)"""
    ours = paddle_llrd.get_scheduler(name, **settings)
    theirs = theirs_get_scheduler(name, **settings)
    total = settings["num_training_steps"]
    divides_by_zero = name == "polynomial" and settings["num_warmup_steps"] == total
    ours_lrs, theirs_lrs = [], []
    for step in range(total + 1):
        ours_lrs.append(ours())  # read as an optimizer reads it
        theirs_lrs.append(theirs.get_lr())
        ours.step()
        if divides_by_zero and step == total - 1:
            # their polynomial computes (s - W) / (T - W) at s == T == W;
            # ours gives the end of the warmup, the peak (no decay step taken yet)
            with pytest.raises(ZeroDivisionError):
                theirs.step()
            assert ours.get_lr() == settings["learning_rate"]
            break
        theirs.step()
    assert ours_lrs == pytest.approx(theirs_lrs, rel=1e-12, abs=1e-18)
    if name != "constant" and settings["num_warmup_steps"] > 0:
        # the comparison covered a changing schedule, not two constants
        assert len(set(theirs_lrs)) > 3
