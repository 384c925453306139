"""The fused CPU operator: Paddle's numbers bit for bit, on every thread count, and Paddle's
kernels with the same numbers wherever it cannot run.

- The default step on the fused operator against ``paddle.optimizer.AdamW`` (no ratios),
  with each clip class, over many steps with gradients of varied scale, on 1, 2 and 3
  threads; float32 and float16/bfloat16 master weights against the per-parameter path; with
  layer ratios against the per-parameter path.
- The clip's squared norms (``paddle_llrd_squared_norms``): each gradient's and their sum are
  those of Paddle's ``squared_l2_norm`` and ``stack(...).sum()``, bit for bit, for sizes that
  take each branch of Eigen's reduction and for more gradients than one leaf of the sum;
  a global-norm clip over so many gradients is AdamW's.
- Its two arithmetics: the one Paddle's CPU kernel uses on this machine is checked against
  Paddle itself above; the other (phi's generated AVX-512 code where this CPU lacks it, the
  reference loop where it has it) against the formulas written out here, exactly.
- A process where no compiler can build it trains on Paddle's kernels with the same numbers
  and says why once; a forked child, DataLoader workers, two optimizers stepped from two
  Python threads and a checkpoint taken with one thread count and resumed with another keep
  the numbers.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import paddle
import pytest

from paddle_llrd import AdamWDL
from paddle_llrd.optim.fused_operator import fused_adamw, squared_norms, unavailable_reason
from kernel_formulas import generated_step, reference_step

CLIPS = {
    "none": lambda: None,
    "global_norm": lambda: paddle.nn.ClipGradByGlobalNorm(0.5),
    "norm": lambda: paddle.nn.ClipGradByNorm(0.05),
    "value": lambda: paddle.nn.ClipGradByValue(0.001),
}


@pytest.fixture(autouse=True, scope="module")
def operators_loaded() -> None:
    """Loaded before the tests that call the operators directly, whatever runs first (an
    AdamWDL step loads them at its first use; ``make install`` has built them)."""
    assert unavailable_reason() is None


class Wide(paddle.nn.Layer):
    """Tensors large enough to be cut into pieces for several threads, small ones beside them."""

    def __init__(self) -> None:
        super().__init__()
        self.embeddings = paddle.nn.Embedding(700, 96)
        self.encoder = paddle.nn.LayerList([paddle.nn.Linear(96, 384), paddle.nn.Linear(384, 96)])
        self.head = paddle.nn.Linear(96, 5)

    def forward(self, ids: paddle.Tensor) -> paddle.Tensor:
        hidden = self.embeddings(ids)
        return self.head(self.encoder[1](paddle.nn.functional.gelu(self.encoder[0](hidden))))


def _structured(model: paddle.nn.Layer) -> dict[str, str]:
    """``name_dict`` with BERT's block names (``encoder.layers.N``), as the default ratios read them."""
    return {p.name: n.replace("encoder.", "encoder.layers.", 1) for n, p in model.named_parameters()}


def _state(optimizer, model: paddle.nn.Layer) -> dict[str, np.ndarray]:
    """The optimizer's tensors (moments, beta powers, master weights) by structured name."""
    names = _structured(model)
    found = {}
    for key, value in optimizer.state_dict().items():
        for param_name, structured in names.items():
            if isinstance(value, paddle.Tensor) and key.startswith(param_name + "_"):
                found[structured + key[len(param_name):].replace(param_name, "")] = value.astype("float32").numpy()
    return found


def _train(optimizer_of, *, steps: int = 8, dtype: str = "float32", seed: int = 3):
    paddle.seed(seed)
    model = Wide()
    if dtype != "float32":
        model.to(dtype=dtype)
    optimizer = optimizer_of(model)
    rng = np.random.default_rng(seed)
    for step in range(steps):
        # an elementwise loss (CPU has no half-precision matmul), gradients of varied size: some clipped
        scale = float(10.0 ** rng.uniform(-2, 2))
        loss = sum((p.astype("float32") * paddle.to_tensor(rng.standard_normal(p.shape).astype("float32"))).pow(2).mean()
                   for p in model.parameters())
        (loss * scale).backward()
        optimizer.step()
        if hasattr(optimizer, "last_update_path"):
            assert optimizer.last_update_path.path in ("fused", "per_parameter"), optimizer.last_update_path
        grads = {n: p.grad.astype("float32").numpy() for n, p in model.named_parameters()}
        optimizer.clear_grad()
    weights = {n: p.astype("float32").numpy() for n, p in model.named_parameters()}
    return weights, grads, _state(optimizer, model), optimizer


