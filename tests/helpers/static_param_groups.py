"""Parameter groups in a static program, run in a fresh process.

``tests/layer_decay/test_param_groups.py`` runs this once with Paddle 3's default PIR
program and once with the legacy program (``FLAGS_enable_pir_api=0`` in the
environment: Paddle reads it once, at import)::

    python tests/helpers/static_param_groups.py OUT.npz

It saves under ``error`` what ``AdamW(parameters=groups).minimize(loss)``
raises (``"<type>: <message>"``, or ``""`` if nothing), under
``adamwdl_error`` what ``AdamWDL(parameters=groups)`` raises (and under
``adamwdl_minimize_error`` what ``minimize`` in a static program raises for
an ``AdamWDL`` built with groups in dygraph), then trains the
documented static recipe for a few steps: each parameter's lr factor set to
its group's ``learning_rate`` and ``apply_decay_param_fun`` choosing the
decayed groups. It saves the structured-name weights before (``init/<name>``)
and after (``final/<name>``) and the gradient of every step
(``grad/<step>/<name>``), for a float64 reference to replay.
"""
from __future__ import annotations

import sys

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle import nn

from paddle_llrd import AdamWDL, layer_decay_param_groups

WIDTH, CLASSES, STEPS = 6, 3, 3
LR, DECAY, WEIGHT_DECAY = 0.05, 0.6, 0.2


class Block(nn.Layer):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.mlp = nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        return x + F.relu(self.mlp(self.norm(x)))


class Model(nn.Layer):
    def __init__(self):
        super().__init__()
        self.blocks = nn.LayerList([Block() for _ in range(2)])
        self.head = nn.Linear(WIDTH, CLASSES)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def build(main, startup):
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [4, WIDTH], "float32")
        y = paddle.static.data("y", [4], "int64")
        model = Model()
        loss = F.cross_entropy(model(x), y)
    return model, loss


def groups_error(optimizer_class=paddle.optimizer.AdamW) -> str:
    main, startup = paddle.static.Program(), paddle.static.Program()
    model, loss = build(main, startup)
    with paddle.static.program_guard(main, startup):
        try:
            optimizer = optimizer_class(learning_rate=LR, parameters=layer_decay_param_groups(model, DECAY, WEIGHT_DECAY))
            optimizer.minimize(loss)
        except Exception as exc:  # recorded, compared with the docs by the test
            return f"{type(exc).__name__}: {exc}"
    return ""


def train_recipe(out: dict) -> None:
    main, startup = paddle.static.Program(), paddle.static.Program()
    model, loss = build(main, startup)
    with paddle.static.program_guard(main, startup):
        groups = layer_decay_param_groups(model, DECAY, WEIGHT_DECAY)
        # the recipe of docs/layer_maps.rst
        for group in groups:
            for param in group["params"]:
                param.optimize_attr["learning_rate"] = group["learning_rate"]
        decayed = {param.name for group in groups if group["weight_decay"] > 0 for param in group["params"]}
        optimizer = paddle.optimizer.AdamW(
            learning_rate=LR, parameters=[param for group in groups for param in group["params"]],
            weight_decay=WEIGHT_DECAY, apply_decay_param_fun=lambda name: name in decayed,
        )
        _, params_grads = optimizer.minimize(loss)
    names = {param.name: name for name, param in model.named_parameters()}
    executor = paddle.static.Executor(paddle.CPUPlace())
    executor.run(startup)
    scope = paddle.static.global_scope()

    def read(prefix):
        for paddle_name, name in names.items():
            out[f"{prefix}/{name}"] = np.array(scope.find_var(paddle_name).get_tensor())

    read("init")
    rng = np.random.default_rng(0)
    for step in range(STEPS):
        feed = {"x": rng.normal(size=(4, WIDTH)).astype("float32"), "y": rng.integers(0, CLASSES, size=(4,))}
        fetched = executor.run(main, feed=feed, fetch_list=[grad for _, grad in params_grads])
        for (param, _), value in zip(params_grads, fetched):
            out[f"grad/{step}/{names[param.name]}"] = value
    read("final")


def minimize_error(dygraph_optimizer) -> str:
    main, startup = paddle.static.Program(), paddle.static.Program()
    _, loss = build(main, startup)
    with paddle.static.program_guard(main, startup):
        try:
            dygraph_optimizer.minimize(loss)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
    return ""


def main(path: str) -> None:
    dygraph_model = Model()
    built_in_dygraph = AdamWDL(learning_rate=LR, parameters=layer_decay_param_groups(dygraph_model, DECAY, WEIGHT_DECAY))
    paddle.enable_static()
    out = {
        "error": np.array(groups_error()),
        "adamwdl_error": np.array(groups_error(AdamWDL)),
        "adamwdl_minimize_error": np.array(minimize_error(built_in_dygraph)),
    }
    train_recipe(out)
    np.savez(path, **out)


if __name__ == "__main__":
    main(sys.argv[1])
