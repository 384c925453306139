"""Paddle's clip classes on AdamWDL's multi-tensor step against ``paddle.optimizer.AdamW``
with the same clip, bit for bit, where a sum, a dtype or a shape can go wrong.

Each test trains parameters of varied shapes (0-D and 1-element ones, small
matrices, three of 100k elements or so; float32 or float64;
some with ``need_clip=False`` in their ``ParamAttr``) for a few steps with
``AdamWDL(set_param_lr_fun=None)`` and with ``paddle.optimizer.AdamW``, both
given the same gradients (the loss is ``sum(p * G)``), and compares after every
step the parameters and what each optimizer left in ``p.grad``: Paddle's
``ClipGradByGlobalNorm`` scales the gradients in place (a 0-D one out of
place), ``ClipGradByNorm`` and ``ClipGradByValue`` leave them as they were. Each
also checks that the multi-tensor step ran. The float16/bfloat16 cases need a
GPU (Paddle's CPU has no half-precision ``squared_l2_norm``, ``clip_by_norm``
or ``clip`` kernels) and are skipped without one. Some tests run again with the
fused operator off, where Paddle's kernels apply the clip.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import paddle
import pytest
from paddle.utils import unique_name

from operator_off import ON_A_GPU, PER_PARAMETER_ONLY, flat_path, rerun_with_the_operator_off
from paddle_llrd import AdamWDL

# Varied sizes: 0-D and 1-element ones, small matrices, three of 100k elements or so.
SHAPES = [[1], [7, 3], [100_000], [4, 5, 6], [], [250, 400], [33], [100_003], [1, 1]]
ZERO_DIM = SHAPES.index([])
# The parameters Paddle leaves alone (need_clip=False in their ParamAttr).
NOT_CLIPPED = {1, 5, 8}
LAYOUTS = {
    "float32": ["float32"],
    "float64": ["float64"],
}
STEPS = 3
LR = 2.0**-7

# One of each class (and both auto_skip_clip modes) for the tests that run them all.
CLIPS = {
    "global_norm": lambda: paddle.nn.ClipGradByGlobalNorm(1.0),
    "global_norm_auto_skip": lambda: paddle.nn.ClipGradByGlobalNorm(1.0, auto_skip_clip=True),
    "norm": lambda: paddle.nn.ClipGradByNorm(0.05),
    "value": lambda: paddle.nn.ClipGradByValue(0.004, -0.002),
}


# Clips the multi-tensor step leaves to Paddle: a subclass of an accepted class, and another ClipGradBase.
class MyGlobalNorm(paddle.nn.ClipGradByGlobalNorm):
    pass


class MyClip(paddle.nn.clip.ClipGradBase):
    def _dygraph_clip(self, params_grads):
        return params_grads


def layout_dtypes(layout: str, count: int = len(SHAPES)) -> list[str]:
    cycle = LAYOUTS[layout] if layout in LAYOUTS else layout.split("+")
    return [cycle[i % len(cycle)] for i in range(count)]


def draw_gradients(rng: np.random.Generator, dtypes: list[str], scale: float = 1.0,
                   shapes: list[list[int]] = SHAPES) -> list[np.ndarray]:
    """Standard normal gradients times ``scale``: float64 ones for float64 parameters, else
    float32 (cast to a float16/bfloat16 parameter's dtype when given to it)."""
    return [np.asarray(rng.standard_normal(shape) * scale).astype("float64" if dtype == "float64" else "float32")
            for shape, dtype in zip(shapes, dtypes)]


def as_tensor(values: np.ndarray, dtype: str) -> paddle.Tensor:
    tensor = paddle.to_tensor(values)
    return tensor if tensor.dtype == getattr(paddle, dtype) else tensor.astype(dtype)


def global_norm(grads: list[np.ndarray], need_clip: list[bool]) -> float:
    return float(np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g, flag in zip(grads, need_clip) if flag)))


