"""The Trainer-level tests of LLRDTrainer that both integrations must pass.

A suite collects them with ``from trainer_suite import *`` and a ``kit``
fixture returning its :class:`trainer_checks.Kit`; every test runs the real
``Trainer`` of that framework. The numbers come from the formulas in
``trainer_checks``.
"""
from __future__ import annotations

import glob
import json
import math
import re
import shutil

import numpy as np
import paddle
import pytest
from trainer_checks import (
    BAD_FIELDS,
    adamw_reference,
    assert_every_field_reaches_the_trainer,
    assert_same_snapshots,
    check_ema_is_the_float64_average_of_the_weights_the_run_produced,
    check_evaluation_uses_the_average,
    check_first_step_moves_each_parameter_by_lr_times_its_ratio,
    check_save_model_writes_the_average,
    check_step_learning_rates,
    check_whole_run_against_float64_reference,
    LogLines,
    checkpointed_run,
    command_line,
    every_field,
    make_recorder,
    parameters_numpy,
    schedule_factor,
    snapshot,
    weight_decay_at,
)

import paddle_llrd
from paddle_llrd import layerwise_lr_decay
from paddle_llrd.integrations.run_state import STATE_FILE
from update_paths import cpu_flat_path

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


def test_a_run_with_the_default_max_grad_norm_takes_the_multi_tensor_step_at_every_step(kit, tmp_path):
    """The Trainer clips by default (``max_grad_norm`` 1.0, a ``ClipGradByGlobalNorm``), and the
    multi-tensor step clips itself (docs/adamwdl.rst, "The multi-tensor step")."""
    recorder = make_recorder(kit)
    args = kit.args(tmp_path, max_steps=4, layerwise_decay=0.8)
    assert args.max_grad_norm == 1.0
    kit.trainer(args, callbacks=[recorder]).train()
    assert recorder.paths == [cpu_flat_path()] * 4


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


def _hugging_face_wsd_factor(s, warmup, stable, decay, warmup_type, decay_type, min_ratio, cycles):
    """transformers' get_wsd_schedule factor at step s, written out: rise from min_ratio, stable, decay to it."""
    if s < warmup:
        p = s / max(1, warmup)
        rise = {"linear": p, "cosine": 0.5 * (1.0 - math.cos(math.pi * p)), "1-sqrt": 1.0 - math.sqrt(1.0 - p)}
        return max(0.0, rise[warmup_type] * (1.0 - min_ratio) + min_ratio)
    if s < warmup + stable:
        return 1.0
    if s < warmup + stable + decay:
        p = (s - warmup - stable) / max(1, decay)
        left = {"linear": 1.0 - p, "cosine": 0.5 * (1.0 + math.cos(math.pi * cycles * 2.0 * p)),
                "1-sqrt": 1.0 - math.sqrt(p)}
        return max(0.0, left[decay_type] * (1.0 - min_ratio) + min_ratio)
    return min_ratio


@pytest.mark.parametrize("warmup_type,decay_type", [("cosine", "1-sqrt"), ("1-sqrt", "cosine"), ("linear", "linear")])
def test_a_hugging_face_wsd_config_trains_with_hugging_faces_numbers(kit, tmp_path, warmup_type, decay_type):
    """A transformers user's warmup_stable_decay config, as written for Hugging Face's Trainer (docs/schedules.rst,
    "warmup_stable_decay"): the warmup from min_lr_ratio, its warmup and decay types, num_stable_steps."""
    lr, warmup, stable, decay, steps = 2e-3, 3, 2, 5, 10
    kwargs = {"warmup_type": warmup_type, "decay_type": decay_type, "num_stable_steps": stable,
              "num_decay_steps": decay, "min_lr_ratio": 0.1}
    recorder = make_recorder(kit)
    args = kit.args(tmp_path, max_steps=steps, learning_rate=lr, warmup_steps=warmup,
                    lr_scheduler_type="warmup_stable_decay", lr_scheduler_kwargs=kwargs)
    kit.trainer(args, callbacks=[recorder], layerwise_decay=0.8).train()
    expected = [lr * _hugging_face_wsd_factor(s, warmup, stable, decay, warmup_type, decay_type, 0.1, 0.5)
                for s in range(steps)]
    assert recorder.lrs == pytest.approx(expected, rel=1e-6, abs=1e-12)
    assert recorder.lrs[0] == pytest.approx(0.1 * lr)


