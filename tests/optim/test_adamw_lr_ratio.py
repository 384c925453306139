"""``paddle_llrd.AdamW``: ``paddle.optimizer.AdamW``'s signature and numbers, with
``lr_ratio`` on every device (docs/adamwdl.rst, its ``paddle_llrd.AdamW`` section).

Paddle runs its ``lr_ratio`` test (``TestAdamWOpLayerwiseLR`` in
``test/legacy_test/test_adamw_op.py``) only on CUDA; on CPU its AdamW raises
``NotImplementedError: 'lr_ratio' is unimplemented in CPU``. Here the same
scenario runs on CPU against Paddle's NumPy reference ``adamw_step``, written
out below in float64 (the ratio scales the lr of the decay and of the step).
"""
from __future__ import annotations

import inspect
import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import numpy as np
import paddle
import pytest
from paddle import nn

from paddle_llrd import AdamW, AdamWDL
from decay_routes import separate_decay


def adamw_step(param, grad, moment1, moment2, lr, beta1_pow, beta2_pow, *,
               lr_ratio=1.0, coeff=0.01, with_decay=True, beta1=0.9, beta2=0.999, epsilon=1e-8):
    """Paddle's reference ``adamw_step`` (test_adamw_op.py), in float64: ``lr *= lr_ratio``,
    ``param *= 1 - lr * coeff``, then Adam with ``lr`` and the beta powers of this step."""
    lr = lr * lr_ratio
    if with_decay:
        param = param * (1.0 - lr * coeff)
    moment1 = beta1 * moment1 + (1 - beta1) * grad
    moment2 = beta2 * moment2 + (1 - beta2) * np.square(grad)
    denom = np.sqrt(moment2) / np.sqrt(1.0 - beta2_pow) + epsilon
    param = param + (moment1 / denom) * (-(lr / (1.0 - beta1_pow)))
    return param, moment1, moment2


def simple_lr_setting(param, decay_rate, n_layers):
    """Paddle's ``simple_lr_setting``: the ratio from the (fixed) parameter name's layer."""
    if "fc_0" in param.name or "linear_1" in param.name:
        depth = int(param.name.split("_")[2]) + 1
    elif "fc_1" in param.name or "linear_2" in param.name:
        depth = int(param.name.split("_")[2]) + 2
    else:
        depth = 0
    return decay_rate ** (n_layers + 2 - depth)


def _layerwise_scenario(general: bool = False, steps: int = 5):
    """TestAdamWOpLayerwiseLR.test_adamw_op_dygraph, on this machine's device (CPU here)."""
    np.random.seed(2022)
    paddle.seed(2022)
    linear1 = nn.Linear(13, 8, bias_attr=nn.initializer.Constant(value=1.0))
    linear2 = nn.Linear(8, 5, bias_attr=nn.initializer.Constant(value=1.0))
    linear1.weight.name, linear1.bias.name = "linear_1.w_0", "linear_1.b_0"
    linear2.weight.name, linear2.bias.name = "linear_2.w_0", "linear_2.b_0"
    params = [linear1.weight, linear1.bias, linear2.weight, linear2.bias]
    lr_ratio = partial(simple_lr_setting, decay_rate=0.8, n_layers=2)
    learning_rate, weight_decay, beta1, beta2 = 0.001, 0.01, 0.9, 0.999
    opt = AdamW(
        learning_rate=learning_rate,
        parameters=[{"params": linear1.parameters()}, {"params": linear2.parameters()}],
        apply_decay_param_fun=lambda name: True,
        weight_decay=weight_decay,
        lr_ratio=lr_ratio,
    )
    separate_decay(opt, general)
    reference = {p.name: [p.numpy().astype(np.float64), 0.0, 0.0] for p in params}
    for t in range(1, steps + 1):
        a = paddle.to_tensor(np.random.uniform(-1, 1, (2, 13)).astype("float32"))
        paddle.mean(linear2(linear1(a))).backward()
        for p in params:
            value, m1, m2 = reference[p.name]
            reference[p.name] = adamw_step(
                value, p.grad.numpy().astype(np.float64), m1, m2, learning_rate, beta1**t, beta2**t,
                lr_ratio=lr_ratio(p), coeff=weight_decay, beta1=beta1, beta2=beta2,
            )
        opt.step()
        opt.clear_grad()
        for p in params:
            np.testing.assert_allclose(p.numpy(), reference[p.name][0], rtol=1e-6, atol=1e-7, err_msg=f"{p.name} step {t}")
    return params, reference


