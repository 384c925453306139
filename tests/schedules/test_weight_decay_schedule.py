"""WeightDecaySchedule (Megatron-LM's weight-decay increment) and AdamWDL driven by it.

The schedule is checked against Megatron-LM's ``OptimizerParamScheduler.get_wd``
written out below; AdamWDL with a schedule against the float64 NumPy reference
(tests/helpers/reference_adamw.py) with that formula's coefficient at every step.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import paddle
import pytest
from paddle import nn

from paddle_llrd import AdamWDL, CheckpointMatchWarning, WeightDecaySchedule
from operator_off import PER_PARAMETER_ONLY, flat_path
from reference_adamw import ReferenceAdamW
from adamwdl_runs import (
    batches,
    bert_like,
    decays_structured,
    fresh_names,
    make_adamwdl,
    name_dict_of,
    no_bias_or_norm,
    ratio_fn,
    tiny_bert,
    to_static_train_and_compare,
    train_and_compare,
    weights_of,
)


def megatron_wd(step: int, start: float, end: float, total: int, style: str) -> float:
    """Megatron-LM's get_wd: end past the ramp, else start + coeff * (end - start)."""
    if step >= total:  # Megatron: `num_steps > wd_incr_steps`; at == both styles give coeff 1
        return end
    if style == "constant":
        return end
    ratio = step / total
    coeff = ratio if style == "linear" else 0.5 * (math.cos(math.pi * (1 - ratio)) + 1.0)
    return start + coeff * (end - start)


# --------------------------------------------------------------- the schedule
@pytest.mark.parametrize("style", ["linear", "cosine"])
@pytest.mark.parametrize("start, end, total", [(0.0, 0.1, 10), (0.3, 0.05, 7), (0.01, 0.01, 3), (0.2, 0.4, 1)])
def test_values_follow_megatron_formula(style, start, end, total):
    schedule = WeightDecaySchedule(start, end, total, style)
    for step in range(total + 5):
        expected = megatron_wd(step, start, end, total, style)
        assert schedule(step) == pytest.approx(expected, rel=1e-12, abs=1e-15), step
        assert schedule() == pytest.approx(expected, rel=1e-12, abs=1e-15), step
        schedule.step()
    assert schedule.current_step == total + 5


def test_endpoints_and_midpoint():
    linear = WeightDecaySchedule(0.1, 0.3, 4, "linear")
    cosine = WeightDecaySchedule(0.1, 0.3, 4, "cosine")
    assert linear(0) == cosine(0) == 0.1
    assert linear(4) == cosine(4) == linear(100) == cosine(100) == 0.3
    assert linear(2) == pytest.approx(0.2) and cosine(2) == pytest.approx(0.2)
    # cosine starts flat: below linear in the first half of an increasing ramp, above it after
    assert cosine(1) < linear(1) and cosine(3) > linear(3)


def test_constant_and_zero_length_ramp():
    constant = WeightDecaySchedule(0.05, 0.05, 10, "constant")
    assert [constant(s) for s in (0, 5, 10, 50)] == [0.05] * 4
    immediate = WeightDecaySchedule(0.0, 0.2, 0, "linear")
    assert immediate(0) == immediate(3) == 0.2


def test_current_step_keyword_starts_part_way():
    schedule = WeightDecaySchedule(0.0, 0.1, 10, current_step=4, style="linear")
    assert schedule() == pytest.approx(0.04)


@pytest.mark.parametrize(
    "kwargs, error, argument",
    [
        (dict(start_wd=-0.1), ValueError, "start_wd"),
        (dict(start_wd=math.nan), ValueError, "start_wd"),
        (dict(end_wd=math.inf), ValueError, "end_wd"),
        (dict(end_wd="0.1"), TypeError, "end_wd"),
        (dict(start_wd=True), TypeError, "start_wd"),
        (dict(total_steps=-1), ValueError, "total_steps"),
        (dict(total_steps=10.0), TypeError, "total_steps"),
        (dict(style="exponential"), ValueError, "style"),
        (dict(style=None), TypeError, "style"),
        (dict(style="constant"), ValueError, "end_wd"),  # start 0.0 != end 0.1
        (dict(current_step=-2), ValueError, "current_step"),
    ],
)
def test_bad_arguments_name_themselves(kwargs, error, argument):
    arguments = dict(start_wd=0.0, end_wd=0.1, total_steps=10, style="linear")
    arguments.update(kwargs)
    with pytest.raises(error, match=argument):
        WeightDecaySchedule(**arguments)


