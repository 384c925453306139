"""The cases of tests/optim/test_adamwdl_differential.py: what a case is, the numbers
the float64 reference takes from it (written out from the formulas, not read
from the optimizer), and the Hypothesis strategies that draw cases."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
from hypothesis import strategies as st

from reference_adamw import layer_ratio

N_LAYERS = 2
POSITIONS = ("embeddings", "layer0", "layer1", "head")
# the betas a case with tensor_betas gives as float32 Tensors (the reference uses the float32 values)
TENSOR_BETAS = (0.8, 0.99)


# ------------------------------------------------------------------ cases
@dataclasses.dataclass(frozen=True)
class ParamCase:
    shape: tuple[int, ...] = (3, 2)
    dtype: str = "float32"
    position: str = "head"  # which block of a 2-layer BERT its structured name puts it in
    ratio: float = 1.0  # what the custom ratio function returns (ratios="function"/"tensor")
    lr_attr: float = 1.0  # ParamAttr(learning_rate=...); a group's learning_rate replaces it
    decayed: bool = True  # what apply_decay_param_fun says (when the case has one)
    group: int = 0
    unfrozen_at: int = 0  # the step at which it becomes trainable; 0: trainable when the optimizer is built
    sparse: bool = False  # an embedding table with SelectedRows gradients (2-D, float32)


@dataclasses.dataclass(frozen=True)
class GroupCase:
    learning_rate: float | None = None
    weight_decay: float | None = None  # None: the optimizer's (its schedule's) coefficient
    beta1: float | None = None
    beta2: float | None = None
    epsilon: float | None = None
    clip_norm: float | None = None  # None: the optimizer's grad_clip, applied to this group alone
    lazy_mode: bool | None = None


@dataclasses.dataclass(frozen=True)
class Case:
    params: tuple[ParamCase, ...]
    groups: tuple[GroupCase, ...] | None = None  # None: a plain parameter list
    ratios: str = "layerwise"  # "layerwise", "layer_map", "function", "tensor" or "none"
    layerwise_decay: float = 0.5
    lr: str = "float"  # "float", "step_decay" or "warmup"
    base_lr: float = 0.01
    weight_decay: float = 0.1
    weight_decay_kind: str = "float"  # "float", "tensor", "linear" or "cosine" (a WeightDecaySchedule)
    decay_filter: bool = False  # give apply_decay_param_fun (from ParamCase.decayed)
    clip_norm: float | None = None
    tensor_betas: bool = False  # beta1=Tensor(0.8), beta2=Tensor(0.99); else the default floats
    amsgrad: bool = False
    lazy_mode: bool = False
    steps: int = 4
    overflow_at: int | None = None
    resume_at: int | None = None
    seed: int = 0

    @property
    def multi_precision(self) -> bool:
        return any(p.dtype != "float32" for p in self.params)


def structured_name(param: ParamCase, index: int) -> str:
    if param.position == "embeddings":
        return f"bert.embeddings.param_{index}"
    if param.position == "head":
        return f"classifier.param_{index}"
    return f"bert.encoder.layers.{param.position[-1]}.param_{index}"


# -------------------------------------------------- the reference's inputs
def lr_at(case: Case, step: int) -> float:
    """The global learning rate of loop iteration ``step`` (the scheduler steps every iteration)."""
    if case.lr == "step_decay":  # StepDecay(base, step_size=2, gamma=0.5)
        return case.base_lr * 0.5 ** (step // 2)
    if case.lr == "warmup":  # LinearDecayWithWarmup(base, total_steps=steps + 1, warmup=2)
        total, warmup = case.steps + 1, 2
        return case.base_lr * (step / warmup if step < warmup else (total - step) / (total - warmup))
    return case.base_lr


def weight_decay_at(case: Case, applied_steps: int) -> float:
    """The optimizer-wide coefficient after ``applied_steps`` steps that changed the weights."""
    if case.weight_decay_kind == "tensor":
        return float(np.float32(case.weight_decay))
    start, end, total = schedule_arguments(case)
    if case.weight_decay_kind == "linear":
        return start + (end - start) * min(applied_steps, total) / total
    if case.weight_decay_kind == "cosine":  # Megatron-LM: flat at both ends
        progress = min(applied_steps, total) / total
        return start + (end - start) * 0.5 * (math.cos(math.pi * (1.0 - progress)) + 1.0)
    return case.weight_decay


def schedule_arguments(case: Case) -> tuple[float, float, int]:
    return case.weight_decay, 3.0 * case.weight_decay + 0.05, 3


def ratio_of(case: Case, param: ParamCase, index: int) -> float:
    if case.ratios in ("layerwise", "layer_map"):
        return layer_ratio(structured_name(param, index), case.layerwise_decay, N_LAYERS)
    if case.ratios == "function":
        return param.ratio
    if case.ratios == "tensor":  # a float32 Tensor holds the ratio
        return float(np.float32(param.ratio))
    return 1.0


def group_of(case: Case, param: ParamCase) -> GroupCase:
    return case.groups[param.group] if case.groups is not None else GroupCase()


def lr_scale_of(case: Case, param: ParamCase) -> float:
    """The ParamAttr lr factor; in parameter groups Paddle replaces it with the group's (default 1.0)."""
    if case.groups is None:
        return param.lr_attr
    own = group_of(case, param).learning_rate
    return 1.0 if own is None else own


