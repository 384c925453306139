"""``apply_decay_param_fun`` is asked at every update, as ``paddle.optimizer.AdamW`` asks it (docs/adamwdl.rst).

A rule that changes over time (no decay during warmup) takes effect when it
changes: with ``set_param_lr_fun=None`` AdamWDL gives AdamW's numbers over
several steps, and a run resumed from a checkpoint equals the uninterrupted
one. A function that declares ``pure_in_name = True`` is asked once per
parameter.
"""
from __future__ import annotations

import numpy as np
import paddle
import pytest

from paddle_llrd import AdamWDL
from decay_routes import separate_decay
from reference_adamw import ReferenceAdamW

WARMUP, STEPS, LR, WEIGHT_DECAY = 3, 6, 0.05, 0.2


class WarmupDecayRule:
    """No decay during the first ``WARMUP`` steps, then every weight (not the biases) decays."""

    def __init__(self) -> None:
        self.step = 0
        self.calls = 0

    def __call__(self, param_name: str) -> bool:
        self.calls += 1
        return self.step >= WARMUP and param_name.endswith(".w_0")


def _model(seed: int = 3) -> paddle.nn.Layer:
    """The same parameter names at every call (a checkpoint is matched by them)."""
    paddle.seed(seed)
    with paddle.utils.unique_name.guard():
        return paddle.nn.Sequential(paddle.nn.Linear(4, 5), paddle.nn.Tanh(), paddle.nn.Linear(5, 2))


def _batches() -> list[tuple[paddle.Tensor, paddle.Tensor]]:
    rng = np.random.RandomState(1)
    return [
        (paddle.to_tensor(rng.randn(6, 4).astype("float32")), paddle.to_tensor(rng.randn(6, 2).astype("float32")))
        for _ in range(STEPS)
    ]


def _train(model, optimizer, rule: WarmupDecayRule, batches) -> None:
    for x, y in batches:
        paddle.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        optimizer.clear_grad()
        rule.step += 1


def _weights(model) -> dict[str, np.ndarray]:
    return {name: p.numpy() for name, p in model.named_parameters()}


def _adamwdl(model, rule) -> AdamWDL:
    return AdamWDL(LR, parameters=model.parameters(), weight_decay=WEIGHT_DECAY,
                   set_param_lr_fun=None, apply_decay_param_fun=rule)


def test_a_rule_that_changes_over_time_gives_adamw_numbers():
    batches = _batches()
    ours, theirs, always = _model(), _model(), _model()
    ours_rule, theirs_rule = WarmupDecayRule(), WarmupDecayRule()
    _train(ours, _adamwdl(ours, ours_rule), ours_rule, batches)
    _train(theirs, paddle.optimizer.AdamW(LR, parameters=theirs.parameters(), weight_decay=WEIGHT_DECAY,
                                          apply_decay_param_fun=theirs_rule), theirs_rule, batches)
    # the rule matters: decaying the weights from the first step ends elsewhere
    always_rule = WarmupDecayRule()
    always_rule.step = WARMUP
    _train(always, _adamwdl(always, always_rule), always_rule, batches)
    expected, decayed_from_start = _weights(theirs), _weights(always)
    for name, value in _weights(ours).items():
        np.testing.assert_allclose(value, expected[name], rtol=1e-6, atol=1e-7, err_msg=name)
        if name.endswith("weight"):
            assert np.abs(value - decayed_from_start[name]).max() > 1e-4, name
    # asked once per parameter and update, as AdamW asks (and once per parameter when built)
    n_params = len(list(ours.parameters()))
    assert theirs_rule.calls == STEPS * n_params
    assert ours_rule.calls == (STEPS + 1) * n_params


