"""paddle_llrd.get_scheduler against PaddleNLP 2.8.1's own
paddlenlp.trainer.trainer_utils.get_scheduler, for every lr_scheduler_type string
that PaddleNLP's TrainingArguments accepts, over whole runs: every step from 0
to num_training_steps, the steps a Trainer takes. (Past the end, paddle_llrd's
cosine holds its final value where PaddleNLP's climbs back up: a deliberate
difference, see docs/migration.rst.)"""
from __future__ import annotations

import pytest
from paddlenlp.trainer.trainer_utils import SchedulerType as PaddleNLPSchedulerType
from paddlenlp.trainer.trainer_utils import get_scheduler as paddlenlp_get_scheduler

import paddle_llrd

PADDLENLP_NAMES = ["linear", "cosine", "constant", "constant_with_warmup", "polynomial"]

# The keywords PaddleNLP's Trainer.create_scheduler passes, in several shapes:
# no warmup, warmup, a cosine with 1.5 waves and a polynomial to 0 with a
# square-root power, and warmup as long as the whole run.
RUNS = {
    "no-warmup": dict(learning_rate=1e-3, num_warmup_steps=0, num_training_steps=10),
    "warmup": dict(
        learning_rate=5e-4, num_warmup_steps=3, num_training_steps=12, num_cycles=0.5, lr_end=1e-6, power=2.0
    ),
    "odd-shapes": dict(
        learning_rate=2e-5, num_warmup_steps=4, num_training_steps=9, num_cycles=1.5, lr_end=0.0, power=0.5
    ),
    "all-warmup": dict(learning_rate=1.0, num_warmup_steps=10, num_training_steps=10),
}


def test_the_five_names_are_paddlenlps():
    assert sorted(member.value for member in PaddleNLPSchedulerType) == sorted(PADDLENLP_NAMES)


@pytest.mark.parametrize("run", sorted(RUNS))
@pytest.mark.parametrize("name", PADDLENLP_NAMES)
def test_same_learning_rates_as_paddlenlp_over_a_whole_run(name, run):
    settings = RUNS[run]
    ours = paddle_llrd.get_scheduler(name, **settings)
    theirs = paddlenlp_get_scheduler(name, **settings)
    total = settings["num_training_steps"]
    paddlenlp_divides_by_zero = name == "polynomial" and settings["num_warmup_steps"] == total
    ours_lrs, theirs_lrs = [], []
    for step in range(total + 1):
        ours_lrs.append(ours.get_lr())
        theirs_lrs.append(theirs.get_lr())
        ours.step()
        if paddlenlp_divides_by_zero and step == total - 1:
            # PaddleNLP's polynomial computes (s - W) / (T - W) at s == T == W;
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


@pytest.mark.parametrize("name", PADDLENLP_NAMES)
def test_the_enum_paddlenlp_args_hold_is_accepted(name):
    """TrainingArguments stores PaddleNLP's SchedulerType member, not a str."""
    settings = RUNS["warmup"]
    ours = paddle_llrd.get_scheduler(PaddleNLPSchedulerType(name), **settings)
    theirs = paddlenlp_get_scheduler(name, **settings)
    for _ in range(settings["num_training_steps"]):
        ours.step()
        theirs.step()
    assert ours.get_lr() == pytest.approx(theirs.get_lr(), rel=1e-12, abs=1e-18)
