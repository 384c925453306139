"""The schedules added to the registry beyond PaddleNLP's five:
cosine_with_restarts, inverse_sqrt, cosine_with_min_lr, warmup_stable_decay and
the two annealing schedules.

Every expected value comes from a formula written out in float64, below (Hugging
Face's and Megatron-LM's, transcribed in their own structure) or in
schedule_formulas.py, never from the package's code.
"""
from __future__ import annotations

import copy
import math
import pickle

import numpy as np
import paddle
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from paddle.optimizer.lr import LambdaDecay, LRScheduler

import schedule_formulas as formula
from schedule_formulas import assert_run, expected, run

from paddle_llrd import (
    CosineAnnealingWithWarmupDecay,
    CosineDecayWithWarmup,
    InverseSquareRootSchedule,
    LinearAnnealingWithWarmupDecay,
    SchedulerType,
    TYPE_TO_SCHEDULER_FUNCTION,
    get_cosine_annealing_schedule_with_warmup,
    get_cosine_with_hard_restarts_schedule_with_warmup,
    get_cosine_with_min_lr_schedule_with_warmup,
    get_inverse_sqrt_schedule,
    get_linear_annealing_schedule_with_warmup,
    get_reduce_on_plateau_schedule,
    get_scheduler,
    get_sequential_schedule,
    get_wsd_schedule,
)
from paddle_llrd.schedules.functions import DEFAULT_INVERSE_SQRT_TIMESCALE, DEFAULT_WSD_DECAY_RATIO

PROPERTY_SETTINGS = settings(max_examples=40, deadline=None)
WSD_STYLES = ["linear", "cosine", "exponential", "1-sqrt"]


# --------------------------------------------------------------------------
# Reference formulas (float64, the math module).
# --------------------------------------------------------------------------
def ref_warmup(lr, warmup, s):
    return lr * s / max(1, warmup)


def ref_cosine_min_lr_hf(lr, warmup, total, cycles, rate, s):
    """Hugging Face's get_cosine_with_min_lr_schedule_with_warmup (its curve turns back up after T)."""
    if s < warmup:
        return ref_warmup(lr, warmup, s)
    progress = (s - warmup) / max(1, total - warmup)
    factor = 0.5 * (1.0 + math.cos(math.pi * cycles * 2.0 * progress))
    return lr * max(0.0, factor * (1.0 - rate) + rate)


def ref_cosine_min_lr(lr, warmup, total, cycles, rate, s):
    """The documented curve: the "cosine" formula with the floor rate * lr, held once the decay is over."""
    return formula.cosine(lr, warmup, total, s, cycles, min_lr=lr * rate)


def ref_wsd_megatron(max_lr, min_lr, warmup, total, decay, style, s):
    """Megatron-LM's OptimizerParamScheduler.get_lr with lr_decay_style='WSD' and init_lr=0
    (lr_decay_steps = total, wsd_decay_steps = decay)."""
    if warmup > 0 and s <= warmup:
        return max_lr * s / warmup
    if s > total:
        return min_lr
    anneal_start = total - decay
    if s <= anneal_start:
        coeff = 1.0
    else:
        ratio = (s - anneal_start) / decay
        coeff = {
            "linear": 1.0 - ratio,
            "cosine": 0.5 * (math.cos(math.pi * ratio) + 1.0),
            "exponential": 2.0 * math.pow(0.5, ratio) - 1.0,
            "1-sqrt": 1.0 - math.sqrt(ratio),
        }[style]
    return min_lr + coeff * (max_lr - min_lr)


def ref_wsd_hf(lr, warmup, stable, decay, style, min_ratio, s):
    """Hugging Face's get_wsd_schedule (linear warmup from min_ratio * lr, num_cycles=0.5)."""
    if s < warmup:
        return lr * max(0.0, (s / max(1, warmup)) * (1.0 - min_ratio) + min_ratio)
    if s < warmup + stable:
        return lr
    if s < warmup + stable + decay:
        progress = (s - warmup - stable) / max(1, decay)
        factor = {
            "linear": 1.0 - progress,
            "cosine": 0.5 * (1.0 + math.cos(math.pi * 0.5 * 2.0 * progress)),
            "1-sqrt": 1.0 - math.sqrt(progress),
        }[style]
        return lr * max(0.0, factor * (1.0 - min_ratio) + min_ratio)
    return lr * min_ratio


# (warmup, total): ordinary, no warmup, one step, warmup == total, warmup > total, long runs.
STEP_CASES = [(10, 50), (0, 30), (1, 12), (25, 25), (12, 9), (100, 1000)]


