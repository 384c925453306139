"""Resuming when Paddle's parameter names moved (docs/adamwdl.rst).

A resume script that builds one more layer before the model shifts every
``linear_N`` name; the model loads by structured name and does not notice.
``paddle.optimizer.AdamW`` asserts; AdamWDL used to load, restart the moments
and beta powers of every renamed parameter at zero and end 0.06-0.19 away
from the uninterrupted run, silently. Now a checkpoint records the
structured names (``name_dict``) and resumes by them; one without them (an
older AdamWDL's) is refused, naming the entries and the parameters; a
trained layer built first is matched by structured name, or warned about
without them. Each script runs in its own fresh process, as a user runs it
(module-level globals): save in one, resume in another.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import paddle
import pytest
from paddle import nn

from paddle_llrd import AdamWDL
from adamwdl_runs import batches, fresh_names, name_dict_of, tiny_bert

REPO_ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import paddle
    from paddle_llrd import AdamWDL
    from paddle_llrd.models.tiny_bert import TinyBertConfig, TinyBertForSequenceClassification

    mode, out = sys.argv[1], sys.argv[2]
    if mode.startswith("resume-shifted"):
        loss_head = paddle.nn.Linear(8, 8)  # built before the model: every linear_N name moves by one

    paddle.seed(7)
    model = TinyBertForSequenceClassification(TinyBertConfig(
        vocab_size=50, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=16, max_position_embeddings=6))
    name_dict = {p.name: n for n, p in model.named_parameters()}
    scheduler = paddle.optimizer.lr.StepDecay(0.02, step_size=2, gamma=0.5)
    optimizer = AdamWDL(learning_rate=scheduler, parameters=model.parameters(), weight_decay=0.1,
                        layerwise_decay=0.7, n_layers=2, name_dict=name_dict)

    rng = np.random.default_rng(3)
    data = [(paddle.to_tensor(rng.integers(0, 50, (4, 6))), paddle.to_tensor(rng.integers(0, 2, (4,))))
            for _ in range(6)]

    def train(steps):
        for ids, labels in steps:
            paddle.nn.functional.cross_entropy(model(ids), labels).backward()
            optimizer.step()
            optimizer.clear_grad()
            scheduler.step()

    if mode == "save":
        train(data[:3])
        paddle.save(model.state_dict(), out + "/model.pdparams")
        paddle.save(optimizer.state_dict(), out + "/opt.pdopt")
        train(data[3:])  # the uninterrupted run
    else:
        model.set_state_dict(paddle.load(out + "/model.pdparams"))
        state = paddle.load(out + "/opt.pdopt")
        if mode.endswith("-old"):
            del state["structured_names"]  # as an AdamWDL before the record saved it
        optimizer.set_state_dict(state)
        train(data[3:])
    np.savez(out + f"/{mode}.npz", **{n: p.numpy() for n, p in model.named_parameters()})
    """
)


def _run(script: Path, mode: str, out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, str(script), mode, str(out)], cwd=REPO_ROOT, env=env,
        capture_output=True, text=True, timeout=180,
    )


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("resume_names")
    script = out / "train.py"
    script.write_text(SCRIPT)
    saved = _run(script, "save", out)
    assert saved.returncode == 0, saved.stderr[-3000:]
    return script, out


@pytest.mark.parametrize("mode", ["resume", "resume-old", "resume-shifted"])
def test_resume_equals_the_uninterrupted_run(saved_run, mode):
    """The same script resumed in a fresh process ends where the uninterrupted run ends: with
    the same names (also from a checkpoint without the structured names, as an older AdamWDL
    saved), and with one more Linear built before the model (every Paddle name moved by one;
    matched by the structured names the checkpoint records)."""
    script, out = saved_run
    resumed = _run(script, mode, out)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    warned = [line for line in resumed.stderr.splitlines() if "Warning: " in line and "No ccache found" not in line]
    assert not warned, resumed.stderr[-3000:]
    uninterrupted, after_resume = np.load(out / "save.npz"), np.load(out / f"{mode}.npz")
    for name in uninterrupted.files:
        np.testing.assert_allclose(after_resume[name], uninterrupted[name], rtol=1e-6, atol=1e-7, err_msg=name)


