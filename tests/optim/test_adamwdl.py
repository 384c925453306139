"""AdamWDL numerics against the float64 NumPy reference (tests/helpers/reference_adamw.py).

Every test runs several optimizer steps on a small model whose parameter names
look like BERT's and compares every parameter after every step (the models
and the step-and-compare loop: adamwdl_runs.py).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import paddle
import pytest
from paddle import nn

from paddle_llrd import AdamWDL
from paddle_llrd.models.tiny_bert import TinyBertConfig, TinyBertForSequenceClassification
from reference_adamw import ReferenceAdamW, layer_ratio
from adamwdl_runs import (N_LAYERS, RTOL, batches, bert_like, decays_structured, gradients_of, make_adamwdl,
                          name_dict_of, no_bias_or_norm, ratio_fn, split_parameters, tiny_bert,
                          train_and_compare, weights_of)


# ----------------------------------------------------------------- the tests
@pytest.mark.parametrize("general", [False, True], ids=["fused", "general"])
def test_float_lr_layerwise_decay_matches_reference(general):
    model = tiny_bert()
    names = name_dict_of(model)
    reference = ReferenceAdamW(weights_of(model), weight_decay=0.3)
    optimizer = make_adamwdl(
        model,
        general=general,
        learning_rate=0.01,
        weight_decay=0.3,
        layerwise_decay=0.5,
        apply_decay_param_fun=no_bias_or_norm(names),
    )
    history = train_and_compare(
        model,
        optimizer,
        reference,
        lr_at=lambda step: 0.01,
        reference_options={"ratio": ratio_fn(0.5), "decay": decays_structured},
    )
    # the ratios matter: without them (plain AdamW) the weights are far off
    plain = ReferenceAdamW(weights_of(tiny_bert()), weight_decay=0.3)
    plain_model = tiny_bert()
    plain_opt = paddle.optimizer.AdamW(0.01, parameters=plain_model.parameters(), weight_decay=0.3)
    plain_history = train_and_compare(
        plain_model, plain_opt, plain, lr_at=lambda step: 0.01, reference_options={}
    )
    embedding = "bert.embeddings.word_embeddings.weight"
    assert not np.allclose(history[-1][embedding], plain_history[-1][embedding], rtol=1e-3, atol=1e-4)


def test_fused_and_general_paths_agree():
    # (not tiny_bert: its attention key bias has a zero gradient up to rounding
    # noise, which Adam's normalisation turns into lr-sized steps of any sign)
    results = []
    for general in (False, True):
        model = bert_like()
        optimizer = make_adamwdl(
            model, general=general, learning_rate=0.02, weight_decay=0.2, layerwise_decay=0.7
        )
        for ids, labels in batches(6):
            nn.functional.cross_entropy(model(ids), labels).backward()
            optimizer.step()
            optimizer.clear_grad()
        results.append(weights_of(model))
    for name in results[0]:
        np.testing.assert_allclose(results[0][name], results[1][name], rtol=1e-6, atol=1e-7, err_msg=name)


def test_zero_gradient_decays_once_with_base_lr():
    """lr 0.1, weight_decay 0.5, zero gradients: decayed weights * 0.95 per step, not 0.9025."""
    for general in (False, True):
        model = tiny_bert()
        names = name_dict_of(model)
        before = weights_of(model)
        optimizer = make_adamwdl(
            model,
            general=general,
            learning_rate=0.1,
            weight_decay=0.5,
            layerwise_decay=0.5,
            apply_decay_param_fun=no_bias_or_norm(names),
        )
        steps = 3
        for _ in range(steps):
            (model(batches(1)[0][0]) * 0.0).sum().backward()
            optimizer.step()
            optimizer.clear_grad()
        for name, value in weights_of(model).items():
            factor = 0.95**steps if decays_structured(name) else 1.0
            np.testing.assert_allclose(value, before[name] * factor, rtol=1e-6, atol=1e-7, err_msg=name)


def test_scheduler_learning_rate():
    def lr_at(step: int) -> float:
        return 0.02 / (1 + step)

    scheduler = paddle.optimizer.lr.LambdaDecay(learning_rate=0.02, lr_lambda=lambda epoch: 1.0 / (1 + epoch))
    model = tiny_bert()
    reference = ReferenceAdamW(weights_of(model), weight_decay=0.1)
    optimizer = make_adamwdl(model, learning_rate=scheduler, weight_decay=0.1, layerwise_decay=0.6)
    train_and_compare(
        model,
        optimizer,
        reference,
        lr_at=lr_at,
        scheduler=scheduler,
        reference_options={"ratio": ratio_fn(0.6)},
    )


def test_paddle_llrd_warmup_scheduler():
    total, warmup, peak = 6, 2, 0.03

    def lr_at(step: int) -> float:  # docs/schedules.rst: s/W during warmup, then (T-s)/(T-W)
        return peak * (step / warmup if step < warmup else (total - step) / (total - warmup))

    from paddle_llrd import LinearDecayWithWarmup

    scheduler = LinearDecayWithWarmup(peak, total, warmup)
    model = tiny_bert()
    reference = ReferenceAdamW(weights_of(model), weight_decay=0.1)
    optimizer = make_adamwdl(model, learning_rate=scheduler, weight_decay=0.1, layerwise_decay=0.6)
    train_and_compare(
        model, optimizer, reference, lr_at=lr_at, scheduler=scheduler, reference_options={"ratio": ratio_fn(0.6)}
    )


@pytest.mark.parametrize("decay_key", ["weight_decay", "coeff"])
def test_parameter_groups(decay_key):
    model = tiny_bert()
    layer0, others = split_parameters(model, ".layers.0.")
    group0 = {
        "params": layer0,
        decay_key: 0.4,
        "learning_rate": 0.5,
        "beta1": 0.8,
        "beta2": 0.95,
        "epsilon": 1e-6,
    }

    def in_group0(name: str) -> bool:
        return ".layers.0." in name

    reference = ReferenceAdamW(weights_of(model), weight_decay=0.05)
    optimizer = make_adamwdl(
        model,
        parameters=[group0, {"params": others}],
        learning_rate=0.01,
        weight_decay=0.05,
        layerwise_decay=0.5,
    )
    train_and_compare(
        model,
        optimizer,
        reference,
        lr_at=lambda step: 0.01,
        reference_options={
            "ratio": ratio_fn(0.5),
            "lr_scale": lambda n: 0.5 if in_group0(n) else 1.0,
            "weight_decay": lambda n: 0.4 if in_group0(n) else 0.05,
            "beta1": lambda n: 0.8 if in_group0(n) else None,
            "beta2": lambda n: 0.95 if in_group0(n) else None,
            "epsilon": lambda n: 1e-6 if in_group0(n) else None,
        },
    )


def test_paramattr_learning_rate():
    """ParamAttr lr scales both the decay lr and the Adam lr; the ratio only the Adam lr."""
    layer_lrs = {0: 0.5, 1: 2.0}
    model = bert_like(layer_lrs=layer_lrs)

    def lr_scale(name: str) -> float:
        for index, value in layer_lrs.items():
            if f".layers.{index}." in name:
                return value
        return 1.0

    for general in (False, True):
        model = bert_like(layer_lrs=layer_lrs)
        reference = ReferenceAdamW(weights_of(model), weight_decay=0.3)
        optimizer = make_adamwdl(
            model, general=general, learning_rate=0.01, weight_decay=0.3, layerwise_decay=0.5
        )
        train_and_compare(
            model,
            optimizer,
            reference,
            lr_at=lambda step: 0.01,
            reference_options={"ratio": ratio_fn(0.5), "lr_scale": lr_scale},
        )


def test_custom_ratio_function_returning_numbers_is_called_every_update():
    calls: dict[str, int] = {}

    def shrinking_ratio(decay_rate, name_dict, n_layers, param):
        calls[param.name] = calls.get(param.name, 0) + 1
        base = 0.5 if "weight" in name_dict[param.name] else 1.0
        return base / calls[param.name]  # changes every step: must not be cached

    model = tiny_bert()
    names = name_dict_of(model)
    reference = ReferenceAdamW(weights_of(model), weight_decay=0.2)
    optimizer = make_adamwdl(
        model, learning_rate=0.01, weight_decay=0.2, layerwise_decay=0.9, set_param_lr_fun=shrinking_ratio
    )
    steps = 5
    train_and_compare(
        model,
        optimizer,
        reference,
        steps=steps,
        lr_at=lambda step: 0.01,
        reference_options=lambda step: {
            "ratio": lambda n: (0.5 if "weight" in n else 1.0) / (step + 1)
        },
    )
    assert set(calls) == set(names) and set(calls.values()) == {steps}


def simple_lr_setting(decay_rate, name_dict, n_layers, param):
    """The ratio function of PaddleNLP's AdamWDL docstring, verbatim: it
    scales ``optimize_attr['learning_rate']`` itself and returns None."""
    ratio = 1.0
    static_name = name_dict[param.name]
    if "weight" in static_name:
        ratio = decay_rate**0.5
    param.optimize_attr["learning_rate"] *= ratio


def test_custom_ratio_function_returning_none_edits_optimize_attr():
    """PaddleNLP's docstring example: the function scales the attribute itself."""

    for general in (False, True):
        model = tiny_bert()
        reference = ReferenceAdamW(weights_of(model), weight_decay=0.2)
        optimizer = make_adamwdl(
            model,
            general=general,
            learning_rate=0.01,
            weight_decay=0.2,
            layerwise_decay=0.64,
            set_param_lr_fun=simple_lr_setting,
        )
        train_and_compare(
            model,
            optimizer,
            reference,
            lr_at=lambda step: 0.01,
            reference_options={"ratio": lambda n: 0.8 if "weight" in n else 1.0},
        )
        assert all(p.optimize_attr["learning_rate"] == 1.0 for p in model.parameters())


