"""Hugging Face's scheduler call works with only the imports changed (docs/schedules.rst, "Hugging Face's call").

``get_scheduler(name, optimizer=optimizer, num_warmup_steps=..., num_training_steps=...,
scheduler_specific_kwargs=...)``, then ``optimizer.step(); lr_scheduler.step()``: every update uses
Hugging Face's lr for its step. The lr an update used is read from the update itself: with a constant
gradient ``g = 1`` and no weight decay, Adam moves a float64 parameter by ``lr / (1 + eps)`` at every
step (``m_hat = g``, ``v_hat = g**2``), so the step's lr is the parameter's change. Hugging Face's
formulas are written out in tests/helpers/schedule_formulas.py, from transformers' optimization.py.
A scheduler that no optimizer follows says so, once, by its class.
"""
from __future__ import annotations

import warnings

import numpy as np
import paddle
import pytest

import schedule_formulas as hf

from paddle_llrd import AdamWDL, DetachedSchedulerWarning, LinearDecayWithWarmup, SequentialSchedule, get_scheduler

PEAK = 3e-3
EPSILON = 1e-8


def hf_polynomial(lr, warmup, total, s, lr_end=1e-7, power=1.0):
    """Hugging Face's polynomial decay: PaddleNLP's numbers while T > W, lr_end past T (written out as
    schedule_formulas.polynomial)."""
    return hf.polynomial(lr, warmup, total, s, lr_end, power)


# name, num_warmup_steps, num_training_steps, scheduler_specific_kwargs, Hugging Face's lr at step s
CASES = [
    ("linear", 10, 50, None, lambda s: hf.linear(PEAK, 10, 50, s)),
    ("linear", 0, 20, None, lambda s: hf.linear(PEAK, 0, 20, s)),
    ("cosine", 5, 40, None, lambda s: hf.cosine(PEAK, 5, 40, s, hold_after_end=False)),
    ("cosine", 4, 30, {"num_cycles": 2.0}, lambda s: hf.cosine(PEAK, 4, 30, s, cycles=2.0, hold_after_end=False)),
    ("cosine_with_restarts", 4, 40, None, lambda s: hf.hard_restarts(PEAK, 4, 40, 1, s)),
    ("cosine_with_restarts", 4, 40, {"num_cycles": 3}, lambda s: hf.hard_restarts(PEAK, 4, 40, 3, s)),
    ("polynomial", 5, 30, None, lambda s: hf_polynomial(PEAK, 5, 30, s)),
    ("polynomial", 5, 30, {"lr_end": 1e-4, "power": 2.0},
     lambda s: hf_polynomial(PEAK, 5, 30, s, lr_end=1e-4, power=2.0)),
    ("constant_with_warmup", 7, 20, None, lambda s: hf.constant_with_warmup(PEAK, 7, s)),
    ("inverse_sqrt", 10, 60, None, lambda s: hf.inverse_sqrt_timescale(PEAK, 10, 10, s)),
    ("inverse_sqrt", 0, 30, None, lambda s: hf.inverse_sqrt_timescale(PEAK, 0, 10_000, s)),
    ("warmup_stable_decay", 5, 50, {"num_decay_steps": 10},
     lambda s: hf.hugging_face_wsd(PEAK, s, 5, 35, 10)),
    ("warmup_stable_decay", 5, 50, {"num_decay_steps": 10, "min_lr_ratio": 0.1, "decay_type": "linear"},
     lambda s: hf.hugging_face_wsd(PEAK, s, 5, 35, 10, decay_type="linear", min_ratio=0.1)),
    ("warmup_stable_decay", 6, 40, {"num_decay_steps": 8, "min_lr_ratio": 0.2, "warmup_type": "cosine",
                                    "decay_type": "1-sqrt"},
     lambda s: hf.hugging_face_wsd(PEAK, s, 6, 26, 8, warmup_type="cosine", decay_type="1-sqrt", min_ratio=0.2)),
]


def weight(n=3):
    return paddle.create_parameter([n], dtype="float64", default_initializer=paddle.nn.initializer.Constant(0.0))


def adamw(param, optimizer_class=paddle.optimizer.AdamW, **options):
    return optimizer_class(learning_rate=PEAK, parameters=[param], weight_decay=0.0, epsilon=EPSILON, **options)


