"""ExponentialMovingAverage.update() on flat segments of shadows against the
per-tensor update it replaces: the same bits as three in-place ops per
tensor, written out here, and a float64 NumPy average, after every update,
on both ways of reading the parameters -- in place where they tile one
buffer (after ``AdamWDL``'s multi-tensor step) and gathered where each has a
buffer of its own (``paddle.optimizer.AdamW``) -- and across the relayouts
between them."""
from __future__ import annotations

import numpy as np
import paddle
import pytest
from paddle import nn

from paddle_llrd import AdamWDL, ExponentialMovingAverage

LOW_PRECISION = (paddle.float16, paddle.bfloat16)
THREADS = [1, 2, 3]


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Segments of these small models split into chunks of 16 elements and up (the crossover is 2^17)."""
    monkeypatch.setenv("PADDLE_LLRD_MIN_CHUNK_NUMEL", "16")


def assert_split_into(ema: ExponentialMovingAverage, num_threads: int) -> None:
    expected = num_threads if paddle.get_device() == "cpu" else 1  # (a GPU's ops are parallel already)
    assert max(len(segment.bounds) for segment in ema._flat_segments()) == expected


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


def segments(ema: ExponentialMovingAverage) -> list:
    return ema._flat_segments()


def in_place_params(ema: ExponentialMovingAverage) -> list[list[str]]:
    """The names of each segment read in place (an alias of its parameters' buffer)."""
    names = {id(p): n for n, p in ema._params.items()}
    return [[names[id(p)] for p in s.params] for s in segments(ema) if s.params_alias is not None]


def gathered_params(ema: ExponentialMovingAverage) -> list[str]:
    names = {id(p): n for n, p in ema._params.items()}
    return sorted(names[id(p)] for s in segments(ema) if s.params_alias is None for p in s.params)


def assert_layout_is_sound(ema: ExponentialMovingAverage) -> None:
    """Each shadow is a view of its segment's flat buffer in the segment's order, and an
    in-place segment's alias shares its parameters' buffer where they lie."""
    shadow_of = {id(ema._params[n]): t for n, t in ema.shadow.items()}
    covered = 0
    for segment in segments(ema):
        offset = 0
        for param in segment.params:
            shadow = shadow_of[id(param)]
            assert shadow._is_shared_buffer_with(segment.shadow_flat)
            assert shadow._offset() - segment.shadow_flat._offset() == offset * shadow.element_size()
            offset += int(np.prod(param.shape))
        assert offset == segment.shadow_flat.shape[0]
        covered += len(segment.params)
        alias = segment.params_alias
        if alias is not None:
            start = segment.params[0]._offset()
            for param in segment.params:
                assert param._is_shared_buffer_with(alias)
            assert alias._offset() == start and alias.shape[0] == offset and alias.dtype == segment.params[0].dtype
    assert covered == len(ema.shadow)


# ---------------------------------------------------------------- the gather path
@pytest.mark.parametrize("num_threads", THREADS)
@pytest.mark.parametrize(
    "decay, warmup", [(0.9, False), (0.999, False), (0.999, True), (0.5, True), (0.0, False)]
)
def test_gathered_parameters_of_mixed_dtypes_match_the_per_tensor_bits(small_chunks, decay, warmup, num_threads):
    paddle.seed(1)
    model = Mixed()
    rng = np.random.default_rng(2)
    randomize(model, rng)
    ema = ExponentialMovingAverage(model, decay, warmup=warmup, num_threads=num_threads)
    ema.register()
    assert_split_into(ema, num_threads)
    references = References(model)
    assert "frozen" not in ema.shadow
    assert [ema.shadow[n].dtype for n in ("first.weight", "wide.weight", "fp16.weight", "bf16.weight")] == [
        paddle.float32, paddle.float64, paddle.float32, paddle.float32
    ]
    # One gathered segment per dtype; the table alone (read in place).
    assert in_place_params(ema) == [["table.weight"]]
    assert len(segments(ema)) == 5
    assert_layout_is_sound(ema)
    for n in range(5):
        randomize(model, rng)
        ema.update()
        references.update(decay_of(ema, n))
        references.check(ema, f"after update {n + 1}")
    assert ema.num_updates == 5
    moved = [n for n, t in ema.shadow.items() if not np.array_equal(t.numpy(), as_f64(ema._params[n]))]
    assert (moved == []) == (decay == 0.0)  # (the average is not a copy of the parameters, but for decay 0)


def test_plain_adamw_training_keeps_the_gathered_layout_and_the_storage():
    paddle.seed(3)
    model = Mixed(large_table=False)
    for layer in (model.wide, model.fp16, model.bf16):
        layer.to(dtype="float32")  # (paddle.optimizer.AdamW has no float16/bfloat16 kernel on CPU)
    optimizer = paddle.optimizer.AdamW(learning_rate=0.05, parameters=list(trainable(model).values()))
    ema = ExponentialMovingAverage(model, 0.8, warmup=True)
    ema.register()
    references = References(model)
    laid_out = segments(ema)
    pointers = {n: t.data_ptr() for n, t in ema.shadow.items()}
    assert len(laid_out) == 1 and laid_out[0].params_alias is None
    for n in range(4):
        elementwise_step(model, optimizer, n)
        ema.update()
        references.update(decay_of(ema, n))
        references.check(ema, f"after AdamW step {n + 1}")
        assert segments(ema) is laid_out  # nothing moved: no relayout
        assert {name: t.data_ptr() for name, t in ema.shadow.items()} == pointers


# ---------------------------------------------------------------- the in-place path
def adamwdl(model: nn.Layer, **options) -> AdamWDL:
    params = list(trainable(model).values())
    groups = [{"params": params[:3]}, {"params": params[3:], "learning_rate": 0.5}]
    return AdamWDL(learning_rate=0.02, parameters=groups, weight_decay=0.01, multi_precision=True, **options)


@pytest.mark.parametrize("num_threads", THREADS)
@pytest.mark.parametrize("decay, warmup", [(0.9, False), (0.99, True), (0.0, False)])
def test_parameters_laid_out_by_adamwdl_are_read_in_place_with_the_per_tensor_bits(small_chunks, decay, warmup, num_threads):
    paddle.seed(4)
    model = Blocks()
    optimizer = adamwdl(model, num_threads=num_threads)
    ema = ExponentialMovingAverage(model, decay, warmup=warmup, num_threads=num_threads)
    ema.register()  # before the first step: the parameters have buffers of their own yet
    references = References(model)
    assert in_place_params(ema) == []
    for n in range(5):
        elementwise_step(model, optimizer, n)
        ema.update()
        references.update(decay_of(ema, n))
        references.check(ema, f"after AdamWDL step {n + 1}")
        assert gathered_params(ema) == []
        assert_layout_is_sound(ema)
        assert_split_into(ema, num_threads)
    assert optimizer._flat.fused_steps == 5 and optimizer._flat.rebuilds == 1
    # One in-place segment per bank (parameter group x dtype), in the banks' storage order.
    banks = [[p.name for p in bank.params] for bank in optimizer._flat.banks]
    names = {n: p.name for n, p in trainable(model).items()}
    assert sorted([names[n] for n in run] for run in in_place_params(ema)) == sorted(banks)
    assert len(banks) == 3


def test_relayouts_when_parameters_are_frozen_unfrozen_and_banks_rebuilt():
    paddle.seed(5)
    model = Blocks()
    optimizer = adamwdl(model)
    elementwise_step(model, optimizer, 0)
    ema = ExponentialMovingAverage(model, 0.7)
    ema.register()  # laid out in place from the start: a missed relayout would read stale buffers
    assert gathered_params(ema) == []
    references = References(model)
    step = 1

    def train(steps: int, when: str) -> None:
        nonlocal step
        for _ in range(steps):
            elementwise_step(model, optimizer, step)
            ema.update()
            references.update(0.7)
            references.check(ema, f"{when}, step {step}")
            assert_layout_is_sound(ema)
            step += 1

    train(2, "laid out")
    before = segments(ema)
    aliases = [s.params_alias for s in before if s.params_alias is not None]
    frozen = model.blocks[0][1].weight
    frozen.stop_gradient = True  # the next AdamWDL step lays its banks out anew, without it
    train(2, "one frozen")
    assert optimizer._flat.rebuilds == 2
    after = segments(ema)
    assert after is not before
    # A relayout makes new buffers: no parameter shares one with the old aliases.
    for alias in aliases:
        assert not any(p._is_shared_buffer_with(alias) for p in ema._params.values())
    assert gathered_params(ema) == ["blocks.0.1.weight"]  # still averaged, in a buffer of its own now
    frozen.stop_gradient = False
    train(2, "unfrozen")
    assert optimizer._flat.rebuilds == 3
    # Its beta powers lag the others': a bank of its own, too small to be read in place alone.
    alone = [bank for bank in optimizer._flat.banks if bank.params == [frozen]]
    assert len(alone) == 1 and len(optimizer._flat.banks) == 4
    assert gathered_params(ema) == ["blocks.0.1.weight"] and len(in_place_params(ema)) == 3

    # The banks dropped (as the optimizer does when its parameters change): laid out anew, in new buffers.
    optimizer._flat.invalidate()
    train(1, "banks dropped")
    assert optimizer._flat.rebuilds == 4


def test_a_per_parameter_optimizer_on_laid_out_parameters_keeps_the_layout():
    paddle.seed(6)
    model = Blocks()
    model.head.to(dtype="float32")
    layout = adamwdl(model)
    elementwise_step(model, layout, 0)  # the parameters are views of flat buffers now
    optimizer = paddle.optimizer.AdamW(learning_rate=0.05, parameters=list(trainable(model).values()))
    ema = ExponentialMovingAverage(model, 0.95)
    ema.register()
    references = References(model)
    laid_out = segments(ema)
    assert gathered_params(ema) == [] and len(laid_out) == 2
    for n in range(3):
        elementwise_step(model, optimizer, n + 1)
        ema.update()
        references.update(0.95)
        references.check(ema, f"after AdamW step {n + 1}")
        assert segments(ema) is laid_out


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
    assert gathered_params(ema) == []
    saved = {n: t.numpy().copy() for n, t in ema.shadow.items()}
    paddle.save(ema.state_dict(), str(tmp_path / "ema.pdparams"))
    loaded = paddle.load(str(tmp_path / "ema.pdparams"))
    for name, value in loaded["shadow"].items():  # each view saved as itself, not its whole buffer
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


def test_set_state_dict_writes_into_the_flat_shadows_then_updates():
    paddle.seed(8)
    model = Blocks()
    optimizer = adamwdl(model)
    ema = ExponentialMovingAverage(model, 0.6)
    ema.register()
    elementwise_step(model, optimizer, 0)
    ema.update()
    laid_out = segments(ema)
    objects = {n: t for n, t in ema.shadow.items()}
    rng = np.random.default_rng(9)
    values = {n: rng.standard_normal(t.shape).astype(np.float32) for n, t in ema.shadow.items()}
    ema.set_state_dict({"decay": 0.6, "warmup": False, "num_updates": 10, "shadow": values})
    for name, shadow in ema.shadow.items():
        assert shadow is objects[name]
        np.testing.assert_array_equal(shadow.numpy(), values[name])
    assert segments(ema) is laid_out  # written into the views: the flat buffers hold the new values
    assert_layout_is_sound(ema)
    references = References(model)
    references.restart_from(values)
    for n in range(1, 4):
        elementwise_step(model, optimizer, n)
        ema.update()
        references.update(0.6)
        references.check(ema, f"update {n} after set_state_dict")


def test_swaps_keep_the_optimizers_and_the_emas_layouts():
    paddle.seed(10)
    model = Blocks()
    optimizer = adamwdl(model)
    ema = ExponentialMovingAverage(model, 0.5)
    ema.register()
    references = References(model)
    for n in range(4):
        elementwise_step(model, optimizer, n)
        ema.update()
        references.update(0.5)
        laid_out = segments(ema)
        live = {name: p.numpy().copy() for name, p in trainable(model).items()}
        with ema.average_parameters():
            for name, p in trainable(model).items():
                expected = references.per_tensor[name]
                np.testing.assert_array_equal(as_f64(p), as_f64(paddle.cast(expected, p.dtype)), err_msg=name)
        for name, p in trainable(model).items():
            np.testing.assert_array_equal(p.numpy(), live[name], err_msg=name)
        assert segments(ema) is laid_out
    references.check(ema, "after the swaps")
    assert optimizer._flat.fused_steps == 4 and optimizer._flat.rebuilds == 1


def test_a_replaced_shadow_tensor_is_laid_out_and_updated():
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
    assert_layout_is_sound(ema)
