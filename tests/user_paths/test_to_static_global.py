"""``paddle.jit.to_static`` train steps with AdamWDL, written as a user writes them (docs/execution_modes.rst).

Each scenario is a script run in its own fresh Python process, with the
optimizer a module global (as in every training script: this failed with
``HasNoAttributeError: SuperVariable ... has no attribute _parameter_list``)
and, in another process, a closure variable of the function that builds the
step. No eager warm-up step, Paddle's default translator (SOT). The weights
after the last step (and the EMA's shadows, the weight-decay schedule's
position) are checked against a float64 NumPy run of the same steps written
out below: the model is a chain of ``Linear`` layers, whose gradients
:func:`_gradients` computes by hand, and :func:`_adamw_step` is AdamWDL's
documented update.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
STEPS = 4
BATCH, WIDTH = 8, 4
LR = 0.01
BETA1, BETA2, EPSILON = 0.9, 0.999, 1e-8
# Parameter order of the model below, by structured name.
LAYERS = ("embeddings", "encoder.layers.0", "encoder.layers.1", "classifier")

MODEL = """
import json

import numpy as np
import paddle

paddle.seed(2024)
rng = np.random.RandomState(0)
batches = [
    (rng.randn({batch}, {width}).astype("float32"), rng.randn({batch}, 1).astype("float32"))
    for _ in range({steps})
]


