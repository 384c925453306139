"""Resuming when Paddle's parameter names moved (issue 17, item 2).

A resume script that builds one more layer before the model shifts every
``linear_N`` name; the model loads by structured name and does not notice.
``paddle.optimizer.AdamW`` asserts; AdamWDL used to load, restart the moments
and beta powers of every renamed parameter at zero and end 0.06-0.19 away
from the uninterrupted run, silently. Now it refuses, naming the entries and
the parameters. Each script runs in its own fresh process, as a user runs it
(module-level globals): save in one, resume in another.
"""
from __future__ import annotations

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
from test_adamwdl import batches, fresh_names, name_dict_of, tiny_bert

REPO_ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import paddle
    from paddle_llrd import AdamWDL
    from paddle_llrd.models.tiny_bert import TinyBertConfig, TinyBertForSequenceClassification

    mode, out = sys.argv[1], sys.argv[2]
    if mode == "resume-shifted":
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
        optimizer.set_state_dict(paddle.load(out + "/opt.pdopt"))
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


def test_resume_with_the_same_names_equals_the_uninterrupted_run(saved_run):
    """The control: the same script resumed in a fresh process ends where the uninterrupted run ends."""
    script, out = saved_run
    resumed = _run(script, "resume", out)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    uninterrupted, after_resume = np.load(out / "save.npz"), np.load(out / "resume.npz")
    for name in uninterrupted.files:
        np.testing.assert_allclose(after_resume[name], uninterrupted[name], rtol=1e-6, atol=1e-7, err_msg=name)


def test_resume_with_shifted_names_raises_naming_entries_and_parameters(saved_run):
    """One more Linear built before the model in the resume script: a ValueError naming a
    checkpoint entry of the old names and a parameter (with its structured name) left
    without state, before any step; not a silent restart at zero."""
    script, out = saved_run
    resumed = _run(script, "resume-shifted", out)
    error = resumed.stderr.strip().splitlines()[-1]
    assert resumed.returncode != 0 and error.startswith("ValueError: AdamWDL.set_state_dict:"), resumed.stderr[-3000:]
    # The saved model's first Linear was linear_0; that name is now the extra layer's, outside the optimizer.
    assert "belong to no parameter of this optimizer ('linear_0.w_0_" in error
    # The classifier, the last of the model's 14 Linears, was linear_13 and is linear_14 now: no state.
    assert "have no saved state ('linear_14.w_0 (classifier.weight)'" in error
    assert "names have moved" in error
    assert not (out / "resume-shifted.npz").exists()


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
