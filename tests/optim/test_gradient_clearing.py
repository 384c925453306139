"""``clear_grad`` (``paddle_llrd/optim/gradient_clearing.py``) leaves every gradient as
Paddle's ``clear_gradient`` leaves it, whichever way it was zeroed: the large CPU
gradients by the operators and marked by Paddle, or by Paddle itself on the threads
(without the operators, or where the mark does not behave).

What Paddle's ``clear_gradient(True)`` leaves: zeros in the same buffer, of the same
shape and strides, and a mark that makes the next backward replace the buffer (its
data pointer changes, and a gradient of -0.0 keeps its sign, where adding it to a
zero would give +0.0). ``set_to_zero=False`` releases the gradient."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import paddle
import pytest

from paddle_llrd import AdamWDL
from paddle_llrd.optim import gradient_clearing
from paddle_llrd.optim.fused_operator import unavailable_reason
from paddle_llrd.optim.gradient_clearing import clear_gradients, marking_unavailable_reason
from paddle_llrd.optim.threads import FlatThreads

SHAPES = [[40, 3], [7], [], [9, 9], [200], [5, 5], [64, 2]]  # (sizes on both sides of the crossover, 64)
ZEROING = ["operator", "paddle_on_the_threads", "paddle_where_the_mark_fails"]


@pytest.fixture
def zeroing(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which way the large gradients are zeroed (the operator's where it is built)."""
    if request.param == "operator":
        assert unavailable_reason() is None, unavailable_reason()
    elif request.param == "paddle_on_the_threads":
        monkeypatch.setattr(gradient_clearing, "unavailable_reason", lambda: "turned off for the test")
    else:
        monkeypatch.setitem(gradient_clearing._marking, "checked", True)
        monkeypatch.setitem(gradient_clearing._marking, "reason", "a mark that failed its check")
    return request.param


def _state(params: list) -> list:
    """Each gradient's bytes, shape, strides and buffer (None without one)."""
    return [None if p.grad is None else (p.grad.numpy().tobytes(), list(p.grad.shape), list(p.grad.strides),
                                         p.grad.data_ptr()) for p in params]


def _cleared(clear) -> list:
    """What a clear leaves, and what the next backward (of -0.0 gradients) finds."""
    params = [paddle.create_parameter(shape, "float32") for shape in SHAPES]
    x = paddle.randn([5, 3])
    strided = paddle.create_parameter([200, 3], "float32")  # (x @ W.T: W's gradient is strided)
    sum((p * float(i + 1)).sum() for i, p in enumerate(params[:-1])).backward()  # (the last gets none)
    (x @ strided.T).sum().backward()
    params.append(strided)
    before = _state(params)
    clear(params)
    after = _state(params)
    sum((p * paddle.full(p.shape, -0.0)).sum() for p in params).backward()
    buffers = [b is not None and a is not None and b[3] == a[3] for b, a in zip(before, after)]
    replaced = [a is None or p.grad.data_ptr() != a[3] for p, a in zip(params, after)]
    values = [None if a is None else a[:3] for a in after]
    return values + buffers + replaced + [np.signbit(p.grad.numpy()).tolist() for p in params]


@pytest.mark.parametrize("zeroing", ZEROING, indirect=True)
@pytest.mark.parametrize("set_to_zero", [True, False])
@pytest.mark.parametrize("count", [1, 2, 3])
def test_gradients_are_left_as_paddles_clear_gradient_leaves_them(zeroing, set_to_zero, count) -> None:
    """Each gradient cleared once, as by Paddle's own ``clear_gradient`` one parameter at a
    time: zeroed in its own buffer and marked, or released; a parameter with no gradient,
    and a strided gradient, included."""
    expected = _cleared(lambda params: [p.clear_gradient(set_to_zero) for p in params])
    got = _cleared(lambda params: clear_gradients(params, set_to_zero, FlatThreads(count, min_chunk_numel=64)))
    assert got == expected
    if set_to_zero:
        n = len(SHAPES) + 1
        assert expected[n:2 * n] == [True] * (n - 2) + [False, True]  # (zeroed in its own buffer)
        assert all(np.array(signs).all() for signs in expected[3 * n:])  # (each zero replaced, sign kept)


@pytest.mark.parametrize("zeroing", ZEROING, indirect=True)
@pytest.mark.parametrize("named", ["the_large_ones", "a_stale_list"])
def test_the_large_parameters_a_caller_names_change_how_not_what_is_cleared(zeroing, named) -> None:
    """A layout's list of large parameters only changes how a gradient is zeroed: a parameter
    it names but the call does not is left alone, a large one it misses is cleared all the same."""
    params = [paddle.create_parameter(shape, "float32") for shape in ([40, 3], [200], [7], [64, 2])]
    outside = paddle.create_parameter([100], "float32")
    sum((p * float(i + 1)).sum() for i, p in enumerate(params + [outside])).backward()
    large = params[:2] if named == "the_large_ones" else [outside, params[1]]
    clear_gradients(params, True, FlatThreads(2, min_chunk_numel=64), large)
    assert [float(p.grad.abs().max()) for p in params] == [0.0] * len(params)
    np.testing.assert_array_equal(outside.grad.numpy(), np.full([100], 5.0, "float32"))