def _assert_bitwise(got: dict, expected: dict) -> None:
    assert got.keys() == expected.keys()
    for key in expected:
        assert np.array_equal(got[key].view(np.int32), expected[key].view(np.int32)), key


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("clip", sorted(CLIPS))
def test_on_the_fused_operator_it_is_paddle_adamw_bit_for_bit(clip, threads):
    def adamw(model):
        return paddle.optimizer.AdamW(0.002, parameters=model.parameters(), weight_decay=0.1, grad_clip=CLIPS[clip](),
                                      apply_decay_param_fun=lambda name: name.endswith("w_0"))

    def adamwdl(model):
        return AdamWDL(0.002, parameters=model.parameters(), weight_decay=0.1, grad_clip=CLIPS[clip](),
                       apply_decay_param_fun=lambda name: name.endswith("w_0"), set_param_lr_fun=None,
                       num_threads=threads)

    weights, grads, state, optimizer = _train(adamwdl)
    assert optimizer.last_update_path == ("fused", None)
    expected_weights, expected_grads, expected_state, _ = _train(adamw)
    _assert_bitwise(weights, expected_weights)
    _assert_bitwise(grads, expected_grads)  # p.grad as AdamW's clip leaves it
    _assert_bitwise(state, expected_state)


# (Paddle's CPU kernels cannot clip a float16/bfloat16 gradient: each clip class raises there
# on every path, as paddle.optimizer.AdamW's does)
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype, clip", [("float32", "global_norm"), ("float32", "norm"), ("float32", "value"),
                                         ("bfloat16", "none"), ("float16", "none")])
def test_with_layer_ratios_and_master_weights_it_is_the_per_parameter_path(clip, dtype, threads):
    def adamwdl(use_multi_tensor):
        def build(model):
            return AdamWDL(0.002, parameters=model.parameters(), weight_decay=0.1, grad_clip=CLIPS[clip](),
                           layerwise_decay=0.6, n_layers=2, multi_precision=dtype != "float32",
                           name_dict=_structured(model), use_multi_tensor=use_multi_tensor, num_threads=threads)
        return build

    weights, grads, state, optimizer = _train(adamwdl(None), dtype=dtype, steps=5)
    assert optimizer.last_update_path == ("fused", None)
    expected = _train(adamwdl(False), dtype=dtype, steps=5)
    _assert_bitwise(weights, expected[0])
    _assert_bitwise(grads, expected[1])
    _assert_bitwise(state, expected[2])


# ------------------------------------------------------- the clip's squared norms
# Each branch of Eigen's sum: leftover elements only, one packet, packets in pairs and an odd
# one, leftovers after packets, a range cut in two at a packet boundary, and cut again.
NORM_SIZES = [1, 3, 8, 15, 16, 24, 40, 8191, 8192, 8193, 16392, 65537, 300001]


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_the_clips_squared_norms_and_their_sum_are_paddles_kernels_bit_for_bit(threads):
    rng = np.random.default_rng(threads)
    values = [(rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3)).astype("float32") for n in NORM_SIZES]
    values[3][5] = np.inf
    grads = [paddle.to_tensor(value) for value in values]
    # more squared norms than one leaf of their sum (8192): one-element gradients, views of one tensor
    grads += paddle.unbind(paddle.to_tensor(rng.standard_normal([9000, 1]).astype("float32")))
    for count in (len(NORM_SIZES), len(grads)):
        squares, total = paddle.empty([count]), paddle.empty([])
        squared_norms(grads[:count], squares, total, threads)
        expected = paddle.stack([paddle._C_ops.squared_l2_norm(grad) for grad in grads[:count]]).reshape([-1])
        assert np.array_equal(squares.numpy().view(np.int32), expected.numpy().view(np.int32))
        assert total.numpy().view(np.int32) == expected.sum().numpy().view(np.int32)
    finite = [np.sum(value.astype(np.float64) ** 2) for value in values if np.isfinite(value).all()]
    got = [float(s) for s in squares.numpy()[:len(NORM_SIZES)] if np.isfinite(s)]
    np.testing.assert_allclose(got, finite, rtol=1e-5)  # (and the float64 sums, to float32's accuracy)


def test_the_squared_norms_of_gradients_not_all_float32_are_left_to_paddles_kernels():
    squares, total = paddle.full([2], -1.0), paddle.full([], -1.0)
    squared_norms([paddle.ones([3]), paddle.ones([3], dtype="float64")], squares, total, 2)
    assert total.item() == -1.0 and squares.numpy().tolist() == [-1.0, -1.0]  # (nothing written)


