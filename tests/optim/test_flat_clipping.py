"""Gradient clipping on AdamWDL's multi-tensor step (docs/adamwdl.rst, "The
multi-tensor step"): Paddle's three clip classes give the numbers they give
``paddle.optimizer.AdamW``, bit for bit, step after step, on 1, 2 and 3
threads; with layer ratios, the numbers of a float64 reference that clips by
the global norm and then takes AdamWDL's update.

Each run trains one model for several steps with gradients that differ at
every step (a new batch and target per step), compares every weight after
every step, and what ``p.grad`` holds after each ``step()`` (the clipped
gradient after ``ClipGradByGlobalNorm``, the backward's after the other two),
and checks through ``last_update_path`` that the multi-tensor step ran, so
that no comparison passes because both took Paddle's path. The tests against
AdamW run again with the fused operator off, where Paddle's kernels update the
same flat layout.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import paddle
import pytest
from paddle import nn
from paddle.utils import unique_name

from operator_off import flat_path, rerun_with_the_operator_off
from paddle_llrd import AdamWDL
from reference_adamw import ReferenceAdamW, clip_by_global_norm, layer_ratio

N_LAYERS = 3
STEPS = 5
CLIPS = {
    # small limits, so that every step clips
    "global_norm": lambda: nn.ClipGradByGlobalNorm(0.05),
    "norm": lambda: nn.ClipGradByNorm(0.02),
    "value": lambda: nn.ClipGradByValue(0.004),
}


class Blocks(nn.Layer):
    def __init__(self) -> None:
        super().__init__()
        self.embeddings = nn.Embedding(10, 8)
        self.encoder = nn.Layer()
        self.encoder.layers = nn.LayerList([nn.Linear(8, 8) for _ in range(N_LAYERS)])
        self.classifier = nn.Linear(8, 2)

    def forward(self, ids: paddle.Tensor) -> paddle.Tensor:
        hidden = self.embeddings(ids)
        for layer in self.encoder.layers:
            hidden = hidden + paddle.tanh(layer(hidden))
        return self.classifier(hidden)


def model_and_names() -> tuple[nn.Layer, dict[str, str]]:
    paddle.seed(11)
    model = Blocks()
    return model, {p.name: n for n, p in model.named_parameters()}


def backward(model: nn.Layer, step: int) -> None:
    rng = np.random.default_rng(step)
    ids = paddle.to_tensor(rng.integers(0, 10, (4, 5)).astype("int64"))
    target = paddle.to_tensor(rng.standard_normal((4, 5, 2)).astype("float32"))
    ((model(ids) - target) ** 2).mean().backward()


def train(make_optimizer: Any, steps: int = STEPS, *, no_clip: str | None = None) -> tuple[list[dict], list]:
    """Per step, the weights and (as ``"<name>.grad"``) what ``p.grad`` held after ``step()``;
    and the path each step took. ``no_clip``: the structured name of a parameter with
    ``need_clip=False``."""
    with unique_name.guard():
        model, names = model_and_names()
        if no_clip is not None:
            dict(model.named_parameters())[no_clip].need_clip = False
        optimizer = make_optimizer(model, names)
        history, paths = [], []
        for step in range(steps):
            backward(model, step)
            optimizer.step()
            record = {f"{n}.grad": p.grad.numpy().copy() for n, p in model.named_parameters()}
            optimizer.clear_grad()
            record.update({n: p.numpy().copy() for n, p in model.named_parameters()})
            history.append(record)
            paths.append(tuple(getattr(optimizer, "last_update_path", None) or ()))
    return history, paths


def assert_bitwise(got: list[dict], expected: list[dict]) -> None:
    for step, (a, b) in enumerate(zip(got, expected)):
        assert a.keys() == b.keys()
        for name in b:
            np.testing.assert_array_equal(a[name], b[name], err_msg=f"{name} after step {step}")


@pytest.mark.parametrize("num_threads", [1, 2, 3])
@pytest.mark.parametrize("clip", sorted(CLIPS))
def test_without_ratios_it_is_paddle_adamw_with_the_same_clip_bit_for_bit(
    monkeypatch: pytest.MonkeyPatch, clip: str, num_threads: int
) -> None:
    monkeypatch.setenv("PADDLE_LLRD_MIN_CHUNK_NUMEL", "16")  # (the small model's buffers split across the threads)
    no_decay = lambda name: not name.endswith(".b_0")  # noqa: E731
    expected, _ = train(lambda model, names: paddle.optimizer.AdamW(
        0.01, parameters=model.parameters(), weight_decay=0.1, apply_decay_param_fun=no_decay, grad_clip=CLIPS[clip]()))
    got, paths = train(lambda model, names: AdamWDL(
        0.01, parameters=model.parameters(), weight_decay=0.1, apply_decay_param_fun=no_decay,
        grad_clip=CLIPS[clip](), set_param_lr_fun=None, num_threads=num_threads))
    assert paths == [flat_path()] * STEPS
    assert_bitwise(got, expected)


@pytest.mark.parametrize("clip", sorted(CLIPS))
def test_a_parameter_with_need_clip_false_is_left_out_as_paddle_leaves_it(clip: str) -> None:
    frozen_clip = "encoder.layers.1.weight"
    expected, _ = train(lambda model, names: paddle.optimizer.AdamW(
        0.01, parameters=model.parameters(), grad_clip=CLIPS[clip]()), no_clip=frozen_clip)
    got, paths = train(lambda model, names: AdamWDL(
        0.01, parameters=model.parameters(), grad_clip=CLIPS[clip](), set_param_lr_fun=None), no_clip=frozen_clip)
    assert paths == [flat_path()] * STEPS
    assert_bitwise(got, expected)


def test_parameter_groups_clip_each_group_by_its_own_norm_as_paddle_does() -> None:
    def groups(model):
        encoder = [p for n, p in model.named_parameters() if n.startswith("encoder")]
        rest = [p for n, p in model.named_parameters() if not n.startswith("encoder")]
        return [{"params": encoder, "learning_rate": 0.5, "weight_decay": 0.2}, {"params": rest}]

    clip = nn.ClipGradByGlobalNorm(0.05)
    expected, _ = train(lambda model, names: paddle.optimizer.AdamW(0.01, parameters=groups(model), grad_clip=clip))
    got, paths = train(lambda model, names: AdamWDL(
        0.01, parameters=groups(model), grad_clip=clip, set_param_lr_fun=None))
    assert paths == [flat_path()] * STEPS
    assert_bitwise(got, expected)


@pytest.mark.parametrize("clip", sorted(CLIPS))
def test_a_group_with_its_own_clip_is_clipped_as_paddle_clips_it(clip: str) -> None:
    """A group's own ``grad_clip`` replaces the optimizer's for that group, as in Paddle."""
    def groups(model):
        encoder = [p for n, p in model.named_parameters() if n.startswith("encoder")]
        rest = [p for n, p in model.named_parameters() if not n.startswith("encoder")]
        return [{"params": encoder, "grad_clip": CLIPS[clip]()}, {"params": rest}]

    expected, _ = train(lambda model, names: paddle.optimizer.AdamW(
        0.01, parameters=groups(model), grad_clip=nn.ClipGradByGlobalNorm(0.05)))
    got, paths = train(lambda model, names: AdamWDL(
        0.01, parameters=groups(model), grad_clip=nn.ClipGradByGlobalNorm(0.05), set_param_lr_fun=None))
    assert paths == [flat_path()] * STEPS
    assert_bitwise(got, expected)


def test_with_layer_ratios_it_is_the_float64_reference_of_clip_then_adamwdl() -> None:
    lr, decay, coeff, clip_norm = 0.01, 0.8, 0.1, 0.05
    with unique_name.guard():
        model, names = model_and_names()
        optimizer = AdamWDL(lr, parameters=model.parameters(), weight_decay=coeff, layerwise_decay=decay,
                            n_layers=N_LAYERS, name_dict=names, grad_clip=nn.ClipGradByGlobalNorm(clip_norm))
        reference = ReferenceAdamW({n: p.numpy() for n, p in model.named_parameters()}, weight_decay=coeff)
        for step in range(STEPS):
            backward(model, step)
            grads = {n: p.grad.numpy().astype(np.float64) for n, p in model.named_parameters()}
            optimizer.step()
            clipped = clip_by_global_norm(grads, clip_norm)
            for name, param in model.named_parameters():  # (clipped in place, as Paddle's clip does)
                np.testing.assert_allclose(param.grad.numpy(), clipped[name], rtol=2e-6, atol=1e-9, err_msg=name)
            optimizer.clear_grad()
            reference.step(clipped, lr, ratio=lambda name: layer_ratio(name, decay, N_LAYERS))
            assert optimizer.last_update_path == flat_path()
            for name, param in model.named_parameters():
                np.testing.assert_allclose(param.numpy(), reference.params[name], rtol=2e-6, atol=2e-7,
                                           err_msg=f"{name} after step {step}")


REFUSED_BY_PADDLES_KERNELS = {
    "value_min_above_max": lambda: nn.ClipGradByValue(max=0.01, min=0.02),
    "norm_zero": lambda: nn.ClipGradByNorm(0.0),
    "norm_negative": lambda: nn.ClipGradByNorm(-1.0),
    "norm_zero_as_float32": lambda: nn.ClipGradByNorm(1e-50),
}


@pytest.mark.parametrize("clip", sorted(REFUSED_BY_PADDLES_KERNELS))
def test_a_clip_that_paddles_kernels_refuse_is_refused_before_any_update_as_adamw_refuses_it(clip: str) -> None:
    def refused(make_optimizer: Any) -> str:
        with unique_name.guard():
            model, _ = model_and_names()
            before = [p.numpy().copy() for p in model.parameters()]
            optimizer = make_optimizer(model)
            backward(model, 0)
            with pytest.raises(ValueError) as raised:
                optimizer.step()
            for param, value in zip(model.parameters(), before):
                np.testing.assert_array_equal(param.numpy(), value, err_msg=param.name)
        return str(raised.value)

    refused(lambda model: paddle.optimizer.AdamW(0.01, parameters=model.parameters(),
                                                 grad_clip=REFUSED_BY_PADDLES_KERNELS[clip]()))
    # (the multi-tensor step's own refusal, and on the per-parameter path Paddle's clip kernel's)
    messages = {
        "value": ("ClipGradByValue: `max` (0.01) must be >= `min` (0.02)", "max should be greater than or equal"),
        "norm": ("ClipGradByNorm: `clip_norm` must be > 0", "max_norm should be greater than 0"),
    }
    for use_multi_tensor, expected in zip((None, False), messages[clip.split("_")[0]]):
        message = refused(lambda model: AdamWDL(0.01, parameters=model.parameters(), set_param_lr_fun=None,
                                                grad_clip=REFUSED_BY_PADDLES_KERNELS[clip](),
                                                use_multi_tensor=use_multi_tensor))
        assert expected in message, message


def test_bounds_equal_in_float32_are_clipped_as_paddle_clips_them() -> None:
    low = float(np.nextafter(np.float64(-0.004), 0.0))  # above -0.004 in float64, -0.004 in float32
    make = lambda: nn.ClipGradByValue(max=-0.004, min=low)  # noqa: E731
    assert low > -0.004 and np.float32(low) == np.float32(-0.004)
    expected, _ = train(lambda model, names: paddle.optimizer.AdamW(0.01, parameters=model.parameters(),
                                                                    grad_clip=make()))
    got, paths = train(lambda model, names: AdamWDL(0.01, parameters=model.parameters(), grad_clip=make(),
                                                    set_param_lr_fun=None))
    assert paths == [flat_path()] * STEPS
    assert_bitwise(got, expected)


def test_with_the_operator_off_paddles_kernels_clip_with_the_same_bits() -> None:
    """The tests against AdamW in a process with ``PADDLE_LLRD_FUSED=0``: each step reports
    ``("multi_tensor", "PADDLE_LLRD_FUSED=0")`` and gives AdamW's bits (on 3 threads, the
    layout's ranges split into chunks)."""
    tests = [f"test_without_ratios_it_is_paddle_adamw_with_the_same_clip_bit_for_bit[{clip}-3]" for clip in sorted(CLIPS)]
    tests += [
        "test_a_parameter_with_need_clip_false_is_left_out_as_paddle_leaves_it[global_norm]",
        "test_parameter_groups_clip_each_group_by_its_own_norm_as_paddle_does",
        "test_a_group_with_its_own_clip_is_clipped_as_paddle_clips_it[norm]",
        "test_a_clip_that_paddles_kernels_refuse_is_refused_before_any_update_as_adamw_refuses_it[value_min_above_max]",
        "test_bounds_equal_in_float32_are_clipped_as_paddle_clips_them",
    ]
    rerun_with_the_operator_off(*(f"{__file__}::{test}" for test in tests))