@pytest.mark.parametrize("general", [False, True], ids=["fused", "general"])
def test_paddles_layerwise_lr_scenario_matches_its_reference_on_cpu(general):
    params, reference = _layerwise_scenario(general)
    # the ratios were not 1: the two layers moved by different amounts than without them
    assert {round(simple_lr_setting(p, 0.8, 2), 3) for p in params} == {0.512, 0.64}


def test_the_ratio_scales_the_decay_unlike_adamwdl():
    """Zero gradients, lr 0.1, weight decay 0.5, ratio 0.5, one step: AdamW decays by
    1 - 0.1*0.5*0.5 = 0.975 (Paddle's semantics), AdamWDL by 1 - 0.1*0.5 = 0.95."""
    factors = {}
    for cls, kwargs in ((AdamW, {"lr_ratio": lambda p: 0.5}),
                        (AdamWDL, {"set_param_lr_fun": lambda decay, names, n, p: 0.5})):
        linear = nn.Linear(3, 2)
        before = linear.weight.numpy().astype(np.float64)
        opt = cls(learning_rate=0.1, parameters=linear.parameters(), weight_decay=0.5, **kwargs)
        (linear(paddle.ones([1, 3])) * 0.0).sum().backward()
        opt.step()
        factors[cls.__name__] = linear.weight.numpy() / before
    np.testing.assert_allclose(factors["AdamW"], 0.975, rtol=1e-6)
    np.testing.assert_allclose(factors["AdamWDL"], 0.95, rtol=1e-6)


def test_without_lr_ratio_it_is_paddles_adamw_bit_for_bit():
    """Groups with their own lr factor and weight decay, an lr scheduler, clipping and a
    decay rule: 6 steps of paddle_llrd.AdamW and paddle.optimizer.AdamW give equal weights."""
    results = []
    for cls in (AdamW, paddle.optimizer.AdamW):
        paddle.seed(5)
        first, second = nn.Linear(6, 5), nn.Linear(5, 3)
        scheduler = paddle.optimizer.lr.StepDecay(0.05, step_size=2, gamma=0.5)
        opt = cls(
            learning_rate=scheduler,
            parameters=[{"params": first.parameters(), "learning_rate": 0.5},
                        {"params": second.parameters(), "weight_decay": 0.2, "beta1": 0.8}],
            weight_decay=0.1,
            apply_decay_param_fun=lambda name: "b_" not in name,
            grad_clip=nn.ClipGradByGlobalNorm(1.0),
        )
        rng = np.random.default_rng(0)
        for _ in range(6):
            x = paddle.to_tensor(rng.standard_normal((4, 6)).astype("float32"))
            second(paddle.tanh(first(x))).pow(2).mean().backward()
            opt.step()
            opt.clear_grad()
            scheduler.step()
        results.append([p.numpy() for p in (*first.parameters(), *second.parameters())])
    for ours, paddles in zip(*results):
        np.testing.assert_array_equal(ours, paddles)


def test_signature_is_paddles():
    ours = inspect.signature(AdamW.__init__).parameters
    paddles = inspect.signature(paddle.optimizer.AdamW.__init__).parameters
    assert list(ours) == list(paddles)
    for name, parameter in paddles.items():
        assert ours[name].kind == parameter.kind and ours[name].default == parameter.default, name


@pytest.mark.parametrize("general", [False, True], ids=["fused", "general"])
def test_a_ratio_of_zero_freezes_the_parameter(general):
    """lr_p = 0: no decay (1 - 0 * coeff) and no step, on both decay paths."""
    linear = nn.Linear(3, 2)
    before = linear.weight.numpy().copy()
    opt = AdamW(learning_rate=0.1, parameters=linear.parameters(), weight_decay=0.5,
                lr_ratio=lambda p: 0.0 if p is linear.weight else 1.0)
    separate_decay(opt, general)
    for _ in range(3):
        linear(paddle.ones([2, 3])).sum().backward()
        opt.step()
        opt.clear_grad()
    np.testing.assert_array_equal(linear.weight.numpy(), before)


def test_a_ratio_function_pure_in_name_is_asked_once_per_parameter_others_at_every_update():
    calls = {"pure": 0, "other": 0}

    def pure(param):
        calls["pure"] += 1
        return 0.5

    pure.pure_in_name = True

    def other(param):
        calls["other"] += 1
        return 0.5

    for fn in (pure, other):
        linear = nn.Linear(3, 2)
        opt = AdamW(learning_rate=0.1, parameters=linear.parameters(), lr_ratio=fn)
        for _ in range(3):
            linear(paddle.ones([2, 3])).sum().backward()
            opt.step()
            opt.clear_grad()
    assert calls == {"pure": 2, "other": 6}


