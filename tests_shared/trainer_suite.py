"""The Trainer-level tests of LLRDTrainer that both integrations must pass.

A suite collects them with ``from trainer_suite import *`` and a ``kit``
fixture returning its :class:`trainer_checks.Kit`; every test runs the real
``Trainer`` of that framework. The numbers come from the formulas in
``trainer_checks``.
"""
from __future__ import annotations

import json
import re
import shutil

import numpy as np
import paddle
import pytest
from trainer_checks import (
    BAD_FIELDS,
    assert_every_field_reaches_the_trainer,
    assert_same_snapshots,
    check_ema_is_the_float64_average_of_the_weights_the_run_produced,
    check_evaluation_uses_the_average,
    check_first_step_moves_each_parameter_by_lr_times_its_ratio,
    check_save_model_writes_the_average,
    check_step_learning_rates,
    check_whole_run_against_float64_reference,
    checkpointed_run,
    command_line,
    every_field,
    make_recorder,
    snapshot,
)

import paddle_llrd
from paddle_llrd import layerwise_lr_decay
from paddle_llrd.integrations._trainer import STATE_FILE

# --- layer decay from the arguments ---------------------------------------------------------------
def test_layerwise_decay_field_gives_each_parameter_its_ratio(kit, tmp_path):
    trainer, ratios = check_first_step_moves_each_parameter_by_lr_times_its_ratio(kit, tmp_path)
    # the embeddings, each block and the head: n_layers + 2 distinct ratios
    assert len(ratios) == kit.n_layers + 2
    assert trainer.n_layers == kit.n_layers


@pytest.mark.parametrize("by", ["family", "regex"])
def test_layer_map_field_finds_the_blocks(kit, tmp_path, by):
    layer_map = kit.family if by == "family" else kit.block_regex
    trainer, _ = check_first_step_moves_each_parameter_by_lr_times_its_ratio(kit, tmp_path, layer_map=layer_map)
    assert trainer.layer_map.n_layers == kit.n_layers


def test_a_layer_map_that_finds_no_block_is_refused_before_training(kit, tmp_path):
    with pytest.raises(ValueError, match="layer_map='vit': no parameter name has a block index"):
        kit.trainer(kit.args(tmp_path, layerwise_decay=0.5, layer_map="vit"))
    assert kit.trainer(kit.args(tmp_path, layer_map="vit")).layerwise_decay == 1.0  # no decay: no map needed


@pytest.mark.parametrize("n_layers", [None, 4])
def test_the_constructor_keywords_give_each_parameter_its_ratio(kit, tmp_path, n_layers):
    trainer, ratios = check_first_step_moves_each_parameter_by_lr_times_its_ratio(
        kit, tmp_path, keywords=True, n_layers=n_layers
    )
    assert trainer.n_layers == (kit.n_layers if n_layers is None else n_layers)
    assert len(ratios) == kit.n_layers + 2  # the embeddings, each block and the head


def test_constructor_keywords_still_work_and_must_agree_with_the_fields(kit, tmp_path):
    trainer = kit.trainer(kit.args(tmp_path), layerwise_decay=0.5, n_layers=kit.n_layers + 2)
    assert (trainer.layerwise_decay, trainer.n_layers) == (0.5, kit.n_layers + 2)
    assert kit.trainer(kit.args(tmp_path), set_param_lr_fun=layerwise_lr_decay).set_param_lr_fun is layerwise_lr_decay
    with pytest.raises(ValueError, match="layerwise_decay is 0.5 as an LLRDTrainer keyword but 0.8"):
        kit.trainer(kit.args(tmp_path, layerwise_decay=0.8), layerwise_decay=0.5)
    with pytest.raises(ValueError, match="set_param_lr_fun.*layer_map"):
        kit.trainer(kit.args(tmp_path, layer_map=kit.family), set_param_lr_fun=layerwise_lr_decay)


