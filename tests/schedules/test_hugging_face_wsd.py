"""``"warmup_stable_decay"`` with Hugging Face's keywords gives Hugging Face's numbers
(docs/schedules.rst, "warmup_stable_decay"): its warmup from ``min_lr_ratio``, its three warmup and
decay types, ``num_stable_steps`` and ``num_cycles``, through ``get_wsd_schedule``, ``get_scheduler``
and the Trainer fields (``lr_scheduler_kwargs``), checked against Hugging Face's formula written out
in schedule_formulas.py; Megatron-LM's keywords keep Megatron-LM's numbers (tests/schedules/test_registry_family.py),
and a call that mixes the two families, or that could be either, is refused naming the keywords."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest

from schedule_formulas import hugging_face_wsd, run

from paddle_llrd import get_scheduler, get_wsd_schedule, warning_classes
from paddle_llrd.integrations.training_arguments import check_fields
from paddle_llrd.integrations.builders import build_scheduler

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TYPES = ["linear", "cosine", "1-sqrt"]


def expected_lrs(lr, n_steps, **stages):
    return np.array([hugging_face_wsd(lr, s, **stages) for s in range(n_steps)])


def trainer_schedule(learning_rate, warmup_steps, max_steps, kwargs, **fields):
    """The schedule an LLRDTrainer builds from its fields: checked as TrainingArguments checks them, built as
    create_scheduler builds it (PaddleNLP's num_cycles, lr_end, power fields at their defaults)."""
    checked = check_fields({"lr_scheduler_type": "warmup_stable_decay", "lr_scheduler_kwargs": kwargs})
    args = SimpleNamespace(lr_scheduler_type=checked["lr_scheduler_type"], learning_rate=learning_rate,
                           warmup_steps=warmup_steps, warmup_ratio=0.0, num_cycles=0.5, lr_end=1e-7, power=1.0,
                           lr_scheduler_kwargs=checked["lr_scheduler_kwargs"], **fields)
    return build_scheduler(args, num_training_steps=max_steps)


# (warmup, total, decay): ordinary, no warmup, decay right after warmup, all decay but the warmup.
STAGES = [(10, 100, 30), (0, 40, 10), (8, 20, 12), (5, 30, 25)]


@pytest.mark.parametrize("min_ratio", [0.0, 0.1])
@pytest.mark.parametrize("decay_type", TYPES)
@pytest.mark.parametrize("warmup_type", TYPES)
@pytest.mark.parametrize("warmup,total,decay", STAGES)
def test_every_warmup_and_decay_type_gives_hugging_faces_numbers(warmup, total, decay, warmup_type, decay_type,
                                                                   min_ratio):
    lr, n_steps = 2e-3, total + 6
    keywords = dict(num_decay_steps=decay, warmup_type=warmup_type, decay_type=decay_type, min_lr_ratio=min_ratio)
    expected = expected_lrs(lr, n_steps, warmup=warmup, stable=total - warmup - decay, decay=decay,
                            warmup_type=warmup_type, decay_type=decay_type, min_ratio=min_ratio)
    by_function = run(get_wsd_schedule(lr, warmup, total, **keywords), n_steps)
    by_name = run(get_scheduler("warmup_stable_decay", lr, num_warmup_steps=warmup, num_training_steps=total,
                                **keywords), n_steps)
    by_trainer = run(trainer_schedule(lr, warmup, total, keywords), n_steps)
    for lrs in (by_function, by_name, by_trainer):
        np.testing.assert_allclose(lrs, expected, rtol=1e-13, atol=1e-18)
    if warmup > 0:
        assert by_function[0] == pytest.approx(lr * min_ratio, abs=1e-18)  # the warmup starts at min_lr_ratio


@pytest.mark.parametrize("cycles", [0.25, 1.0, 1.5])
def test_num_cycles_shapes_the_cosine_decay_as_hugging_faces(cycles):
    lr, warmup, total, decay = 1e-3, 4, 40, 20
    expected = expected_lrs(lr, total + 4, warmup=warmup, stable=total - warmup - decay, decay=decay,
                            min_ratio=0.05, cycles=cycles)
    scheduler = get_wsd_schedule(lr, warmup, total, num_decay_steps=decay, min_lr_ratio=0.05, num_cycles=cycles)
    np.testing.assert_allclose(run(scheduler, total + 4), expected, rtol=1e-13, atol=1e-18)
    # Through a Trainer the kwargs' num_cycles wins over the num_cycles field, as in the frameworks.
    by_trainer = trainer_schedule(lr, warmup, total, {"num_decay_steps": decay, "min_lr_ratio": 0.05,
                                                      "num_cycles": cycles})
    np.testing.assert_allclose(run(by_trainer, total + 4), expected, rtol=1e-13, atol=1e-18)


@pytest.mark.parametrize("total", [None, 20])
def test_num_stable_steps_sets_the_stable_stage(total):
    lr, warmup, stable, decay = 1e-3, 4, 6, 10
    scheduler = get_wsd_schedule(lr, warmup, total, num_decay_steps=decay, num_stable_steps=stable,
                                 warmup_type="cosine", decay_type="linear", min_lr_ratio=0.2)
    expected = expected_lrs(lr, 26, warmup=warmup, stable=stable, decay=decay, warmup_type="cosine",
                            decay_type="linear", min_ratio=0.2)
    np.testing.assert_allclose(run(scheduler, 26), expected, rtol=1e-13, atol=1e-18)


def test_a_default_hugging_face_call_is_the_linear_warmup_and_the_half_cosine():
    lr, warmup, total, decay = 1e-3, 5, 30, 10
    scheduler = get_wsd_schedule(lr, warmup, total, num_decay_steps=decay, warmup_type="linear", min_lr_ratio=0.1)
    expected = expected_lrs(lr, total + 3, warmup=warmup, stable=total - warmup - decay, decay=decay, min_ratio=0.1)
    np.testing.assert_allclose(run(scheduler, total + 3), expected, rtol=1e-13, atol=1e-18)


@pytest.mark.parametrize("hugging_face", [{"warmup_type": "linear"}, {"decay_type": "cosine"},
                                          {"num_stable_steps": 6}, {"num_cycles": 1.0}])
@pytest.mark.parametrize("megatron", [{"decay_style": "cosine"}, {"decay_ratio": 0.2}, {"min_lr": 1e-4},
                                      {"lr_warmup_init": 1e-4}])
def test_a_call_mixing_the_two_families_is_refused_naming_both(hugging_face, megatron):
    (hf_key,), (mg_key,) = hugging_face, megatron
    keywords = {"num_decay_steps": 4, **hugging_face, **megatron}
    calls = [
        lambda: get_wsd_schedule(1e-3, 4, 14, **keywords),
        lambda: get_scheduler("warmup_stable_decay", 1e-3, num_warmup_steps=4, num_training_steps=14, **keywords),
        lambda: trainer_schedule(1e-3, 4, 14, keywords),
    ]
    for call in calls:
        with pytest.raises(ValueError) as info:
            call()
        message = str(info.value)
        assert f"`{hf_key}`" in message and f"`{mg_key}`" in message, message
        assert "Hugging Face's" in message and "Megatron-LM's" in message


def test_paddleformers_min_lr_field_is_megatrons_and_refused_beside_hugging_faces_keywords():
    with pytest.raises(ValueError, match="`warmup_type`.*`min_lr`"):
        trainer_schedule(1e-3, 4, 14, {"warmup_type": "cosine", "num_decay_steps": 4}, min_lr=1e-4)


def test_min_lr_ratio_with_a_warmup_and_no_family_is_refused_asking_for_one():
    for call in (lambda: get_wsd_schedule(1e-3, 4, 20, num_decay_steps=5, min_lr_ratio=0.1),
                 lambda: trainer_schedule(1e-3, 4, 20, {"num_decay_steps": 5, "min_lr_ratio": 0.1})):
        with pytest.raises(ValueError) as info:
            call()
        message = str(info.value)
        for named in ("`min_lr_ratio`", "`num_warmup_steps`", "warmup_type=", "decay_style="):
            assert named in message, message
    # Where the two families agree, it is taken: no warmup, or no floor.
    no_warmup = run(get_wsd_schedule(1e-3, 0, 20, num_decay_steps=5, min_lr_ratio=0.1), 24)
    np.testing.assert_allclose(no_warmup, expected_lrs(1e-3, 24, warmup=0, stable=15, decay=5, min_ratio=0.1),
                               rtol=1e-13, atol=1e-18)
    no_floor = run(get_wsd_schedule(1e-3, 4, 20, num_decay_steps=5), 24)
    np.testing.assert_allclose(no_floor, expected_lrs(1e-3, 24, warmup=4, stable=11, decay=5),
                               rtol=1e-13, atol=1e-18)


@pytest.mark.parametrize(
    "keywords,error,named",
    [
        (dict(warmup_type="exponential"), ValueError, ["warmup_type"]),
        (dict(decay_type="exponential"), ValueError, ["decay_type", "decay_style"]),
        (dict(decay_type="Cosine"), ValueError, ["decay_type"]),
        (dict(warmup_type=1), ValueError, ["warmup_type"]),
        (dict(num_stable_steps=6), ValueError, ["num_stable_steps", "num_decay_steps"]),
        (dict(num_stable_steps=6, num_decay_steps=4), ValueError,
         ["num_warmup_steps", "num_stable_steps", "num_decay_steps", "num_training_steps"]),
        (dict(num_stable_steps=-1, num_decay_steps=4), ValueError, ["num_stable_steps"]),
        (dict(warmup_type="linear", num_decay_steps=17), ValueError, ["num_warmup_steps", "num_decay_steps"]),
        (dict(warmup_type="linear", min_lr_ratio=1.5), ValueError, ["min_lr_ratio"]),
        (dict(num_cycles=-1.0), ValueError, ["num_cycles"]),
        (dict(num_cycles="half"), TypeError, ["num_cycles"]),
    ],
)
def test_bad_hugging_face_arguments_raise_naming_them(keywords, error, named):
    with pytest.raises(error) as info:
        get_wsd_schedule(1e-3, 4, 20, **keywords)
    for argument in named:
        assert f"`{argument}`" in str(info.value), (argument, str(info.value))


def test_a_users_script_in_a_fresh_process_gets_hugging_faces_numbers(tmp_path):
    """As a user coming from transformers writes it: the schedule by name, an optimizer reading it."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import json
        import paddle
        from paddle_llrd import AdamWDL, get_scheduler

        model = paddle.nn.Linear(4, 2)
        scheduler = get_scheduler("warmup_stable_decay", 3e-3, num_warmup_steps=6, num_training_steps=30,
                                  num_decay_steps=12, warmup_type="1-sqrt", decay_type="cosine",
                                  min_lr_ratio=0.1, num_cycles=0.5)
        optimizer = AdamWDL(learning_rate=scheduler, parameters=model.parameters())
        lrs = []
        for step in range(32):
            lrs.append(optimizer.get_lr())
            model(paddle.ones([2, 4])).mean().backward()
            optimizer.step()
            optimizer.clear_grad()
            scheduler.step()
        print(json.dumps(lrs))
    """))
    env = {**os.environ, "PYTHONPATH": ROOT}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lrs = json.loads(done.stdout.strip().splitlines()[-1])
    expected = expected_lrs(3e-3, 32, warmup=6, stable=12, decay=12, warmup_type="1-sqrt", decay_type="cosine",
                            min_ratio=0.1)
    np.testing.assert_allclose(lrs, expected, rtol=1e-13, atol=1e-18)
    for warning in warning_classes.__all__:  # none of the package's warnings
        assert warning not in done.stderr, done.stderr[-3000:]
