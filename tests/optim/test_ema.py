"""ExponentialMovingAverage against a float64 NumPy average, the in-place swap,
checkpoints, misuse and wrappers."""
from __future__ import annotations

import inspect
import math

import numpy as np
import paddle
import pytest

from paddle_llrd import ExponentialMovingAverage
from paddle_llrd.models.tiny_bert import TinyBertConfig, TinyBertForSequenceClassification


# ---------------------------------------------------------------- helpers
def _tiny_bert() -> TinyBertForSequenceClassification:
    return TinyBertForSequenceClassification(
        TinyBertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32)
    )


def _batch(step: int) -> tuple[paddle.Tensor, paddle.Tensor]:
    rng = np.random.RandomState(100 + step)
    ids = paddle.to_tensor(rng.randint(0, 50, size=(8, 12)).astype("int64"))
    labels = paddle.to_tensor(rng.randint(0, 2, size=(8,)).astype("int64"))
    return ids, labels


def _train_step(model, optimizer, step: int) -> None:
    ids, labels = _batch(step)
    loss = paddle.nn.functional.cross_entropy(model(ids), labels)
    loss.backward()
    optimizer.step()
    optimizer.clear_grad()


def _trainable(model) -> dict[str, paddle.Tensor]:
    return {n: p for n, p in model.named_parameters() if not p.stop_gradient}


def _as_f64(tensor: paddle.Tensor) -> np.ndarray:
    return paddle.cast(tensor, "float32").numpy().astype(np.float64) if tensor.dtype in (paddle.float16, paddle.bfloat16) else tensor.numpy().astype(np.float64)


def _expected_decay(decay: float, warmup: bool, n: int) -> float:
    return min(decay, (1.0 + n) / (10.0 + n)) if warmup else decay


class _Mlp(paddle.nn.Layer):
    """Two linear layers and one frozen parameter the EMA must leave alone."""

    def __init__(self, dtype: str = "float32"):
        super().__init__()
        self.fc1 = paddle.nn.Linear(4, 6)
        self.fc2 = paddle.nn.Linear(6, 3)
        self.frozen_scale = self.create_parameter([3], dtype="float32", default_initializer=paddle.nn.initializer.Constant(2.0))
        self.frozen_scale.stop_gradient = True
        if dtype != "float32":
            self.to(dtype=dtype)

    def forward(self, x):
        return self.fc2(paddle.tanh(self.fc1(x))) * self.frozen_scale


def _randomize(model, rng: np.random.RandomState) -> None:
    for p in _trainable(model).values():
        values = rng.standard_normal(p.shape).astype(np.float32)
        p.set_value(paddle.to_tensor(values).astype(p.dtype))


# ---------------------------------------------------------------- the average
@pytest.mark.parametrize("warmup", [False, True])
@pytest.mark.parametrize("decay", [0.9, 0.999])
def test_update_matches_float64_numpy_over_adamw_steps(decay, warmup):
    model = _tiny_bert()
    optimizer = paddle.optimizer.AdamW(learning_rate=0.05, parameters=model.parameters())
    ema = ExponentialMovingAverage(model, decay, warmup=warmup)
    ema.register()
    reference = {n: _as_f64(p) for n, p in _trainable(model).items()}
    assert set(ema.shadow) == set(reference)
    for n in range(8):
        _train_step(model, optimizer, n)
        ema.update()
        d = _expected_decay(decay, warmup, n)
        for name, p in _trainable(model).items():
            reference[name] = d * reference[name] + (1.0 - d) * _as_f64(p)
    assert ema.num_updates == 8
    for name, p in _trainable(model).items():
        np.testing.assert_allclose(ema.shadow[name].numpy(), reference[name], rtol=2e-6, atol=1e-7, err_msg=name)
    # the average lags behind the trained weights, so the check above is not a copy of them
    weight = "bert.encoder.layers.0.linear1.weight"
    assert np.abs(ema.shadow[weight].numpy() - model.state_dict()[weight].numpy()).max() > 1e-3


