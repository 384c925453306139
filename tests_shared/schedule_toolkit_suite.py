"""Megatron-LM's schedule toolkit through a real Trainer: ``lr_warmup_init`` and
``"sequential"`` set in ``lr_scheduler_kwargs`` (from Python and from a JSON
config file), and a sequential run resumed mid-stage.

A suite collects these with ``from schedule_toolkit_suite import *`` and its
``kit`` fixture. The expected lrs are written out here from the definitions
(Megatron's warmup ``init + (peak - init) * s / W``; torch ``SequentialLR``:
each stage from its own step 0 at its milestone).
"""
from __future__ import annotations

import json
import math

import pytest
from trainer_checks import assert_same_snapshots, checkpointed_run, make_recorder, snapshot


def test_lr_warmup_init_in_lr_scheduler_kwargs_sets_each_step_s_lr(kit, tmp_path):
    peak, init, warmup, steps = 2e-3, 5e-4, 4, 10
    recorder = make_recorder(kit)
    args = kit.args(tmp_path, max_steps=steps, learning_rate=peak, lr_scheduler_type="cosine", warmup_steps=warmup,
                    lr_scheduler_kwargs={"lr_warmup_init": init})
    kit.trainer(args, callbacks=[recorder], layerwise_decay=0.8).train()
    expected = [init + (peak - init) * s / warmup if s < warmup
                else peak * 0.5 * (1 + math.cos(math.pi * (s - warmup) / (steps - warmup))) for s in range(steps)]
    assert recorder.lrs == pytest.approx(expected, rel=1e-6, abs=1e-12)


def test_a_config_file_runs_inverse_sqrt_then_cosine(kit, tmp_path):
    peak, warmup, first, steps = 2e-3, 2, 5, 10
    config = tmp_path / "config.json"
    config.write_text(json.dumps({
        "output_dir": str(tmp_path / "out"), "report_to": "none", "disable_tqdm": True, "save_strategy": "no",
        "per_device_train_batch_size": 8, "max_steps": steps, "learning_rate": peak, "warmup_steps": warmup,
        "lr_scheduler_type": "sequential",
        "lr_scheduler_kwargs": {"stages": [{"name": "inverse_sqrt", "num_steps": first},
                                           {"name": "cosine", "learning_rate": peak / 2}]},
    }))
    (args,) = kit.parser_class(kit.arguments_class).parse_json_file(str(config))
    recorder = make_recorder(kit)
    kit.trainer(args, callbacks=[recorder]).train()

    def expected(s):
        if s < first:  # inverse_sqrt with its warmup
            return peak * s / warmup if s < warmup else peak * math.sqrt(warmup / s)
        k = s - first  # the cosine stage's own step
        return peak / 2 * 0.5 * (1 + math.cos(math.pi * k / (steps - first)))

    assert recorder.lrs == pytest.approx([expected(s) for s in range(steps)], rel=1e-6, abs=1e-12)


SEQUENTIAL_RUN = dict(learning_rate=4e-3, warmup_steps=1, lr_scheduler_type="sequential",
                      lr_scheduler_kwargs={"stages": [{"name": "linear", "num_steps": 2},
                                                      {"name": "cosine", "learning_rate": 2e-3}]},
                      weight_decay=0.1, weight_decay_end=0.6, weight_decay_incr_style="linear",
                      layerwise_decay=0.6, ema_decay=0.8)


def test_a_sequential_run_resumed_mid_stage_ends_as_the_uninterrupted_run(kit, tmp_path):
    """Checkpoint at step 3, one step into the second stage (milestone 2)."""
    whole = checkpointed_run(kit, tmp_path / "whole", **SEQUENTIAL_RUN)
    resumed = checkpointed_run(kit, tmp_path / "resumed", resume=str(tmp_path / "whole" / "checkpoint-3"),
                               seed=99, **SEQUENTIAL_RUN)
    assert_same_snapshots(snapshot(resumed), snapshot(whole))
    assert resumed.lr_scheduler.milestones == [2] and resumed.lr_scheduler.stage_step(6) == 4
