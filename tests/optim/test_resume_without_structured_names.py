"""A checkpoint without AdamWDL's structured-name record (``paddle.optimizer.AdamW``'s,
PaddleNLP's, an older AdamWDL's) is matched by Paddle's parameter names; when a trainable
parameter then has no state, AdamWDL says so with a ``CheckpointMatchWarning`` naming it,
never continuing silently (docs/adamwdl.rst, "Checkpoints").

The case it is for: the resume script builds one more same-shape layer, and trains it, before
the model, so Paddle's automatic names move by one. Matched by name, every layer takes the
moments of the layer before it and the last is left without; ``paddle.optimizer.AdamW`` loads
that silently. Each script runs in its own fresh process, as a user runs it.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import sys
    import paddle
    from paddle_llrd import AdamWDL

    mode, out = sys.argv[1], sys.argv[2]
    aux = paddle.nn.Linear(4, 4) if mode == "resume-shifted" else None  # built first: the names move by one
    model = paddle.nn.Sequential(paddle.nn.Linear(4, 4), paddle.nn.Tanh(), paddle.nn.Linear(4, 4),
                                 paddle.nn.Tanh(), paddle.nn.Linear(4, 4))
    parameters = (aux.parameters() if aux is not None else []) + model.parameters()
    x = paddle.ones([2, 4])

    def loss():
        value = model(x).square().mean()
        return value + aux(x).square().mean() if aux is not None else value

    if mode == "save":
        optimizer = paddle.optimizer.AdamW(learning_rate=0.01, parameters=parameters)
        for _ in range(2):
            loss().backward()
            optimizer.step()
            optimizer.clear_grad()
        paddle.save(optimizer.state_dict(), out + "/paddle_adamw.pdopt")
    else:
        names = {p.name: n for n, p in model.named_parameters()}
        optimizer = AdamWDL(learning_rate=0.01, parameters=parameters, set_param_lr_fun=None, name_dict=names)
        optimizer.set_state_dict(paddle.load(out + "/paddle_adamw.pdopt"))
        loss().backward()
        optimizer.step()
        print("STEPPED")
    """
)


def _run(script: Path, mode: str, out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, str(script), mode, str(out)], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    out = tmp_path_factory.mktemp("paddle_checkpoint")
    script = out / "train.py"
    script.write_text(SCRIPT)
    done = _run(script, "save", out)
    assert done.returncode == 0, done.stderr[-3000:]
    return script, out


def _our_warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "Warning: " in line and "No ccache found" not in line]


def test_a_paddle_checkpoint_resumed_after_the_names_moved_warns_naming_the_parameter_left_without_state(saved):
    script, out = saved
    done = _run(script, "resume-shifted", out)
    assert done.returncode == 0 and "STEPPED" in done.stdout, done.stderr[-3000:]
    warned = _our_warnings(done.stderr)
    assert len(warned) == 1, done.stderr[-3000:]
    # at the user's set_state_dict line, by class, naming the last Linear (linear_3 now, "4" in the model)
    assert warned[0].startswith(f"{script}:") and "CheckpointMatchWarning: AdamWDL.set_state_dict:" in warned[0]
    assert "records no structured names" in warned[0]
    assert "2 trainable parameters have none ('linear_3.w_0 (4.weight)', 'linear_3.b_0 (4.bias)')" in warned[0]
    assert "Paddle's names moved" in warned[0]


def test_the_same_checkpoint_resumed_with_the_same_names_loads_without_a_warning(saved):
    script, out = saved
    done = _run(script, "resume", out)
    assert done.returncode == 0 and "STEPPED" in done.stdout, done.stderr[-3000:]
    assert _our_warnings(done.stderr) == [], done.stderr[-3000:]
