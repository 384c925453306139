"""The two executors of AdamWDL's multi-tensor step in tests: the fused CPU operator
(the default) and, with ``PADDLE_LLRD_FUSED=0`` in the environment, Paddle's own
kernels over the same flat layout, with the same bits.

Whether the operator serves is decided once per process, so a test file covers
the second executor by running some of its own tests again in a fresh process
with the operator off (:func:`rerun_with_the_operator_off`). Those tests expect
:func:`flat_path` after each step, which is :data:`OPERATOR_OFF` there, and
compare the same numbers with the same references as in this process.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import paddle
import pytest
from update_paths import cpu_flat_path

REPO_ROOT = Path(__file__).resolve().parents[2]
FUSED = ("fused", None)
#: What a step served by Paddle's kernels because the operator is turned off reports.
OPERATOR_OFF = ("multi_tensor", "PADDLE_LLRD_FUSED=0")
#: What a step of GPU parameters reports (the operator updates CPU parameters only).
ON_A_GPU = ("multi_tensor", "parameters on a GPU (Paddle's GPU kernels update them)")
#: What a step of ``use_multi_tensor=False`` reports.
PER_PARAMETER_ONLY = ("per_parameter", "use_multi_tensor=False")


def operator_is_off() -> bool:
    """Whether this process runs with ``PADDLE_LLRD_FUSED=0``."""
    return os.environ.get("PADDLE_LLRD_FUSED", "").strip() == "0"


def flat_path() -> tuple[str, str | None]:
    """``last_update_path`` after a step the multi-tensor path serves, in this process: the
    fused operator on CPU, Paddle's kernels with the operator off or on a GPU."""
    if operator_is_off():
        return OPERATOR_OFF
    if paddle.get_device() != "cpu":
        return ON_A_GPU
    return cpu_flat_path()


def rerun_with_the_operator_off(*node_ids: str, env: dict[str, str] | None = None) -> None:
    """Run the tests ``node_ids`` (pytest node ids, ``path::name[parameters]``) in a fresh
    process with ``PADDLE_LLRD_FUSED=0`` (and ``env``); every one of them must pass there."""
    if operator_is_off():
        pytest.skip("this process already runs without the operator")
    environment = dict(os.environ, PADDLE_LLRD_FUSED="0", **(env or {}))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *node_ids],
        cwd=REPO_ROOT, capture_output=True, text=True, env=environment, timeout=600,
    )
    output = result.stdout[-8000:] + result.stderr[-2000:]
    assert result.returncode == 0, output
    passed = re.search(r"(\d+) passed", result.stdout)
    assert passed is not None and int(passed.group(1)) >= len(node_ids), output
    assert not re.search(r"\d+ (skipped|deselected|xfailed)", result.stdout), output