# --------------------------------------------------------------------------
# The names.
# --------------------------------------------------------------------------
def test_new_names_map_to_their_functions():
    table = {
        "cosine_with_restarts": get_cosine_with_hard_restarts_schedule_with_warmup,
        "inverse_sqrt": get_inverse_sqrt_schedule,
        "cosine_with_min_lr": get_cosine_with_min_lr_schedule_with_warmup,
        "warmup_stable_decay": get_wsd_schedule,
        "cosine_annealing_with_warmup": get_cosine_annealing_schedule_with_warmup,
        "linear_annealing_with_warmup": get_linear_annealing_schedule_with_warmup,
        "sequential": get_sequential_schedule,
        "reduce_lr_on_plateau": get_reduce_on_plateau_schedule,
    }
    for name, fn in table.items():
        assert TYPE_TO_SCHEDULER_FUNCTION[SchedulerType(name)] is fn
        assert SchedulerType(name) == name


# --------------------------------------------------------------------------
# cosine_with_restarts.
# --------------------------------------------------------------------------
@pytest.mark.parametrize("cycles", [1, 2, 3.0, 0.5, 1.5, 0.0])
@pytest.mark.parametrize("warmup,total", STEP_CASES)
def test_cosine_with_restarts_whole_run(warmup, total, cycles):
    with formula.warns_if_warmup_outlasts(warmup, total):
        scheduler = get_cosine_with_hard_restarts_schedule_with_warmup(4e-4, warmup, total, num_cycles=cycles)
    assert isinstance(scheduler, LambdaDecay)
    assert_run(scheduler, lambda s: formula.hard_restarts(4e-4, warmup, total, cycles, s), total + 8)


def test_cosine_with_restarts_default_is_one_cycle_as_in_hugging_face():
    assert_run(get_cosine_with_hard_restarts_schedule_with_warmup(1e-3, 4, 24),
               lambda s: formula.hard_restarts(1e-3, 4, 24, 1.0, s), 30)
    assert_run(get_scheduler("cosine_with_restarts", 1e-3, num_warmup_steps=4, num_training_steps=24),
               lambda s: formula.hard_restarts(1e-3, 4, 24, 1.0, s), 30)


def test_cosine_with_restarts_restarts_at_the_peak():
    values = run(get_cosine_with_hard_restarts_schedule_with_warmup(1.0, 10, 130, num_cycles=3), 135)
    # Three cycles of 40 steps after 10 warmup steps: peaks at 10, 50, 90, zero from 130.
    for start in (10, 50, 90):
        assert values[start] == pytest.approx(1.0)
        assert values[start + 20] == pytest.approx(0.5)
        assert np.all(np.diff(values[start:start + 40]) < 0)
    assert np.all(values[130:] == 0.0)


@pytest.mark.parametrize("cycles", [2, 3.7])
def test_cosine_with_restarts_returns_the_hard_restarts_class(cycles):
    # The values are checked against the formula above; this is the documented type.
    scheduler = get_cosine_with_hard_restarts_schedule_with_warmup(1e-3, 5, 30, num_cycles=cycles)
    assert isinstance(scheduler, CosineDecayWithWarmup)
    assert scheduler.with_hard_restarts and scheduler.num_cycles == float(cycles)
    assert (scheduler.warmup_steps, scheduler.total_steps) == (5, 30)


# --------------------------------------------------------------------------
# inverse_sqrt.
# --------------------------------------------------------------------------
@pytest.mark.parametrize("timescale", [None, 1, 7, 500])
@pytest.mark.parametrize("warmup", [1, 4, 30])
def test_inverse_sqrt_whole_run(warmup, timescale):
    scheduler = get_inverse_sqrt_schedule(2e-3, warmup, timescale=timescale)
    assert isinstance(scheduler, LambdaDecay)
    tau = warmup if timescale is None else timescale
    assert_run(scheduler, lambda s: formula.inverse_sqrt_timescale(2e-3, warmup, tau, s), 200)


@pytest.mark.parametrize("warmup", [1, 4, 30])
def test_inverse_sqrt_with_warmup_is_the_transformer_schedule(warmup):
    ours = run(get_inverse_sqrt_schedule(2e-3, warmup), 300)
    theirs = run(InverseSquareRootSchedule(warmup, 2e-3), 300)
    np.testing.assert_allclose(ours, theirs, rtol=1e-13, atol=1e-18)
    # ... and the paddlenlp.ops.optimizer formula written out: lr * sqrt(W) / sqrt(s).
    formula = [2e-3 * s / warmup if s < warmup else 2e-3 * math.sqrt(warmup) / math.sqrt(s) for s in range(300)]
    np.testing.assert_allclose(ours, formula, rtol=1e-13, atol=1e-18)