def test_a_wsd_config_mixing_hugging_faces_and_megatrons_keywords_is_refused_naming_both(kit, tmp_path):
    args = kit.args(tmp_path, max_steps=4, warmup_steps=1, lr_scheduler_type="warmup_stable_decay",
                    lr_scheduler_kwargs={"warmup_type": "cosine", "decay_style": "linear", "num_decay_steps": 2})
    with pytest.raises(ValueError, match="`warmup_type`.*`decay_style`"):
        kit.trainer(args).create_optimizer_and_scheduler(num_training_steps=4)


def test_lr_warmup_init_from_lr_scheduler_kwargs_starts_the_warmup_there(kit, tmp_path):
    """Megatron-LM's warmup from an initial lr, from a config: init + (peak - init) * s / W, then the schedule."""
    lr, init, warmup, steps = 2e-3, 5e-4, 4, 10
    recorder = make_recorder(kit)
    args = kit.args(tmp_path, max_steps=steps, learning_rate=lr, warmup_steps=warmup, lr_scheduler_type="linear",
                    lr_scheduler_kwargs={"lr_warmup_init": "5e-4"})
    assert args.lr_scheduler_kwargs == {"lr_warmup_init": 5e-4}
    kit.trainer(args, callbacks=[recorder], layerwise_decay=0.8).train()
    expected = [init + (lr - init) * s / warmup if s < warmup else lr * schedule_factor("linear", s, warmup, steps)
                for s in range(steps)]
    assert recorder.lrs == pytest.approx(expected, rel=1e-6, abs=1e-12)


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


def test_reduce_lr_on_plateau_is_stepped_on_the_eval_metric_with_the_layer_ratios_kept(kit, tmp_path):
    """"reduce_lr_on_plateau" from the registry: each step's lr is that of Paddle's ReduceOnPlateau fed the eval losses
    of the evaluations before it (not stepped per optimizer step), and every
    parameter follows a float64 AdamW at that lr times its layer ratio."""
    steps, lr, decay = 8, 5e-3, 0.5
    # an evaluation counts as better only when 50% below the best: every one after the first lowers the lr
    options = {"factor": 0.5, "patience": 0, "threshold": 0.5}
    evaluations = []

    class EvaluationRecorder(kit.callback_class):
        def on_evaluate(self, args, state, control, metrics=None, **kwargs):
            evaluations.append((state.global_step, metrics["eval_loss"]))

    model = kit.make_model()
    initial = parameters_numpy(model)
    recorder = make_recorder(kit)
    args = kit.args(tmp_path, max_steps=steps, learning_rate=lr, lr_scheduler_type="reduce_lr_on_plateau",
                    lr_scheduler_kwargs=options, evaluation_strategy="steps", eval_steps=2, layerwise_decay=decay,
                    weight_decay=0.0)
    kit.trainer(args, model=model, callbacks=[recorder, EvaluationRecorder()], eval_dataset=kit.make_dataset()).train()
    assert [step for step, _ in evaluations] == [2, 4, 6, 8]
    reference = paddle.optimizer.lr.ReduceOnPlateau(lr, **options)
    pending, expected = list(evaluations), []
    for step in range(steps):  # step s runs after the evaluations at global steps <= s
        while pending and pending[0][0] <= step:
            reference.step(pending.pop(0)[1])
        expected.append(reference.last_lr)
    assert recorder.lrs == pytest.approx(expected, rel=1e-12)
    assert sorted(set(expected), reverse=True) == [lr, lr / 2, lr / 4]
    trajectory = adamw_reference(initial, recorder.before, recorder.lrs, [0.0] * steps,
                                 lambda name: kit.expected_ratio(name, decay, kit.n_layers),
                                 beta1=0.9, beta2=0.999, eps=1e-8, clip_norm=args.max_grad_norm)
    for t, produced in enumerate(recorder.after):
        for name, value in produced.items():
            np.testing.assert_allclose(value, trajectory[t][name], rtol=1e-5, atol=1e-6, err_msg=f"{name} step {t}")


