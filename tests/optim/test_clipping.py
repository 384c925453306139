"""paddle_llrd.optim.clipping against Paddle's own clip classes, bit for bit.

Each gradient clipped in place by ``clip_gradients`` (also through flat
buffers cut into chunks and run on two threads) must hold the bits that
``ClipGradByGlobalNorm``, ``ClipGradByNorm`` or ``ClipGradByValue`` return
for it in dygraph, given copies of the same gradients and parameters whose
``need_clip`` comes from ``ParamAttr``. The float16/bfloat16 cases need a
GPU (Paddle's CPU has no half-precision ``squared_l2_norm``, ``clip_by_norm``
or ``clip`` kernels) and are skipped without one.
"""
from __future__ import annotations

import numpy as np
import paddle
import pytest

from paddle_llrd.optim.buffers import numel, share_flat
from paddle_llrd.optim.clipping import clip_gradients, flat_clip_refusal
from paddle_llrd.optim.threads import FlatThreads

# Varied sizes: 0-D and 1-element ones, small matrices, three of 100k elements or so.
SHAPES = [[1], [7, 3], [100_000], [4, 5, 6], [], [250, 400], [33], [100_003], [1, 1]]
# The parameters Paddle leaves alone (need_clip=False in their ParamAttr).
NOT_CLIPPED = {1, 5, 8}
LAYOUTS = {
    "float32": ["float32"],
    "float64": ["float64"],
    "mixed": ["float32", "float64"],  # (one after the other, so both dtypes interleave)
}

# One of each class (and both auto_skip_clip modes) for the tests that run them all.
CLIPS = {
    "global_norm": lambda: paddle.nn.ClipGradByGlobalNorm(1.0),
    "global_norm_auto_skip": lambda: paddle.nn.ClipGradByGlobalNorm(1.0, auto_skip_clip=True),
    "norm": lambda: paddle.nn.ClipGradByNorm(0.05),
    "value": lambda: paddle.nn.ClipGradByValue(0.004, -0.002),
}


# Clips the flat step refuses: a subclass of an accepted class, and another ClipGradBase.
class MyGlobalNorm(paddle.nn.ClipGradByGlobalNorm):
    pass


class MyClip(paddle.nn.clip.ClipGradBase):
    def _dygraph_clip(self, params_grads):
        return params_grads


def layout_dtypes(layout: str) -> list[str]:
    cycle = LAYOUTS[layout] if layout in LAYOUTS else layout.split("+")
    return [cycle[i % len(cycle)] for i in range(len(SHAPES))]


def make_params() -> list:
    """Parameters only as Paddle's clip reads them (need_clip, process_mesh): their shape plays no part."""
    return [
        paddle.create_parameter([1], "float32", attr=paddle.ParamAttr(need_clip=i not in NOT_CLIPPED))
        for i in range(len(SHAPES))
    ]


def need_clip_of(params: list) -> list[bool]:
    return [getattr(p, "need_clip", True) for p in params]


def make_grads(rng: np.random.Generator, dtypes: list[str], scale: float = 1.0) -> list[paddle.Tensor]:
    return [
        paddle.to_tensor(np.asarray(rng.standard_normal(shape) * scale)).astype(dtype)
        for shape, dtype in zip(SHAPES, dtypes)
    ]


def bits(tensor: paddle.Tensor) -> np.ndarray:
    values = np.ascontiguousarray(tensor.numpy()).reshape(-1)
    return values.view(np.dtype(f"u{values.itemsize}"))


def paddle_clipped(grad_clip, params: list, grads: list[paddle.Tensor]) -> list[paddle.Tensor]:
    """What Paddle's clip returns for each gradient, given copies (ClipGradByGlobalNorm writes in place)."""
    out = grad_clip(list(zip(params, [g.clone() for g in grads])))
    assert len(out) == len(params) and all(p is q for (p, _), q in zip(out, params))
    return [g for _, g in out]


def assert_same_bits(actual: list[paddle.Tensor], expected: list[paddle.Tensor]) -> None:
    assert len(actual) == len(expected)
    for index, (a, e) in enumerate(zip(actual, expected)):
        assert a.dtype == e.dtype, index
        # (Paddle's global-norm clip returns a [1] tensor for a 0-D gradient; this keeps the gradient's shape)
        assert numel(a) == numel(e), index
        assert np.array_equal(bits(a), bits(e)), f"gradient {index} ({a.dtype}, shape {a.shape})"


def changed(before: list[paddle.Tensor], after: list[paddle.Tensor]) -> list[bool]:
    return [not np.array_equal(bits(b), bits(a)) for b, a in zip(before, after)]


