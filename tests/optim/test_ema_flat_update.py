"""ExponentialMovingAverage.update() against the per-tensor update it replaces:
the same bits as three in-place ops per tensor, written out here, and a
float64 NumPy average, after every update, whatever holds the parameters --
buffers of their own (``paddle.optimizer.AdamW``), the flat buffers of
``AdamWDL``'s multi-tensor step -- and across the steps that move them (a
parameter frozen or unfrozen, the optimizer's state loaded). The shadows stay
the same tensors, in the same storage while the parameters' storage stays.
The EMA's update runs the fused operator; some tests run again with it
turned off, where Paddle's ops update the shadows (on threads for large
ranges), with the same bits."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import paddle
import pytest
from paddle import nn

from operator_off import flat_path, rerun_with_the_operator_off
from paddle_llrd import AdamWDL, ExponentialMovingAverage

LOW_PRECISION = (paddle.float16, paddle.bfloat16)
THREADS = [1, 2, 3]


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the operator off, Paddle's ops update these small models' shadows in chunks of 16
    elements and up on the threads (the crossover is 2^17)."""
    monkeypatch.setenv("PADDLE_LLRD_MIN_CHUNK_NUMEL", "16")


# ---------------------------------------------------------------- the models
class Mixed(nn.Layer):
    """float32, float64, float16 and bfloat16 layers, a table large enough to be
    updated on its own, and a parameter frozen from the start."""

    def __init__(self, large_table: bool = True) -> None:
        super().__init__()
        self.first = nn.Linear(4, 5)
        self.wide = nn.Linear(5, 5)
        self.wide.to(dtype="float64")
        self.fp16 = nn.Linear(5, 3)
        self.fp16.to(dtype="float16")
        self.bf16 = nn.Linear(3, 3)
        self.bf16.to(dtype="bfloat16")
        self.last = nn.Linear(3, 2)
        if large_table:
            self.table = nn.Embedding(1024, 40)  # 40,960 elements
        self.frozen = self.create_parameter([3], default_initializer=nn.initializer.Constant(2.0))
        self.frozen.stop_gradient = True