def test_state_dict_round_trip_restores_position_only():
    schedule = WeightDecaySchedule(0.0, 0.1, 10, "cosine")
    for _ in range(6):
        schedule.step()
    state = schedule.state_dict()
    assert state == {"current_step": 6, "start_wd": 0.0, "end_wd": 0.1, "total_steps": 10, "style": "cosine"}

    resumed = WeightDecaySchedule(0.0, 0.1, 10, "cosine")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # same settings: no warning
        resumed.set_state_dict(state)
    assert resumed.current_step == 6
    assert resumed() == pytest.approx(megatron_wd(6, 0.0, 0.1, 10, "cosine"), rel=1e-12)

    changed = WeightDecaySchedule(0.0, 0.2, 10, "cosine")
    with pytest.warns(CheckpointMatchWarning, match="end_wd"):
        changed.set_state_dict(state)
    assert changed.current_step == 6 and changed.end_wd == 0.2


@pytest.mark.parametrize("load", ["the_schedule", "the_optimizer"])
def test_a_checkpoint_of_other_schedule_settings_warns_at_the_line_that_loads_it(load):
    linear = nn.Linear(2, 2)
    saved = AdamWDL(parameters=linear.parameters(), weight_decay=WeightDecaySchedule(0.0, 0.1, 5, style="linear"))
    optimizer = AdamWDL(parameters=linear.parameters(), weight_decay=WeightDecaySchedule(0.0, 0.2, 5, style="linear"))
    with pytest.warns(CheckpointMatchWarning, match="end_wd") as caught:
        if load == "the_schedule":
            optimizer.weight_decay_schedule.set_state_dict(saved.weight_decay_schedule.state_dict())
        else:
            optimizer.set_state_dict(saved.state_dict())
    assert [w.filename for w in caught if "end_wd" in str(w.message)] == [__file__]


@pytest.mark.parametrize(
    "state, error, match",
    [({}, KeyError, "current_step"), ({"current_step": -1}, ValueError, "current_step"), ([6], TypeError, "state_dict")],
)
def test_bad_state_changes_nothing(state, error, match):
    schedule = WeightDecaySchedule(0.0, 0.1, 10, current_step=3, style="linear")
    with pytest.raises(error, match=match):
        schedule.set_state_dict(state)
    assert schedule.current_step == 3


# ------------------------------------------------------- AdamWDL, numerics
START, END, TOTAL = 0.05, 0.6, 4  # a large end value so that the ramp shows in the weights


@pytest.mark.parametrize("style", ["linear", "cosine"])
@pytest.mark.parametrize("general", [False, True], ids=["fused", "general"])
@pytest.mark.parametrize("use_multi_tensor", [None, False], ids=["multi_tensor", "per_parameter"])
def test_adamwdl_follows_schedule_against_float64_reference(style, general, use_multi_tensor):
    """7 steps: the ramp over 4, then 3 clamped at end_wd; LR scheduler, layer ratios, no-decay params."""
    steps = TOTAL + 3
    model = tiny_bert()
    names = name_dict_of(model)
    scheduler = paddle.optimizer.lr.LambdaDecay(0.02, lr_lambda=lambda epoch: 1.0 / (1 + epoch))
    optimizer = make_adamwdl(
        model,
        general=general,
        learning_rate=scheduler,
        weight_decay=WeightDecaySchedule(START, END, TOTAL, style),
        layerwise_decay=0.5,
        apply_decay_param_fun=no_bias_or_norm(names),
        use_multi_tensor=use_multi_tensor,
    )
    paths = []
    reference = ReferenceAdamW(weights_of(model))
    train_and_compare(
        model,
        optimizer,
        reference,
        steps=steps,
        lr_at=lambda step: 0.02 / (1 + step),
        scheduler=scheduler,
        reference_options=lambda step: {
            "ratio": ratio_fn(0.5),
            "decay": decays_structured,
            "weight_decay": megatron_wd(step, START, END, TOTAL, style),
        },
        paths=paths,
    )
    assert optimizer.weight_decay_schedule.current_step == steps
    assert optimizer._coeff == END
    # every step on the path asked for, the schedule's changes of the coefficient included
    assert paths == [flat_path() if use_multi_tensor is None else PER_PARAMETER_ONLY] * steps


