"""What only a GPU can check: the fused ``adamw`` kernel's float16/bfloat16
master-weight path, ``paddle.amp.auto_cast`` O1/O2 with ``GradScaler``
(including an overflow step), and multi-GPU data parallel and sharding.

Every test is skipped without a CUDA build of Paddle and a visible GPU (CI
has none); ``scripts/gpu_check.sh`` installs ``paddlepaddle-gpu`` and runs
this file with a pass/fail summary. The numbers are checked against the
float64 reference of ``tests/reference_adamw.py``, fed with the gradients the
optimizer was actually given.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Dict

import numpy as np
import paddle
import pytest

import dist_worker
import mode_runner as runner
from reference_adamw import ReferenceAdamW, layer_ratio

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent


def visible_gpu_count() -> int:
    if not paddle.device.is_compiled_with_cuda():
        return 0
    return paddle.device.cuda.device_count()


pytestmark = pytest.mark.skipif(visible_gpu_count() == 0, reason="needs a CUDA build of Paddle and a visible GPU")

DECAY_PATHS = runner.DECAY_PATHS
NUM_STEPS = 5


@pytest.fixture(autouse=True)
def _on_gpu():
    previous = paddle.device.get_device()
    paddle.set_device("gpu:0")
    yield
    paddle.set_device(previous)


def reference_for(model) -> ReferenceAdamW:
    """A float64 AdamWDL starting from the model's current weights (as float64)."""
    start = {name: param.astype("float32").numpy().astype("float64") for name, param in model.named_parameters()}
    return ReferenceAdamW(
        start, weight_decay=runner.WEIGHT_DECAY, beta1=runner.BETA1, beta2=runner.BETA2, epsilon=runner.EPSILON
    )


def reference_step(reference: ReferenceAdamW, grads: Dict[str, np.ndarray], lr: float) -> None:
    reference.step(
        grads,
        lr,
        ratio=lambda name: layer_ratio(name, runner.LAYERWISE_DECAY, runner.NUM_LAYERS),
        lr_scale=lambda name: runner.PARAM_LR_SCALES.get(name, 1.0),
        decay=runner.is_decayed,
    )


def updated_weights(model, opt) -> Dict[str, np.ndarray]:
    """The weights the optimizer keeps: the float32 master weight of a
    float16/bfloat16 parameter, else the parameter."""
    weights = {}
    for name, param in model.named_parameters():
        master = opt._master_weights.get(param.name)
        weights[name] = (master if master is not None else param).astype("float32").numpy()
    return weights


def optimizer_state(model, opt) -> Dict[str, np.ndarray]:
    state = {f"{name}/weight": value for name, value in updated_weights(model, opt).items()}
    for name, param in model.named_parameters():
        state[f"{name}/param"] = param.astype("float32").numpy()
    for accumulator, per_param in opt._accumulators.items():
        for param_name, tensor in per_param.items():
            state[f"{param_name}/{accumulator}"] = tensor.astype("float32").numpy()
    return state


def assert_close_to_reference(model, opt, reference: ReferenceAdamW, atol: float = 1e-5) -> None:
    actual = updated_weights(model, opt)
    worst = max(
        ((name, float(np.max(np.abs(actual[name] - reference.params[name])))) for name in actual),
        key=lambda item: item[1],
    )
    assert worst[1] <= atol, f"largest |difference| to the float64 reference: {worst}"


# --------------------------------------------------------------------------- fused kernel, master weights
@pytest.mark.parametrize("decay_path", DECAY_PATHS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_master_weight_path_matches_float64_reference(dtype, decay_path):
    if dtype == "bfloat16" and not paddle.amp.is_bfloat16_supported():
        pytest.skip("this GPU has no bfloat16 support")
    model = runner.build_model()
    init = runner.initial_weights(model)
    for name, param in model.named_parameters():
        param.set_value(init[name])
    model.to(dtype=dtype)
    scheduler = runner.make_learning_rate("scheduler")
    opt = runner.make_optimizer("adamwdl", model, scheduler, decay_path=decay_path, multi_precision=True)
    reference = reference_for(model)  # the master weights start as the low-precision values
    rng = np.random.RandomState(0)
    for _ in range(NUM_STEPS):
        # Gradients representable in `dtype`: the loss sum(p * G) has gradient G exactly.
        grads = {
            name: paddle.to_tensor(rng.standard_normal(param.shape).astype("float32")).astype(dtype)
            for name, param in model.named_parameters()
        }
        loss = paddle.add_n(
            [(param.astype("float32") * grads[name].astype("float32")).sum() for name, param in model.named_parameters()]
        )
        loss.backward()
        for name, param in model.named_parameters():
            np.testing.assert_array_equal(param.grad.astype("float32").numpy(), grads[name].astype("float32").numpy())
        lr = opt.get_lr()
        opt.step()
        opt.clear_grad()
        scheduler.step()
        reference_step(reference, {name: g.astype("float32").numpy() for name, g in grads.items()}, lr)
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


# --------------------------------------------------------------------------- multi-GPU
def launch_two_gpus(wrapper: str, out_dir: Path) -> subprocess.CompletedProcess:
    log_dir = out_dir / "log"
    command = [
        sys.executable, "-m", "paddle.distributed.launch", "--devices", "0,1", "--max_restart", "0",
        "--job_id", f"llrd-gpu-{wrapper}-{uuid.uuid4().hex[:8]}", "--log_dir", str(log_dir),
        str(HERE / "dist_worker.py"), "--launcher", "launch", "--wrapper", wrapper, "--out-dir", str(out_dir),
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