class Blocks(nn.Layer):
    """Two small linear blocks and a bfloat16 head (AdamWDL lays it out with master weights)."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.LayerList([nn.Sequential(nn.Linear(4, 6), nn.Linear(6, 4)) for _ in range(2)])
        self.head = nn.Linear(4, 3)
        self.head.to(dtype="bfloat16")
        self.frozen = self.create_parameter([2], default_initializer=nn.initializer.Constant(1.0))
        self.frozen.stop_gradient = True


def trainable(model: nn.Layer) -> dict[str, paddle.Tensor]:
    return {n: p for n, p in model.named_parameters() if not p.stop_gradient}


def elementwise_step(model: nn.Layer, optimizer, step: int) -> None:
    """loss = sum(p * G), G standard normal (no matmul, which CPU lacks for float16/bfloat16)."""
    rng = np.random.default_rng(step)
    paddle.add_n([
        (p.astype("float32") * paddle.to_tensor(rng.standard_normal(p.shape).astype("float32"))).sum()
        for p in trainable(model).values()
    ]).backward()
    optimizer.step()
    optimizer.clear_grad()


def randomize(model: nn.Layer, rng: np.random.Generator) -> None:
    """New values into every trainable parameter, in place (their storage stays)."""
    for p in trainable(model).values():
        p.set_value(paddle.to_tensor(rng.standard_normal(p.shape).astype("float32")).astype(p.dtype))


# ---------------------------------------------------------------- the references
def as_f64(tensor: paddle.Tensor) -> np.ndarray:
    if tensor.dtype in LOW_PRECISION:
        tensor = paddle.cast(tensor, "float32")
    return tensor.numpy().astype(np.float64)


class References:
    """The per-tensor update (today's three in-place ops per tensor, each shadow a
    tensor of its own) and the float64 average, beside the EMA."""

    def __init__(self, model: nn.Layer) -> None:
        self.params = trainable(model)
        with paddle.no_grad():
            self.per_tensor = {
                n: paddle.cast(p, "float32") if p.dtype in LOW_PRECISION else p.detach().clone()
                for n, p in self.params.items()
            }
        self.float64 = {n: as_f64(p) for n, p in self.params.items()}

    def update(self, d: float) -> None:
        with paddle.no_grad():
            for name, p in self.params.items():
                shadow = self.per_tensor[name]
                value = paddle.cast(p, shadow.dtype) if p.dtype != shadow.dtype else p
                if d == 0.0:
                    paddle.assign(value, output=shadow)
                elif d < 1.0:
                    shadow.scale_(d / (1.0 - d))
                    shadow.add_(value)
                    shadow.scale_(1.0 - d)
        for name, p in self.params.items():
            self.float64[name] = d * self.float64[name] + (1.0 - d) * as_f64(p)

    def restart_from(self, values: dict[str, np.ndarray]) -> None:
        """Both references hold ``values`` (shadows as saved or set), as a resumed EMA does."""
        with paddle.no_grad():
            for name, value in values.items():
                paddle.assign(paddle.to_tensor(value), output=self.per_tensor[name])
                self.float64[name] = value.astype(np.float64)

    def check(self, ema: ExponentialMovingAverage, when: str) -> None:
        assert set(ema.shadow) == set(self.params)
        for name, shadow in ema.shadow.items():
            expected = self.per_tensor[name]
            assert shadow.dtype == expected.dtype and list(shadow.shape) == list(expected.shape), name
            np.testing.assert_array_equal(shadow.numpy(), expected.numpy(), err_msg=f"{name} {when}: bits")
            tolerance = 1e-13 if shadow.dtype == paddle.float64 else 2e-6
            np.testing.assert_allclose(
                shadow.numpy().astype(np.float64), self.float64[name], rtol=tolerance, atol=tolerance / 10,
                err_msg=f"{name} {when}: float64",
            )


def decay_of(ema: ExponentialMovingAverage, n: int) -> float:
    """The decay of update ``n + 1``, written out."""
    return min(ema.decay, (1.0 + n) / (10.0 + n)) if ema.warmup else ema.decay


def shadow_pointers(ema: ExponentialMovingAverage) -> dict[str, int]:
    return {name: shadow.data_ptr() for name, shadow in ema.shadow.items()}


def parameter_pointers(model: nn.Layer) -> dict[str, int]:
    return {name: p.data_ptr() for name, p in trainable(model).items()}


# ---------------------------------------------------------------- parameters of their own
@pytest.mark.parametrize("num_threads", THREADS)
@pytest.mark.parametrize(
    "decay, warmup", [(0.9, False), (0.999, False), (0.999, True), (0.5, True), (0.0, False)]
)
def test_parameters_of_mixed_dtypes_match_the_per_tensor_bits(small_chunks, decay, warmup, num_threads):
    paddle.seed(1)
    model = Mixed()
    rng = np.random.default_rng(2)
    randomize(model, rng)
    ema = ExponentialMovingAverage(model, decay, warmup=warmup, num_threads=num_threads)
    ema.register()
    assert ema.num_threads == num_threads
    references = References(model)
    assert "frozen" not in ema.shadow
    assert [ema.shadow[n].dtype for n in ("first.weight", "wide.weight", "fp16.weight", "bf16.weight")] == [
        paddle.float32, paddle.float64, paddle.float32, paddle.float32
    ]
    for n in range(5):
        randomize(model, rng)
        ema.update()
        references.update(decay_of(ema, n))
        references.check(ema, f"after update {n + 1}")
    assert ema.num_updates == 5
    params = trainable(model)
    moved = [n for n, t in ema.shadow.items() if not np.array_equal(t.numpy(), as_f64(params[n]))]
    assert (moved == []) == (decay == 0.0)  # (the average is not a copy of the parameters, but for decay 0)


def test_plain_adamw_training_keeps_the_shadows_and_their_storage():
    paddle.seed(3)
    model = Mixed(large_table=False)
    for layer in (model.wide, model.fp16, model.bf16):
        layer.to(dtype="float32")  # (paddle.optimizer.AdamW has no float16/bfloat16 kernel on CPU)
    optimizer = paddle.optimizer.AdamW(learning_rate=0.05, parameters=list(trainable(model).values()))
    ema = ExponentialMovingAverage(model, 0.8, warmup=True)
    ema.register()
    references = References(model)
    shadows, pointers = dict(ema.shadow), shadow_pointers(ema)
    for n in range(4):
        elementwise_step(model, optimizer, n)
        ema.update()
        references.update(decay_of(ema, n))
        references.check(ema, f"after AdamW step {n + 1}")
        assert all(ema.shadow[name] is shadow for name, shadow in shadows.items())
        assert shadow_pointers(ema) == pointers


# ---------------------------------------------------------------- AdamWDL's flat buffers
def train_and_check(model: nn.Layer, optimizer, ema: ExponentialMovingAverage, references: References,
                    steps: range, decay: float, when: str) -> None:
    """``elementwise_step`` for each of ``steps``, then ``ema.update()`` and the references' update by
    ``decay``, the EMA checked against them after each."""
    for n in steps:
        elementwise_step(model, optimizer, n)
        ema.update()
        references.update(decay)
        references.check(ema, f"{when}, update at step {n}")


def adamwdl(model: nn.Layer, **options) -> AdamWDL:
    params = list(trainable(model).values())
    groups = [{"params": params[:3]}, {"params": params[3:], "learning_rate": 0.5}]
    return AdamWDL(learning_rate=0.02, parameters=groups, weight_decay=0.01, multi_precision=True, **options)


@pytest.mark.parametrize("num_threads", THREADS)
@pytest.mark.parametrize("decay, warmup", [(0.9, False), (0.99, True), (0.0, False)])
def test_parameters_in_adamwdls_flat_buffers_match_the_per_tensor_bits(small_chunks, decay, warmup, num_threads):
    """Registered before the first step (the parameters in buffers of their own yet), then
    updated after each multi-tensor step, which holds them in its flat buffers."""
    paddle.seed(4)
    model = Blocks()
    optimizer = adamwdl(model, num_threads=num_threads)
    ema = ExponentialMovingAverage(model, decay, warmup=warmup, num_threads=num_threads)
    ema.register()
    references = References(model)
    for n in range(5):
        elementwise_step(model, optimizer, n)
        assert optimizer.last_update_path == flat_path()
        ema.update()
        references.update(decay_of(ema, n))
        references.check(ema, f"after AdamWDL step {n + 1}")


def test_steps_that_move_the_parameters_are_followed():
    """Each of these makes AdamWDL lay its parameters out anew (new storage) at the next step:
    a parameter frozen, then unfrozen, then the optimizer's state loaded; the EMA, registered
    on the laid-out parameters, follows each move with the per-tensor bits."""
    paddle.seed(5)
    model = Blocks()
    optimizer = adamwdl(model)
    elementwise_step(model, optimizer, 0)
    ema = ExponentialMovingAverage(model, 0.7)
    ema.register()  # on the flat buffers from the start: a move it missed would read stale storage
    references = References(model)
    step = 1

    def train(steps: int, when: str) -> None:
        nonlocal step
        for _ in range(steps):
            elementwise_step(model, optimizer, step)
            assert optimizer.last_update_path == flat_path()
            ema.update()
            references.update(0.7)
            references.check(ema, f"{when}, step {step}")
            step += 1

    def moves(change: Callable[[], None], when: str) -> None:
        before = parameter_pointers(model)
        change()
        train(2, when)
        assert parameter_pointers(model) != before  # (the scenario does move them)

    train(2, "laid out")
    frozen = model.blocks[0][1].weight
    moves(lambda: setattr(frozen, "stop_gradient", True), "one frozen")  # (still averaged: registered)
    moves(lambda: setattr(frozen, "stop_gradient", False), "unfrozen")
    state = {k: paddle.to_tensor(v.numpy()) if hasattr(v, "numpy") else v for k, v in optimizer.state_dict().items()}
    moves(lambda: optimizer.set_state_dict(state), "state loaded")


def test_a_per_parameter_optimizer_on_laid_out_parameters():
    paddle.seed(6)
    model = Blocks()
    model.head.to(dtype="float32")
    layout = adamwdl(model)
    elementwise_step(model, layout, 0)  # the parameters are views of flat buffers now
    optimizer = paddle.optimizer.AdamW(learning_rate=0.05, parameters=list(trainable(model).values()))
    ema = ExponentialMovingAverage(model, 0.95)
    ema.register()
    references = References(model)
    pointers = shadow_pointers(ema)
    for n in range(3):
        elementwise_step(model, optimizer, n + 1)
        ema.update()
        references.update(0.95)
        references.check(ema, f"after AdamW step {n + 1}")
        assert shadow_pointers(ema) == pointers


# ---------------------------------------------------------------- checkpoints and swaps
def test_state_dict_round_trip_through_paddle_save_and_load(tmp_path):
    paddle.seed(7)
    model = Blocks()
    optimizer = adamwdl(model)
    ema = ExponentialMovingAverage(model, 0.9, warmup=True)
    ema.register()
    for n in range(3):
        elementwise_step(model, optimizer, n)
        ema.update()
    saved = {n: t.numpy().copy() for n, t in ema.shadow.items()}
    paddle.save(ema.state_dict(), str(tmp_path / "ema.pdparams"))
    loaded = paddle.load(str(tmp_path / "ema.pdparams"))
    for name, value in loaded["shadow"].items():  # each shadow saved as itself, not a buffer it shares
        assert list(value.shape) == list(ema.shadow[name].shape)
        np.testing.assert_array_equal(value.numpy(), saved[name])

    resumed = ExponentialMovingAverage(model, 0.1)
    resumed.set_state_dict(loaded)
    assert (resumed.decay, resumed.warmup, resumed.num_updates) == (0.9, True, 3)
    references = References(model)
    references.restart_from(saved)
    for n in range(3, 6):
        elementwise_step(model, optimizer, n)
        ema.update()
        resumed.update()
        references.update(decay_of(ema, n))
        references.check(resumed, f"resumed, update {n + 1}")
        references.check(ema, f"never stopped, update {n + 1}")


def test_set_state_dict_writes_into_the_shadows_then_updates():
    paddle.seed(8)
    model = Blocks()
    optimizer = adamwdl(model)
    ema = ExponentialMovingAverage(model, 0.6)
    ema.register()
    elementwise_step(model, optimizer, 0)
    ema.update()
    objects, pointers = dict(ema.shadow), shadow_pointers(ema)
    rng = np.random.default_rng(9)
    values = {n: rng.standard_normal(t.shape).astype(np.float32) for n, t in ema.shadow.items()}
    ema.set_state_dict({"decay": 0.6, "warmup": False, "num_updates": 10, "shadow": values})
    for name, shadow in ema.shadow.items():
        assert shadow is objects[name]
        np.testing.assert_array_equal(shadow.numpy(), values[name])
    assert shadow_pointers(ema) == pointers  # written into the shadows' storage
    references = References(model)
    references.restart_from(values)
    train_and_check(model, optimizer, ema, references, range(1, 4), 0.6, "after set_state_dict")


def test_swaps_keep_the_shadows_and_the_optimizers_path():
    paddle.seed(10)
    model = Blocks()
    optimizer = adamwdl(model)
    ema = ExponentialMovingAverage(model, 0.5)
    ema.register()
    references = References(model)
    pointers = None
    for n in range(4):
        elementwise_step(model, optimizer, n)
        assert optimizer.last_update_path == flat_path()
        ema.update()
        references.update(0.5)
        pointers = pointers or shadow_pointers(ema)
        live = {name: p.numpy().copy() for name, p in trainable(model).items()}
        with ema.average_parameters():
            for name, p in trainable(model).items():
                expected = references.per_tensor[name]
                np.testing.assert_array_equal(as_f64(p), as_f64(paddle.cast(expected, p.dtype)), err_msg=name)
        for name, p in trainable(model).items():
            np.testing.assert_array_equal(p.numpy(), live[name], err_msg=name)
        assert shadow_pointers(ema) == pointers
    references.check(ema, "after the swaps")


def test_a_replaced_shadow_tensor_is_updated():
    paddle.seed(11)
    model = Blocks()
    optimizer = adamwdl(model)
    ema = ExponentialMovingAverage(model, 0.5)
    ema.register()
    elementwise_step(model, optimizer, 0)
    ema.update()
    replacement = paddle.full(ema.shadow["head.bias"].shape, 3.0, dtype="float32")
    ema.shadow["head.bias"] = replacement
    references = References(model)
    with paddle.no_grad():
        for name, shadow in ema.shadow.items():
            paddle.assign(shadow.clone(), output=references.per_tensor[name])
            references.float64[name] = shadow.numpy().astype(np.float64)
    elementwise_step(model, optimizer, 1)
    ema.update()
    references.update(0.5)
    references.check(ema, "after the replacement")
    assert ema.shadow["head.bias"] is replacement


@pytest.mark.parametrize("replacement, error, match", [
    (lambda shadow: paddle.zeros([2]), ValueError, r"ema.shadow\['head.bias'\] has shape \[2\], the parameter has shape \[3\]"),
    (lambda shadow: paddle.zeros([2, 3]), ValueError, r"has shape \[2, 3\], the parameter has shape \[3\]"),
    (lambda shadow: shadow.astype("int32"), TypeError, r"ema.shadow\['head.bias'\] must be a floating-point paddle.Tensor, got dtype"),
    (lambda shadow: shadow.numpy(), TypeError, r"must be a floating-point paddle.Tensor, got ndarray"),
])
def test_a_shadow_replaced_by_one_of_another_shape_or_kind_is_refused_by_name_changing_nothing(replacement, error, match):
    paddle.seed(11)
    model = Blocks()
    ema = ExponentialMovingAverage(model, 0.5)
    ema.register()
    ema.update()
    before = {name: shadow.numpy().copy() for name, shadow in ema.shadow.items()}
    ema.shadow["head.bias"] = replacement(ema.shadow["head.bias"])
    with pytest.raises(error, match=match):
        ema.update()
    assert ema.num_updates == 1
    for name, shadow in ema.shadow.items():
        if name != "head.bias":
            np.testing.assert_array_equal(shadow.numpy(), before[name], err_msg=name)


def test_a_float64_shadow_a_user_assigns_is_updated_in_float64():
    paddle.seed(11)
    name = "blocks.0.0.bias"  # (a float32 parameter)
    model = Blocks()
    ema = ExponentialMovingAverage(model, 0.9)
    ema.register()
    ema.shadow[name] = ema.shadow[name].astype("float64")
    expected = ema.shadow[name].numpy()
    for _ in range(3):
        with paddle.no_grad():
            model.blocks[0][0].bias.set_value(model.blocks[0][0].bias * 0.5 + 0.25)
        ema.update()
        value = model.blocks[0][0].bias.numpy().astype(np.float64)
        expected = (expected * (0.9 / (1.0 - 0.9)) + value) * (1.0 - 0.9)  # update_flat's three ops, in float64
    assert ema.shadow[name].dtype == paddle.float64
    np.testing.assert_array_equal(ema.shadow[name].numpy(), expected)


@pytest.mark.parametrize("registered, written", [("float32", "float64"), ("float64", "float32")])
def test_a_shadow_given_another_dtype_in_place_is_updated_in_it(registered, written):
    """``paddle.assign`` of a tensor of another dtype into a shadow changes the shadow's dtype in
    place (float64 into float32 at a new pointer, float32 into float64 at the same one); the
    next updates average into the shadow as it now is."""
    paddle.seed(12)
    name = "blocks.1.0.weight"
    model = Blocks()
    optimizer = adamwdl(model)
    ema = ExponentialMovingAverage(model, 0.5)
    ema.register()
    ema.shadow[name] = ema.shadow[name].astype(registered)
    elementwise_step(model, optimizer, 0)
    ema.update()
    shadow = ema.shadow[name]
    with paddle.no_grad():
        paddle.assign(paddle.full(shadow.shape, 3.0, dtype=written), output=shadow)
    assert ema.shadow[name] is shadow and shadow.dtype == getattr(paddle, written)
    references = References(model)
    references.restart_from({shadow_name: value.numpy() for shadow_name, value in ema.shadow.items()})
    train_and_check(model, optimizer, ema, references, range(1, 4), 0.5, "after the assign")
    assert ema.shadow[name] is shadow and not np.isclose(shadow.numpy(), 3.0).any()  # (it moved from 3.0)


def test_a_float64_shadow_is_loaded_as_float64_and_resumes_like_an_uninterrupted_average(tmp_path):
    paddle.seed(13)
    name = "blocks.0.1.weight"
    model = Blocks()
    optimizer = adamwdl(model)
    ema = ExponentialMovingAverage(model, 0.8)
    ema.register()
    ema.shadow[name] = ema.shadow[name].astype("float64")
    for n in range(2):
        elementwise_step(model, optimizer, n)
        ema.update()
    saved = {shadow_name: value.numpy().copy() for shadow_name, value in ema.shadow.items()}
    paddle.save(ema.state_dict(), str(tmp_path / "ema.pdparams"))
    ema.set_state_dict(paddle.load(str(tmp_path / "ema.pdparams")))
    assert ema.shadow[name].dtype == paddle.float64
    np.testing.assert_array_equal(ema.shadow[name].numpy(), saved[name])  # (float64 bits, not rounded)
    references = References(model)
    references.restart_from(saved)
    train_and_check(model, optimizer, ema, references, range(2, 5), 0.8, "resumed")


# ---------------------------------------------------------------- Paddle's ops
def test_with_the_operator_off_paddles_ops_give_the_same_bits():
    """Tests of this file in a process with ``PADDLE_LLRD_FUSED=0``: the EMA's update by Paddle's
    ops (on 3 threads, the ranges split into chunks) gives the per-tensor bits, and AdamWDL's
    steps report ``("multi_tensor", "PADDLE_LLRD_FUSED=0")``."""
    tests = [
        "test_parameters_of_mixed_dtypes_match_the_per_tensor_bits[0.999-True-3]",
        "test_parameters_of_mixed_dtypes_match_the_per_tensor_bits[0.0-False-3]",
        "test_plain_adamw_training_keeps_the_shadows_and_their_storage",
        "test_parameters_in_adamwdls_flat_buffers_match_the_per_tensor_bits[0.9-False-3]",
        "test_steps_that_move_the_parameters_are_followed",
        "test_set_state_dict_writes_into_the_shadows_then_updates",
        "test_a_shadow_replaced_by_one_of_another_shape_or_kind_is_refused_by_name_changing_nothing",
        "test_a_float64_shadow_a_user_assigns_is_updated_in_float64",
    ]
    rerun_with_the_operator_off(*(f"{__file__}::{test}" for test in tests))