def test_inverse_sqrt_without_warmup_uses_the_hugging_face_timescale():
    assert DEFAULT_INVERSE_SQRT_TIMESCALE == 10_000
    assert_run(get_inverse_sqrt_schedule(1e-3, 0), lambda s: 1e-3 * math.sqrt(10_000 / (s + 10_000)), 50)
    scheduler = get_inverse_sqrt_schedule(1e-3, 0, last_epoch=29_999)
    assert scheduler() == pytest.approx(0.5e-3, rel=1e-12)  # half the peak at 3 timescales
    assert_run(get_scheduler("inverse_sqrt", 1e-3, num_warmup_steps=0, timescale=1),
               lambda s: 1e-3 / math.sqrt(s + 1), 50)


def test_inverse_sqrt_ignores_num_training_steps_through_get_scheduler():
    scheduler = get_scheduler("inverse_sqrt", 1e-3, num_warmup_steps=5, num_training_steps=20,
                              num_cycles=0.5, lr_end=1e-7, power=1.0)
    assert_run(scheduler, lambda s: formula.inverse_sqrt_timescale(1e-3, 5, 5, s), 60)


# --------------------------------------------------------------------------
# cosine_with_min_lr.
# --------------------------------------------------------------------------
@pytest.mark.parametrize("cycles", [0.5, 1.0, 0.25, 1.5])
@pytest.mark.parametrize("rate", [0.0, 0.1, 0.5, 1.0])
@pytest.mark.parametrize("warmup,total", STEP_CASES)
def test_cosine_with_min_lr_rate_whole_run(warmup, total, rate, cycles):
    with formula.warns_if_warmup_outlasts(warmup, total):
        scheduler = get_cosine_with_min_lr_schedule_with_warmup(4e-4, warmup, total, num_cycles=cycles, min_lr_rate=rate)
    assert isinstance(scheduler, LambdaDecay)
    assert_run(scheduler, lambda s: ref_cosine_min_lr(4e-4, warmup, total, cycles, rate, s), total + 8)


@pytest.mark.parametrize("warmup,total", STEP_CASES)
def test_cosine_with_min_lr_matches_hugging_face_up_to_the_end(warmup, total):
    with formula.warns_if_warmup_outlasts(warmup, total):
        scheduler = get_cosine_with_min_lr_schedule_with_warmup(4e-4, warmup, total, min_lr=4e-5)
    last = max(total, warmup)
    assert_run(scheduler, lambda s: ref_cosine_min_lr_hf(4e-4, warmup, total, 0.5, 0.1, s), last + 1)


def test_cosine_with_min_lr_holds_the_floor_where_hugging_face_climbs_back():
    values = run(get_cosine_with_min_lr_schedule_with_warmup(1e-3, 10, 110, min_lr=1e-4), 160)
    assert values[110:] == pytest.approx([1e-4] * 50, rel=1e-12)
    assert ref_cosine_min_lr_hf(1e-3, 10, 110, 0.5, 0.1, 159) > 2e-4  # the curve not taken


@pytest.mark.parametrize("lr,min_lr", [(1e-3, 1e-4), (3e-4, 0.0), (5e-5, 5e-5), (0.0, 0.0)])
def test_cosine_with_min_lr_absolute_floor(lr, min_lr):
    rate = min_lr / lr if lr > 0 else 0.0
    assert_run(get_cosine_with_min_lr_schedule_with_warmup(lr, 5, 45, min_lr=min_lr),
               lambda s: ref_cosine_min_lr(lr, 5, 45, 0.5, rate, s), 55)


def test_cosine_with_min_lr_through_get_scheduler():
    for floor in ({"min_lr": 2e-4}, {"min_lr_rate": 0.2}):
        scheduler = get_scheduler("cosine_with_min_lr", 1e-3, num_warmup_steps=6, num_training_steps=40, **floor)
        assert_run(scheduler, lambda s: ref_cosine_min_lr(1e-3, 6, 40, 0.5, 0.2, s), 50)
    # An explicit min_lr equal to get_scheduler's default is still "the" floor.
    scheduler = get_scheduler("cosine_with_min_lr", 1e-3, num_warmup_steps=6, num_training_steps=40, min_lr=0.0)
    assert_run(scheduler, lambda s: ref_cosine_min_lr(1e-3, 6, 40, 0.5, 0.0, s), 50)


# --------------------------------------------------------------------------
# warmup_stable_decay.
# --------------------------------------------------------------------------
# (warmup, total, decay): ordinary, no warmup, decay right after warmup, all decay, one-step decay.
WSD_CASES = [(10, 100, 30), (0, 40, 10), (8, 20, 12), (0, 16, 16), (5, 30, 1), (100, 1000, 100)]


