"""Each argument has one rule, whatever the entry point: AdamWDL's constructor, the default
ratio function, LayerMap and the parameter groups, the LLRDTrainer keywords and the Trainer/CLI
fields (``check_fields``, which ``LLRDTrainingArguments.__post_init__`` and ``python -m
paddle_llrd train``'s config check both run). Each test runs every entry point with the same
values and fails if one of them parts from the others (docs/adamwdl.rst "Layer ratios",
docs/layer_maps.rst, docs/weight_decay.rst).
"""
from __future__ import annotations

import dataclasses
import inspect
import math
import warnings
from types import SimpleNamespace

import paddle
import pytest

from paddle_llrd import (
    AdamWDL,
    DecayAboveOneWarning,
    LayerMap,
    LayerMapWarning,
    WeightDecaySchedule,
    build_name_dict,
    layer_decay_param_groups,
    layerwise_lr_decay,
    resolve_layer_map,
)
from paddle_llrd.integrations.builders import build_optimizer, check_trainer_keywords, layer_settings, trainer_weight_decay
from paddle_llrd.integrations.training_arguments import LLRDArgumentsMixin, check_fields
from paddle_llrd.layer_decay.layer_maps import PipelineLayerMap
from paddle_llrd.layer_decay.layerwise import decay_is_off
from paddle_llrd.models.skeletons import build_skeleton

N_BLOCKS = 2


