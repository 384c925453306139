"""The scheduler registry: get_scheduler as PaddleNLP's Trainer calls it, the
schedule functions against PaddleNLP's formulas (written out in float64 in
schedule_formulas.py), and register_scheduler."""
from __future__ import annotations

import enum

import numpy as np
import paddle
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from paddle.optimizer.lr import LambdaDecay, LRScheduler

import schedule_formulas as formula
from schedule_formulas import assert_run, restore_registry, run  # noqa: F401 (the fixture)

from paddle_llrd import (
    TYPE_TO_SCHEDULER_FUNCTION,
    SchedulerType,
    get_constant_schedule,
    get_constant_schedule_with_warmup,
    get_cosine_schedule_with_warmup,
    get_linear_schedule_with_warmup,
    get_polynomial_decay_schedule_with_warmup,
    get_scheduler,
    register_scheduler,
)

PADDLENLP_NAMES = ["linear", "cosine", "constant", "constant_with_warmup", "polynomial"]
ADDED_NAMES = [
    "cosine_with_restarts",
    "inverse_sqrt",
    "cosine_with_min_lr",
    "warmup_stable_decay",
    "cosine_annealing_with_warmup",
    "linear_annealing_with_warmup",
]
# Built from more than (learning_rate, num_warmup_steps, num_training_steps): tests/schedules/test_sequential.py and
# tests/schedules/test_plateau.py cover them.
COMPOSITE_NAMES = ["sequential", "reduce_lr_on_plateau"]

pytestmark = pytest.mark.usefixtures("restore_registry")


# --------------------------------------------------------------------------
# The names and the table.
# --------------------------------------------------------------------------
def test_scheduler_type_holds_paddlenlp_names():
    assert [member.value for member in SchedulerType] == PADDLENLP_NAMES + ADDED_NAMES + COMPOSITE_NAMES
    assert all(isinstance(member, str) for member in SchedulerType)
    assert SchedulerType("polynomial") is SchedulerType.POLYNOMIAL
    assert str(SchedulerType.CONSTANT_WITH_WARMUP) == "constant_with_warmup"


def test_type_to_scheduler_function_maps_every_type():
    assert TYPE_TO_SCHEDULER_FUNCTION[SchedulerType.LINEAR] is get_linear_schedule_with_warmup
    assert TYPE_TO_SCHEDULER_FUNCTION[SchedulerType.COSINE] is get_cosine_schedule_with_warmup
    assert TYPE_TO_SCHEDULER_FUNCTION[SchedulerType.CONSTANT] is get_constant_schedule
    assert TYPE_TO_SCHEDULER_FUNCTION[SchedulerType.CONSTANT_WITH_WARMUP] is get_constant_schedule_with_warmup
    assert TYPE_TO_SCHEDULER_FUNCTION[SchedulerType.POLYNOMIAL] is get_polynomial_decay_schedule_with_warmup
    assert set(SchedulerType) <= set(TYPE_TO_SCHEDULER_FUNCTION)


@pytest.mark.parametrize(
    "fn,text",
    [
        (get_linear_schedule_with_warmup, "(learning_rate, num_warmup_steps, num_training_steps, last_epoch=-1)"),
        (get_cosine_schedule_with_warmup,
         "(learning_rate, num_warmup_steps, num_training_steps, num_cycles=0.5, last_epoch=-1, min_lr=0.0)"),
        (get_constant_schedule, "(learning_rate, last_epoch=-1)"),
        (get_constant_schedule_with_warmup, "(learning_rate, num_warmup_steps, last_epoch=-1, *, num_training_steps=None)"),
        (get_polynomial_decay_schedule_with_warmup,
         "(learning_rate, num_warmup_steps, num_training_steps, lr_end=1e-07, power=1.0, last_epoch=-1)"),
        (get_scheduler, "(name, learning_rate=None, num_warmup_steps=None, num_training_steps=None, num_cycles=0.5, "
                        "lr_end=1e-07, power=1.0, min_lr=0.0, *, optimizer=None, scheduler_specific_kwargs=None, "
                        "**kwargs)"),
    ],
    ids=lambda value: getattr(value, "__name__", ""),
)
def test_signatures_are_specs(fn, text):
    assert formula.signature_text(fn) == text


# --------------------------------------------------------------------------
# Each schedule function over whole runs.
# --------------------------------------------------------------------------
STEP_CASES = [(10, 50), (0, 30), (1, 12), (25, 25), (7, 8), (12, 9)]


