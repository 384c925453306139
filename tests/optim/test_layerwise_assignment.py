"""``layerwise_decay``, ``name_dict``, ``n_layers`` and ``set_param_lr_fun`` assigned after construction
(docs/adamwdl.rst, "Layer ratios"): the next update follows the new ratios, on the
multi-tensor path and the per-parameter path, against a float64 reference; a bad
value is refused by name before anything changes."""
from __future__ import annotations

import pytest

from reference_adamw import ReferenceAdamW
from adamwdl_runs import (
    N_LAYERS, batches, decays_structured, name_dict_of, no_bias_or_norm, ratio_fn, tiny_bert, train_and_compare,
    weights_of,
)
from paddle_llrd import AdamWDL

LR, WEIGHT_DECAY = 0.01, 0.1


def _optimizer(model, **options):
    return AdamWDL(LR, parameters=model.parameters(), weight_decay=WEIGHT_DECAY, layerwise_decay=0.9,
                   n_layers=N_LAYERS, name_dict=name_dict_of(model),
                   apply_decay_param_fun=no_bias_or_norm(name_dict_of(model)), **options)


def _half_per_layer(model):
    """The default ratios at layerwise_decay=0.5, as a function of the parameter, cached as the default is."""
    structured = name_dict_of(model)

    def half_per_layer(param):
        return ratio_fn(0.5)(structured[param.name])

    half_per_layer.pure_in_name = True
    return half_per_layer


def _assign_decay(optimizer, model):
    optimizer.layerwise_decay = 0.5
    assert optimizer.layerwise_decay == 0.5


def _assign_function(optimizer, model):
    optimizer.set_param_lr_fun = _half_per_layer(model)


@pytest.mark.parametrize("assign", [_assign_decay, _assign_function], ids=["layerwise_decay", "set_param_lr_fun"])
@pytest.mark.parametrize("use_multi_tensor", [None, False], ids=["multi-tensor", "per-parameter"])
def test_assigned_ratios_are_followed_from_the_next_update(use_multi_tensor, assign):
    model = tiny_bert()
    optimizer = _optimizer(model, use_multi_tensor=use_multi_tensor)
    reference = ReferenceAdamW(weights_of(model), weight_decay=WEIGHT_DECAY)
    data = batches(6)
    options = {"decay": decays_structured}
    train_and_compare(model, optimizer, reference, lr_at=lambda s: LR, data=data[:3],
                      reference_options={**options, "ratio": ratio_fn(0.9)})
    assign(optimizer, model)
    rows = {row.name: row.ratio for row in optimizer.param_lr_table()}
    assert rows == pytest.approx({name: ratio_fn(0.5)(name) for name in rows}, rel=1e-12)
    train_and_compare(model, optimizer, reference, lr_at=lambda s: LR, data=data[3:],
                      reference_options={**options, "ratio": ratio_fn(0.5)})
    assert optimizer.last_update_path.path == ("fused" if use_multi_tensor is None else "per_parameter")


def test_an_assigned_n_layers_is_followed_from_the_next_update():
    model = tiny_bert()
    optimizer = _optimizer(model)
    optimizer.n_layers = N_LAYERS + 2
    reference = ReferenceAdamW(weights_of(model), weight_decay=WEIGHT_DECAY)
    train_and_compare(model, optimizer, reference, lr_at=lambda s: LR, steps=3,
                      reference_options={"decay": decays_structured, "ratio": ratio_fn(0.9, N_LAYERS + 2)})


@pytest.mark.parametrize("attribute, value, error", [
    ("layerwise_decay", -0.5, ValueError), ("layerwise_decay", "0.5", TypeError), ("n_layers", 0, ValueError),
])
def test_a_bad_assigned_value_is_refused_by_name_and_changes_nothing(attribute, value, error):
    model = tiny_bert()
    optimizer = _optimizer(model)
    before = [(row.name, row.ratio) for row in optimizer.param_lr_table()]
    with pytest.raises(error, match=attribute):
        setattr(optimizer, attribute, value)
    assert (optimizer.layerwise_decay, optimizer.n_layers) == (0.9, N_LAYERS)
    assert [(row.name, row.ratio) for row in optimizer.param_lr_table()] == before


def test_an_assigned_pure_set_param_lr_fun_with_a_bad_ratio_is_refused_and_changes_nothing():
    model = tiny_bert()
    optimizer = _optimizer(model)
    kept = optimizer.set_param_lr_fun
    before = [(row.name, row.ratio) for row in optimizer.param_lr_table()]

    def negative(param):
        return -1.0

    negative.pure_in_name = True  # asked of every parameter at the assignment
    with pytest.raises(ValueError, match="set_param_lr_fun"):
        optimizer.set_param_lr_fun = negative
    assert optimizer.set_param_lr_fun is kept
    assert [(row.name, row.ratio) for row in optimizer.param_lr_table()] == before