def test_paddlenlp_docstring_example_runs_unchanged():
    linear = paddle.nn.Linear(10, 10)
    name_dict = dict()
    for n, p in linear.named_parameters():
        name_dict[p.name] = n
    inp = paddle.rand([10, 10], dtype="float32")
    out = linear(inp)
    loss = paddle.mean(out)
    adamwdl = AdamWDL(
        learning_rate=1e-4,
        parameters=linear.parameters(),
        set_param_lr_fun=simple_lr_setting,
        layerwise_decay=0.8,
        name_dict=name_dict,
    )
    # (the example itself ends here; its one step checked against the formulas)
    reference = ReferenceAdamW({n: p.numpy() for n, p in linear.named_parameters()}, weight_decay=0.01)
    loss.backward()
    grads = {n: p.grad.numpy() for n, p in linear.named_parameters()}
    adamwdl.step()
    adamwdl.clear_grad()
    reference.step(grads, 1e-4, ratio={"weight": 0.8**0.5, "bias": 1.0})
    for n, p in linear.named_parameters():
        np.testing.assert_allclose(p.numpy(), reference.params[n], rtol=RTOL, atol=1e-7, err_msg=n)


def _extreme_ratio(structured: str) -> float:
    if "embeddings" in structured:
        return 0.0  # lambda / 0: the kernel cannot fold the decay
    if structured.startswith("classifier"):
        return 1e-13  # lambda / 1e-13 would lose float32 precision in the kernel
    return layer_ratio(structured, 0.5, N_LAYERS)