@pytest.mark.parametrize("general", [False, True], ids=["fused", "general"])
def test_a_resumed_run_equals_the_uninterrupted_one(general, tmp_path):
    batches = _batches()
    with paddle.utils.unique_name.guard():  # each run names its accumulators alike
        model, rule = _model(), WarmupDecayRule()
        optimizer = _adamwdl(model, rule)
        separate_decay(optimizer, general)
        _train(model, optimizer, rule, batches)
        uninterrupted = _weights(model)

    with paddle.utils.unique_name.guard():
        model, rule = _model(), WarmupDecayRule()
        optimizer = _adamwdl(model, rule)
        separate_decay(optimizer, general)
        _train(model, optimizer, rule, batches[:4])  # saved after the rule changed
        paddle.save(model.state_dict(), str(tmp_path / "model.pdparams"))
        paddle.save(optimizer.state_dict(), str(tmp_path / "opt.pdopt"))

    with paddle.utils.unique_name.guard():
        model, rule = _model(seed=11), WarmupDecayRule()
        model.set_state_dict(paddle.load(str(tmp_path / "model.pdparams")))
        optimizer = _adamwdl(model, rule)
        separate_decay(optimizer, general)
        optimizer.set_state_dict(paddle.load(str(tmp_path / "opt.pdopt")))
        rule.step = 4
        _train(model, optimizer, rule, batches[4:])
    for name, value in _weights(model).items():
        np.testing.assert_array_equal(value, uninterrupted[name], err_msg=name)


def test_a_rule_pure_in_the_name_is_asked_once_per_parameter():
    calls = []

    def no_bias(param_name: str) -> bool:
        calls.append(param_name)
        return param_name.endswith(".w_0")

    no_bias.pure_in_name = True
    batches = _batches()
    model, reference = _model(), _model()
    optimizer = AdamWDL(LR, parameters=model.parameters(), weight_decay=WEIGHT_DECAY,
                        set_param_lr_fun=None, apply_decay_param_fun=no_bias)
    _train(model, optimizer, WarmupDecayRule(), batches)
    _train(reference, paddle.optimizer.AdamW(LR, parameters=reference.parameters(), weight_decay=WEIGHT_DECAY,
                                             apply_decay_param_fun=lambda n: n.endswith(".w_0")),
           WarmupDecayRule(), batches)
    n_params = len(list(model.parameters()))
    assert sorted(calls) == sorted(p.name for p in model.parameters())  # once each, when built (for str())
    expected = _weights(reference)
    for name, value in _weights(model).items():
        np.testing.assert_allclose(value, expected[name], rtol=1e-6, atol=1e-7, err_msg=name)


# ------------------------ a rule that raises mid-step: no parameter half-updated
class RaisingRule:
    """Decays the weights; raises for ``failing`` (a Paddle name) once ``armed``."""

    def __init__(self) -> None:
        self.failing: str | None = None
        self.armed = False
        self.error = RuntimeError("the decay rule failed")

    def __call__(self, param_name: str) -> bool:
        if self.armed and param_name == self.failing:
            raise self.error
        return param_name.endswith(".w_0")


def _every_tensor(model, optimizer) -> dict[str, np.ndarray]:
    """The parameters, their moments and beta powers (once created), copied, by structured name."""
    tensors = {}
    for name, param in model.named_parameters():
        tensors[f"{name}"] = param.numpy().copy()
        for accumulator in ("moment1", "moment2", "beta1_pow_acc", "beta2_pow_acc"):
            per_param = optimizer._accumulators.get(accumulator, {})
            if param.name in per_param:
                tensors[f"{name}/{accumulator}"] = per_param[param.name].numpy().copy()
    return tensors


PATHS = {
    # a clip class of its own keeps the step on the per-parameter path
    "per-parameter-clip": dict(grad_clip=type("ClipOfItsOwn", (paddle.nn.ClipGradByGlobalNorm,), {})(0.5)),
    "per-parameter": dict(use_multi_tensor=False),
    "per-parameter-groups": dict(use_multi_tensor=False, groups=True),
    "multi-tensor": dict(),
    "multi-tensor-groups": dict(groups=True),
}