def lrs_applied(param, optimizer, lr_scheduler, n_steps, *others):
    """Hugging Face's loop for ``n_steps``: the lr each update applied to ``param`` (and to each of ``others``,
    as further columns), read from the parameter's change."""
    params = (param, *others)
    applied = []
    for _ in range(n_steps):
        before = [p.numpy().copy() for p in params]
        paddle.add_n([p.sum() for p in params]).backward()  # gradient 1 everywhere
        optimizer.step()
        lr_scheduler.step()
        optimizer.clear_grad()
        changes = [b - p.numpy() for b, p in zip(before, params)]
        for change in changes:
            np.testing.assert_allclose(change, change[0], rtol=0, atol=1e-15)
        applied.append([change[0] * (1.0 + EPSILON) for change in changes])
    applied = np.array(applied)
    return applied[:, 0] if not others else applied


@pytest.mark.parametrize("name,warmup,total,specific,expected", CASES,
                         ids=[f"{case[0]}-{i}" for i, case in enumerate(CASES)])
def test_hugging_face_loop_trains_with_hugging_faces_lr_at_every_step(name, warmup, total, specific, expected):
    param = weight()
    optimizer = adamw(param)
    lr_scheduler = get_scheduler(name, optimizer=optimizer, num_warmup_steps=warmup, num_training_steps=total,
                                 scheduler_specific_kwargs=specific)
    applied = lrs_applied(param, optimizer, lr_scheduler, total)
    want = np.array([expected(s) for s in range(total)])
    np.testing.assert_allclose(applied, want, rtol=1e-9, atol=1e-15)
    # and the lr the optimizer holds for the step after the last: Hugging Face's for step T
    assert optimizer.get_lr() == pytest.approx(expected(total), rel=1e-12, abs=1e-18)
    assert lr_scheduler.get_last_lr() == [pytest.approx(expected(total), rel=1e-12, abs=1e-18)]


def test_an_optimizer_in_learning_rates_place_is_hugging_faces_positional_call():
    param = weight()
    optimizer = adamw(param)
    lr_scheduler = get_scheduler("linear", optimizer, 4, 12)
    applied = lrs_applied(param, optimizer, lr_scheduler, 12)
    np.testing.assert_allclose(applied, [hf.linear(PEAK, 4, 12, s) for s in range(12)], rtol=1e-9, atol=1e-15)


