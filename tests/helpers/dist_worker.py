"""One rank of a 2-process data-parallel run, on Paddle's own distributed engine.

``tests/test_distributed.py`` (CPU, gloo) and ``tests/test_gpu.py`` (GPU,
NCCL) launch it. Each rank trains the model of ``tests/helpers/mode_runner.py`` on its
half of every batch (the loss is the mean over that half, so the all-reduced
average of the two gradients is the gradient of the whole batch) and saves its
final weights to ``<out-dir>/rank<r>.npz``.

Launchers (both work on a CPU-only Paddle 3.3.1 build, where Paddle picks the
gloo backend itself because it is not compiled with CUDA/XPU; ``spawn`` is
called with ``backend="gloo"``, and ``launch`` sets
``PADDLE_DISTRI_BACKEND=gloo`` for its ranks when no accelerator is selected)::

    # paddle.distributed.spawn, started from this script (CPU, gloo)
    python tests/helpers/dist_worker.py --launcher spawn --nprocs 2 --wrapper data_parallel --out-dir OUT

    # paddle.distributed.launch, which starts this script once per rank
    python -m paddle.distributed.launch --nproc_per_node 2 \\
        tests/helpers/dist_worker.py --launcher launch --wrapper fleet --out-dir OUT

    # the same on two GPUs (NCCL)
    python -m paddle.distributed.launch --devices 0,1 \\
        tests/helpers/dist_worker.py --launcher launch --wrapper fleet --out-dir OUT

Wrappers: ``data_parallel`` (``paddle.distributed.init_parallel_env`` +
``paddle.DataParallel``), ``fleet`` (``fleet.init(is_collective=True)`` +
``fleet.distributed_model`` + ``fleet.distributed_optimizer``: pure data
parallel), ``fleet_sharding`` (the same with ``hybrid_configs``
``sharding_degree=2``: optimizer-state sharding, ZeRO stage 1),
``group_sharded_stage2`` / ``group_sharded_stage3``
(``paddle.distributed.sharding.group_sharded_parallel`` levels ``os_g`` and
``p_g_os``; GPU/XPU only, Paddle refuses them on CPU) and ``single`` (one
process on the whole batch: the reference).
"""
from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Optional, Sequence

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mode_runner  # noqa: E402  (a sibling script, not a package)

# group_sharded_parallel levels: "os_g" is ZeRO stage 2, "p_g_os" stage 3.
GROUP_SHARDED_LEVELS = {"group_sharded_stage2": "os_g", "group_sharded_stage3": "p_g_os"}
WRAPPERS = ("data_parallel", "fleet", "fleet_sharding", "single") + tuple(GROUP_SHARDED_LEVELS)


