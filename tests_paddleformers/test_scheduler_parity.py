"""paddle_llrd.get_scheduler against PaddleFormers 1.2.0's own
paddleformers.trainer.trainer_utils.get_scheduler, for its five
lr_scheduler_type names, with and without its min_lr floor, over whole runs
(tests_shared/scheduler_parity.py)."""
from __future__ import annotations

import pytest
from paddleformers.trainer.trainer_utils import SchedulerType as PaddleFormersSchedulerType
from paddleformers.trainer.trainer_utils import get_scheduler as paddleformers_get_scheduler
from scheduler_parity import FIVE_NAMES, RUNS, assert_same_learning_rates_over_a_whole_run

import paddle_llrd


def test_the_five_names_are_paddleformers():
    assert sorted(member.value for member in PaddleFormersSchedulerType) == sorted(FIVE_NAMES)


@pytest.mark.parametrize("min_lr_share", [0.0, 0.2])
@pytest.mark.parametrize("run", sorted(RUNS))
@pytest.mark.parametrize("name", FIVE_NAMES)
def test_same_learning_rates_as_paddleformers_over_a_whole_run(name, run, min_lr_share):
    """PaddleFormers' Trainer passes min_lr to every name; only cosine uses it."""
    settings = dict(RUNS[run], min_lr=min_lr_share * RUNS[run]["learning_rate"])
    assert_same_learning_rates_over_a_whole_run(paddleformers_get_scheduler, name, settings)


@pytest.mark.filterwarnings("ignore::paddle_llrd.DetachedSchedulerWarning")  # no optimizer follows it, on purpose
def test_min_lr_is_the_cosine_floor():
    settings = dict(learning_rate=1e-3, num_warmup_steps=2, num_training_steps=10, min_lr=3e-4)
    scheduler = paddle_llrd.get_scheduler("cosine", **settings)
    for _ in range(10):
        scheduler.step()
    assert scheduler.get_lr() == pytest.approx(3e-4, rel=1e-12)