@pytest.mark.parametrize("path", list(PATHS))
def test_a_rule_raising_mid_step_changes_nothing_and_propagates(path):
    """The rule raises for the last layer's weight at step 3: the exception is the rule's own,
    and every parameter, moment and beta power is bit-identical to before the step (the first
    layer, updated before the last on the per-parameter path, included). The next step then
    continues as a run that never took the failed step."""
    kwargs = dict(PATHS[path])
    grouped = kwargs.pop("groups", False)
    batches = _batches()
    runs = []
    for _ in range(2):
        model, rule = _model(), RaisingRule()
        rule.failing = model[2].weight.name
        params = list(model.parameters())
        parameters = [{"params": params[:2]}, {"params": params[2:], "learning_rate": 0.5}] if grouped else params
        optimizer = AdamWDL(LR, parameters=parameters, weight_decay=WEIGHT_DECAY,
                            set_param_lr_fun=None, apply_decay_param_fun=rule, **kwargs)
        runs.append((model, rule, optimizer))
    (model, rule, optimizer), (control, _, control_optimizer) = runs
    for x, y in batches[:2]:
        for m, opt in ((model, optimizer), (control, control_optimizer)):
            paddle.nn.functional.mse_loss(m(x), y).backward()
            opt.step()
            opt.clear_grad()
    assert (optimizer.last_update_path.path != "per_parameter") == path.startswith("multi-tensor")

    x, y = batches[2]
    paddle.nn.functional.mse_loss(model(x), y).backward()
    before = _every_tensor(model, optimizer)
    assert len(before) == 5 * len(params)  # each parameter, its two moments and two beta powers
    rule.armed = True
    with pytest.raises(RuntimeError) as raised:
        optimizer.step()
    assert raised.value is rule.error
    after = _every_tensor(model, optimizer)
    assert after.keys() == before.keys()
    for key, value in before.items():
        np.testing.assert_array_equal(after[key], value, err_msg=key)

    rule.armed = False  # the step again, and one more: as the run that never failed
    optimizer.step()
    optimizer.clear_grad()
    paddle.nn.functional.mse_loss(control(x), y).backward()
    control_optimizer.step()
    control_optimizer.clear_grad()
    for x, y in batches[3:4]:
        for m, opt in ((model, optimizer), (control, control_optimizer)):
            paddle.nn.functional.mse_loss(m(x), y).backward()
            opt.step()
            opt.clear_grad()
    expected = _every_tensor(control, control_optimizer)
    for key, value in _every_tensor(model, optimizer).items():
        np.testing.assert_array_equal(value, expected[key], err_msg=key)


def test_the_per_parameter_path_asks_the_rule_once_per_parameter_and_update():
    """Asked before the updates, not again during them: once per parameter and step (and once
    when built), as AdamW asks, with AdamW's numbers under grad_clip over several steps."""
    batches = _batches()
    ours, theirs = _model(), _model()
    ours_rule, theirs_rule = WarmupDecayRule(), WarmupDecayRule()
    clip = paddle.nn.ClipGradByGlobalNorm(0.5)
    _train(ours, AdamWDL(LR, parameters=ours.parameters(), weight_decay=WEIGHT_DECAY, grad_clip=clip,
                         set_param_lr_fun=None, apply_decay_param_fun=ours_rule), ours_rule, batches)
    _train(theirs, paddle.optimizer.AdamW(LR, parameters=theirs.parameters(), weight_decay=WEIGHT_DECAY,
                                          grad_clip=clip, apply_decay_param_fun=theirs_rule), theirs_rule, batches)
    n_params = len(list(ours.parameters()))
    assert ours_rule.calls == (STEPS + 1) * n_params
    expected = _weights(theirs)
    for name, value in _weights(ours).items():
        np.testing.assert_allclose(value, expected[name], rtol=1e-6, atol=1e-7, err_msg=name)


@pytest.mark.parametrize("use_multi_tensor", [False, None], ids=["per-parameter", "multi-tensor"])
def test_a_rule_pure_in_the_name_given_after_construction_and_raising_changes_nothing(use_multi_tensor):
    """A ``pure_in_name`` rule is asked about each parameter once while the optimizer holds it: a
    rule given after construction (as ``paddle.optimizer.AdamW`` reads ``_apply_decay_param_fun``
    at every update) is asked at the next update, before anything changes, so one raising for
    the last layer leaves every parameter and moment as it was, its exception propagating."""
    model = _model()
    error = RuntimeError("the decay rule failed")
    failing = model[2].weight.name

    def rule(param_name: str) -> bool:
        if param_name == failing:
            raise error
        return True

    rule.pure_in_name = True
    optimizer = AdamWDL(LR, parameters=model.parameters(), weight_decay=WEIGHT_DECAY, set_param_lr_fun=None,
                        use_multi_tensor=use_multi_tensor)
    x, y = _batches()[0]
    paddle.nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()
    paddle.nn.functional.mse_loss(model(x), y).backward()
    before = _every_tensor(model, optimizer)
    optimizer._apply_decay_param_fun = rule
    with pytest.raises(RuntimeError) as raised:
        optimizer.step()
    assert raised.value is error
    after = _every_tensor(model, optimizer)
    for key, value in before.items():
        np.testing.assert_array_equal(after[key], value, err_msg=key)


