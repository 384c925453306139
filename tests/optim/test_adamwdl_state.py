"""AdamWDL state: checkpoints, AMP overflow steps, attribute restoration,
float16/bfloat16 master weights and sparse gradients, against the float64
NumPy reference."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import paddle
import pytest
from paddle import nn

from paddle_llrd import AdamWDL
from paddle_llrd.optim import per_parameter
from reference_adamw import ReferenceAdamW
from adamwdl_runs import (
    ATOL,
    RTOL,
    batches,
    bert_like,
    fresh_names,
    gradients_of,
    make_adamwdl,
    name_dict_of,
    ratio_fn,
    tiny_bert,
    train_and_compare,
    weights_of,
)


def _train(model: nn.Layer, optimizer: paddle.optimizer.Optimizer, data: list, scheduler=None) -> None:
    for ids, labels in data:
        nn.functional.cross_entropy(model(ids), labels).backward()
        optimizer.step()
        optimizer.clear_grad()
        if scheduler is not None:
            scheduler.step()


def _optimizer_state(optimizer: paddle.optimizer.Optimizer) -> dict[str, np.ndarray]:
    return {
        key: value.astype("float32").numpy().copy()
        for key, value in optimizer.state_dict().items()
        if isinstance(value, paddle.Tensor)
    }


# ------------------------------------------------------------------ resume
def test_save_load_resume_equals_uninterrupted(tmp_path):
    data = batches(6)

    def build():
        model = tiny_bert()
        scheduler = paddle.optimizer.lr.StepDecay(0.02, step_size=2, gamma=0.5)
        optimizer = make_adamwdl(model, learning_rate=scheduler, weight_decay=0.2, layerwise_decay=0.6)
        return model, optimizer, scheduler

    with fresh_names():
        model, optimizer, scheduler = build()
        _train(model, optimizer, data, scheduler)
        uninterrupted = weights_of(model)

    with fresh_names():
        model, optimizer, scheduler = build()
        _train(model, optimizer, data[:3], scheduler)
        paddle.save(model.state_dict(), str(tmp_path / "model.pdparams"))
        paddle.save(optimizer.state_dict(), str(tmp_path / "opt.pdopt"))

    with fresh_names():
        paddle.seed(99)  # a different initialisation, overwritten by the checkpoint
        model, optimizer, scheduler = build()
        model.set_state_dict(paddle.load(str(tmp_path / "model.pdparams")))
        optimizer.set_state_dict(paddle.load(str(tmp_path / "opt.pdopt")))
        assert scheduler.last_epoch == 3
        _train(model, optimizer, data[3:], scheduler)
        resumed = weights_of(model)

    for name in uninterrupted:
        np.testing.assert_array_equal(resumed[name], uninterrupted[name], err_msg=name)


def test_state_dict_keys_equal_paddle_adamw():
    def keys(make):
        with fresh_names():
            model = tiny_bert()
            optimizer = make(model)
            _train(model, optimizer, batches(1))
            return sorted(optimizer.state_dict())

    adamw_keys = keys(lambda m: paddle.optimizer.AdamW(0.01, parameters=m.parameters()))
    adamwdl_keys = keys(lambda m: make_adamwdl(m, learning_rate=0.01, layerwise_decay=0.5))
    assert sorted(adamw_keys + ["structured_names"]) == adamwdl_keys  # the names AdamW ignores
    assert any(k.endswith("moment1_0") for k in adamw_keys) and any(k.endswith("beta2_pow_acc_0") for k in adamw_keys)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_master_weight_state_dict_keys_equal_paddle_adamw(dtype):
    """Paddle's AdamW cannot step float16 on CPU, so its accumulators are created directly."""

    def keys(optimizer_class, **kwargs):
        with fresh_names():
            model = bert_like()
            model.to(dtype=dtype)
            optimizer = optimizer_class(learning_rate=0.01, parameters=model.parameters(), multi_precision=True, **kwargs)
            block = paddle.static.default_main_program().global_block()
            optimizer._create_accumulators(block, model.parameters())
            state = optimizer.state_dict()
            return sorted(key for key in state if key != "structured_names"), sorted(state["master_weights"])

    adamw_keys = keys(paddle.optimizer.AdamW)
    adamwdl_keys = keys(AdamWDL, set_param_lr_fun=None)
    assert adamw_keys == adamwdl_keys and adamw_keys[1]


