"""What users and frameworks change between steps, each in a training script of its own run in
a fresh process as a user runs it: AdamWDL's default step ends bit for bit where
``paddle.optimizer.AdamW`` ends (no layer ratios) and where ``use_multi_tensor=False`` ends
(layer ratios), weights and ``p.grad`` after every step, and it reports the path it took.

Each scenario is a few lines put into one script (``SCRIPT``): a model with BERT-like
names, an optimizer chosen on the command line, five steps, the scenario's change made
between steps as a user (or fleet's wrappers) would make it. The default step runs it in a
fresh process per configuration; the two references it is held to run it one after the other
in one process of their own.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

SCRIPT = '''
import json
import sys

import numpy as np
import paddle
from paddle_llrd import AdamWDL

KIND, RATIOS, OUT = sys.argv[1], sys.argv[2] == "ratios", sys.argv[3]
WEIGHTS_READ_TRANSPOSED = False


class Block(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.linear = paddle.nn.Linear(8, 8)

    def forward(self, x):
        if WEIGHTS_READ_TRANSPOSED:  # as a model ported from PyTorch's [out, in] layout reads them
            return paddle.tanh(x @ self.linear.weight.T + self.linear.bias)
        return paddle.tanh(self.linear(x))


class Model(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.embeddings = paddle.nn.Embedding(20, 8)
        self.layers = paddle.nn.LayerList([Block(), Block()])
        self.head = paddle.nn.Linear(8, 3)
        self.scale = self.create_parameter([], default_initializer=paddle.nn.initializer.Constant(1.5))

    def forward(self, ids):
        hidden = self.embeddings(ids)
        for block in self.layers:
            hidden = block(hidden)
        return self.head(hidden) * self.scale


paddle.seed(0)
model = Model()
name_dict = {p.name: "encoder." + n if n.startswith("layers.") else n for n, p in model.named_parameters()}
CLIP = %CLIP%
PARAMETERS = %PARAMETERS%
if KIND == "adamw":
    optimizer = paddle.optimizer.AdamW(learning_rate=0.01, parameters=PARAMETERS, weight_decay=0.05, grad_clip=CLIP)
else:
    optimizer = AdamWDL(learning_rate=0.01, parameters=PARAMETERS, weight_decay=0.05, grad_clip=CLIP,
                        layerwise_decay=0.8 if RATIOS else 1.0, n_layers=2, name_dict=name_dict,
                        use_multi_tensor=KIND == "default")
%SETUP%
rng = np.random.default_rng(0)
record = {"paths": []}
for step in range(5):
%CHANGE%
    ids = paddle.to_tensor(rng.integers(0, 20, [4, 5]))
    target = paddle.to_tensor(rng.standard_normal([4, 5, 3]).astype("float32"))
    ((model(ids) - target) ** 2).mean().backward()
%STEP%
    for name, param in model.named_parameters():
        record[f"{name} grad {step}"] = None if param.grad is None else param.grad.numpy().tolist()
        record[f"{name} weight {step}"] = param.numpy().tolist()
    record["paths"].append(list(optimizer.last_update_path) if KIND != "adamw" else None)
%CLEAR%
with open(OUT, "w") as out:
    json.dump(record, out)
'''

ALL = "model.parameters()"
GROUPS = ('[{"params": list(model.parameters())[:3]}, '
          '{"params": list(model.parameters())[3:], "learning_rate": 0.5, "grad_clip": CLIP}]')
STEP = "    optimizer.step()"
CLEAR = "    optimizer.clear_grad()"

SCENARIOS = {
    # fleet's distributed_optimizer assigns the clip this way; a user may clear it or change its class
    "optimizer_clip_assigned_cleared_swapped": dict(CHANGE="""
    if step == 1:
        optimizer._grad_clip = paddle.nn.ClipGradByGlobalNorm(0.05)
    if step == 2:
        optimizer._grad_clip = paddle.nn.ClipGradByNorm(0.01)
    if step == 3:
        optimizer._grad_clip = None
    if step == 4:
        optimizer._grad_clip = paddle.nn.ClipGradByValue(0.002)"""),
    "group_clip_set_and_cleared": dict(PARAMETERS=GROUPS, CLIP="paddle.nn.ClipGradByGlobalNorm(0.05)", CHANGE="""
    if step == 2:
        optimizer._param_groups[1]["grad_clip"] = None
    if step == 3:
        optimizer._param_groups[0]["grad_clip"] = paddle.nn.ClipGradByNorm(0.01)"""),
    "need_clip_turned_off": dict(CLIP="paddle.nn.ClipGradByGlobalNorm(0.05)", CHANGE="""
    if step == 2:
        model.head.weight.need_clip = False"""),
    # Paddle leaves a parameter out of the clip only where its need_clip `is False`: 0 (as from a
    # mask of ints) is clipped
    "need_clip_false_then_zero_then_false": dict(CLIP="paddle.nn.ClipGradByGlobalNorm(0.05)",
                                                 SETUP="model.head.weight.need_clip = False", CHANGE="""
    if step == 2:
        model.head.weight.need_clip = 0
    if step == 4:
        model.head.weight.need_clip = False"""),
    "regularizer_given": dict(CHANGE="""
    if step == 2:
        model.head.weight.regularizer = paddle.regularizer.L2Decay(5.0)
    if step == 4:
        model.head.weight.regularizer = None"""),
    "decay_rule_given_after_construction": dict(CHANGE="""
    if step == 2:
        optimizer._apply_decay_param_fun = lambda name: not name.endswith(".b_0")"""),
    "clip_by_value_then_p_grad_read": dict(CLIP="paddle.nn.ClipGradByValue(0.002)", CHANGE=""),
    "clip_by_norm_gradients_carried_past_a_step": dict(CLIP="paddle.nn.ClipGradByNorm(0.01)", CHANGE="",
                                                       CLEAR="    if step % 2:\n        optimizer.clear_grad()"),
    "two_steps_on_one_backward": dict(CLIP="paddle.nn.ClipGradByValue(0.002)", CHANGE="",
                                      STEP="    optimizer.step()\n    optimizer.step()"),
    # W.T is a strided view, so W's gradient is strided: Paddle's custom-operator call hands the
    # fused operator a contiguous copy of it, and ClipGradByGlobalNorm still scales p.grad itself
    "global_norm_clip_of_weights_read_transposed": dict(CLIP="paddle.nn.ClipGradByGlobalNorm(0.05)", CHANGE="",
                                                        SETUP="WEIGHTS_READ_TRANSPOSED = True",
                                                        CLEAR="    if step % 2:\n        optimizer.clear_grad()"),
    "global_norm_clip_with_a_0d_parameter": dict(CLIP="paddle.nn.ClipGradByGlobalNorm(0.05)", CHANGE="",
                                                 CLEAR="    if step % 2:\n        optimizer.clear_grad()"),
    "a_second_optimizer_over_the_head_that_never_clears": dict(
        SETUP="""