def test_schedule_changes_the_weights():
    """The same run with a constant weight decay of start_wd ends elsewhere (the test can fail)."""
    finals = []
    for weight_decay in (START, WeightDecaySchedule(START, END, TOTAL, "linear")):
        model = bert_like()
        optimizer = make_adamwdl(model, learning_rate=0.05, weight_decay=weight_decay, layerwise_decay=0.5)
        for ids, labels in batches(TOTAL):
            nn.functional.cross_entropy(model(ids), labels).backward()
            optimizer.step()
            optimizer.clear_grad()
        finals.append(weights_of(model)["classifier.weight"])
    assert not np.allclose(finals[0], finals[1], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("general", [False, True], ids=["fused", "general"])
def test_groups_with_their_own_weight_decay_keep_it(general):
    model = tiny_bert()
    layer0 = [p for n, p in model.named_parameters() if ".layers.0." in n]
    layer1 = [p for n, p in model.named_parameters() if ".layers.1." in n]
    others = [p for n, p in model.named_parameters() if ".layers." not in n]
    optimizer = make_adamwdl(
        model,
        general=general,
        parameters=[
            {"params": layer0, "weight_decay": 0.4, "learning_rate": 0.5},
            {"params": layer1, "coeff": 0.0},
            {"params": others},  # follows the schedule
        ],
        learning_rate=0.01,
        weight_decay=WeightDecaySchedule(0.1, 0.5, 3, "linear"),
        layerwise_decay=0.5,
    )

    def weight_decay_at(step):
        return lambda n: 0.4 if ".layers.0." in n else 0.0 if ".layers.1." in n else megatron_wd(step, 0.1, 0.5, 3, "linear")

    reference = ReferenceAdamW(weights_of(model))
    train_and_compare(
        model,
        optimizer,
        reference,
        steps=5,
        lr_at=lambda step: 0.01,
        reference_options=lambda step: {
            "ratio": ratio_fn(0.5),
            "lr_scale": lambda n: 0.5 if ".layers.0." in n else 1.0,
            "weight_decay": weight_decay_at(step),
        },
    )
    # one advance per step(), not one per group
    assert optimizer.weight_decay_schedule.current_step == 5


def test_schedule_in_a_parameter_group_is_refused():
    model = tiny_bert()
    with pytest.raises(TypeError, match="weight_decay"):
        make_adamwdl(
            model,
            parameters=[{"params": model.parameters(), "weight_decay": WeightDecaySchedule(0.0, 0.1, 3, style="linear")}],
        )


def test_dygraph_minimize_advances_once_per_call():
    model = bert_like()
    schedule = WeightDecaySchedule(0.0, 0.3, 2, "linear")
    optimizer = make_adamwdl(model, learning_rate=0.01, weight_decay=schedule, layerwise_decay=0.5)
    reference = ReferenceAdamW(weights_of(model))
    for step, (ids, labels) in enumerate(batches(3)):
        loss = nn.functional.cross_entropy(model(ids), labels)
        loss.backward()
        grads = {n: p.grad.numpy().astype(np.float64) for n, p in model.named_parameters()}
        optimizer.minimize(loss)
        optimizer.clear_grad()
        reference.step(grads, 0.01, ratio=ratio_fn(0.5), weight_decay=megatron_wd(step, 0.0, 0.3, 2, "linear"))
        assert schedule.current_step == step + 1
    for name, value in weights_of(model).items():
        np.testing.assert_allclose(value, reference.params[name], rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("general", [False, True], ids=["fused", "general"])
def test_overflow_step_does_not_advance_the_schedule(general):
    model = bert_like()
    optimizer = make_adamwdl(
        model, general=general, learning_rate=0.01, weight_decay=WeightDecaySchedule(0.1, 0.5, 4, style="linear"), layerwise_decay=0.5
    )
    reference = ReferenceAdamW(weights_of(model))
    data = batches(5)

    def run(chunk, first_step):
        train_and_compare(
            model,
            optimizer,
            reference,
            data=chunk,
            lr_at=lambda s: 0.01,
            reference_options=lambda s: {
                "ratio": ratio_fn(0.5),
                "weight_decay": megatron_wd(first_step + s, 0.1, 0.5, 4, "linear"),
            },
        )

    run(data[:2], 0)
    weights = weights_of(model)
    nn.functional.cross_entropy(model(data[2][0]), data[2][1]).backward()
    optimizer._set_auxiliary_var("found_inf", paddle.to_tensor([True]))
    optimizer.step()
    optimizer.clear_grad()
    assert optimizer.weight_decay_schedule.current_step == 2
    for name, value in weights_of(model).items():
        np.testing.assert_array_equal(value, weights[name], err_msg=name)
    optimizer._set_auxiliary_var("found_inf", paddle.to_tensor([False]))
    run(data[3:], 2)  # steps 2 and 3 of the schedule
    assert optimizer.weight_decay_schedule.current_step == 4


def test_to_static_train_step_follows_schedule():
    """Under paddle.jit.to_static (SOT) the optimizer step runs eagerly, so the schedule applies."""
    model = bert_like()
    optimizer = make_adamwdl(
        model, learning_rate=0.01, weight_decay=WeightDecaySchedule(0.0, 0.5, 3, "cosine"), layerwise_decay=0.5
    )
    to_static_train_and_compare(
        model, optimizer, ReferenceAdamW(weights_of(model)), steps=4, lr_at=lambda step: 0.01,
        reference_options=lambda step: {
            "ratio": ratio_fn(0.5), "weight_decay": megatron_wd(step, 0.0, 0.5, 3, "cosine"),
        },
    )


def test_static_program_minimize_raises_before_changing_the_program():
    paddle.enable_static()
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [-1, 4], "float32")
        loss = paddle.mean(nn.Linear(4, 2)(x))
        optimizer = AdamWDL(learning_rate=0.01, weight_decay=WeightDecaySchedule(0.0, 0.1, 5, style="linear"))
        ops_before = len(main.global_block().ops)
        with pytest.raises(NotImplementedError, match="static program"):
            optimizer.minimize(loss)
        assert len(main.global_block().ops) == ops_before
        # a float weight decay builds the same program without complaint
        AdamWDL(learning_rate=0.01, weight_decay=0.1).minimize(loss)
        assert len(main.global_block().ops) > ops_before


# ------------------------------------------------------------ checkpoints
def _train(model, optimizer, data):
    for ids, labels in data:
        nn.functional.cross_entropy(model(ids), labels).backward()
        optimizer.step()
        optimizer.clear_grad()


@pytest.mark.parametrize("general", [False, True], ids=["fused", "general"])
def test_save_load_resume_equals_uninterrupted(tmp_path, general):
    data = batches(6)

    def build():
        model = tiny_bert()
        optimizer = make_adamwdl(
            model,
            general=general,
            learning_rate=0.02,
            weight_decay=WeightDecaySchedule(0.0, 0.8, 5, "cosine"),
            layerwise_decay=0.6,
        )
        return model, optimizer

    with fresh_names():
        model, optimizer = build()
        _train(model, optimizer, data)
        uninterrupted = weights_of(model)

    with fresh_names():
        model, optimizer = build()
        _train(model, optimizer, data[:3])
        state = optimizer.state_dict()
        assert state["weight_decay_schedule"]["current_step"] == 3
        paddle.save(model.state_dict(), str(tmp_path / "model.pdparams"))
        paddle.save(state, str(tmp_path / "opt.pdopt"))

    with fresh_names():
        paddle.seed(99)
        model, optimizer = build()
        model.set_state_dict(paddle.load(str(tmp_path / "model.pdparams")))
        optimizer.set_state_dict(paddle.load(str(tmp_path / "opt.pdopt")))
        assert optimizer.weight_decay_schedule.current_step == 3
        assert optimizer._coeff == pytest.approx(megatron_wd(3, 0.0, 0.8, 5, "cosine"))
        _train(model, optimizer, data[3:])
        resumed = weights_of(model)

    for name in uninterrupted:
        np.testing.assert_array_equal(resumed[name], uninterrupted[name], err_msg=name)


def test_checkpoints_with_and_without_schedule_entry():
    data = batches(4)
    with fresh_names():
        model = tiny_bert()
        reference = ReferenceAdamW(weights_of(model))
        scheduled = make_adamwdl(model, learning_rate=0.01, weight_decay=WeightDecaySchedule(0.0, 0.1, 5, style="linear"), layerwise_decay=0.5)
        train_and_compare(
            model,
            scheduled,
            reference,
            lr_at=lambda step: 0.01,
            data=data[:2],
            reference_options=lambda step: {"ratio": ratio_fn(0.5), "weight_decay": megatron_wd(step, 0.0, 0.1, 5, "linear")},
        )
        model_state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
        scheduled_state = scheduled.state_dict()
    with fresh_names():
        model = tiny_bert()
        plain = paddle.optimizer.AdamW(0.01, parameters=model.parameters())
        _train(model, plain, data[:2])
        plain_state = plain.state_dict()
    assert set(scheduled_state) - set(plain_state) == {"weight_decay_schedule", "structured_names"}

    # AdamW loads AdamWDL's checkpoint, ignores the schedule entry and goes on
    # from its moments and beta powers: the reference's run continued with
    # AdamW's own settings (its default weight decay 0.01, no layer ratios)
    with fresh_names():
        model = tiny_bert(seed=99)
        model.set_state_dict(model_state)
        plain = paddle.optimizer.AdamW(0.01, parameters=model.parameters())
        plain.set_state_dict(scheduled_state)
        train_and_compare(
            model, plain, reference, lr_at=lambda step: 0.01, data=data[2:], reference_options={"weight_decay": 0.01}
        )

    # AdamWDL with a schedule loads AdamW's checkpoint: warned, schedule left where it is
    with fresh_names():
        model = tiny_bert()
        schedule = WeightDecaySchedule(0.0, 0.1, 5, current_step=1, style="linear")
        optimizer = make_adamwdl(model, learning_rate=0.01, weight_decay=schedule, layerwise_decay=0.5)
        with pytest.warns(UserWarning, match="weight_decay_schedule"):
            optimizer.set_state_dict(plain_state)
        assert schedule.current_step == 1


def test_bad_schedule_entry_leaves_the_optimizer_unchanged():
    with fresh_names():
        model = tiny_bert()
        optimizer = make_adamwdl(model, learning_rate=0.01, weight_decay=WeightDecaySchedule(0.0, 0.1, 5, style="linear"), layerwise_decay=0.5)
        _train(model, optimizer, batches(2))
        state = optimizer.state_dict()
        moments_before = {k: v.numpy().copy() for k, v in state.items() if isinstance(v, paddle.Tensor)}
        bad = dict(state, weight_decay_schedule={"current_step": -3})
        zeroed = {k: (paddle.zeros_like(v) if isinstance(v, paddle.Tensor) else v) for k, v in bad.items()}
        with pytest.raises(ValueError, match="current_step"):
            optimizer.set_state_dict(zeroed)
        assert optimizer.weight_decay_schedule.current_step == 2
        for key, value in optimizer.state_dict().items():
            if key in moments_before:
                np.testing.assert_array_equal(value.numpy(), moments_before[key], err_msg=key)


@pytest.mark.parametrize("bad, error", [(-5, ValueError), (float("nan"), TypeError), (1.5, TypeError),
                                        (True, TypeError)])
def test_the_coefficient_at_a_bad_step_is_refused_by_name_and_changes_nothing(bad, error):
    # The schedule's step index follows the rule of its constructor and set_state_dict (docs/weight_decay.rst).
    schedule = WeightDecaySchedule(0.0, 0.1, total_steps=4, style="linear")
    schedule.step()
    with pytest.raises(error, match=r"WeightDecaySchedule: `step` must be"):
        schedule(bad)
    assert schedule.current_step == 1 and schedule() == pytest.approx(0.025)
