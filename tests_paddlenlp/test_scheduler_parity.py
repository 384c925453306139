"""paddle_llrd.get_scheduler against PaddleNLP 2.8.1's own
paddlenlp.trainer.trainer_utils.get_scheduler, for every lr_scheduler_type string
that PaddleNLP's TrainingArguments accepts, over whole runs
(tests_shared/scheduler_parity.py)."""
from __future__ import annotations

import pytest
from paddlenlp.trainer.trainer_utils import SchedulerType as PaddleNLPSchedulerType
from paddlenlp.trainer.trainer_utils import get_scheduler as paddlenlp_get_scheduler
from scheduler_parity import FIVE_NAMES, RUNS, assert_same_learning_rates_over_a_whole_run

import paddle_llrd


def test_the_five_names_are_paddlenlps():
    assert sorted(member.value for member in PaddleNLPSchedulerType) == sorted(FIVE_NAMES)


@pytest.mark.parametrize("run", sorted(RUNS))
@pytest.mark.parametrize("name", FIVE_NAMES)
def test_same_learning_rates_as_paddlenlp_over_a_whole_run(name, run):
    assert_same_learning_rates_over_a_whole_run(paddlenlp_get_scheduler, name, RUNS[run])


@pytest.mark.parametrize("name", FIVE_NAMES)
@pytest.mark.filterwarnings("ignore::paddle_llrd.DetachedSchedulerWarning")  # no optimizer follows it, on purpose
def test_the_enum_paddlenlp_args_hold_is_accepted(name):
    """TrainingArguments stores PaddleNLP's SchedulerType member, not a str."""
    settings = RUNS["warmup"]
    ours = paddle_llrd.get_scheduler(PaddleNLPSchedulerType(name), **settings)
    theirs = paddlenlp_get_scheduler(name, **settings)
    for _ in range(settings["num_training_steps"]):
        ours.step()
        theirs.step()
    assert ours.get_lr() == pytest.approx(theirs.get_lr(), rel=1e-12, abs=1e-18)