if KIND == "adamw":
    head = paddle.optimizer.AdamW(learning_rate=0.02, parameters=model.head.parameters(), weight_decay=0.1)
else:
    head = AdamWDL(learning_rate=0.02, parameters=model.head.parameters(), weight_decay=0.1,
                   set_param_lr_fun=None, use_multi_tensor=KIND == "default")""",
        CHANGE="", STEP="    optimizer.step()\n    head.step()"),
    # Paddle's AdamW hands a Tensor weight decay to its kernel as a number (its value at each step)
    "weight_decay_tensor_assigned": dict(CHANGE="""
    if step == 2:
        optimizer._weight_decay = paddle.to_tensor(0.3)"""),
    "group_weight_decay_tensor": dict(PARAMETERS=('[{"params": list(model.parameters())[:3]}, {"params": '
                                                  'list(model.parameters())[3:], "weight_decay": paddle.to_tensor(0.3)}]'),
                                      CHANGE=""),
    # AMSGrad switched off and on again (its maximum moments exist: it was on at the first step)
    "amsgrad_switched_off_and_on_again": dict(SETUP="optimizer._amsgrad = True", CHANGE="""
    if step == 2:
        optimizer._amsgrad = False
    if step == 4:
        optimizer._amsgrad = True"""),
    # a per-parameter step while a branch has no gradient, then the same parameters as before
    "beta_powers_apart_after_a_per_parameter_step": dict(CHANGE="""
    model.layers[1].linear.weight.stop_gradient = step == 2
    model.head.bias.regularizer = paddle.regularizer.L2Decay(1.0) if step == 2 else None"""),
}


def _script(scenario: dict[str, str]) -> str:
    parts = {"PARAMETERS": ALL, "CLIP": "None", "SETUP": "", "STEP": STEP, "CLEAR": CLEAR, **scenario}
    script = SCRIPT
    for key, text in parts.items():
        script = script.replace(f"%{key}%", text)
    return script


def _script_file(tmp_path: Path, script: str) -> Path:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(script))
    return path


def _run(tmp_path: Path, script: str, kind: str, ratios: bool) -> dict:
    """The script as a user runs it, in a fresh process: its record."""
    path = _script_file(tmp_path, script)
    out = tmp_path / f"{kind}-{ratios}.json"
    _check([sys.executable, str(path), kind, "ratios" if ratios else "none", str(out)])
    return json.loads(out.read_text())


def _references(tmp_path: Path, script: str) -> tuple[dict, dict]:
    """The references the default step is held to, the script run by both in one process (they keep
    nothing between runs that could change a number): ``paddle.optimizer.AdamW`` without
    ratios, and ``use_multi_tensor=False`` with ratios."""
    path = _script_file(tmp_path, script)
    outs = [tmp_path / "adamw.json", tmp_path / "per_parameter.json"]
    runner = tmp_path / "references.py"
    runner.write_text(textwrap.dedent(f"""
        import runpy, sys
        for arguments in (["adamw", "none", {str(outs[0])!r}], ["per_parameter", "ratios", {str(outs[1])!r}]):
            sys.argv = [{str(path)!r}, *arguments]
            runpy.run_path(sys.argv[0], run_name="__main__")
        """))
    _check([sys.executable, str(runner)])
    return json.loads(outs[0].read_text()), json.loads(outs[1].read_text())


def _check(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def _assert_same(got: dict, expected: dict, context: str) -> None:
    keys = [key for key in expected if key != "paths"]
    assert keys and sorted(keys) == sorted(key for key in got if key != "paths")
    for key in keys:
        if expected[key] is None:
            assert got[key] is None, f"{key}: {context}"
            continue
        a, b = np.asarray(got[key], dtype=np.float32), np.asarray(expected[key], dtype=np.float32)
        assert np.array_equal(a.view(np.int32), b.view(np.int32)), f"{key}: {context}"


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_default_step_ends_where_adamw_ends_and_with_ratios_where_the_per_parameter_path_ends(tmp_path, name):
    script = _script(SCENARIOS[name])
    adamw, per_parameter = _references(tmp_path, script)
    default = _run(tmp_path, script, "default", ratios=False)
    _assert_same(default, adamw, f"{name}: default != AdamW")
    assert any(path[0] == "fused" for path in default["paths"]), default["paths"]
    default = _run(tmp_path, script, "default", ratios=True)
    _assert_same(default, per_parameter, f"{name}: default != use_multi_tensor=False")
    assert all(path[0] == "per_parameter" for path in per_parameter["paths"])
    assert any(path[0] == "fused" for path in default["paths"]), default["paths"]


def test_a_regularizer_takes_the_per_parameter_path_and_says_why(tmp_path):
    default = _run(tmp_path, _script(SCENARIOS["regularizer_given"]), "default", ratios=False)
    paths = [tuple(path) for path in default["paths"]]
    assert paths[2] == paths[3] == ("per_parameter",
                                    "parameter 'linear_2.w_0' cannot share a kernel call (a regularizer of its own)")
    assert paths[0] == paths[1] == paths[4] == ("fused", None)


def test_amsgrad_switched_on_after_the_moments_were_made_raises_as_adamw_does_changing_nothing(tmp_path):
    script = _script(dict(CHANGE="""
    if step == 2:
        optimizer._amsgrad = True""", STEP="""
    try:
        optimizer.step()
    except Exception as error:
        record.setdefault("errors", []).append([step, type(error).__name__, str(error)])"""))
    adamw, per_parameter = _references(tmp_path, script)
    assert [error[0] for error in adamw.pop("errors")] == [2, 3, 4]  # (Paddle's own refusal, every step)
    for kind, got, expected in (("default", _run(tmp_path, script, "default", ratios=False), adamw),
                                ("per_parameter", per_parameter, None)):
        errors = got.pop("errors")
        assert [error[:2] for error in errors] == [[step, "RuntimeError"] for step in (2, 3, 4)], kind
        assert re.search(r"parameter '\w+\.w_0' has no moment2_max accumulator \(amsgrad was turned on", errors[0][2])
        if expected is not None:
            _assert_same(got, expected, f"{kind} != AdamW")
        steps = [got[f"head.weight weight {step}"] for step in range(5)]
        assert steps[1] == steps[2] == steps[3] == steps[4] != steps[0], kind  # nothing updated once it raises