def train(wrapper: str, optimizer_kind: str, out_dir: str, device: Optional[str] = None) -> None:
    """Train on this rank and save ``rank<r>.npz`` (``single.npz`` for ``single``).

    ``device`` (``"cpu"``, ``"gpu"``) is set with ``paddle.set_device`` when
    given; a launcher's ranks otherwise run where the launcher put them.
    """
    import paddle
    import paddle.distributed as dist

    if device is not None:
        paddle.set_device(device)
    result = {}
    if wrapper == "single":
        rank, world_size, out_name = 0, 1, "single.npz"
    else:
        rank, world_size = dist.get_rank(), dist.get_world_size()
        out_name = f"rank{rank}.npz"
    try:
        if wrapper == "data_parallel" or wrapper in GROUP_SHARDED_LEVELS:
            dist.init_parallel_env()
        elif wrapper.startswith("fleet"):
            from paddle.distributed import fleet

            strategy = fleet.DistributedStrategy()
            if wrapper == "fleet_sharding":
                # ZeRO stage 1 of dygraph hybrid parallel: each rank keeps and
                # updates the optimizer state of half the parameters, then
                # broadcasts them (DygraphShardingOptimizer).
                strategy.hybrid_configs = {"dp_degree": 1, "mp_degree": 1, "pp_degree": 1, "sharding_degree": 2}
            fleet.init(is_collective=True, strategy=strategy)
        rank, world_size = dist.get_rank(), dist.get_world_size()
        result["world_size"] = np.asarray(world_size)
        result["backend"] = np.asarray(str(paddle.distributed.get_backend()) if world_size > 1 else "none")

        model = mode_runner.build_model()
        init = mode_runner.initial_weights(model)
        for name, param in model.named_parameters():
            param.set_value(init[name])
        scheduler = mode_runner.make_learning_rate("scheduler")
        # The optimizer sees the inner model's parameters and names: the
        # wrappers prefix structured names with "_layers." but keep p.name.
        # PADDLE_LLRD_TEST_PER_PARAMETER=1: the per-parameter path, to compare the multi-tensor one with
        per_parameter = os.environ.get("PADDLE_LLRD_TEST_PER_PARAMETER") == "1"
        opt = mode_runner.make_optimizer(optimizer_kind, model, scheduler,
                                         **({"use_multi_tensor": False} if per_parameter else {}))
        if wrapper == "data_parallel":
            trained = paddle.DataParallel(model)
        elif wrapper.startswith("fleet"):
            trained = fleet.distributed_model(model)
            opt = fleet.distributed_optimizer(opt)
        elif wrapper in GROUP_SHARDED_LEVELS:
            from paddle.distributed.sharding import group_sharded_parallel

            trained, opt, _ = group_sharded_parallel(model, opt, level=GROUP_SHARDED_LEVELS[wrapper])
        else:
            trained = model
        result["optimizer_class"] = np.asarray(type(opt).__name__)
        result["model_class"] = np.asarray(type(trained).__name__)

        inner = opt
        while not hasattr(inner, "last_update_path") and hasattr(inner, "_inner_opt"):
            inner = inner._inner_opt  # fleet's wrappers hold the AdamWDL the user built
        paths = []
        for batch in mode_runner.batches():
            half = len(batch["labels"]) // world_size
            shard = {key: paddle.to_tensor(value[rank * half:(rank + 1) * half]) for key, value in batch.items()}
            loss = mode_runner.loss_fn(trained, **shard)
            loss.backward()
            opt.step()
            opt.clear_grad()
            scheduler.step()
            last_path = getattr(inner, "last_update_path", None)
            if last_path is not None:
                paths.append(last_path)
        if paths:  # (AdamWDL's) which path each step took, and the threads of its multi-tensor step
            result["update_paths"] = np.asarray([path.path for path in paths])
            result["update_path_reasons"] = np.asarray([str(path.reason) for path in paths])
            result["update_path"], result["update_path_reason"] = result["update_paths"][-1], result["update_path_reasons"][-1]
            result["multi_tensor_threads"] = np.asarray(inner.num_threads)
        if hasattr(trained, "get_all_parameters"):  # stage 3 keeps only this rank's slice of each parameter
            trained.get_all_parameters()
        for name, param in model.named_parameters():
            result[f"final/{name}"] = param.numpy()
    except Exception:  # saved for the test to show; the process still exits non-zero
        result["error"] = np.asarray(traceback.format_exc())
        np.savez(os.path.join(out_dir, out_name), **result)
        raise
    np.savez(os.path.join(out_dir, out_name), **result)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wrapper", choices=WRAPPERS, required=True)
    parser.add_argument("--launcher", choices=("spawn", "launch", "none"), default="none")
    parser.add_argument("--nprocs", type=int, default=2)
    parser.add_argument("--optimizer", choices=mode_runner.OPTIMIZERS, default="adamwdl")
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--device", default=None, help="paddle.set_device() argument for each rank (e.g. cpu)")
    args = parser.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    if args.launcher == "spawn":
        import paddle.distributed as dist

        dist.spawn(
            train, args=(args.wrapper, args.optimizer, args.out_dir, args.device), nprocs=args.nprocs, backend="gloo"
        )
    else:
        train(args.wrapper, args.optimizer, args.out_dir, args.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