def test_a_global_norm_clip_over_more_gradients_than_one_leaf_of_the_sum_is_adamws():
    def train(optimizer_class, **extra):
        paddle.seed(5)
        params = [paddle.create_parameter([int(n)], "float32") for n in np.random.default_rng(5).integers(1, 5, 8300)]
        optimizer = optimizer_class(0.01, parameters=params, weight_decay=0.1,
                                    grad_clip=paddle.nn.ClipGradByGlobalNorm(0.5), **extra)
        rng = np.random.default_rng(6)
        for _ in range(2):
            weights = paddle.to_tensor(rng.standard_normal(sum(p.shape[0] for p in params)).astype("float32"))
            (paddle.concat(params) * weights).sum().backward()
            optimizer.step()
            optimizer.clear_grad()
        return np.concatenate([p.numpy() for p in params]), optimizer

    weights, optimizer = train(AdamWDL, set_param_lr_fun=None)
    assert optimizer.last_update_path == ("fused", None)
    expected, _ = train(paddle.optimizer.AdamW)
    assert np.array_equal(weights.view(np.int32), expected.view(np.int32))


# ------------------------------------------------ the arithmetic Paddle does not run here
@pytest.mark.parametrize("arithmetic, step_of", [(1, reference_step), (2, generated_step)],
                         ids=["reference-loop", "generated-avx512"])
def test_each_arithmetic_is_its_kernels_formula_exactly(arithmetic, step_of):
    rng = np.random.default_rng(11)
    n, lr, beta1, beta2, eps, coeff = 700, 0.003, 0.9, 0.999, 1e-8, 0.2
    p0 = rng.standard_normal(n).astype("float32")
    param, moment1, moment2 = paddle.to_tensor(p0), paddle.zeros([n]), paddle.zeros([n])
    pows = [paddle.full([1], 0.9), paddle.full([1], 0.999)]
    expected = [(v, np.float32(0), np.float32(0)) for v in p0]
    b1p, b2p = np.float32(0.9), np.float32(0.999)
    for _ in range(3):
        grad = (rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 1)).astype("float32")
        layout = [1, 1, 0, arithmetic, 2, 0, 0, 1, 0, 0, 0, n, 1]  # one bank, one parameter, one decayed segment
        fused_adamw([param], [paddle.to_tensor(grad)], [moment1], [moment2], [moment2], [param], [pows[0]], [pows[1]],
                    [param], [paddle.to_tensor([0, n], dtype="int64")], paddle.full([1], lr), layout,
                    [beta1, beta2, eps, 0.0, 0.0, coeff, 1.0, coeff, 1.0])
        expected = [step_of(p, g, m1, m2, lr, beta1, beta2, eps, coeff, b1p, b2p) for (p, m1, m2), g in zip(expected, grad)]
        b1p, b2p = np.float32(np.float32(beta1) * b1p), np.float32(np.float32(beta2) * b2p)
    assert np.array_equal(param.numpy().view(np.int32), np.array([e[0] for e in expected], dtype=np.float32).view(np.int32))
    assert np.array_equal(moment2.numpy(), np.array([e[2] for e in expected], dtype=np.float32))
    assert pows[0].numpy()[0] == b1p


# ------------------------------------------------------------ other processes
TRAIN = '''
import json, sys, warnings
import numpy as np
import paddle
from paddle_llrd import AdamWDL

paddle.seed(0)
model = paddle.nn.Sequential(paddle.nn.Linear(64, 512), paddle.nn.ReLU(), paddle.nn.Linear(512, 8))
optimizer = AdamWDL(learning_rate=0.01, parameters=model.parameters(), weight_decay=0.05, set_param_lr_fun=None,
                    grad_clip=paddle.nn.ClipGradByGlobalNorm(1.0))
rng = np.random.default_rng(0)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for step in range(4):
        model(paddle.to_tensor(rng.standard_normal([16, 64]).astype("float32"))).pow(2).mean().backward()
        optimizer.step()
        optimizer.clear_grad()
json.dump({"weights": [p.numpy().tolist() for p in model.parameters()], "path": list(optimizer.last_update_path),
           "warnings": [f"{w.category.__name__}: {w.message}" for w in caught],
           "warned_at": [w.filename for w in caught if w.category.__name__ == "FusedOperatorWarning"]},
          open(sys.argv[1], "w"))
'''