def test_paddles_clear_gradient_marks_a_gradient_it_has_nothing_to_zero_in() -> None:
    """On this Paddle, ``clear_gradient(True)`` called while the gradient has no elements keeps
    its buffer and values, and the next backward replaces them: the operators' zeroing serves."""
    assert marking_unavailable_reason() is None


@pytest.mark.parametrize("zeroing", ZEROING, indirect=True)
@pytest.mark.parametrize("num_threads", [1, 2])
def test_clear_grad_of_large_gradients_matches_adamws_over_steps(zeroing, num_threads, monkeypatch) -> None:
    """AdamWDL (no ratios) and ``paddle.optimizer.AdamW`` trained side by side, with
    gradients above the crossover: after each ``clear_grad`` the gradients are zeros in
    their own buffers, after each backward new buffers holding the new gradients, and the
    weights stay bit for bit AdamW's; the gradients are left to accumulate every other step."""
    monkeypatch.setenv("PADDLE_LLRD_MIN_CHUNK_NUMEL", "64")
    shapes = [[300, 40], [40], [64, 64], [3, 70]]
    rng = np.random.default_rng(7)
    initial = [rng.standard_normal(shape).astype("float32") for shape in shapes]
    runs = []
    for make in (lambda params: paddle.optimizer.AdamW(0.01, parameters=params, weight_decay=0.1),
                 lambda params: AdamWDL(0.01, parameters=params, weight_decay=0.1, set_param_lr_fun=None,
                                        num_threads=num_threads)):
        params = [paddle.create_parameter(list(v.shape), "float32",
                                          default_initializer=paddle.nn.initializer.Assign(v)) for v in initial]
        runs.append((params, make(params), [], {}))
    for step in range(7):
        targets = [rng.standard_normal(shape).astype("float32") for shape in shapes]
        for params, optimizer, record, cleared in runs:
            sum(((p - paddle.to_tensor(t)) ** 2).sum() for p, t in zip(params, targets)).backward()
            replaced = [p.grad.data_ptr() != cleared.get(id(p)) for p in params]
            if step % 2 == 1:
                continue  # (accumulated into the next step's backward)
            pointers = [p.grad.data_ptr() for p in params]
            optimizer.step()
            grads_after_step = [p.grad.numpy().tobytes() for p in params]
            optimizer.clear_grad()
            kept = [p.grad.data_ptr() == ptr for p, ptr in zip(params, pointers)]
            cleared.update((id(p), p.grad.data_ptr()) for p in params)
            record.append((grads_after_step, [p.numpy().tobytes() for p in params], kept, replaced,
                           [float(p.grad.abs().max()) for p in params]))
    (_, _, reference, _), (_, adamwdl, got, _) = runs
    assert got == reference
    assert all(all(kept) and all(replaced) and zeros == [0.0] * len(shapes)
               for _, _, kept, replaced, zeros in reference)
    assert adamwdl.last_update_path.path == "fused" or unavailable_reason() is not None


FIRST_CLEAR_UNDER_NO_GRAD = textwrap.dedent(
    """
    import paddle
    from paddle_llrd import AdamWDL

    model = paddle.nn.Linear(512, 512)
    optimizer = AdamWDL(0.01, parameters=model.parameters(), set_param_lr_fun=None)
    for step in range(3):
        model(paddle.full([4, 512], -1.0)).sum().backward()
        if step > 0:
            optimizer.step()
        pointer = model.weight.grad.data_ptr()
        with paddle.no_grad():
            optimizer.clear_grad()
        zeros = float(model.weight.grad.abs().max()) == 0.0 and model.weight.grad.data_ptr() == pointer
        model(paddle.zeros([4, 512])).sum().backward()
        replaced = model.weight.grad.data_ptr() != pointer
        print(step, zeros, replaced, flush=True)
        optimizer.clear_grad()
    print("path", tuple(optimizer.last_update_path))

    from paddle_llrd.optim.gradient_clearing import marking_unavailable_reason
    print("mark", marking_unavailable_reason())
    """
)


def test_the_first_clear_grad_of_a_process_may_run_under_no_grad_before_any_step(tmp_path) -> None:
    """A process whose first ``clear_grad()`` (before any step) runs inside ``paddle.no_grad()``:
    every large gradient is zeroed in its own buffer and the next backward replaces it, at
    that call and at the later ones, with the operators' zeroing (the check of Paddle's mark,
    made at that first call, passes under ``no_grad`` too)."""
    script = tmp_path / "train.py"
    script.write_text(FIRST_CLEAR_UNDER_NO_GRAD)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    env.pop("PADDLE_LLRD_FUSED", None)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[:3] == ["0 True True", "1 True True", "2 True True"], result.stdout
    if unavailable_reason() is None:
        assert "path ('fused', None)" in result.stdout
        assert "mark None" in result.stdout