def _checkpoint(model: nn.Layer, optimizer: paddle.optimizer.Optimizer) -> tuple[dict, dict]:
    return (
        {k: v.numpy().copy() for k, v in model.state_dict().items()},
        {k: (v.numpy().copy() if isinstance(v, paddle.Tensor) else v) for k, v in optimizer.state_dict().items()},
    )


def test_checkpoints_move_between_adamw_and_adamwdl():
    """Each half runs in a fresh process-like name scope, as when resuming from disk."""
    data = batches(6)

    # AdamW for 3 steps, then AdamWDL(set_param_lr_fun=None) for 3: exactly AdamW for 6
    with fresh_names():
        model = tiny_bert()
        optimizer = paddle.optimizer.AdamW(0.01, parameters=model.parameters(), weight_decay=0.2)
        _train(model, optimizer, data)
        adamw_only = weights_of(model)
    with fresh_names():
        model = tiny_bert()
        optimizer = paddle.optimizer.AdamW(0.01, parameters=model.parameters(), weight_decay=0.2)
        _train(model, optimizer, data[:3])
        model_state, optimizer_state = _checkpoint(model, optimizer)
    with fresh_names():
        model = tiny_bert(seed=99)
        model.set_state_dict(model_state)
        optimizer = make_adamwdl(model, learning_rate=0.01, weight_decay=0.2, set_param_lr_fun=None)
        optimizer.set_state_dict(optimizer_state)
        _train(model, optimizer, data[3:])
    for name, value in weights_of(model).items():
        np.testing.assert_array_equal(value, adamw_only[name], err_msg=name)

    # AdamWDL (layer ratios) for 3 steps, then AdamW for 3: the moments carry over
    with fresh_names():
        model = tiny_bert()
        reference = ReferenceAdamW(weights_of(model), weight_decay=0.2)
        optimizer = make_adamwdl(model, learning_rate=0.01, weight_decay=0.2, layerwise_decay=0.5)
        train_and_compare(
            model, optimizer, reference, lr_at=lambda s: 0.01, data=data[:3], reference_options={"ratio": ratio_fn(0.5)}
        )
        model_state, optimizer_state = _checkpoint(model, optimizer)
    with fresh_names():
        model = tiny_bert(seed=99)
        model.set_state_dict(model_state)
        optimizer = paddle.optimizer.AdamW(0.01, parameters=model.parameters(), weight_decay=0.2)
        optimizer.set_state_dict(optimizer_state)
        train_and_compare(model, optimizer, reference, lr_at=lambda s: 0.01, data=data[3:], reference_options={})


# ---------------------------------------------------------------- overflow
@pytest.mark.parametrize("general", [False, True], ids=["fused", "general"])
def test_overflow_step_changes_nothing(general):
    model = tiny_bert()
    reference = ReferenceAdamW(weights_of(model), weight_decay=0.3)
    optimizer = make_adamwdl(model, general=general, learning_rate=0.01, weight_decay=0.3, layerwise_decay=0.5)
    options = {"ratio": ratio_fn(0.5)}
    data = batches(5)
    train_and_compare(model, optimizer, reference, lr_at=lambda s: 0.01, data=data[:2], reference_options=options)

    weights, state = weights_of(model), _optimizer_state(optimizer)
    nn.functional.cross_entropy(model(data[2][0]), data[2][1]).backward()
    optimizer._set_auxiliary_var("found_inf", paddle.to_tensor(True))
    optimizer.step()
    optimizer.clear_grad()
    for name, value in weights_of(model).items():
        np.testing.assert_array_equal(value, weights[name], err_msg=name)
    for key, value in _optimizer_state(optimizer).items():
        np.testing.assert_array_equal(value, state[key], err_msg=key)

    optimizer._set_auxiliary_var("found_inf", paddle.to_tensor(False))
    train_and_compare(model, optimizer, reference, lr_at=lambda s: 0.01, data=data[3:], reference_options=options)


