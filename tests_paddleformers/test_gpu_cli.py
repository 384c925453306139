"""``python -m paddle_llrd train`` on GPUs (scripts/gpu_check.sh): the CLI's
default ``compute_type: bf16`` keeps PaddleFormers' AMP defaults, and
pipeline parallel (``pipeline_model_parallel_size: 2``, two GPUs started
through ``paddle.distributed.launch``) trains every stage's parameters at
their global layer's ratio. Skipped without a CUDA build of Paddle and
enough visible GPUs; never run in CI (no GPU)."""
from __future__ import annotations

import paddle
import pytest

from test_cli import check_first_step_ratios, train, weights, workspace, write_config  # noqa: F401  (fixture)


def visible_gpu_count() -> int:
    if not paddle.device.is_compiled_with_cuda():
        return 0
    return paddle.device.cuda.device_count()


@pytest.mark.skipif(visible_gpu_count() < 1, reason="needs a CUDA build of Paddle and a visible GPU")
def test_bf16_default_keeps_paddleformers_amp_defaults(workspace):
    config = write_config(workspace, "bf16", device="gpu", max_steps=2, save_steps=2)
    output = train(config, "compute_type=bf16", env={"CUDA_VISIBLE_DEVICES": "0"})
    assert "amp_master_grad: False (paddleformers-cli" not in output  # PaddleFormers' True stays
    assert (workspace / "bf16" / "checkpoint-2").is_dir()


@pytest.mark.skipif(visible_gpu_count() < 2, reason="needs two visible GPUs")
def test_pipeline_parallel_sft_trains_each_stage_at_global_ratios(workspace):
    config = write_config(workspace, "pipeline", device="gpu", pipeline_model_parallel_size=2,
                          max_steps=1, save_steps=1, gradient_accumulation_steps=1)
    train(config, "--nproc_per_node", "2", env={"CUDA_VISIBLE_DEVICES": "0,1"})
    # the unified checkpoint holds the single model's names, each stage's shard
    check_first_step_ratios(weights(workspace / "model"), weights(workspace / "pipeline" / "checkpoint-1"))
