"""Data-parallel training with AdamWDL on 2 CPU processes (Paddle's gloo backend).

Launch it in one of three ways::

    # 1. Paddle's launcher starts this script once per rank
    python -m paddle.distributed.launch --nproc_per_node 2 examples/data_parallel.py

    # 2. the script starts its ranks itself with paddle.distributed.spawn
    python examples/data_parallel.py --spawn 2

    # 3. one process on the whole batch (the reference the ranks must match)
    python examples/data_parallel.py

Add ``--fleet`` to wrap with ``paddle.distributed.fleet``
(``fleet.init(is_collective=True)``, ``fleet.distributed_model``,
``fleet.distributed_optimizer``) instead of ``paddle.DataParallel``, and
``--steps 3`` for a quick check.

On a CPU-only Paddle build the collective backend is gloo (Paddle chooses it
when it is not compiled with CUDA/XPU; ``spawn(..., backend="gloo")`` says it
explicitly). ``--devices``/``--gpus`` of ``paddle.distributed.launch`` select
accelerators and do not apply to CPU: ``--nproc_per_node`` sets the number of
CPU processes. On a GPU build, the same commands run one rank per GPU over NCCL.

Every rank takes its own half of each global batch and the loss is the mean
over that half; ``DataParallel`` averages the gradients over the ranks, which
is the gradient of the mean over the whole batch, so every rank applies the
same update as one process on the whole batch. Each rank prints a checksum of
its final weights: all ranks and the single process print the same number
(up to float32 rounding).

The optimizer is built on the *inner* model: ``name_dict`` comes from its
``named_parameters()`` (``paddle.DataParallel`` would prefix the structured
names with ``_layers.``).
"""
from __future__ import annotations

import argparse
import os
from typing import Optional, Sequence

import numpy as np
import paddle
import paddle.distributed as dist

from paddle_llrd import AdamWDL, LinearDecayWithWarmup, no_decay_parameter_names
from paddle_llrd.models.tiny_bert import TinyBertConfig, TinyBertForSequenceClassification

GLOBAL_BATCH_SIZE = 16
SEQ_LEN = 8


def launched_by_paddle() -> bool:
    """True inside a rank started by ``paddle.distributed.launch`` or ``spawn``."""
    return int(os.environ.get("PADDLE_TRAINERS_NUM", "1")) > 1


def train(steps: int, use_fleet: bool) -> float:
    """Train on this rank; returns (and prints) the checksum of the final weights."""
    distributed = launched_by_paddle()
    if distributed and use_fleet:
        from paddle.distributed import fleet

        fleet.init(is_collective=True)
    elif distributed:
        dist.init_parallel_env()
    rank, world_size = dist.get_rank(), dist.get_world_size()

    # Same seed on every rank: same initial weights and same global batches.
    paddle.seed(0)
    config = TinyBertConfig(vocab_size=16, num_hidden_layers=2, hidden_size=16, num_attention_heads=2,
                            intermediate_size=32)
    model = TinyBertForSequenceClassification(config)
    scheduler = LinearDecayWithWarmup(learning_rate=1e-2, total_steps=steps, warmup=0.1)
    name_dict = {param.name: name for name, param in model.named_parameters()}
    no_decay = no_decay_parameter_names(model)  # biases and norms, as PaddleNLP's Trainer
    optimizer = AdamWDL(
        learning_rate=scheduler,
        parameters=model.parameters(),
        weight_decay=0.01,
        apply_decay_param_fun=lambda param_name: param_name not in no_decay,
        layerwise_decay=0.8,
        n_layers=config.num_hidden_layers,
        name_dict=name_dict,
    )
    if distributed and use_fleet:
        trained, optimizer = fleet.distributed_model(model), fleet.distributed_optimizer(optimizer)
    elif distributed:
        trained = paddle.DataParallel(model)
    else:
        trained = model

    rng = np.random.RandomState(0)
    shard = GLOBAL_BATCH_SIZE // world_size
    for step in range(steps):
        input_ids = rng.randint(0, config.vocab_size, (GLOBAL_BATCH_SIZE, SEQ_LEN)).astype("int64")
        labels = (input_ids[:, 0] % 2).astype("int64")
        mine = slice(rank * shard, (rank + 1) * shard)
        loss = paddle.nn.functional.cross_entropy(
            trained(paddle.to_tensor(input_ids[mine])), paddle.to_tensor(labels[mine])
        )
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        scheduler.step()
        print(f"rank {rank}/{world_size} step {step} loss {float(loss):.4f}", flush=True)
    checksum = float(sum(np.abs(param.numpy().astype("float64")).sum() for param in model.parameters()))
    print(f"rank {rank}/{world_size} final weight checksum {checksum:.8f}", flush=True)
    return checksum


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--spawn", type=int, default=0, metavar="N", help="start N ranks with paddle.distributed.spawn")
    parser.add_argument("--fleet", action="store_true", help="use paddle.distributed.fleet instead of DataParallel")
    args = parser.parse_args(argv)
    if args.spawn:
        dist.spawn(train, args=(args.steps, args.fleet), nprocs=args.spawn, backend="gloo")
    else:
        train(args.steps, args.fleet)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