@pytest.mark.parametrize("min_ratio", [0.0, 0.1, 1.0])
@pytest.mark.parametrize("style", WSD_STYLES)
@pytest.mark.parametrize("warmup,total,decay", WSD_CASES)
def test_wsd_is_megatron_lm(warmup, total, decay, style, min_ratio):
    scheduler = get_wsd_schedule(2e-3, warmup, total, num_decay_steps=decay, decay_style=style,
                                 min_lr_ratio=min_ratio)
    assert isinstance(scheduler, LambdaDecay)
    fresh_copy = copy.deepcopy(scheduler)
    assert_run(scheduler, lambda s: ref_wsd_megatron(2e-3, 2e-3 * min_ratio, warmup, total, decay, style, s),
               total + 8)
    assert_run(fresh_copy, lambda s: formula.wsd(2e-3, warmup, total, decay, style, min_ratio, s), total + 8)


@pytest.mark.parametrize("min_ratio", [0.0, 0.1])
@pytest.mark.parametrize("style", ["linear", "cosine", "1-sqrt"])
@pytest.mark.parametrize("warmup,total,decay", WSD_CASES + [(6, 20, 0)])
def test_wsd_is_hugging_face_after_warmup(warmup, total, decay, style, min_ratio):
    values = run(get_wsd_schedule(2e-3, warmup, total, num_decay_steps=decay, decay_style=style,
                                  min_lr_ratio=min_ratio), total + 8)
    hf = expected(lambda s: ref_wsd_hf(2e-3, warmup, total - warmup - decay, decay, style, min_ratio, s), total + 8)
    # Hugging Face warms up from min_ratio * lr; here (as in Megatron-LM) from 0.
    start = warmup if min_ratio > 0 else 0
    np.testing.assert_allclose(values[start:], hf[start:], rtol=1e-12, atol=1e-18)


def test_wsd_decay_length_from_ratio_and_default():
    assert DEFAULT_WSD_DECAY_RATIO == 0.1
    assert_run(get_wsd_schedule(1e-3, 10, 200, decay_ratio=0.25, decay_style="linear"),
               lambda s: formula.wsd(1e-3, 10, 200, 50, "linear", 0.0, s), 210)
    assert_run(get_wsd_schedule(1e-3, 10, 200), lambda s: formula.wsd(1e-3, 10, 200, 20, "cosine", 0.0, s), 210)
    # floor(decay_ratio * T), as a float warmup is turned into steps.
    assert_run(get_wsd_schedule(1e-3, 0, 30, decay_ratio=0.25, decay_style="linear"),
               lambda s: formula.wsd(1e-3, 0, 30, 7, "linear", 0.0, s), 35)


def test_wsd_absolute_floor_and_megatron_alias():
    assert_run(get_wsd_schedule(1e-3, 4, 40, num_decay_steps=16, decay_style="minus_sqrt", min_lr=1e-4),
               lambda s: formula.wsd(1e-3, 4, 40, 16, "1-sqrt", 0.1, s), 45)


def test_wsd_through_get_scheduler():
    scheduler = get_scheduler("warmup_stable_decay", 1e-3, num_warmup_steps=4, num_training_steps=40,
                              num_cycles=0.5, lr_end=1e-7, power=1.0,  # what PaddleNLP's Trainer adds
                              num_decay_steps=12, decay_style="exponential", min_lr_ratio=0.05)
    assert_run(scheduler, lambda s: formula.wsd(1e-3, 4, 40, 12, "exponential", 0.05, s), 45)
    scheduler = get_scheduler("warmup_stable_decay", 1e-3, num_warmup_steps=4, num_training_steps=40, min_lr=1e-4,
                              decay_ratio=0.5, decay_style="linear")
    assert_run(scheduler, lambda s: formula.wsd(1e-3, 4, 40, 20, "linear", 0.1, s), 45)


# --------------------------------------------------------------------------
# The annealing schedulers under registry names.
# --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name,function,cls,shape",
    [
        ("cosine_annealing_with_warmup", get_cosine_annealing_schedule_with_warmup,
         CosineAnnealingWithWarmupDecay, "cosine"),
        ("linear_annealing_with_warmup", get_linear_annealing_schedule_with_warmup,
         LinearAnnealingWithWarmupDecay, "linear"),
    ],
)
@pytest.mark.parametrize("min_lr", [0.0, 1e-4, 1e-3])
@pytest.mark.parametrize("warmup,total", [(10, 50), (0, 30), (1, 12), (24, 25), (100, 1000)])
def test_annealing_under_registry_names(name, function, cls, shape, min_lr, warmup, total):
    reference = lambda s: formula.annealing(1e-3, min_lr, warmup, total, shape, s)  # noqa: E731
    direct = function(1e-3, warmup, total, min_lr=min_lr)
    assert isinstance(direct, cls)
    assert (direct.max_lr, direct.min_lr, direct.warmup_step, direct.decay_step) == (1e-3, min_lr, warmup, total)
    assert_run(direct, reference, total + 8)
    by_name = get_scheduler(name, 1e-3, num_warmup_steps=warmup, num_training_steps=total, min_lr=min_lr,
                            num_cycles=0.5, lr_end=1e-7, power=1.0)
    assert_run(by_name, reference, total + 8)