def test_an_optimizer_passed_in_refuses_the_settings_it_would_ignore(kit, tmp_path):
    model = kit.make_model()
    scheduler = paddle.optimizer.lr.LambdaDecay(1e-3, lambda s: 1.0)
    optimizer = paddle.optimizer.AdamW(learning_rate=scheduler, parameters=model.parameters())
    for fields, keywords, named in [({"layerwise_decay": 0.8}, {}, "layerwise_decay"),
                                    ({"weight_decay_end": 0.1, "weight_decay_incr_style": "linear"}, {},
                                     "weight_decay_end"),
                                    ({"layer_map": kit.family}, {}, "layer_map"),
                                    ({}, {"set_param_lr_fun": layerwise_lr_decay}, "set_param_lr_fun")]:
        with pytest.raises(ValueError, match=f"{named} configure the optimizer LLRDTrainer builds"):
            kit.trainer(kit.args(tmp_path, **fields), model=model, optimizers=(optimizer, scheduler), **keywords)
    trainer = kit.trainer(kit.args(tmp_path, ema_decay=0.5), model=model, optimizers=(optimizer, scheduler))
    trainer.create_optimizer_and_scheduler(num_training_steps=4)
    assert trainer.optimizer is optimizer and trainer.lr_scheduler is scheduler and trainer.ema is not None


# --- schedules -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("style", ["linear", "cosine"])
def test_a_whole_run_follows_the_float64_reference(kit, tmp_path, style):
    """Layer decay, a warmup-stable-decay schedule and a weight-decay ramp together."""
    check_whole_run_against_float64_reference(
        kit, tmp_path, decay=0.7, schedule="warmup_stable_decay",
        schedule_options={"num_decay_steps": 3, "decay_style": "linear", "min_lr_ratio": 0.2},
        weight_decay=0.5, weight_decay_end=4.0, style=style,
    )


