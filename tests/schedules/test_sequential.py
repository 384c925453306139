"""SequentialSchedule and ``get_scheduler("sequential", ...)``.

The expected values follow torch's ``SequentialLR`` definition: at step ``s``
with ``milestones[i-1] <= s < milestones[i]`` the lr is that of stage ``i`` at
its own step ``s - milestones[i-1]``; each stage's lr comes from the formulas
in schedule_formulas.py (or Paddle's documented closed forms), never from the
code under test.
"""
from __future__ import annotations

import bisect
import copy
import math
import pickle

import numpy as np
import paddle
import pytest
from paddle.optimizer.lr import CosineAnnealingDecay, LambdaDecay, StepDecay

import schedule_formulas as formula
from paddle_llrd import (
    AdamWDL,
    CosineDecayWithWarmup,
    LinearDecayWithWarmup,
    SchedulerType,
    SequentialSchedule,
    get_scheduler,
)
from paddle_llrd.schedules.plateau import ReduceOnPlateauSchedule


def sequential_expected(stage_curves, milestones, n_steps):
    """torch SequentialLR's lr at global steps 0..n_steps-1, from each stage's own curve."""
    values = []
    for s in range(n_steps):
        index = bisect.bisect_right(milestones, s)
        start = milestones[index - 1] if index > 0 else 0
        values.append(stage_curves[index](s - start))
    return np.array(values)


def three_stages():
    """Linear warmup-decay, Paddle's recursive CosineAnnealingDecay, then a step decay."""
    return [
        LinearDecayWithWarmup(1e-3, total_steps=10, warmup=3),
        CosineAnnealingDecay(5e-4, T_max=8, eta_min=1e-5),
        StepDecay(2e-4, step_size=3, gamma=0.5),
    ]


