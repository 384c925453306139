"""LLRDTrainer in real PaddleNLP 2.8.1 Trainer runs of a tiny BERT classifier:
what only the PaddleNLP integration has (its constructor keywords with
PaddleNLP's own ``TrainingArguments``, checkpoints shared with PaddleNLP's
``Trainer``, its log history). The tests both integrations share are in
tests_shared/trainer_suite.py (collected by test_llrd_trainer_suite.py).

The numbers are checked against formulas written out here: the schedules'
closed forms, Adam's first-step size ``lr * ratio`` (ratios from
``support.expected_ratio``, through tests_shared/trainer_checks.py) and ``-lr * weight_decay * p`` for weight decay.
"""
from __future__ import annotations

import dataclasses
import glob
import math

import numpy as np
import paddle
import pytest
from paddlenlp.trainer import PdArgumentParser, Trainer, TrainingArguments
from support import KIT, N_LAYERS, make_args, make_bert, make_dataset
from trainer_checks import check_first_step_moves_each_parameter_by_lr_times_its_ratio, make_recorder, parameters_numpy

import paddle_llrd
from paddle_llrd import CheckpointMatchWarning
from paddle_llrd.integrations.paddlenlp import (
    CheckpointResumeError,
    LLRDTrainer,
    LLRDTrainingArguments,
    no_decay_parameter_names,
)


def logged_learning_rates(trainer):
    return {record["step"]: record["learning_rate"] for record in trainer.state.log_history if "loss" in record}


# --- schedules beyond the fields of PaddleNLP's TrainingArguments -----------------------------------
def test_a_registered_schedule_needs_llrd_training_arguments(tmp_path):
    """PaddleNLP's own arguments refuse every name but its five (the shared
    suite trains with a registered schedule through LLRDTrainingArguments)."""
    from paddle.optimizer.lr import LambdaDecay

    paddle_llrd.register_scheduler("test-halving", lambda learning_rate, last_epoch=-1: LambdaDecay(
        learning_rate, lambda s: 0.5**s, last_epoch))
    try:
        with pytest.raises(ValueError, match="not a valid SchedulerType"):
            make_args(tmp_path, lr_scheduler_type="test-halving")
        args = make_args(tmp_path, args_class=LLRDTrainingArguments, lr_scheduler_type="test-halving")
        assert args.lr_scheduler_type == "test-halving"
    finally:
        del paddle_llrd.TYPE_TO_SCHEDULER_FUNCTION["test-halving"]


QUIET_COMMAND_LINE = ["--per_device_train_batch_size", "8", "--logging_steps", "1", "--save_strategy", "no",
                      "--disable_tqdm", "true", "--seed", "11"]


def test_lr_scheduler_kwargs_from_the_command_line_win_over_the_fields(tmp_path):
    """A JSON object on the command line; its num_cycles=2 replaces the num_cycles field's 0.5."""
    steps, lr = 8, 1e-3
    (args,) = PdArgumentParser(LLRDTrainingArguments).parse_args_into_dataclasses(
        ["--output_dir", str(tmp_path), "--max_steps", str(steps), "--learning_rate", str(lr),
         "--lr_scheduler_type", "cosine_with_restarts", "--lr_scheduler_kwargs", '{"num_cycles": 2}']
        + QUIET_COMMAND_LINE
    )
    assert args.lr_scheduler_kwargs == {"num_cycles": 2} and args.num_cycles == 0.5
    trainer = LLRDTrainer(model=make_bert(), args=args, train_dataset=make_dataset())
    trainer.train()
    # Hugging Face's hard restarts, no warmup: 0.5 * (1 + cos(pi * ((2 * s / 8) % 1))), then 0 at s = 8.
    expected = {s: lr * 0.5 * (1 + math.cos(math.pi * ((2 * s / steps) % 1.0))) for s in range(1, steps)}
    expected[steps] = 0.0
    assert logged_learning_rates(trainer) == pytest.approx(expected, rel=6e-4, abs=1e-12)


# --- layer decay ---------------------------------------------------------------------------------
@pytest.mark.parametrize("n_layers", [None, 4])
def test_the_keywords_give_each_parameter_its_ratio_with_paddlenlps_own_arguments(tmp_path, n_layers):
    plain_arguments = dataclasses.replace(KIT, arguments_class=TrainingArguments)
    trainer, ratios = check_first_step_moves_each_parameter_by_lr_times_its_ratio(
        plain_arguments, tmp_path, keywords=True, n_layers=n_layers
    )
    assert trainer.n_layers == (N_LAYERS if n_layers is None else n_layers)
    assert len(ratios) == N_LAYERS + 2  # the embeddings, each encoder layer and the head