SCHEDULES = {
    "linear": dict(warmup_ratio=0.25),  # floor(0.25 * 10) = 2 warmup steps
    "cosine": dict(warmup_steps=3, num_cycles=0.5),
    "constant": dict(),
    "constant_with_warmup": dict(warmup_steps=4),
    "polynomial": dict(warmup_steps=2, lr_end=1e-5, power=2.0),
    "warmup_stable_decay": dict(warmup_steps=2, lr_scheduler_kwargs={"num_decay_steps": 4, "decay_style": "linear",
                                                                      "min_lr_ratio": 0.1}),
    "cosine_with_min_lr": dict(warmup_steps=2, lr_scheduler_kwargs={"min_lr_rate": 0.1}),
    "inverse_sqrt": dict(warmup_steps=3),
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_each_step_uses_the_learning_rate_of_the_named_schedule(kit, tmp_path, name):
    check_step_learning_rates(kit, tmp_path, name, **SCHEDULES[name])


def test_a_schedule_added_with_register_scheduler_drives_the_trainer(kit, tmp_path):
    from paddle.optimizer.lr import LambdaDecay

    def get_halving_schedule(learning_rate, num_warmup_steps, last_epoch=-1):
        return LambdaDecay(learning_rate, lambda s: 0.5 ** (s // max(1, num_warmup_steps)), last_epoch)

    paddle_llrd.register_scheduler("test-halving", get_halving_schedule)
    try:
        recorder = make_recorder(kit)
        args = kit.args(tmp_path, max_steps=6, learning_rate=1e-3, warmup_steps=2, lr_scheduler_type="test-halving")
        kit.trainer(args, callbacks=[recorder]).train()
    finally:
        del paddle_llrd.TYPE_TO_SCHEDULER_FUNCTION["test-halving"]
    assert recorder.lrs == pytest.approx([1e-3 * 0.5 ** (s // 2) for s in range(6)], rel=1e-12)


# --- EMA -----------------------------------------------------------------------------------------------
def test_ema_is_the_float64_average_of_the_weights_the_run_produced(kit, tmp_path):
    check_ema_is_the_float64_average_of_the_weights_the_run_produced(kit, tmp_path)


def test_evaluation_runs_with_the_average_unless_ema_eval_is_off(kit, tmp_path):
    check_evaluation_uses_the_average(kit, tmp_path)


def test_save_model_also_writes_the_averaged_model(kit, tmp_path):
    check_save_model_writes_the_average(kit, tmp_path)


def test_without_ema_decay_there_is_no_average_and_no_state_file(kit, tmp_path):
    trainer = checkpointed_run(kit, tmp_path, learning_rate=1e-3)
    assert trainer.ema is None
    assert (tmp_path / "checkpoint-3").is_dir() and not (tmp_path / "checkpoint-3" / STATE_FILE).exists()
    trainer.save_model(str(tmp_path / "final"))
    assert not (tmp_path / "final" / "ema").exists()


# --- resuming ------------------------------------------------------------------------------------------
RESUMED_RUN = dict(learning_rate=4e-3, warmup_steps=2, lr_scheduler_type="warmup_stable_decay",
                   lr_scheduler_kwargs={"num_decay_steps": 2}, weight_decay=0.1, weight_decay_end=0.6,
                   weight_decay_incr_style="linear", layerwise_decay=0.6, ema_decay=0.8)


def test_a_resumed_run_ends_as_the_uninterrupted_run(kit, tmp_path):
    """Weights, optimizer state, lr schedule, weight-decay schedule and EMA,
    from a checkpoint path and from ``resume_from_checkpoint=True``."""
    whole = snapshot(checkpointed_run(kit, tmp_path / "whole", **RESUMED_RUN))
    checkpoint = tmp_path / "whole" / "checkpoint-3"
    assert (checkpoint / STATE_FILE).is_file()
    resumed = checkpointed_run(kit, tmp_path / "resumed", resume=str(checkpoint), seed=99, **RESUMED_RUN)
    assert_same_snapshots(snapshot(resumed), whole)
    assert whole["weight_decay_step"] == whole["ema_updates"] == 6

    shutil.copytree(checkpoint, tmp_path / "latest" / "checkpoint-3")
    latest = checkpointed_run(kit, tmp_path / "latest", resume=True, seed=99, **RESUMED_RUN)
    assert_same_snapshots(snapshot(latest), whole)

    # The EMA really comes from the state file: without it the average restarts
    # at step 3, and the weight-decay schedule resumes at the global step.
    shutil.copytree(checkpoint, tmp_path / "stateless" / "checkpoint-3")
    (tmp_path / "stateless" / "checkpoint-3" / STATE_FILE).unlink()
    with pytest.warns(UserWarning) as warned:
        stateless = snapshot(checkpointed_run(kit, tmp_path / "stateless", resume=True, seed=99, **RESUMED_RUN))
    messages = " ".join(str(warning.message) for warning in warned)
    assert "has no EMA" in messages and "resumes at the trainer's global step 3" in messages
    assert stateless["ema_updates"] == 3 and stateless["weight_decay_step"] == 6
    name = next(iter(whole["ema"]))
    assert not np.allclose(stateless["ema"][name], whole["ema"][name], rtol=0, atol=1e-7)


# --- config files and command lines --------------------------------------------------------------------
QUIET_FILE_SETTINGS = {"report_to": "none", "disable_tqdm": True, "save_strategy": "no", "per_device_train_batch_size": 8}


def test_a_config_file_sets_every_new_field(kit, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"output_dir": str(tmp_path / "out"), **QUIET_FILE_SETTINGS, **every_field(kit)}))
    (args,) = kit.parser_class(kit.arguments_class).parse_json_file(str(config))
    assert_every_field_reaches_the_trainer(kit, args)


def test_a_command_line_sets_every_new_field(kit, tmp_path):
    words = ["--output_dir", str(tmp_path / "out")] + command_line({**QUIET_FILE_SETTINGS, **every_field(kit)})
    (args,) = kit.parser_class(kit.arguments_class).parse_args_into_dataclasses(words)
    assert_every_field_reaches_the_trainer(kit, args)


@pytest.mark.parametrize("fields, error, text", BAD_FIELDS, ids=[str(i) for i in range(len(BAD_FIELDS))])
def test_bad_fields_are_refused_when_the_arguments_are_built(kit, tmp_path, fields, error, text):
    with pytest.raises(error, match=re.escape(text)):
        kit.args(tmp_path, **fields)


@pytest.mark.parametrize("field, value", [("ema_decay", "1.5"), ("layerwise_decay", "-1"), ("layer_map", "bart"),
                                          ("weight_decay_incr_style", "exp")])
def test_a_bad_value_on_the_command_line_is_refused(kit, tmp_path, field, value):
    with pytest.raises(ValueError, match=field):
        kit.parser_class(kit.arguments_class).parse_args_into_dataclasses(
            ["--output_dir", str(tmp_path), "--report_to", "none", f"--{field}", value]
        )


__all__ = [name for name in dir() if name.startswith("test_")]