@pytest.mark.parametrize(
    "lr_ratio, error, expected",
    [
        (0.5, TypeError, "AdamW: `lr_ratio` must be callable"),
        (lambda p: -1.0, ValueError, "AdamW: `lr_ratio` returned -1.0 for"),
        (lambda p: float("nan"), ValueError, "AdamW: `lr_ratio` returned nan for"),
        (lambda p: None, TypeError, "AdamW: `lr_ratio` returned NoneType None for"),
        (lambda p: "0.5", TypeError, "AdamW: `lr_ratio` returned str '0.5' for"),
    ],
)
def test_bad_lr_ratio_is_named_and_changes_nothing(lr_ratio, error, expected):
    linear = nn.Linear(3, 2)
    before = [p.numpy().copy() for p in linear.parameters()]
    with pytest.raises(error, match=expected.replace("(", r"\(")):
        opt = AdamW(learning_rate=0.1, parameters=linear.parameters(), lr_ratio=lr_ratio)
        linear(paddle.ones([2, 3])).sum().backward()
        opt.step()
    for param, value in zip(linear.parameters(), before):
        np.testing.assert_array_equal(param.numpy(), value)


def _scope_value(name: str) -> np.ndarray:
    return np.array(paddle.static.global_scope().find_var(name).get_tensor())


@pytest.mark.parametrize("weight_decay", [0.01, 5.0], ids=["paddles", "strong"])
def test_paddles_static_layerwise_scenario_on_cpu(weight_decay):
    """TestAdamWOpLayerwiseLR.test_adamw_op (a static program with minimize), on CPU: each of
    5 runs against adamw_step from the weights before it, the moments carried in float64.
    Paddle's weight decay 0.01 at lr 1e-4 decays by 1e-6 a run, within float32 rounding of
    the check; 5.0 makes a decay with the wrong lr (AdamWDL's) visible."""
    learning_rate, beta1, beta2, epsilon = 0.0001, 0.85, 0.95, 1e-8
    lr_ratio = partial(simple_lr_setting, decay_rate=0.8, n_layers=2)
    paddle.enable_static()
    try:
        train_prog, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(train_prog, startup), paddle.utils.unique_name.guard():
            x = paddle.static.data(name="x", shape=[None, 10], dtype="float32")
            y = paddle.static.data(name="y", shape=[None, 1], dtype="float32")
            linear1 = nn.Linear(10, 32, weight_attr=paddle.ParamAttr(name="linear_0.w_0"),
                                bias_attr=paddle.ParamAttr(name="linear_0.b_0",
                                                           initializer=nn.initializer.Constant(1.0)))
            linear2 = nn.Linear(32, 1, weight_attr=paddle.ParamAttr(name="linear_1.w_0"),
                                bias_attr=paddle.ParamAttr(name="linear_1.b_0",
                                                           initializer=nn.initializer.Constant(1.0)))
            loss = paddle.mean(paddle.nn.functional.square_error_cost(linear2(linear1(x)), y))
            opt = AdamW(learning_rate=learning_rate, beta1=beta1, beta2=beta2, weight_decay=weight_decay,
                        epsilon=epsilon, lr_ratio=lr_ratio)
            _, params_grads = opt.minimize(loss)
        params = [p for p, _ in params_grads]
        grads = [g for _, g in params_grads]
        names = ["linear_0.w_0", "linear_0.b_0", "linear_1.w_0", "linear_1.b_0"]
        params = sorted(params, key=lambda p: names.index(p.name))
        grads = [dict((p.name, g) for p, g in params_grads)[p.name] for p in params]
        ratios = [lr_ratio(p) for p in params]
        assert sorted({round(r, 4) for r in ratios}) == [0.4096, 0.512]  # linear_0: 0.8**4, linear_1: 0.8**3
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe.run(startup)
        rng = np.random.default_rng(1)
        moments = [(0.0, 0.0) for _ in params]
        for t in range(1, 6):
            feed = {"x": rng.random((8, 10)).astype("float32"), "y": rng.random((8, 1)).astype("float32")}
            before = [_scope_value(name) for name in names]
            grad_values = exe.run(train_prog, feed=feed, fetch_list=grads)
            after = [_scope_value(name) for name in names]
            for i, ratio in enumerate(ratios):
                expected, m1, m2 = adamw_step(
                    before[i].astype(np.float64), grad_values[i].astype(np.float64), *moments[i],
                    learning_rate, beta1**t, beta2**t, lr_ratio=ratio, coeff=weight_decay,
                    beta1=beta1, beta2=beta2, epsilon=epsilon,
                )
                moments[i] = (m1, m2)
                np.testing.assert_allclose(after[i], expected, rtol=1e-6, atol=1e-7, err_msg=f"param {i} run {t}")
    finally:
        paddle.disable_static()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_lr_ratio_with_half_precision_master_weights_on_cpu(dtype):
    """multi_precision with float16/bfloat16 parameters, where Paddle has neither a CPU kernel
    nor CPU lr_ratio: the float32 master weights follow adamw_step in float64 for 4 steps, and
    the parameters are their casts."""
    paddle.seed(3)
    linear = nn.Linear(4, 3)
    linear.to(dtype=dtype)
    params = list(linear.parameters())
    ratios = {params[0].name: 0.5, params[1].name: 0.25}
    opt = AdamW(learning_rate=0.01, parameters=params, weight_decay=0.3, multi_precision=True,
                lr_ratio=lambda p: ratios[p.name])
    reference = {p.name: [p.astype("float32").numpy().astype(np.float64), 0.0, 0.0] for p in params}
    rng = np.random.default_rng(2)
    for t in range(1, 5):
        x = paddle.to_tensor(rng.standard_normal((2, 4)).astype("float32"))
        # CPU has no half-precision matmul: the forward in float32 through casts
        out = paddle.matmul(x, linear.weight.astype("float32")) + linear.bias.astype("float32")
        out.pow(2).mean().backward()
        for p in params:
            value, m1, m2 = reference[p.name]
            reference[p.name] = adamw_step(value, p.grad.astype("float32").numpy().astype(np.float64), m1, m2,
                                           0.01, 0.9**t, 0.999**t, lr_ratio=ratios[p.name], coeff=0.3)
        opt.step()
        opt.clear_grad()
    for p in params:
        master = opt._master_weights[p.name]
        np.testing.assert_allclose(master.numpy(), reference[p.name][0], rtol=1e-5, atol=1e-6, err_msg=p.name)
        np.testing.assert_array_equal(p.astype("float32").numpy(), master.astype(dtype).astype("float32").numpy())


