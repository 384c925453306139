"""Several ranks for ``python -m paddle_llrd train``: how many, and how they are started.

One device trains in the command's own process. Several GPUs (``device: gpu``
with more than one visible, or ``--nproc_per_node N``) are started the way
``paddleformers-cli`` starts them, through ``paddle.distributed.launch``
running ``python -m paddle_llrd train`` on each rank (:func:`launch_command`,
:func:`launch_ranks`); ``device: cpu`` with ``--nproc_per_node N`` starts N
CPU ranks over gloo. Nothing here needs PaddleFormers.
"""
from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

from paddle_llrd.cli.train_console import LAUNCH_LOG_NAME, relay_launch

__all__ = ["check_world_size", "is_launched_rank", "launch_command", "launch_ranks", "rank", "visible_gpus",
           "world_size"]

PROG = "python -m paddle_llrd train"


def visible_gpus() -> List[str]:
    """The GPUs this process may use: ``CUDA_VISIBLE_DEVICES``, else every CUDA device Paddle sees."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [device for device in visible.split(",") if device.strip()]
    import paddle

    if not paddle.is_compiled_with_cuda():
        return []
    return [str(index) for index in range(paddle.device.cuda.device_count())]


def is_launched_rank() -> bool:
    """Whether this process is a rank that ``paddle.distributed.launch`` started."""
    return "PADDLE_TRAINER_ID" in os.environ and "PADDLE_TRAINERS_NUM" in os.environ


def launch_command(nproc: int, device: str, argv: List[str]) -> Tuple[List[str], Dict[str, str]]:
    """``python -m paddle.distributed.launch ... python -m paddle_llrd train CONFIG ...``
    and its environment, as ``paddleformers-cli`` starts its ranks (log
    directory ``PADDLEFORMERS_DIST_LOG``, master ``MASTER_ADDR:MASTER_PORT``,
    ``NNODES``, ``RANK``)."""
    env = dict(os.environ)
    command = [
        sys.executable, "-m", "paddle.distributed.launch",
        "--log_dir", env.get("PADDLEFORMERS_DIST_LOG", "paddleformers_dist_log"),
        "--nnodes", env.get("NNODES", "1"),
        "--rank", env.get("RANK", "0"),
        "--run_mode=collective",
    ]
    if "MASTER_ADDR" in env or "MASTER_PORT" in env:
        command += ["--master", f"{env.get('MASTER_ADDR', '127.0.0.1')}:{env.get('MASTER_PORT', '8080')}"]
    if device == "cpu":
        env["PADDLE_DISTRI_BACKEND"] = "gloo"
        command += ["--nproc_per_node", str(nproc)]
    else:
        gpus = visible_gpus()
        if nproc > len(gpus):
            raise ValueError(f"--nproc_per_node {nproc} asks for more GPUs than the {len(gpus)} visible ({gpus})")
        command += ["--gpus", ",".join(gpus[:nproc])]
    # the package's root on each rank's path, as paddleformers-cli puts its own
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    # A training script that is no .py file is run as a command: each rank runs `python -m paddle_llrd train`.
    return command + [sys.executable, "-m", "paddle_llrd", "train", *argv], env


def rank() -> int:
    """This process's rank (0 outside a launch)."""
    return int(os.environ.get("PADDLE_TRAINER_ID", "0")) if is_launched_rank() else 0


def world_size(nproc: int) -> int:
    """How many ranks train: the launch's, else the ``nproc`` this command would start."""
    return int(os.environ["PADDLE_TRAINERS_NUM"]) if is_launched_rank() else nproc


def check_world_size(config: Dict[str, Any], world_size: int) -> None:
    """Refuse a ``DPO`` (or ``VL-DPO``) run on one rank, before the model loads.

    Raises:
        ValueError: ``stage`` is a DPO stage and ``world_size`` is 1:
            PaddleFormers 1.2.0's DPO workflow wraps its reference model for
            data parallel, which fails in one process (``AttributeError:
            'Fleet' object has no attribute '_user_defined_strategy'``), its
            own launcher's too.

    Examples:
        >>> check_world_size({"stage": "SFT"}, 1)
        >>> check_world_size({"stage": "DPO"}, 1)
        Traceback (most recent call last):
        ...
        ValueError: stage DPO trains on two or more ranks: ... add --nproc_per_node 2 (a CPU runs them over gloo)
    """
    stage = str(config.get("stage", ""))
    if stage.endswith("DPO") and world_size < 2:
        raise ValueError(
            f"stage {stage} trains on two or more ranks: in one process PaddleFormers 1.2.0's DPO workflow fails "
            "wrapping its reference model for data parallel ('Fleet' object has no attribute "
            "'_user_defined_strategy'); add --nproc_per_node 2 (a CPU runs them over gloo)"
        )


def launch_ranks(nproc: int, device: str, rank_argv: List[str], verbose: bool) -> int:
    """Start ``nproc`` ranks of ``python -m paddle_llrd train`` with ``rank_argv`` and relay their console
    (:func:`~paddle_llrd.cli.train_console.relay_launch`); the launcher's exit status, said in one line."""
    command, env = launch_command(nproc, device, rank_argv)
    log_dir = command[command.index("--log_dir") + 1]
    print(f"[paddle_llrd] launching {nproc} ranks: {shlex.join(command)}", file=sys.stderr, flush=True)
    status = relay_launch(command, env, log_dir, verbose)
    launch_log, rank_logs = os.path.join(log_dir, LAUNCH_LOG_NAME), os.path.join(log_dir, "workerlog.N")
    if status:
        print(f"{PROG}: the launch failed (exit status {status}); the launcher's output is in {launch_log}, "
              f"each rank's in {rank_logs}", file=sys.stderr, flush=True)
    else:
        print(f"the launcher's output is in {launch_log}, each rank's in {rank_logs}", flush=True)
    return status