@pytest.mark.parametrize("warmup,total", STEP_CASES)
def test_linear_schedule(warmup, total):
    with formula.warns_if_warmup_outlasts(warmup, total):
        scheduler = get_linear_schedule_with_warmup(4e-4, warmup, total)
    assert isinstance(scheduler, LambdaDecay)
    assert_run(scheduler, lambda s: formula.linear(4e-4, warmup, total, s), total + 8)


@pytest.mark.parametrize("num_cycles", [0.5, 0.25, 1.0, 1.5, 2.0, 0.0])
@pytest.mark.parametrize("min_lr", [0.0, 1e-5, 4e-4])
@pytest.mark.parametrize("warmup,total", STEP_CASES)
def test_cosine_schedule(warmup, total, num_cycles, min_lr):
    with formula.warns_if_warmup_outlasts(warmup, total):
        scheduler = get_cosine_schedule_with_warmup(4e-4, warmup, total, num_cycles=num_cycles, min_lr=min_lr)
    assert isinstance(scheduler, LambdaDecay)
    assert_run(scheduler, lambda s: formula.cosine(4e-4, warmup, total, s, num_cycles, min_lr), total + 8)


def test_cosine_schedule_reaches_min_lr_at_the_end_and_stays():
    values = run(get_cosine_schedule_with_warmup(1e-3, 10, 110, min_lr=1e-4), 130)
    assert values[10] == pytest.approx(1e-3)
    assert values[60] == pytest.approx(0.5 * (1e-3 + 1e-4))
    assert values[110:] == pytest.approx([1e-4] * 20)


def test_constant_schedule():
    assert_run(get_constant_schedule(0.03), lambda s: 0.03, 20)


@pytest.mark.parametrize("warmup", [0, 1, 6, 20])
def test_constant_schedule_with_warmup(warmup):
    assert_run(get_constant_schedule_with_warmup(0.03, warmup), lambda s: formula.constant_with_warmup(0.03, warmup, s), 30)


@pytest.mark.parametrize("lr_end,power", [(1e-7, 1.0), (0.0, 2.0), (1e-3, 0.5), (5e-3, 3.0)])
@pytest.mark.parametrize("warmup,total", STEP_CASES)
def test_polynomial_schedule(warmup, total, lr_end, power):
    with formula.warns_if_warmup_outlasts(warmup, total):
        scheduler = get_polynomial_decay_schedule_with_warmup(1e-2, warmup, total, lr_end=lr_end, power=power)
    assert isinstance(scheduler, LambdaDecay)
    assert_run(scheduler, lambda s: formula.polynomial(1e-2, warmup, total, s, lr_end, power), total + 8)


def test_num_warmup_steps_is_a_count_never_a_fraction():
    # The class schedulers read a float `warmup` as a fraction; the registry's
    # num_warmup_steps is always a number of steps, as in PaddleNLP.
    assert_run(get_linear_schedule_with_warmup(0.1, 10.0, 40.0), lambda s: formula.linear(0.1, 10, 40, s), 45)
    assert_run(get_constant_schedule_with_warmup(0.1, np.int64(5)), lambda s: formula.constant_with_warmup(0.1, 5, s), 8)
    with pytest.raises(ValueError, match="`num_warmup_steps`"):
        get_linear_schedule_with_warmup(0.1, 0.5, 40)


@pytest.mark.parametrize(
    "factory,n_skip",
    [
        (lambda **kw: get_linear_schedule_with_warmup(1e-3, 5, 30, **kw), 12),
        (lambda **kw: get_cosine_schedule_with_warmup(1e-3, 5, 30, 0.5, min_lr=1e-5, **kw), 12),
        (lambda **kw: get_constant_schedule(1e-3, **kw), 3),
        (lambda **kw: get_constant_schedule_with_warmup(1e-3, 5, **kw), 2),
        (lambda **kw: get_polynomial_decay_schedule_with_warmup(1e-3, 5, 30, 1e-5, 2.0, **kw), 20),
    ],
)
def test_resume_with_last_epoch_and_state_dict(factory, n_skip):
    uninterrupted = factory()
    run(uninterrupted, n_skip + 1)
    state = uninterrupted.state_dict()
    future = run(uninterrupted, 25)
    np.testing.assert_array_equal(run(factory(last_epoch=n_skip), 25), future)
    restored = factory()
    restored.set_state_dict(state)
    np.testing.assert_array_equal(run(restored, 25), future)