def test_annealing_min_lr_defaults_to_zero():
    assert_run(get_scheduler("linear_annealing_with_warmup", 1e-3, num_warmup_steps=2, num_training_steps=10),
               lambda s: formula.annealing(1e-3, 0.0, 2, 10, "linear", s), 14)


# --------------------------------------------------------------------------
# get_scheduler: the options, what is required, what is refused.
# --------------------------------------------------------------------------
def test_paddlenlp_trainer_call_with_new_names():
    # Exactly PaddleNLP's Trainer.create_scheduler call; its num_cycles defaults to 0.5.
    call = dict(learning_rate=3e-5, num_warmup_steps=6, num_training_steps=40, num_cycles=0.5, lr_end=1e-7, power=1.0)
    references = {
        "cosine_with_restarts": lambda s: formula.hard_restarts(3e-5, 6, 40, 0.5, s),
        "inverse_sqrt": lambda s: formula.inverse_sqrt_timescale(3e-5, 6, 6, s),
        "warmup_stable_decay": lambda s: formula.wsd(3e-5, 6, 40, 4, "cosine", 0.0, s),
        "cosine_annealing_with_warmup": lambda s: formula.annealing(3e-5, 0.0, 6, 40, "cosine", s),
        "linear_annealing_with_warmup": lambda s: formula.annealing(3e-5, 0.0, 6, 40, "linear", s),
    }
    for name, reference in references.items():
        scheduler = get_scheduler(name, **call)
        assert isinstance(scheduler, LRScheduler)
        assert_run(scheduler, reference, 45)
    # cosine_with_min_lr needs its floor, which that call does not carry.
    with pytest.raises(ValueError, match="'cosine_with_min_lr' requires `min_lr`.*`min_lr_rate`"):
        get_scheduler("cosine_with_min_lr", **call)


@pytest.mark.parametrize(
    "name",
    ["cosine_with_restarts", "inverse_sqrt", "cosine_with_min_lr", "warmup_stable_decay",
     "cosine_annealing_with_warmup", "linear_annealing_with_warmup"],
)
def test_missing_num_warmup_steps_is_named(name):
    with pytest.raises(ValueError, match="`num_warmup_steps`"):
        get_scheduler(name, 1e-3, num_training_steps=100, min_lr=1e-5)


@pytest.mark.parametrize(
    "name",
    ["cosine_with_restarts", "cosine_with_min_lr", "warmup_stable_decay",
     "cosine_annealing_with_warmup", "linear_annealing_with_warmup"],
)
def test_missing_num_training_steps_is_named(name):
    with pytest.raises(ValueError, match="`num_training_steps`"):
        get_scheduler(name, 1e-3, num_warmup_steps=10, min_lr=1e-5)


@pytest.mark.parametrize(
    "name,keyword",
    [
        ("cosine", "decay_style"),
        ("linear", "min_lr_rate"),
        ("cosine_with_restarts", "timescale"),
        ("inverse_sqrt", "num_decay_steps"),
        ("cosine_with_min_lr", "min_lr_ratio"),
        ("warmup_stable_decay", "min_lr_rate"),
        ("cosine_annealing_with_warmup", "decay_style"),
    ],
)
def test_keyword_a_schedule_does_not_take_is_a_type_error(name, keyword):
    with pytest.raises(TypeError, match=keyword):
        get_scheduler(name, 1e-3, num_warmup_steps=2, num_training_steps=20, **{keyword: 0.1})