def test_a_run_with_reduce_lr_on_plateau_resumes_as_the_uninterrupted_run(kit, tmp_path):
    """The plateau's state (best metric, bad evaluations, reduced lr) comes back from the checkpoint (taken
    mid-epoch: PaddleNLP 2.8.1 resumed at an epoch boundary does not repeat the uninterrupted run, with any
    schedule)."""
    options = {"factor": 0.5, "patience": 0, "threshold": 0.5}

    def run(output_dir, resume=None):
        recorder = make_recorder(kit)
        with paddle.utils.unique_name.guard():
            args = kit.args(output_dir, max_steps=6, learning_rate=5e-3, lr_scheduler_type="reduce_lr_on_plateau",
                            lr_scheduler_kwargs=options, evaluation_strategy="steps", eval_steps=2,
                            save_strategy="steps", save_steps=3, layerwise_decay=0.5)
            trainer = kit.trainer(args, model=kit.make_model(seed=7 if resume is None else 99),
                                  callbacks=[recorder], eval_dataset=kit.make_dataset())
            trainer.train(resume_from_checkpoint=resume)
        return recorder.lrs, parameters_numpy(trainer.model)

    whole_lrs, whole_weights = run(tmp_path / "whole")
    assert len(set(whole_lrs[3:])) == 2  # the lr is lowered after the resume point too
    resumed_lrs, resumed_weights = run(tmp_path / "resumed", resume=str(tmp_path / "whole" / "checkpoint-3"))
    assert resumed_lrs == whole_lrs[3:]
    for name, value in whole_weights.items():
        np.testing.assert_array_equal(resumed_weights[name], value, err_msg=name)


def test_reduce_lr_on_plateau_refuses_a_mode_against_greater_is_better(kit, tmp_path):
    args = kit.args(tmp_path, lr_scheduler_type="reduce_lr_on_plateau", metric_for_best_model="accuracy",
                    evaluation_strategy="steps", eval_steps=2)
    trainer = kit.trainer(args)
    with pytest.raises(ValueError, match=r"eval_accuracy \(metric_for_best_model\) stops falling \(mode='min'\) "
                                         r"but greater_is_better=True: set lr_scheduler_kwargs \{'mode': 'max'\}"):
        trainer.create_optimizer_and_scheduler(num_training_steps=4)


# --- training logs -------------------------------------------------------------------------------------
def visualdl_scalars(logging_dir) -> dict:
    """Every scalar of the run's VisualDL log, read back with VisualDL's own LogReader: tag -> [(step, value)]."""
    from visualdl import LogReader

    (path,) = glob.glob(f"{logging_dir}/**/vdlrecords*", recursive=True)
    reader = LogReader(file_path=path)
    return {tag: [(record.id, record.value) for record in reader.get_data("scalar", tag)]
            for tag in reader.get_tags()["scalar"]}


def group_ratios(decay: float, n_layers: int) -> dict:
    """The layer groups and their ratios written out: embeddings d**(L+1), block i d**(L-i), head 1."""
    return {"embeddings": decay ** (n_layers + 1), **{f"layer_{i}": decay ** (n_layers - i) for i in range(n_layers)},
            "head": 1.0}