@pytest.mark.parametrize("name", PADDLENLP_NAMES + ADDED_NAMES)
def test_every_schedule_refuses_a_bad_state_dict_and_changes_nothing(name):
    scheduler = get_scheduler(name, 1e-3, num_warmup_steps=5, num_training_steps=30, min_lr=1e-4)
    run(scheduler, 9)
    before = scheduler.state_dict()
    with pytest.raises(KeyError, match="`last_lr`"):
        scheduler.set_state_dict({"last_epoch": 20})
    with pytest.raises(TypeError, match="`last_epoch`"):
        scheduler.set_state_dict({"last_epoch": "20", "last_lr": 1e-4})
    assert scheduler.state_dict() == before
    scheduler.set_state_dict({"last_epoch": 20, "last_lr": 1e-4})
    assert scheduler.last_epoch == 20


# --------------------------------------------------------------------------
# get_scheduler.
# --------------------------------------------------------------------------
def reference_for(name, lr, warmup, total, num_cycles=0.5, lr_end=1e-7, power=1.0, min_lr=0.0):
    return {
        "linear": lambda s: formula.linear(lr, warmup, total, s),
        "cosine": lambda s: formula.cosine(lr, warmup, total, s, num_cycles, min_lr),
        "constant": lambda s: lr,
        "constant_with_warmup": lambda s: formula.constant_with_warmup(lr, warmup, s),
        "polynomial": lambda s: formula.polynomial(lr, warmup, total, s, lr_end, power),
    }[name]


class PaddleNLPSchedulerType(enum.Enum):
    """What PaddleNLP's TrainingArguments store: a plain Enum, not a str."""

    LINEAR = "linear"
    COSINE = "cosine"
    CONSTANT = "constant"
    CONSTANT_WITH_WARMUP = "constant_with_warmup"
    POLYNOMIAL = "polynomial"


@pytest.mark.parametrize("name", PADDLENLP_NAMES)
@pytest.mark.parametrize("spelling", ["str", "ours", "paddlenlp_enum"])
def test_get_scheduler_takes_paddlenlp_trainer_call(name, spelling):
    lr_scheduler_type = {
        "str": name,
        "ours": SchedulerType(name),
        "paddlenlp_enum": PaddleNLPSchedulerType(name),
    }[spelling]
    # Exactly the call of PaddleNLP's Trainer.create_scheduler.
    scheduler = get_scheduler(
        lr_scheduler_type,
        learning_rate=3e-5,
        num_warmup_steps=6,
        num_training_steps=40,
        num_cycles=0.5,
        lr_end=1e-7,
        power=1.0,
    )
    assert isinstance(scheduler, LRScheduler)
    assert_run(scheduler, reference_for(name, 3e-5, 6, 40), 45)


@pytest.mark.parametrize("name", PADDLENLP_NAMES)
def test_get_scheduler_passes_each_option_where_it_belongs(name):
    options = dict(num_cycles=1.5, lr_end=2e-4, power=2.0, min_lr=1e-4)
    scheduler = get_scheduler(name, 1e-3, num_warmup_steps=4, num_training_steps=24, **options)
    assert_run(scheduler, reference_for(name, 1e-3, 4, 24, **options), 30)


@pytest.mark.parametrize("name", PADDLENLP_NAMES)
def test_get_scheduler_defaults_are_the_documented_numbers(name):
    # docs/schedules.rst: num_cycles=0.5, lr_end=1e-7, power=1.0, min_lr=0.0 when the caller passes none of them.
    scheduler = get_scheduler(name, 1e-3, num_warmup_steps=5, num_training_steps=30)
    assert_run(scheduler, reference_for(name, 1e-3, 5, 30, num_cycles=0.5, lr_end=1e-7, power=1.0, min_lr=0.0), 36)


def test_get_scheduler_positional_call_and_last_epoch():
    scheduler = get_scheduler("polynomial", 1e-3, 4, 24, 0.5, 1e-5, 3.0, last_epoch=9)
    assert scheduler.last_epoch == 10
    assert scheduler() == pytest.approx(formula.polynomial(1e-3, 4, 24, 10, 1e-5, 3.0))


def test_constant_needs_no_step_counts():
    assert get_scheduler("constant", 0.5)() == 0.5
    assert get_scheduler(SchedulerType.CONSTANT, 0.5, num_warmup_steps=None, num_training_steps=None)() == 0.5