# ----------------------------------------------------------- restoration
def _lr_attributes(model: nn.Layer) -> dict[str, Any]:
    return {n: p.optimize_attr["learning_rate"] for n, p in model.named_parameters()}


@pytest.mark.parametrize("grouped", [False, True], ids=["one_pass", "groups"])
def test_ratio_function_failing_mid_step_changes_nothing(grouped):
    """The function is asked about every parameter before any is updated: when it
    raises for a late parameter (in the last group), no weight, moment or lr
    attribute has changed; the next step trains on as if the failed one never was."""
    model = bert_like(layer_lrs={0: 0.5, 1: 2.0})
    names = name_dict_of(model)
    fail_for = "classifier.bias"  # the last parameter
    failing = []

    def edits_then_maybe_fails(decay_rate, name_dict, n_layers, param):
        param.optimize_attr["learning_rate"] *= 0.25  # edits first, like a None-returning function
        if failing and name_dict[param.name] == fail_for:
            raise RuntimeError("boom")

    if grouped:
        params = list(model.named_parameters())
        parameters = [
            {"params": [p for n, p in params if "encoder" in n], "weight_decay": 0.3},
            {"params": [p for n, p in params if "encoder" not in n]},
        ]
    else:
        parameters = model.parameters()
    optimizer = make_adamwdl(
        model, parameters=parameters, learning_rate=0.01, weight_decay=0.1, set_param_lr_fun=edits_then_maybe_fails
    )
    reference = ReferenceAdamW(weights_of(model), weight_decay=0.1)
    options = {
        "ratio": 0.25,
        # (Paddle gives a grouped parameter its group's lr factor, 1.0 here, over its ParamAttr's)
        "lr_scale": lambda n: 1.0 if grouped or ".layers." not in n else {0: 0.5, 1: 2.0}[int(n.split(".")[3])],
        "weight_decay": lambda n: 0.3 if grouped and "encoder" in n else 0.1,
    }
    data = batches(3)
    train_and_compare(model, optimizer, reference, lr_at=lambda s: 0.01, data=data[:1], reference_options=options)

    attributes, weights, state = _lr_attributes(model), weights_of(model), _optimizer_state(optimizer)
    nn.functional.cross_entropy(model(data[1][0]), data[1][1]).backward()
    failing.append(True)
    with pytest.raises(RuntimeError, match="boom"):
        optimizer.step()
    failing.clear()
    optimizer.clear_grad()
    assert _lr_attributes(model) == attributes
    for name, value in weights_of(model).items():
        np.testing.assert_array_equal(value, weights[name], err_msg=name)
    for key, value in _optimizer_state(optimizer).items():
        np.testing.assert_array_equal(value, state[key], err_msg=key)
    assert fail_for in names.values()

    train_and_compare(model, optimizer, reference, lr_at=lambda s: 0.01, data=data[2:], reference_options=options)


