"""AdamWDL's constructor contract: signature, argument errors, str(), _coeff,
_lr_to_coeff, set_param_lr_fun storage."""
from __future__ import annotations

import functools
import inspect
import math

import numpy as np
import paddle
import pytest
from paddle import nn

from paddle_llrd import AdamWDL, layerwise_lr_decay
from decay_routes import separate_decay
from paddle_llrd.optim import per_parameter
from adamwdl_runs import N_LAYERS, batches, name_dict_of, tiny_bert

ADVICE = "{p.name: n for n, p in model.named_parameters()}"


def test_signature_order_matches_spec():
    expected = [
        "learning_rate", "beta1", "beta2", "epsilon", "parameters", "weight_decay",
        "apply_decay_param_fun", "grad_clip", "lazy_mode", "multi_precision",
        "layerwise_decay", "n_layers", "set_param_lr_fun", "name_dict", "name",
    ]
    parameters = inspect.signature(AdamWDL.__init__).parameters
    positional = [
        n for n, p in parameters.items()
        if n != "self" and p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    ]
    assert positional == expected
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for n, p in parameters.items() if n not in expected + ["self"])
    defaults = {n: parameters[n].default for n in expected}
    assert defaults["layerwise_decay"] == 1.0 and defaults["n_layers"] == 12
    assert defaults["set_param_lr_fun"] is layerwise_lr_decay and defaults["weight_decay"] == 0.01


def test_positional_call_and_stored_attributes():
    model = tiny_bert()
    names = name_dict_of(model)
    decayed = lambda n: "bias" not in n  # noqa: E731
    clip = nn.ClipGradByGlobalNorm(1.0)
    opt = AdamWDL(
        0.01, 0.8, 0.99, 1e-6, model.parameters(), 0.2, decayed, clip, True, False,
        0.5, N_LAYERS, layerwise_lr_decay, names, "opt",
    )
    assert opt.get_lr() == 0.01
    assert (opt._beta1, opt._beta2, opt._epsilon) == (0.8, 0.99, 1e-6)
    assert opt._coeff == 0.2 and opt._apply_decay_param_fun is decayed and opt._grad_clip is clip
    assert opt._lazy_mode is True and opt._multi_precision is False and opt._name == "opt"
    assert opt.layerwise_decay == 0.5 and opt.n_layers == N_LAYERS
    assert isinstance(opt.set_param_lr_fun, functools.partial)
    assert opt.set_param_lr_fun.func is layerwise_lr_decay
    assert opt.set_param_lr_fun.args == (0.5, names, N_LAYERS)
    classifier = model.classifier.weight
    assert opt.set_param_lr_fun(classifier) == 1.0
    assert opt.set_param_lr_fun(model.bert.embeddings.word_embeddings.weight) == 0.5 ** (N_LAYERS + 1)


def test_set_param_lr_fun_none_is_stored_as_none():
    model = tiny_bert()
    assert AdamWDL(parameters=model.parameters(), set_param_lr_fun=None).set_param_lr_fun is None


def test_str_lists_decayed_parameters():
    model = tiny_bert()
    names = name_dict_of(model)
    opt = AdamWDL(
        parameters=model.parameters(),
        apply_decay_param_fun=lambda n: "norm" not in names[n],
        layerwise_decay=0.9,
        n_layers=N_LAYERS,
        name_dict=names,
    )
    expected = [p.name for n, p in model.named_parameters() if "norm" not in n]
    assert str(opt) == "Weight Decay, params: " + ",".join(expected)
    ids, labels = batches(1)[0]
    nn.functional.cross_entropy(model(ids), labels).backward()
    opt.step()
    assert str(opt) == "Weight Decay, params: " + ",".join(expected)


def test_coeff_and_lr_to_coeff_cache(monkeypatch):
    model = tiny_bert()
    # (the per-parameter path: its kernel calls are recorded)
    opt = separate_decay(AdamWDL(parameters=model.parameters(), weight_decay=0.25, layerwise_decay=0.5,
                                 n_layers=N_LAYERS, name_dict=name_dict_of(model), use_multi_tensor=False))
    assert opt._coeff == 0.25 and opt._lr_to_coeff == {}
    sizes = []
    original = per_parameter.adamw_kernel

    def recording(*args, **kwargs):
        sizes.append(len(opt._lr_to_coeff))
        for lr, factor in opt._lr_to_coeff.items():  # lr -> 1 - lr * coeff
            assert float(factor) == pytest.approx(1.0 - float(lr) * 0.25, rel=1e-7)
            assert float(lr) == pytest.approx(0.001, rel=1e-7)  # the default lr, ParamAttr lr 1
        return original(*args, **kwargs)

    monkeypatch.setattr(per_parameter, "adamw_kernel", recording)
    for ids, labels in batches(2):
        nn.functional.cross_entropy(model(ids), labels).backward()
        opt.step()
        opt.clear_grad()
        assert opt._lr_to_coeff == {}
    # one cached factor per distinct lr in a pass (a single lr here), built on first use
    assert max(sizes) == 1 and sizes.count(0) == 0


@pytest.mark.parametrize("bad", [1, 0, "0.8", None, [0.8], True])
def test_layerwise_decay_type_error(bad):
    model = tiny_bert()
    with pytest.raises(TypeError, match="layerwise_decay"):
        AdamWDL(parameters=model.parameters(), layerwise_decay=bad, name_dict=name_dict_of(model))


