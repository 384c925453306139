"""``parameters`` left out in dygraph: Paddle's ``AdamW`` raises ``AttributeError`` (its own
``test_adamw_op.py`` asserts that type), AdamWDL a ``TypeError`` naming the argument; the one
exception is both, so code written for either catches it, from ``AdamWDL`` and from
``paddle_llrd.AdamW`` (docs/adamwdl.rst). Run as a user's script in a fresh process."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import paddle
    import paddle_llrd

    for optimizer in (paddle.optimizer.AdamW, paddle_llrd.AdamWDL, paddle_llrd.AdamW):
        for caught in (AttributeError, TypeError):
            try:
                optimizer(learning_rate=0.01)
            except caught as error:
                print(optimizer.__name__, caught.__name__, "caught:", str(error).splitlines()[0])
            except Exception as error:
                print(optimizer.__name__, caught.__name__, "missed:", type(error).__name__)
    """
)


def test_missing_parameters_are_caught_as_paddles_attribute_error_and_as_a_type_error(tmp_path):
    script = tmp_path / "missing_parameters.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("AdamW AttributeError caught:")  # Paddle's own, the type its test asserts
    for name in ("AdamWDL", "AdamW"):
        for caught in ("AttributeError", "TypeError"):
            expected = f"{name} {caught} caught: {name}: `parameters` is required in dygraph mode"
            assert any(line.startswith(expected) for line in lines[2:]), (expected, lines)
