"""AdamWDL under Paddle's own distributed engine: 2 CPU ranks over gloo.

Each rank of ``tests/helpers/dist_worker.py`` trains the model of
``tests/helpers/mode_runner.py`` on its half of every batch, with an ``LRScheduler``,
layer-wise decay and ``apply_decay_param_fun``; the gradients are averaged
over the ranks by Paddle, so both ranks must end with the same weights, equal
(within 1e-5) to one process trained on the whole batch.

* ``paddle.DataParallel`` started by ``paddle.distributed.spawn``;
* ``paddle.distributed.fleet`` (``fleet.init(is_collective=True)``,
  ``distributed_model``, ``distributed_optimizer``) started by
  ``python -m paddle.distributed.launch --nproc_per_node 2``, pure data
  parallel and with optimizer-state sharding (``sharding_degree=2``).

What needs a GPU (``group_sharded_parallel``, i.e. sharding stages 2 and 3,
and NCCL data parallel) is in ``tests/test_gpu.py``.
"""
from __future__ import annotations

import re
import sys
import uuid
from pathlib import Path
from typing import Dict, List

import numpy as np
import paddle
import pytest

import dist_worker
from launching import REPO_ROOT, gloo_env, rank_logs, run_in_own_session
from operator_off import FUSED, OPERATOR_OFF, PER_PARAMETER_ONLY, operator_is_off

HERE = Path(__file__).resolve().parent
WORKER = HERE / "helpers" / "dist_worker.py"

OPTIMIZER = "adamwdl"
TOLERANCE = 1e-5
LAUNCH_TIMEOUT_S = 180


def visible_gpu_count() -> int:
    if not paddle.device.is_compiled_with_cuda():
        return 0
    return paddle.device.cuda.device_count()


def load_ranks(out_dir: Path, world_size: int = 2) -> List[Dict[str, np.ndarray]]:
    ranks = []
    for rank in range(world_size):
        path = out_dir / f"rank{rank}.npz"
        assert path.exists(), f"rank {rank} wrote no result"
        with np.load(path) as saved:
            result = dict(saved)
        if "error" in result:
            pytest.fail(f"rank {rank} raised:\n{result['error']}")
        ranks.append(result)
    return ranks


def update_paths(result: Dict[str, np.ndarray]) -> List[tuple]:
    """A rank's ``last_update_path`` after each step, as ``(path, reason)``."""
    return [(str(path), None if str(reason) == "None" else str(reason))
            for path, reason in zip(result["update_paths"], result["update_path_reasons"])]