def test_a_custom_set_param_lr_fun_gives_the_ratios(tmp_path):
    calls = []

    def quarter_for_the_head(decay, name_dict, n_layers, param):
        calls.append((decay, n_layers))
        return 0.25 if name_dict[param.name].startswith("classifier.") else 1.0

    lr = 1e-2
    model = make_bert()
    before = parameters_numpy(model)
    args = make_args(
        tmp_path, max_steps=1, learning_rate=lr, lr_scheduler_type="constant", weight_decay=0.0, adam_epsilon=1e-15
    )
    LLRDTrainer(
        model=model, args=args, train_dataset=make_dataset(), layerwise_decay=0.5, set_param_lr_fun=quarter_for_the_head
    ).train()
    after = parameters_numpy(model)
    assert calls and set(calls) == {(0.5, N_LAYERS)}
    for name in ("classifier.weight", "classifier.bias", "bert.pooler.dense.weight", "bert.embeddings.word_embeddings.weight"):
        expected = 0.25 if name.startswith("classifier.") else 1.0
        assert np.max(np.abs(after[name] - before[name])) == pytest.approx(lr * expected, rel=2e-3), name


def test_embeddings_move_less_than_the_classifier_under_layer_decay(tmp_path):
    def relative_updates(decay):
        model = make_bert()
        before = parameters_numpy(model)
        args = make_args(tmp_path / str(decay), max_steps=12, learning_rate=3e-3, lr_scheduler_type="linear")
        LLRDTrainer(model=model, args=args, train_dataset=make_dataset(), layerwise_decay=decay).train()
        after = parameters_numpy(model)
        return {
            name: np.linalg.norm(after[name] - before[name]) / np.linalg.norm(before[name])
            for name in ("bert.embeddings.word_embeddings.weight", "classifier.weight")
        }

    decayed, plain = relative_updates(0.5), relative_updates(1.0)
    embeddings, classifier = "bert.embeddings.word_embeddings.weight", "classifier.weight"
    assert decayed[embeddings] < 0.5 * decayed[classifier]
    # ratio 0.5 ** 3 = 0.125 for the embeddings, 1 for the classifier
    assert decayed[embeddings] / plain[embeddings] < 0.25
    assert decayed[classifier] / plain[classifier] > 0.5


# --- which parameters decay ---------------------------------------------------------------------
def test_bias_and_norm_parameters_are_kept_out_of_weight_decay(tmp_path):
    model = make_bert()
    excluded = {name for name, param in model.named_parameters() if param.name in no_decay_parameter_names(model)}
    expected_excluded = {"bert.embeddings.layer_norm.weight", "bert.embeddings.layer_norm.bias"}
    for i in range(N_LAYERS):
        prefix = f"bert.encoder.layers.{i}."
        expected_excluded |= {prefix + p for p in ("norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias")}
        expected_excluded |= {prefix + p for p in ("self_attn.q_proj.bias", "self_attn.k_proj.bias")}
        expected_excluded |= {prefix + p for p in ("self_attn.v_proj.bias", "self_attn.out_proj.bias")}
        expected_excluded |= {prefix + p for p in ("linear1.bias", "linear2.bias")}
    expected_excluded |= {"bert.pooler.dense.bias", "classifier.bias"}
    assert excluded == expected_excluded

    # One step with and without weight decay from the same start: the
    # difference is -lr * weight_decay * p0 for decayed parameters (whatever
    # their layer ratio) and nothing for the excluded ones.
    lr, weight_decay = 1e-2, 0.5

    def one_step(wd):
        model = make_bert()
        args = make_args(
            tmp_path / str(wd), max_steps=1, learning_rate=lr, lr_scheduler_type="constant", weight_decay=wd
        )
        LLRDTrainer(model=model, args=args, train_dataset=make_dataset(), layerwise_decay=0.5).train()
        return parameters_numpy(model)

    start = parameters_numpy(make_bert())
    with_decay, without_decay = one_step(weight_decay), one_step(0.0)
    for name, p0 in start.items():
        expected = 0.0 if name in expected_excluded else -lr * weight_decay * p0
        np.testing.assert_allclose(with_decay[name] - without_decay[name], expected, rtol=0, atol=2e-7, err_msg=name)