def flat_chunks(grads: list[paddle.Tensor], need_clip: list[bool], pieces: int = 3):
    """Make the clipped gradients views of one flat buffer per dtype; returns
    the buffers and their chunks (each buffer cut into ``pieces``)."""
    buffers, chunks = [], []
    for dtype in dict.fromkeys(g.dtype for g in grads):
        group = [g for g, flag in zip(grads, need_clip) if flag and g.dtype == dtype]
        if not group:
            continue
        buffer = share_flat(group)
        size = numel(buffer)
        edges = [size * i // pieces for i in range(pieces + 1)]
        buffers.append((buffer, group))
        chunks += [buffer._slice(a, b) for a, b in zip(edges, edges[1:]) if b > a]
    return buffers, chunks


def assert_still_views(buffers) -> None:
    """The clip wrote into the buffers' storage: each gradient is still a view holding its part."""
    for buffer, group in buffers:
        assert all(g._is_shared_buffer_with(buffer) for g in group)
        assert np.array_equal(bits(buffer), np.concatenate([bits(g) for g in group]))


def clip_ours(grad_clip, grads, need_clip, flat: bool, threads: int = 2) -> None:
    """clip_gradients on ``grads``, where ``flat`` through chunked flat buffers run on ``threads`` threads."""
    if not flat:
        clip_gradients(grad_clip, grads, need_clip)
        return
    buffers, chunks = flat_chunks(grads, need_clip)
    clip_gradients(grad_clip, grads, need_clip, flat_grads=chunks, run=FlatThreads(threads).run)
    assert_still_views(buffers)


def global_norm(grads, need_clip) -> float:
    return float(np.sqrt(sum(np.sum(g.numpy().astype(np.float64) ** 2) for g, f in zip(grads, need_clip) if f)))


def check_against_paddle(grad_clip, params, grads, flat: bool, threads: int = 2) -> list[bool] | None:
    """Clip ``grads`` both ways, compare bit for bit; returns which gradients
    the clip changed. Where Paddle raises (a dtype its kernel lacks), so must
    clip_gradients, before writing anything; then None."""
    need_clip = need_clip_of(params)
    before = [g.clone() for g in grads]
    try:
        expected = paddle_clipped(grad_clip, params, grads)
    except RuntimeError as paddle_error:
        with pytest.raises(RuntimeError, match="not registered"):
            clip_ours(grad_clip, grads, need_clip, flat, threads)
        assert "not registered" in str(paddle_error)
        assert_same_bits(grads, before)
        return None
    clip_ours(grad_clip, grads, need_clip, flat, threads)
    assert_same_bits(grads, expected)
    assert [list(g.shape) for g in grads] == SHAPES
    flags = changed(before, grads)
    assert not any(flag for flag, clip in zip(flags, need_clip) if not clip)
    return flags


# --------------------------------------------------------------------------- the three classes
@pytest.mark.parametrize("flat", [False, True], ids=["per_grad", "flat"])
@pytest.mark.parametrize("auto_skip_clip", [False, True])
@pytest.mark.parametrize("norm_side", ["above", "below"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_global_norm_matches_paddle(layout, norm_side, auto_skip_clip, flat):
    params = make_params()
    grads = make_grads(np.random.default_rng(11), layout_dtypes(layout), scale=0.01)
    norm = global_norm(grads, need_clip_of(params))
    clip_norm = norm * (0.5 if norm_side == "above" else 2.0)
    grad_clip = paddle.nn.ClipGradByGlobalNorm(clip_norm, auto_skip_clip=auto_skip_clip)
    flags = check_against_paddle(grad_clip, params, grads, flat)
    # Above clip_norm every clipped gradient shrinks; below it the scale is 1 or skipped.
    assert any(flags) == (norm_side == "above")


@pytest.mark.parametrize("flat", [False, True], ids=["per_grad", "flat"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_clip_by_norm_matches_paddle(layout, flat):
    params = make_params()
    grads = make_grads(np.random.default_rng(12), layout_dtypes(layout))
    # The median gradient norm: some gradients above it, some below.
    norms = [float(np.linalg.norm(g.numpy().astype(np.float64))) for g in grads]
    flags = check_against_paddle(paddle.nn.ClipGradByNorm(float(np.median(norms))), params, grads, flat)
    if layout != "float32":
        # Paddle 3.3.1's CPU clip_by_norm kernel is float32 only: Paddle raises, and
        # so does clip_gradients, before its first write (the float32 ones too).
        assert flags is None
        return
    clipped = [flag for i, flag in enumerate(flags) if i not in NOT_CLIPPED]
    assert any(clipped) and not all(clipped)


@pytest.mark.parametrize("flat", [False, True], ids=["per_grad", "flat"])
@pytest.mark.parametrize("bounds", [(0.5, None), (0.3, -0.1)], ids=["symmetric", "asymmetric"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_clip_by_value_matches_paddle(layout, bounds, flat):
    params = make_params()
    grads = make_grads(np.random.default_rng(13), layout_dtypes(layout))
    flags = check_against_paddle(paddle.nn.ClipGradByValue(*bounds), params, grads, flat)
    assert any(flags)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_global_norm_sums_as_paddle_does(layout):
    """Many small gradients whose squared norms span twelve orders of
    magnitude, over many draws: a sum in another order or dtype (a float64
    sum of float32 norms, a running sum in place of stack().sum()) gives a
    global norm some ulps off in some draw, and the scale with it."""
    rng = np.random.default_rng(17)
    cycle = LAYOUTS[layout]
    for _ in range(30):
        count = 60
        params = [paddle.create_parameter([1], "float32", attr=paddle.ParamAttr(need_clip=i % 7 != 3))
                  for i in range(count)]
        grads = [
            paddle.to_tensor(rng.standard_normal(int(rng.integers(1, 50))) * 10.0 ** rng.uniform(-3, 3))
            .astype(cycle[i % len(cycle)])
            for i in range(count)
        ]
        grad_clip = paddle.nn.ClipGradByGlobalNorm(global_norm(grads, need_clip_of(params)) / 3)
        expected = paddle_clipped(grad_clip, params, grads)
        clip_gradients(grad_clip, grads, need_clip_of(params))
        assert_same_bits(grads, expected)


@pytest.mark.parametrize("flat", [False, True], ids=["per_grad", "flat"])
@pytest.mark.parametrize("poison", [np.inf, np.nan], ids=["inf", "nan"])
@pytest.mark.parametrize("clip_name", list(CLIPS))
def test_non_finite_gradients_match_paddle(clip_name, poison, flat):
    """An overflowed gradient: an infinite global norm scales by 0 (inf * 0 is
    NaN), a NaN one compares False against clip_norm under auto_skip_clip."""
    params = make_params()
    grads = make_grads(np.random.default_rng(18), layout_dtypes("float32"))
    values = grads[2].numpy()
    values[[5, 77]] = [poison, -poison]
    grads[2] = paddle.to_tensor(values)
    check_against_paddle(CLIPS[clip_name](), params, grads, flat)


@pytest.mark.parametrize("clip_name", list(CLIPS))
def test_gradients_of_a_backward_pass_match_paddle(clip_name):
    """Gradients as the optimizer holds them (``param.grad`` after backward, not
    stop_gradient), with a bias whose ParamAttr says need_clip=False."""
    paddle.seed(19)
    model = paddle.nn.Sequential(
        paddle.nn.Linear(16, 32, bias_attr=paddle.ParamAttr(need_clip=False)), paddle.nn.Tanh(), paddle.nn.Linear(32, 4)
    )
    (model(paddle.randn([8, 16])) ** 2).sum().backward()
    params = model.parameters()
    grads = [p.grad for p in params]
    before = [g.clone() for g in grads]
    expected = paddle_clipped(CLIPS[clip_name](), params, grads)
    clip_gradients(CLIPS[clip_name](), grads, need_clip_of(params))
    assert_same_bits([p.grad for p in params], expected)
    assert changed(before, grads) == [True, False, True, True]  # (the first bias: need_clip=False)


# --------------------------------------------------------------------------- several steps
@pytest.mark.parametrize("clip_name", list(CLIPS))
def test_repeated_steps_recompute_the_scale(clip_name):
    """One flat buffer kept across steps, as the flat step keeps it: each step
    writes new gradients into its views, with a global norm now above 1, now
    below, and clips them; each step matches Paddle on copies."""
    grad_clip, params = CLIPS[clip_name](), make_params()
    need_clip = need_clip_of(params)
    rng = np.random.default_rng(14)
    # (float32 only for ClipGradByNorm, whose CPU kernel has no float64)
    dtypes = layout_dtypes("float32" if clip_name == "norm" else "mixed")
    grads = make_grads(rng, dtypes)
    buffers, chunks = flat_chunks(grads, need_clip)
    run = FlatThreads(2).run
    for scale in [0.01, 0.001, 0.02, 0.0005]:  # global norms of about 4.5, 0.45, 8.9, 0.22
        for grad, new in zip(grads, make_grads(rng, dtypes, scale)):
            paddle.assign(new, output=grad)  # (into the view's storage)
        before = [g.clone() for g in grads]
        expected = paddle_clipped(grad_clip, params, grads)
        clip_gradients(grad_clip, grads, need_clip, flat_grads=chunks, run=run)
        assert_same_bits(grads, expected)
        assert_still_views(buffers)
        if clip_name.startswith("global_norm"):  # the scale of this step's norm, not the last one's
            assert any(changed(before, grads)) == (scale > 0.005)


# --------------------------------------------------------------------------- nothing to do, errors
@pytest.mark.parametrize("clip_name", list(CLIPS))
def test_nothing_to_clip_leaves_the_gradients(clip_name):
    grads = make_grads(np.random.default_rng(15), layout_dtypes("float32"))
    before = [g.clone() for g in grads]
    clip_gradients(None, grads, [True] * len(grads))
    clip_gradients(CLIPS[clip_name](), grads, [False] * len(grads), flat_grads=[])
    assert_same_bits(grads, before)


def test_errors_leave_the_gradients_untouched():
    grads = make_grads(np.random.default_rng(16), layout_dtypes("float32"))
    need_clip = [True] * len(grads)
    before = [g.clone() for g in grads]
    grad_clip = paddle.nn.ClipGradByGlobalNorm(1e-3)
    with pytest.raises(ValueError, match="9 gradients but 8 need_clip flags"):
        clip_gradients(grad_clip, grads, need_clip[:-1])
    with pytest.raises(ValueError, match="flat_grads must hold exactly the gradients with need_clip"):
        clip_gradients(grad_clip, grads, need_clip, flat_grads=[share_flat(grads[:-1])])
    with pytest.raises(TypeError, match="gradient 2 is not a dense eager tensor"):
        clip_gradients(grad_clip, grads[:2] + [np.ones(3)], need_clip[:3])
    clip_gradients(grad_clip, [np.ones(3)], [False])  # (one Paddle leaves alone is not looked at)
    with pytest.raises(ValueError, match="cannot apply gradient clipping by MyGlobalNorm"):
        clip_gradients(MyGlobalNorm(1e-3), grads, need_clip)
    assert_same_bits(grads, before)


# --------------------------------------------------------------------------- flat_clip_refusal
def test_flat_clip_refusal_accepts_none_and_the_exact_classes():
    assert flat_clip_refusal(None) is None
    assert flat_clip_refusal(paddle.nn.ClipGradByGlobalNorm(1.0)) is None
    assert flat_clip_refusal(paddle.nn.ClipGradByGlobalNorm(1.0, auto_skip_clip=True)) is None
    assert flat_clip_refusal(paddle.nn.ClipGradByNorm(1.0)) is None
    assert flat_clip_refusal(paddle.nn.ClipGradByValue(1.0)) is None


def test_flat_clip_refusal_names_a_subclass_or_another_clip():
    assert flat_clip_refusal(MyGlobalNorm(1.0)) == (
        "gradient clipping by MyGlobalNorm (the flat step applies Paddle's "
        "ClipGradByGlobalNorm, ClipGradByNorm and ClipGradByValue)"
    )
    assert flat_clip_refusal(MyClip()).startswith("gradient clipping by MyClip (")


def test_flat_clip_refusal_names_a_norm_all_reduced_across_ranks():
    grad_clip = paddle.nn.ClipGradByGlobalNorm(1.0)
    grad_clip.should_comm_on_shard_dim = True  # (as auto-parallel's shard_optimizer sets it)
    assert "ClipGradByGlobalNorm with should_comm_on_shard_dim" in flat_clip_refusal(grad_clip)


# --------------------------------------------------------------------------- half precision (GPU)
HAS_GPU = paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0
HALF_LAYOUTS = ["float16", "bfloat16+float32", "float16+float32+float64"]


@pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA build of Paddle and a visible GPU")
@pytest.mark.parametrize("mp_type", [False, True], ids=["half_norms", "float32_norms"])
@pytest.mark.parametrize("flat", [False, True], ids=["per_grad", "flat"])
@pytest.mark.parametrize("layout", HALF_LAYOUTS)
def test_half_precision_on_gpu_matches_paddle(layout, flat, mp_type):
    """float16/bfloat16 gradients: the half-precision norm list, its cast to
    the sum dtype, the scale cast back; with Paddle's mp-type flag the squared
    norms of half gradients are taken in float32."""
    previous_device = paddle.device.get_device()
    previous_flag = paddle.nn.clip._clip_by_global_norm_using_mp_type(mp_type)
    paddle.set_device("gpu:0")
    try:
        if "bfloat16" in layout and not paddle.amp.is_bfloat16_supported():
            pytest.skip("this GPU has no bfloat16 support")
        for index, make_clip in enumerate(CLIPS.values()):
            params = make_params()
            grads = make_grads(np.random.default_rng(20 + index), layout_dtypes(layout), scale=0.01)
            # (the flat chunks in turn: the flat step keeps GPU kernel calls on one thread)
            check_against_paddle(make_clip(), params, grads, flat, threads=1)
    finally:
        paddle.set_device(previous_device)
        paddle.nn.clip._clip_by_global_norm_using_mp_type(previous_flag)