@pytest.mark.parametrize(
    "returned, error, match",
    [
        (-0.5, ValueError, "-0.5"),
        (math.nan, ValueError, "nan"),
        (math.inf, ValueError, "inf"),
        ("0.5", TypeError, "str"),
    ],
)
def test_unusable_ratio_is_refused_before_any_update(returned, error, match):
    """A ratio that is negative, not finite or not a number: an error naming the
    function and the parameter, and no weight changed."""
    model = bert_like()
    names = name_dict_of(model)
    bad_for = "bert.encoder.layers.1.weight"

    def ratio(decay_rate, name_dict, n_layers, param):
        return returned if name_dict[param.name] == bad_for else 1.0

    optimizer = make_adamwdl(model, learning_rate=0.01, set_param_lr_fun=ratio)
    weights = weights_of(model)
    ids, labels = batches(1)[0]
    nn.functional.cross_entropy(model(ids), labels).backward()
    with pytest.raises(error, match=match) as info:
        optimizer.step()
    bad_param = next(p for p in model.parameters() if names[p.name] == bad_for)
    assert "set_param_lr_fun" in str(info.value) and bad_param.name in str(info.value)
    for name, value in weights_of(model).items():
        np.testing.assert_array_equal(value, weights[name], err_msg=name)


@pytest.mark.parametrize("edited, error", [(math.nan, ValueError), (None, TypeError)])
def test_unusable_edited_lr_factor_is_refused(edited, error):
    model = bert_like()

    def sets_attribute(decay_rate, name_dict, n_layers, param):
        param.optimize_attr["learning_rate"] = edited

    optimizer = make_adamwdl(model, learning_rate=0.01, set_param_lr_fun=sets_attribute)
    ids, labels = batches(1)[0]
    nn.functional.cross_entropy(model(ids), labels).backward()
    with pytest.raises(error, match="optimize_attr"):
        optimizer.step()
    assert all(p.optimize_attr["learning_rate"] == 1.0 for p in model.parameters())


def test_cached_function_returning_none_is_a_type_error_at_construction():
    def declared_pure(decay_rate, name_dict, n_layers, param):
        param.optimize_attr["learning_rate"] *= decay_rate

    declared_pure.pure_in_name = True
    model = bert_like()
    with pytest.raises(TypeError, match="cached"):
        make_adamwdl(model, learning_rate=0.01, layerwise_decay=0.5, set_param_lr_fun=declared_pure)


def test_overflow_step_does_not_call_the_ratio_function():
    """Called once per update: a stateful function is not asked on a skipped step."""
    model = bert_like()
    calls: dict[str, int] = {}

    def shrinking(decay_rate, name_dict, n_layers, param):
        calls[param.name] = calls.get(param.name, 0) + 1
        return 1.0 / calls[param.name]

    optimizer = make_adamwdl(model, learning_rate=0.01, weight_decay=0.1, set_param_lr_fun=shrinking)
    reference = ReferenceAdamW(weights_of(model), weight_decay=0.1)
    data = batches(4)
    train_and_compare(model, optimizer, reference, lr_at=lambda s: 0.01, data=data[:2],
                      reference_options=lambda s: {"ratio": 1.0 / (s + 1)})
    nn.functional.cross_entropy(model(data[2][0]), data[2][1]).backward()
    optimizer._set_auxiliary_var("found_inf", paddle.to_tensor(True))
    optimizer.step()
    optimizer.clear_grad()
    assert set(calls.values()) == {2}
    optimizer._set_auxiliary_var("found_inf", paddle.to_tensor(False))
    train_and_compare(model, optimizer, reference, lr_at=lambda s: 0.01, data=data[3:],
                      reference_options={"ratio": 1.0 / 3})


def test_optimize_attr_restored_when_the_update_raises(monkeypatch):
    model = bert_like(layer_lrs={1: 2.0})
    attributes = _lr_attributes(model)
    optimizer = make_adamwdl(model, learning_rate=0.01, layerwise_decay=0.5, use_multi_tensor=False)  # its kernel is patched

    def broken_kernel(*args, **kwargs):
        raise RuntimeError("kernel failed")

    monkeypatch.setattr(per_parameter, "adamw_kernel", broken_kernel)
    ids, labels = batches(1)[0]
    nn.functional.cross_entropy(model(ids), labels).backward()
    with pytest.raises(RuntimeError, match="kernel failed"):
        optimizer.step()
    assert _lr_attributes(model) == attributes