def _run_training(tmp_path: Path, name: str, **environment: str) -> dict:
    script, out = tmp_path / "train.py", tmp_path / f"{name}.json"
    script.write_text(TRAIN)
    done = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, **environment))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize("amsgrad, moment2, moment2_max", [
    (False, lambda n: paddle.zeros([n - 1]), lambda n: paddle.zeros([n])),  # a buffer shorter than the bank
    (False, lambda n: paddle.zeros([n], dtype="float64"), lambda n: paddle.zeros([n])),  # another dtype
    (True, lambda n: paddle.zeros([n]), lambda n: None),  # AMSGrad without maximum moments
    (True, lambda n: paddle.zeros([n]), lambda n: paddle.zeros([2])),
])
def test_state_buffers_that_are_not_the_banks_are_refused_before_anything_is_written(amsgrad, moment2, moment2_max):
    sizes = [3, 5]
    n = sum(sizes)
    param = paddle.ones([n])
    starts = paddle.to_tensor([0, 3, n], dtype="int64")
    layout = [1, 1, int(amsgrad), 0, 1, 0, 0, 2, 0, 0, 0, n, 0]  # one bank, one segment, no clip, no decay
    scalars = [0.9, 0.999, 1e-8, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0]
    with pytest.raises(OSError, match="a bank's moments or master weights do not match its parameters"):
        fused_adamw([param], [paddle.ones([size]) for size in sizes], [paddle.zeros([n])], [moment2(n)],
                    [moment2_max(n)], [param], [paddle.full([2], 0.9)], [paddle.full([2], 0.999)], [starts], [starts],
                    paddle.full([1], 1e-3), layout, scalars)
    np.testing.assert_array_equal(param.numpy(), np.ones(n, dtype=np.float32))


def test_without_a_compiler_it_trains_on_paddles_kernels_with_the_same_numbers_and_says_so_once(tmp_path):
    fused = _run_training(tmp_path, "fused")
    hidden = _run_training(tmp_path, "hidden", CXX="/bin/false", PADDLE_LLRD_OPERATOR_DIR=str(tmp_path / "empty"))
    assert fused["path"] == ["fused", None]
    assert hidden["path"][0] == "multi_tensor" and "/bin/false" in hidden["path"][1]
    assert fused["weights"] == hidden["weights"]
    said = [w for w in hidden["warnings"] if w.startswith("FusedOperatorWarning")]
    assert len(said) == 1 and "/bin/false" in said[0] and "same numbers" in said[0]
    assert hidden["warned_at"] == [str(tmp_path / "train.py")]  # (the script's own line, not the package's)


def test_a_float64_default_dtype_leaves_the_operator_serving_float32_parameters(tmp_path):
    """``paddle.set_default_dtype("float64")`` before the first step: the operator's first-use check
    makes its own tensors float32, and a float32 model takes the fused step with AdamW's bits."""
    script = tmp_path / "default_dtype.py"
    script.write_text(textwrap.dedent('''
        import warnings
        import numpy as np
        import paddle
        from paddle_llrd import AdamWDL

        paddle.seed(0)
        models = [paddle.nn.Linear(8, 4), paddle.nn.Linear(8, 4)]
        models[1].set_state_dict(models[0].state_dict())
        paddle.set_default_dtype("float64")
        adamw = paddle.optimizer.AdamW(0.01, parameters=models[0].parameters())
        adamwdl = AdamWDL(0.01, parameters=models[1].parameters(), set_param_lr_fun=None)
        rng = np.random.default_rng(0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for step in range(4):
                x = paddle.to_tensor(rng.standard_normal([5, 8]).astype("float32"))
                for model, optimizer in zip(models, (adamw, adamwdl)):
                    model(x).pow(2).mean().backward()
                    optimizer.step()
                    optimizer.clear_grad()
        same = all(np.array_equal(a.numpy().view(np.int32), b.numpy().view(np.int32))
                   for a, b in zip(models[0].parameters(), models[1].parameters()))
        print(adamwdl.last_update_path.path, same, [w.category.__name__ for w in caught if "paddle_llrd" in str(w.category)])
        '''))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[-2] == "fused True []", done.stdout + done.stderr[-2000:]


