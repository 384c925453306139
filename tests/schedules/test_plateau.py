"""``get_scheduler("reduce_lr_on_plateau", ...)`` against Paddle's own ``ReduceOnPlateau``.

The reference is ``paddle.optimizer.lr.ReduceOnPlateau`` built with the same
arguments and stepped with the same metric sequence; with an optimizer, the
float64 AdamW reference of reference_adamw.py fed that class's lrs times the
layer ratios.
"""
from __future__ import annotations

import copy
import pickle

import numpy as np
import paddle
import pytest
from paddle import nn

from paddle_llrd import ReduceOnPlateauSchedule, SchedulerType, get_scheduler
from reference_adamw import ReferenceAdamW
from adamwdl_runs import assert_matches, batches, gradients_of, make_adamwdl, ratio_fn, tiny_bert, weights_of


def metric_sequence(n, seed=0):
    """A loss that falls, plateaus, jumps and falls again, with noise: every branch of the rule is hit."""
    rng = np.random.default_rng(seed)
    base = np.concatenate([np.linspace(2.0, 1.0, n // 4), np.full(n // 4, 1.0), np.full(n // 4, 1.3),
                           np.linspace(1.3, 0.5, n - 3 * (n // 4))])
    return [float(value) for value in base + rng.normal(0.0, 2e-3, n)]


SETTINGS = [
    {},
    {"factor": 0.5, "patience": 3},
    {"factor": 0.5, "patience": 0, "cooldown": 2},
    {"factor": 0.3, "patience": 2, "threshold": 0.01, "threshold_mode": "abs"},
    {"factor": 0.5, "patience": 1, "min_lr": 2e-3},
    {"mode": "max", "factor": 0.5, "patience": 2},
    {"mode": "max", "factor": 0.7, "patience": 1, "threshold_mode": "abs", "threshold": 0.05, "cooldown": 1},
    {"factor": 0.5, "patience": 2, "epsilon": 5e-3},
    {"factor": 0.0, "patience": 4},
]


def run_on(scheduler, metrics):
    values = []
    for metric in metrics:
        scheduler.step(metric)
        values.append(scheduler())
    return values


@pytest.mark.parametrize("options", SETTINGS, ids=lambda options: ",".join(f"{k}={v}" for k, v in options.items())
                         or "defaults")
def test_same_metrics_same_lrs_as_paddle(options):
    metrics = metric_sequence(80)
    if options.get("mode") == "max":
        metrics = [-value for value in metrics]
    ours = get_scheduler("reduce_lr_on_plateau", 0.02, **options)
    paddles = paddle.optimizer.lr.ReduceOnPlateau(0.02, **options)
    expected = run_on(paddles, metrics)
    assert run_on(ours, metrics) == expected
    assert len(set(expected)) > 1 or options.get("min_lr"), "the sequence should trigger a reduction"
    assert ours.state_dict() == paddles.state_dict()


def test_is_paddle_s_class_for_the_trainers():
    scheduler = get_scheduler("reduce_lr_on_plateau", 1e-3)
    assert isinstance(scheduler, paddle.optimizer.lr.ReduceOnPlateau)
    assert isinstance(scheduler, ReduceOnPlateauSchedule)
    assert SchedulerType("reduce_lr_on_plateau") is SchedulerType.REDUCE_LR_ON_PLATEAU


def test_the_trainer_s_call_works_and_warmup_is_refused():
    """create_scheduler passes num_warmup_steps, num_training_steps, num_cycles, lr_end and power."""
    common = dict(num_training_steps=100, num_cycles=0.5, lr_end=1e-7, power=1.0)
    scheduler = get_scheduler("reduce_lr_on_plateau", 1e-3, num_warmup_steps=0, factor=0.5, patience=1, **common)
    assert run_on(scheduler, [1.0, 1.0, 1.0]) == run_on(
        paddle.optimizer.lr.ReduceOnPlateau(1e-3, factor=0.5, patience=1), [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="`num_warmup_steps` is 10, but 'reduce_lr_on_plateau' has no warmup"):
        get_scheduler("reduce_lr_on_plateau", 1e-3, num_warmup_steps=10, **common)
    with pytest.raises(TypeError, match="lr_warmup_init"):
        get_scheduler("reduce_lr_on_plateau", 1e-3, num_warmup_steps=0, lr_warmup_init=1e-4, **common)


def test_adamwdl_with_layer_ratios_follows_paddle_s_lrs_times_the_ratios():
    """Eight AdamWDL steps, the schedule stepped on each step's loss; the float64 reference is fed Paddle's
    ReduceOnPlateau lr (stepped on the same losses) times each parameter's layer ratio."""
    model = tiny_bert()
    scheduler = get_scheduler("reduce_lr_on_plateau", 0.02, factor=0.5, patience=0, threshold=0.5)
    paddles = paddle.optimizer.lr.ReduceOnPlateau(0.02, factor=0.5, patience=0, threshold=0.5)
    optimizer = make_adamwdl(model, learning_rate=scheduler, weight_decay=0.1, layerwise_decay=0.6)
    reference = ReferenceAdamW(weights_of(model), weight_decay=0.1)
    lrs = []
    for step, (ids, labels) in enumerate(batches(8)):
        loss = nn.functional.cross_entropy(model(ids), labels)
        loss.backward()
        grads, _ = gradients_of(model)
        optimizer.step()
        optimizer.clear_grad()
        reference.step(grads, paddles(), ratio=ratio_fn(0.6))
        assert_matches(model, reference.params, f"step {step}")
        lrs.append(paddles())
        scheduler.step(float(loss))
        paddles.step(float(loss))
    assert lrs[-1] < lrs[0], "the loss must plateau within the run for the test to mean something"


def test_state_dict_resumes_like_an_uninterrupted_run(tmp_path):
    metrics = metric_sequence(60, seed=4)
    options = dict(factor=0.5, patience=2, cooldown=1)
    uninterrupted = run_on(get_scheduler("reduce_lr_on_plateau", 0.1, **options), metrics)
    first = get_scheduler("reduce_lr_on_plateau", 0.1, **options)
    head = run_on(first, metrics[:27])
    path = str(tmp_path / "scheduler.pdparams")
    paddle.save(first.state_dict(), path)
    resumed = get_scheduler("reduce_lr_on_plateau", 0.1, **options)
    resumed.set_state_dict(paddle.load(path))
    assert head + run_on(resumed, metrics[27:]) == uninterrupted
    twin = pickle.loads(pickle.dumps(first))
    assert run_on(twin, metrics[27:]) == run_on(copy.deepcopy(first), metrics[27:])


def test_a_refused_state_dict_changes_nothing():
    scheduler = get_scheduler("reduce_lr_on_plateau", 0.1, patience=1)
    run_on(scheduler, [1.0, 0.9, 0.95, 0.97])
    before = scheduler.state_dict()
    with pytest.raises(KeyError, match="`best`"):
        scheduler.set_state_dict({k: v for k, v in before.items() if k != "best"})
    with pytest.raises(TypeError, match="`best`"):
        scheduler.set_state_dict({**before, "best": "0.9"})
    with pytest.raises(ValueError, match="`num_bad_epochs`"):
        scheduler.set_state_dict({**before, "num_bad_epochs": -1})
    with pytest.raises(ValueError, match="`last_lr`"):
        scheduler.set_state_dict({**before, "last_lr": float("inf")})
    with pytest.raises(TypeError, match="`state_dict`"):
        scheduler.set_state_dict([1, 2])
    assert scheduler.state_dict() == before


@pytest.mark.parametrize(
    "options,error,match",
    [
        ({"mode": "lowest"}, ValueError, "`mode`"),
        ({"mode": 1}, ValueError, "`mode`"),
        ({"factor": 1.0}, ValueError, "`factor`"),
        ({"factor": -0.1}, ValueError, "`factor`"),
        ({"factor": float("nan")}, ValueError, "`factor`"),
        ({"patience": -1}, ValueError, "`patience`"),
        ({"patience": 2.5}, ValueError, "`patience`"),
        ({"threshold": -1e-4}, ValueError, "`threshold`"),
        ({"threshold_mode": "relative"}, ValueError, "`threshold_mode`"),
        ({"cooldown": -2}, ValueError, "`cooldown`"),
        ({"min_lr": -1.0}, ValueError, "`min_lr`"),
        ({"min_lr": 0.5}, ValueError, "`min_lr`"),
        ({"epsilon": float("inf")}, ValueError, "`epsilon`"),
        ({"gamma": 0.5}, TypeError, "gamma"),
    ],
)
def test_bad_arguments_are_named(options, error, match):
    with pytest.raises(error, match=match):
        get_scheduler("reduce_lr_on_plateau", 0.1, **options)
    with pytest.raises(ValueError, match="`learning_rate`"):
        get_scheduler("reduce_lr_on_plateau", -0.1)


def test_a_tensor_metric_works_as_in_paddle():
    ours = get_scheduler("reduce_lr_on_plateau", 0.1, factor=0.5, patience=0)
    paddles = paddle.optimizer.lr.ReduceOnPlateau(0.1, factor=0.5, patience=0)
    losses = [paddle.to_tensor(value) for value in (1.0, 1.2, 0.8, 0.9)]
    assert run_on(ours, losses) == run_on(paddles, losses)
