"""``lr_warmup_init`` (Megatron-LM's ``--lr-warmup-init``) through ``get_scheduler``.

The reference is Megatron-LM's ``OptimizerParamScheduler.get_lr``
(megatron/core/optimizer_param_scheduler.py), written out below from its
definition in float64; the package's schedules are stepped as in training.
"""
from __future__ import annotations

import copy
import math
import pickle

import numpy as np
import paddle
import pytest

import schedule_formulas as formula
from paddle_llrd import get_scheduler
from reference_adamw import ReferenceAdamW
from adamwdl_runs import make_adamwdl, ratio_fn, tiny_bert, train_and_compare, weights_of


def megatron_lr(num_steps, *, init_lr, max_lr, min_lr, warmup, decay_steps, style,
                wsd_decay_steps=None, wsd_style=None):
    """Megatron-LM's OptimizerParamScheduler.get_lr at ``num_steps`` (its lr_warmup_steps = ``warmup``,
    lr_decay_steps = ``decay_steps``, lr_decay_style = ``style``)."""
    if warmup > 0 and num_steps <= warmup:
        return init_lr + (max_lr - init_lr) * float(num_steps) / float(warmup)
    if style == "constant":
        return max_lr
    if num_steps > decay_steps:
        return min_lr
    if style == "inverse-square-root":
        lr = max_lr * max(warmup, 1) ** 0.5 / max(num_steps, 1) ** 0.5
        return max(min_lr, lr)
    decay_ratio = float(num_steps - warmup) / float(decay_steps - warmup)
    assert 0.0 <= decay_ratio <= 1.0
    delta_lr = max_lr - min_lr
    if style == "linear":
        coeff = 1.0 - decay_ratio
    elif style == "cosine":
        coeff = 0.5 * (math.cos(math.pi * decay_ratio) + 1.0)
    elif style == "WSD":
        anneal_start = decay_steps - wsd_decay_steps
        if num_steps <= anneal_start:
            coeff = 1.0
        else:
            r = float(num_steps - anneal_start) / float(wsd_decay_steps)
            coeff = {
                "linear": 1.0 - r,
                "cosine": 0.5 * (math.cos(math.pi * r) + 1.0),
                "exponential": 2.0 * math.pow(0.5, r) - 1.0,
                "minus_sqrt": 1.0 - math.sqrt(r),
            }[wsd_style]
    else:
        raise AssertionError(style)
    return min_lr + coeff * delta_lr


PEAK, WARMUP, TOTAL = 3e-4, 8, 40
STEPS = TOTAL + 6  # past the end too: Megatron holds min_lr there, as the package does
INITS = [0.0, 3e-5, 1.5e-4, PEAK]


def megatron_run(**settings):
    return np.array([megatron_lr(s, **settings) for s in range(STEPS)])


@pytest.mark.parametrize("init", INITS)
@pytest.mark.parametrize(
    "name,options,megatron",
    [
        ("linear", {}, dict(min_lr=0.0, style="linear")),
        ("cosine", {}, dict(min_lr=0.0, style="cosine")),
        ("cosine", {"min_lr": 3e-5}, dict(min_lr=3e-5, style="cosine")),
        ("cosine_with_min_lr", {"min_lr_rate": 0.1}, dict(min_lr=3e-5, style="cosine")),
        ("cosine_annealing_with_warmup", {"min_lr": 3e-5}, dict(min_lr=3e-5, style="cosine")),
        ("linear_annealing_with_warmup", {"min_lr": 3e-5}, dict(min_lr=3e-5, style="linear")),
        ("constant_with_warmup", {}, dict(min_lr=0.0, style="constant")),
    ],
    ids=["linear", "cosine", "cosine-min_lr", "cosine_with_min_lr", "cosine_annealing", "linear_annealing",
         "constant_with_warmup"],
)
def test_equals_megatron_get_lr(name, options, megatron, init):
    scheduler = get_scheduler(name, PEAK, num_warmup_steps=WARMUP, num_training_steps=TOTAL,
                              lr_warmup_init=init, **options)
    expected = megatron_run(init_lr=init, max_lr=PEAK, warmup=WARMUP, decay_steps=TOTAL, **megatron)
    np.testing.assert_allclose(formula.run(scheduler, STEPS), expected, rtol=1e-12, atol=1e-18)