@pytest.mark.parametrize("warmup", [False, True])
def test_update_matches_float64_numpy_with_manual_float64_parameters(warmup):
    model = _Mlp(dtype="float64")
    rng = np.random.RandomState(7)
    _randomize(model, rng)
    ema = ExponentialMovingAverage(model, decay=0.8, warmup=warmup)
    ema.register()
    reference = {n: p.numpy().copy() for n, p in _trainable(model).items()}
    for n in range(6):
        _randomize(model, rng)
        ema.update()
        d = _expected_decay(0.8, warmup, n)
        for name, p in _trainable(model).items():
            reference[name] = d * reference[name] + (1.0 - d) * p.numpy()
    for name in reference:
        assert ema.shadow[name].dtype == paddle.float64
        np.testing.assert_allclose(ema.shadow[name].numpy(), reference[name], rtol=1e-13, atol=1e-15)


def test_warmup_decay_schedule_and_default_off():
    model = _Mlp()
    plain = ExponentialMovingAverage(model, decay=0.95)
    warm = ExponentialMovingAverage(model, decay=0.95, warmup=True)
    assert plain.warmup is False
    plain.register()
    warm.register()
    for n in range(200):
        assert plain.current_decay() == 0.95
        assert math.isclose(warm.current_decay(), min(0.95, (1 + n) / (10 + n)), rel_tol=0, abs_tol=1e-15)
        plain.update()
        warm.update()
    assert warm.current_decay() == 0.95  # (1 + 200) / 210 > 0.95


def test_decay_zero_copies_the_parameters():
    model = _Mlp()
    rng = np.random.RandomState(3)
    copier = ExponentialMovingAverage(model, decay=0.0)
    copier.register()
    for _ in range(3):
        _randomize(model, rng)
        copier.update()
    for name, p in _trainable(model).items():
        assert np.array_equal(copier.shadow[name].numpy(), p.numpy())


def test_decay_one_is_refused_as_an_average_that_never_moves():
    """docs/ema.rst: decay lies in [0, 1); 1 would keep the registered weights for ever."""
    with pytest.raises(ValueError, match=r"`decay` must be in \[0, 1\), got 1\.0 \(1 would keep the registered"):
        ExponentialMovingAverage(_Mlp(), decay=1.0)


def _timm_decay(decay: float, n: int, power: float, gamma: float) -> float:
    """timm's ModelEmaV3 warm-up, written out: min(decay, 1 - (1 + n / gamma) ** -power)."""
    return min(decay, 1.0 - (1.0 + n / gamma) ** -power)