def test_ratio_zero_tiny_and_tensor_decay_take_the_general_path():
    """A ratio of 0 freezes the Adam step but not the decay; a Tensor layerwise_decay works."""
    model = tiny_bert()
    reference = ReferenceAdamW(weights_of(model), weight_decay=0.3)
    optimizer = make_adamwdl(
        model,
        learning_rate=0.01,
        weight_decay=0.3,
        layerwise_decay=0.5,
        set_param_lr_fun=lambda d, nd, n, p: _extreme_ratio(nd[p.name]),
    )
    train_and_compare(
        model, optimizer, reference, steps=4, lr_at=lambda step: 0.01, reference_options={"ratio": _extreme_ratio}
    )

    model = tiny_bert()
    reference = ReferenceAdamW(weights_of(model), weight_decay=0.3)
    optimizer = make_adamwdl(
        model, learning_rate=0.01, weight_decay=0.3, layerwise_decay=paddle.to_tensor(0.5)
    )
    train_and_compare(
        model, optimizer, reference, steps=4, lr_at=lambda step: 0.01, reference_options={"ratio": ratio_fn(0.5)}
    )


def test_grad_clip_by_global_norm():
    clip_norm = 0.05
    model = tiny_bert()
    reference = ReferenceAdamW(weights_of(model), weight_decay=0.1)
    optimizer = make_adamwdl(
        model,
        learning_rate=0.01,
        weight_decay=0.1,
        layerwise_decay=0.5,
        grad_clip=nn.ClipGradByGlobalNorm(clip_norm),
    )
    data = batches(5)
    nn.functional.cross_entropy(model(data[0][0]), data[0][1]).backward()
    global_norm = np.sqrt(sum((g**2).sum() for g in gradients_of(model)[0].values()))
    optimizer.clear_grad()
    assert global_norm > 2 * clip_norm  # the clip is active
    train_and_compare(
        model,
        optimizer,
        reference,
        lr_at=lambda step: 0.01,
        clip_norm=clip_norm,
        data=data,
        reference_options={"ratio": ratio_fn(0.5)},
    )