def test_a_forked_child_and_dataloader_workers_train_beside_the_operator(tmp_path):
    """A child forked after the operator ran its threads trains on one thread (an OpenMP team does not
    survive a fork), and forked DataLoader workers feed a loop whose numbers are AdamW's."""
    script = tmp_path / "fork.py"
    script.write_text(textwrap.dedent('''
        import multiprocessing, sys
        import numpy as np
        import paddle
        from paddle_llrd import AdamWDL

        class Data(paddle.io.Dataset):
            def __len__(self):
                return 32

            def __getitem__(self, index):
                return np.random.default_rng(index).standard_normal(64).astype("float32")

        def train(kind):
            paddle.seed(0)
            model = paddle.nn.Sequential(paddle.nn.Linear(64, 512), paddle.nn.Linear(512, 4))
            if kind == "adamw":
                optimizer = paddle.optimizer.AdamW(0.01, parameters=model.parameters(), weight_decay=0.05)
            else:
                optimizer = AdamWDL(0.01, parameters=model.parameters(), weight_decay=0.05, set_param_lr_fun=None,
                                    num_threads=2)
            loader = paddle.io.DataLoader(Data(), batch_size=8, num_workers=2 if kind == "adamwdl" else 0)
            for batch in loader:
                model(batch).pow(2).mean().backward()
                optimizer.step()
                optimizer.clear_grad()
            return [p.numpy() for p in model.parameters()], getattr(optimizer, "last_update_path", None)

        def child(queue):
            weights, path = train("adamwdl")
            queue.put((path.path, sum(float(w.sum()) for w in weights)))

        if __name__ == "__main__":
            ours, path = train("adamwdl")
            theirs, _ = train("adamw")
            assert path.path == "fused", path
            assert all(np.array_equal(a, b) for a, b in zip(ours, theirs))
            context = multiprocessing.get_context("fork")
            queue = context.Queue()
            process = context.Process(target=child, args=(queue,))
            process.start()
            process.join(timeout=240)
            assert process.exitcode == 0, process.exitcode
            child_path, child_sum = queue.get(timeout=5)
            assert child_path == "fused" and child_sum == sum(float(w.sum()) for w in ours)
            print("ok")
    '''))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_two_optimizers_stepped_from_two_python_threads_give_their_sequential_numbers():
    def run(concurrently: bool):
        pairs = []
        for seed in (1, 2):
            paddle.seed(seed)
            model = Wide()
            pairs.append((model, AdamWDL(0.003, parameters=model.parameters(), set_param_lr_fun=None, num_threads=2,
                                         grad_clip=paddle.nn.ClipGradByGlobalNorm(0.3))))
        rng = np.random.default_rng(0)
        for _ in range(4):
            ids = paddle.to_tensor(rng.integers(0, 700, [4, 6]))
            for model, _ in pairs:
                model(ids).pow(2).mean().backward()
            steps = [threading.Thread(target=opt.step) for _, opt in pairs]
            if concurrently:
                for thread in steps:
                    thread.start()
                for thread in steps:
                    thread.join()
            else:
                for _, opt in pairs:
                    opt.step()
            for _, opt in pairs:
                assert opt.last_update_path == ("fused", None)
                opt.clear_grad()
        return [p.numpy() for model, _ in pairs for p in model.parameters()]

    for got, expected in zip(run(True), run(False)):
        assert np.array_equal(got, expected)


@pytest.mark.parametrize("before, after", [(1, 3), (3, 1), (2, 2)])
def test_a_checkpoint_taken_on_some_threads_resumes_on_others_as_if_never_stopped(before, after, tmp_path):
    def model_and_optimizer(threads):
        paddle.seed(4)
        model = Wide()
        return model, AdamWDL(0.003, parameters=model.parameters(), weight_decay=0.05, layerwise_decay=0.7, n_layers=2,
                              name_dict=_structured(model), num_threads=threads)

    def train(model, optimizer, seeds):
        for seed in seeds:
            model(paddle.to_tensor(np.random.default_rng(seed).integers(0, 700, [4, 6]))).pow(2).mean().backward()
            optimizer.step()
            optimizer.clear_grad()

    model, optimizer = model_and_optimizer(before)
    train(model, optimizer, range(3))
    paddle.save(model.state_dict(), str(tmp_path / "model.pdparams"))
    paddle.save(optimizer.state_dict(), str(tmp_path / "opt.pdopt"))
    train(model, optimizer, range(3, 6))
    resumed, resumed_optimizer = model_and_optimizer(after)
    resumed.set_state_dict(paddle.load(str(tmp_path / "model.pdparams")))
    resumed_optimizer.set_state_dict(paddle.load(str(tmp_path / "opt.pdopt")))
    train(resumed, resumed_optimizer, range(3, 6))
    assert resumed_optimizer.last_update_path == ("fused", None)
    for a, b in zip(model.parameters(), resumed.parameters()):
        assert np.array_equal(a.numpy(), b.numpy())