# --- TrainingArguments that reach the optimizer ---------------------------------------------------
def test_max_grad_norm_and_fp16_o2_reach_the_optimizer(tmp_path):
    clipped = LLRDTrainer(model=make_bert(), args=make_args(tmp_path, max_grad_norm=0.3))
    clipped.create_optimizer_and_scheduler(num_training_steps=4)
    assert isinstance(clipped.optimizer._grad_clip, paddle.nn.ClipGradByGlobalNorm)
    assert clipped.optimizer._grad_clip.clip_norm == pytest.approx(0.3)
    assert clipped.optimizer._multi_precision is False

    unclipped = LLRDTrainer(model=make_bert(), args=make_args(tmp_path, max_grad_norm=0.0))
    unclipped.create_optimizer_and_scheduler(num_training_steps=4)
    assert unclipped.optimizer._grad_clip is None

    # On a CPU PaddleNLP's Trainer cannot run an fp16 step (its GradScaler is
    # disabled there), but it builds the optimizer: O2 means master weights.
    pure_fp16 = LLRDTrainer(model=make_bert(), args=make_args(tmp_path, fp16=True, fp16_opt_level="O2"))
    pure_fp16.create_optimizer_and_scheduler(num_training_steps=4)
    assert isinstance(pure_fp16.optimizer, paddle_llrd.AdamWDL)
    assert pure_fp16.optimizer._multi_precision is True


def checkpointed_run(trainer_class, output_dir, resume=None, layerwise_decay=1.0, **overrides):
    """Six steps saving a checkpoint every three; the parameters at the end.

    Optimizer checkpoints are keyed by generated names such as
    "linear_3.w_0_moment1_0"; a fresh name counter for each run gives the
    second run the names of the first, as a new process would."""
    extra = {} if trainer_class is Trainer else {"layerwise_decay": layerwise_decay}
    if trainer_class is Trainer:
        # PaddleNLP 2.8.1's own Trainer cannot run with its default report_to (VisualDL's add_hparams fails on
        # a bool field: "Expected an int, got a boolean"); LLRDTrainer mends that, PaddleNLP's Trainer does not.
        overrides.setdefault("report_to", ["none"])
    with paddle.utils.unique_name.guard():
        model = make_bert()
        args = make_args(output_dir, max_steps=6, learning_rate=4e-3, warmup_steps=2, weight_decay=0.1,
                         save_strategy="steps", save_steps=3, **overrides)
        trainer_class(model=model, args=args, train_dataset=make_dataset(), **extra).train(
            resume_from_checkpoint=resume
        )
    return parameters_numpy(model)


def test_resuming_from_a_checkpoint_gives_the_uninterrupted_run(tmp_path):
    settings = dict(layerwise_decay=0.6, lr_scheduler_type="cosine")
    uninterrupted = checkpointed_run(LLRDTrainer, tmp_path / "whole", **settings)
    resumed = checkpointed_run(LLRDTrainer, tmp_path / "resumed", resume=str(tmp_path / "whole" / "checkpoint-3"),
                               **settings)
    for name, value in uninterrupted.items():
        np.testing.assert_allclose(resumed[name], value, rtol=1e-5, atol=1e-7, err_msg=name)


@pytest.mark.parametrize("first, second", [(Trainer, LLRDTrainer), (LLRDTrainer, Trainer)])
def test_checkpoints_move_between_paddlenlp_trainer_and_llrd_trainer(tmp_path, first, second):
    """Without layer decay AdamWDL is AdamW: a run resumed across the two
    trainers ends where PaddleNLP's own uninterrupted run ends. A checkpoint of
    PaddleNLP's Trainer records no paddle_llrd settings: LLRDTrainer resumes it
    when told to (resume_with_new_settings), and says so by class."""
    reference = checkpointed_run(Trainer, tmp_path / "reference")
    checkpointed_run(first, tmp_path / "first")
    checkpoint = str(tmp_path / "first" / "checkpoint-3")
    if second is LLRDTrainer:
        with pytest.raises(CheckpointResumeError, match=f"cannot resume {checkpoint}: it has no paddle_llrd_manifest"):
            checkpointed_run(second, tmp_path / "refused", resume=checkpoint)
        with pytest.warns(CheckpointMatchWarning, match="with this run's settings although it has no"):
            resumed = checkpointed_run(second, tmp_path / "second", resume=checkpoint,
                                       args_class=LLRDTrainingArguments, resume_with_new_settings=True)
    else:
        resumed = checkpointed_run(second, tmp_path / "second", resume=checkpoint)
    for name, value in reference.items():
        np.testing.assert_allclose(resumed[name], value, rtol=1e-5, atol=1e-6, err_msg=name)


def test_the_average_and_the_weight_decay_ramp_count_optimizer_steps_not_micro_batches(tmp_path):
    """(PaddleFormers 1.2.0 cannot accumulate gradients on a CPU: its Trainer
    calls paddle.device.synchronize(), which raises there, so this runs here only.)"""
    recorder = make_recorder(KIT)
    args = KIT.args(tmp_path, max_steps=3, gradient_accumulation_steps=2, per_device_train_batch_size=4,
                    ema_decay=0.5, weight_decay=0.0, weight_decay_end=0.3, weight_decay_incr_style="linear")
    trainer = KIT.trainer(args, callbacks=[recorder])
    trainer.train()
    assert len(recorder.after) == trainer.ema.num_updates == trainer.optimizer.weight_decay_schedule.current_step == 3
    assert trainer.optimizer._coeff == pytest.approx(0.3)  # the end of the ramp, reached at step 3