@pytest.mark.parametrize("init", INITS)
@pytest.mark.parametrize("style,megatron_style", [("linear", "linear"), ("cosine", "cosine"),
                                                  ("exponential", "exponential"), ("1-sqrt", "minus_sqrt")])
@pytest.mark.parametrize("floor", [0.0, 0.2])
def test_wsd_equals_megatron_get_lr(style, megatron_style, floor, init):
    scheduler = get_scheduler("warmup_stable_decay", PEAK, num_warmup_steps=WARMUP, num_training_steps=TOTAL,
                              num_decay_steps=12, decay_style=style, min_lr_ratio=floor, lr_warmup_init=init)
    expected = megatron_run(init_lr=init, max_lr=PEAK, min_lr=floor * PEAK, warmup=WARMUP, decay_steps=TOTAL,
                            style="WSD", wsd_decay_steps=12, wsd_style=megatron_style)
    np.testing.assert_allclose(formula.run(scheduler, STEPS), expected, rtol=1e-12, atol=1e-18)


@pytest.mark.parametrize("init", INITS)
def test_inverse_sqrt_equals_megatron_through_its_decay_steps(init):
    # Megatron's inverse-square-root holds min_lr after lr_decay_steps; ours never ends, so compare up to there.
    scheduler = get_scheduler("inverse_sqrt", PEAK, num_warmup_steps=WARMUP, lr_warmup_init=init)
    expected = [megatron_lr(s, init_lr=init, max_lr=PEAK, min_lr=0.0, warmup=WARMUP, decay_steps=10 * TOTAL,
                            style="inverse-square-root") for s in range(10 * TOTAL + 1)]
    np.testing.assert_allclose(formula.run(scheduler, 10 * TOTAL + 1), expected, rtol=1e-12, atol=1e-18)


WARMUP_NAMES = {
    "linear": {},
    "cosine": {},
    "constant_with_warmup": {},
    "polynomial": {"lr_end": 1e-6, "power": 2.0},
    "cosine_with_restarts": {"num_cycles": 2},
    "inverse_sqrt": {},
    "cosine_with_min_lr": {"min_lr_rate": 0.1},
    "warmup_stable_decay": {"decay_style": "linear"},
    "cosine_annealing_with_warmup": {"min_lr": 1e-5},
    "linear_annealing_with_warmup": {"min_lr": 1e-5},
}


@pytest.mark.parametrize("name", sorted(WARMUP_NAMES))
@pytest.mark.parametrize("warmup", [1, 5, 17])
def test_only_the_warmup_moves(name, warmup):
    """Before W: init + (peak - init) * s / W; from W on: the same values as without lr_warmup_init;
    lr_warmup_init=0: every value as without it."""
    init = 4e-5
    options = WARMUP_NAMES[name]

    def build(**extra):
        return get_scheduler(name, PEAK, num_warmup_steps=warmup, num_training_steps=TOTAL, **options, **extra)

    plain = formula.run(build(), STEPS)
    started = formula.run(build(lr_warmup_init=init), STEPS)
    ramp = [init + (PEAK - init) * s / warmup for s in range(warmup)]
    np.testing.assert_allclose(started[:warmup], ramp, rtol=1e-12, atol=1e-18)
    np.testing.assert_array_equal(started[warmup:], plain[warmup:])
    np.testing.assert_array_equal(formula.run(build(lr_warmup_init=0.0), STEPS), plain)
    np.testing.assert_array_equal(formula.run(build(lr_warmup_init=None), STEPS), plain)


def test_no_warmup_means_no_change():
    plain = formula.run(get_scheduler("cosine", PEAK, num_warmup_steps=0, num_training_steps=TOTAL), STEPS)
    started = get_scheduler("cosine", PEAK, num_warmup_steps=0, num_training_steps=TOTAL, lr_warmup_init=1e-5)
    np.testing.assert_array_equal(formula.run(started, STEPS), plain)