@pytest.mark.parametrize("bad", [-0.5, math.nan, math.inf])
def test_layerwise_decay_value_error(bad):
    model = tiny_bert()
    with pytest.raises(ValueError, match="layerwise_decay"):
        AdamWDL(parameters=model.parameters(), layerwise_decay=bad, name_dict=name_dict_of(model))


def test_tensor_layerwise_decay_is_accepted():
    model = tiny_bert()
    opt = AdamWDL(parameters=model.parameters(), layerwise_decay=paddle.to_tensor(0.5),
                  n_layers=N_LAYERS, name_dict=name_dict_of(model))
    ratio = opt.set_param_lr_fun(model.bert.embeddings.word_embeddings.weight)
    assert float(ratio) == pytest.approx(0.5 ** (N_LAYERS + 1))


@pytest.mark.parametrize("bad, error", [(2.0, TypeError), (True, TypeError), ("2", TypeError), (-1, ValueError)])
def test_n_layers_errors(bad, error):
    model = tiny_bert()
    with pytest.raises(error, match="n_layers"):
        AdamWDL(parameters=model.parameters(), layerwise_decay=0.5, n_layers=bad, name_dict=name_dict_of(model))


def test_custom_function_receives_n_layers_as_given():
    seen = []
    model = tiny_bert()
    opt = AdamWDL(parameters=model.parameters(), n_layers=None,
                  set_param_lr_fun=lambda d, nd, n, p: seen.append(n) or 1.0)
    ids, labels = batches(1)[0]
    nn.functional.cross_entropy(model(ids), labels).backward()
    opt.step()
    assert seen and set(seen) == {None}


def test_set_param_lr_fun_must_be_callable():
    with pytest.raises(TypeError, match="set_param_lr_fun"):
        AdamWDL(parameters=tiny_bert().parameters(), set_param_lr_fun=0.5)


def test_name_dict_must_be_a_mapping():
    model = tiny_bert()
    with pytest.raises(TypeError, match="name_dict"):
        AdamWDL(parameters=model.parameters(), layerwise_decay=0.5, name_dict=list(name_dict_of(model)))


def test_layerwise_decay_without_name_dict_fails_at_construction_with_advice():
    with pytest.raises(ValueError, match="name_dict") as info:
        AdamWDL(parameters=tiny_bert().parameters(), layerwise_decay=0.8)
    assert ADVICE in str(info.value)
    with pytest.raises(ValueError, match="name_dict"):
        AdamWDL(parameters=tiny_bert().parameters(), layerwise_decay=paddle.to_tensor(1.0))


def test_layerwise_decay_one_needs_no_name_dict():
    model = tiny_bert()
    opt = AdamWDL(parameters=model.parameters())  # PaddleNLP's defaults crash at step(); these work
    ids, labels = batches(1)[0]
    nn.functional.cross_entropy(model(ids), labels).backward()
    opt.step()


def test_parameter_missing_from_name_dict_raises_key_error_at_construction():
    model = tiny_bert()
    names = name_dict_of(model)
    missing = model.bert.pooler.dense.weight
    del names[missing.name]
    with pytest.raises(KeyError, match=missing.name) as info:
        AdamWDL(parameters=model.parameters(), layerwise_decay=0.8, n_layers=N_LAYERS, name_dict=names)
    assert ADVICE in str(info.value)


def test_layer_index_beyond_n_layers_is_refused():
    model = tiny_bert(layers=3)
    with pytest.raises(ValueError, match="n_layers"):
        AdamWDL(parameters=model.parameters(), layerwise_decay=0.8, n_layers=2, name_dict=name_dict_of(model))


def test_group_with_conflicting_weight_decay_and_coeff():
    model = tiny_bert()
    with pytest.raises(ValueError, match="coeff"):
        AdamWDL(parameters=[{"params": model.parameters(), "weight_decay": 0.1, "coeff": 0.2}])


def test_frozen_parameters_need_no_name():
    model = tiny_bert()
    model.classifier.weight.stop_gradient = True
    names = {p.name: n for n, p in model.named_parameters() if p is not model.classifier.weight}
    opt = AdamWDL(parameters=model.parameters(), layerwise_decay=0.8, n_layers=N_LAYERS, name_dict=names)
    before = model.classifier.weight.numpy().copy()
    ids, labels = batches(1)[0]
    nn.functional.cross_entropy(model(ids), labels).backward()
    opt.step()
    np.testing.assert_array_equal(model.classifier.weight.numpy(), before)


@pytest.mark.parametrize("general", [False, True], ids=["fused", "general"])
def test_str_in_a_static_program_lists_the_decayed_parameters(general):
    """Without a parameter list (a static program) the names come from the update
    ops built by minimize(), on either decay path."""
    paddle.enable_static()
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [-1, 4], "float32")
        hidden = nn.Linear(4, 3)
        head = nn.Linear(3, 2)
        loss = paddle.mean(head(hidden(x)))
        opt = AdamWDL(learning_rate=0.01, weight_decay=0.1, apply_decay_param_fun=lambda n: n != head.bias.name)
        separate_decay(opt, general)
        assert str(opt) == "Weight Decay, params: "
        opt.minimize(loss)
    decayed = [hidden.weight.name, hidden.bias.name, head.weight.name]
    assert sorted(str(opt)[len("Weight Decay, params: "):].split(",")) == sorted(decayed)


@pytest.mark.parametrize("argument", ["learning_rate", "beta1", "beta2", "epsilon"])
def test_none_for_a_required_number_is_a_type_error_naming_it(argument):
    with pytest.raises(TypeError, match=argument):
        AdamWDL(parameters=tiny_bert().parameters(), **{argument: None})
