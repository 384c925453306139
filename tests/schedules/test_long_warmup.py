"""A warmup longer than training (docs/schedules.rst, "A warmup longer than training"): accepted as
PaddleNLP accepts it, with the same values (PaddleNLP's formulas, schedule_formulas.py), and one
LongWarmupWarning that names the caller's arguments and points at the caller's line; none for a
warmup up to the end of training. ConstScheduleWithWarmup / "constant_with_warmup" warn like the
others wherever they are told the training's length."""
from __future__ import annotations

import warnings

import pytest

import schedule_formulas as formula
from schedule_formulas import assert_run

from paddle_llrd import (
    ConstScheduleWithWarmup,
    CosineDecayWithWarmup,
    LongWarmupWarning,
    LinearDecayWithWarmup,
    PolyDecayWithWarmup,
    get_constant_schedule_with_warmup,
    get_cosine_schedule_with_warmup,
    get_linear_schedule_with_warmup,
    get_polynomial_decay_schedule_with_warmup,
    get_scheduler,
)

LR, TOTAL, WARMUP = 0.5, 10, 14
STEPS = WARMUP + 4  # through the end of the warmup and past it
LR_END = 0.01

CLASSES = {
    "LinearDecayWithWarmup": (
        lambda warmup: LinearDecayWithWarmup(LR, TOTAL, warmup),
        lambda s: formula.linear(LR, WARMUP, TOTAL, s),
    ),
    "CosineDecayWithWarmup": (
        lambda warmup: CosineDecayWithWarmup(LR, TOTAL, warmup),
        lambda s: formula.cosine(LR, WARMUP, TOTAL, s),
    ),
    "PolyDecayWithWarmup": (
        lambda warmup: PolyDecayWithWarmup(LR, TOTAL, warmup, lr_end=LR_END),
        lambda s: formula.polynomial(LR, WARMUP, TOTAL, s, LR_END, 1.0),
    ),
    "ConstScheduleWithWarmup": (
        lambda warmup: ConstScheduleWithWarmup(LR, warmup, total_steps=TOTAL),
        lambda s: formula.constant_with_warmup(LR, WARMUP, s),
    ),
}

REGISTRY = {
    "get_linear_schedule_with_warmup": (
        lambda warmup: get_linear_schedule_with_warmup(LR, warmup, TOTAL),
        lambda s: formula.linear(LR, WARMUP, TOTAL, s),
    ),
    "get_cosine_schedule_with_warmup": (
        lambda warmup: get_cosine_schedule_with_warmup(LR, warmup, TOTAL),
        lambda s: formula.cosine(LR, WARMUP, TOTAL, s),
    ),
    "get_polynomial_decay_schedule_with_warmup": (
        lambda warmup: get_polynomial_decay_schedule_with_warmup(LR, warmup, TOTAL, lr_end=LR_END),
        lambda s: formula.polynomial(LR, WARMUP, TOTAL, s, LR_END, 1.0),
    ),
    "get_scheduler('linear')": (
        lambda warmup: get_scheduler("linear", LR, num_warmup_steps=warmup, num_training_steps=TOTAL),
        lambda s: formula.linear(LR, WARMUP, TOTAL, s),
    ),
    "get_scheduler('cosine')": (
        lambda warmup: get_scheduler("cosine", LR, num_warmup_steps=warmup, num_training_steps=TOTAL),
        lambda s: formula.cosine(LR, WARMUP, TOTAL, s),
    ),
    "get_scheduler('polynomial')": (
        lambda warmup: get_scheduler(
            "polynomial", LR, num_warmup_steps=warmup, num_training_steps=TOTAL, lr_end=LR_END
        ),
        lambda s: formula.polynomial(LR, WARMUP, TOTAL, s, LR_END, 1.0),
    ),
    "get_constant_schedule_with_warmup": (
        lambda warmup: get_constant_schedule_with_warmup(LR, warmup, num_training_steps=TOTAL),
        lambda s: formula.constant_with_warmup(LR, WARMUP, s),
    ),
    "get_scheduler('constant_with_warmup')": (
        lambda warmup: get_scheduler("constant_with_warmup", LR, num_warmup_steps=warmup, num_training_steps=TOTAL),
        lambda s: formula.constant_with_warmup(LR, WARMUP, s),
    ),
    "get_scheduler('cosine_with_restarts')": (
        lambda warmup: get_scheduler("cosine_with_restarts", LR, num_warmup_steps=warmup, num_training_steps=TOTAL),
        lambda s: formula.hard_restarts(LR, WARMUP, TOTAL, 1.0, s),
    ),
    "get_scheduler('cosine_with_min_lr')": (
        lambda warmup: get_scheduler("cosine_with_min_lr", LR, num_warmup_steps=warmup, num_training_steps=TOTAL,
                                     min_lr_rate=0.0),
        lambda s: formula.cosine(LR, WARMUP, TOTAL, s),
    ),
}


def _one_warning(build):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scheduler = build(WARMUP)
    assert len(caught) == 1, [str(w.message) for w in caught]
    assert caught[0].category is LongWarmupWarning
    assert caught[0].filename == __file__  # the caller's line (here, the lambda above), not the package's
    return scheduler, str(caught[0].message)


@pytest.mark.parametrize("owner", list(CLASSES))
def test_classes_warn_naming_warmup_and_total_steps_and_keep_paddlenlps_values(owner):
    build, expected = CLASSES[owner]
    scheduler, message = _one_warning(build)
    assert message.startswith(f"{owner}: the warmup (`warmup` = {WARMUP} steps) is longer than training")
    assert f"(`total_steps` = {TOTAL})" in message
    assert f"step {TOTAL - 1} trains at {(TOTAL - 1) / WARMUP:.3g} of the peak" in message
    assert_run(scheduler, expected, STEPS)


@pytest.mark.parametrize("owner", list(REGISTRY))
def test_registry_functions_warn_naming_num_warmup_steps_and_num_training_steps(owner):
    build, expected = REGISTRY[owner]
    scheduler, message = _one_warning(build)
    assert message.startswith(f"{owner}: the warmup (`num_warmup_steps` = {WARMUP} steps) is longer than training")
    assert f"(`num_training_steps` = {TOTAL})" in message
    assert "`warmup`" not in message and "`total_steps`" not in message
    assert_run(scheduler, expected, STEPS)


NO_WARNING_CASES = [(owner, warmup) for owner in CLASSES for warmup in (0, 3, TOTAL, 1.0)] + [
    (owner, warmup) for owner in REGISTRY for warmup in (0, 3, TOTAL)  # the registry takes whole steps only
]


def test_constant_with_warmup_without_a_length_cannot_tell_and_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_run(ConstScheduleWithWarmup(LR, WARMUP), lambda s: formula.constant_with_warmup(LR, WARMUP, s), STEPS)
        assert_run(get_constant_schedule_with_warmup(LR, WARMUP),
                   lambda s: formula.constant_with_warmup(LR, WARMUP, s), STEPS)


@pytest.mark.parametrize("owner, warmup", NO_WARNING_CASES)
def test_a_warmup_up_to_the_end_of_training_does_not_warn(owner, warmup):
    build = {**CLASSES, **REGISTRY}[owner][0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build(warmup)