@pytest.mark.parametrize("power, gamma", [(2.0 / 3.0, 1.0), (0.75, 1.0), (0.75, 4.0)])
def test_timm_warmup_matches_float64_numpy_over_adamw_steps(power, gamma):
    """docs/ema.rst "Warm-up of the decay": update n + 1 uses min(d, 1 - (1 + n / gamma) ** -p)."""
    model = _tiny_bert()
    optimizer = paddle.optimizer.AdamW(learning_rate=0.05, parameters=model.parameters())
    ema = ExponentialMovingAverage(model, 0.99, warmup=True, warmup_style="timm", warmup_power=power,
                                   warmup_gamma=gamma)
    ema.register()
    reference = {n: p.numpy().astype(np.float64) for n, p in _trainable(model).items()}
    decays = []
    for n in range(12):
        _train_step(model, optimizer, n)
        decays.append(ema.current_decay())
        ema.update()
        d = _timm_decay(0.99, n, power, gamma)
        for name, p in _trainable(model).items():
            reference[name] = d * reference[name] + (1.0 - d) * p.numpy().astype(np.float64)
    assert decays == pytest.approx([_timm_decay(0.99, n, power, gamma) for n in range(12)], rel=0, abs=1e-15)
    assert decays[0] == 0.0  # the first update copies the weights
    for name, shadow in ema.shadow.items():
        np.testing.assert_allclose(shadow.numpy(), reference[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_timm_warmup_reaches_the_configured_decay():
    ema = ExponentialMovingAverage(_Mlp(), 0.9, warmup=True, warmup_style="timm")
    ema.register()
    ema.num_updates = 30  # 1 - 31 ** (-2/3) = 0.898...: still warming up
    assert ema.current_decay() == pytest.approx(1.0 - 31.0 ** (-2.0 / 3.0), abs=1e-15) and ema.current_decay() < 0.9
    ema.num_updates = 32  # 1 - 33 ** (-2/3) = 0.9031... > 0.9
    assert ema.current_decay() == 0.9


def test_only_trainable_parameters_are_averaged():
    model = _Mlp()
    ema = ExponentialMovingAverage(model)
    ema.register()
    assert set(ema.shadow) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    model.frozen_scale.set_value(paddle.full([3], 5.0))
    ema.apply_shadow()
    np.testing.assert_array_equal(model.frozen_scale.numpy(), np.full([3], 5.0, np.float32))
    ema.restore()


def test_update_is_in_place_without_new_tensors_or_autograd():
    model = _tiny_bert()
    optimizer = paddle.optimizer.AdamW(learning_rate=0.05, parameters=model.parameters())
    ema = ExponentialMovingAverage(model, decay=0.9)
    ema.register()
    objects = {name: id(t) for name, t in ema.shadow.items()}
    pointers = {name: t.data_ptr() for name, t in ema.shadow.items()}
    before = {name: t.numpy().copy() for name, t in ema.shadow.items()}
    for n in range(5):
        _train_step(model, optimizer, n)
        ema.update()
        assert {name: id(t) for name, t in ema.shadow.items()} == objects
        assert {name: t.data_ptr() for name, t in ema.shadow.items()} == pointers
        assert all(t.stop_gradient for t in ema.shadow.values())
    changed = [name for name, t in ema.shadow.items() if not np.array_equal(t.numpy(), before[name])]
    assert len(changed) == len(before)


# ---------------------------------------------------------------- the swap
def test_apply_shadow_changes_output_and_restore_puts_back_exact_bits():
    model = _Mlp()
    rng = np.random.RandomState(11)
    ema = ExponentialMovingAverage(model, decay=0.5)
    ema.register()
    for _ in range(5):
        _randomize(model, rng)
        ema.update()
    x = paddle.to_tensor(rng.standard_normal((5, 4)).astype(np.float32))
    live = {n: p.numpy().copy() for n, p in _trainable(model).items()}
    pointers = {n: p.data_ptr() for n, p in _trainable(model).items()}
    params = dict(_trainable(model))
    live_output = model(x).numpy()

    ema.apply_shadow()
    s = {n: ema.shadow[n].numpy() for n in ema.shadow}
    for name, p in _trainable(model).items():
        assert p is params[name] and p.data_ptr() == pointers[name]
        assert np.array_equal(p.numpy(), s[name])
    hidden = np.tanh(x.numpy().astype(np.float64) @ s["fc1.weight"] + s["fc1.bias"])
    expected = (hidden @ s["fc2.weight"] + s["fc2.bias"]) * 2.0
    averaged_output = model(x).numpy()
    np.testing.assert_allclose(averaged_output, expected, rtol=1e-5, atol=1e-6)
    assert np.abs(averaged_output - live_output).max() > 1e-2

    ema.restore()
    assert ema.backup == {}
    for name, p in _trainable(model).items():
        assert p is params[name] and p.data_ptr() == pointers[name]
        assert np.array_equal(p.numpy(), live[name])
    assert np.array_equal(model(x).numpy(), live_output)


def test_training_after_restore_matches_training_without_swaps():
    swapped, plain = _tiny_bert(), _tiny_bert()
    plain.set_state_dict(swapped.state_dict())
    opt_swapped = paddle.optimizer.AdamW(learning_rate=0.05, parameters=swapped.parameters())
    opt_plain = paddle.optimizer.AdamW(learning_rate=0.05, parameters=plain.parameters())
    ema = ExponentialMovingAverage(swapped, decay=0.7)
    ema.register()
    for n in range(6):
        _train_step(swapped, opt_swapped, n)
        _train_step(plain, opt_plain, n)
        ema.update()
        if n % 2 == 1:
            with ema.average_parameters():
                swapped(_batch(99)[0])
    for name, p in plain.state_dict().items():
        assert np.array_equal(swapped.state_dict()[name].numpy(), p.numpy()), name
    assert not np.array_equal(ema.shadow["classifier.weight"].numpy(), swapped.classifier.weight.numpy())


def test_average_parameters_restores_when_the_body_raises():
    model = _Mlp()
    ema = ExponentialMovingAverage(model, decay=0.5)
    ema.register()
    _randomize(model, np.random.RandomState(5))
    ema.update()
    live = {n: p.numpy().copy() for n, p in _trainable(model).items()}
    with pytest.raises(ZeroDivisionError):
        with ema.average_parameters():
            assert not np.array_equal(model.fc1.weight.numpy(), live["fc1.weight"])
            1 / 0
    assert not ema.applied
    for name, p in _trainable(model).items():
        assert np.array_equal(p.numpy(), live[name])


# ---------------------------------------------------------------- low precision
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_parameters_keep_float32_shadows(dtype):
    model = _Mlp(dtype=dtype)
    rng = np.random.RandomState(13)
    _randomize(model, rng)
    ema = ExponentialMovingAverage(model, decay=0.9, warmup=True)
    ema.register()
    reference = {n: _as_f64(p) for n, p in _trainable(model).items()}
    pointers = {n: t.data_ptr() for n, t in ema.shadow.items()}
    for n in range(6):
        _randomize(model, rng)
        ema.update()
        d = _expected_decay(0.9, True, n)
        for name, p in _trainable(model).items():
            reference[name] = d * reference[name] + (1.0 - d) * _as_f64(p)
    for name, p in _trainable(model).items():
        assert p.dtype == getattr(paddle, dtype)
        assert ema.shadow[name].dtype == paddle.float32
        assert ema.shadow[name].data_ptr() == pointers[name]
        np.testing.assert_allclose(ema.shadow[name].numpy(), reference[name], rtol=2e-6, atol=1e-7)

    live = {n: _as_f64(p) for n, p in _trainable(model).items()}
    ema.apply_shadow()
    for name, p in _trainable(model).items():
        assert p.dtype == getattr(paddle, dtype)
        tolerance = 2.0 ** -8 if dtype == "bfloat16" else 2.0 ** -11
        np.testing.assert_allclose(_as_f64(p), reference[name], rtol=tolerance, atol=1e-3)
    ema.restore()
    for name, p in _trainable(model).items():
        # fp16/bf16 -> fp64 is exact and one-to-one, so equal values are equal bits
        assert np.array_equal(_as_f64(p), live[name])


# ---------------------------------------------------------------- checkpoints
@pytest.mark.parametrize("style", ["tensorflow", "timm"])
def test_checkpoint_round_trip_resumes_like_never_stopping(tmp_path, style):
    """docs/ema.rst "Checkpoints": the state_dict carries the warm-up's rule and step (num_updates)."""
    model = _tiny_bert()
    optimizer = paddle.optimizer.AdamW(learning_rate=0.05, parameters=model.parameters())
    ema = ExponentialMovingAverage(model, decay=0.8, warmup=True, warmup_style=style, warmup_power=0.75)
    ema.register()
    for n in range(4):
        _train_step(model, optimizer, n)
        ema.update()
    paddle.save(model.state_dict(), str(tmp_path / "model.pdparams"))
    paddle.save(ema.state_dict(), str(tmp_path / "ema.pdparams"))

    resumed = _tiny_bert()
    resumed.set_state_dict(paddle.load(str(tmp_path / "model.pdparams")))
    resumed_ema = ExponentialMovingAverage(resumed, decay=0.3)  # settings come from the checkpoint
    resumed_ema.set_state_dict(paddle.load(str(tmp_path / "ema.pdparams")))
    assert (resumed_ema.decay, resumed_ema.warmup, resumed_ema.num_updates) == (0.8, True, 4)
    assert (resumed_ema.warmup_style, resumed_ema.warmup_power) == (style, 0.75)
    for name, t in ema.shadow.items():
        assert np.array_equal(resumed_ema.shadow[name].numpy(), t.numpy())

    for n in range(4, 8):  # the resumed model follows the same weights as the one that never stopped
        _train_step(model, optimizer, n)
        ema.update()
        resumed.set_state_dict(model.state_dict())
        resumed_ema.update()
    for name, t in ema.shadow.items():
        assert np.array_equal(resumed_ema.shadow[name].numpy(), t.numpy()), name
    assert not np.array_equal(ema.shadow["classifier.weight"].numpy(), model.classifier.weight.numpy())


def test_set_state_dict_keeps_the_registered_shadow_tensors():
    model = _Mlp()
    ema = ExponentialMovingAverage(model, decay=0.5)
    ema.register()
    pointers = {n: t.data_ptr() for n, t in ema.shadow.items()}
    state = {
        "decay": 0.25,
        "warmup": False,
        "num_updates": 3,
        "shadow": {n: np.full(p.shape, 1.5, np.float32) for n, p in _trainable(model).items()},
    }
    ema.set_state_dict(state)
    for name, t in ema.shadow.items():
        assert t.data_ptr() == pointers[name]
        assert np.array_equal(t.numpy(), np.full(t.shape, 1.5, np.float32))
    assert (ema.decay, ema.num_updates) == (0.25, 3)


def test_set_state_dict_rejects_mismatches_and_changes_nothing():
    model = _Mlp()
    ema = ExponentialMovingAverage(model, decay=0.5)
    ema.register()
    ema.update()
    good = {key: value for key, value in ema.state_dict().items()}
    good["shadow"] = {n: t.numpy().copy() for n, t in ema.shadow.items()}
    before = {n: t.numpy().copy() for n, t in ema.shadow.items()}

    renamed = dict(good, shadow={("encoder." + n if n == "fc1.weight" else n): v for n, v in good["shadow"].items()})
    with pytest.raises(KeyError, match=r"missing \['fc1.weight'\].*unexpected \['encoder.fc1.weight'\]"):
        ema.set_state_dict(dict(renamed, num_updates=9))
    reshaped = dict(good, shadow=dict(good["shadow"], **{"fc2.bias": np.zeros([4], np.float32)}))
    with pytest.raises(ValueError, match=r"fc2.bias.*\[4\].*\[3\]"):
        ema.set_state_dict(dict(reshaped, num_updates=9))
    with pytest.raises(KeyError, match="num_updates"):
        ema.set_state_dict({k: v for k, v in good.items() if k != "num_updates"})
    with pytest.raises(ValueError, match="decay"):
        ema.set_state_dict(dict(good, decay=1.5, num_updates=9))
    with pytest.raises(TypeError, match="state_dict"):
        ema.set_state_dict([("shadow", {})])
    with pytest.raises(TypeError, match="fc1.bias"):
        ema.set_state_dict(dict(good, shadow=dict(good["shadow"], **{"fc1.bias": [0.0] * 6})))
    with pytest.raises(ValueError, match="num_updates"):
        ema.set_state_dict(dict(good, num_updates=-1))
    with pytest.raises(TypeError, match="warmup"):
        ema.set_state_dict(dict(good, warmup="yes", num_updates=9))
    # A shadow that cannot be a real tensor, listed last: the ones before it must not be written either.
    for bad in (np.full([3], "x"), paddle.to_tensor(np.ones([3], np.complex64))):
        last_bad = {name: np.full_like(value, 7.0) for name, value in good["shadow"].items() if name != "fc2.bias"}
        last_bad["fc2.bias"] = bad
        assert list(last_bad)[-1] == "fc2.bias"
        with pytest.raises(TypeError, match=r"fc2.bias.*real numbers"):
            ema.set_state_dict(dict(good, shadow=last_bad, num_updates=9))

    assert (ema.decay, ema.warmup, ema.num_updates) == (0.5, False, 1)
    for name, t in ema.shadow.items():
        assert np.array_equal(t.numpy(), before[name])

    fresh = ExponentialMovingAverage(model)
    with pytest.raises(TypeError, match="fc2.bias"):
        fresh.set_state_dict(dict(good, shadow=last_bad))
    assert not fresh.registered and fresh.num_updates == 0


def test_a_state_dict_without_the_warmup_rule_has_tensorflows_warmup():
    """A checkpoint written before warmup_style existed: {"decay", "warmup", "num_updates", "shadow"}."""
    model = _Mlp()
    ema = ExponentialMovingAverage(model, decay=0.9, warmup=True, warmup_style="timm")
    ema.register()
    state = {key: value for key, value in ema.state_dict().items() if not key.startswith("warmup_")}
    state["num_updates"] = 5
    ema.set_state_dict(state)
    assert (ema.warmup, ema.warmup_style, ema.num_updates) == (True, "tensorflow", 5)
    assert ema.current_decay() == pytest.approx(min(0.9, 6 / 15), abs=1e-15)


@pytest.mark.parametrize("settings, error, match", [
    ({"warmup_style": "torch"}, ValueError, "warmup_style"),
    ({"warmup_power": 0.0}, ValueError, "warmup_power"),
    ({"warmup_power": float("nan")}, ValueError, "warmup_power"),
    ({"warmup_gamma": -1.0}, ValueError, "warmup_gamma"),
    ({"warmup_gamma": "1"}, TypeError, "warmup_gamma"),
])
def test_bad_warmup_settings_are_refused_by_name_in_the_constructor_and_the_state_dict(settings, error, match):
    with pytest.raises(error, match=match):
        ExponentialMovingAverage(_Mlp(), 0.9, warmup=True, **settings)
    ema = ExponentialMovingAverage(_Mlp(), 0.9)
    ema.register()
    with pytest.raises(error, match=match):
        ema.set_state_dict({**ema.state_dict(), **settings, "num_updates": 3})
    assert (ema.warmup_style, ema.num_updates) == ("tensorflow", 0)  # nothing half-applied


def test_set_state_dict_registers_a_fresh_ema():
    model = _Mlp()
    ema = ExponentialMovingAverage(model, decay=0.5)
    ema.register()
    _randomize(model, np.random.RandomState(1))
    ema.update()
    fresh = ExponentialMovingAverage(model)
    fresh.set_state_dict(ema.state_dict())
    assert fresh.registered and fresh.num_updates == 1
    for name, t in ema.shadow.items():
        assert np.array_equal(fresh.shadow[name].numpy(), t.numpy())
        assert fresh.shadow[name].data_ptr() != t.data_ptr()


# ---------------------------------------------------------------- misuse
@pytest.mark.parametrize("decay", [-0.1, 1.5, float("nan"), float("inf")])
def test_decay_out_of_range_raises_value_error(decay):
    with pytest.raises(ValueError, match="decay"):
        ExponentialMovingAverage(_Mlp(), decay)


@pytest.mark.parametrize("decay", ["0.9", None, True, paddle.to_tensor(0.9)])
def test_decay_of_wrong_type_raises_type_error(decay):
    with pytest.raises(TypeError, match="decay"):
        ExponentialMovingAverage(_Mlp(), decay)


def test_constructor_signature_is_specs():
    parameters = inspect.signature(ExponentialMovingAverage).parameters
    assert [(p.name, p.default) for p in parameters.values()][:2] == [("model", inspect.Parameter.empty),
                                                                        ("decay", 0.999)]
    assert parameters["warmup"].kind is inspect.Parameter.KEYWORD_ONLY and parameters["warmup"].default is False


def test_other_constructor_arguments_are_checked():
    with pytest.raises(TypeError, match="model"):
        ExponentialMovingAverage({"weight": paddle.ones([2])})
    with pytest.raises(TypeError, match="warmup"):
        ExponentialMovingAverage(_Mlp(), 0.9, warmup=1)
    with pytest.raises(TypeError):
        ExponentialMovingAverage(_Mlp(), 0.9, True)  # extras are keyword-only
    ema = ExponentialMovingAverage(_Mlp(), np.float32(0.5))
    assert ema.decay == 0.5
    with pytest.raises(ValueError, match="decay"):
        ema.decay = 2
    assert ema.decay == 0.5


def test_misuse_raises_clear_errors():
    model = _Mlp()
    ema = ExponentialMovingAverage(model)
    with pytest.raises(RuntimeError, match=r"update\(\).*register\(\)"):
        ema.update()
    with pytest.raises(RuntimeError, match=r"apply_shadow\(\).*register\(\)"):
        ema.apply_shadow()
    with pytest.raises(RuntimeError, match=r"state_dict\(\).*register\(\)"):
        ema.state_dict()
    ema.register()
    with pytest.raises(RuntimeError, match=r"restore\(\) called without apply_shadow\(\)"):
        ema.restore()
    _randomize(model, np.random.RandomState(2))
    live = {n: p.numpy().copy() for n, p in _trainable(model).items()}
    ema.apply_shadow()
    with pytest.raises(RuntimeError, match=r"apply_shadow\(\) called twice"):
        ema.apply_shadow()
    with pytest.raises(RuntimeError, match=r"update\(\).*restore\(\)"):
        ema.update()
    with pytest.raises(RuntimeError, match=r"register\(\).*restore\(\)"):
        ema.register()
    ema.restore()  # the live values survived the refused calls
    for name, p in _trainable(model).items():
        assert np.array_equal(p.numpy(), live[name])
    with pytest.raises(RuntimeError, match="restore"):
        ema.restore()


def test_model_without_trainable_parameters_is_refused():
    frozen = paddle.nn.Linear(2, 2)
    for p in frozen.parameters():
        p.stop_gradient = True
    with pytest.raises(ValueError, match="stop_gradient"):
        ExponentialMovingAverage(frozen).register()


def test_register_again_restarts_the_average():
    model = _Mlp()
    rng = np.random.RandomState(4)
    ema = ExponentialMovingAverage(model, decay=0.5)
    ema.register()
    _randomize(model, rng)
    ema.update()
    _randomize(model, rng)
    ema.register()
    assert ema.num_updates == 0
    for name, p in _trainable(model).items():
        assert np.array_equal(ema.shadow[name].numpy(), p.numpy())


# ---------------------------------------------------------------- wrappers
def test_data_parallel_model_uses_inner_names_and_swaps_inner_parameters():
    inner = _Mlp()
    wrapped = paddle.DataParallel(inner)
    rng = np.random.RandomState(8)
    ema = ExponentialMovingAverage(wrapped, decay=0.6)
    ema.register()
    assert set(ema.shadow) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    reference = {n: p.numpy().astype(np.float64) for n, p in _trainable(inner).items()}
    for _ in range(5):
        _randomize(inner, rng)
        ema.update()
        for name, p in _trainable(inner).items():
            reference[name] = 0.6 * reference[name] + 0.4 * p.numpy()
    for name in reference:
        np.testing.assert_allclose(ema.shadow[name].numpy(), reference[name], rtol=2e-6, atol=1e-7)
    x = paddle.ones([2, 4])
    live_output = wrapped(x).numpy()
    with ema.average_parameters():
        assert np.array_equal(inner.fc1.weight.numpy(), ema.shadow["fc1.weight"].numpy())
        assert not np.allclose(wrapped(x).numpy(), live_output)
    assert np.array_equal(wrapped(x).numpy(), live_output)

    unwrapped = ExponentialMovingAverage(inner)
    unwrapped.set_state_dict(ema.state_dict())  # checkpoints move between wrapped and plain
    for name, t in ema.shadow.items():
        assert np.array_equal(unwrapped.shadow[name].numpy(), t.numpy())
