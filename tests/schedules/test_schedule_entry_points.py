"""Each rule of the schedules gives one answer at every entry point (docs/schedules.rst): the
constructor, the ``get_*`` function, ``get_scheduler``, the Trainer fields (checked as
``TrainingArguments`` checks them, built as ``create_scheduler`` builds them) and the command-line
flags of ``python -m paddle_llrd schedules``. A test here fails if two entry points part again:

* ``num_cycles`` of a cosine with hard restarts: a real number >= 0, an ``int`` a whole number of cycles;
* "has a warmup": the registry's answer, which the Trainer reads;
* a warmup longer than training: one ``LongWarmupWarning`` wherever the training's length is known.
"""
from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pytest

import schedule_formulas as formula
from schedule_formulas import run

from paddle_llrd import (
    ConstScheduleWithWarmup,
    CosineDecayWithWarmup,
    LinearDecayWithWarmup,
    LongWarmupWarning,
    PolyDecayWithWarmup,
    TYPE_TO_SCHEDULER_FUNCTION,
    TrainerSettingWarning,
    get_constant_schedule_with_warmup,
    get_cosine_schedule_with_warmup,
    get_cosine_with_hard_restarts_schedule_with_warmup,
    get_cosine_with_min_lr_schedule_with_warmup,
    get_linear_schedule_with_warmup,
    get_polynomial_decay_schedule_with_warmup,
    get_scheduler,
)
from paddle_llrd.cli import schedule_table
from paddle_llrd.cli import schedules as schedule_cli
from paddle_llrd.integrations.training_arguments import check_fields, schedule_takes_warmup
from paddle_llrd.integrations.builders import build_scheduler
from paddle_llrd.schedules.curve import lr_curve
from paddle_llrd.schedules.registry import schedule_info

LR, WARMUP, TOTAL = 1e-3, 4, 24


def trainer_args(name, warmup_steps=WARMUP, kwargs=None, **fields):
    """The fields an LLRDTrainer builds its schedule from, checked as TrainingArguments checks them
    (PaddleNLP's num_cycles, lr_end and power at their defaults unless given)."""
    checked = check_fields({"lr_scheduler_type": name, "lr_scheduler_kwargs": kwargs or {}})
    base = dict(lr_scheduler_type=checked["lr_scheduler_type"], learning_rate=LR, warmup_steps=warmup_steps,
                warmup_ratio=0.0, num_cycles=0.5, lr_end=1e-7, power=1.0,
                lr_scheduler_kwargs=checked["lr_scheduler_kwargs"])
    return SimpleNamespace(**{**base, **fields})


# --------------------------------------------------------------------------
# num_cycles of a cosine with hard restarts.
# --------------------------------------------------------------------------
def _hard_restart_entry_points(cycles):
    table = dict((label, factory) for label, _, factory in
                 schedule_table.registry_schedules(LR, WARMUP, TOTAL, num_cycles=cycles))
    return {
        "CosineDecayWithWarmup": lambda: CosineDecayWithWarmup(LR, TOTAL, WARMUP, with_hard_restarts=True,
                                                               num_cycles=cycles),
        "get_cosine_with_hard_restarts_schedule_with_warmup": lambda: (
            get_cosine_with_hard_restarts_schedule_with_warmup(LR, WARMUP, TOTAL, num_cycles=cycles)),
        "get_scheduler": lambda: get_scheduler("cosine_with_restarts", LR, num_warmup_steps=WARMUP,
                                               num_training_steps=TOTAL, num_cycles=cycles),
        "Trainer field num_cycles": lambda: build_scheduler(trainer_args("cosine_with_restarts", num_cycles=cycles),
                                                            TOTAL),
        "Trainer lr_scheduler_kwargs": lambda: build_scheduler(
            trainer_args("cosine_with_restarts", kwargs={"num_cycles": cycles}), TOTAL),
        "schedules table": table["cosine_with_restarts"],
    }