# ------------------------------------------------------------ layerwise_decay: is it off?
@pytest.mark.parametrize(
    "make, off",
    [(lambda: 1.0, True), (lambda: 0.8, False), (lambda: paddle.to_tensor(1.0), False),
     (lambda: paddle.to_tensor(0.8), False)],
    ids=["float-1", "float-0.8", "tensor-1", "tensor-0.8"],
)
def test_a_decay_is_off_only_as_a_real_one_for_the_constructor_the_default_rule_and_the_warning(make, off):
    """A Tensor decay is read at every step and may be changed in place: it counts as on whatever
    its value now, for the name_dict the constructor demands, for layerwise_lr_decay itself and for
    the warning about names without encoder blocks."""
    assert decay_is_off(make()) is off
    bert = build_skeleton("bert", N_BLOCKS)
    # the constructor: name_dict needed unless off
    if off:
        AdamWDL(parameters=bert.parameters(), layerwise_decay=make(), n_layers=N_BLOCKS)
    else:
        with pytest.raises(ValueError, match="needs `name_dict`"):
            AdamWDL(parameters=bert.parameters(), layerwise_decay=make(), n_layers=N_BLOCKS)
    # the default rule, asked without names
    param = bert.parameters()[0]
    if off:
        assert layerwise_lr_decay(make(), None, N_BLOCKS, param) == 1.0
    else:
        with pytest.raises(TypeError, match="`name_dict` is None"):
            layerwise_lr_decay(make(), None, N_BLOCKS, param)
    # the warning about names the default rule reads no block in
    llama = build_skeleton("llama", N_BLOCKS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        AdamWDL(parameters=llama.parameters(), layerwise_decay=make(), n_layers=N_BLOCKS,
                name_dict=build_name_dict(llama))
    assert any(issubclass(w.category, LayerMapWarning) for w in caught) is not off


# ------------------------------------------------------------ n_layers
def _names_with_blocks():
    return [n for n, _ in build_skeleton("llama", N_BLOCKS).named_parameters()]


def _n_layers_entry_points():
    """Every place n_layers enters, each a function of the value."""
    bert = build_skeleton("bert", N_BLOCKS)
    llama = build_skeleton("llama", N_BLOCKS)
    return {
        "AdamWDL": lambda n: AdamWDL(parameters=bert.parameters(), layerwise_decay=0.8, n_layers=n,
                                     name_dict=build_name_dict(bert)),
        "LayerMap": lambda n: LayerMap(n_layers=n),
        "PipelineLayerMap": lambda n: PipelineLayerMap(["model", "model.layers.0", "model.layers.1"], n_layers=n),
        "resolve_layer_map": lambda n: resolve_layer_map("auto", _names_with_blocks(), n_layers=n),
        "layer_decay_param_groups": lambda n: layer_decay_param_groups(llama, 0.8, n_layers=n),
        "LLRDTrainer keyword": lambda n: check_trainer_keywords(None, n, None),
        "model.config.num_hidden_layers": lambda n: layer_settings(
            SimpleNamespace(layerwise_decay=0.8), _with_config(llama, n)),
    }


def _with_config(model, n_layers):
    model.config = SimpleNamespace(num_hidden_layers=n_layers)
    return model


@pytest.mark.parametrize("value, error", [(True, TypeError), (2.5, TypeError), ("2", TypeError), (-1, ValueError)])
def test_n_layers_is_refused_alike_wherever_it_enters(value, error):
    """One rule (an int >= 0): the same exception type everywhere, each message naming `n_layers`."""
    for where, enter in _n_layers_entry_points().items():
        with pytest.raises(error, match="`n_layers`") as raised:
            enter(value)
        assert "int >= 0" in str(raised.value), (where, str(raised.value))


def test_the_models_block_count_is_taken_wherever_n_layers_enters():
    for where, enter in _n_layers_entry_points().items():
        enter(N_BLOCKS)


def test_zero_blocks_is_a_valid_n_layers_for_a_model_without_blocks():
    """LayerMap.from_model counts 0 blocks on such a model, and AdamWDL takes the map's n_layers."""
    model = paddle.nn.Sequential(paddle.nn.Linear(3, 3), paddle.nn.Linear(3, 2))
    layer_map = LayerMap.from_model(model)
    assert layer_map.n_layers == 0
    AdamWDL(parameters=model.parameters(), layerwise_decay=0.5, n_layers=layer_map.n_layers,
            set_param_lr_fun=layer_map, name_dict=build_name_dict(model))
    assert check_trainer_keywords(None, 0, None) == (None, 0)
    assert resolve_layer_map("auto", model, n_layers=0, require_blocks=False).n_layers == 0


# ------------------------------------------------------------ layerwise_decay's range
def _decay_entry_points():
    bert = build_skeleton("bert", N_BLOCKS)
    return {
        "AdamWDL": lambda d: AdamWDL(parameters=bert.parameters(), layerwise_decay=d, n_layers=N_BLOCKS,
                                     name_dict=build_name_dict(bert)),
        "layer_decay_param_groups": lambda d: layer_decay_param_groups(bert, d),
        "LLRDTrainer keyword": lambda d: check_trainer_keywords(d, None, None),
        "Trainer/CLI field": lambda d: check_fields({"layerwise_decay": d}),
    }


@pytest.mark.parametrize("value, error", [(0.0, ValueError), (-0.5, ValueError), (math.nan, ValueError),
                                          (math.inf, ValueError), (True, TypeError), ([0.8], TypeError)])
def test_a_layerwise_decay_out_of_range_is_refused_alike_wherever_it_enters(value, error):
    for where, enter in _decay_entry_points().items():
        with pytest.raises(error, match="ayer(wise)?_decay") as raised:
            enter(value)
        if error is ValueError:
            assert "must be a finite number > 0" in str(raised.value), (where, str(raised.value))


@pytest.mark.parametrize(
    "value, hint",
    [(1, "(write 1.0, not 1)"), (2, "(write 2.0, not 2; a decay above 1 makes lower layers train faster"),
     (0, "(a decay must be > 0")],
)
def test_an_int_layerwise_decay_is_told_what_fits_its_value(value, hint):
    bert = build_skeleton("bert", N_BLOCKS)
    with pytest.raises(TypeError, match="must be a Python float or a Paddle Tensor") as raised:
        AdamWDL(parameters=bert.parameters(), layerwise_decay=value, name_dict=build_name_dict(bert))
    assert hint in str(raised.value)
    if value != 1:
        assert "write 1.0" not in str(raised.value)


def test_a_decay_above_one_given_as_a_config_value_warns_once_on_its_way_to_the_optimizer():
    """The CLI checks its config (check_fields), the arguments check their fields again when built
    (check_fields in __post_init__), the Trainer builds the optimizer: one DecayAboveOneWarning,
    the optimizer's, under Python's "always" filter (no deduplication by location)."""
    model = build_skeleton("llama", N_BLOCKS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config = check_fields({"layerwise_decay": 2})  # a YAML `layerwise_decay: 2`
        fields = check_fields(config)
        args = SimpleNamespace(**fields, weight_decay=0.0, max_steps=4, max_grad_norm=0.0, adam_beta1=0.9,
                               adam_beta2=0.999, adam_epsilon=1e-8, fp16_opt_level="O1")
        settings = layer_settings(args, model)
        build_optimizer(args, model, settings, learning_rate=1e-3, parameters=model.parameters(),
                        apply_decay_param_fun=None)
    above_one = [w for w in caught if issubclass(w.category, DecayAboveOneWarning)]
    assert len(above_one) == 1, [str(w.message) for w in caught]
    assert "`layerwise_decay`=2.0 is greater than 1" in str(above_one[0].message)


# ------------------------------------------------------------ the weight-decay schedule's style
def test_the_style_defaults_agree_between_the_trainer_field_and_weight_decay_schedule():
    field = next(f for f in dataclasses.fields(LLRDArgumentsMixin) if f.name == "weight_decay_incr_style")
    assert field.default == inspect.signature(WeightDecaySchedule).parameters["style"].default == "constant"


def test_a_ramp_without_a_style_is_refused_by_the_schedule_and_by_the_fields():
    with pytest.raises(ValueError, match="style 'constant' keeps one coefficient"):
        WeightDecaySchedule(0.0, 0.1, total_steps=10)
    with pytest.raises(ValueError, match="weight_decay_incr_style is 'constant'"):
        check_fields({"weight_decay": 0.0, "weight_decay_end": 0.1})


@pytest.mark.parametrize("style", [None, "linear", "cosine"])
def test_the_fields_build_the_schedule_the_class_builds(style):
    """The Trainer's schedule from checked fields, and WeightDecaySchedule given the same values,
    against Megatron-LM's formula written out (T = 8 steps)."""
    start, end, total = 0.02, (0.02 if style is None else 0.1), 8
    values = {"weight_decay": start, "weight_decay_end": end}
    if style is not None:
        values["weight_decay_incr_style"] = style
    fields = check_fields(values)
    args = SimpleNamespace(weight_decay=start, max_steps=total, **{k: fields[k] for k in (
        "weight_decay_end", "weight_decay_incr_style")})
    from_fields = trainer_weight_decay(args, total)
    from_class = WeightDecaySchedule(start, end, total, **({} if style is None else {"style": style}))

    def megatron(s):
        r = min(s / total, 1.0)
        if style == "linear":
            return start + (end - start) * r
        if style == "cosine":
            return start + (end - start) * 0.5 * (math.cos(math.pi * (1 - r)) + 1)
        return start

    for s in range(total + 2):
        assert from_fields(s) == pytest.approx(megatron(s), rel=1e-12, abs=1e-15)
        assert from_class(s) == pytest.approx(megatron(s), rel=1e-12, abs=1e-15)
