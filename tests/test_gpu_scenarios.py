"""The scenarios of tests/test_gpu.py on the CPU, in float32 (no AMP: Paddle
disables ``GradScaler`` on a CPU), so that their float64 references, formulas
and bookkeeping run in CI; the GPU runs them in float16/bfloat16."""
from __future__ import annotations

import pytest

import gpu_scenarios as scenarios


@pytest.fixture(autouse=True)
def _on_cpu():
    import paddle

    previous = paddle.device.get_device()
    paddle.set_device("cpu")
    yield
    paddle.set_device(previous)


def test_tensor_betas_in_float32():
    scenarios.check_tensor_betas("float32")


def test_layer_decay_groups_with_paddle_adamw_in_float32():
    scenarios.check_layer_decay_groups_with_paddle_adamw(amp_level=None)


@pytest.mark.parametrize("amsgrad", [False, True], ids=["adamw", "amsgrad"])
def test_a_weight_decay_schedule_on_the_multi_tensor_path_in_float32(amsgrad):
    scenarios.check_weight_decay_schedule_on_the_multi_tensor_path("float32", amsgrad=amsgrad)


def test_a_weight_decay_schedule_on_the_multi_tensor_path_with_float16_master_weights_on_cpu():
    """CPU has no half-precision adamw kernel: the fused operator updates the float32 master weights."""
    scenarios.check_weight_decay_schedule_on_the_multi_tensor_path("float16")


@pytest.mark.parametrize("grouped", [False, True], ids=["one group", "two groups"])
def test_ema_and_weight_decay_schedule_follow_every_step_without_amp(grouped):
    scenarios.check_overflow_leaves_ema_schedule_and_weights(amp=False, grouped=grouped)