def test_bad_ratio_type_raises_type_error_and_restores():
    model = bert_like(layer_lrs={1: 2.0})
    attributes = _lr_attributes(model)
    optimizer = make_adamwdl(model, learning_rate=0.01, layerwise_decay=0.5, set_param_lr_fun=lambda *a: "0.5")
    ids, labels = batches(1)[0]
    nn.functional.cross_entropy(model(ids), labels).backward()
    with pytest.raises(TypeError, match="set_param_lr_fun"):
        optimizer.step()
    assert _lr_attributes(model) == attributes


def test_missing_name_at_step_time_changes_no_parameter():
    """A parameter unfrozen after construction and missing from name_dict: KeyError before any update."""
    model = tiny_bert()
    frozen = model.classifier.weight
    frozen.stop_gradient = True
    names = {p.name: n for n, p in model.named_parameters() if p is not frozen}
    optimizer = make_adamwdl(model, learning_rate=0.01, layerwise_decay=0.5, name_dict=names)
    frozen.stop_gradient = False
    before = weights_of(model)
    ids, labels = batches(1)[0]
    nn.functional.cross_entropy(model(ids), labels).backward()
    with pytest.raises(KeyError, match=frozen.name):
        optimizer.step()
    for name, value in weights_of(model).items():
        np.testing.assert_array_equal(value, before[name], err_msg=name)