@pytest.mark.parametrize(
    "call,error,arguments",
    [
        (lambda: get_cosine_with_hard_restarts_schedule_with_warmup(1e-3, 2, 20, num_cycles=-1), ValueError,
         ["num_cycles"]),
        (lambda: get_cosine_with_hard_restarts_schedule_with_warmup(1e-3, 2, 20, num_cycles="2"), TypeError,
         ["num_cycles"]),
        (lambda: get_cosine_with_hard_restarts_schedule_with_warmup(1e-3, 2, 20, num_cycles=float("nan")),
         ValueError, ["num_cycles"]),
        (lambda: get_cosine_with_hard_restarts_schedule_with_warmup(1e-3, -2, 20), ValueError, ["num_warmup_steps"]),
        (lambda: get_cosine_with_hard_restarts_schedule_with_warmup(-1e-3, 2, 20), ValueError, ["learning_rate"]),
        (lambda: get_inverse_sqrt_schedule(1e-3, 4, timescale=0), ValueError, ["timescale"]),
        (lambda: get_inverse_sqrt_schedule(1e-3, 4, timescale=2.5), ValueError, ["timescale"]),
        (lambda: get_inverse_sqrt_schedule(1e-3, 4, timescale="long"), TypeError, ["timescale"]),
        (lambda: get_inverse_sqrt_schedule(1e-3, 1.5), ValueError, ["num_warmup_steps"]),
        (lambda: get_inverse_sqrt_schedule(float("inf"), 4), ValueError, ["learning_rate"]),
        (lambda: get_cosine_with_min_lr_schedule_with_warmup(1e-3, 2, 20), ValueError, ["min_lr", "min_lr_rate"]),
        (lambda: get_cosine_with_min_lr_schedule_with_warmup(1e-3, 2, 20, min_lr=1e-4, min_lr_rate=0.1), ValueError,
         ["min_lr", "min_lr_rate"]),
        (lambda: get_cosine_with_min_lr_schedule_with_warmup(1e-3, 2, 20, min_lr=1e-2), ValueError, ["min_lr"]),
        (lambda: get_cosine_with_min_lr_schedule_with_warmup(1e-3, 2, 20, min_lr=-1e-4), ValueError, ["min_lr"]),
        (lambda: get_cosine_with_min_lr_schedule_with_warmup(1e-3, 2, 20, min_lr_rate=1.5), ValueError,
         ["min_lr_rate"]),
        (lambda: get_cosine_with_min_lr_schedule_with_warmup(1e-3, 2, 20, min_lr_rate=float("nan")), ValueError,
         ["min_lr_rate"]),
        (lambda: get_cosine_with_min_lr_schedule_with_warmup(1e-3, 2, 20, min_lr_rate="low"), TypeError,
         ["min_lr_rate"]),
        (lambda: get_cosine_with_min_lr_schedule_with_warmup(1e-3, 2, 20, num_cycles=-0.5, min_lr_rate=0.1),
         ValueError, ["num_cycles"]),
        (lambda: get_wsd_schedule(1e-3, 2, 20, decay_style="step"), ValueError, ["decay_style"]),
        (lambda: get_wsd_schedule(1e-3, 2, 20, decay_style=None), TypeError, ["decay_style"]),
        (lambda: get_wsd_schedule(1e-3, 2, 20, num_decay_steps=4, decay_ratio=0.2), ValueError,
         ["num_decay_steps", "decay_ratio"]),
        (lambda: get_wsd_schedule(1e-3, 2, 20, num_decay_steps=19), ValueError,
         ["num_warmup_steps", "num_decay_steps", "num_training_steps"]),
        (lambda: get_wsd_schedule(1e-3, 15, 20, decay_ratio=0.5), ValueError,
         ["num_warmup_steps", "decay_ratio", "num_training_steps"]),
        (lambda: get_wsd_schedule(1e-3, 2, 20, num_decay_steps=-1), ValueError, ["num_decay_steps"]),
        (lambda: get_wsd_schedule(1e-3, 2, 20, decay_ratio=1.2), ValueError, ["decay_ratio"]),
        (lambda: get_wsd_schedule(1e-3, 2, 20, min_lr_ratio=-0.1), ValueError, ["min_lr_ratio"]),
        (lambda: get_wsd_schedule(1e-3, 2, 20, min_lr_ratio=0.1, min_lr=1e-4), ValueError,
         ["min_lr", "min_lr_ratio"]),
        (lambda: get_wsd_schedule(1e-3, 2, 20, min_lr=2e-3), ValueError, ["min_lr"]),
        (lambda: get_wsd_schedule(1e-3, 2, 0), ValueError, ["num_training_steps"]),
        (lambda: get_wsd_schedule(1e-3, 2, 20, last_epoch=-2), ValueError, ["last_epoch"]),
        (lambda: get_cosine_annealing_schedule_with_warmup(1e-3, 20, 20), ValueError,
         ["num_training_steps", "num_warmup_steps"]),
        (lambda: get_linear_annealing_schedule_with_warmup(1e-3, 30, 20), ValueError,
         ["num_training_steps", "num_warmup_steps"]),
        (lambda: get_cosine_annealing_schedule_with_warmup(1e-3, 2, 20, min_lr=2e-3), ValueError,
         ["min_lr", "learning_rate"]),
        (lambda: get_linear_annealing_schedule_with_warmup(-1.0, 2, 20), ValueError, ["learning_rate"]),
        (lambda: get_scheduler("cosine_with_min_lr", 1e-3, num_warmup_steps=2, num_training_steps=20, min_lr=1e-4,
                               min_lr_rate=0.1), ValueError, ["min_lr", "min_lr_rate"]),
        (lambda: get_scheduler("warmup_stable_decay", 1e-3, num_warmup_steps=2, num_training_steps=20,
                               decay_style="cosin"), ValueError, ["decay_style"]),
    ],
)
def test_bad_arguments_raise_naming_them(call, error, arguments):
    with pytest.raises(error) as info:
        call()
    for argument in arguments:
        assert f"`{argument}`" in str(info.value), (argument, str(info.value))