def test_resume_with_shifted_names_from_an_old_checkpoint_raises_naming_entries_and_parameters(saved_run):
    """One more Linear built before the model in the resume script and a checkpoint without
    structured names: a ValueError naming a checkpoint entry of the old names and a parameter
    (with its structured name) left without state, before any step; not a silent restart at zero."""
    script, out = saved_run
    resumed = _run(script, "resume-shifted-old", out)
    error = resumed.stderr.strip().splitlines()[-1]
    assert resumed.returncode != 0 and error.startswith("ValueError: AdamWDL.set_state_dict:"), resumed.stderr[-3000:]
    # The saved model's first Linear was linear_0; that name is now the extra layer's, outside the optimizer.
    assert "belong to no parameter of this optimizer ('linear_0.w_0_" in error
    # The classifier, the last of the model's 14 Linears, was linear_13 and is linear_14 now: no state.
    assert "have no saved state ('linear_14.w_0 (classifier.weight)'" in error
    assert "names have moved" in error
    assert not (out / "resume-shifted-old.npz").exists()


# ---------------------------------------------------------- in one process
def _trained(steps: int = 2):
    model = tiny_bert()
    optimizer = AdamWDL(learning_rate=0.01, parameters=model.parameters(), weight_decay=0.1)
    for ids, labels in batches(steps):
        nn.functional.cross_entropy(model(ids), labels).backward()
        optimizer.step()
        optimizer.clear_grad()
    return model, optimizer


def test_a_refused_checkpoint_changes_nothing():
    """The ValueError comes before anything is loaded: the optimizer keeps its state and trains on."""
    with fresh_names():
        model, optimizer = _trained()
        state = {k: v.numpy().copy() for k, v in optimizer.state_dict().items() if isinstance(v, paddle.Tensor)}
        shifted = {("x" + k if "linear" in k else k): v for k, v in optimizer.state_dict().items()}
        with pytest.raises(ValueError, match="names have moved"):
            optimizer.set_state_dict(shifted)
        after = {k: v.numpy() for k, v in optimizer.state_dict().items() if isinstance(v, paddle.Tensor)}
        assert after.keys() == state.keys()
        for key in state:
            np.testing.assert_array_equal(after[key], state[key])


def test_a_checkpoint_of_more_parameters_warns_naming_the_unused_entries():
    """Resuming only the head from a full checkpoint: every listed parameter has its state,
    the others' entries are named in a UserWarning, and the head continues from its saved moments
    (equal to continuing the full run's head with the same gradients' moments: checked on the
    loaded moment tensors)."""
    with fresh_names():
        model, optimizer = _trained()
        checkpoint = optimizer.state_dict()
        head = [model.classifier.weight, model.classifier.bias]
        saved_moment = checkpoint[f"{model.classifier.weight.name}_moment1_0"].numpy().copy()
    with fresh_names():
        resumed_model = tiny_bert()
        head_only = AdamWDL(learning_rate=0.01, parameters=[resumed_model.classifier.weight,
                                                            resumed_model.classifier.bias])
        with pytest.warns(UserWarning, match=r"checkpoint entries belong to no parameter of this optimizer "
                                             r"and are left unused: 'embedding_0.w_0_moment1_0'"):
            head_only.set_state_dict(checkpoint)
        ids, labels = batches(1)[0]
        nn.functional.cross_entropy(resumed_model(ids), labels).backward()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            head_only.step()
        moment = head_only._get_accumulator_master(head_only._moment1_acc_str, resumed_model.classifier.weight)
        grad = resumed_model.classifier.weight.grad.numpy().astype(np.float64)
        np.testing.assert_allclose(moment.numpy(), 0.9 * saved_moment + 0.1 * grad, rtol=1e-5, atol=1e-7)
        assert len(head) == 2