def test_the_default_report_to_logs_each_groups_lr_the_weight_decay_and_grad_norms_to_visualdl(kit, tmp_path):
    """With the framework's default report_to (VisualDL): every logging step
    writes the framework's learning_rate and learning_rate/<group> for the
    same schedule step (the coming one: the framework reads learning_rate
    after the schedule has stepped), each group's the schedule's formula times
    the group's ratio, so learning_rate/<group> = learning_rate * ratio; the
    scheduled weight decay of that step too; and the norms of the gradients
    the step just taken used, before clipping; the EMA's evaluation is logged
    as eval/ema_loss beside the trained weights' eval/loss; one summary line
    opens the run."""
    decay, steps, warmup, lr, clip = 0.7, 6, 2, 4e-3, 0.05
    recorder = make_recorder(kit)
    args = kit.args(tmp_path, max_steps=steps, learning_rate=lr, warmup_steps=warmup, lr_scheduler_type="linear",
                    layerwise_decay=decay, weight_decay=0.1, weight_decay_end=0.4, weight_decay_incr_style="linear",
                    logging_steps=2, max_grad_norm=clip, ema_decay=0.5, evaluation_strategy="steps", eval_steps=3)
    assert "visualdl" in args.report_to  # the framework's default, left alone
    with LogLines(kit) as lines:
        kit.trainer(args, callbacks=[recorder], eval_dataset=kit.make_dataset()).train()
    scalars = visualdl_scalars(args.logging_dir)
    logged = [2, 4, 6]  # global steps g: g steps taken, the schedule at its step g (0-based), the coming one
    schedule_lrs = [lr * schedule_factor("linear", step, warmup, steps) for step in logged]
    # the framework's learning_rate: that lr printed with four significant digits
    assert scalars["train/learning_rate"] == [(step, pytest.approx(value, rel=5e-4, abs=1e-12))
                                              for step, value in zip(logged, schedule_lrs)]
    framework_lrs = [value for _, value in scalars["train/learning_rate"]]
    ratios = group_ratios(decay, kit.n_layers)
    for group, ratio in ratios.items():
        got = scalars[f"train/learning_rate/{group}"]
        assert [step for step, _ in got] == logged, group
        assert [value for _, value in got] == pytest.approx([value * ratio for value in schedule_lrs], rel=1e-6), group
        assert [value for _, value in got] == pytest.approx([value * ratio for value in framework_lrs],
                                                            rel=5e-4, abs=1e-12), group
    wds = scalars["train/weight_decay"]
    assert wds == [(step, pytest.approx(weight_decay_at(step, 0.1, 0.4, steps, "linear"), rel=1e-6))
                   for step in logged]

    group_of = {ratio: group for group, ratio in ratios.items()}
    for step in logged:
        squares = dict.fromkeys(ratios, 0.0)
        for name, (_, grad) in recorder.before[step - 1].items():
            squares[group_of[kit.expected_ratio(name, decay, kit.n_layers)]] += float(np.sum(grad**2))
        total = math.sqrt(sum(squares.values()))
        assert total > clip  # clipping was active: these are the norms before it
        assert dict(scalars["train/grad_norm"])[step] == pytest.approx(total, rel=1e-5)
        for group, square in squares.items():
            assert dict(scalars[f"train/grad_norm/{group}"])[step] == pytest.approx(math.sqrt(square), rel=1e-5), group

    assert [step for step, _ in scalars["eval/loss"]] == [step for step, _ in scalars["eval/ema_loss"]] == [3, 6]
    assert all(abs(a - b) > 1e-6 for (_, a), (_, b) in zip(scalars["eval/loss"], scalars["eval/ema_loss"]))
    L = kit.n_layers
    assert L == 2  # every group is listed: the embeddings, both blocks and the head
    summary = (f"paddle_llrd: layerwise_decay=0.7 over L=2 blocks (lr ratios: embeddings {decay ** 3:.4g}, "
               f"layer_0 {decay ** 2:.4g}, layer_1 {decay:.4g}, head 1); lr_scheduler_type=linear; "
               "weight_decay 0.1 -> 0.4 (linear); ema_decay=0.5")
    assert [line for line in lines if line.startswith("paddle_llrd:")] == [summary]
    # the log lines carry the same numbers as VisualDL
    head_lrs = [float(found) for line in lines for found in re.findall(r"learning_rate/head: ([0-9.e+-]+)", line)]
    assert head_lrs == pytest.approx([value for _, value in scalars["train/learning_rate/head"]], rel=1e-6)