THREE_CURVES = [
    lambda k: formula.linear(1e-3, 3, 10, k),
    lambda k: 1e-5 + (5e-4 - 1e-5) * (1 + math.cos(math.pi * k / 8)) / 2,  # Paddle's closed form, k <= T_max
    lambda k: 2e-4 * 0.5 ** (k // 3),
]
MILESTONES = [10, 18]
N_STEPS = 30


def test_each_stage_counts_from_zero_at_its_milestone():
    scheduler = SequentialSchedule(three_stages(), MILESTONES)
    np.testing.assert_allclose(formula.run(scheduler, N_STEPS), sequential_expected(THREE_CURVES, MILESTONES, N_STEPS),
                               rtol=1e-12, atol=1e-18)
    assert [scheduler.stage_index(s) for s in (0, 9, 10, 17, 18, 40)] == [0, 0, 1, 1, 2, 2]
    assert [scheduler.stage_step(s) for s in (0, 9, 10, 17, 18, 40)] == [0, 9, 0, 7, 0, 22]


def test_a_single_stage_is_that_schedule():
    scheduler = SequentialSchedule([CosineDecayWithWarmup(1.0, 12, 4)], [])
    np.testing.assert_allclose(formula.run(scheduler, 15), [formula.cosine(1.0, 4, 12, s) for s in range(15)],
                               rtol=1e-12, atol=1e-18)


def test_stages_are_stepped_only_during_their_stretch():
    stages = three_stages()
    scheduler = SequentialSchedule(stages, MILESTONES)
    formula.run(scheduler, 14)  # now at step 14: stage 1 at its step 4
    assert [stage.last_epoch for stage in stages] == [9, 4, 0]


def test_the_optimizer_sees_the_sequence():
    """An AdamWDL training loop reads the lr of each step from the sequence."""
    paddle.seed(3)
    model = paddle.nn.Linear(4, 3)
    scheduler = SequentialSchedule(three_stages(), MILESTONES)
    optimizer = AdamWDL(learning_rate=scheduler, parameters=model.parameters(), layerwise_decay=1.0,
                        n_layers=1, name_dict={p.name: p.name for p in model.parameters()})
    seen = []
    for _ in range(N_STEPS):
        seen.append(optimizer.get_lr())
        model(paddle.randn([2, 4])).mean().backward()
        optimizer.step()
        optimizer.clear_grad()
        scheduler.step()
    np.testing.assert_allclose(seen, sequential_expected(THREE_CURVES, MILESTONES, N_STEPS), rtol=1e-12, atol=1e-18)


@pytest.mark.parametrize("stop", [5, 10, 13, 18, 25])
def test_state_dict_resumes_mid_stage_like_an_uninterrupted_run(stop, tmp_path):
    uninterrupted = formula.run(SequentialSchedule(three_stages(), MILESTONES), N_STEPS)
    first = SequentialSchedule(three_stages(), MILESTONES)
    head = formula.run(first, stop)
    path = str(tmp_path / "scheduler.pdparams")
    paddle.save(first.state_dict(), path)
    resumed = SequentialSchedule(three_stages(), MILESTONES)
    resumed.set_state_dict(paddle.load(path))
    tail = formula.run(resumed, N_STEPS - stop)
    np.testing.assert_array_equal(np.concatenate([head, tail]), uninterrupted)


def test_state_dict_is_flat_and_rides_in_the_optimizer_state():
    scheduler = SequentialSchedule(three_stages(), MILESTONES)
    formula.run(scheduler, 12)
    state = scheduler.state_dict()
    assert state["last_epoch"] == 12
    assert state["stage_1.last_epoch"] == 2 and state["stage_2.last_epoch"] == 0
    assert all(not isinstance(value, (dict, list)) for value in state.values())
    model = paddle.nn.Linear(2, 2)
    optimizer = paddle.optimizer.AdamW(learning_rate=scheduler, parameters=model.parameters())
    saved = optimizer.state_dict()
    fresh = SequentialSchedule(three_stages(), MILESTONES)
    paddle.optimizer.AdamW(learning_rate=fresh, parameters=model.parameters()).set_state_dict(saved)
    np.testing.assert_array_equal(formula.run(fresh, 10), formula.run(scheduler, 10))


@pytest.mark.parametrize("last_epoch", [0, 9, 10, 21])
def test_last_epoch_starts_where_an_uninterrupted_run_is(last_epoch):
    uninterrupted = formula.run(SequentialSchedule(three_stages(), MILESTONES), N_STEPS)
    late = SequentialSchedule(three_stages(), MILESTONES, last_epoch=last_epoch)
    np.testing.assert_array_equal(formula.run(late, N_STEPS - last_epoch - 1), uninterrupted[last_epoch + 1:])


def test_pickles_and_deep_copies():
    scheduler = SequentialSchedule([LinearDecayWithWarmup(1.0, 6, 2), CosineDecayWithWarmup(0.5, 6, 0)], [6])
    formula.run(scheduler, 4)
    for twin in (pickle.loads(pickle.dumps(scheduler)), copy.deepcopy(scheduler)):
        np.testing.assert_array_equal(formula.run(twin, 10), formula.run(copy.deepcopy(scheduler), 10))


@pytest.mark.parametrize(
    "milestones,error,match",
    [
        ([18, 10], ValueError, "strictly increasing"),
        ([10, 10], ValueError, "strictly increasing"),
        ([10], ValueError, "one entry fewer"),
        ([5, 10, 18], ValueError, "one entry fewer"),
        ([0, 10], ValueError, "step 1 or later"),
        ([10.0, 18], TypeError, "an int"),
        (10, TypeError, "a list"),
    ],
)
def test_bad_milestones_name_milestones(milestones, error, match):
    with pytest.raises(error, match=match) as info:
        SequentialSchedule(three_stages(), milestones)
    assert "`milestones" in str(info.value)


def test_bad_schedules_name_the_stage():
    with pytest.raises(ValueError, match="at least one"):
        SequentialSchedule([], [])
    with pytest.raises(TypeError, match=r"`schedules\[1\]` must be a paddle.optimizer.lr.LRScheduler"):
        SequentialSchedule([LinearDecayWithWarmup(1.0, 6, 2), 0.1], [3])
    with pytest.raises(TypeError, match=r"`schedules\[1\]` is a ReduceOnPlateau"):
        SequentialSchedule([LinearDecayWithWarmup(1.0, 6, 2), ReduceOnPlateauSchedule(0.1)], [3])
    stepped = LinearDecayWithWarmup(1.0, 6, 2)
    stepped.step()
    with pytest.raises(ValueError, match=r"`schedules\[0\]` is at step 1"):
        SequentialSchedule([stepped, LinearDecayWithWarmup(1.0, 6, 2)], [3])
    twice = LinearDecayWithWarmup(1.0, 6, 2)
    with pytest.raises(ValueError, match=r"`schedules\[1\]` is the same object"):
        SequentialSchedule([twice, twice], [3])


def test_a_refused_state_dict_changes_nothing():
    scheduler = SequentialSchedule(three_stages(), MILESTONES)
    formula.run(scheduler, 12)
    before = scheduler.state_dict()
    good = dict(before)
    with pytest.raises(KeyError, match="`last_lr`"):
        scheduler.set_state_dict({"last_epoch": 3})
    with pytest.raises(KeyError, match=r"stage\(s\) \[2\]"):
        scheduler.set_state_dict({key: value for key, value in good.items() if not key.startswith("stage_2.")})
    with pytest.raises(ValueError, match="another schedule"):
        scheduler.set_state_dict({**good, "stage_3.last_epoch": 0, "stage_3.last_lr": 0.1})
    with pytest.raises(ValueError, match="other milestones"):
        scheduler.set_state_dict({**good, "last_epoch": 15})
    with pytest.raises(TypeError, match="`last_epoch`"):
        scheduler.set_state_dict({**good, "stage_1.last_epoch": "2"})
    with pytest.raises(ValueError, match="`last_lr`"):
        scheduler.set_state_dict({**good, "stage_2.last_lr": float("nan")})
    assert scheduler.state_dict() == before
    with pytest.raises(ValueError, match="before the current step"):
        scheduler.step(3)
    assert scheduler.state_dict() == before


# --------------------------------------------------------------------------
# By name: get_scheduler("sequential", ..., stages=[...]).
# --------------------------------------------------------------------------
def test_registry_name():
    assert SchedulerType("sequential") is SchedulerType.SEQUENTIAL


def test_inverse_sqrt_then_cosine_by_name():
    """The article's recipe: inverse_sqrt for the first stage, then cosine over the rest."""
    lr, warmup, first, total = 1e-3, 20, 100, 250
    scheduler = get_scheduler(
        "sequential", lr, num_warmup_steps=warmup, num_training_steps=total,
        stages=[{"name": "inverse_sqrt", "num_steps": first},
                {"name": "cosine", "learning_rate": 3e-4, "min_lr": 1e-5}],
    )
    assert isinstance(scheduler, SequentialSchedule) and scheduler.milestones == [first]
    curves = [lambda k: formula.inverse_sqrt(lr, warmup, k),
              lambda k: formula.cosine(3e-4, 0, total - first, k, min_lr=1e-5)]
    np.testing.assert_allclose(formula.run(scheduler, total + 10), sequential_expected(curves, [first], total + 10),
                               rtol=1e-12, atol=1e-18)


def test_stage_options_and_shared_options():
    """Each stage gets its own options; the run's num_cycles/lr_end/power reach the stages that take them,
    as PaddleNLP's Trainer passes them; a stage's own setting wins; the run's lr_warmup_init is the first stage's."""
    scheduler = get_scheduler(
        "sequential", 1.0, num_warmup_steps=4, num_training_steps=40, num_cycles=0.5, lr_end=1e-7, power=2.0,
        lr_warmup_init=0.25,
        stages=[{"name": "linear", "num_steps": 10},
                {"name": "polynomial", "num_steps": 10, "num_warmup_steps": 2, "learning_rate": 0.5},
                {"name": "cosine_with_restarts", "num_cycles": 2, "num_steps": 20}],
    )
    curves = [
        lambda k: 0.25 + 0.75 * k / 4 if k < 4 else formula.linear(1.0, 4, 10, k),
        lambda k: formula.polynomial(0.5, 2, 10, k, 1e-7, 2.0),
        lambda k: formula.hard_restarts(1.0, 0, 20, 2, k),
    ]
    np.testing.assert_allclose(formula.run(scheduler, 45), sequential_expected(curves, [10, 20], 45),
                               rtol=1e-12, atol=1e-18)


def test_through_a_trainer_style_call_with_kwargs_from_a_config():
    """create_scheduler's call: the five PaddleNLP options always passed, the stages from lr_scheduler_kwargs."""
    kwargs = {"stages": [{"name": "constant_with_warmup", "num_steps": 6}, {"name": "linear"}]}
    scheduler = get_scheduler("sequential", learning_rate=0.1, num_warmup_steps=3, num_training_steps=16,
                              num_cycles=0.5, lr_end=1e-7, power=1.0, **kwargs)
    curves = [lambda k: formula.constant_with_warmup(0.1, 3, k), lambda k: formula.linear(0.1, 0, 10, k)]
    np.testing.assert_allclose(formula.run(scheduler, 18), sequential_expected(curves, [6], 18),
                               rtol=1e-12, atol=1e-18)


@pytest.mark.parametrize(
    "stages,total,error,match",
    [
        ("cosine", 10, TypeError, "`stages` must be a list of dicts"),
        ([], 10, ValueError, "at least one stage"),
        ([{"name": "linear", "num_steps": 5}, "cosine"], 10, TypeError, r"`stages\[1\]` must be a dict"),
        ([{"name": "linear", "num_steps": 5}, {"num_steps": 5}], 10, ValueError, r"`stages\[1\]` lacks 'name'"),
        ([{"name": "linear"}, {"name": "cosine"}], 10, ValueError, r"`stages\[0\]` lacks 'num_steps'"),
        ([{"name": "linear", "num_steps": 0}, {"name": "cosine"}], 10, ValueError,
         r"`stages\[0\]\['num_steps'\]` must be >= 1"),
        ([{"name": "linear", "num_steps": 2.5}, {"name": "cosine"}], 10, ValueError,
         r"`stages\[0\]\['num_steps'\]` must be a whole number"),
        ([{"name": "linear", "num_steps": 10}, {"name": "cosine"}], 10, ValueError,
         r"leaves no step .* `stages\[1\]`"),
        ([{"name": "linear", "num_steps": 4}, {"name": "cosine", "num_steps": 4}], 10, ValueError,
         "add up to 8, but `num_training_steps` is 10"),
        ([{"name": "linear", "num_steps": 4}, {"name": "nope"}], 10, ValueError,
         r"`stages\[1\]` \('nope'\): Unknown scheduler name 'nope'"),
        ([{"name": "linear", "num_steps": 4}, {"name": "cosine", "gamma": 2}], 10, TypeError,
         r"`stages\[1\]` \('cosine'\): .*does not accept the argument\(s\) gamma"),
        ([{"name": "linear", "num_steps": 4}, {"name": "cosine", "min_lr": 5.0}], 10, ValueError,
         r"`stages\[1\]` \('cosine'\): `min_lr`"),
        ([{"name": "linear", "num_steps": 4}, {"name": "reduce_lr_on_plateau"}], 10, TypeError,
         r"`stages\[1\]` is a ReduceOnPlateau"),
        ([{"name": "linear", "num_steps": 4, "last_epoch": 3}, {"name": "cosine"}], 10, ValueError,
         r"`stages\[0\]` sets 'last_epoch'"),
        ([{"name": "cosine"}], None, ValueError, r"`stages\[0\]` \('cosine'\): .*requires `num_training_steps`"),
        ([{"name": "cosine", "num_training_steps": 10}], 10, ValueError,
         r"`stages\[0\]` sets 'num_training_steps'; a stage's length is its 'num_steps'"),
    ],
)
def test_bad_stages_name_the_stage_and_key(stages, total, error, match):
    with pytest.raises(error, match=match):
        get_scheduler("sequential", 0.1, num_warmup_steps=0, num_training_steps=total, stages=stages)


def test_the_run_s_warmup_and_the_first_stage_s_must_agree():
    stages = [{"name": "linear", "num_steps": 10, "num_warmup_steps": 5}, {"name": "cosine"}]
    with pytest.raises(ValueError, match=r"`stages\[0\]\['num_warmup_steps'\]` \(5\) contradicts `num_warmup_steps` \(3\)"):
        get_scheduler("sequential", 0.1, num_warmup_steps=3, num_training_steps=20, stages=stages)
    # the same value, or the Trainer's default 0, is no contradiction
    get_scheduler("sequential", 0.1, num_warmup_steps=5, num_training_steps=20, stages=stages)
    get_scheduler("sequential", 0.1, num_warmup_steps=0, num_training_steps=20, stages=stages)
    with pytest.raises(ValueError, match=r"`stages\[0\]\['lr_warmup_init'\]`"):
        get_scheduler("sequential", 0.1, num_warmup_steps=0, num_training_steps=20, lr_warmup_init=0.01,
                      stages=[dict(stages[0], lr_warmup_init=0.02), stages[1]])


def test_stages_are_required():
    with pytest.raises(ValueError, match="requires `stages`"):
        get_scheduler("sequential", 0.1, num_warmup_steps=0, num_training_steps=10)


def test_lambda_decay_stage_without_a_registry_name():
    """Any LRScheduler can be a stage of the class (here Paddle's LambdaDecay)."""
    scheduler = SequentialSchedule([LambdaDecay(1.0, lambda k: 1.0 / (k + 1)), LinearDecayWithWarmup(0.5, 4, 0)],
                                   [3])
    curves = [lambda k: 1.0 / (k + 1), lambda k: formula.linear(0.5, 0, 4, k)]
    np.testing.assert_allclose(formula.run(scheduler, 8), sequential_expected(curves, [3], 8), rtol=1e-12, atol=1e-18)


def test_the_documented_recipe_runs_as_a_user_writes_it(tmp_path):
    """docs/schedules.rst's SequentialSchedule block, in a fresh process, then stepped as training steps it."""
    import json
    import os
    import re
    import subprocess
    import sys

    root = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir)
    with open(os.path.join(root, "docs", "schedules.rst"), encoding="utf-8") as page:
        blocks = re.findall(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", page.read())
    (block,) = [b for b in blocks if "SequentialSchedule([" in b]
    script = tmp_path / "recipe.py"
    script.write_text("\n".join(line[3:] for line in block.splitlines()) + "\n"
                      "import json\nlrs = []\nfor _ in range(50001):\n    lrs.append(scheduler())\n"
                      "    scheduler.step()\nprint(json.dumps(lrs))\n")
    env = dict(os.environ, PYTHONPATH=os.path.abspath(root))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, check=True).stdout
    lrs = json.loads(out.strip().splitlines()[-1])
    curves = [lambda k: formula.inverse_sqrt(5e-5, 1000, k), lambda k: formula.cosine(2e-5, 0, 40000, k)]
    np.testing.assert_allclose(lrs, sequential_expected(curves, [10000], 50001), rtol=1e-12, atol=1e-18)