def test_amsgrad():
    model = tiny_bert()
    reference = ReferenceAdamW(weights_of(model), weight_decay=0.1, amsgrad=True)
    optimizer = make_adamwdl(model, learning_rate=0.01, weight_decay=0.1, layerwise_decay=0.5, amsgrad=True)
    train_and_compare(model, optimizer, reference, lr_at=lambda step: 0.01, reference_options={"ratio": ratio_fn(0.5)})


@pytest.mark.parametrize("setup", ["plain", "groups_paramattr_scheduler", "default_decay_no_name_dict"])
def test_without_layerwise_decay_equals_paddle_adamw(setup):
    """set_param_lr_fun=None (or layerwise_decay=1.0) gives AdamW's numbers bit for bit."""

    def build():
        model = bert_like(layer_lrs={1: 0.5}) if setup != "plain" else tiny_bert()
        names = name_dict_of(model)
        kwargs: dict[str, Any] = dict(learning_rate=0.01, weight_decay=0.2)
        if setup == "groups_paramattr_scheduler":
            params = list(model.named_parameters())
            kwargs["parameters"] = [
                {"params": [p for n, p in params if "encoder" in n], "weight_decay": 0.4, "beta1": 0.85},
                {"params": [p for n, p in params if "encoder" not in n], "learning_rate": 0.3},
            ]
            kwargs["learning_rate"] = paddle.optimizer.lr.StepDecay(0.01, step_size=2, gamma=0.5)
            kwargs["apply_decay_param_fun"] = no_bias_or_norm(names)
        else:
            kwargs["parameters"] = model.parameters()
        return model, kwargs

    results = []
    for make in ("adamw", "adamwdl"):
        model, kwargs = build()
        if make == "adamw":
            optimizer = paddle.optimizer.AdamW(**kwargs)
        elif setup == "default_decay_no_name_dict":
            optimizer = AdamWDL(**kwargs)  # layerwise_decay=1.0, no name_dict
        else:
            optimizer = AdamWDL(**kwargs, set_param_lr_fun=None)
        scheduler = kwargs["learning_rate"] if not isinstance(kwargs["learning_rate"], float) else None
        for ids, labels in batches(5):
            nn.functional.cross_entropy(model(ids), labels).backward()
            optimizer.step()
            optimizer.clear_grad()
            if scheduler is not None:
                scheduler.step()
        results.append(weights_of(model))
    for name in results[0]:
        np.testing.assert_array_equal(results[0][name], results[1][name], err_msg=name)


def test_training_run_loss_drops():
    """A real fine-tuning loop: cross-entropy on a learnable rule, a few dozen steps."""
    from paddle_llrd import LinearDecayWithWarmup

    paddle.seed(3)
    config = TinyBertConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=16,
    )
    model = TinyBertForSequenceClassification(config)
    rng = np.random.default_rng(5)
    ids = rng.integers(0, 64, (64, 8))
    labels = (ids[:, 0] < 32).astype("int64")  # the class is decided by the first token
    ids, labels = paddle.to_tensor(ids), paddle.to_tensor(labels)
    steps = 40
    scheduler = LinearDecayWithWarmup(3e-3, steps, 4)
    optimizer = AdamWDL(
        learning_rate=scheduler,
        parameters=model.parameters(),
        weight_decay=0.01,
        grad_clip=nn.ClipGradByGlobalNorm(1.0),
        layerwise_decay=0.8,
        n_layers=2,
        name_dict=name_dict_of(model),
    )
    losses = []
    for _ in range(steps):
        loss = nn.functional.cross_entropy(model(ids), labels)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        scheduler.step()
        losses.append(float(loss))
    assert np.mean(losses[-5:]) < 0.25 * np.mean(losses[:5]), losses