def test_a_parameter_frozen_when_saved_still_starts_afresh_without_a_warning():
    """Names did not move (no entry unmatched): a parameter without state was frozen when
    saved, and starts at zero as in an uninterrupted run, silently as before."""
    with fresh_names():
        model = tiny_bert()
        model.classifier.weight.stop_gradient = True
        optimizer = AdamWDL(learning_rate=0.01, parameters=model.parameters())
        ids, labels = batches(1)[0]
        nn.functional.cross_entropy(model(ids), labels).backward()
        optimizer.step()
        optimizer.clear_grad()
        checkpoint = optimizer.state_dict()
        assert not any(k.startswith(model.classifier.weight.name + "_") for k in checkpoint)
        model.classifier.weight.stop_gradient = False
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            optimizer.set_state_dict(checkpoint)
            nn.functional.cross_entropy(model(ids), labels).backward()
            optimizer.step()
        beta1_pow = optimizer._get_accumulator_master(optimizer._beta1_pow_acc_str, model.classifier.weight)
        assert beta1_pow.item() == pytest.approx(0.9 ** 2)  # one update taken (Paddle stores beta1^(t+1)): afresh


def test_a_checkpoint_without_state_this_optimizer_holds_is_refused_before_anything_is_loaded():
    """A rollback in the same process to a checkpoint saved while a parameter was frozen, after it
    trained: a ValueError names it (Paddle's loading would assert with the other state loaded),
    the optimizer is left as it was, and a freshly built one loads the checkpoint without a word."""
    with fresh_names():
        model = tiny_bert()
        model.classifier.weight.stop_gradient = True
        optimizer = AdamWDL(learning_rate=0.01, parameters=model.parameters())
        for step, (ids, labels) in enumerate(batches(2)):
            nn.functional.cross_entropy(model(ids), labels).backward()
            optimizer.step()
            optimizer.clear_grad()
            if step == 0:
                checkpoint = optimizer.state_dict()
                model.classifier.weight.stop_gradient = False
        state = {k: v.numpy().copy() for k, v in optimizer.state_dict().items() if isinstance(v, paddle.Tensor)}
        with pytest.raises(ValueError, match=rf"no state for 1 parameters this optimizer has state for "
                                             rf"\('{model.classifier.weight.name}'\).*Build the optimizer anew"):
            optimizer.set_state_dict(checkpoint)
        after = {k: v.numpy() for k, v in optimizer.state_dict().items() if isinstance(v, paddle.Tensor)}
        assert after.keys() == state.keys()
        for key in state:
            np.testing.assert_array_equal(after[key], state[key])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            AdamWDL(learning_rate=0.01, parameters=model.parameters()).set_state_dict(checkpoint)


def test_a_fresh_optimizers_state_loaded_into_one_that_stepped_is_refused_leaving_its_schedule():
    """No parameter state at all (saved before the first step) into an optimizer that has stepped:
    the ValueError comes before Paddle's loading, which would set the lr schedule, then assert."""
    with fresh_names():
        model = tiny_bert()
        scheduler = paddle.optimizer.lr.StepDecay(0.01, step_size=1)
        optimizer = AdamWDL(learning_rate=scheduler, parameters=model.parameters())
        fresh = optimizer.state_dict()
        ids, labels = batches(1)[0]
        nn.functional.cross_entropy(model(ids), labels).backward()
        optimizer.step()
        scheduler.step()
        with pytest.raises(ValueError, match=r"the checkpoint holds no state for \d+ parameters"):
            optimizer.set_state_dict(fresh)
        assert scheduler.last_epoch == 1 and optimizer.get_lr() == pytest.approx(0.001)


