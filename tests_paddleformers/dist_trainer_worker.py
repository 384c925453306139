"""One rank of a 2-process ``LLRDTrainer`` run (PaddleFormers), started by
``python -m paddle.distributed.launch --nproc_per_node 2`` on CPU (gloo), or
one process on the whole batch (the reference) when run without a launcher.

``tests_paddleformers/test_distributed.py`` starts it. Every run trains the
tiny LLaMA of ``support.py`` for 3 steps with layer decay, a weight-decay ramp
and an EMA on a data set of exactly one global batch (8 sequences), so every
step sees all of it whatever order the samplers pick: each of 2 ranks gets 4
sequences a step, and the all-reduced average of their gradients is the
gradient of the whole batch. The final weights and the EMA's averaged weights
go to ``<out-dir>/rank<r>.npz`` (``single.npz`` without a launcher)::

    python -m paddle.distributed.launch --nproc_per_node 2 \\
        tests_paddleformers/dist_trainer_worker.py --out-dir OUT \\
        [--sharding stage1 --max-grad-norm 0]

``--sharding ""`` (the default here) is pure data parallel; ``stage1`` is
PaddleFormers' default optimizer-state sharding, which on CPU needs
``split_param=False`` (its ``split_param=True`` v2 requires
``amp_master_grad``, i.e. AMP) and ``--max-grad-norm 0`` (with clipping,
PaddleFormers 1.2.0's ``_wrap_distributed_optimizer`` reads ``_inner_opt`` of
the still unwrapped optimizer and fails, for its own AdamW too).
"""
from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Optional, Sequence

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support import TokenDataset, make_llama  # noqa: E402  (a sibling module)

GLOBAL_BATCH = 8
STEPS = 3


def train(out_dir: str, sharding: str = "", max_grad_norm: float = 1.0) -> None:
    """Train on this rank (or alone) and save its weights and EMA weights."""
    import paddle.distributed as dist

    from paddle_llrd import AdamWDL
    from paddle_llrd.integrations.paddleformers import LLRDTrainer, LLRDTrainingArguments

    world_size = int(os.environ.get("PADDLE_TRAINERS_NUM", "1"))
    rank = int(os.environ.get("PADDLE_TRAINER_ID", "0"))
    out_name = f"rank{rank}.npz" if world_size > 1 else "single.npz"
    result = {}
    try:
        args = LLRDTrainingArguments(
            output_dir=os.path.join(out_dir, "run"),
            max_steps=STEPS,
            per_device_train_batch_size=GLOBAL_BATCH // world_size,
            learning_rate=1e-2,
            warmup_steps=1,
            lr_scheduler_type="cosine",
            layerwise_decay=0.5,
            weight_decay=0.01,
            weight_decay_end=0.05,
            weight_decay_incr_style="linear",
            ema_decay=0.5,
            max_grad_norm=max_grad_norm,
            sharding=sharding,
            split_param=False,
            seed=11,
            logging_steps=1,
            save_strategy="no",
            disable_tqdm=True,
        )
        from paddleformers.trainer import TrainerCallback

        class LastTrainingLog(TrainerCallback):
            """What the last training log says about the layer groups and the gradients."""

            def on_log(self, args, state, control, logs=None, **kwargs):
                if logs and "loss" in logs:
                    for key, value in logs.items():
                        if key.startswith(("learning_rate/", "grad_norm", "weight_decay")):
                            result[f"logged/{key}"] = np.asarray(value)

        model = make_llama()
        trainer = LLRDTrainer(model=model, args=args, train_dataset=TokenDataset(n_examples=GLOBAL_BATCH),
                              callbacks=[LastTrainingLog()])
        trainer.train()
        result["world_size"] = np.asarray(dist.get_world_size())
        result["backend"] = np.asarray(str(dist.get_backend()) if world_size > 1 else "none")
        result["model_class"] = np.asarray(type(trainer.model_wrapped).__name__)
        # fleet wraps the optimizer (twice for sharding); the one inside must still be paddle_llrd's.
        inner = trainer.optimizer
        while hasattr(inner, "_inner_opt"):
            inner = inner._inner_opt
        result["optimizer_wrapper"] = np.asarray(type(trainer.optimizer).__name__ if inner is not trainer.optimizer else "")
        result["inner_is_adamwdl"] = np.asarray(isinstance(inner, AdamWDL))
        for name, param in model.named_parameters():
            result[f"final/{name}"] = param.numpy()
        with trainer.ema.average_parameters():
            for name, param in model.named_parameters():
                result[f"ema/{name}"] = param.numpy()
    except Exception:  # saved for the test to show; the process still exits non-zero
        result["error"] = np.asarray(traceback.format_exc())
        np.savez(os.path.join(out_dir, out_name), **result)
        raise
    np.savez(os.path.join(out_dir, out_name), **result)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--sharding", default="", choices=("", "stage1"))
    parser.add_argument("--max-grad-norm", type=float, default=1.0)
    args = parser.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    train(args.out_dir, args.sharding, args.max_grad_norm)
    return 0


if __name__ == "__main__":
    sys.exit(main())