def test_a_wsd_warmup_leaving_no_room_for_the_default_decay_names_that_default():
    """W = T leaves no room for the decay stage, whose D = floor(0.1 T) = 1 here though no decay was asked."""
    with pytest.raises(ValueError, match=r"decay steps \(1, from `decay_ratio`'s default of 0.1\)"):
        get_scheduler("warmup_stable_decay", 1e-3, num_warmup_steps=10, num_training_steps=10)


def test_wsd_style_error_lists_the_styles():
    with pytest.raises(ValueError) as info:
        get_wsd_schedule(1e-3, 2, 20, decay_style="Cosine")
    for style in WSD_STYLES:
        assert repr(style) in str(info.value)


# --------------------------------------------------------------------------
# Resuming, pickling, a real optimizer.
# --------------------------------------------------------------------------
NEW_SCHEDULES = {
    "cosine_with_restarts": dict(num_cycles=2),
    "inverse_sqrt": dict(timescale=3),
    "cosine_with_min_lr": dict(min_lr_rate=0.1, num_cycles=0.5),
    "warmup_stable_decay": dict(num_decay_steps=10, decay_style="1-sqrt", min_lr_ratio=0.1),
    "cosine_annealing_with_warmup": dict(min_lr=1e-5),
    "linear_annealing_with_warmup": dict(min_lr=1e-5),
}


def make(name, **extra):
    return get_scheduler(name, 1e-3, num_warmup_steps=5, num_training_steps=30, **NEW_SCHEDULES[name], **extra)


@pytest.mark.parametrize("name", list(NEW_SCHEDULES))
@pytest.mark.parametrize("n_skip", [2, 5, 21, 29])
def test_resume_with_last_epoch_and_state_dict(name, n_skip):
    uninterrupted = make(name)
    run(uninterrupted, n_skip + 1)
    state = uninterrupted.state_dict()
    future = run(uninterrupted, 15)
    np.testing.assert_array_equal(run(make(name, last_epoch=n_skip), 15), future)
    restored = make(name)
    restored.set_state_dict(state)
    np.testing.assert_array_equal(run(restored, 15), future)
    thawed = pickle.loads(pickle.dumps(make(name, last_epoch=n_skip)))
    np.testing.assert_array_equal(run(thawed, 15), future)


def test_resume_through_paddle_save(tmp_path):
    uninterrupted = make("warmup_stable_decay")
    run(uninterrupted, 22)
    paddle.save(uninterrupted.state_dict(), str(tmp_path / "sched.pdparams"))
    future = run(uninterrupted, 12)
    restored = make("warmup_stable_decay")
    restored.set_state_dict(paddle.load(str(tmp_path / "sched.pdparams")))
    np.testing.assert_array_equal(run(restored, 12), future)


@pytest.mark.parametrize("name", ["cosine_with_restarts", "warmup_stable_decay", "inverse_sqrt"])
def test_adamw_follows_the_schedule(name):
    references = {
        "cosine_with_restarts": lambda s: formula.hard_restarts(1e-3, 5, 30, 2, s),
        "warmup_stable_decay": lambda s: formula.wsd(1e-3, 5, 30, 10, "1-sqrt", 0.1, s),
        "inverse_sqrt": lambda s: formula.inverse_sqrt_timescale(1e-3, 5, 3, s),
    }
    scheduler = make(name)
    layer = paddle.nn.Linear(3, 2)
    optimizer = paddle.optimizer.AdamW(learning_rate=scheduler, parameters=layer.parameters())
    x = paddle.randn([4, 3])
    for step in range(34):
        assert optimizer.get_lr() == pytest.approx(references[name](step), rel=1e-12, abs=1e-18)
        layer(x).square().mean().backward()
        optimizer.step()
        optimizer.clear_grad()
        scheduler.step()


