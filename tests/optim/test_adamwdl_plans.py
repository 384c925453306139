"""AdamWDL's numbers follow every input that changes between steps (a parameter's lr
factor, a ratio function's answer, the decay path, the optimizer state, a parameter
unfrozen), checked against the float64 reference after every step."""
from __future__ import annotations

import paddle
from paddle import nn

from decay_routes import separate_decay
from reference_adamw import ReferenceAdamW
from adamwdl_runs import (
    batches,
    bert_like,
    decays_structured,
    make_adamwdl,
    name_dict_of,
    no_bias_or_norm,
    ratio_fn,
    train_and_compare,
    weights_of,
)

LR, WEIGHT_DECAY, DECAY = 0.02, 0.2, 0.5


def _model_and_optimizer(**kwargs):
    model = bert_like()
    kwargs.setdefault("layerwise_decay", DECAY)
    optimizer = make_adamwdl(
        model, learning_rate=LR, weight_decay=WEIGHT_DECAY,
        apply_decay_param_fun=no_bias_or_norm(name_dict_of(model)), **kwargs,
    )
    return model, optimizer


def _one_step(model, optimizer, reference, batch, **options):
    options.setdefault("ratio", ratio_fn(DECAY))
    options.setdefault("decay", decays_structured)
    train_and_compare(model, optimizer, reference, lr_at=lambda step: LR, reference_options=options, data=[batch])


def test_a_changed_lr_factor_between_steps_is_followed():
    """A ParamAttr lr factor set to 0 (a frozen layer: no decay, no step, the
    separate decay op) and back to 1: the plan's decision follows it."""
    model, optimizer = _model_and_optimizer()
    reference = ReferenceAdamW(weights_of(model), weight_decay=WEIGHT_DECAY)
    layer = model.bert.encoder.layers[0]
    frozen = {f"bert.encoder.layers.0.{name}" for name, _ in layer.named_parameters()}
    for step, batch in enumerate(batches(4)):
        factor = 0.0 if step in (1, 2) else 1.0
        for param in layer.parameters():
            param.optimize_attr["learning_rate"] = factor
        _one_step(model, optimizer, reference, batch, lr_scale=lambda name: factor if name in frozen else 1.0)


def test_a_ratio_function_whose_answers_change_is_followed():
    """A function not pure in the name is asked at every step; 0 takes the separate decay op."""
    current = {}

    def changing_ratio(decay, name_dict, n_layers, param):
        current[name_dict[param.name]] = next(answers)
        return current[name_dict[param.name]]

    model, optimizer = _model_and_optimizer(set_param_lr_fun=changing_ratio)
    reference = ReferenceAdamW(weights_of(model), weight_decay=WEIGHT_DECAY)
    n_params = len(model.parameters())
    answers = iter([0.5] * n_params + [0.0] * n_params + [2.0] * (2 * n_params))
    for batch in batches(4):
        train_and_compare(
            model, optimizer, reference, lr_at=lambda step: LR,
            reference_options=lambda step: {"ratio": dict(current), "decay": decays_structured}, data=[batch],
        )


def test_switching_decay_paths_between_steps_keeps_the_numbers():
    # (the per-parameter path, whose routes are decided anew at each pass)
    model, optimizer = _model_and_optimizer(use_multi_tensor=False)
    step_with_fused_decay = optimizer.step
    step_with_separate_decay = separate_decay(optimizer).step
    reference = ReferenceAdamW(weights_of(model), weight_decay=WEIGHT_DECAY)
    for step, batch in enumerate(batches(4)):
        optimizer.step = step_with_separate_decay if step % 2 == 1 else step_with_fused_decay
        _one_step(model, optimizer, reference, batch)


def test_training_continues_from_a_state_dict_loaded_mid_run():
    model, optimizer = _model_and_optimizer()
    reference = ReferenceAdamW(weights_of(model), weight_decay=WEIGHT_DECAY)
    data = batches(5)
    _one_step(model, optimizer, reference, data[0])
    saved_state = {k: v.clone() if isinstance(v, paddle.Tensor) else v for k, v in optimizer.state_dict().items()}
    saved_weights = {n: p.clone() for n, p in model.named_parameters()}
    saved_reference = (dict(reference.params), dict(reference.state))
    for batch in data[1:3]:
        _one_step(model, optimizer, reference, batch)
    # roll weights and optimizer back to after step 1, then continue
    for name, param in model.named_parameters():
        param.set_value(saved_weights[name])
    optimizer.set_state_dict(saved_state)
    reference.params, reference.state = dict(saved_reference[0]), dict(saved_reference[1])
    for batch in data[3:]:
        _one_step(model, optimizer, reference, batch)


def test_a_parameter_unfrozen_later_starts_its_moments_at_its_first_update():
    model, optimizer = _model_and_optimizer()
    frozen = model.classifier.weight
    frozen.stop_gradient = True
    reference = ReferenceAdamW(weights_of(model), weight_decay=WEIGHT_DECAY)
    data = batches(4)
    for batch in data[:2]:
        ids, labels = batch
        nn.functional.cross_entropy(model(ids), labels).backward()
        grads = {n: p.grad.numpy().astype("float64") for n, p in model.named_parameters() if p.grad is not None}
        optimizer.step()
        optimizer.clear_grad()
        reference.step(grads, LR, ratio=ratio_fn(DECAY), decay=decays_structured)
    frozen.stop_gradient = False
    for batch in data[2:]:
        _one_step(model, optimizer, reference, batch)
