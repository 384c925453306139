"""PaddleFormers' ``Trainer`` with paddle_llrd beyond one process: 2 CPU ranks
over gloo, started by ``python -m paddle.distributed.launch --nproc_per_node 2``.

Each rank of ``dist_trainer_worker.py`` runs ``LLRDTrainer`` (layer decay, a
cosine schedule, a weight-decay ramp and an EMA) on half of every batch; the
Trainer all-reduces the gradients, so both ranks must end with the same
weights and the same EMA, equal (within 1e-5) to one process trained on the
whole batch. Two ways PaddleFormers runs data parallel on CPU are covered:
plain data parallel (``sharding=""``) and its default optimizer-state
sharding (``sharding="stage1"``, ZeRO stage 1, with ``split_param=False``
and no gradient clipping, see the worker).
"""
from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Callable, Dict, List

import numpy as np
import pytest

import dist_trainer_worker
from support import make_llama
from launching import REPO_ROOT, gloo_env, rank_logs, run_in_own_session
from trainer_checks import parameters_numpy

HERE = Path(__file__).resolve().parent
WORKER = HERE / "dist_trainer_worker.py"
LAUNCH_TIMEOUT_S = 300
TOLERANCE = 1e-5


def launch_two_ranks(out_dir: Path, sharding: str, max_grad_norm: float) -> subprocess.CompletedProcess:
    """Start the worker on 2 CPU ranks (gloo); the output ends with the ranks' logs."""
    log_dir = out_dir / "log"
    command = [
        sys.executable, "-m", "paddle.distributed.launch", "--nproc_per_node", "2", "--max_restart", "0",
        "--job_id", f"llrd-pf-{uuid.uuid4().hex[:8]}", "--log_dir", str(log_dir),
        str(WORKER), "--out-dir", str(out_dir), "--sharding", sharding, "--max-grad-norm", str(max_grad_norm),
    ]
    # the repository first on the ranks' path, as in the test process
    env = {**gloo_env(), "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    proc = run_in_own_session(command, LAUNCH_TIMEOUT_S, log_dir, env)
    return subprocess.CompletedProcess(command, proc.returncode, proc.stdout + rank_logs(log_dir), "")


def load_result(path: Path) -> Dict[str, np.ndarray]:
    assert path.exists(), f"{path.name} was not written"
    with np.load(path) as saved:
        result = dict(saved)
    if "error" in result:
        pytest.fail(f"{path.name}: the run raised\n{result['error']}")
    return result


def weights(result: Dict[str, np.ndarray], prefix: str) -> Dict[str, np.ndarray]:
    return {key[len(prefix):]: value for key, value in result.items() if key.startswith(prefix)}


@pytest.fixture(scope="module")
def single_process(tmp_path_factory) -> Callable[[float], Dict[str, np.ndarray]]:
    """One process on the whole batch, in this process (no launcher: world
    size 1), by gradient-clipping norm; each run once per module."""
    runs: Dict[float, Dict[str, np.ndarray]] = {}

    def run(max_grad_norm: float) -> Dict[str, np.ndarray]:
        if max_grad_norm not in runs:
            out_dir = tmp_path_factory.mktemp("single")
            dist_trainer_worker.train(str(out_dir), max_grad_norm=max_grad_norm)
            runs[max_grad_norm] = load_result(out_dir / "single.npz")
        return runs[max_grad_norm]

    return run


def test_single_process_reference_trained(single_process):
    """The reference moved every weight and its EMA lags behind the weights,
    so agreeing with it below says something."""
    initial = parameters_numpy(make_llama())
    final = weights(single_process(1.0), "final/")
    average = weights(single_process(1.0), "ema/")
    assert sorted(final) == sorted(initial) == sorted(average)
    assert min(float(np.max(np.abs(final[n] - initial[n]))) for n in initial) > 1e-3
    assert max(float(np.max(np.abs(average[n] - final[n]))) for n in final) > 1e-3


@pytest.mark.parametrize(
    "sharding, max_grad_norm, model_class, optimizer_wrapper",
    [("", 1.0, "DataParallel", ""), ("stage1", 0.0, "ShardingParallel", "HybridParallelOptimizer")],
    ids=["data_parallel", "sharding_stage1"],
)
def test_two_ranks_end_with_the_weights_of_one_process(
    tmp_path, single_process, sharding, max_grad_norm, model_class, optimizer_wrapper
):
    proc = launch_two_ranks(tmp_path, sharding, max_grad_norm)
    ranks: List[Dict[str, np.ndarray]] = [load_result(tmp_path / f"rank{rank}.npz") for rank in range(2)]
    assert proc.returncode == 0, proc.stdout[-4000:]
    for result in ranks:
        assert int(result["world_size"]) == 2
        assert str(result["backend"]).upper() == "GLOO"
        assert str(result["model_class"]) == model_class
        assert str(result["optimizer_wrapper"]) == optimizer_wrapper
        assert bool(result["inner_is_adamwdl"])
    # every rank logs each group's lr, the weight decay and the gradient norms of the last step; under data
    # parallelism the gradients are all-reduced first, so the norms are those of one process on the whole batch
    logged = weights(single_process(max_grad_norm), "logged/")
    # make_llama ties the head: the group at ratio 1 holds model.norm alone, final_norm
    assert {"grad_norm", "grad_norm/layer_0", "learning_rate/layer_0", "learning_rate/final_norm",
            "learning_rate/embeddings_tied_head", "weight_decay"} <= set(logged)
    for result in ranks:
        assert sorted(weights(result, "logged/")) == sorted(logged)
        if not sharding:
            for key, value in weights(result, "logged/").items():
                np.testing.assert_allclose(value, logged[key], rtol=1e-4, err_msg=key)
    for prefix in ("final/", "ema/"):
        reference = weights(single_process(max_grad_norm), prefix)
        rank0, rank1 = (weights(result, prefix) for result in ranks)
        assert sorted(rank0) == sorted(rank1) == sorted(reference)
        for name, expected in reference.items():
            np.testing.assert_allclose(rank1[name], rank0[name], rtol=0, atol=1e-7, err_msg=f"ranks differ: {prefix}{name}")
            np.testing.assert_allclose(
                rank0[name], expected, rtol=0, atol=TOLERANCE, err_msg=f"2 ranks vs 1 process: {prefix}{name}"
            )