TO_STATIC_SCRIPT = """
import sys
import numpy as np
import paddle
from paddle_llrd import AdamW

paddle.seed(4)
model = paddle.nn.Linear(3, 2)
ratios = {model.weight.name: 0.5, model.bias.name: 0.25}
optimizer = AdamW(learning_rate=0.05, parameters=model.parameters(), weight_decay=0.2,
                  lr_ratio=lambda p: ratios[p.name])
np.savez(sys.argv[1] + "/start.npz", weight=model.weight.numpy(), bias=model.bias.numpy())


@paddle.jit.to_static
def train_step(x, y):
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    optimizer.clear_grad()
    return loss


data = np.load(sys.argv[1] + "/data.npz")
for x, y in zip(data["x"], data["y"]):
    train_step(paddle.to_tensor(x), paddle.to_tensor(y))
np.savez(sys.argv[1] + "/end.npz", weight=model.weight.numpy(), bias=model.bias.numpy())
"""


def test_to_static_step_with_a_module_global_optimizer_follows_adamw_step(tmp_path):
    """As a user writes it, in a fresh process: a to_static train step over the module-global
    AdamW(lr_ratio=...), 3 steps, against adamw_step with the MSE gradient written out (float64)."""
    rng = np.random.default_rng(6)
    xs, ys = rng.standard_normal((3, 4, 3)).astype("float32"), rng.standard_normal((3, 4, 2)).astype("float32")
    np.savez(tmp_path / "data.npz", x=xs, y=ys)
    script = tmp_path / "train.py"
    script.write_text(TO_STATIC_SCRIPT)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], env=env, capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    start, end = np.load(tmp_path / "start.npz"), np.load(tmp_path / "end.npz")
    weight, bias = start["weight"].astype(np.float64), start["bias"].astype(np.float64)
    state = {"weight": (0.0, 0.0), "bias": (0.0, 0.0)}
    for t, (x, y) in enumerate(zip(xs.astype(np.float64), ys.astype(np.float64)), start=1):
        residual = 2.0 * (x @ weight + bias - y) / y.size  # d mean((xW + b - y)^2) / d out
        grads = {"weight": x.T @ residual, "bias": residual.sum(axis=0)}
        for name, ratio in (("weight", 0.5), ("bias", 0.25)):
            value = weight if name == "weight" else bias
            value, m1, m2 = adamw_step(value, grads[name], *state[name], 0.05, 0.9**t, 0.999**t,
                                       lr_ratio=ratio, coeff=0.2)
            state[name] = (m1, m2)
            if name == "weight":
                weight = value
            else:
                bias = value
    np.testing.assert_allclose(end["weight"], weight, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(end["bias"], bias, rtol=1e-5, atol=1e-6)