# --------------------------------------------------------------------------
# Properties the schedules promise.
# --------------------------------------------------------------------------
@st.composite
def lr_warmup_total(draw):
    lr = draw(st.floats(1e-7, 1.0))
    total = draw(st.integers(1, 300))
    warmup = draw(st.integers(0, total))
    return lr, warmup, total


@PROPERTY_SETTINGS
@given(lr_warmup_total(), st.floats(0.0, 4.0))
def test_property_cosine_with_restarts(case, cycles):
    lr, warmup, total = case
    values = run(get_cosine_with_hard_restarts_schedule_with_warmup(lr, warmup, total, num_cycles=cycles), total + 5)
    tol = 1e-12 * lr
    assert np.all(values >= 0.0) and np.all(values <= lr + tol)
    if warmup < total:
        assert values[warmup] == pytest.approx(lr, rel=1e-12)
        assert np.all(values[total:] == 0.0)
        # Within one cycle the lr only falls; it climbs only at a restart.
        progress = (np.arange(warmup, total) - warmup) / (total - warmup)
        cycle = np.floor(cycles * progress)
        same_cycle = cycle[1:] == cycle[:-1]
        assert np.all(np.diff(values[warmup:total])[same_cycle] <= tol)


@PROPERTY_SETTINGS
@given(st.floats(1e-7, 1.0), st.integers(0, 100), st.one_of(st.none(), st.integers(1, 20_000)))
def test_property_inverse_sqrt(lr, warmup, timescale):
    values = run(get_inverse_sqrt_schedule(lr, warmup, timescale=timescale), warmup + 150)
    tol = 1e-12 * lr
    assert values[0] == (lr if warmup == 0 else 0.0)
    assert np.all(values[1:] > 0.0)
    assert np.all(values <= lr + tol)
    assert values[warmup] == pytest.approx(lr, rel=1e-12)
    assert np.all(np.diff(values[warmup:]) < 0.0)  # strictly falling, never reaching 0


@PROPERTY_SETTINGS
@given(lr_warmup_total(), st.floats(0.0, 1.0), st.booleans())
def test_property_cosine_with_min_lr_floor(case, rate, absolute):
    lr, warmup, total = case
    floor = {"min_lr": lr * rate} if absolute else {"min_lr_rate": rate}
    values = run(get_cosine_with_min_lr_schedule_with_warmup(lr, warmup, total, **floor), total + 5)
    tol = 1e-12 * lr
    assert np.all(values <= lr + tol)
    assert np.all(values[warmup:] >= lr * rate - tol)
    assert np.all(np.diff(values[warmup:]) <= tol)
    if warmup < total:
        assert values[warmup] == pytest.approx(lr, rel=1e-12)
        np.testing.assert_allclose(values[total:], lr * rate, rtol=1e-9, atol=tol)


@PROPERTY_SETTINGS
@given(
    lr_warmup_total(),
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
    st.sampled_from(WSD_STYLES),
)
def test_property_wsd(case, decay_fraction, min_ratio, style):
    lr, warmup, total = case
    decay = int(decay_fraction * (total - warmup))
    values = run(get_wsd_schedule(lr, warmup, total, num_decay_steps=decay, decay_style=style,
                                  min_lr_ratio=min_ratio), total + 5)
    tol = 1e-12 * lr
    floor = lr * min_ratio
    if warmup > 0:
        np.testing.assert_allclose(values[:warmup], lr * np.arange(warmup) / warmup, rtol=1e-12, atol=tol)
    assert np.all(values[warmup:total - decay] == lr)  # the stable stage, exactly the peak
    assert np.all(np.diff(values[warmup:]) <= tol)  # never climbs after warmup
    assert np.all(values[warmup:] >= floor - tol) and np.all(values <= lr + tol)
    np.testing.assert_allclose(values[total:], floor, rtol=1e-12, atol=tol)


@PROPERTY_SETTINGS
@given(
    st.floats(1e-7, 1.0),
    st.floats(0.0, 1.0),
    st.integers(0, 100),
    st.integers(1, 200),
    st.sampled_from(["cosine_annealing_with_warmup", "linear_annealing_with_warmup"]),
)
def test_property_annealing(lr, min_fraction, warmup, span, name):
    min_lr = lr * min_fraction
    total = warmup + span
    values = run(get_scheduler(name, lr, num_warmup_steps=warmup, num_training_steps=total, min_lr=min_lr),
                 total + 5)
    tol = 1e-12 * lr
    assert values[warmup] == pytest.approx(lr, rel=1e-12)
    assert np.all(np.diff(values[warmup:]) <= tol)
    assert np.all(values[warmup:] >= min_lr - tol)
    assert np.all(values[total:] == min_lr)