def test_the_layerwise_optimizer_follows_hugging_faces_call_with_each_groups_ratio():
    """AdamWDL's ratios scale the schedule's lr: a parameter group at learning_rate 0.5 moves half as far."""
    full, half = weight(), weight()
    optimizer = AdamWDL(learning_rate=PEAK, parameters=[{"params": [full]}, {"params": [half], "learning_rate": 0.5}],
                        weight_decay=0.0, epsilon=EPSILON, set_param_lr_fun=None)
    lr_scheduler = get_scheduler("cosine", optimizer=optimizer, num_warmup_steps=3, num_training_steps=15)
    applied = lrs_applied(full, optimizer, lr_scheduler, 15, half)
    want = np.array([hf.cosine(PEAK, 3, 15, s, hold_after_end=False) for s in range(15)])
    np.testing.assert_allclose(applied[:, 0], want, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(applied[:, 1], 0.5 * want, rtol=1e-9, atol=1e-15)


def test_paddlenlps_positional_call_still_builds_a_scheduler_for_the_optimizer_to_take():
    param = weight()
    lr_scheduler = get_scheduler("linear", PEAK, 2, 10)
    optimizer = paddle.optimizer.AdamW(learning_rate=lr_scheduler, parameters=[param], weight_decay=0.0,
                                       epsilon=EPSILON)
    applied = lrs_applied(param, optimizer, lr_scheduler, 10)
    np.testing.assert_allclose(applied, [hf.linear(PEAK, 2, 10, s) for s in range(10)], rtol=1e-9, atol=1e-15)


def test_calling_it_again_on_the_same_optimizer_starts_from_the_optimizers_peak_not_its_current_lr():
    """As torch's ``initial_lr``: a re-run notebook cell gets the same schedule, not one from a warmup's 0."""
    param = weight()
    optimizer = adamw(param)
    get_scheduler("linear", optimizer=optimizer, num_warmup_steps=5, num_training_steps=10)
    assert optimizer.get_lr() == 0.0
    lr_scheduler = get_scheduler("linear", optimizer=optimizer, num_warmup_steps=5, num_training_steps=10)
    applied = lrs_applied(param, optimizer, lr_scheduler, 10)
    np.testing.assert_allclose(applied, [hf.linear(PEAK, 5, 10, s) for s in range(10)], rtol=1e-9, atol=1e-15)


def test_a_call_that_raises_leaves_the_optimizers_learning_rate_as_it_was():
    param = weight()
    optimizer = adamw(param)
    with pytest.raises(ValueError, match="lr_end"):
        get_scheduler("polynomial", optimizer=optimizer, num_warmup_steps=2, num_training_steps=10,
                      scheduler_specific_kwargs={"lr_end": 1.0})
    with pytest.raises(ValueError, match="num_training_steps"):
        get_scheduler("linear", optimizer=optimizer, num_warmup_steps=2)
    applied = lrs_applied(param, optimizer, paddle.optimizer.lr.LambdaDecay(PEAK, lambda s: 1.0), 3)
    np.testing.assert_allclose(applied, [PEAK] * 3, rtol=1e-9)


@pytest.mark.parametrize("call,argument", [
    (lambda opt: get_scheduler("linear", num_warmup_steps=1, num_training_steps=4), "optimizer=optimizer"),
    (lambda opt: get_scheduler("linear", opt, optimizer=opt, num_warmup_steps=1, num_training_steps=4),
     "pass it once"),
    (lambda opt: get_scheduler("linear", optimizer="adamw", num_warmup_steps=1, num_training_steps=4),
     "`optimizer` must be a paddle.optimizer.Optimizer"),
    (lambda opt: get_scheduler("cosine", optimizer=opt, num_warmup_steps=1, num_training_steps=4, num_cycles=1.0,
                               scheduler_specific_kwargs={"num_cycles": 2.0}), "`num_cycles` twice"),
    (lambda opt: get_scheduler("cosine", optimizer=opt, num_warmup_steps=1, num_training_steps=4,
                               scheduler_specific_kwargs=[("num_cycles", 2.0)]), "`scheduler_specific_kwargs`"),
])
def test_a_wrong_call_is_one_typeerror_naming_what_to_pass(call, argument):
    param = weight()
    optimizer = adamw(param)
    with pytest.raises(TypeError) as raised:
        call(optimizer)
    assert argument in str(raised.value) and "\n" not in str(raised.value)
    assert optimizer.get_lr() == PEAK


def test_a_scheduler_stepped_beside_an_optimizer_given_a_float_warns_once_naming_the_ways_to_attach_it():
    param = weight()
    optimizer = adamw(param)
    scheduler = get_scheduler("linear", PEAK, num_warmup_steps=2, num_training_steps=10)
    with pytest.warns(DetachedSchedulerWarning) as caught:
        lrs_applied(param, optimizer, scheduler, 4)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "learning_rate=scheduler" in message and "set_lr_scheduler" in message and "optimizer=optimizer" in message
    assert caught[0].filename == __file__  # the user's line, not the package's


def test_no_word_while_an_optimizer_follows_the_scheduler_even_stepped_ahead_before_training():
    param = weight()
    scheduler = LinearDecayWithWarmup(PEAK, total_steps=10, warmup=2)
    optimizer = paddle.optimizer.AdamW(learning_rate=scheduler, parameters=[param], weight_decay=0.0,
                                       epsilon=EPSILON)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DetachedSchedulerWarning)
        for _ in range(3):  # a resumed run moved to its step before the first update
            scheduler.step()
        applied = lrs_applied(param, optimizer, scheduler, 4)
    np.testing.assert_allclose(applied, [hf.linear(PEAK, 2, 10, s) for s in range(3, 7)], rtol=1e-9)


def test_the_stages_of_a_sequential_schedule_are_followed_by_it_even_when_it_jumps():
    first = get_scheduler("constant", PEAK)
    second = get_scheduler("linear", PEAK, num_warmup_steps=0, num_training_steps=10)
    schedule = SequentialSchedule([first, second], milestones=[2])
    with warnings.catch_warnings():
        warnings.simplefilter("error", DetachedSchedulerWarning)
        schedule.step(7)  # the second stage moves 5 steps at once
        assert schedule() == pytest.approx(hf.linear(PEAK, 0, 10, 5))
