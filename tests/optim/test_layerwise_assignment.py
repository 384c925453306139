"""``layerwise_decay``, ``name_dict`` and ``n_layers`` assigned after construction
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


@pytest.mark.parametrize("use_multi_tensor", [None, False], ids=["multi-tensor", "per-parameter"])
def test_an_assigned_layerwise_decay_is_followed_from_the_next_update(use_multi_tensor):
    model = tiny_bert()
    optimizer = _optimizer(model, use_multi_tensor=use_multi_tensor)
    reference = ReferenceAdamW(weights_of(model), weight_decay=WEIGHT_DECAY)
    data = batches(6)
    options = {"decay": decays_structured}
    train_and_compare(model, optimizer, reference, lr_at=lambda s: LR, data=data[:3],
                      reference_options={**options, "ratio": ratio_fn(0.9)})
    optimizer.layerwise_decay = 0.5
    assert optimizer.layerwise_decay == 0.5
    rows = {row.name: row.ratio for row in optimizer.param_lr_table()}
    assert rows == pytest.approx({name: ratio_fn(0.5)(name) for name in rows}, rel=1e-12)
    train_and_compare(model, optimizer, reference, lr_at=lambda s: LR, data=data[3:],
                      reference_options={**options, "ratio": ratio_fn(0.5)})
    assert optimizer.last_update_path.path == ("multi_tensor" if use_multi_tensor is None else "per_parameter")


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