def test_log_grad_norms_off_leaves_the_norms_out(kit, tmp_path):
    args = kit.args(tmp_path, max_steps=2, log_grad_norms=False, layerwise_decay=0.5)
    kit.trainer(args).train()
    tags = visualdl_scalars(args.logging_dir)
    assert not any(tag.startswith("train/grad_norm") for tag in tags)
    assert "train/learning_rate/head" in tags and "train/weight_decay" not in tags  # no weight-decay schedule


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


# --- config files and command lines --------------------------------------------------------------------
QUIET_FILE_SETTINGS = {"disable_tqdm": True, "save_strategy": "no", "per_device_train_batch_size": 8}


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


def test_numeric_strings_from_a_yaml_file_become_numbers_when_the_arguments_are_built(kit, tmp_path):
    """PyYAML reads ``2e-1`` (no dot) as a string; so may a hand-built dict."""
    args = kit.args(tmp_path, learning_rate="2e-1", max_steps="1e1", layerwise_decay="0.8", ema_decay="9e-1",
                    lr_scheduler_type="warmup_stable_decay",
                    lr_scheduler_kwargs={"min_lr_ratio": "2e-1", "num_decay_steps": "3", "decay_style": "linear"})
    assert (args.learning_rate, args.max_steps, args.layerwise_decay, args.ema_decay) == (0.2, 10, 0.8, 0.9)
    assert args.lr_scheduler_kwargs == {"min_lr_ratio": 0.2, "num_decay_steps": 3, "decay_style": "linear"}
    assert type(args.max_steps) is int and type(args.lr_scheduler_kwargs["num_decay_steps"]) is int


def test_a_schedule_added_with_register_scheduler_has_its_own_keys_checked(kit, tmp_path):
    def get_stepped_schedule(learning_rate, num_warmup_steps, step_size: int = 2, gamma: float = 0.5, last_epoch=-1):
        return paddle.optimizer.lr.StepDecay(learning_rate, step_size, gamma, last_epoch)

    paddle_llrd.register_scheduler("test-stepped", get_stepped_schedule)
    try:
        args = kit.args(tmp_path, lr_scheduler_type="test-stepped", lr_scheduler_kwargs={"gamma": "2.5e-1"})
        assert args.lr_scheduler_kwargs == {"gamma": 0.25}
        with pytest.raises(ValueError, match="'gama', which lr_scheduler_type='test-stepped' does not take; "
                                             "valid keys: gamma, step_size"):
            kit.args(tmp_path, lr_scheduler_type="test-stepped", lr_scheduler_kwargs={"gama": 0.25})
    finally:
        del paddle_llrd.TYPE_TO_SCHEDULER_FUNCTION["test-stepped"]


@pytest.mark.parametrize("field, value", [("ema_decay", "1.5"), ("layerwise_decay", "-1"), ("layer_map", "bart"),
                                          ("weight_decay_incr_style", "exp")])
def test_a_bad_value_on_the_command_line_is_refused(kit, tmp_path, field, value):
    with pytest.raises(ValueError, match=field):
        kit.parser_class(kit.arguments_class).parse_args_into_dataclasses(
            ["--output_dir", str(tmp_path), f"--{field}", value]
        )


__all__ = [name for name in dir() if name.startswith("test_")]