@pytest.mark.parametrize("cycles", [2, np.int64(3), 0, 2.0, 0.5, 3.25])
def test_num_cycles_with_hard_restarts_is_one_rule_at_every_entry_point(cycles):
    expected = [formula.hard_restarts(LR, WARMUP, TOTAL, float(cycles), s) for s in range(TOTAL + 3)]
    for entry, build in _hard_restart_entry_points(cycles).items():
        np.testing.assert_allclose(run(build(), TOTAL + 3), expected, rtol=1e-13, atol=1e-18, err_msg=entry)


@pytest.mark.parametrize("cycles,error", [(True, TypeError), ("2", TypeError), (-1, ValueError),
                                          (float("nan"), ValueError), (float("inf"), ValueError)])
def test_a_bad_num_cycles_with_hard_restarts_is_refused_alike_at_every_entry_point(cycles, error):
    for entry, build in _hard_restart_entry_points(cycles).items():
        if entry == "Trainer lr_scheduler_kwargs" and isinstance(cycles, str):
            continue  # a numeric string there is a YAML number: the fields' check reads "2" as 2.0
        with pytest.raises(error, match="`num_cycles`"):
            build()
    for text in ("-1", "nan"):  # the command line refuses it as a usage error
        with pytest.raises(SystemExit) as info:
            schedule_cli.main(["--num-cycles", text, "--no-plot"])
        assert info.value.code == 2


# --------------------------------------------------------------------------
# "has a warmup".
# --------------------------------------------------------------------------
#: Options each schedule needs besides a peak, a warmup and a length.
NEEDS = {"cosine_with_min_lr": {"min_lr_rate": 0.1}, "reduce_lr_on_plateau": {"patience": 2},
         "sequential": {"stages": [{"name": "linear", "num_steps": 12}, {"name": "constant"}]}}


def _warmup_warnings(caught):
    return [w for w in caught if "has no warmup" in str(w.message)]


@pytest.mark.parametrize("name", [str(name) for name in TYPE_TO_SCHEDULER_FUNCTION])
def test_has_a_warmup_is_the_registrys_answer_at_every_entry_point(name):
    has_warmup = schedule_info(name).warmup
    assert schedule_takes_warmup(name) is has_warmup
    args = trainer_args(name, kwargs=NEEDS.get(name))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scheduler = build_scheduler(args, TOTAL)
    # The Trainer warns exactly when the registry says the schedule has no warmup, and builds it without one.
    assert bool(_warmup_warnings(caught)) is not has_warmup, [str(w.message) for w in caught]
    lrs = lr_curve(scheduler.scheduler if hasattr(scheduler, "scheduler") else scheduler, WARMUP,
                   metric=lambda step: 1.0)
    if has_warmup:  # and it does warm up: from 0 to the peak over the warmup steps
        assert lrs[0] < lrs[WARMUP] and lrs[WARMUP] == pytest.approx(LR, rel=1e-12), lrs
    else:
        assert lrs == pytest.approx([LR] * (WARMUP + 1), rel=1e-12)


def test_a_schedule_without_a_warmup_warns_and_runs_without_it_through_a_trainer():
    """reduce_lr_on_plateau (whose get_scheduler refuses a warmup) and constant alike: the warning, then the peak
    (reduce_lr_on_plateau also says that without evaluations its lr never moves)."""
    for name in ("constant", "reduce_lr_on_plateau"):
        with pytest.warns(TrainerSettingWarning) as warned:
            scheduler = build_scheduler(trainer_args(name), TOTAL)
        messages = [str(warning.message) for warning in warned]
        assert any(f"lr_scheduler_type='{name}' has no warmup" in message for message in messages), messages
        assert any("evaluation_strategy is 'no'" in message for message in messages) is (
            name == "reduce_lr_on_plateau"), messages
        inner = getattr(scheduler, "scheduler", scheduler)
        assert inner() == LR


def test_a_sequential_run_refuses_a_warmup_its_first_stage_cannot_take():
    stages = [{"name": "constant", "num_steps": 12}, {"name": "linear"}]
    with pytest.raises(ValueError, match=r"`stages\[0\]` \('constant'\) has no warmup.*`num_warmup_steps` \(4\)"):
        get_scheduler("sequential", LR, num_warmup_steps=WARMUP, num_training_steps=TOTAL, stages=stages)
    with pytest.raises(ValueError, match=r"`stages\[0\]` \('constant'\) has no warmup"):
        build_scheduler(trainer_args("sequential", kwargs={"stages": stages}), TOTAL)
    # Without a warmup the same stages run.
    lrs = run(get_scheduler("sequential", LR, num_warmup_steps=0, num_training_steps=TOTAL, stages=stages), TOTAL)
    assert lrs[:12] == pytest.approx([LR] * 12)