class SecondWeightLaterRule:
    """The first layer's weight decays from the start, the second layer's only from
    step ``WARMUP`` on, the biases never: answers ``1``/``0``/``None``, not bools, as
    AdamW reads any truthy value. The answer that changes is not the first one asked."""

    def __init__(self) -> None:
        self.step = 0
        self.calls = 0

    def __call__(self, param_name: str) -> int | None:
        self.calls += 1
        if param_name.endswith(".b_0"):
            return None
        return 1 if param_name.startswith("linear_0.") else int(self.step >= WARMUP)


def test_an_answer_that_changes_mid_list_is_taken_at_that_step_and_each_name_asked_once():
    batches = _batches()
    ours, theirs = _model(), _model()
    ours_rule, theirs_rule = SecondWeightLaterRule(), SecondWeightLaterRule()
    optimizer = _adamwdl(ours, ours_rule)
    # the float64 reference takes our gradients, decaying what the rule says at each step
    reference = ReferenceAdamW({p.name: p.numpy() for p in ours.parameters()}, weight_decay=WEIGHT_DECAY)
    reference_rule = SecondWeightLaterRule()
    paths = []
    for step, (x, y) in enumerate(batches):
        paddle.nn.functional.mse_loss(ours(x), y).backward()
        grads = {p.name: p.grad.numpy() for p in ours.parameters()}
        reference_rule.step = step
        reference.step(grads, LR, decay=lambda name: bool(reference_rule(name)))
        optimizer.step()
        paths.append(optimizer.last_update_path.path)
        optimizer.clear_grad()
        ours_rule.step += 1
        for param in ours.parameters():
            np.testing.assert_allclose(param.numpy(), reference.params[param.name], rtol=1e-5, atol=1e-6,
                                       err_msg=f"{param.name} after step {step + 1}")
    _train(theirs, paddle.optimizer.AdamW(LR, parameters=theirs.parameters(), weight_decay=WEIGHT_DECAY,
                                          apply_decay_param_fun=theirs_rule), theirs_rule, batches)
    expected = _weights(theirs)
    for name, value in _weights(ours).items():
        np.testing.assert_allclose(value, expected[name], rtol=1e-6, atol=1e-7, err_msg=name)
    assert "per_parameter" not in paths  # every step on the multi-tensor path, the change included
    n_params = len(list(ours.parameters()))
    assert theirs_rule.calls == STEPS * n_params
    assert ours_rule.calls == (STEPS + 1) * n_params


def test_a_rule_that_changes_while_a_parameter_has_no_gradient_gives_adamw_numbers():
    """At the step the rule's answer changes, the first layer takes no part in the loss (its
    gradients cleared to None): the other parameters get the answers asked for them."""

    def model_without_first_bias() -> paddle.nn.Layer:
        paddle.seed(5)
        with paddle.utils.unique_name.guard():
            return paddle.nn.Sequential(paddle.nn.Linear(4, 5, bias_attr=False), paddle.nn.Tanh(),
                                        paddle.nn.Linear(5, 2))

    def train(model, optimizer, rule) -> None:
        for step, (x, y) in enumerate(_batches()):
            inputs = x if step != WARMUP else paddle.ones([6, 5])
            layers = model if step != WARMUP else model[2]  # the first Linear gets no gradient
            paddle.nn.functional.mse_loss(layers(inputs), y).backward()
            optimizer.step()
            optimizer.clear_grad(set_to_zero=False)
            rule.step += 1

    ours, theirs = model_without_first_bias(), model_without_first_bias()
    ours_rule, theirs_rule = WarmupDecayRule(), WarmupDecayRule()
    train(ours, _adamwdl(ours, ours_rule), ours_rule)
    train(theirs, paddle.optimizer.AdamW(LR, parameters=theirs.parameters(), weight_decay=WEIGHT_DECAY,
                                         apply_decay_param_fun=theirs_rule), theirs_rule)
    expected = _weights(theirs)
    for name, value in _weights(ours).items():
        np.testing.assert_allclose(value, expected[name], rtol=1e-6, atol=1e-7, err_msg=name)