class Encoder(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.layers = paddle.nn.LayerList([paddle.nn.Linear({width}, {width}) for _ in range(2)])


class Net(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.embeddings = paddle.nn.Linear({width}, {width})
        self.encoder = Encoder()
        self.classifier = paddle.nn.Linear({width}, 1)

    def forward(self, x):
        h = self.embeddings(x)
        for layer in self.encoder.layers:
            h = layer(h)
        return self.classifier(h)


model = Net()
initial = {{name: p.numpy().astype("float64").tolist() for name, p in model.named_parameters()}}
"""

RUN = """
losses = []
for x, y in batches:
    losses.append(float(train_step(paddle.to_tensor(x), paddle.to_tensor(y))))
{after_step}
result = {{
    "initial": initial,
    "final": {{name: p.numpy().astype("float64").tolist() for name, p in model.named_parameters()}},
    "losses": losses,
}}
{report}
print("RESULT " + json.dumps(result))
"""


@dataclass
class Scenario:
    """One documented pattern: how the script builds the optimizer and what its step does."""

    setup: str
    step: str = "loss.backward()\nopt.step()\nopt.clear_grad()"
    after_step: str = ""
    report: str = ""
    captured: tuple[str, ...] = ("model", "opt")
    # per structured name: (ratio r_p, lr factor s_p, weight decay of step t)
    ratio: Callable[[str], float] = lambda name: 1.0
    lr_factor: Callable[[str], float] = lambda name: 1.0
    weight_decay: Callable[[str, int], float] = lambda name, t: 0.01
    lr: Callable[[int], float] = lambda t: LR
    ema_decay: float | None = None
    extra_checks: list[str] = field(default_factory=list)


def _layer_ratio(decay: float, n_layers: int = 2) -> Callable[[str], float]:
    """``layerwise_lr_decay``'s documented rule: embeddings ``d**(n+1)``, block i ``d**(n-i)``, the rest 1."""

    def ratio(name: str) -> float:
        if name.startswith("embeddings"):
            return decay ** (n_layers + 1)
        if name.startswith("encoder.layers."):
            return decay ** (n_layers - int(name.split(".")[2]))
        return 1.0

    return ratio


def _group_lr(decay: float) -> Callable[[str], float]:
    """``layer_decay_param_groups``'s rule: ``decay ** (n_layers + 1 - layer_id)``, ids 0 (embeddings) to 3."""
    ids = {layer: index for index, layer in enumerate(LAYERS)}
    return lambda name: decay ** (3 - ids[name.rsplit(".", 1)[0]])


def _weights_only(coeff: float) -> Callable[[str, int], float]:
    return lambda name, t: coeff if name.endswith("weight") else 0.0


def _linear_warmup(t: int) -> float:
    """LinearDecayWithWarmup(0.02, total_steps=6, warmup=2) at step t: warm up over 2 steps, then linear to 0 at 6."""
    return 0.02 * t / 2 if t < 2 else 0.02 * (6 - t) / 4


SCENARIOS = {
    "defaults": Scenario(
        setup="from paddle_llrd import AdamWDL\nopt = AdamWDL(learning_rate=0.01, parameters=model.parameters())",
    ),
    "no_ratio_function": Scenario(
        setup=(
            "from paddle_llrd import AdamWDL\n"
            "opt = AdamWDL(learning_rate=0.01, parameters=model.parameters(), weight_decay=0.05,\n"
            "              set_param_lr_fun=None, apply_decay_param_fun=lambda n: n.endswith('.w_0'))"
        ),
        weight_decay=_weights_only(0.05),
    ),
    "layer_decay": Scenario(
        setup=(
            "from paddle_llrd import AdamWDL\n"
            "name_dict = {p.name: n for n, p in model.named_parameters()}\n"
            "opt = AdamWDL(learning_rate=0.01, parameters=model.parameters(), weight_decay=0.05,\n"
            "              layerwise_decay=0.8, n_layers=2, name_dict=name_dict,\n"
            "              apply_decay_param_fun=lambda n: n.endswith('.w_0'))"
        ),
        ratio=_layer_ratio(0.8),
        weight_decay=_weights_only(0.05),
    ),
    "lr_scheduler": Scenario(
        setup=(
            "from paddle_llrd import AdamWDL, LinearDecayWithWarmup\n"
            "scheduler = LinearDecayWithWarmup(0.02, total_steps=6, warmup=2)\n"
            "opt = AdamWDL(learning_rate=scheduler, parameters=model.parameters())"
        ),
        after_step="    scheduler.step()",
        lr=_linear_warmup,
    ),
    "weight_decay_schedule": Scenario(
        setup=(
            "from paddle_llrd import AdamWDL, WeightDecaySchedule\n"
            "opt = AdamWDL(learning_rate=0.01, parameters=model.parameters(),\n"
            "              weight_decay=WeightDecaySchedule(0.0, 0.2, total_steps=4, style='linear'))"
        ),
        report='result["schedule_step"] = opt.weight_decay_schedule.current_step',
        weight_decay=lambda name, t: 0.2 * min(t, 4) / 4,
        extra_checks=["schedule_step"],
    ),
    "ema_update": Scenario(
        setup=(
            "from paddle_llrd import AdamWDL, ExponentialMovingAverage\n"
            "opt = AdamWDL(learning_rate=0.01, parameters=model.parameters())\n"
            "ema = ExponentialMovingAverage(model, decay=0.75)\n"
            "ema.register()"
        ),
        step="loss.backward()\nopt.step()\nopt.clear_grad()\nema.update()",
        report='result["shadow"] = {n: s.numpy().astype("float64").tolist() for n, s in ema.shadow.items()}',
        captured=("model", "opt", "ema"),
        ema_decay=0.75,
    ),
    "param_groups": Scenario(
        setup=(
            "from paddle_llrd import AdamWDL, layer_decay_param_groups\n"
            "groups = layer_decay_param_groups(model, 0.5, weight_decay=0.05)\n"
            "opt = AdamWDL(learning_rate=0.01, parameters=groups)"
        ),
        lr_factor=_group_lr(0.5),
        weight_decay=_weights_only(0.05),
    ),
    "stateful_ratio_function": Scenario(
        # Asked at every update, as in eager mode: a translated (and cached) function would not be.
        setup=(
            "from paddle_llrd import AdamWDL\n"
            "calls = []\n"
            "def halve_the_head(layerwise_decay, name_dict, n_layers, param):\n"
            "    calls.append(param.name)\n"
            "    return 0.5 if name_dict[param.name].startswith('classifier') else 1.0\n"
            "name_dict = {p.name: n for n, p in model.named_parameters()}\n"
            "opt = AdamWDL(learning_rate=0.01, parameters=model.parameters(), name_dict=name_dict,\n"
            "              set_param_lr_fun=halve_the_head)"
        ),
        report='result["ratio_calls"] = len(calls)',
        ratio=lambda name: 0.5 if name.startswith("classifier") else 1.0,
        extra_checks=["ratio_calls"],
    ),
    "minimize": Scenario(
        setup="from paddle_llrd import AdamWDL\nopt = AdamWDL(learning_rate=0.01, parameters=model.parameters())",
        # Paddle's dygraph minimize() applies the gradients backward() made (it runs no backward itself)
        step="loss.backward()\nopt.minimize(loss)\nopt.clear_grad()",
    ),
}


def _script(scenario: Scenario, binding: str) -> str:
    """The user's script: the model, the optimizer, a to_static step, a loop."""
    body = "loss = paddle.nn.functional.mse_loss(model(x), y)\n" + scenario.step + "\nreturn loss"
    step_function = "@paddle.jit.to_static\ndef train_step(x, y):\n" + textwrap.indent(body, "    ")
    if binding == "global":
        step = step_function
    else:
        captured = ", ".join(scenario.captured)
        step = (
            f"def make_train_step({captured}):\n"
            + textwrap.indent(step_function, "    ")
            + "\n    return train_step\n\n\n"
            + f"train_step = make_train_step({captured})"
        )
    return "\n".join(
        [
            MODEL.format(batch=BATCH, width=WIDTH, steps=STEPS),
            scenario.setup,
            "\n",
            step,
            RUN.format(after_step=scenario.after_step, report=scenario.report),
        ]
    )


def _run(script: str, tmp_path: Path) -> dict:
    path = tmp_path / "train.py"
    path.write_text(script)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, f"the script failed:\n{script}\n--- stderr ---\n{done.stderr[-6000:]}"
    return json.loads(lines[-1][len("RESULT "):])


# ------------------------------------------------------------ the reference
def _batches() -> list[tuple[np.ndarray, np.ndarray]]:
    """The script's data, in float64 (the same generator and calls)."""
    rng = np.random.RandomState(0)
    return [
        (rng.randn(BATCH, WIDTH).astype("float32").astype("float64"), rng.randn(BATCH, 1).astype("float32").astype("float64"))
        for _ in range(STEPS)
    ]


def _gradients(params: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray) -> tuple[float, dict[str, np.ndarray]]:
    """MSE loss of the chain of Linear layers (``h @ W + b``) and its gradients, by hand."""
    inputs = []
    h = x
    for layer in LAYERS:
        inputs.append(h)
        h = h @ params[f"{layer}.weight"] + params[f"{layer}.bias"]
    loss = float(np.mean((h - y) ** 2))
    upstream = 2.0 * (h - y) / h.size
    grads = {}
    for layer, h_in in zip(reversed(LAYERS), reversed(inputs)):
        grads[f"{layer}.weight"] = h_in.T @ upstream
        grads[f"{layer}.bias"] = upstream.sum(axis=0)
        upstream = upstream @ params[f"{layer}.weight"].T
    return loss, grads


def _adamw_step(p, g, m, v, t, lr, ratio, lr_factor, coeff):
    r"""AdamWDL's update (the class docstring): decay with :math:`\eta s_p`, Adam step with :math:`\eta s_p r_p`."""
    p = p * (1.0 - lr * lr_factor * coeff)
    m = BETA1 * m + (1 - BETA1) * g
    v = BETA2 * v + (1 - BETA2) * g * g
    correction = np.sqrt(1 - BETA2**t) / (1 - BETA1**t)
    p = p - lr * lr_factor * ratio * correction * m / (np.sqrt(v) + EPSILON * np.sqrt(1 - BETA2**t))
    return p, m, v


def _reference(scenario: Scenario, initial: dict[str, list]) -> dict:
    params = {name: np.asarray(value, dtype="float64") for name, value in initial.items()}
    moments = {name: (np.zeros_like(p), np.zeros_like(p)) for name, p in params.items()}
    shadow = {name: p.copy() for name, p in params.items()}
    losses = []
    for step, (x, y) in enumerate(_batches()):
        loss, grads = _gradients(params, x, y)
        losses.append(loss)
        for name in params:
            m, v = moments[name]
            params[name], m, v = _adamw_step(
                params[name], grads[name], m, v, step + 1, scenario.lr(step),
                scenario.ratio(name), scenario.lr_factor(name), scenario.weight_decay(name, step),
            )
            moments[name] = (m, v)
        if scenario.ema_decay is not None:
            d = scenario.ema_decay
            shadow = {name: d * shadow[name] + (1 - d) * params[name] for name in params}
    return {
        "final": params, "losses": losses, "shadow": shadow, "schedule_step": STEPS,
        "ratio_calls": STEPS * len(params),  # once per parameter and step
    }


@pytest.mark.parametrize("binding", ["global", "closure"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_to_static_step_matches_the_float64_reference(name, binding, tmp_path):
    scenario = SCENARIOS[name]
    result = _run(_script(scenario, binding), tmp_path)
    expected = _reference(scenario, result["initial"])
    assert set(result["final"]) == {f"{layer}.{kind}" for layer in LAYERS for kind in ("weight", "bias")}
    np.testing.assert_allclose(result["losses"], expected["losses"], rtol=1e-5, atol=1e-6)
    for param_name, value in result["final"].items():
        # the weights moved, and as the reference did
        assert not np.allclose(value, result["initial"][param_name], rtol=0, atol=1e-7), param_name
        np.testing.assert_allclose(value, expected["final"][param_name], rtol=1e-5, atol=2e-6, err_msg=param_name)
    if scenario.ema_decay is not None:
        for param_name, value in result["shadow"].items():
            np.testing.assert_allclose(value, expected["shadow"][param_name], rtol=1e-5, atol=2e-6, err_msg=param_name)
    for key in scenario.extra_checks:
        assert result[key] == expected[key], key