# --------------------------------------------------------------------------
# A warmup longer than training.
# --------------------------------------------------------------------------
LONG = 30  # warmup steps, longer than TOTAL

#: Each schedule with a warmup and an end: its class (if any) and get_* function, with what else it needs.
WITH_AN_END = {
    "linear": (lambda w: LinearDecayWithWarmup(LR, TOTAL, w), lambda w: get_linear_schedule_with_warmup(LR, w, TOTAL)),
    "cosine": (None, lambda w: get_cosine_schedule_with_warmup(LR, w, TOTAL)),
    "constant_with_warmup": (lambda w: ConstScheduleWithWarmup(LR, w, total_steps=TOTAL),
                             lambda w: get_constant_schedule_with_warmup(LR, w, num_training_steps=TOTAL)),
    "polynomial": (lambda w: PolyDecayWithWarmup(LR, TOTAL, w),
                   lambda w: get_polynomial_decay_schedule_with_warmup(LR, w, TOTAL)),
    "cosine_with_restarts": (lambda w: CosineDecayWithWarmup(LR, TOTAL, w, with_hard_restarts=True),
                             lambda w: get_cosine_with_hard_restarts_schedule_with_warmup(LR, w, TOTAL)),
    "cosine_with_min_lr": (None, lambda w: get_cosine_with_min_lr_schedule_with_warmup(LR, w, TOTAL, min_lr_rate=0.1)),
}


def _long_warmup_warnings(build):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build()
    return [w for w in caught if issubclass(w.category, LongWarmupWarning)], caught


@pytest.mark.parametrize("name", sorted(WITH_AN_END))
@pytest.mark.parametrize("warmup", [LONG, TOTAL, 3])
def test_a_warmup_longer_than_training_warns_once_at_every_entry_point(name, warmup):
    make_class, make_function = WITH_AN_END[name]
    entry_points = {
        "get_*": lambda: make_function(warmup),
        "get_scheduler": lambda: get_scheduler(name, LR, num_warmup_steps=warmup, num_training_steps=TOTAL,
                                               **NEEDS.get(name, {})),
        "Trainer": lambda: build_scheduler(trainer_args(name, warmup_steps=warmup, kwargs=NEEDS.get(name)), TOTAL),
    }
    if make_class is not None:
        entry_points["class"] = lambda: make_class(warmup)
    for entry, build in entry_points.items():
        long_warmups, caught = _long_warmup_warnings(build)
        assert len(long_warmups) == (1 if warmup > TOTAL else 0), (entry, [str(w.message) for w in caught])
        if long_warmups:
            assert long_warmups[0].filename == __file__, entry  # the user's line
            assert f"= {warmup} steps) is longer than training" in str(long_warmups[0].message)


@pytest.mark.parametrize("name", ["warmup_stable_decay", "cosine_annealing_with_warmup",
                                  "linear_annealing_with_warmup"])
def test_a_schedule_whose_decay_must_fit_refuses_a_long_warmup_at_every_entry_point(name):
    for build in (lambda: get_scheduler(name, LR, num_warmup_steps=LONG, num_training_steps=TOTAL),
                  lambda: build_scheduler(trainer_args(name, warmup_steps=LONG), TOTAL)):
        with pytest.raises(ValueError, match="`num_warmup_steps`"):
            build()


def test_the_schedules_command_says_it_once_and_lets_no_long_warmup_warning_through(capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error", LongWarmupWarning)
        assert schedule_cli.main(["--no-plot", "--warmup-steps", str(LONG), "--total-steps", str(TOTAL)]) == 0
    out = capsys.readouterr().out
    assert out.count("longer than --total-steps") == 1
    # The class filter is the command's own: outside it the warning is given again.
    with pytest.warns(LongWarmupWarning):
        get_linear_schedule_with_warmup(LR, LONG, TOTAL)