def final_weights(result: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    return {key[len("final/"):]: value for key, value in result.items() if key.startswith("final/")}


@pytest.fixture(scope="module")
def single_process(tmp_path_factory) -> Dict[str, np.ndarray]:
    """One process on the whole batch (the same training as the mode tests' dygraph scheduler run)."""
    out_dir = tmp_path_factory.mktemp("single")
    device = paddle.device.get_device()
    try:
        dist_worker.train("single", OPTIMIZER, str(out_dir), device="cpu")
    finally:
        paddle.set_device(device)
    with np.load(out_dir / "single.npz") as saved:
        result = dict(saved)
    assert "error" not in result, result.get("error")
    return result


def assert_ranks_match_single_process(ranks, single_process, backend: str = "GLOO") -> None:
    for result in ranks:
        assert int(result["world_size"]) == 2
        assert str(result["backend"]).upper() == backend
    rank0, rank1 = (final_weights(result) for result in ranks)
    reference = final_weights(single_process)
    assert sorted(rank0) == sorted(reference)
    for name, expected in reference.items():
        np.testing.assert_allclose(rank1[name], rank0[name], rtol=0, atol=1e-7, err_msg=f"ranks differ on {name}")
        np.testing.assert_allclose(
            rank0[name], expected, rtol=0, atol=TOLERANCE, err_msg=f"2 ranks vs 1 process on {name}"
        )
    # The run trained: the weights moved from their initial values.
    initial = dist_worker.mode_runner.initial_weights(dist_worker.mode_runner.build_model())
    assert max(float(np.max(np.abs(reference[n] - initial[n]))) for n in reference) > 1e-2


def test_data_parallel_with_spawn_matches_one_process(tmp_path, single_process):
    command = [
        sys.executable, str(WORKER), "--launcher", "spawn", "--nprocs", "2",
        "--wrapper", "data_parallel", "--optimizer", OPTIMIZER, "--out-dir", str(tmp_path), "--device", "cpu",
    ]
    proc = run_in_own_session(command, LAUNCH_TIMEOUT_S, tmp_path / "log", gloo_env())
    if proc.returncode != 0 and not (tmp_path / "rank0.npz").exists():
        pytest.fail(f"spawn exited with {proc.returncode}:\n{proc.stdout[-4000:]}")
    ranks = load_ranks(tmp_path)
    assert str(ranks[0]["model_class"]) == "DataParallel"
    assert_ranks_match_single_process(ranks, single_process)
    assert proc.returncode == 0, proc.stdout[-4000:]


def fleet_launch_command(wrapper: str, out_dir: Path) -> List[str]:
    """``paddle.distributed.launch`` of 2 CPU ranks of the worker with ``wrapper``, logs in ``out_dir/log``."""
    return [
        sys.executable, "-m", "paddle.distributed.launch",
        "--nproc_per_node", "2", "--max_restart", "0",
        "--job_id", f"llrd-{wrapper}-{uuid.uuid4().hex[:8]}", "--log_dir", str(out_dir / "log"),
        str(WORKER), "--launcher", "launch", "--wrapper", wrapper,
        "--optimizer", OPTIMIZER, "--out-dir", str(out_dir), "--device", "cpu",
    ]


@pytest.mark.skipif(
    visible_gpu_count() == 1,
    reason="paddle.distributed.launch gives each of the 2 ranks its own visible GPU and fails "
    "(IndexError in _build_pod_with_master) with only one; the CPU build and >=2 GPUs run this",
)
@pytest.mark.parametrize(
    "wrapper, optimizer_class, model_class",
    [
        ("fleet", "HybridParallelOptimizer", "DataParallel"),
        ("fleet_sharding", "HybridParallelOptimizer", "ShardingParallel"),
    ],
)
def test_fleet_with_launch_matches_one_process(tmp_path, single_process, wrapper, optimizer_class, model_class):
    log_dir = tmp_path / "log"
    proc = run_in_own_session(fleet_launch_command(wrapper, tmp_path), LAUNCH_TIMEOUT_S, log_dir, gloo_env())
    if proc.returncode != 0 and not (tmp_path / "rank0.npz").exists():
        pytest.fail(f"launch exited with {proc.returncode}:\n{proc.stdout[-2000:]}{rank_logs(log_dir)}")
    ranks = load_ranks(tmp_path)
    assert str(ranks[0]["optimizer_class"]) == optimizer_class
    assert str(ranks[0]["model_class"]) == model_class
    assert_ranks_match_single_process(ranks, single_process)
    assert proc.returncode == 0, proc.stdout[-2000:] + rank_logs(log_dir)


def test_data_parallel_example_ranks_match_one_process(tmp_path):
    """``examples/data_parallel.py``: one process, then 2 ranks started by
    ``--spawn 2``; every rank prints the same weight checksum as the single process."""
    example = str(REPO_ROOT / "examples" / "data_parallel.py")

    def checksums(*extra: str) -> Dict[str, float]:
        proc = run_in_own_session([sys.executable, example, "--steps", "3", *extra], LAUNCH_TIMEOUT_S, tmp_path,
                                  gloo_env())
        assert proc.returncode == 0, proc.stdout[-4000:]
        found = re.findall(r"rank (\d+/\d+) final weight checksum ([0-9.]+)", proc.stdout)
        return {rank: float(value) for rank, value in found}

    single = checksums()
    ranks = checksums("--spawn", "2")
    assert list(single) == ["0/1"]
    assert sorted(ranks) == ["0/2", "1/2"]
    assert ranks["0/2"] == ranks["1/2"]
    # A sum of |w| over ~10k float32 weights: equal up to float32 rounding.
    np.testing.assert_allclose(ranks["0/2"], single["0/1"], rtol=1e-5)


@pytest.mark.skipif(
    visible_gpu_count() == 1,
    reason="paddle.distributed.launch gives each of the 2 ranks its own visible GPU and fails "
    "(IndexError in _build_pod_with_master) with only one; the CPU build and >=2 GPUs run this",
)
def test_data_parallel_example_under_the_launcher(tmp_path):
    """The README's command, ``python -m paddle.distributed.launch
    --nproc_per_node 2 examples/data_parallel.py`` (``--steps 3``): each
    rank's log shows the checksum of one process on the whole batch."""
    example = str(REPO_ROOT / "examples" / "data_parallel.py")
    log_dir = tmp_path / "log"
    single = run_in_own_session([sys.executable, example, "--steps", "3"], LAUNCH_TIMEOUT_S, tmp_path, gloo_env())
    assert single.returncode == 0, single.stdout[-4000:]
    (expected,) = re.findall(r"rank 0/1 final weight checksum ([0-9.]+)", single.stdout)
    proc = run_in_own_session(
        [sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", "2", "--log_dir", str(log_dir),
         example, "--steps", "3"],
        LAUNCH_TIMEOUT_S, log_dir, gloo_env(),
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + rank_logs(log_dir)
    found = dict(re.findall(r"rank (\d+/\d+) final weight checksum ([0-9.]+)", rank_logs(log_dir)))
    assert sorted(found) == ["0/2", "1/2"], rank_logs(log_dir)
    assert found["0/2"] == found["1/2"]
    np.testing.assert_allclose(float(found["0/2"]), float(expected), rtol=1e-5)


@pytest.mark.skipif(
    visible_gpu_count() == 1,
    reason="paddle.distributed.launch gives each of the 2 ranks its own visible GPU and fails "
    "(IndexError in _build_pod_with_master) with only one; the CPU build and >=2 GPUs run this",
)
@pytest.mark.parametrize("wrapper, model_class, operator", [
    ("fleet", "DataParallel", "fused"),
    # DygraphShardingOptimizer.step() hands the inner optimizer's _apply_optimize
    # its shard: the multi-tensor step over this rank's parameters (with the fused
    # operator in the stage-1 test below; here by Paddle's kernels).
    ("fleet_sharding", "ShardingParallel", "off"),
])
def test_fleet_with_two_kernel_threads_per_rank_matches_one_process(
    tmp_path, single_process, wrapper, model_class, operator
):
    """Each rank runs its multi-tensor step on 2 threads: the fused operator's, or with the
    operator off (``PADDLE_LLRD_FUSED=0``) Paddle's kernels over chunks from 64 elements (so
    that this small model's ranges are split): the ranks still end with the weights of one
    process."""
    log_dir = tmp_path / "log"
    env = {**gloo_env(), "PADDLE_LLRD_NUM_THREADS": "2", "PADDLE_LLRD_MIN_CHUNK_NUMEL": "64"}
    env.pop("PADDLE_LLRD_FUSED", None)
    if operator == "off":
        env["PADDLE_LLRD_FUSED"] = "0"
    proc = run_in_own_session(fleet_launch_command(wrapper, tmp_path), LAUNCH_TIMEOUT_S, log_dir, env)
    if proc.returncode != 0 and not (tmp_path / "rank0.npz").exists():
        pytest.fail(f"launch exited with {proc.returncode}:\n{proc.stdout[-2000:]}{rank_logs(log_dir)}")
    ranks = load_ranks(tmp_path)
    assert str(ranks[0]["model_class"]) == model_class
    steps = len(list(dist_worker.mode_runner.batches()))
    expected = FUSED if operator == "fused" else OPERATOR_OFF
    for result in ranks:
        assert int(result["multi_tensor_threads"]) == 2
        assert update_paths(result) == [expected] * steps
    assert_ranks_match_single_process(ranks, single_process)
    assert proc.returncode == 0, proc.stdout[-2000:] + rank_logs(log_dir)


@pytest.mark.skipif(
    visible_gpu_count() == 1,
    reason="paddle.distributed.launch gives each of the 2 ranks its own visible GPU and fails "
    "(IndexError in _build_pod_with_master) with only one; the CPU build and >=2 GPUs run this",
)
def test_sharding_stage_1_ranks_take_the_multi_tensor_step_and_end_as_on_the_per_parameter_path(tmp_path):
    """ZeRO stage 1 (``DygraphShardingOptimizer``, ``sharding_degree=2``) on 2 CPU ranks: each rank's
    parameters go through the multi-tensor step (docs/execution_modes.rst), and the ranks end with the
    weights, bit for bit, of the same launch with ``use_multi_tensor=False``."""
    runs = {}
    for name, per_parameter in (("multi_tensor", "0"), ("per_parameter", "1")):
        out_dir = tmp_path / name
        out_dir.mkdir()
        env = {**gloo_env(), "PADDLE_LLRD_TEST_PER_PARAMETER": per_parameter}
        proc = run_in_own_session(fleet_launch_command("fleet_sharding", out_dir), LAUNCH_TIMEOUT_S,
                                  out_dir / "log", env)
        assert proc.returncode == 0, proc.stdout[-2000:] + rank_logs(out_dir / "log")
        runs[name] = load_ranks(out_dir)
    steps = len(list(dist_worker.mode_runner.batches()))
    for flat, per_parameter in zip(runs["multi_tensor"], runs["per_parameter"]):
        assert update_paths(flat) == [OPERATOR_OFF if operator_is_off() else FUSED] * steps  # (CPU ranks)
        assert update_paths(per_parameter) == [PER_PARAMETER_ONLY] * steps
        for name, expected in final_weights(per_parameter).items():
            np.testing.assert_array_equal(final_weights(flat)[name], expected, err_msg=name)