class Trained(NamedTuple):
    """After each step: the parameters, what ``p.grad`` held, and the path the step took."""

    weights: list[list[np.ndarray]]
    grads: list[list[np.ndarray]]
    paths: list[Any]


def train(make_optimizer: Callable[[list], Any], dtypes: list[str], gradients: list[list[np.ndarray]],
          need_clip: list[bool] | None = None, shapes: list[list[int]] = SHAPES) -> Trained:
    """One step per entry of ``gradients`` (each parameter's gradient is exactly its entry)."""
    need_clip = [i not in NOT_CLIPPED for i in range(len(shapes))] if need_clip is None else need_clip
    rng = np.random.default_rng(0)
    weights, grads, paths = [], [], []
    with unique_name.guard():
        params = []
        for shape, dtype, flag in zip(shapes, dtypes, need_clip):
            param = paddle.create_parameter(shape, dtype, attr=paddle.ParamAttr(need_clip=flag))
            param.set_value(as_tensor(np.asarray(rng.standard_normal(shape)), dtype))
            params.append(param)
        optimizer = make_optimizer(params)
        for step_grads in gradients:
            paddle.add_n([(p * as_tensor(g, d)).sum().astype("float64")
                          for p, g, d in zip(params, step_grads, dtypes)]).backward()
            optimizer.step()
            weights.append([p.numpy().copy() for p in params])
            grads.append([p.grad.numpy().copy() for p in params])
            paths.append(tuple(getattr(optimizer, "last_update_path", None) or ()))
            optimizer.clear_grad()
    return Trained(weights, grads, paths)


def adamwdl(make_clip: Callable[[], Any], **options: Any) -> Callable[[list], AdamWDL]:
    return lambda params: AdamWDL(LR, parameters=params, weight_decay=0.01, grad_clip=make_clip(),
                                  set_param_lr_fun=None, **options)


def adamw(make_clip: Callable[[], Any], **options: Any) -> Callable[[list], Any]:
    """``paddle.optimizer.AdamW`` with the clip ``make_clip()``."""
    return lambda params: paddle.optimizer.AdamW(LR, parameters=params, weight_decay=0.01, grad_clip=make_clip(),
                                                 **options)


def bits(values: np.ndarray) -> np.ndarray:
    values = np.ascontiguousarray(values).reshape(-1)
    return values.view(np.dtype(f"u{values.itemsize}"))


def assert_same_bits(ours: Trained, paddles: Trained) -> None:
    assert len(ours.weights) == len(paddles.weights)
    for step in range(len(paddles.weights)):
        for kind, got, expected in (("parameter", ours.weights, paddles.weights), ("p.grad", ours.grads, paddles.grads)):
            for index, (a, e) in enumerate(zip(got[step], expected[step])):
                assert a.dtype == e.dtype and a.shape == e.shape, (kind, index)
                assert np.array_equal(bits(a), bits(e)), f"{kind} {index} ({a.dtype}, shape {list(a.shape)}) after step {step}"


def check_against_paddle(make_clip: Callable[[], Any], dtypes: list[str], gradients: list[list[np.ndarray]],
                         **options: Any) -> Trained:
    """AdamWDL and AdamW with the same clip and gradients: the same bits; every step of AdamWDL's
    on the multi-tensor path. Returns AdamWDL's run."""
    expected = train(adamw(make_clip), dtypes, gradients, **options)
    ours = train(adamwdl(make_clip), dtypes, gradients, **options)
    assert ours.paths == [flat_path()] * len(gradients)
    assert_same_bits(ours, expected)
    return ours


def clipped(run: Trained, gradients: list[list[np.ndarray]], step: int) -> list[bool]:
    """Which gradients ``p.grad`` held changed after ``step`` (written by the clip)."""
    return [not np.array_equal(bits(a), bits(g)) for a, g in zip(run.grads[step], gradients[step])]