@pytest.mark.parametrize("name", ["linear", "cosine", "constant_with_warmup", "polynomial"])
def test_missing_num_warmup_steps_is_named(name):
    with pytest.raises(ValueError, match="`num_warmup_steps`"):
        get_scheduler(name, 1e-3, num_training_steps=100)


@pytest.mark.parametrize("name", ["linear", "cosine", "polynomial"])
def test_missing_num_training_steps_is_named(name):
    with pytest.raises(ValueError, match="`num_training_steps`"):
        get_scheduler(name, 1e-3, num_warmup_steps=10)


def test_constant_with_warmup_ignores_num_training_steps():
    scheduler = get_scheduler("constant_with_warmup", 1e-3, num_warmup_steps=4)
    assert_run(scheduler, lambda s: formula.constant_with_warmup(1e-3, 4, s), 8)


@pytest.mark.parametrize("bad_name", ["cosine_with_hard_restarts", "Linear", "", "wsd", "inverse_square_root"])
def test_unknown_name_lists_the_valid_ones(bad_name):
    with pytest.raises(ValueError) as info:
        get_scheduler(bad_name, 1e-3, num_warmup_steps=1, num_training_steps=10)
    message = str(info.value)
    assert repr(bad_name) in message
    for name in PADDLENLP_NAMES + ADDED_NAMES:
        assert name in message


@pytest.mark.parametrize("bad_name", [None, 3, 1.5, ["linear"]])
def test_name_of_the_wrong_type(bad_name):
    with pytest.raises(TypeError, match="`name`"):
        get_scheduler(bad_name, 1e-3, num_warmup_steps=1, num_training_steps=10)


def test_unexpected_keyword_argument_is_named():
    with pytest.raises(TypeError, match="warmup_ratio"):
        get_scheduler("linear", 1e-3, num_warmup_steps=1, num_training_steps=10, warmup_ratio=0.1)


@pytest.mark.parametrize(
    "call,error,argument",
    [
        (lambda: get_scheduler("linear", -1e-3, num_warmup_steps=1, num_training_steps=10), ValueError, "learning_rate"),
        (lambda: get_scheduler("linear", 1e-3, num_warmup_steps=-1, num_training_steps=10), ValueError, "num_warmup_steps"),
        (lambda: get_scheduler("linear", 1e-3, num_warmup_steps=1, num_training_steps=0), ValueError, "num_training_steps"),
        (lambda: get_scheduler("cosine", 1e-3, num_warmup_steps=1, num_training_steps=float("nan")), ValueError, "num_training_steps"),
        (lambda: get_scheduler("cosine", 1e-3, num_warmup_steps=1, num_training_steps=10, min_lr=1e-2), ValueError, "min_lr"),
        (lambda: get_scheduler("cosine", 1e-3, num_warmup_steps=1, num_training_steps=10, min_lr=-1.0), ValueError, "min_lr"),
        (lambda: get_scheduler("cosine", 1e-3, num_warmup_steps=1, num_training_steps=10, num_cycles=-0.5), ValueError, "num_cycles"),
        (lambda: get_scheduler("cosine", 1e-3, num_warmup_steps=1, num_training_steps=10, num_cycles="half"), TypeError, "num_cycles"),
        (lambda: get_scheduler("cosine", float("inf"), num_warmup_steps=1, num_training_steps=10), ValueError, "learning_rate"),
        (lambda: get_scheduler("polynomial", 1e-3, num_warmup_steps=1, num_training_steps=10, lr_end=1e-3), ValueError, "lr_end"),
        (lambda: get_scheduler("polynomial", 1e-3, num_warmup_steps=1, num_training_steps=10, power=-2.0), ValueError, "power"),
        (lambda: get_scheduler("constant", -0.5), ValueError, "learning_rate"),
        (lambda: get_scheduler("constant_with_warmup", 1e-3, num_warmup_steps=2.5), ValueError, "num_warmup_steps"),
        (lambda: get_constant_schedule(1e-3, last_epoch=-3), ValueError, "last_epoch"),
        (lambda: get_cosine_schedule_with_warmup(1e-3, 1, 10, last_epoch=1.0), TypeError, "last_epoch"),
    ],
)
def test_bad_arguments_raise_naming_the_argument(call, error, argument):
    with pytest.raises(error, match=f"`{argument}`"):
        call()