# ------------------------------------------------------ mixed precision
def _linear_loss_step(model: nn.Layer, optimizer: AdamWDL, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """loss = sum(p * G): the gradient of p is G cast to p's dtype. Returns those gradients."""
    terms = [
        (p.astype("float32") * paddle.to_tensor(rng.standard_normal(p.shape).astype("float32"))).sum()
        for p in model.parameters()
    ]
    paddle.add_n(terms).backward()
    grads, _ = gradients_of(model)
    optimizer.step()
    optimizer.clear_grad()
    return grads


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_multi_precision_resume_matches_reference_and_uninterrupted_run(dtype, tmp_path):
    """Saved after 2 steps, loaded into a fresh model and optimizer, 3 more: the
    float32 master weights are the float64 reference's (not re-cast from the
    float16/bfloat16 weights, which would lose their low bits) and every
    weight and master weight equals the uninterrupted run's."""
    steps, resume_at = 5, 2

    def build(seed: int = 7) -> tuple[nn.Layer, AdamWDL]:
        model = bert_like(seed)
        model.to(dtype=dtype)
        optimizer = make_adamwdl(
            model, learning_rate=0.01, weight_decay=0.3, layerwise_decay=0.5, multi_precision=True
        )
        return model, optimizer

    def masters(model: nn.Layer, optimizer: AdamWDL) -> dict[str, np.ndarray]:
        saved = optimizer.state_dict()["master_weights"]
        return {n: saved[p.name].numpy().astype(np.float64) for n, p in model.named_parameters()}

    with fresh_names():
        model, optimizer = build()
        reference = ReferenceAdamW(weights_of(model), weight_decay=0.3)  # the masters start as the casts
        rng = np.random.default_rng(0)
        for _ in range(steps):
            reference.step(_linear_loss_step(model, optimizer, rng), 0.01, ratio=ratio_fn(0.5))
        uninterrupted, uninterrupted_masters = weights_of(model), masters(model, optimizer)

    rng = np.random.default_rng(0)  # the same gradients again
    with fresh_names():
        model, optimizer = build()
        for _ in range(resume_at):
            _linear_loss_step(model, optimizer, rng)
        paddle.save(model.state_dict(), str(tmp_path / "model.pdparams"))
        paddle.save(optimizer.state_dict(), str(tmp_path / "opt.pdopt"))
    with fresh_names():
        model, optimizer = build(seed=99)  # a different initialisation, overwritten by the checkpoint
        model.set_state_dict(paddle.load(str(tmp_path / "model.pdparams")))
        optimizer.set_state_dict(paddle.load(str(tmp_path / "opt.pdopt")))
        for _ in range(steps - resume_at):
            _linear_loss_step(model, optimizer, rng)
        resumed, resumed_masters = weights_of(model), masters(model, optimizer)

    for name, master in resumed_masters.items():
        np.testing.assert_allclose(master, reference.params[name], rtol=RTOL, atol=ATOL, err_msg=name)
        np.testing.assert_array_equal(master, uninterrupted_masters[name], err_msg=name)
        np.testing.assert_array_equal(resumed[name], uninterrupted[name], err_msg=name)


@pytest.mark.parametrize("general", [False, True], ids=["fused", "general"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_multi_precision_updates_master_weight(dtype, general):
    model = bert_like()
    model.to(dtype=dtype)
    names = name_dict_of(model)
    optimizer = make_adamwdl(
        model, general=general, learning_rate=0.01, weight_decay=0.3, layerwise_decay=0.5, multi_precision=True
    )
    reference = ReferenceAdamW(weights_of(model), weight_decay=0.3)  # the masters start as the casts
    rng = np.random.default_rng(0)
    for step in range(5):
        grads = _linear_loss_step(model, optimizer, rng)
        reference.step(grads, 0.01, ratio=ratio_fn(0.5))
        for param in model.parameters():
            master = optimizer._master_weights[param.name]
            assert master.dtype == paddle.float32 and param.dtype == getattr(paddle, dtype)
            np.testing.assert_allclose(
                master.numpy(), reference.params[names[param.name]], rtol=RTOL, atol=ATOL, err_msg=f"{param.name} {step}"
            )
            np.testing.assert_array_equal(
                param.astype("float32").numpy(), master.astype(dtype).astype("float32").numpy()
            )
    assert "master_weights" in optimizer.state_dict()


# ------------------------------------------------------- sparse gradients
@pytest.mark.parametrize("general", [False, True], ids=["fused", "general"])
@pytest.mark.parametrize("lazy_mode", [True, False], ids=["lazy", "dense"])
def test_sparse_embedding_gradients(lazy_mode, general):
    model = bert_like(sparse=True)
    embedding = "bert.embeddings.word_embeddings.weight"
    reference = ReferenceAdamW(weights_of(model), weight_decay=0.3)
    optimizer = make_adamwdl(
        model, general=general, learning_rate=0.01, weight_decay=0.3, layerwise_decay=0.5, lazy_mode=lazy_mode
    )
    # step k looks up rows 4*(k % 3) .. 4*(k % 3) + 3 only; rows >= 12 never
    rng = np.random.default_rng(3)
    data = [
        (
            paddle.to_tensor(rng.integers(4 * (k % 3), 4 * (k % 3) + 4, (8, 6))),
            paddle.to_tensor(rng.integers(0, 2, (8,))),
        )
        for k in range(5)
    ]
    ids, labels = data[0]
    nn.functional.cross_entropy(model(ids), labels).backward()
    assert model.bert.embeddings.word_embeddings.weight._grad_ivar().is_selected_rows()
    optimizer.clear_grad()
    before = weights_of(model)[embedding]

    options = {"ratio": ratio_fn(0.5)}
    if not lazy_mode:  # every row takes an Adam step, with a zero gradient where absent
        options["rows"] = None
    history = train_and_compare(
        model, optimizer, reference, lr_at=lambda s: 0.01, data=data, reference_options=options
    )
    decay = 1 - 0.01 * 0.3  # the embeddings' base lr, not times their layer ratio
    # rows never looked up: only decayed (their moments stay 0 in either mode)
    np.testing.assert_allclose(history[-1][embedding][12:], before[12:] * decay**5, rtol=1e-6)
    # rows 0-3, absent at step 1: lazy mode only decays them, dense mode moves them on momentum
    only_decayed = np.allclose(history[1][embedding][:4], history[0][embedding][:4] * decay, rtol=1e-6)
    assert only_decayed == lazy_mode


@pytest.mark.parametrize("group_lazy", [True, False], ids=["group_lazy", "group_dense"])
def test_group_lazy_mode_overrides_the_optimizer_default(group_lazy):
    """The embeddings' group sets lazy_mode, the optimizer default is the other one."""
    model = bert_like(sparse=True)
    embedding = "bert.embeddings.word_embeddings.weight"
    params = list(model.named_parameters())
    optimizer = make_adamwdl(
        model,
        parameters=[
            {"params": [p for n, p in params if n == embedding], "lazy_mode": group_lazy},
            {"params": [p for n, p in params if n != embedding]},
        ],
        learning_rate=0.01,
        weight_decay=0.3,
        layerwise_decay=0.5,
        lazy_mode=not group_lazy,
    )
    reference = ReferenceAdamW(weights_of(model), weight_decay=0.3)
    rng = np.random.default_rng(4)
    # step k looks up rows 4*(k % 2) .. 4*(k % 2) + 3 only
    data = [
        (paddle.to_tensor(rng.integers(4 * (k % 2), 4 * (k % 2) + 4, (8, 6))), paddle.to_tensor(rng.integers(0, 2, (8,))))
        for k in range(4)
    ]
    options = {"ratio": ratio_fn(0.5)}
    if not group_lazy:  # every row of the embedding takes an Adam step
        options["rows"] = None
    history = train_and_compare(model, optimizer, reference, lr_at=lambda s: 0.01, data=data, reference_options=options)
    # rows 0-3 are absent at step 1: a lazy update only decays them
    only_decayed = np.allclose(history[1][embedding][:4], history[0][embedding][:4] * (1 - 0.01 * 0.3), rtol=1e-6)
    assert only_decayed == group_lazy


def test_structured_names_round_trip_through_paddle_save_and_adamw_loads_them(tmp_path):
    """The ``structured_names`` record survives ``paddle.save``/``paddle.load`` (None for a parameter
    outside ``name_dict``), and ``paddle.optimizer.AdamW`` loads the checkpoint, ignoring it, and
    continues from the saved moments: its 2 saved steps and 1 more equal AdamW over 3 steps."""
    data = batches(3)
    with fresh_names():
        model = tiny_bert()
        names = name_dict_of(model)
        del names[model.classifier.bias.name]
        optimizer = AdamWDL(0.01, parameters=model.parameters(), weight_decay=0.2, set_param_lr_fun=None,
                            name_dict=names)
        _train(model, optimizer, data[:2])
        paddle.save(model.state_dict(), str(tmp_path / "model.pdparams"))
        paddle.save(optimizer.state_dict(), str(tmp_path / "opt.pdopt"))
        expected_record = {p.name: names.get(p.name) for p in model.parameters()}
    loaded = paddle.load(str(tmp_path / "opt.pdopt"))
    assert loaded["structured_names"] == expected_record
    assert expected_record[model.classifier.bias.name] is None and sum(v is None for v in expected_record.values()) == 1

    with fresh_names():
        uninterrupted = tiny_bert()
        _train(uninterrupted, paddle.optimizer.AdamW(0.01, parameters=uninterrupted.parameters(), weight_decay=0.2),
               data)
    with fresh_names():
        model = tiny_bert(seed=99)
        model.set_state_dict(paddle.load(str(tmp_path / "model.pdparams")))
        plain = paddle.optimizer.AdamW(0.01, parameters=model.parameters(), weight_decay=0.2)
        plain.set_state_dict(loaded)
        _train(model, plain, data[2:])
    expected = weights_of(uninterrupted)
    for name, value in weights_of(model).items():
        np.testing.assert_allclose(value, expected[name], rtol=1e-6, atol=1e-7, err_msg=name)
