"""paddle_llrd: AdamW with layer-wise learning-rate decay for PaddlePaddle 3.

A working drop-in for ``paddlenlp.ops.optimizer`` (``AdamWDL``,
``layerwise_lr_decay``, ``ExponentialMovingAverage``) and
``paddlenlp.transformers.optimization`` (the warmup schedulers and the
``get_scheduler`` registry), on CPU and GPU, in every execution mode.
"""

# 3.0 is the oldest release accepted, and CI tests it (make test-oldest-paddle).
_MIN_PADDLE = (3, 0)
# PyPI's paddlepaddle-gpu stops at 2.6.2: Paddle 3 GPU builds come only from
# Paddle's own package index, one per CUDA version (cu118, cu126, cu129). The
# READMEs, the docs and scripts/gpu_check.sh give this same command.
_GPU_INSTALL_COMMAND = (
    "python -m pip install paddlepaddle-gpu==3.3.1 "
    "-i https://www.paddlepaddle.org.cn/packages/stable/cu126/"
)
_INSTALL_HINT = (
    "On CPU: `pip install paddlepaddle>=3.0` (or `pip install paddle_llrd[cpu]`). "
    "On a CUDA machine, Paddle 3 GPU builds are not on PyPI; install one from "
    "Paddle's package index for your CUDA version: `" + _GPU_INSTALL_COMMAND + "` "
    "(CUDA 12.6; cu118 or cu129 in the URL for CUDA 11.8 or 12.9)."
)


def _check_paddle() -> None:
    import warnings

    try:
        with warnings.catch_warnings():
            # Importing Paddle warns that no ccache was found, which matters only for compiling C++
            # extensions (this package compiles none); every `python -m paddle_llrd` command began with it.
            warnings.filterwarnings("ignore", category=UserWarning, module=r"paddle\.utils\.cpp_extension")
            import paddle
    except ImportError as exc:
        raise ImportError(
            "paddle_llrd needs PaddlePaddle >= 3.0, which is not installed. "
            + _INSTALL_HINT
        ) from exc
    version = getattr(paddle, "__version__", "0.0.0")
    try:
        major_minor = tuple(int(part) for part in version.split(".")[:2])
    except ValueError:  # e.g. a nightly "3.1.0.dev20250101" still parses; others are dev builds
        return
    if major_minor != (0, 0) and major_minor < _MIN_PADDLE:  # 0.0.0 marks a source build
        raise ImportError(
            f"paddle_llrd needs PaddlePaddle >= 3.0, found {version}. " + _INSTALL_HINT
        )


_check_paddle()

from .schedules.warmup import (  # noqa: E402
    ConstScheduleWithWarmup,
    CosineAnnealingWithWarmupDecay,
    CosineDecayWithWarmup,
    InverseSquareRootSchedule,
    LinearAnnealingWithWarmupDecay,
    LinearDecayWithWarmup,
    PolyDecayWithWarmup,
)
from .schedules.functions import (  # noqa: E402
    get_constant_schedule,
    get_constant_schedule_with_warmup,
    get_cosine_annealing_schedule_with_warmup,
    get_cosine_schedule_with_warmup,
    get_cosine_with_hard_restarts_schedule_with_warmup,
    get_cosine_with_min_lr_schedule_with_warmup,
    get_inverse_sqrt_schedule,
    get_linear_annealing_schedule_with_warmup,
    get_linear_schedule_with_warmup,
    get_polynomial_decay_schedule_with_warmup,
    get_wsd_schedule,
)
from .schedules.registry import (  # noqa: E402
    TYPE_TO_SCHEDULER_FUNCTION,
    SchedulerType,
    get_scheduler,
    get_sequential_schedule,
    register_scheduler,
    schedule_options,
)
from .schedules.plateau import ReduceOnPlateauSchedule, get_reduce_on_plateau_schedule  # noqa: E402
from .schedules.sequential import SequentialSchedule  # noqa: E402
from .layer_decay.layerwise import layerwise_lr_decay  # noqa: E402
from .layer_decay.layer_maps import LayerMap, build_name_dict, make_layerwise_fn, no_decay_parameter_names, resolve_layer_map  # noqa: E402
from .layer_decay.param_groups import layer_decay_param_groups, param_groups_table  # noqa: E402
from .layer_decay.grad_norms import layer_grad_norms, layer_groups  # noqa: E402
from .optim.adamw import AdamW  # noqa: E402
from .optim.adamwdl import AdamWDL  # noqa: E402
from .optim.ema import ExponentialMovingAverage  # noqa: E402
from .schedules.weight_decay import WeightDecaySchedule  # noqa: E402
from .warning_classes import (  # noqa: E402
    AdamWDifferenceWarning,
    CheckpointMatchWarning,
    DecayAboveOneWarning,
    DetachedSchedulerWarning,
    EMAHorizonWarning,
    FusedOperatorWarning,
    LayerMapWarning,
    LLRDWarning,
    LongWarmupWarning,
    TrainerSettingWarning,
)

__version__ = "0.1.0"

__all__ = [
    "AdamW",
    "AdamWDL",
    "AdamWDifferenceWarning",
    "CheckpointMatchWarning",
    "ConstScheduleWithWarmup",
    "CosineAnnealingWithWarmupDecay",
    "CosineDecayWithWarmup",
    "DecayAboveOneWarning",
    "DetachedSchedulerWarning",
    "EMAHorizonWarning",
    "ExponentialMovingAverage",
    "FusedOperatorWarning",
    "InverseSquareRootSchedule",
    "LLRDWarning",
    "LayerMap",
    "LayerMapWarning",
    "LinearAnnealingWithWarmupDecay",
    "LinearDecayWithWarmup",
    "LongWarmupWarning",
    "PolyDecayWithWarmup",
    "ReduceOnPlateauSchedule",
    "SchedulerType",
    "SequentialSchedule",
    "TYPE_TO_SCHEDULER_FUNCTION",
    "TrainerSettingWarning",
    "WeightDecaySchedule",
    "build_name_dict",
    "get_constant_schedule",
    "get_constant_schedule_with_warmup",
    "get_cosine_annealing_schedule_with_warmup",
    "get_cosine_schedule_with_warmup",
    "get_cosine_with_hard_restarts_schedule_with_warmup",
    "get_cosine_with_min_lr_schedule_with_warmup",
    "get_inverse_sqrt_schedule",
    "get_linear_annealing_schedule_with_warmup",
    "get_linear_schedule_with_warmup",
    "get_polynomial_decay_schedule_with_warmup",
    "get_reduce_on_plateau_schedule",
    "get_scheduler",
    "get_sequential_schedule",
    "get_wsd_schedule",
    "layer_decay_param_groups",
    "layer_grad_norms",
    "layer_groups",
    "layerwise_lr_decay",
    "make_layerwise_fn",
    "no_decay_parameter_names",
    "param_groups_table",
    "register_scheduler",
    "resolve_layer_map",
    "schedule_options",
]
