"""The scheduler classes against their formulas, written out in float64 in
schedule_formulas.py (the formulas of docs/schedules.rst), never against the package's own code.
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
    ConstScheduleWithWarmup,
    CosineAnnealingWithWarmupDecay,
    CosineDecayWithWarmup,
    InverseSquareRootSchedule,
    LinearAnnealingWithWarmupDecay,
    LinearDecayWithWarmup,
    PolyDecayWithWarmup,
)

PROPERTY_SETTINGS = settings(max_examples=50, deadline=None)


# PaddleNLP's signatures (docs/schedules.rst): positional calls written for PaddleNLP keep working.
PADDLENLP_SIGNATURES = [
    (LinearDecayWithWarmup, "(learning_rate, total_steps, warmup, last_epoch=-1, verbose=False)"),
    (ConstScheduleWithWarmup, "(learning_rate, warmup, total_steps=None, last_epoch=-1, verbose=False)"),
    (CosineDecayWithWarmup,
     "(learning_rate, total_steps, warmup, with_hard_restarts=False, num_cycles=None, last_epoch=-1, verbose=False)"),
    (PolyDecayWithWarmup, "(learning_rate, total_steps, warmup, lr_end=1e-07, power=1.0, last_epoch=-1, verbose=False)"),
    (CosineAnnealingWithWarmupDecay, "(max_lr, min_lr, warmup_step, decay_step, last_epoch=-1, verbose=False)"),
    (LinearAnnealingWithWarmupDecay, "(max_lr, min_lr, warmup_step, decay_step, last_epoch=-1, verbose=False)"),
    (InverseSquareRootSchedule, "(warmup_steps, learning_rate=1.0, last_epoch=-1, verbose=False)"),
]


# Megatron-LM's warmup start is a keyword-only argument of every warmup class (after PaddleNLP's arguments,
# so positional calls are unchanged); the classes that warn about a warmup longer than training
# (docs/schedules.rst) can be told not to (the registry functions warn under their own argument names instead).
KEYWORD_ONLY = {cls: ("warmup_start",) for cls, _ in PADDLENLP_SIGNATURES}
KEYWORD_ONLY.update({cls: ("warmup_start", "warn_long_warmup")
                     for cls in (LinearDecayWithWarmup, ConstScheduleWithWarmup, CosineDecayWithWarmup,
                                 PolyDecayWithWarmup)})


@pytest.mark.parametrize("cls,text", PADDLENLP_SIGNATURES, ids=[cls.__name__ for cls, _ in PADDLENLP_SIGNATURES])
def test_signatures_are_specs(cls, text):
    extra = ", *, " + ", ".join(f"{name}={'True' if name == 'warn_long_warmup' else '0.0'}"
                               for name in KEYWORD_ONLY[cls])
    assert formula.signature_text(cls) == text[:-1] + extra + ")"


# (total, warmup): int warmup, float warmup, zero warmup, warmup == total, warmup > total.
WARMUP_CASES = [(50, 10), (50, 0.1), (37, 0.33), (40, 0), (40, 0.0), (12, 1), (20, 20), (20, 1.0), (10, 15)]


# --------------------------------------------------------------------------
# Whole runs against the formulas.
# --------------------------------------------------------------------------
@pytest.mark.parametrize("total,warmup", WARMUP_CASES)
def test_linear_decay_with_warmup_whole_run(total, warmup):
    lr = 3e-4
    w = formula.warmup_steps(warmup, total)
    with formula.warns_if_warmup_outlasts(warmup, total):
        scheduler = LinearDecayWithWarmup(lr, total, warmup)
    assert isinstance(scheduler, LambdaDecay)
    assert scheduler.warmup_steps == w
    assert_run(scheduler, lambda s: formula.linear(lr, w, total, s), total + 10)


@pytest.mark.parametrize("total,warmup", [(None, 7), (None, 0), (30, 0.2), (30, 7), (9, 1.0)])
def test_const_schedule_with_warmup_whole_run(total, warmup):
    lr = 0.02
    w = formula.warmup_steps(warmup, total)
    scheduler = ConstScheduleWithWarmup(lr, warmup, total_steps=total)
    assert isinstance(scheduler, LambdaDecay)
    assert_run(scheduler, lambda s: formula.constant_with_warmup(lr, w, s), 45)


@pytest.mark.parametrize("total,warmup", WARMUP_CASES)
def test_cosine_default_is_a_half_cosine_decay_to_zero(total, warmup):
    lr = 1e-3
    w = formula.warmup_steps(warmup, total)
    with formula.warns_if_warmup_outlasts(warmup, total):
        scheduler = CosineDecayWithWarmup(lr, total, warmup)
    assert isinstance(scheduler, LambdaDecay)
    values = run(scheduler, total + 10)
    np.testing.assert_allclose(values, expected(lambda s: formula.cosine(lr, w, total, s), total + 10),
                               rtol=1e-12, atol=1e-15)
    if w < total:
        assert values[w] == pytest.approx(lr)
        assert np.all(np.diff(values[w:]) <= 1e-18)  # a decay, never climbing back
        assert values[total] == pytest.approx(0.0, abs=1e-18)


def test_cosine_default_differs_from_paddlenlp_full_wave():
    # PaddleNLP's default (one full wave) is back at the peak at total_steps.
    lr, total, warmup = 1.0, 100, 10
    values = run(CosineDecayWithWarmup(lr, total, warmup), total + 1)
    assert formula.cosine(lr, warmup, total, total, 1, hold_after_end=False) == pytest.approx(lr)
    assert values[total] == pytest.approx(0.0, abs=1e-15)
    assert values[55] == pytest.approx(0.5)  # half way through the decay


@pytest.mark.parametrize("cycles", [0, 1, 2, 3])
@pytest.mark.parametrize("total,warmup", [(60, 6), (60, 0.25), (30, 0)])
def test_cosine_int_num_cycles_is_paddlenlp_full_waves(total, warmup, cycles):
    lr = 0.5
    w = formula.warmup_steps(warmup, total)
    scheduler = CosineDecayWithWarmup(lr, total, warmup, num_cycles=cycles)
    assert_run(scheduler, lambda s: formula.cosine(lr, w, total, s, cycles, hold_after_end=False), total + 15)


@pytest.mark.parametrize("cycles", [None, 0.5, 1.0, 2.0, 1.5, 3.25])
@pytest.mark.parametrize("total,warmup", [(80, 8), (80, 0.1), (25, 0), (12, 12)])
def test_cosine_hard_restarts(total, warmup, cycles):
    lr = 2e-5
    w = formula.warmup_steps(warmup, total)
    scheduler = CosineDecayWithWarmup(lr, total, warmup, with_hard_restarts=True, num_cycles=cycles)
    c = 0.5 if cycles is None else cycles
    assert_run(scheduler, lambda s: formula.hard_restarts(lr, w, total, c, s), total + 10)


def test_cosine_hard_restarts_jump_back_to_the_peak():
    lr, total, warmup = 1.0, 100, 0
    values = run(CosineDecayWithWarmup(lr, total, warmup, with_hard_restarts=True, num_cycles=2.0), total + 3)
    assert values[50] == pytest.approx(lr)  # the restart, half way
    assert values[49] < 0.01
    assert values[100:].tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("lr_end,power", [(1e-7, 1.0), (0.0, 1.0), (1e-3, 2.0), (5e-3, 0.5), (2e-3, 3.0), (1e-4, 0.0)])
@pytest.mark.parametrize("total,warmup", [(50, 10), (50, 0.2), (40, 0), (16, 16), (10, 14)])
def test_poly_decay_with_warmup(total, warmup, lr_end, power):
    lr = 1e-2
    w = formula.warmup_steps(warmup, total)
    with formula.warns_if_warmup_outlasts(warmup, total):
        scheduler = PolyDecayWithWarmup(lr, total, warmup, lr_end, power)
    assert isinstance(scheduler, LambdaDecay)
    assert_run(scheduler, lambda s: formula.polynomial(lr, w, total, s, lr_end, power), total + 10)


def test_poly_decay_defaults_are_paddlenlp_defaults():
    lr, total, warmup = 1e-3, 30, 5
    assert_run(PolyDecayWithWarmup(lr, total, warmup), lambda s: formula.polynomial(lr, warmup, total, s, 1e-7, 1.0), 40)


@pytest.mark.parametrize("cls,shape", [(CosineAnnealingWithWarmupDecay, "cosine"), (LinearAnnealingWithWarmupDecay, "linear")])
@pytest.mark.parametrize("max_lr,min_lr,warmup,decay", [(1e-3, 1e-5, 10, 60), (1e-3, 0.0, 0, 40), (5e-4, 5e-4, 3, 9), (2.0, 0.5, 1, 2)])
def test_annealing_with_warmup_decay(cls, shape, max_lr, min_lr, warmup, decay):
    scheduler = cls(max_lr, min_lr, warmup, decay)
    assert isinstance(scheduler, LRScheduler) and not isinstance(scheduler, LambdaDecay)
    assert_run(scheduler, lambda s: formula.annealing(max_lr, min_lr, warmup, decay, shape, s), decay + 10)


@pytest.mark.parametrize("warmup,lr", [(1, 1.0), (4, 0.5), (25, 7e-4), (4000, 2.0)])
def test_inverse_square_root_schedule(warmup, lr):
    scheduler = InverseSquareRootSchedule(warmup, lr)
    assert isinstance(scheduler, LRScheduler)
    n_steps = min(warmup * 3 + 5, 600)
    assert_run(scheduler, lambda s: formula.inverse_sqrt(lr, warmup, s), n_steps)


def test_inverse_square_root_default_learning_rate_is_one():
    assert_run(InverseSquareRootSchedule(9), lambda s: formula.inverse_sqrt(1.0, 9, s), 40)


# --------------------------------------------------------------------------
# Properties over random (lr, warmup, total).
# --------------------------------------------------------------------------
@st.composite
def lr_warmup_total(draw):
    total = draw(st.integers(min_value=1, max_value=300))
    lr = draw(st.floats(min_value=1e-7, max_value=1.0, allow_nan=False))
    if draw(st.booleans()):
        warmup = draw(st.integers(min_value=0, max_value=total))
    else:
        warmup = draw(st.floats(min_value=0.0, max_value=1.0, allow_nan=False))
    return lr, warmup, total


def check_common_properties(values, lr, w, total, decays):
    """0 <= lr <= peak, linear warmup from 0, continuity into the decay, non-increasing decay."""
    tol = 1e-12 * lr
    assert np.all(values >= 0.0)
    assert np.all(values <= lr + tol)
    steps = np.arange(len(values))
    if w > 0:
        np.testing.assert_allclose(values[:w], lr * steps[:w] / w, rtol=1e-12, atol=tol)
    if w < total:
        assert values[w] == pytest.approx(lr, rel=1e-12)  # the decay starts at the peak
        if w > 0:  # continuity: the last warmup increment is the size of every warmup increment
            assert values[w] - values[w - 1] == pytest.approx(lr / w, rel=1e-9, abs=tol)
    if decays:
        assert np.all(np.diff(values[w:]) <= tol)


@PROPERTY_SETTINGS
@given(lr_warmup_total())
def test_property_linear(case):
    lr, warmup, total = case
    scheduler = LinearDecayWithWarmup(lr, total, warmup)
    w = scheduler.warmup_steps
    assert w == formula.warmup_steps(warmup, total)
    values = run(scheduler, total + 5)
    check_common_properties(values, lr, w, total, decays=True)
    assert np.all(values[total:] == 0.0)


@PROPERTY_SETTINGS
@given(lr_warmup_total())
def test_property_constant(case):
    lr, warmup, total = case
    scheduler = ConstScheduleWithWarmup(lr, warmup, total_steps=total)
    w = scheduler.warmup_steps
    values = run(scheduler, total + 5)
    check_common_properties(values, lr, w, total, decays=True)
    assert np.all(values[w:] == lr)


@PROPERTY_SETTINGS
@given(lr_warmup_total())
def test_property_cosine_default(case):
    lr, warmup, total = case
    scheduler = CosineDecayWithWarmup(lr, total, warmup)
    w = scheduler.warmup_steps
    values = run(scheduler, total + 5)
    check_common_properties(values, lr, w, total, decays=True)
    if w < total:
        assert np.all(values[total:] <= 1e-12 * lr)


@PROPERTY_SETTINGS
@given(lr_warmup_total(), st.sampled_from([0.5, 1.0, 2.0, 3.7]))
def test_property_cosine_hard_restarts(case, cycles):
    lr, warmup, total = case
    scheduler = CosineDecayWithWarmup(lr, total, warmup, with_hard_restarts=True, num_cycles=cycles)
    w = scheduler.warmup_steps
    values = run(scheduler, total + 5)
    check_common_properties(values, lr, w, total, decays=cycles <= 1.0)
    assert np.all(values[w + max(1, total - w):] == 0.0)  # 0 once the decay phase is over


@PROPERTY_SETTINGS
@given(lr_warmup_total(), st.floats(0.0, 0.99), st.sampled_from([0.5, 1.0, 2.0, 3.0]))
def test_property_poly_floor(case, end_fraction, power):
    lr, warmup, total = case
    lr_end = lr * end_fraction
    scheduler = PolyDecayWithWarmup(lr, total, warmup, lr_end=lr_end, power=power)
    w = scheduler.warmup_steps
    values = run(scheduler, total + 5)
    check_common_properties(values, lr, w, total, decays=True)
    assert np.all(values[w:] >= lr_end * (1 - 1e-12))  # the floor holds after warmup
    assert values[-1] == pytest.approx(lr_end, rel=1e-12, abs=1e-300)


@PROPERTY_SETTINGS
@given(
    st.floats(1e-7, 1.0),
    st.floats(0.0, 1.0),
    st.integers(0, 150),
    st.integers(1, 150),
    st.sampled_from([CosineAnnealingWithWarmupDecay, LinearAnnealingWithWarmupDecay]),
)
def test_property_annealing(max_lr, min_fraction, warmup, decay_span, cls):
    min_lr = max_lr * min_fraction
    decay = warmup + decay_span
    values = run(cls(max_lr, min_lr, warmup, decay), decay + 5)
    tol = 1e-12 * max_lr
    assert np.all(values >= 0.0) and np.all(values <= max_lr + tol)
    if warmup > 0:
        np.testing.assert_allclose(values[: warmup + 1], max_lr * np.arange(warmup + 1) / warmup, rtol=1e-12, atol=tol)
    assert values[warmup] == pytest.approx(max_lr, rel=1e-12)
    assert np.all(np.diff(values[warmup:]) <= tol)
    assert np.all(values[warmup:] >= min_lr - tol)
    assert np.all(values[decay:] == pytest.approx(min_lr, rel=1e-12, abs=tol))


@PROPERTY_SETTINGS
@given(st.floats(1e-7, 1.0), st.integers(1, 200))
def test_property_inverse_square_root(lr, warmup):
    values = run(InverseSquareRootSchedule(warmup, lr), 2 * warmup + 5)
    check_common_properties(values, lr, warmup, 2 * warmup + 5, decays=True)


# --------------------------------------------------------------------------
# Resuming: last_epoch and state_dict give the same future as never stopping.
# --------------------------------------------------------------------------
FACTORIES = {
    "linear": lambda **kw: LinearDecayWithWarmup(1e-3, 40, 0.25, **kw),
    "const": lambda **kw: ConstScheduleWithWarmup(1e-3, 10, **kw),
    "cosine": lambda **kw: CosineDecayWithWarmup(1e-3, 40, 10, **kw),
    "cosine_waves": lambda **kw: CosineDecayWithWarmup(1e-3, 40, 10, num_cycles=2, **kw),
    "cosine_restarts": lambda **kw: CosineDecayWithWarmup(1e-3, 40, 0.1, True, 1.5, **kw),
    "poly": lambda **kw: PolyDecayWithWarmup(1e-3, 40, 10, 1e-5, 2.0, **kw),
    "cosine_annealing": lambda **kw: CosineAnnealingWithWarmupDecay(1e-3, 1e-5, 10, 40, **kw),
    "linear_annealing": lambda **kw: LinearAnnealingWithWarmupDecay(1e-3, 1e-5, 10, 40, **kw),
    "inverse_sqrt": lambda **kw: InverseSquareRootSchedule(10, 1e-3, **kw),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
@pytest.mark.parametrize("k", [0, 5, 10, 23, 45])
@pytest.mark.filterwarnings("ignore::paddle_llrd.DetachedSchedulerWarning")  # no optimizer follows it, on purpose
def test_resume_with_last_epoch(name, k):
    uninterrupted = FACTORIES[name]()
    for _ in range(k + 1):
        uninterrupted.step()
    resumed = FACTORIES[name](last_epoch=k)  # step k was the last one taken: it resumes at k + 1
    assert resumed.last_epoch == uninterrupted.last_epoch == k + 1
    np.testing.assert_array_equal(run(resumed, 30), run(uninterrupted, 30))


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_resume_with_state_dict_through_paddle_save(name, tmp_path):
    uninterrupted = FACTORIES[name]()
    before = run(uninterrupted, 17)
    path = str(tmp_path / "scheduler.pdparams")
    paddle.save(uninterrupted.state_dict(), path)
    after = run(uninterrupted, 30)

    restored = FACTORIES[name]()
    restored.set_state_dict(paddle.load(path))
    assert restored.last_epoch == 17
    np.testing.assert_array_equal(run(restored, 30), after)
    assert len(before) == 17


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_state_dict_keys_and_pickling(name):
    scheduler = FACTORIES[name]()
    run(scheduler, 12)
    state = scheduler.state_dict()
    assert set(state) == {"last_epoch", "last_lr"}
    assert pickle.loads(pickle.dumps(state)) == state
    # The scheduler itself (its lr factor included) pickles and deep-copies.
    for clone in (pickle.loads(pickle.dumps(scheduler)), copy.deepcopy(scheduler)):
        np.testing.assert_array_equal(run(clone, 20), run(copy.deepcopy(scheduler), 20))


BAD_STATES = [
    ({"last_epoch": 30}, KeyError, "last_lr"),  # Paddle's own method would set last_epoch, then fail
    ({"last_lr": 1e-4}, KeyError, "last_epoch"),
    ({"last_epoch": "30", "last_lr": 1e-4}, TypeError, "last_epoch"),
    ({"last_epoch": 30.0, "last_lr": 1e-4}, TypeError, "last_epoch"),
    ({"last_epoch": -2, "last_lr": 1e-4}, ValueError, "last_epoch"),
    ({"last_epoch": 30, "last_lr": float("nan")}, ValueError, "last_lr"),
    ({"last_epoch": 30, "last_lr": -1e-4}, ValueError, "last_lr"),
    ({"last_epoch": 30, "last_lr": None}, TypeError, "last_lr"),
    ([("last_epoch", 30), ("last_lr", 1e-4)], TypeError, "state_dict"),
]


@pytest.mark.parametrize("name", sorted(FACTORIES))
@pytest.mark.parametrize("state,error,argument", BAD_STATES)
def test_bad_state_dict_is_refused_and_changes_nothing(name, state, error, argument):
    scheduler = FACTORIES[name]()
    run(scheduler, 7)
    before = scheduler.state_dict()
    for load in (scheduler.set_state_dict, scheduler.set_dict):
        with pytest.raises(error, match=f"`{argument}`"):
            load(state)
        assert scheduler.state_dict() == before
    np.testing.assert_array_equal(run(scheduler, 5), expected(REFERENCE_LR[name], 12)[7:])


# --------------------------------------------------------------------------
# A real optimizer follows the schedule.
# --------------------------------------------------------------------------
REFERENCE_LR = {
    "linear": lambda s: formula.linear(1e-3, 10, 40, s),
    "const": lambda s: formula.constant_with_warmup(1e-3, 10, s),
    "cosine": lambda s: formula.cosine(1e-3, 10, 40, s),
    "cosine_waves": lambda s: formula.cosine(1e-3, 10, 40, s, 2, hold_after_end=False),
    "cosine_restarts": lambda s: formula.hard_restarts(1e-3, 4, 40, 1.5, s),
    "poly": lambda s: formula.polynomial(1e-3, 10, 40, s, 1e-5, 2.0),
    "cosine_annealing": lambda s: formula.annealing(1e-3, 1e-5, 10, 40, "cosine", s),
    "linear_annealing": lambda s: formula.annealing(1e-3, 1e-5, 10, 40, "linear", s),
    "inverse_sqrt": lambda s: formula.inverse_sqrt(1e-3, 10, s),
}


def reference_adam(p0, grad, lrs, beta1=0.9, beta2=0.999, eps=1e-8):
    """Paddle's Adam update (float64), one lr per step."""
    p = p0.astype(np.float64).copy()
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    for t, lr in enumerate(lrs, start=1):
        m = beta1 * m + (1 - beta1) * grad
        v = beta2 * v + (1 - beta2) * grad * grad
        lr_t = lr * math.sqrt(1 - beta2**t) / (1 - beta1**t)
        p = p - lr_t * m / (np.sqrt(v) + eps * math.sqrt(1 - beta2**t))
    return p


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_adamw_follows_the_schedule(name):
    n_steps = 45
    scheduler = FACTORIES[name]()
    layer = paddle.nn.Linear(4, 3)
    optimizer = paddle.optimizer.AdamW(learning_rate=scheduler, parameters=layer.parameters(), weight_decay=0.0)
    x = paddle.to_tensor(np.random.RandomState(0).randn(5, 4).astype("float32"))
    w0 = layer.weight.numpy().copy()
    # d(sum(layer(x)))/dW = sum over the batch of x, every step: a constant gradient.
    grad_w = np.repeat(x.numpy().astype(np.float64).sum(axis=0)[:, None], 3, axis=1)
    lrs = []
    for step in range(n_steps):
        assert optimizer.get_lr() == pytest.approx(REFERENCE_LR[name](step), rel=1e-12, abs=1e-18)
        lrs.append(REFERENCE_LR[name](step))
        loss = layer(x).sum()
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        scheduler.step()
    np.testing.assert_allclose(layer.weight.numpy(), reference_adam(w0, grad_w, lrs), rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------
# Bad arguments: an exception that names the argument.
# --------------------------------------------------------------------------
ERROR_CASES = [
    # learning rates
    (lambda: LinearDecayWithWarmup(-1e-3, 10, 2), ValueError, "learning_rate"),
    (lambda: LinearDecayWithWarmup(float("nan"), 10, 2), ValueError, "learning_rate"),
    (lambda: LinearDecayWithWarmup(float("inf"), 10, 2), ValueError, "learning_rate"),
    (lambda: LinearDecayWithWarmup("0.1", 10, 2), TypeError, "learning_rate"),
    (lambda: ConstScheduleWithWarmup(-0.1, 2), ValueError, "learning_rate"),
    (lambda: CosineDecayWithWarmup(float("nan"), 10, 2), ValueError, "learning_rate"),
    (lambda: PolyDecayWithWarmup(-1.0, 10, 2), ValueError, "learning_rate"),
    (lambda: InverseSquareRootSchedule(10, -1.0), ValueError, "learning_rate"),
    (lambda: InverseSquareRootSchedule(10, float("inf")), ValueError, "learning_rate"),
    # step counts
    (lambda: LinearDecayWithWarmup(0.1, -10, 2), ValueError, "total_steps"),
    (lambda: LinearDecayWithWarmup(0.1, 0, 0), ValueError, "total_steps"),
    (lambda: LinearDecayWithWarmup(0.1, float("nan"), 2), ValueError, "total_steps"),
    (lambda: LinearDecayWithWarmup(0.1, 10.5, 2), ValueError, "total_steps"),
    (lambda: LinearDecayWithWarmup(0.1, None, 2), TypeError, "total_steps"),
    (lambda: CosineDecayWithWarmup(0.1, -1, 0), ValueError, "total_steps"),
    (lambda: PolyDecayWithWarmup(0.1, float("inf"), 0), ValueError, "total_steps"),
    (lambda: ConstScheduleWithWarmup(0.1, 0.5, total_steps=-4), ValueError, "total_steps"),
    (lambda: LinearDecayWithWarmup(0.1, 10, -2), ValueError, "warmup"),
    (lambda: LinearDecayWithWarmup(0.1, 10, -0.1), ValueError, "warmup"),
    (lambda: LinearDecayWithWarmup(0.1, 10, 1.5), ValueError, "warmup"),
    (lambda: LinearDecayWithWarmup(0.1, 10, float("nan")), ValueError, "warmup"),
    (lambda: LinearDecayWithWarmup(0.1, 10, True), TypeError, "warmup"),
    (lambda: LinearDecayWithWarmup(0.1, 10, "5"), TypeError, "warmup"),
    (lambda: CosineDecayWithWarmup(0.1, 10, -3), ValueError, "warmup"),
    (lambda: PolyDecayWithWarmup(0.1, 10, -3), ValueError, "warmup"),
    (lambda: ConstScheduleWithWarmup(0.1, -3), ValueError, "warmup"),
    # a float warmup needs total_steps
    (lambda: ConstScheduleWithWarmup(0.1, 0.1), ValueError, "total_steps"),
    # num_cycles / with_hard_restarts
    (lambda: CosineDecayWithWarmup(0.1, 10, 2, num_cycles=0.5), TypeError, "num_cycles"),
    (lambda: CosineDecayWithWarmup(0.1, 10, 2, num_cycles="2"), TypeError, "num_cycles"),
    (lambda: CosineDecayWithWarmup(0.1, 10, 2, num_cycles=True), TypeError, "num_cycles"),
    (lambda: CosineDecayWithWarmup(0.1, 10, 2, num_cycles=-1), ValueError, "num_cycles"),
    (lambda: CosineDecayWithWarmup(0.1, 10, 2, with_hard_restarts=True, num_cycles="2"), TypeError, "num_cycles"),
    (lambda: CosineDecayWithWarmup(0.1, 10, 2, with_hard_restarts=True, num_cycles=True), TypeError, "num_cycles"),
    (lambda: CosineDecayWithWarmup(0.1, 10, 2, with_hard_restarts=True, num_cycles=-0.5), ValueError, "num_cycles"),
    (lambda: CosineDecayWithWarmup(0.1, 10, 2, with_hard_restarts=True, num_cycles=float("nan")), ValueError, "num_cycles"),
    (lambda: CosineDecayWithWarmup(0.1, 10, 2, with_hard_restarts="yes"), TypeError, "with_hard_restarts"),
    # polynomial
    (lambda: PolyDecayWithWarmup(0.1, 10, 2, lr_end=0.1), ValueError, "lr_end"),
    (lambda: PolyDecayWithWarmup(0.1, 10, 2, lr_end=0.2), ValueError, "lr_end"),
    (lambda: PolyDecayWithWarmup(0.0, 10, 2, lr_end=0.0), ValueError, "lr_end"),
    (lambda: PolyDecayWithWarmup(0.1, 10, 2, lr_end=-1e-3), ValueError, "lr_end"),
    (lambda: PolyDecayWithWarmup(0.1, 10, 2, lr_end=float("nan")), ValueError, "lr_end"),
    (lambda: PolyDecayWithWarmup(0.1, 10, 2, power=-1.0), ValueError, "power"),
    (lambda: PolyDecayWithWarmup(0.1, 10, 2, power=float("inf")), ValueError, "power"),
    # annealing
    (lambda: CosineAnnealingWithWarmupDecay(1e-3, 1e-2, 10, 100), ValueError, "min_lr"),
    (lambda: LinearAnnealingWithWarmupDecay(1e-3, 1e-2, 10, 100), ValueError, "min_lr"),
    (lambda: CosineAnnealingWithWarmupDecay(1e-3, -1e-5, 10, 100), ValueError, "min_lr"),
    (lambda: CosineAnnealingWithWarmupDecay(-1e-3, 0.0, 10, 100), ValueError, "max_lr"),
    (lambda: LinearAnnealingWithWarmupDecay(float("nan"), 0.0, 10, 100), ValueError, "max_lr"),
    (lambda: CosineAnnealingWithWarmupDecay(1e-3, 0.0, 10, 10), ValueError, "decay_step"),
    (lambda: LinearAnnealingWithWarmupDecay(1e-3, 0.0, 10, 5), ValueError, "decay_step"),
    (lambda: CosineAnnealingWithWarmupDecay(1e-3, 0.0, -1, 5), ValueError, "warmup_step"),
    (lambda: LinearAnnealingWithWarmupDecay(1e-3, 0.0, 1.5, 5), ValueError, "warmup_step"),
    (lambda: CosineAnnealingWithWarmupDecay(1e-3, 0.0, 0, -5), ValueError, "decay_step"),
    # inverse square root
    (lambda: InverseSquareRootSchedule(0), ValueError, "warmup_steps"),
    (lambda: InverseSquareRootSchedule(-4), ValueError, "warmup_steps"),
    (lambda: InverseSquareRootSchedule(None), TypeError, "warmup_steps"),
    # last_epoch
    (lambda: LinearDecayWithWarmup(0.1, 10, 2, last_epoch=-2), ValueError, "last_epoch"),
    (lambda: CosineAnnealingWithWarmupDecay(1e-3, 0.0, 1, 5, last_epoch=2.5), TypeError, "last_epoch"),
    (lambda: InverseSquareRootSchedule(4, last_epoch=-5), ValueError, "last_epoch"),
]


@pytest.mark.parametrize("factory,error,argument", ERROR_CASES)
def test_bad_arguments_raise_naming_the_argument(factory, error, argument):
    with pytest.raises(error, match=f"`{argument}`"):
        factory()


def test_edge_cases_paddlenlp_accepts_keep_working():
    # Zero warmup: the decay starts at the peak at step 0.
    assert LinearDecayWithWarmup(0.1, 10, 0)() == pytest.approx(0.1)
    assert CosineDecayWithWarmup(0.1, 10, 0.0)() == pytest.approx(0.1)
    assert PolyDecayWithWarmup(0.1, 10, 0)() == pytest.approx(0.1)
    assert CosineAnnealingWithWarmupDecay(0.1, 0.0, 0, 10)() == pytest.approx(0.1)
    # Warmup as long as training: the whole run is warmup, and no division by zero.
    values = run(PolyDecayWithWarmup(0.1, 10, 10, lr_end=1e-3), 12)
    assert values[:10] == pytest.approx([0.01 * s for s in range(10)])
    assert values[10] == pytest.approx(0.1) and values[11] == pytest.approx(1e-3)
    # Integral floats and numpy integers count as step numbers.
    assert LinearDecayWithWarmup(0.1, 10.0, np.int64(2)).warmup_steps == 2
    assert LinearDecayWithWarmup(np.float64(0.1), np.int32(10), 2).total_steps == 10


# --------------------------------------------------------------------------
# step(epoch): checked on every registered schedule, as last_epoch is.
# --------------------------------------------------------------------------
def _registered(name):
    """Each registered schedule built through get_scheduler, with the stepping call it takes."""
    from paddle_llrd import get_scheduler

    if name == "sequential":
        stages = [{"name": "linear", "num_warmup_steps": 2, "num_steps": 5}, {"name": "constant"}]
        return get_scheduler(name, 1e-3, num_training_steps=20, stages=stages), None
    if name == "reduce_lr_on_plateau":
        return get_scheduler(name, 1e-3), 1.0  # stepped with a metric
    return get_scheduler(name, 1e-3, num_warmup_steps=4, num_training_steps=20, min_lr=1e-4), None


def _step(scheduler, metric, epoch):
    if metric is None:
        scheduler.step(epoch)
    else:
        scheduler.step(metric, epoch=epoch)


BAD_EPOCHS = [(-5, ValueError), (float("nan"), TypeError), (float("inf"), TypeError), (2.5, TypeError),
              (True, TypeError)]


@pytest.mark.parametrize("name", [str(key) for key in __import__("paddle_llrd").TYPE_TO_SCHEDULER_FUNCTION])
@pytest.mark.filterwarnings("ignore::paddle_llrd.DetachedSchedulerWarning")  # no optimizer follows it, on purpose
def test_step_epoch_is_checked_by_name_on_every_registered_schedule(name):
    scheduler, metric = _registered(name)
    for _ in range(3):
        _step(scheduler, metric, None)
    before, lr = scheduler.state_dict(), scheduler()
    for bad, error in BAD_EPOCHS:
        with pytest.raises(error, match=r"`epoch` must be an int >= 0 \(the step to move to\), got .*"):
            _step(scheduler, metric, bad)
        assert scheduler.state_dict() == before and scheduler() == lr, bad  # nothing changed
    # A valid int moves to that step: the lr an uninterrupted run has there.
    _step(scheduler, metric, 7)
    uninterrupted, _ = _registered(name)
    for _ in range(7):
        _step(uninterrupted, metric, None)
    assert scheduler.last_epoch == uninterrupted.last_epoch == 7
    assert scheduler() == uninterrupted()


CLASS_BUILDERS = {
    "LinearDecayWithWarmup": lambda: LinearDecayWithWarmup(1e-3, 20, 4),
    "ConstScheduleWithWarmup": lambda: ConstScheduleWithWarmup(1e-3, 4),
    "CosineDecayWithWarmup": lambda: CosineDecayWithWarmup(1e-3, 20, 4),
    "PolyDecayWithWarmup": lambda: PolyDecayWithWarmup(1e-3, 20, 4, lr_end=1e-5),
    "CosineAnnealingWithWarmupDecay": lambda: CosineAnnealingWithWarmupDecay(1e-3, 1e-4, 4, 20),
    "LinearAnnealingWithWarmupDecay": lambda: LinearAnnealingWithWarmupDecay(1e-3, 1e-4, 4, 20),
    "InverseSquareRootSchedule": lambda: InverseSquareRootSchedule(4, 1e-3),
    "ReduceOnPlateauSchedule": lambda: __import__("paddle_llrd").ReduceOnPlateauSchedule(1e-3),
    "SequentialSchedule": lambda: __import__("paddle_llrd").SequentialSchedule(
        [LinearDecayWithWarmup(1e-3, 6, 2), CosineDecayWithWarmup(1e-3, 14, 0)], [6]),
}


@pytest.mark.parametrize("bad, error", BAD_EPOCHS)
@pytest.mark.parametrize("name", list(CLASS_BUILDERS))
def test_step_epoch_is_checked_by_name_on_every_scheduler_class(name, bad, error):
    # The rule of the constructor and set_state_dict (docs/schedules.rst, "Resuming"), on step(epoch) of every
    # class too.
    metric = 1.0 if name == "ReduceOnPlateauSchedule" else None
    scheduler, fresh = CLASS_BUILDERS[name](), CLASS_BUILDERS[name]()
    with pytest.raises(error, match=r"`epoch` must be an int >= 0 \(the step to move to\), got .*"):
        _step(scheduler, metric, bad)
    assert scheduler.state_dict() == fresh.state_dict() and scheduler() == fresh()  # nothing changed
    _step(scheduler, metric, 7)
    for _ in range(7):
        _step(fresh, metric, None)
    assert scheduler.last_epoch == fresh.last_epoch == 7 and scheduler() == fresh()