def test_resumes_mid_warmup_from_last_epoch_and_state_dict(tmp_path):
    init, build = 6e-5, dict(num_warmup_steps=WARMUP, num_training_steps=TOTAL, lr_warmup_init=6e-5)
    expected = [megatron_lr(s, init_lr=init, max_lr=PEAK, min_lr=0.0, warmup=WARMUP, decay_steps=TOTAL,
                            style="cosine") for s in range(STEPS)]
    # last_epoch=k: the scheduler starts at step k + 1
    late = get_scheduler("cosine", PEAK, last_epoch=3, **build)
    np.testing.assert_allclose(formula.run(late, STEPS - 4), expected[4:], rtol=1e-12)
    # state_dict through paddle.save / paddle.load, mid-warmup
    scheduler = get_scheduler("cosine", PEAK, **build)
    formula.run(scheduler, 5)
    path = str(tmp_path / "scheduler.pdparams")
    paddle.save(scheduler.state_dict(), path)
    resumed = get_scheduler("cosine", PEAK, **build)
    resumed.set_state_dict(paddle.load(path))
    np.testing.assert_allclose(formula.run(resumed, STEPS - 5), expected[5:], rtol=1e-12)


@pytest.mark.parametrize("name", ["linear", "cosine_annealing_with_warmup"])
def test_pickles_and_deep_copies(name):
    scheduler = get_scheduler(name, PEAK, num_warmup_steps=WARMUP, num_training_steps=TOTAL, lr_warmup_init=1e-5)
    for twin in (pickle.loads(pickle.dumps(scheduler)), copy.deepcopy(scheduler)):
        np.testing.assert_array_equal(formula.run(twin, STEPS), formula.run(copy.deepcopy(scheduler), STEPS))
    assert scheduler() == 1e-5


@pytest.mark.parametrize(
    "value,error,match",
    [
        (float("nan"), ValueError, "finite"),
        (float("inf"), ValueError, "finite"),
        (-1e-6, ValueError, ">= 0"),
        (PEAK * 1.01, ValueError, "peak learning rate"),
        ("1e-5", TypeError, "real number"),
        (True, TypeError, "real number"),
    ],
)
@pytest.mark.parametrize("name", ["linear", "warmup_stable_decay", "cosine_annealing_with_warmup"])
def test_bad_values_name_it(name, value, error, match):
    with pytest.raises(error, match=match) as info:
        get_scheduler(name, PEAK, num_warmup_steps=WARMUP, num_training_steps=TOTAL, lr_warmup_init=value)
    assert "`lr_warmup_init`" in str(info.value)


def test_a_schedule_without_warmup_refuses_it():
    with pytest.raises(TypeError, match="lr_warmup_init"):
        get_scheduler("constant", PEAK, lr_warmup_init=1e-5)


def test_the_schedule_s_own_errors_still_come_first_for_its_arguments():
    with pytest.raises(ValueError, match="`learning_rate`"):
        get_scheduler("linear", -1.0, num_warmup_steps=WARMUP, num_training_steps=TOTAL, lr_warmup_init=0.0)
    with pytest.raises(ValueError, match="`num_training_steps`"):
        get_scheduler("linear", PEAK, num_warmup_steps=WARMUP, lr_warmup_init=1e-5)


def test_adamwdl_trains_with_the_ramp_from_lr_warmup_init():
    """Five AdamWDL steps with layer ratios against the float64 reference fed Megatron's lrs:
    the first update is not wasted at lr 0."""
    init, warmup, total = 2e-3, 4, 10
    scheduler = get_scheduler("linear", 1e-2, num_warmup_steps=warmup, num_training_steps=total,
                              lr_warmup_init=init)
    model = tiny_bert()
    reference = ReferenceAdamW(weights_of(model), weight_decay=0.1)
    optimizer = make_adamwdl(model, learning_rate=scheduler, weight_decay=0.1, layerwise_decay=0.6)
    before = weights_of(model)
    history = train_and_compare(
        model, optimizer, reference, steps=5, scheduler=scheduler, reference_options={"ratio": ratio_fn(0.6)},
        lr_at=lambda step: megatron_lr(step, init_lr=init, max_lr=1e-2, min_lr=0.0, warmup=warmup,
                                       decay_steps=total, style="linear"),
    )
    name = "classifier.weight"
    assert not np.allclose(history[0][name], before[name])