# --------------------------------------------------------------------------
# register_scheduler.
# --------------------------------------------------------------------------
def test_registered_schedule_gets_only_the_arguments_it_accepts():
    received = {}

    def halving(learning_rate, num_training_steps, last_epoch=-1):
        received.update(learning_rate=learning_rate, num_training_steps=num_training_steps, last_epoch=last_epoch)
        return LambdaDecay(learning_rate, lambda s: 0.5 ** (2 * s // num_training_steps), last_epoch)

    assert register_scheduler("halving", halving) is halving
    scheduler = get_scheduler(
        "halving", 0.8, num_warmup_steps=3, num_training_steps=10, num_cycles=0.5, lr_end=1e-7, power=1.0
    )
    assert received == {"learning_rate": 0.8, "num_training_steps": 10, "last_epoch": -1}
    assert_run(scheduler, lambda s: 0.8 * 0.5 ** (2 * s // 10), 20)
    assert "halving" in TYPE_TO_SCHEDULER_FUNCTION


def test_registered_schedule_with_kwargs_gets_everything():
    received = {}

    def anything(learning_rate, **kwargs):
        received.update(kwargs)
        return LambdaDecay(learning_rate, lambda s: 1.0)

    register_scheduler("anything", anything)
    get_scheduler("anything", 0.1, num_warmup_steps=2, num_training_steps=9, gamma=0.3)
    assert received == {
        "num_warmup_steps": 2,
        "num_training_steps": 9,
        "num_cycles": 0.5,
        "lr_end": 1e-7,
        "power": 1.0,
        "min_lr": 0.0,
        "gamma": 0.3,
    }
    assert all(type(received[key]) is float for key in ("num_cycles", "lr_end", "power", "min_lr"))


def test_options_left_out_keep_the_registered_functions_own_defaults():
    received = {}

    def own_defaults(learning_rate, num_cycles=3.0, min_lr=None, power=2.0, lr_end=0.25):
        received.update(num_cycles=num_cycles, min_lr=min_lr, power=power, lr_end=lr_end)
        return get_constant_schedule(learning_rate)

    def no_defaults(learning_rate, num_cycles, min_lr):
        received.update(num_cycles=num_cycles, min_lr=min_lr)
        return get_constant_schedule(learning_rate)

    register_scheduler("own_defaults", own_defaults)
    register_scheduler("no_defaults", no_defaults)
    get_scheduler("own_defaults", 0.1)
    assert received == {"num_cycles": 3.0, "min_lr": None, "power": 2.0, "lr_end": 0.25}
    # Passed explicitly, even with the value of get_scheduler's default, they arrive.
    get_scheduler("own_defaults", 0.1, num_cycles=0.5, min_lr=0.0, power=1.0, lr_end=1e-7)
    assert received == {"num_cycles": 0.5, "min_lr": 0.0, "power": 1.0, "lr_end": 1e-7}
    # Without a default of the function's own, get_scheduler's documented default arrives, a plain float.
    received.clear()
    get_scheduler("no_defaults", 0.1)
    assert received == {"num_cycles": 0.5, "min_lr": 0.0}
    assert type(received["num_cycles"]) is float and type(received["min_lr"]) is float


def test_registered_schedule_missing_argument_is_named():
    def stepped(learning_rate, num_warmup_steps, gamma):
        return LambdaDecay(learning_rate, lambda s: gamma ** (s // max(1, num_warmup_steps)))

    register_scheduler("stepped", stepped)
    with pytest.raises(ValueError, match="`gamma`"):
        get_scheduler("stepped", 0.1, num_warmup_steps=2)
    with pytest.raises(ValueError, match="`num_warmup_steps`"):
        get_scheduler("stepped", 0.1, gamma=0.5)
    assert_run(get_scheduler("stepped", 0.1, num_warmup_steps=2, gamma=0.5), lambda s: 0.1 * 0.5 ** (s // 2), 9)


def test_unknown_name_lists_registered_names_too():
    register_scheduler("my_schedule", lambda learning_rate: get_constant_schedule(learning_rate))
    with pytest.raises(ValueError, match="my_schedule"):
        get_scheduler("nope", 1e-3)


@pytest.mark.parametrize("name", PADDLENLP_NAMES + [SchedulerType.COSINE])
def test_builtin_is_not_overwritten_silently(name):
    before = dict(TYPE_TO_SCHEDULER_FUNCTION)
    with pytest.raises(ValueError, match="overwrite=True"):
        register_scheduler(name, lambda learning_rate, **kw: get_constant_schedule(learning_rate))
    assert TYPE_TO_SCHEDULER_FUNCTION == before


def test_builtin_overwritten_explicitly():
    def flat(learning_rate, num_warmup_steps, num_training_steps, last_epoch=-1):
        return get_constant_schedule(learning_rate, last_epoch)

    register_scheduler("linear", flat, overwrite=True)
    assert TYPE_TO_SCHEDULER_FUNCTION[SchedulerType.LINEAR] is flat
    assert_run(get_scheduler("linear", 0.2, num_warmup_steps=3, num_training_steps=9), lambda s: 0.2, 12)


def test_registered_name_is_not_overwritten_silently():
    first = lambda learning_rate: get_constant_schedule(learning_rate)  # noqa: E731
    register_scheduler("mine", first)
    with pytest.raises(ValueError, match="`name`.*already"):
        register_scheduler("mine", lambda learning_rate: get_constant_schedule(2 * learning_rate))
    assert TYPE_TO_SCHEDULER_FUNCTION["mine"] is first


@pytest.mark.parametrize(
    "name,fn,overwrite,error,argument",
    [
        (None, get_constant_schedule, False, TypeError, "name"),
        (42, get_constant_schedule, False, TypeError, "name"),
        ("", get_constant_schedule, False, ValueError, "name"),
        ("ok", "not callable", False, TypeError, "fn"),
        ("ok", None, False, TypeError, "fn"),
        ("ok", lambda: None, False, TypeError, "fn"),
        ("ok", lambda *, learning_rate: None, False, TypeError, "fn"),
        ("ok", get_constant_schedule, "yes", TypeError, "overwrite"),
    ],
)
def test_register_scheduler_validates(name, fn, overwrite, error, argument):
    before = dict(TYPE_TO_SCHEDULER_FUNCTION)
    with pytest.raises(error, match=f"`{argument}`"):
        register_scheduler(name, fn, overwrite=overwrite)
    assert TYPE_TO_SCHEDULER_FUNCTION == before


# --------------------------------------------------------------------------
# Properties and a real optimizer.
# --------------------------------------------------------------------------
@settings(max_examples=50, deadline=None)
@given(
    lr=st.floats(1e-7, 1.0),
    total=st.integers(1, 300),
    warmup_fraction=st.floats(0.0, 1.0),
    min_fraction=st.floats(0.0, 1.0),
    end_fraction=st.floats(0.0, 0.99),
    power=st.sampled_from([0.5, 1.0, 2.0]),
)
def test_property_registry_schedules(lr, total, warmup_fraction, min_fraction, end_fraction, power):
    warmup = int(warmup_fraction * total)
    min_lr, lr_end = lr * min_fraction, lr * end_fraction
    tol = 1e-12 * lr
    steps = np.arange(total + 5)
    for name in PADDLENLP_NAMES:
        values = run(
            get_scheduler(name, lr, num_warmup_steps=warmup, num_training_steps=total,
                          lr_end=lr_end, power=power, min_lr=min_lr),
            total + 5,
        )
        assert np.all(values >= 0.0) and np.all(values <= lr + tol), name
        if name == "constant":
            assert np.all(values == lr)
            continue
        if warmup > 0:  # linear warmup from 0
            np.testing.assert_allclose(values[:warmup], lr * steps[:warmup] / warmup, rtol=1e-12, atol=tol)
        if warmup < total:
            assert values[warmup] == pytest.approx(lr, rel=1e-12), name  # continuous into the decay
        assert np.all(np.diff(values[warmup:]) <= tol), name  # the decay never climbs
        if name == "cosine":
            assert np.all(values[warmup:] >= min_lr - tol)
            assert values[-1] == pytest.approx(min_lr, rel=1e-9, abs=tol)
        if name == "polynomial":
            assert np.all(values[warmup:] >= lr_end - tol)
            assert values[-1] == pytest.approx(lr_end, rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("name", PADDLENLP_NAMES)
def test_adamw_follows_get_scheduler(name):
    scheduler = get_scheduler(name, 2e-3, num_warmup_steps=5, num_training_steps=25, min_lr=1e-4, lr_end=1e-5)
    reference = reference_for(name, 2e-3, 5, 25, min_lr=1e-4, lr_end=1e-5)
    layer = paddle.nn.Linear(3, 2)
    optimizer = paddle.optimizer.AdamW(learning_rate=scheduler, parameters=layer.parameters())
    x = paddle.randn([4, 3])
    for step in range(30):
        assert optimizer.get_lr() == pytest.approx(reference(step), rel=1e-12, abs=1e-18)
        layer(x).square().mean().backward()
        optimizer.step()
        optimizer.clear_grad()
        scheduler.step()
