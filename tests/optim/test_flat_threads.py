"""The threads of the multi-tensor step and the EMA (``paddle_llrd/optim/threads.py``):
how many, refusal of bad settings by name, the split of a range and the pool
of Paddle's kernels (where the fused operator is off), a task's error reaching
the caller, and a training process that exits promptly with no thread left,
the operator's or the pool's. The bits of threaded steps and EMA updates are checked in
``test_multi_tensor.py`` and ``test_ema_flat_update.py``."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time

import paddle
import pytest

from paddle_llrd import AdamWDL, ExponentialMovingAverage
from paddle_llrd.optim import threads
from paddle_llrd.optim.threads import FlatThreads, chunk_bounds, resolve_num_threads

LAUNCH_VARIABLES = ("PADDLE_LLRD_NUM_THREADS", "PADDLE_LOCAL_SIZE", "PADDLE_TRAINERS_NUM", "PADDLE_LLRD_MIN_CHUNK_NUMEL")


@pytest.fixture
def eight_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process allowed on 8 cores, outside any launch."""
    for name in LAUNCH_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)


def test_the_cores_this_process_may_use(eight_cores: None) -> None:
    assert resolve_num_threads() == 8
    assert AdamWDL(parameters=paddle.nn.Linear(2, 2).parameters()).num_threads == 8


@pytest.mark.parametrize(
    "variables, expected",
    [
        ({"PADDLE_LOCAL_SIZE": "4", "PADDLE_TRAINERS_NUM": "8"}, 2),  # 4 ranks here, of 8 in all
        ({"PADDLE_TRAINERS_NUM": "3"}, 2),  # no local size: every rank taken as local, 8 // 3
        ({"PADDLE_LOCAL_SIZE": "16"}, 1),  # more ranks than cores: one thread each
        ({"PADDLE_LLRD_NUM_THREADS": "5", "PADDLE_LOCAL_SIZE": "4"}, 5),  # the variable wins over the division
    ],
)
def test_cores_divided_among_the_local_ranks_of_a_launch(eight_cores, monkeypatch, variables, expected) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert resolve_num_threads() == expected
    model = paddle.nn.Linear(2, 2)
    assert AdamWDL(parameters=model.parameters()).num_threads == expected
    assert ExponentialMovingAverage(model).num_threads == expected


def test_the_argument_wins_over_the_environment(eight_cores, monkeypatch) -> None:
    monkeypatch.setenv("PADDLE_LLRD_NUM_THREADS", "5")
    model = paddle.nn.Linear(2, 2)
    assert AdamWDL(parameters=model.parameters(), num_threads=1).num_threads == 1
    assert ExponentialMovingAverage(model, num_threads=3).num_threads == 3


@pytest.mark.parametrize("value, error", [(0, ValueError), (-2, ValueError), (True, TypeError), (2.0, TypeError), ("2", TypeError)])
def test_a_bad_num_threads_is_refused_by_name(eight_cores, value, error) -> None:
    model = paddle.nn.Linear(2, 2)
    with pytest.raises(error, match=r"AdamWDL: `num_threads` must be an int >= 1"):
        AdamWDL(parameters=model.parameters(), num_threads=value)
    with pytest.raises(error, match=r"AdamWDL: `num_threads`"):  # checked on the per-parameter path too
        AdamWDL(parameters=model.parameters(), num_threads=value, use_multi_tensor=False)
    with pytest.raises(error, match=r"ExponentialMovingAverage: `num_threads` must be an int >= 1"):
        ExponentialMovingAverage(model, num_threads=value)


@pytest.mark.parametrize("name", ["PADDLE_LLRD_NUM_THREADS", "PADDLE_LOCAL_SIZE", "PADDLE_LLRD_MIN_CHUNK_NUMEL"])
@pytest.mark.parametrize("text", ["0", "two", "1.5"])
def test_a_bad_environment_variable_is_refused_by_name(eight_cores, monkeypatch, name, text) -> None:
    monkeypatch.setenv(name, text)
    with pytest.raises(ValueError, match=f"environment variable {name} must be an integer >= 1, got '{text}'"):
        AdamWDL(parameters=paddle.nn.Linear(2, 2).parameters())


def test_ranges_split_on_cpu_only_above_the_crossover(eight_cores) -> None:
    cpu = paddle.CPUPlace()
    split = FlatThreads(3).bounds(0, 3 * threads.MIN_CHUNK_NUMEL, cpu)
    assert len(split) == 3 and split[0][0] == 0 and split[-1][1] == 3 * threads.MIN_CHUNK_NUMEL
    assert all(b - a >= threads.MIN_CHUNK_NUMEL - threads.CHUNK_ALIGN for a, b in split)
    # two chunks need twice the crossover
    assert FlatThreads(3).bounds(0, 2 * threads.MIN_CHUNK_NUMEL - 1, cpu) == [(0, 2 * threads.MIN_CHUNK_NUMEL - 1)]
    assert FlatThreads(3).bounds(0, threads.MIN_CHUNK_NUMEL - 1, cpu) == [(0, threads.MIN_CHUNK_NUMEL - 1)]
    assert FlatThreads(1).bounds(0, 10 * threads.MIN_CHUNK_NUMEL, cpu) == [(0, 10 * threads.MIN_CHUNK_NUMEL)]