# --------------------------------------------------------------------------- the three classes
@pytest.mark.parametrize("auto_skip_clip", [False, True])
@pytest.mark.parametrize("norm_side", ["above", "below"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_global_norm_matches_paddle(layout: str, norm_side: str, auto_skip_clip: bool) -> None:
    """The first step's global norm above or below ``clip_norm``; the later steps' gradients
    ten times smaller, then three times larger: each step's scale is that step's."""
    rng, dtypes = np.random.default_rng(11), layout_dtypes(layout)
    gradients = [draw_gradients(rng, dtypes, scale=scale) for scale in (0.01, 0.001, 0.03)]
    need_clip = [i not in NOT_CLIPPED for i in range(len(SHAPES))]
    clip_norm = global_norm(gradients[0], need_clip) * (0.5 if norm_side == "above" else 2.0)
    ours = check_against_paddle(lambda: paddle.nn.ClipGradByGlobalNorm(clip_norm, auto_skip_clip=auto_skip_clip),
                                dtypes, gradients)
    for step in range(STEPS):
        flags = clipped(ours, gradients, step)
        above = global_norm(gradients[step], need_clip) > clip_norm
        # scaled in place where the norm is above clip_norm (or below, by 1 without auto_skip_clip),
        # never a gradient with need_clip=False, nor the 0-D one (Paddle scales it out of place)
        assert not any(flags[i] for i in NOT_CLIPPED) and not flags[ZERO_DIM]
        if above:
            assert all(flag for i, flag in enumerate(flags) if i not in NOT_CLIPPED and i != ZERO_DIM)
        elif auto_skip_clip:
            assert not any(flags)
    assert any(clipped(ours, gradients, 0)) == (norm_side == "above")


def check_refused_before_any_change(make_clip: Callable[[], Any], dtypes: list[str], gradients: list[np.ndarray],
                                    error: type, **options: Any) -> None:
    """AdamWDL's step raises ``error``, leaving every parameter, accumulator and gradient as it was."""
    rng = np.random.default_rng(0)
    with unique_name.guard():
        params = []
        for shape, dtype in zip(SHAPES, dtypes):
            param = paddle.create_parameter(shape, dtype)
            param.set_value(as_tensor(np.asarray(rng.standard_normal(shape)), dtype))
            params.append(param)
        optimizer = adamwdl(make_clip, **options)(params)
        paddle.add_n([(p * as_tensor(g, d)).sum().astype("float64")
                      for p, g, d in zip(params, gradients, dtypes)]).backward()
        before = [p.numpy().copy() for p in params]
        with pytest.raises(error):
            optimizer.step()
        for index, (param, value, grad) in enumerate(zip(params, before, gradients)):
            np.testing.assert_array_equal(param.numpy(), value, err_msg=f"parameter {index}")
            np.testing.assert_array_equal(param.grad.numpy(), grad, err_msg=f"gradient {index}")
        for key, value in optimizer.state_dict().items():
            if "moment" in key:
                assert not value.numpy().any(), key


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_clip_by_norm_matches_paddle(layout: str) -> None:
    rng, dtypes = np.random.default_rng(12), layout_dtypes(layout)
    gradients = [draw_gradients(rng, dtypes) for _ in range(STEPS)]
    # The median gradient norm: some gradients above it, some below.
    norms = [float(np.linalg.norm(g.astype(np.float64))) for g in gradients[0]]
    make_clip = lambda: paddle.nn.ClipGradByNorm(float(np.median(norms)))  # noqa: E731
    if layout != "float32":
        # Paddle 3.3.1's CPU clip_by_norm kernel is float32 only: AdamW raises, and so must
        # AdamWDL, before it changes any parameter, moment or gradient.
        with pytest.raises(RuntimeError) as paddle_error:
            train(adamw(make_clip), dtypes, gradients[:1])
        assert "not registered" in str(paddle_error.value)
        check_refused_before_any_change(make_clip, dtypes, gradients[0], type(paddle_error.value))
        return
    ours = check_against_paddle(make_clip, dtypes, gradients)
    assert not any(clipped(ours, gradients, 0))  # (p.grad as it was: Paddle's clipped copies fed the update)
    weights_without_clip = train(adamw(lambda: None), dtypes, gradients).weights
    changed = [not np.array_equal(a, b) for a, b in zip(ours.weights[0], weights_without_clip[0])]
    assert any(changed) and not all(changed)


@pytest.mark.parametrize("bounds", [(0.5, None), (0.3, -0.1)], ids=["symmetric", "asymmetric"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_clip_by_value_matches_paddle(layout: str, bounds: tuple) -> None:
    rng, dtypes = np.random.default_rng(13), layout_dtypes(layout)
    gradients = [draw_gradients(rng, dtypes) for _ in range(STEPS)]
    ours = check_against_paddle(lambda: paddle.nn.ClipGradByValue(*bounds), dtypes, gradients)
    assert not any(any(clipped(ours, gradients, step)) for step in range(STEPS))  # p.grad as it was
    assert any(np.abs(g).max() > 0.5 for g in gradients[0])  # (and the clip clipped)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_global_norm_sums_as_paddle_does(layout: str) -> None:
    """Many small gradients whose squared norms span twelve orders of magnitude, new at each
    of many steps: a sum in another order or dtype (a float64 sum of float32 norms, a running
    sum in place of stack().sum()) gives a global norm some ulps off at some step, and the
    scale the clip writes into ``p.grad`` with it."""
    rng = np.random.default_rng(17)
    count = 60
    shapes = [[int(rng.integers(1, 50))] for _ in range(count)]
    dtypes = layout_dtypes(layout, count)
    need_clip = [i % 7 != 3 for i in range(count)]
    gradients = [[g * np.asarray(10.0 ** rng.uniform(-3, 3)).astype(g.dtype)
                  for g in draw_gradients(rng, dtypes, shapes=shapes)] for _ in range(30)]
    clip_norm = min(global_norm(step, need_clip) for step in gradients) / 3  # (every step clips)
    check_against_paddle(lambda: paddle.nn.ClipGradByGlobalNorm(clip_norm), dtypes, gradients,
                         need_clip=need_clip, shapes=shapes)


@pytest.mark.parametrize("poison", [np.inf, np.nan], ids=["inf", "nan"])
@pytest.mark.parametrize("clip_name", list(CLIPS))
def test_non_finite_gradients_match_paddle(clip_name: str, poison: float) -> None:
    """An overflowed gradient: an infinite global norm scales by 0 (inf * 0 is NaN), a NaN one
    compares False against clip_norm under auto_skip_clip."""
    rng, dtypes = np.random.default_rng(18), layout_dtypes("float32")
    gradients = [draw_gradients(rng, dtypes) for _ in range(2)]
    gradients[0][2][[5, 77]] = [poison, -poison]
    check_against_paddle(CLIPS[clip_name], dtypes, gradients)


@pytest.mark.parametrize("clip_name", list(CLIPS))
def test_gradients_of_a_backward_pass_match_paddle(clip_name: str) -> None:
    """Gradients as a backward leaves them, with a bias whose ParamAttr says need_clip=False:
    the weights and ``p.grad`` of AdamW with the same clip after each step."""
    def trained(make_optimizer):
        records = []
        with unique_name.guard():
            paddle.seed(19)
            model = paddle.nn.Sequential(paddle.nn.Linear(16, 32, bias_attr=paddle.ParamAttr(need_clip=False)),
                                         paddle.nn.Tanh(), paddle.nn.Linear(32, 4))
            optimizer = make_optimizer(model.parameters())
            for step in range(STEPS):
                (model(paddle.to_tensor(np.random.default_rng(step).standard_normal((8, 16)).astype("float32"))) ** 2
                 ).sum().backward()
                raw = [p.grad.numpy().copy() for p in model.parameters()]
                optimizer.step()
                records.append(([p.numpy().copy() for p in model.parameters()],
                                [p.grad.numpy().copy() for p in model.parameters()], raw,
                                tuple(getattr(optimizer, "last_update_path", None) or ())))
                optimizer.clear_grad()
        return records

    expected, ours = trained(adamw(CLIPS[clip_name])), trained(adamwdl(CLIPS[clip_name]))
    for step, ((weights, grads, raw, path), (paddle_weights, paddle_grads, _, _)) in enumerate(zip(ours, expected)):
        assert path == flat_path()
        for index in range(len(weights)):
            np.testing.assert_array_equal(weights[index], paddle_weights[index], err_msg=f"parameter {index}, step {step}")
            np.testing.assert_array_equal(grads[index], paddle_grads[index], err_msg=f"p.grad {index}, step {step}")
        written = [not np.array_equal(g, r) for g, r in zip(grads, raw)]
        # (the first bias: need_clip=False; only the global-norm clip writes into p.grad)
        assert written == ([True, False, True, True] if clip_name.startswith("global_norm") else [False] * 4)


@pytest.mark.parametrize("clip_name", list(CLIPS))
def test_nothing_to_clip_leaves_the_gradients(clip_name: str) -> None:
    rng, dtypes = np.random.default_rng(15), layout_dtypes("float32")
    gradients = [draw_gradients(rng, dtypes) for _ in range(2)]
    ours = check_against_paddle(CLIPS[clip_name], dtypes, gradients, need_clip=[False] * len(SHAPES))
    assert not any(clipped(ours, gradients, 0))
    without_clip = train(adamw(lambda: None), dtypes, gradients)
    for a, b in zip(ours.weights[-1], without_clip.weights[-1]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("clip_name", [None, *CLIPS])
def test_parameters_of_two_dtypes_are_refused_before_any_change(clip_name: str | None) -> None:
    """float32 and float64 parameters in one optimizer: Paddle's adamw kernels read the learning
    rate (the first parameter's dtype) in their own dtype, so AdamW updates the float32
    parameters, then raises at the first float64 one; AdamWDL raises before any change, on
    both paths, naming the parameter and both dtypes."""
    rng, dtypes = np.random.default_rng(14), layout_dtypes("float32+float64")
    gradients = draw_gradients(rng, dtypes)
    make_clip = CLIPS[clip_name] if clip_name else (lambda: None)
    if clip_name != "norm":  # (AdamW's float64 clip_by_norm raises first)
        with pytest.raises(ValueError, match="does not match the type of data"):
            train(adamw(make_clip), dtypes, [gradients])
    for use_multi_tensor in (None, False):
        check_refused_before_any_change(make_clip, dtypes, gradients, ValueError, use_multi_tensor=use_multi_tensor)


# --------------------------------------------------------------------------- clips left to Paddle
def _all_reduced() -> paddle.nn.ClipGradByGlobalNorm:
    grad_clip = paddle.nn.ClipGradByGlobalNorm(1.0)
    grad_clip.should_comm_on_shard_dim = True  # (as auto-parallel's shard_optimizer sets it)
    return grad_clip


@pytest.mark.parametrize(
    "make_clip, reason",
    [
        (lambda: MyGlobalNorm(1.0), "gradient clipping by MyGlobalNorm (the flat step applies Paddle's "
                                    "ClipGradByGlobalNorm, ClipGradByNorm and ClipGradByValue)"),
        (MyClip, "gradient clipping by MyClip (the flat step applies Paddle's ClipGradByGlobalNorm, "
                 "ClipGradByNorm and ClipGradByValue)"),
        (_all_reduced, "gradient clipping by ClipGradByGlobalNorm with should_comm_on_shard_dim "
                       "(its norm is all-reduced across ranks)"),
    ],
    ids=["subclass", "other_clip_base", "norm_all_reduced_across_ranks"],
)
def test_a_clip_it_does_not_apply_itself_is_left_to_paddle(make_clip: Callable[[], Any], reason: str) -> None:
    """A subclass (it may override the clip), another clip class, or a norm to all-reduce: every
    step takes the per-parameter path, saying why, with AdamW's bits and those of
    ``use_multi_tensor=False``."""
    rng, dtypes = np.random.default_rng(16), layout_dtypes("float32")
    gradients = [draw_gradients(rng, dtypes, scale=0.01) for _ in range(2)]
    expected = train(adamw(make_clip), dtypes, gradients)
    ours = train(adamwdl(make_clip), dtypes, gradients)
    per_parameter = train(adamwdl(make_clip, use_multi_tensor=False), dtypes, gradients)
    assert ours.paths == [("per_parameter", reason)] * 2
    assert per_parameter.paths == [PER_PARAMETER_ONLY] * 2
    assert_same_bits(ours, expected)
    assert_same_bits(per_parameter, expected)


# --------------------------------------------------------------------------- Paddle's kernels
def test_with_the_operator_off_paddles_kernels_clip_with_the_same_bits() -> None:
    """The clips of this file in a process with ``PADDLE_LLRD_FUSED=0``: each step reports
    ``("multi_tensor", "PADDLE_LLRD_FUSED=0")`` and gives AdamW's bits, ``p.grad`` included."""
    tests = [
        "test_global_norm_matches_paddle[float32-above-False]",
        "test_global_norm_matches_paddle[float64-below-True]",
        "test_clip_by_norm_matches_paddle[float32]",
        "test_clip_by_value_matches_paddle[float64-asymmetric]",
        "test_global_norm_sums_as_paddle_does[float32]",
        "test_non_finite_gradients_match_paddle[global_norm-inf]",
        "test_gradients_of_a_backward_pass_match_paddle[global_norm]",
        "test_gradients_of_a_backward_pass_match_paddle[norm]",
    ]
    rerun_with_the_operator_off(*(f"{__file__}::{test}" for test in tests))


# --------------------------------------------------------------------------- half precision (GPU)
HAS_GPU = paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0
HALF_LAYOUTS = ["float16", "bfloat16+float32", "float16+float32"]


@pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA build of Paddle and a visible GPU")
@pytest.mark.parametrize("mp_type", [False, True], ids=["half_norms", "float32_norms"])
@pytest.mark.parametrize("layout", HALF_LAYOUTS)
def test_half_precision_on_gpu_matches_paddle(layout: str, mp_type: bool) -> None:
    """float16/bfloat16 parameters with float32 master weights: the half-precision norm list,
    its cast to the sum dtype, the scale cast back; with Paddle's mp-type flag the squared
    norms of half gradients are taken in float32. Paddle's GPU kernels update them."""
    previous_device = paddle.device.get_device()
    previous_flag = paddle.nn.clip._clip_by_global_norm_using_mp_type(mp_type)
    paddle.set_device("gpu:0")
    try:
        if "bfloat16" in layout and not paddle.amp.is_bfloat16_supported():
            pytest.skip("this GPU has no bfloat16 support")
        dtypes = layout_dtypes(layout)
        for index, make_clip in enumerate(CLIPS.values()):
            rng = np.random.default_rng(20 + index)
            gradients = [draw_gradients(rng, dtypes, scale=0.01) for _ in range(2)]
            expected = train(adamw(make_clip, multi_precision=True), dtypes, gradients)
            ours = train(adamwdl(make_clip, multi_precision=True), dtypes, gradients)
            assert ours.paths == [ON_A_GPU] * 2
            assert_same_bits(ours, expected)
    finally:
        paddle.set_device(previous_device)
        paddle.nn.clip._clip_by_global_norm_using_mp_type(previous_flag)
