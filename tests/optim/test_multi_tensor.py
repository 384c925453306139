"""AdamWDL's multi-tensor step (``paddle_llrd/optim/multi_tensor.py``) against its
per-parameter path and ``paddle.optimizer.AdamW``: the same bits after every
step, whatever users do to gradients and parameters between steps.

Each scenario trains two copies of one model (same names, weights and
gradients) for several steps, one with ``use_multi_tensor`` at its default
and one with ``use_multi_tensor=False``, and compares every weight after
every step, and the optimizer states at the end, exactly (the per-parameter
path itself is checked against a float64 reference in
``test_adamwdl_differential.py``). Each also checks the path every step of
the first run reported (``last_update_path``): the multi-tensor path where it
serves the scenario (the fused operator on CPU), the per-parameter path with
its reason where it does not, so that no comparison passes because both runs
took the same path. Some tests run again in a fresh process with the operator
turned off (``PADDLE_LLRD_FUSED=0``), where Paddle's kernels update the same
flat layout and must give the same bits.
"""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import paddle
import pytest
from paddle import nn
from paddle.utils import unique_name

from paddle_llrd import AdamWDL, ExponentialMovingAverage, WeightDecaySchedule
from paddle_llrd.optim.buffers import share_flat
from decay_routes import separate_decay
from multi_tensor_runs import (
    Blocks,
    assert_same_runs,
    both_paths,
    build,
    default_step,
    elementwise_step,
    flat_state,
    loss_of,
    run,
)
from operator_off import PER_PARAMETER_ONLY, flat_path, rerun_with_the_operator_off