def test_name_dict_names_the_parameters_in_the_error():
    with fresh_names():
        model, optimizer = _trained()
        names = name_dict_of(model)
        described = AdamWDL(learning_rate=0.01, parameters=model.parameters(), name_dict=names)
        shifted = {("x" + k if "linear" in k else k): v for k, v in optimizer.state_dict().items()}
        with pytest.raises(ValueError, match=r"\(bert\.encoder\.layers\.0\..*\)"):
            described.set_state_dict(shifted)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_moments_named_after_master_weights_belong_to_their_parameter(dtype):
    """Under multi_precision Paddle names a float16/bfloat16 parameter's moments after its
    master weight (<name>_fp32_master_0_moment1_0): a resume with the same names loads silently
    and continues from the saved moments."""
    with fresh_names():
        weight = paddle.create_parameter([3, 2], dtype, default_initializer=nn.initializer.Constant(0.5))
        optimizer = AdamWDL(learning_rate=0.01, parameters=[weight], multi_precision=True)
        weight.astype("float32").sum().backward()
        optimizer.step()
        optimizer.clear_grad()
        checkpoint = optimizer.state_dict()
        assert any("_fp32_master_0_moment1_0" in key for key in checkpoint)
    with fresh_names():
        resumed = paddle.create_parameter([3, 2], dtype, default_initializer=nn.initializer.Constant(0.5))
        again = AdamWDL(learning_rate=0.01, parameters=[resumed], multi_precision=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            again.set_state_dict(checkpoint)
            resumed.astype("float32").sum().backward()
            again.step()
        beta1_pow = again._get_accumulator_master(again._beta1_pow_acc_str, resumed)
        assert beta1_pow.item() == pytest.approx(0.9 ** 3)  # the saved step, then this one


# ----------------------------------------- one more *trained* layer built first
# Three same-shape Linears: Paddle names linear_0..2. The resume script builds
# and trains an auxiliary Linear(4, 4) first, which takes linear_0, and the
# model's move to linear_1..3: matched by Paddle name, the first layer would
# resume with the second's moments, the auxiliary layer with the first's and
# the last layer at zero, without a word.
TRAINED_EXTRA_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import paddle
    from paddle_llrd import AdamWDL

    mode, names, out = sys.argv[1], sys.argv[2], sys.argv[3]
    aux = paddle.nn.Linear(4, 4) if mode.startswith("resume-aux") else None  # built first: names move by one

    paddle.seed(7)
    last = "head" if mode == "resume-aux-renamed" else "out"  # the last layer renamed in the model class
    model = paddle.nn.Sequential(("inp", paddle.nn.Linear(4, 4)), ("act", paddle.nn.Tanh()),
                                 ("mid", paddle.nn.Linear(4, 4)), ("act2", paddle.nn.Tanh()),
                                 (last, paddle.nn.Linear(4, 4)))
    name_dict = {p.name: n for n, p in model.named_parameters()} if names == "names" else None
    scheduler = paddle.optimizer.lr.StepDecay(0.05, step_size=2, gamma=0.5)
    parameters = (aux.parameters() if aux is not None else []) + model.parameters()
    optimizer = AdamWDL(learning_rate=scheduler, parameters=parameters, weight_decay=0.1,
                        set_param_lr_fun=None, name_dict=name_dict)

    rng = np.random.default_rng(3)
    data = [(paddle.to_tensor(rng.normal(size=(5, 4)).astype("float32")),
             paddle.to_tensor(rng.normal(size=(5, 4)).astype("float32"))) for _ in range(6)]
    record = {}

    def weights(prefix):
        for n, p in model.named_parameters():
            record[f"{prefix}/{n}"] = p.numpy()
        if aux is not None:
            for n, p in aux.named_parameters():
                record[f"{prefix}/aux.{n}"] = p.numpy()

    def train(first):
        for step in range(first, first + 3):
            x, y = data[step]
            loss = paddle.nn.functional.mse_loss(model(x), y)
            if aux is not None:
                loss = loss + paddle.nn.functional.mse_loss(aux(x), y)
            loss.backward()
            for n, p in model.named_parameters():
                record[f"grad/{step}/{n}"] = p.grad.numpy()
            if aux is not None:
                for n, p in aux.named_parameters():
                    record[f"grad/{step}/aux.{n}"] = p.grad.numpy()
            optimizer.step()
            optimizer.clear_grad()
            scheduler.step()

    if mode == "save":
        weights("init")
        train(0)
        paddle.save(model.state_dict(), out + "/model.pdparams")
        paddle.save(optimizer.state_dict(), out + "/opt.pdopt")
    else:
        model.set_state_dict(paddle.load(out + "/model.pdparams"))
        weights("resumed")
        optimizer.set_state_dict(paddle.load(out + "/opt.pdopt"))
        train(3)
    weights("final")
    np.savez(out + f"/{mode}.npz", **record)
    """
)
LR, GAMMA, WEIGHT_DECAY, BETA1, BETA2, EPSILON = 0.05, 0.5, 0.1, 0.9, 0.999, 1e-8


def _adam_float64(start, grads_by_step, steps):
    """AdamW in float64 from the formula (Paddle's conventions): per parameter p with gradient g at
    update t of it, lr_s = 0.05 * 0.5 ** (s // 2) at step s,
    p *= 1 - lr_s * wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
    p -= lr_s * sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps sqrt(1-b2^t))."""
    params = {name: value.astype(np.float64) for name, value in start.items()}
    moments = {name: (np.zeros_like(value), np.zeros_like(value), 0) for name, value in params.items()}
    for step in steps:
        lr = LR * GAMMA ** (step // 2)
        for name, p in params.items():
            g = grads_by_step[step][name].astype(np.float64)
            m, v, t = moments[name]
            t += 1
            m = BETA1 * m + (1 - BETA1) * g
            v = BETA2 * v + (1 - BETA2) * g * g
            p = p * (1 - lr * WEIGHT_DECAY)
            correction = math.sqrt(1 - BETA2 ** t)
            params[name] = p - lr * correction / (1 - BETA1 ** t) * m / (np.sqrt(v) + EPSILON * correction)
            moments[name] = (m, v, t)
    return params


def _grads(record, steps):
    return {
        step: {key.split("/", 2)[2]: record[key] for key in record.files if key.startswith(f"grad/{step}/")}
        for step in steps
    }


@pytest.fixture(scope="module")
def trained_extra(tmp_path_factory):
    """Saves with structured names (``names``) and without (``no-names``), each after 3 steps."""
    out = tmp_path_factory.mktemp("trained_extra")
    script = out / "train.py"
    script.write_text(TRAINED_EXTRA_SCRIPT)
    runs = {}
    for names in ("names", "no-names"):
        folder = out / names
        folder.mkdir()
        saved = _run_with(script, ["save", names, str(folder)])
        assert saved.returncode == 0, saved.stderr[-3000:]
        runs[names] = folder
    return script, runs


def _run_with(script: Path, args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, "-W", "always::UserWarning", str(script), *args], cwd=REPO_ROOT, env=env,
        capture_output=True, text=True, timeout=180,
    )


def test_a_trained_layer_built_first_resumes_by_structured_name_as_the_float64_reference(trained_extra):
    """With ``name_dict`` the checkpoint records the structured names: the model's layers take
    their own moments, beta powers and lr schedule although every Paddle name moved by one, and
    the 6 steps (3 saved, 3 resumed) equal AdamW in float64 from the initial weights; the
    auxiliary layer, new to the checkpoint, starts afresh with a UserWarning naming it."""
    script, runs = trained_extra
    folder = runs["names"]
    resumed = _run_with(script, ["resume-aux", "names", str(folder)])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "trainable parameters are not among the 6 parameters the checkpoint was saved from" in resumed.stderr
    assert "'linear_0.w_0', 'linear_0.b_0'" in resumed.stderr  # the auxiliary layer, by its Paddle names
    saved, after = np.load(folder / "save.npz"), np.load(folder / "resume-aux.npz")
    start = {key[len("init/"):]: saved[key] for key in saved.files if key.startswith("init/")}
    grads = {**_grads(saved, range(3)), **_grads(after, range(3, 6))}
    expected = _adam_float64(start, grads, range(6))
    for name, value in expected.items():
        np.testing.assert_allclose(after[f"final/{name}"], value, rtol=2e-5, atol=1e-6, err_msg=name)
    aux_start = {key[len("resumed/"):]: after[key] for key in after.files if key.startswith("resumed/aux.")}
    aux_expected = _adam_float64(aux_start, _grads(after, range(3, 6)), range(3, 6))
    for name, value in aux_expected.items():
        np.testing.assert_allclose(after[f"final/{name}"], value, rtol=2e-5, atol=1e-6, err_msg=name)
    # the test can fail: by Paddle name the first layer would have resumed with the second's moments
    wrong = _adam_float64(start, grads, range(3))
    assert np.abs(after["final/inp.weight"] - wrong["inp.weight"]).max() > 1e-3


def test_a_trained_layer_built_first_without_structured_names_warns_naming_the_parameter(trained_extra):
    """Without ``name_dict`` the state can only be matched by Paddle name, which the auxiliary
    layer took: the parameter left over (the last layer, now linear_3) is named in a UserWarning
    that says the others may have resumed with other parameters' state and what to pass."""
    script, runs = trained_extra
    resumed = _run_with(script, ["resume-aux", "no-names", str(runs["no-names"])])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    warning = " ".join(resumed.stderr.split())
    assert ("2 trainable parameters are not among the 6 parameters the checkpoint was saved from "
            "('linear_3.w_0', 'linear_3.b_0')") in warning
    assert "resumed with other parameters' state: pass `name_dict`" in warning


def test_a_renamed_layer_and_moved_names_raise_naming_the_entry_and_the_parameter(trained_extra):
    """The last layer's structured name changed (``out`` -> ``head``) and the Paddle names moved:
    its saved state matches no parameter while the renamed layer has none: ValueError naming the
    checkpoint entry with its saved structured name and the parameter with its new one, before
    any step."""
    script, runs = trained_extra
    folder = runs["names"]
    resumed = _run_with(script, ["resume-aux-renamed", "names", str(folder)])
    error = resumed.stderr.strip().splitlines()[-1]
    assert resumed.returncode != 0 and error.startswith("ValueError: AdamWDL.set_state_dict:"), resumed.stderr[-3000:]
    assert "belong to no parameter of this optimizer ('linear_2.w_0_" in error and "(out.weight)" in error
    assert "'linear_3.w_0 (head.weight)'" in error
    assert not (folder / "resume-aux-renamed.npz").exists()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_state_follows_its_structured_name_when_names_moved(dtype, tmp_path):
    """Under multi_precision the master weight and the moments named after it move with the
    parameter's structured name: resumed after one more layer was built first, the weight's
    float32 master weight and beta powers are the saved ones (one more update: 0.9 ** 3)."""
    def build():
        model = nn.Sequential(nn.Linear(3, 2))
        model.to(dtype=dtype)
        names = {p.name: n for n, p in model.named_parameters()}
        return model, AdamWDL(learning_rate=0.01, parameters=model.parameters(), multi_precision=True,
                              set_param_lr_fun=None, name_dict=names)

    with fresh_names():
        model, optimizer = build()
        sum(p.astype("float32").square().sum() for p in model.parameters()).backward()  # no half matmul on CPU
        optimizer.step()
        saved_master = optimizer._master_weights[model[0].weight.name].numpy().copy()
        paddle.save(optimizer.state_dict(), str(tmp_path / "opt.pdopt"))
    with fresh_names():
        nn.Linear(3, 2)  # built first: the model's linear_0 is linear_1 now
        model, optimizer = build()
        assert model[0].weight.name == "linear_1.w_0"
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            optimizer.set_state_dict(paddle.load(str(tmp_path / "opt.pdopt")))
        np.testing.assert_array_equal(optimizer._master_weights["linear_1.w_0"].numpy(), saved_master)
        sum(p.astype("float32").square().sum() for p in model.parameters()).backward()  # no half matmul on CPU
        optimizer.step()
        beta1_pow = optimizer._get_accumulator_master(optimizer._beta1_pow_acc_str, model[0].weight)
        assert beta1_pow.item() == pytest.approx(0.9 ** 3)