@pytest.mark.parametrize("size, count", [(1000, 3), (4096, 2), (1001, 7), (17, 4)])
def test_chunks_tile_the_range_on_aligned_boundaries(size: int, count: int) -> None:
    bounds = chunk_bounds(5, 5 + size, count, min_chunk=1)
    assert bounds[0][0] == 5 and bounds[-1][1] == 5 + size
    assert all(a < b for a, b in bounds) and all(b == c for (_, b), (c, _) in zip(bounds, bounds[1:]))
    assert all((a - 5) % threads.CHUNK_ALIGN == 0 for a, _ in bounds)
    assert len(bounds) == max(1, min(count, size // threads.CHUNK_ALIGN))


def test_an_error_in_one_task_reaches_the_caller_after_every_task_ran() -> None:
    ran = []

    def fails() -> None:
        raise RuntimeError("chunk 2 failed")

    tasks = [lambda i=i: ran.append(i) for i in range(5)]
    tasks.insert(2, fails)
    with pytest.raises(RuntimeError, match="chunk 2 failed"):
        FlatThreads(3).run(tasks)
    assert sorted(ran) == [0, 1, 2, 3, 4]


EXIT_SCRIPT = textwrap.dedent(
    """
    import atexit
    import os
    import threading
    import time

    def left_running():  # registered first, so it runs after paddle_llrd's shutdown
        names = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
        print("python threads left at exit:", names, flush=True)

    atexit.register(left_running)

    import paddle
    from paddle_llrd import AdamWDL, ExponentialMovingAverage

    def os_threads():
        return len(os.listdir("/proc/self/task"))

    paddle.set_device("cpu")  # (the threads serve CPU parameters; a GPU build too)
    model = paddle.nn.Sequential(paddle.nn.Linear(256, 256), paddle.nn.Linear(256, 256))
    optimizer = AdamWDL(learning_rate=0.01, parameters=model.parameters(), set_param_lr_fun=None, num_threads=3)
    ema = ExponentialMovingAverage(model, decay=0.9, num_threads=3)
    ema.register()
    model(paddle.ones([2, 256])).sum().backward()
    before = (os_threads(), threading.active_count())
    for step in range(3):
        if step:
            model(paddle.ones([2, 256])).sum().backward()
        optimizer.step()
        optimizer.clear_grad()
        ema.update()
    print("path", tuple(optimizer.last_update_path), flush=True)
    print("os threads", before[0], os_threads(), "python threads", before[1], threading.active_count(), flush=True)
    print(f"finished at {time.time():.6f}", flush=True)
    """
)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts the process's threads in /proc")
@pytest.mark.parametrize("operator", ["fused", "off"])
def test_the_process_exits_promptly_with_no_thread_left(tmp_path, operator: str) -> None:
    """A training process on 3 threads exits within seconds of its last line, with no Python
    thread left: the fused operator's native threads (two beside the calling one), or with the
    operator off the pool's Python threads that run Paddle's kernels (two, joined at exit)."""
    script = tmp_path / "train.py"
    script.write_text(EXIT_SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    env["PADDLE_LLRD_MIN_CHUNK_NUMEL"] = "512"  # (the pool splits these layers' ranges)
    env.pop("PADDLE_LLRD_FUSED", None)
    if operator == "off":
        env["PADDLE_LLRD_FUSED"] = "0"
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    exited = time.time()
    assert result.returncode == 0, result.stderr[-3000:]
    threads = re.search(r"os threads (\d+) (\d+) python threads (\d+) (\d+)", result.stdout)
    assert threads is not None, result.stdout
    os_before, os_after, python_before, python_after = map(int, threads.groups())
    if operator == "fused":
        assert "path ('fused', None)" in result.stdout
        # the operator did run threads: native ones, beside any Python thread
        assert os_after - python_after >= os_before - python_before + 2, result.stdout
    else:
        assert "path ('multi_tensor', 'PADDLE_LLRD_FUSED=0')" in result.stdout
        assert python_after == python_before + 2, result.stdout  # the pool did run Paddle's kernels
    assert "python threads left at exit: []" in result.stdout
    # The shutdown joins each worker with a 10 s timeout: a thread that missed
    # its stop signal would hold the exit for 10 s or more.
    finished = re.search(r"finished at ([0-9.]+)", result.stdout)
    assert finished is not None, result.stdout
    assert exited - float(finished.group(1)) < 5.0, result.stdout