THREADS = [1, 2, 3]


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the operator off, Paddle's kernels split the small models' ranges into chunks of 16
    elements and up on the threads (the crossover is 2^17)."""
    monkeypatch.setenv("PADDLE_LLRD_MIN_CHUNK_NUMEL", "16")


def assert_every_step_flat(paths: list, steps: int = 5) -> None:
    assert paths == [flat_path()] * steps


# ------------------------------------------------------------ the plain loop
@pytest.mark.parametrize("num_threads", THREADS)
def test_plain_loop_is_bit_identical_on_the_multi_tensor_path(small_chunks: None, num_threads: int) -> None:
    multi = both_paths(steps=6, num_threads=num_threads)
    assert multi.optimizer.num_threads == num_threads
    assert_every_step_flat(multi.paths, 6)
    assert not np.array_equal(multi.history[0]["classifier.weight"], multi.history[-1]["classifier.weight"])


def _adamw() -> tuple[nn.Layer, paddle.optimizer.AdamW]:
    paddle.seed(7)
    model = Blocks()
    return model, paddle.optimizer.AdamW(
        learning_rate=0.01, parameters=model.parameters(), weight_decay=0.05,
        apply_decay_param_fun=lambda n: not n.endswith(".b_0"),
    )


def _copied(state: dict[str, Any]) -> dict[str, Any]:
    return {k: paddle.to_tensor(v.numpy()) if hasattr(v, "numpy") else v for k, v in state.items()}


@pytest.mark.parametrize("num_threads", THREADS)
def test_matches_paddle_adamw_without_ratios_and_state_dict_both_ways(small_chunks: None, num_threads: int) -> None:
    def trained(make, steps, model_state=None, optimizer_state=None):
        paths = []
        with unique_name.guard():
            model, optimizer = make()
            if model_state is not None:
                model.set_state_dict(model_state)
                optimizer.set_state_dict(optimizer_state)
            for step in steps:
                default_step(model, optimizer, step)
                paths.append(tuple(getattr(optimizer, "last_update_path", ())))
        return model, optimizer, paths

    ours = trained(lambda: build(None, set_param_lr_fun=None, num_threads=num_threads), range(4))
    adamw = trained(_adamw, range(4))
    assert_every_step_flat(ours[2], 4)
    for (name, p), q in zip(ours[0].named_parameters(), adamw[0].parameters()):
        np.testing.assert_array_equal(p.numpy(), q.numpy(), err_msg=name)
    our_state, adamw_state = flat_state(ours[1].state_dict()), flat_state(adamw[1].state_dict())
    assert our_state.keys() == adamw_state.keys()
    for key in our_state:
        assert our_state[key].shape == adamw_state[key].shape, key
        np.testing.assert_array_equal(our_state[key].numpy(), adamw_state[key].numpy(), err_msg=key)
    # AdamW's state into the multi-tensor path, AdamWDL's into AdamW: both go on as AdamW itself
    later = range(4, 7)
    loaded = trained(
        lambda: build(None, set_param_lr_fun=None, num_threads=num_threads), later,
        _copied(adamw[0].state_dict()), _copied(adamw[1].state_dict()),
    )
    into_adamw = trained(_adamw, later, _copied(ours[0].state_dict()), _copied(ours[1].state_dict()))
    for step in later:
        default_step(*adamw[:2], step)
    assert_every_step_flat(loaded[2], 3)
    for p, q, r in zip(loaded[0].parameters(), adamw[0].parameters(), into_adamw[0].parameters()):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
        np.testing.assert_array_equal(r.numpy(), q.numpy())


def test_resume_from_a_checkpoint() -> None:
    def resumed(use_multi_tensor):
        with unique_name.guard():
            model, optimizer = build(use_multi_tensor, weight_decay=WeightDecaySchedule(0.0, 0.1, total_steps=6, style="linear"))
            for step in range(3):
                default_step(model, optimizer, step)
            state = _copied(optimizer.state_dict())
        with unique_name.guard():  # a fresh process's accumulator names
            _, fresh = build(use_multi_tensor, model=model, weight_decay=WeightDecaySchedule(0.0, 0.1, total_steps=6, style="linear"))
            fresh.set_state_dict(state)
            paths = []
            for step in range(3, 6):
                default_step(model, fresh, step)
                paths.append(tuple(fresh.last_update_path))
            return model, paths

    (multi_model, multi_paths), (single_model, _) = resumed(None), resumed(False)
    assert_every_step_flat(multi_paths, 3)
    for p, q in zip(multi_model.parameters(), single_model.parameters()):
        np.testing.assert_array_equal(p.numpy(), q.numpy())


@pytest.mark.parametrize("num_threads", THREADS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_master_weights_of_half_parameters(small_chunks: None, dtype: str, num_threads: int) -> None:
    """float32 master weights of float16/bfloat16 parameters (on CPU, which has no half-precision
    kernel, the update in float32 cast back; a GPU's kernel takes the master weights itself)."""
    multi = both_paths(elementwise_step, model_dtype=dtype, multi_precision=True, num_threads=num_threads)
    assert_every_step_flat(multi.paths)
    masters = [key for key in multi.state if key.startswith("master_weights/")]
    assert len(masters) == len(list(multi.model.parameters()))


@pytest.mark.parametrize("num_threads", THREADS)
def test_param_groups_amsgrad_lr_scheduler_and_general_decay(small_chunks: None, num_threads: int) -> None:
    def groups(model):
        layers = [p for n, p in model.named_parameters() if "encoder" in n]
        rest = [p for n, p in model.named_parameters() if "encoder" not in n]
        return [
            {"params": layers, "learning_rate": 0.5, "weight_decay": 0.2, "beta1": 0.8, "beta2": 0.95, "epsilon": 1e-6},
            {"params": rest},
        ]

    multi = both_paths(
        parameters=groups, amsgrad=True, num_threads=num_threads,
        fresh=lambda: dict(learning_rate=paddle.optimizer.lr.StepDecay(0.01, 2, 0.5)),
    )
    assert_every_step_flat(multi.paths)
    # a ratio of 0 (embeddings) and forced separate decay ops
    ratios = {"embeddings": 0.0}

    class ZeroForEmbeddings:
        pure_in_name = True

        def __call__(self, decay, name_dict, n_layers, param):
            return ratios.get(name_dict[param.name].split(".")[0], 0.5)

    assert_every_step_flat(both_paths(set_param_lr_fun=ZeroForEmbeddings(), num_threads=num_threads).paths)

    def forced(model, optimizer, step):
        separate_decay(optimizer)  # (from the first step on, for good)
        default_step(model, optimizer, step)

    assert_every_step_flat(both_paths(forced, num_threads=num_threads).paths)


def test_group_settings_changed_between_steps_reach_the_next_step() -> None:
    # A change of a group's beta1, epsilon or weight decay between steps must
    # reach the next step (and change the weights: the test can fail).
    def groups(model):
        layers = [p for n, p in model.named_parameters() if "encoder" in n]
        return [{"params": layers}, {"params": [p for n, p in model.named_parameters() if "encoder" not in n]}]

    changes = {2: ("beta1", 0.5), 3: ("epsilon", 1e-3), 4: ("weight_decay", 0.4)}

    def changing(model, optimizer, step):
        if step in changes:
            key, value = changes[step]
            optimizer._param_groups[0][key] = value
        default_step(model, optimizer, step)

    multi = both_paths(changing, steps=6, parameters=groups)
    assert_every_step_flat(multi.paths, 6)
    unchanged = run(None, steps=6, parameters=groups)
    name = next(n for n in unchanged.history[-1] if n.startswith("encoder"))
    assert not np.array_equal(multi.history[-1][name], unchanged.history[-1][name])


def test_amp_overflow_step_changes_nothing() -> None:
    def overflow_at_2(model, optimizer, step):
        if step == 2:
            optimizer._set_auxiliary_var("found_inf", paddle.to_tensor(True))
        default_step(model, optimizer, step)
        optimizer._set_auxiliary_var("found_inf", paddle.to_tensor(False))

    multi = both_paths(
        overflow_at_2, fresh=lambda: dict(weight_decay=WeightDecaySchedule(0.0, 0.1, total_steps=5, style="linear"))
    )
    flat = flat_path()
    assert multi.paths == [flat, flat, ("per_parameter", "an AMP overflow step"), flat, flat]
    assert all(np.array_equal(multi.history[1][n], multi.history[2][n]) for n in multi.history[1])
    assert multi.optimizer.weight_decay_schedule.current_step == 4


# ----------------------------------------------------- what it does not serve
class ClipOfItsOwn(nn.ClipGradByGlobalNorm):
    """A user's clip class: it may change what clipping does, so the flat step leaves it to Paddle."""


class HalfRatio:
    """A ratio function declared pure in the parameter name (asked once per parameter)."""

    pure_in_name = True

    def __call__(self, decay, name_dict, n_layers, param):
        return 0.5


@pytest.mark.parametrize(
    "refused, served, reason",
    [
        (dict(grad_clip=ClipOfItsOwn(0.1)), dict(grad_clip=nn.ClipGradByGlobalNorm(0.1)),
         "gradient clipping by ClipOfItsOwn"),
        (dict(set_param_lr_fun=lambda decay, names, n, p: 0.5), dict(set_param_lr_fun=HalfRatio()), "not pure"),
        (dict(layerwise_decay=paddle.to_tensor(0.7)), dict(layerwise_decay=0.7), "not pure"),
        (dict(beta1=paddle.to_tensor(0.8)), dict(beta1=0.8), "Tensor beta1"),
    ],
    ids=["own_clip_class", "impure_ratio_function", "tensor_layerwise_decay", "tensor_beta1"],
)
def test_what_it_does_not_serve_takes_the_per_parameter_path(refused: dict, served: dict, reason: str) -> None:
    """Each step of the refused setting reports the per-parameter path and why, with the bits of
    ``use_multi_tensor=False``; the same setting without the obstacle takes the multi-tensor path."""
    multi = both_paths(**refused)
    assert all(path == "per_parameter" and reason in why for path, why in multi.paths), multi.paths
    assert_every_step_flat(both_paths(**served).paths)


def test_a_group_with_its_own_grad_clip_is_clipped_as_paddle_clips_it() -> None:
    """A group's own clip (``ClipGradByValue``: ``p.grad`` left as it was) beside the optimizer's
    (``ClipGradByGlobalNorm`` over the other group: ``p.grad`` scaled in place): the weights and,
    after every step, the gradients of Paddle's clip on the per-parameter path."""
    def groups(model):
        layers = [p for n, p in model.named_parameters() if "encoder" in n]
        rest = [p for n, p in model.named_parameters() if "encoder" not in n]
        return [{"params": layers, "grad_clip": nn.ClipGradByValue(0.01)}, {"params": rest}]

    grads: dict[int, list] = {}

    def scenario(model, optimizer, step):
        loss_of(model, step).backward()
        optimizer.step()
        grads.setdefault(id(optimizer), []).append({n: p.grad.numpy().copy() for n, p in model.named_parameters()})
        optimizer.clear_grad()

    multi = both_paths(scenario, parameters=groups, grad_clip=nn.ClipGradByGlobalNorm(0.1))
    single = run(False, scenario, parameters=groups, grad_clip=nn.ClipGradByGlobalNorm(0.1))
    assert_every_step_flat(multi.paths)
    for step, (got, expected) in enumerate(zip(grads[id(multi.optimizer)], grads[id(single.optimizer)])):
        for name in expected:
            np.testing.assert_array_equal(got[name], expected[name], err_msg=f"{name}.grad after step {step}")
    # (the value clip clipped: it left gradients beyond its bound in p.grad)
    assert np.abs(grads[id(multi.optimizer)][-1]["encoder.layers.0.0.weight"]).max() > 0.01


def test_use_multi_tensor_must_be_a_bool_or_none() -> None:
    with pytest.raises(TypeError, match="use_multi_tensor"):
        build(1)


# --------------------------------------------------- aliases users can break
def assert_zero_gradients(model: nn.Layer) -> None:
    """What ``clear_grad()`` (``set_to_zero=True``) leaves, as Paddle's: a zero gradient for every parameter."""
    for name, p in model.named_parameters():
        assert p.grad is not None and list(p.grad.shape) == list(p.shape), name
        assert not p.grad.numpy().any(), name


def test_clear_grad_zeroes_every_gradient() -> None:
    def scenario(model, optimizer, step):
        loss_of(model, step).backward()
        optimizer.step()
        optimizer.clear_grad()
        assert_zero_gradients(model)

    assert_every_step_flat(both_paths(scenario).paths)


def _negative_zero_backward(model: nn.Layer) -> None:
    """A backward whose gradient is -0.0 everywhere: one that replaces a cleared gradient keeps
    the sign (Paddle's ``clear_gradient`` marks it so), one added to a zero buffer loses it."""
    sum((p * paddle.full(p.shape, -0.0, p.dtype)).sum() for p in model.parameters()).backward()


def _gradient_bits(model: nn.Layer) -> dict[str, bytes | None]:
    return {name: None if p.grad is None else p.grad.numpy().tobytes() for name, p in model.named_parameters()}


@pytest.mark.parametrize("num_threads", THREADS)
def test_clear_grad_leaves_every_gradient_as_adamw_does_on_any_number_of_threads(
    small_chunks: None, num_threads: int
) -> None:
    """clear_grad zeroes or releases each trained gradient as AdamW's does (the large ones shared
    among the step's threads: here every gradient of 16 elements and up), down to the sign of the
    next backward's zeros, and the weights after each step are AdamW's."""
    clears = {
        "zero": lambda optimizer: optimizer.clear_grad(),
        "release": lambda optimizer: optimizer.clear_grad(set_to_zero=False),
        "zero_twice": lambda optimizer: (optimizer.clear_grad(), optimizer.clear_grad(True)),
    }

    def run(make: Callable[[], tuple[nn.Layer, Any]]) -> list[Any]:
        with unique_name.guard():
            model, optimizer = make()
        seen: list[Any] = []
        for step, clear in enumerate(["zero", "release", "zero", "zero_twice", "zero", "zero"]):
            loss_of(model, step).backward()
            optimizer.step()
            seen.append({name: p.numpy().tobytes() for name, p in model.named_parameters()})
            clears[clear](optimizer)
            seen.append(_gradient_bits(model))
            _negative_zero_backward(model)
            seen.append(_gradient_bits(model))
            optimizer.clear_grad()
        return seen

    ours = run(lambda: build(None, set_param_lr_fun=None, num_threads=num_threads))
    adamw = run(_adamw)
    assert len(ours) == len(adamw) == 18
    for index, (got, expected) in enumerate(zip(ours, adamw)):
        assert got == expected, f"record {index}: {[name for name in got if got[name] != expected[name]]}"
    negative_zeros = np.frombuffer(ours[2]["classifier.weight"], dtype=np.float32)
    assert np.signbit(negative_zeros).all() and not negative_zeros.any()  # (the sign survived the clear)


def test_clear_grad_is_refused_outside_dygraph_as_adamw_refuses_it() -> None:
    model = nn.Linear(2, 2)
    ours = AdamWDL(learning_rate=0.01, parameters=model.parameters(), layerwise_decay=1.0, n_layers=1)
    adamw = paddle.optimizer.AdamW(learning_rate=0.01, parameters=model.parameters())
    paddle.enable_static()
    try:
        for optimizer in (adamw, ours):
            with pytest.raises(AssertionError, match=r"We only support 'clear_grad\(\)' in dynamic graph mode"):
                optimizer.clear_grad()
    finally:
        paddle.disable_static()


@pytest.mark.parametrize(
    "clear",
    [
        lambda model, optimizer: optimizer.clear_grad(set_to_zero=False),
        lambda model, optimizer: model.clear_gradients(),
        lambda model, optimizer: [p.clear_gradient() for p in model.encoder.parameters()],
        lambda model, optimizer: paddle.optimizer.AdamW.clear_grad(optimizer),
    ],
    ids=["clear_grad_set_to_zero_false", "model_clear_gradients", "param_clear_gradient", "paddle_clear_grad"],
)
def test_every_way_of_clearing_gradients(clear: Callable) -> None:
    def scenario(model, optimizer, step):
        loss_of(model, step).backward()
        optimizer.step()
        clear(model, optimizer)

    assert_every_step_flat(both_paths(scenario).paths)


def test_clearing_between_backward_and_clear_grad() -> None:
    """A gradient replaced after the step (cleared, then a backward) is still cleared by clear_grad."""

    def scenario(model, optimizer, step):
        loss_of(model, step).backward()
        optimizer.step()
        model.clear_gradients()
        loss_of(model, step, part=1).backward()  # a batch thrown away
        optimizer.clear_grad()
        assert_zero_gradients(model)

    assert_every_step_flat(both_paths(scenario).paths)


def test_clear_grad_after_a_backward_by_paddle_autograd_backward() -> None:
    """Gradients a backward replaced after the step are cleared, whichever API ran the backward."""

    def scenario(model, optimizer, step):
        loss_of(model, step).backward()
        optimizer.step()
        optimizer.clear_grad()
        for p in model.encoder.parameters():
            p.clear_gradient()
        paddle.autograd.backward([loss_of(model, step, part=2)])  # replaces the cleared gradients
        optimizer.clear_grad()
        assert_zero_gradients(model)

    assert_every_step_flat(both_paths(scenario).paths)


def test_a_decay_rule_answering_ints_and_strings() -> None:
    multi = both_paths(apply_decay_param_fun=lambda n: 0 if n.endswith(".b_0") else "yes")
    assert_every_step_flat(multi.paths)


def test_gradient_accumulation() -> None:
    def scenario(model, optimizer, step):
        for part in range(3):
            loss_of(model, step, part).backward()
        optimizer.step()
        optimizer.clear_grad()

    assert_every_step_flat(both_paths(scenario).paths)


def test_freezing_and_unfreezing() -> None:
    def scenario(model, optimizer, step):
        if step == 2:
            model.encoder.layers[1].stop_gradient = True
            for p in model.encoder.layers[1].parameters():
                p.stop_gradient = True
        if step == 4:
            for p in model.encoder.layers[1].parameters():
                p.stop_gradient = False
        default_step(model, optimizer, step)

    multi = both_paths(scenario, steps=6)
    assert_every_step_flat(multi.paths, 6)
    frozen = [n for n in multi.history[0] if n.startswith("encoder.layers.1.")]
    assert all(np.array_equal(multi.history[1][n], multi.history[3][n]) for n in frozen)
    assert not any(np.array_equal(multi.history[3][n], multi.history[5][n]) for n in frozen)


def test_replaced_parameters_dtype_round_trip_set_value_and_model_set_state_dict() -> None:
    def scenario(model, optimizer, step):
        if step == 1:
            model.to(dtype="float64")
            model.to(dtype="float32")  # new tensors, same values
        if step == 2:
            model.classifier.weight.set_value(model.classifier.weight * 0.5)
        if step == 3:
            model.set_state_dict({k: v * 1.5 for k, v in model.state_dict().items()})
        default_step(model, optimizer, step)

    assert_every_step_flat(both_paths(scenario, steps=5).paths)


@pytest.mark.parametrize("num_threads", THREADS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_amp_o2_decorate_after_construction(small_chunks: None, dtype: str, num_threads: int) -> None:
    """``paddle.amp.decorate(level='O2', master_weight=True)`` after two float32 steps.

    On a GPU, decorate casts each layer's floating parameters to ``dtype``
    (``amp_initialize``) and sets the optimizer's ``_multi_precision``; on
    CPU (Paddle 3.3.1) it returns the model and optimizer untouched, so there
    the test applies those two calls of Paddle's own itself. Training goes on
    with master weights; states are compared after every step.
    """
    from paddle.amp.auto_cast import _set_multi_precision, amp_initialize

    def trained(use_multi_tensor):
        states = []

        def scenario(model, optimizer, step):
            if step == 2:
                decorated = paddle.amp.decorate(
                    models=model, optimizers=optimizer, level="O2", dtype=dtype, master_weight=True
                )
                assert decorated == (model, optimizer)
                if model.classifier.weight.dtype == paddle.float32:  # CPU: decorate is a no-op
                    assert paddle.get_device() == "cpu" and not optimizer._multi_precision
                    amp_initialize(models=[model], dtype=dtype, excluded_layers=None)
                    _set_multi_precision(optimizer, True)
                assert {str(p.dtype) for p in model.parameters()} == {f"paddle.{dtype}"}
            # CPU has no half matmul: from the cast on, a loss without one
            (default_step if step < 2 else elementwise_step)(model, optimizer, step)
            states.append({k: v.numpy().copy() for k, v in flat_state(optimizer.state_dict()).items()})

        return run(use_multi_tensor, scenario, steps=5, num_threads=num_threads), states

    (multi, multi_states), (single, single_states) = trained(None), trained(False)
    assert_same_runs(multi, single)
    for step, (got, expected) in enumerate(zip(multi_states, single_states)):
        assert got.keys() == expected.keys(), f"state keys after step {step}"
        for key in got:
            np.testing.assert_array_equal(got[key], expected[key], err_msg=f"state {key} after step {step}")
    masters = [k for k in multi_states[-1] if k.startswith("master_weights/")]
    assert len(masters) == len(list(multi.model.parameters()))
    assert not any(k.startswith("master_weights/") for k in multi_states[1])
    assert single.paths == [PER_PARAMETER_ONLY] * 5
    assert_every_step_flat(multi.paths)  # the cast parameters too


def test_a_parameter_without_gradient_every_other_step_ends_on_the_per_parameter_path() -> None:
    """The trained set changes at every step: after 3 steps laid out anew in a row
    (docs/adamwdl.rst), the optimizer keeps the per-parameter path, with the same bits."""
    def scenario(model, optimizer, step):
        loss = loss_of(model, step)
        if step % 2:
            loss = loss + 0.0 * model.encoder.layers[0][0].weight.sum()
        else:
            model.encoder.layers[0][0].weight.clear_gradient(False)
        loss.backward()
        if step % 2 == 0:
            model.encoder.layers[0][0].weight.clear_gradient(False)
        optimizer.step()
        optimizer.clear_grad(set_to_zero=False)

    multi = both_paths(scenario, steps=7)
    given_up = ("per_parameter", "the trained parameters changed in 3 consecutive steps")
    assert multi.paths == [flat_path()] * 3 + [given_up] * 4


def test_added_parameter_group() -> None:
    extra: dict[int, Any] = {}

    def scenario(model, optimizer, step):
        if step == 2:
            param = extra[id(optimizer)] = paddle.create_parameter(
                [3], "float32", default_initializer=nn.initializer.Constant(1.0)
            )
            optimizer.name_dict[param.name] = "extra"  # the ratio function's map
            optimizer._add_param_group({"params": [param], "learning_rate": 0.5})
        loss = loss_of(model, step)
        if id(optimizer) in extra:
            loss = loss + (extra[id(optimizer)] ** 2).sum()
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()

    def groups(model):
        return [{"params": model.parameters()}]

    multi = run(None, scenario, parameters=groups)
    single = run(False, scenario, parameters=groups)
    assert_same_runs(multi, single)
    np.testing.assert_array_equal(extra[id(multi.optimizer)].numpy(), extra[id(single.optimizer)].numpy())
    assert not np.array_equal(extra[id(multi.optimizer)].numpy(), np.ones(3, "float32"))
    assert_every_step_flat(multi.paths)


def test_ema_over_the_same_parameters() -> None:
    emas = {}

    def scenario(model, optimizer, step):
        ema = emas.setdefault(id(optimizer), ExponentialMovingAverage(model, decay=0.5))
        if step == 0:
            ema.register()
        default_step(model, optimizer, step)
        ema.update()
        if step == 2:
            with ema.average_parameters():
                loss_of(model, 99)  # an evaluation on the averaged weights

    multi = run(None, scenario)
    single = run(False, scenario)
    assert_same_runs(multi, single)
    assert_every_step_flat(multi.paths)
    shadows = [emas[id(r.optimizer)].shadow for r in (multi, single)]
    for name in shadows[0]:
        np.testing.assert_array_equal(shadows[0][name].numpy(), shadows[1][name].numpy())


def test_data_parallel_single_process() -> None:
    def scenario(model, optimizer, step):
        wrapped = scenario.__dict__.setdefault(id(model), paddle.DataParallel(model))
        rng = np.random.default_rng(step)
        ids = paddle.to_tensor(rng.integers(0, 10, (4, 3)).astype("int64"))
        wrapped(ids).mean().backward()
        optimizer.step()
        optimizer.clear_grad()

    assert_every_step_flat(both_paths(scenario).paths)


# A hook that returns a slice (paddle.optimizer.AdamW reads past its end), or twice the gradient
# (AdamW updates from its first elements).
OTHER_SIZES = {"shorter": (lambda grad: grad[:4], r"\[4, 8\]", "read past the gradient's end"),
               "longer": (lambda grad: paddle.concat([grad, grad]), r"\[16, 8\]", "from the gradient's first 64")}


@pytest.mark.parametrize("size", OTHER_SIZES)
@pytest.mark.parametrize("hooked_after_a_step", [False, True], ids=["from_the_start", "after_a_step"])
@pytest.mark.parametrize("use_multi_tensor", [None, False], ids=["default", "per_parameter"])
def test_a_gradient_hook_that_returns_another_size_is_refused_naming_the_parameter_before_any_update(
        size, hooked_after_a_step, use_multi_tensor) -> None:
    hook, shape, effect = OTHER_SIZES[size]
    paddle.seed(0)
    model = nn.Sequential(*[nn.Linear(8, 8) for _ in range(3)])
    optimizer = AdamWDL(0.01, parameters=model.parameters(), set_param_lr_fun=None, use_multi_tensor=use_multi_tensor)
    if hooked_after_a_step:
        model(paddle.ones([2, 8])).sum().backward()
        optimizer.step()
        optimizer.clear_grad()
    model[1].weight.register_hook(hook)
    model(paddle.ones([2, 8])).sum().backward()
    before = [param.numpy().copy() for param in model.parameters()]
    with pytest.raises(ValueError, match=rf"the gradient of parameter '{model[1].weight.name}' is paddle.float32 "
                                         rf"{shape}, the parameter paddle.float32 \[8, 8\] .*nothing was updated "
                                         rf"\(paddle.optimizer.AdamW would .*{effect}"):
        optimizer.step()
    for param, value in zip(model.parameters(), before):
        np.testing.assert_array_equal(param.numpy(), value, err_msg=param.name)


def test_a_gradient_hook_that_reshapes_keeps_adamws_numbers() -> None:
    """The same elements in another shape: AdamW's numbers, from the default step (which takes the
    per-parameter path for a gradient shaped unlike its parameter) and with ``use_multi_tensor=False``."""
    def scenario(model, optimizer, step):
        if step == 0:
            model[1].weight.register_hook(lambda grad: grad.reshape([4, 16]))
        inputs = paddle.to_tensor(np.random.default_rng(step).standard_normal((5, 8)).astype("float32"))
        model(inputs).square().mean().backward()
        optimizer.step()
        optimizer.clear_grad()

    def run(kind):
        paddle.seed(0)
        model = nn.Sequential(*[nn.Linear(8, 8) for _ in range(3)])
        options = dict(learning_rate=0.01, parameters=model.parameters(), weight_decay=0.1)
        optimizer = (paddle.optimizer.AdamW(**options) if kind == "adamw" else
                     AdamWDL(**options, set_param_lr_fun=None, use_multi_tensor=None if kind == "default" else False))
        for step in range(4):
            scenario(model, optimizer, step)
        return [param.numpy() for param in model.parameters()]

    expected = run("adamw")
    for kind in ("default", "per_parameter"):
        for param, value in zip(run(kind), expected):
            np.testing.assert_array_equal(param, value, err_msg=kind)


# ------------------------------------------------------ Paddle's kernels
def test_with_the_operator_off_paddles_kernels_give_the_same_bits() -> None:
    """The numbers tests of this file in a process with ``PADDLE_LLRD_FUSED=0``: every step reports
    ``("multi_tensor", "PADDLE_LLRD_FUSED=0")`` and gives the bits of the per-parameter path and of
    ``paddle.optimizer.AdamW`` (on 3 threads, their ranges split into chunks)."""
    tests = [
        "test_plain_loop_is_bit_identical_on_the_multi_tensor_path[3]",
        "test_matches_paddle_adamw_without_ratios_and_state_dict_both_ways[3]",
        "test_master_weights_of_half_parameters[bfloat16-3]",
        "test_param_groups_amsgrad_lr_scheduler_and_general_decay[3]",
        "test_a_group_with_its_own_grad_clip_is_clipped_as_paddle_clips_it",
        "test_clearing_between_backward_and_clear_grad",
        "test_freezing_and_unfreezing",
        "test_amp_o2_decorate_after_construction[float16-3]",
        "test_a_gradient_hook_that_returns_another_size_is_refused_naming_the_parameter_before_any_update",
        "test_a_gradient_hook_that_reshapes_keeps_adamws_numbers",
    ]
    rerun_with_the_operator_off(*(f"{__file__}::{test}" for test in tests))


# ------------------------------------------------------------ what a step keeps
def _python_memory_per_step(linears: int, steps: int = 8) -> tuple[list[int], list[int]]:
    """Python's allocations held after each multi-tensor step of ``linears`` Linear(2, 2) layers
    (``clear_grad`` done, cyclic garbage collected), and each step's peak over what was held
    before it."""
    model = nn.Sequential(*[nn.Linear(2, 2) for _ in range(linears)])
    params = model.parameters()
    optimizer = AdamWDL(learning_rate=0.01, parameters=params, layerwise_decay=0.9, n_layers=2,
                        name_dict={p.name: f"encoder.layers.{i % 2}.w{i}" for i, p in enumerate(params)},
                        apply_decay_param_fun=lambda name: not name.endswith(".b_0"))
    held, peaks = [], []
    tracemalloc.start()
    try:
        for _ in range(steps):
            model(paddle.ones([4, 2])).sum().backward()
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            optimizer.step()
            peaks.append(tracemalloc.get_traced_memory()[1] - before)
            assert optimizer.last_update_path == flat_path()
            optimizer.clear_grad()
            gc.collect()
            held.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    return held, peaks


def test_a_step_keeps_nothing_it_reads() -> None:
    """Each step reads the parameters, their gradients and settings afresh and lets go of what
    it read: after the step that laid the parameters out, Python's allocations stay where they
    were from step to step, and what a step reads at its peak is a few list entries per
    parameter, not a copy of anything."""
    held, peaks = _python_memory_per_step(800)
    assert max(held[2:]) - min(held[2:]) < 1024, held
    assert max(peaks[2:]) < 400 * 1600, peaks  # (1,600 parameters)


def test_share_flat_keeps_values_and_shapes() -> None:
    tensors = [paddle.arange(6, dtype="float32").reshape([2, 3]), paddle.full([4], 7.0)]
    flat = share_flat(tensors)
    assert flat.numpy().tolist() == [0, 1, 2, 3, 4, 5, 7, 7, 7, 7]
    flat.scale_(2.0)
    assert tensors[0].shape == [2, 3] and tensors[0].numpy().tolist() == [[0, 2, 4], [6, 8, 10]]


TO_STATIC_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import paddle
    from paddle_llrd import AdamWDL

    paddle.seed(0)
    model = paddle.nn.Sequential(paddle.nn.Linear(4, 8), paddle.nn.Linear(8, 2))
    names = {p.name: n for n, p in model.named_parameters()}

    class FirstLayerAtHalf:
        pure_in_name = True

        def __call__(self, decay, name_dict, n_layers, param):
            return 0.5 if name_dict[param.name].startswith("0") else 1.0

    optimizer = AdamWDL(learning_rate=0.01, parameters=model.parameters(), layerwise_decay=0.8, n_layers=2,
                        name_dict=names, set_param_lr_fun=FirstLayerAtHalf(),
                        use_multi_tensor=None if sys.argv[1] == "multi" else False)

    def train_step(x):
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        return loss

    if sys.argv[3] == "to_static":
        train_step = paddle.jit.to_static(train_step)

    for step in range(4):
        train_step(paddle.to_tensor(np.random.default_rng(step).standard_normal((3, 4)).astype("float32")))
        print("path", tuple(optimizer.last_update_path))
    np.save(sys.argv[2], np.concatenate([p.numpy().ravel() for p in model.parameters()]))
    """
)


def test_to_static_training_step_in_a_users_script(tmp_path) -> None:
    """Both paths under ``to_static`` (the step and ``clear_grad`` run eagerly) and eagerly: the same bits."""
    script = tmp_path / "train.py"
    script.write_text(TO_STATIC_SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    paths = {}
    runs = [("multi", "to_static"), ("single", "to_static"), ("single", "eager")]
    for path, mode in runs:
        result = subprocess.run(
            [sys.executable, str(script), path, str(tmp_path / f"{path}-{mode}.npy"), mode],
            capture_output=True, text=True, env=env, timeout=300,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        paths[path, mode] = [line for line in result.stdout.splitlines() if line.startswith("path ")]
    expected = np.load(tmp_path / "single-eager.npy")
    for path, mode in runs[:2]:
        np.testing.assert_array_equal(np.load(tmp_path / f"{path}-{mode}.npy"), expected, err_msg=f"{path} {mode}")
    assert paths["multi", "to_static"] == [f"path {flat_path()}"] * 4
    assert paths["single", "to_static"] == [f"path {PER_PARAMETER_ONLY}"] * 4