# ------------------------------------------------------------- strategies
RATIOS = st.sampled_from([0.0, 1e-13, 0.25, 0.5, 0.75, 1.0, 1.5])


@st.composite
def param_cases(draw, *, n_groups: int, steps: int, half_allowed: bool) -> ParamCase:
    sparse = draw(st.sampled_from([False, False, True]))
    if sparse:
        shape: tuple[int, ...] = (draw(st.sampled_from([6, 8, 10])), draw(st.integers(1, 3)))
        dtype = "float32"
    else:
        shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
        dtype = draw(st.sampled_from(["float32", "float16", "bfloat16"])) if half_allowed else "float32"
    return ParamCase(
        shape=shape,
        dtype=dtype,
        position=draw(st.sampled_from(POSITIONS)),
        ratio=draw(RATIOS),
        lr_attr=draw(st.sampled_from([1.0, 1.0, 0.5, 2.0, 0.0])),
        decayed=draw(st.booleans()),
        group=draw(st.integers(0, n_groups - 1)),
        unfrozen_at=draw(st.sampled_from([0, 0, 0, 1, steps - 1])),
        sparse=sparse,
    )


@st.composite
def group_cases(draw) -> GroupCase:
    maybe = lambda values: draw(st.sampled_from([None, *values]))  # noqa: E731
    return GroupCase(
        learning_rate=maybe([0.5, 2.0]),
        weight_decay=maybe([0.0, 0.3]),
        beta1=maybe([0.8]),
        beta2=maybe([0.95]),
        epsilon=maybe([1e-6]),
        clip_norm=draw(st.sampled_from([None, None, None, 0.5, 3.0])),
        lazy_mode=maybe([True, False]),
    )


@st.composite
def cases(draw) -> Case:
    steps = draw(st.integers(3, 5))
    grouped = draw(st.booleans())
    groups = tuple(draw(st.lists(group_cases(), min_size=1, max_size=2))) if grouped else None
    n_groups = len(groups) if groups else 1
    clip_norm = draw(st.sampled_from([None, None, None, 0.5, 5.0]))
    # Paddle 3.3.1's ClipGradByGlobalNorm has no float16/bfloat16 CPU kernel
    # (squared_l2_norm): no half-precision parameters where anything clips.
    clipping = clip_norm is not None or any(g.clip_norm is not None for g in groups or ())
    params = tuple(
        draw(st.lists(param_cases(n_groups=n_groups, steps=steps, half_allowed=not clipping), min_size=1, max_size=4))
    )
    if groups is not None:  # Paddle refuses empty groups: keep the groups that have parameters
        used = sorted({p.group for p in params})
        groups = tuple(groups[i] for i in used)
        params = tuple(dataclasses.replace(p, group=used.index(p.group)) for p in params)
    return Case(
        params=params,
        groups=groups,
        ratios=draw(st.sampled_from(["layerwise", "layer_map", "function", "tensor", "none"])),
        layerwise_decay=draw(st.sampled_from([0.5, 0.8, 1.0])),
        lr=draw(st.sampled_from(["float", "step_decay", "warmup"])),
        base_lr=draw(st.sampled_from([0.01, 0.05])),
        weight_decay=draw(st.sampled_from([0.0, 0.1, 0.4])),
        weight_decay_kind=draw(st.sampled_from(["float", "tensor", "linear", "cosine"])),
        decay_filter=draw(st.booleans()),
        clip_norm=clip_norm,
        tensor_betas=draw(st.booleans()),
        amsgrad=draw(st.booleans()),
        lazy_mode=draw(st.booleans()),
        steps=steps,
        overflow_at=draw(st.sampled_from([None, 0, 1, steps - 1])),
        resume_at=draw(st.sampled_from([None, 1, steps - 1])),
        seed=draw(st.integers(0, 2**16)),
    )
