"""What only a GPU can check: the fused ``adamw`` kernel's float16/bfloat16
master-weight path (also with Tensor betas, and on the multi-tensor path across a
weight-decay schedule), ``paddle.amp.auto_cast`` O1/O2 with ``GradScaler``
(including an overflow step, which must leave the EMA and the weight-decay
schedule alone), ``layer_decay_param_groups`` with ``paddle.optimizer.AdamW``
in float16 O2, and multi-GPU data parallel and sharding.

Every test is skipped without a CUDA build of Paddle and a visible GPU (CI
has none); ``scripts/gpu_check.sh`` installs ``paddlepaddle-gpu`` and runs
this file with a pass/fail summary. The numbers are checked against the
float64 reference of ``tests/helpers/reference_adamw.py``, fed with the gradients the
optimizer was actually given. The scenarios shared with the CPU (float32, in
tests/test_gpu_scenarios.py) are in ``tests/helpers/gpu_scenarios.py``.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import paddle
import pytest

import dist_worker
import gpu_scenarios as scenarios
import mode_runner as runner
from gpu_scenarios import (
    assert_close_to_reference,
    exact_gradients,
    optimizer_state,
    reference_for,
    reference_step,
    start_model,
)
from operator_off import ON_A_GPU

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent


def visible_gpu_count() -> int:
    if not paddle.device.is_compiled_with_cuda():
        return 0
    return paddle.device.cuda.device_count()


pytestmark = pytest.mark.skipif(visible_gpu_count() == 0, reason="needs a CUDA build of Paddle and a visible GPU")

DECAY_PATHS = runner.DECAY_PATHS
NUM_STEPS = scenarios.NUM_STEPS


@pytest.fixture(autouse=True)
def _on_gpu():
    previous = paddle.device.get_device()
    paddle.set_device("gpu:0")
    yield
    paddle.set_device(previous)


# --------------------------------------------------------------------------- fused kernel, master weights
@pytest.mark.parametrize("decay_path", DECAY_PATHS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_master_weight_path_matches_float64_reference(dtype, decay_path):
    if dtype == "bfloat16" and not paddle.amp.is_bfloat16_supported():
        pytest.skip("this GPU has no bfloat16 support")
    model = start_model(dtype)
    scheduler = runner.make_learning_rate("scheduler")
    opt = runner.make_optimizer("adamwdl", model, scheduler, decay_path=decay_path, multi_precision=True)
    reference = reference_for(model)  # the master weights start as the low-precision values
    rng = np.random.RandomState(0)
    paths = []
    for _ in range(NUM_STEPS):
        grads = exact_gradients(model, rng)
        lr = opt.get_lr()
        opt.step()
        paths.append(tuple(opt.last_update_path))
        opt.clear_grad()
        scheduler.step()
        reference_step(reference, grads, lr)
    # Paddle's multi_precision GPU kernel over the flat layout (not the fused CPU operator)
    assert paths == [ON_A_GPU] * NUM_STEPS
    for name, param in model.named_parameters():
        master = opt._master_weights[param.name]
        assert master.dtype == paddle.float32 and param.dtype == getattr(paddle, dtype)
        # The parameter is the rounded master weight.
        np.testing.assert_array_equal(param.astype("float32").numpy(), master.astype(dtype).astype("float32").numpy())
    assert_close_to_reference(model, opt, reference)


# --------------------------------------------------------------------------- AMP
@pytest.mark.parametrize("decay_path", DECAY_PATHS)
@pytest.mark.parametrize("level", ["O1", "O2"])
def test_auto_cast_with_grad_scaler_and_an_overflow_step(level, decay_path):
    model = runner.build_model()
    init = runner.initial_weights(model)
    for name, param in model.named_parameters():
        param.set_value(init[name])
    scheduler = runner.make_learning_rate("scheduler")
    opt = runner.make_optimizer("adamwdl", model, scheduler, decay_path=decay_path, multi_precision=level == "O2")
    if level == "O2":
        model, opt = paddle.amp.decorate(models=model, optimizers=opt, level="O2", dtype="float16")
        assert any(param.dtype == paddle.float16 for param in model.parameters())
    scaler = paddle.amp.GradScaler(init_loss_scaling=2.0**10, decr_every_n_nan_or_inf=1)
    reference = reference_for(model)
    overflow_step = 2
    for step, batch in enumerate(runner.batches(num_steps=NUM_STEPS)):
        tensors = {key: paddle.to_tensor(value) for key, value in batch.items()}
        with paddle.amp.auto_cast(level=level, dtype="float16"):
            loss = runner.loss_fn(model, **tensors)
        overflow = step == overflow_step
        if overflow:
            loss = loss * float("inf")  # every gradient becomes inf or nan
            before, scale_before = optimizer_state(model, opt), float(scaler._scale)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        grads = {name: param.grad.astype("float32").numpy() for name, param in model.named_parameters()}
        lr = opt.get_lr()
        scaler.step(opt)
        scaler.update()
        opt.clear_grad()
        if overflow:
            after = optimizer_state(model, opt)
            changed = [key for key in before if not np.array_equal(before[key], after[key], equal_nan=True)]
            assert not changed, f"the overflow step changed {changed}"
            assert float(scaler._scale) == scale_before / 2  # GradScaler saw the overflow
            continue  # no scheduler step, no reference step: as if it never happened
        assert all(np.isfinite(grad).all() for grad in grads.values())
        scheduler.step()
        reference_step(reference, grads, lr)
    assert_close_to_reference(model, opt, reference)


# --------------------------------------------------------------------------- issues 10-14 on the fused kernel
def _skip_without_bfloat16(dtype):
    if dtype == "bfloat16" and not paddle.amp.is_bfloat16_supported():
        pytest.skip("this GPU has no bfloat16 support")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tensor_betas_on_the_fused_master_weight_path(dtype):
    """Tensor betas reach the fused kernel as their values, and the beta
    powers (on the CPU, as Paddle places them) start at those values."""
    _skip_without_bfloat16(dtype)
    scenarios.check_tensor_betas(dtype)


def test_layer_decay_param_groups_with_paddle_adamw_in_float16_o2():
    scenarios.check_layer_decay_groups_with_paddle_adamw(amp_level="O2")


@pytest.mark.parametrize("amsgrad", [False, True], ids=["adamw", "amsgrad"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_weight_decay_schedule_on_the_multi_tensor_path_with_master_weights(dtype, amsgrad):
    """On a GPU Paddle's multi_precision kernel updates float16/bfloat16 parameters over the flat
    layout, every step, while the schedule changes the coefficient."""
    _skip_without_bfloat16(dtype)
    scenarios.check_weight_decay_schedule_on_the_multi_tensor_path(dtype, amsgrad=amsgrad)


@pytest.mark.parametrize("grouped", [False, True], ids=["one group", "two groups"])
def test_an_overflow_step_leaves_the_ema_the_weight_decay_schedule_and_the_weights(grouped):
    scenarios.check_overflow_leaves_ema_schedule_and_weights(amp=True, grouped=grouped)


# --------------------------------------------------------------------------- multi-GPU
def launch_two_gpus(wrapper: str, out_dir: Path) -> subprocess.CompletedProcess:
    log_dir = out_dir / "log"
    command = [
        sys.executable, "-m", "paddle.distributed.launch", "--devices", "0,1", "--max_restart", "0",
        "--job_id", f"llrd-gpu-{wrapper}-{uuid.uuid4().hex[:8]}", "--log_dir", str(log_dir),
        str(HERE / "helpers" / "dist_worker.py"), "--launcher", "launch", "--wrapper", wrapper, "--out-dir", str(out_dir),
    ]
    env = {key: value for key, value in os.environ.items() if key != "PADDLE_DISTRI_BACKEND"}
    proc = subprocess.Popen(
        command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
    logs = "".join(
        f"\n--- {log.name} ---\n{log.read_text(errors='replace')[-3000:]}" for log in sorted(log_dir.glob("workerlog.*"))
    )
    return subprocess.CompletedProcess(command, proc.returncode, output + logs, "")


@pytest.mark.skipif(visible_gpu_count() < 2, reason="needs 2 GPUs")
@pytest.mark.parametrize(
    "wrapper", ["data_parallel", "fleet", "fleet_sharding", "group_sharded_stage2", "group_sharded_stage3"]
)
def test_two_gpus_match_one_gpu(tmp_path, wrapper):
    """NCCL data parallel, and the sharding levels Paddle refuses on CPU
    (``group_sharded_parallel`` stages 2 and 3)."""
    single_dir = tmp_path / "single"
    single_dir.mkdir()
    dist_worker.train("single", "adamwdl", str(single_dir), device="gpu:0")
    with np.load(single_dir / "single.npz") as saved:
        single = dict(saved)
    assert "error" not in single, single.get("error")

    proc = launch_two_gpus(wrapper, tmp_path)
    ranks = []
    for rank in range(2):
        path = tmp_path / f"rank{rank}.npz"
        assert path.exists(), f"rank {rank} wrote no result (exit {proc.returncode}):\n{proc.stdout[-6000:]}"
        with np.load(path) as saved:
            result = dict(saved)
        assert "error" not in result, f"rank {rank} raised:\n{result['error']}"
        assert str(result["backend"]).upper() == "NCCL" and int(result["world_size"]) == 2
        ranks.append(result)
    assert proc.returncode == 0, proc.stdout[-6000:]
    for key, expected in single.items():
        if not key.startswith("final/"):
            continue
        np.testing.assert_allclose(ranks[1][key], ranks[0][key], rtol=0, atol=1e-7, err_msg=f"ranks differ on {key}")
        np.testing.assert_allclose(ranks[0][key], expected, rtol=0, atol=1e-5, err_msg=f"2 GPUs vs 1 on {key}")


# ------------------------------------------------------ multi-tensor step
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_multi_tensor_step_matches_the_per_parameter_path_on_gpu(dtype):
    """Paddle's ``adamw`` kernel over the flat layout of GPU tensors (the kernel's own
    master-weight input for float16/bfloat16) at every step, with the per-parameter path's
    bits (``tests/optim/test_multi_tensor.py`` runs whole on a GPU too)."""
    import multi_tensor_runs as multi_tensor

    multi = multi_tensor.both_paths(
        multi_tensor.elementwise_step, steps=6, model_dtype=dtype, multi_precision=dtype != "float32"
    )
    assert multi.paths == [ON_A_GPU] * 6
    assert all("gpu" in str(p.place).lower() for p in multi.model.parameters())
