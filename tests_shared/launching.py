"""Starting ranks in a subprocess for the multi-process tests
(tests/test_distributed.py, tests_paddleformers/test_distributed.py) and the
documented launch commands (tests/user_paths): a command in its own session,
killed whole on timeout, one job of ranks at a time, and the ranks' logs."""
from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

# The launcher picks each rank's port by binding and releasing it; the rank binds it again seconds
# later. Another job starting meanwhile (the user-path pool runs beside the tests, and CI runs its
# suites side by side) can take it, and rank 0 exits with 1. Jobs of ranks therefore run one at a
# time on this machine: a lock on a file every suite's process opens alike.
_LOCK_FILE = Path(tempfile.gettempdir()) / "paddle_llrd_tests_one_job_of_ranks.lock"


@contextlib.contextmanager
def one_job_at_a_time() -> Iterator[None]:
    """Hold the machine's lock for a job of ranks (threads and processes alike: each opens the file)."""
    with open(_LOCK_FILE, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def starts_ranks(command: List[str]) -> bool:
    """Whether ``command`` starts several ranks (Paddle's launcher, or a script's ``--spawn``)."""
    return "paddle.distributed.launch" in command or "--spawn" in command


def gloo_env() -> Dict[str, str]:
    """This environment with ``PADDLE_DISTRI_BACKEND=gloo``: CPU ranks over
    gloo, also on a GPU build, where ``init_parallel_env`` then takes the
    CPU-only path whatever devices the launcher selected. (Hiding the GPUs
    with ``CUDA_VISIBLE_DEVICES=""`` is no way out: Paddle 3.3.1's launcher
    then sees one device named "" and fails with ``IndexError`` in
    ``_build_pod_with_master`` for ``--nproc_per_node 2``.)"""
    return {**os.environ, "PADDLE_DISTRI_BACKEND": "gloo"}


def rank_logs(log_dir: Path) -> str:
    """The tail of every rank's log written by ``paddle.distributed.launch``."""
    if not log_dir.is_dir():
        return ""
    return "".join(
        f"\n--- {log.name} ---\n{log.read_text(errors='replace')[-3000:]}" for log in sorted(log_dir.glob("workerlog.*"))
    )


def run_in_own_session(command: List[str], timeout_s: float, log_dir: Path, env: Dict[str, str]) -> subprocess.CompletedProcess:
    """Run ``command`` in the repository root; on timeout kill its whole
    process group (the launcher's ranks too) and fail with its output and the
    ranks' logs under ``log_dir``."""
    with one_job_at_a_time():
        return _run(command, timeout_s, log_dir, env)


def _run(command: List[str], timeout_s: float, log_dir: Path, env: Dict[str, str]) -> subprocess.CompletedProcess:
    proc = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"{' '.join(command)} did not finish in {timeout_s}s:\n{output[-3000:]}{rank_logs(log_dir)}")
    return subprocess.CompletedProcess(command, proc.returncode, output, "")