def test_paddlenlps_default_report_to_trains_with_its_own_arguments_and_records_the_hyperparameters(tmp_path):
    """PaddleNLP's plain Trainer fails here at train() (VisualDL's add_hparams refuses its bool fields);
    LLRDTrainer with PaddleNLP's own TrainingArguments trains and writes them as ints."""
    from visualdl import LogReader

    def hyperparameters(args):
        (path,) = glob.glob(f"{args.logging_dir}/**/vdlrecords*", recursive=True)
        (record,) = LogReader(file_path=path).get_data("hyper_parameters", "hparam")
        return {info.name: info for info in record.hparam.hparamInfos}

    args = make_args(tmp_path / "plain", max_steps=1)
    assert "visualdl" in args.report_to and isinstance(args.disable_tqdm, bool)
    with pytest.raises(TypeError, match="Expected an int, got a boolean"):
        Trainer(model=make_bert(), args=args, train_dataset=make_dataset()).train()
    args = make_args(tmp_path / "llrd", max_steps=1)
    LLRDTrainer(model=make_bert(), args=args, train_dataset=make_dataset(), layerwise_decay=0.8).train()
    recorded = hyperparameters(args)
    assert recorded["disable_tqdm"].int_value == 1 and recorded["max_steps"].int_value == 1


# --- bad input -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "keywords, error, message",
    [
        (dict(layerwise_decay="0.8"), TypeError, "layerwise_decay"),
        (dict(layerwise_decay=True), TypeError, "layerwise_decay"),
        (dict(layerwise_decay=0.0), ValueError, "layerwise_decay"),
        (dict(layerwise_decay=float("nan")), ValueError, "layerwise_decay"),
        (dict(n_layers=2.0), TypeError, "n_layers"),
        (dict(n_layers=0), ValueError, "n_layers"),
        (dict(set_param_lr_fun="layerwise"), TypeError, "set_param_lr_fun"),
    ],
)
def test_bad_keywords_are_refused(tmp_path, keywords, error, message):
    with pytest.raises(error, match=message):
        LLRDTrainer(model=make_bert(), args=make_args(tmp_path), **keywords)


def test_integer_layerwise_decay_is_accepted_as_float(tmp_path):
    trainer = LLRDTrainer(model=make_bert(), args=make_args(tmp_path), layerwise_decay=1)
    assert trainer.layerwise_decay == 1.0 and isinstance(trainer.layerwise_decay, float)


def test_a_model_without_blocks_needs_a_layer_map_only_for_layer_decay(tmp_path):
    class Plain(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.linear = paddle.nn.Linear(4, 2)

        def forward(self, x):
            return self.linear(x)

    with pytest.raises(ValueError, match="layer_map='auto': no parameter name has a block index"):
        LLRDTrainer(model=Plain(), args=make_args(tmp_path), layerwise_decay=0.5)
    assert LLRDTrainer(model=Plain(), args=make_args(tmp_path)).n_layers == 0
    assert LLRDTrainer(model=Plain(), args=make_args(tmp_path), n_layers=3).n_layers == 3


def test_without_a_config_n_layers_is_counted_from_the_names_the_layer_map_finds(tmp_path):
    class Stack(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.stem = paddle.nn.Linear(4, 4)
            self.stages = paddle.nn.LayerList([paddle.nn.Linear(4, 4) for _ in range(3)])
            self.head = paddle.nn.Linear(4, 2)

    args = make_args(tmp_path, args_class=LLRDTrainingArguments, layerwise_decay=0.5, layer_map=r"stages\.(\d+)\.")
    trainer = LLRDTrainer(model=Stack(), args=args)
    assert trainer.n_layers == 3
    ratios = {name: trainer.layer_map.ratio(name, 0.5) for name in ("stages.0.weight", "stages.2.bias", "head.weight")}
    assert ratios == {"stages.0.weight": 0.5**3, "stages.2.bias": 0.5, "head.weight": 1.0}
    with pytest.raises(ValueError, match="`n_layers`=2 but the model has a block with index 2"):
        LLRDTrainer(model=Stack(), args=args, n_layers=2)


def test_another_optim_is_refused(tmp_path):
    with pytest.raises(ValueError, match="optim.*adafactor"):
        LLRDTrainer(model=make_bert(), args=make_args(tmp_path, optim="adafactor"))


def test_paddlenlp_trainer_is_the_base_class():
    assert issubclass(LLRDTrainer, Trainer)
    assert issubclass(LLRDTrainingArguments, TrainingArguments)
