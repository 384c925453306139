"""What only the PaddleFormers integration has, in real PaddleFormers 1.2.0
Trainer runs of a tiny LLaMA: the tied head's ratio, PaddleFormers' min_lr,
YAML configs, the defaults that let one CPU process resume, and its
freeze_training switch (a step that changes nothing). The tests both
integrations share run from test_llrd_trainer_suite.py."""
from __future__ import annotations

import dataclasses
import sys

import numpy as np
import pytest
import yaml  # pinned in requirements-paddleformers.txt: PaddleFormers reads YAML configs with it
from llrd_kit import KIT, llama_ratio
from paddleformers.trainer import PdArgumentParser
from paddleformers.trainer import TrainingArguments as PaddleFormersArguments
from support import N_LAYERS, make_llama
from trainer_checks import (
    LogLines,
    assert_every_field_reaches_the_trainer,
    check_first_step_moves_each_parameter_by_lr_times_its_ratio,
    check_step_learning_rates,
    every_field,
    parameters_numpy,
    schedule_factor,
)
from trainer_suite import visualdl_scalars

from paddle_llrd.integrations.paddleformers import LLRDTrainer, LLRDTrainingArguments

TIED = dataclasses.replace(KIT, make_model=lambda seed=7: make_llama(seed=seed, tie_word_embeddings=True))


def test_a_tied_head_trains_at_the_embeddings_ratio(tmp_path):
    """With tie_word_embeddings the head is model.embed_tokens.weight, one
    parameter, listed once: it gets d**(L+1), and nothing is left at ratio 1
    but the final norm."""
    model = TIED.make_model()
    names = [name for name, _ in model.named_parameters()]
    assert "lm_head.weight" not in names and "model.embed_tokens.weight" in names
    trainer, ratios = check_first_step_moves_each_parameter_by_lr_times_its_ratio(TIED, tmp_path, decay=0.5)
    assert trainer.layer_map.ratio("model.embed_tokens.weight", 0.5) == 0.5 ** (N_LAYERS + 1)
    assert ratios == {0.5 ** (N_LAYERS + 1), *(0.5 ** (N_LAYERS - i) for i in range(N_LAYERS)), 1.0}


def test_a_tied_heads_logs_and_summary_say_it_trains_at_the_embeddings_rate(tmp_path):
    """The tied head is logged under the embeddings' group, named embeddings_tied_head (lr d**(L+1) times
    the schedule's), the group left at ratio 1 is final_norm (model.norm alone), not head, and the
    summary line says which rate the head trains at."""
    decay, lr, steps, warmup = 0.5, 2e-3, 3, 1
    args = TIED.args(tmp_path, max_steps=steps, learning_rate=lr, warmup_steps=warmup, lr_scheduler_type="linear",
                     layerwise_decay=decay, logging_steps=1)
    with LogLines(TIED) as lines:
        TIED.trainer(args).train()
    L = N_LAYERS
    assert L == 2  # every group is listed
    assert [line for line in lines if line.startswith("paddle_llrd:")] == [
        f"paddle_llrd: layerwise_decay=0.5 over L=2 blocks (lr ratios: embeddings_tied_head {decay ** 3:.4g}, "
        f"layer_0 {decay ** 2:.4g}, layer_1 {decay:.4g}, final_norm 1; lm_head.weight is tied to "
        "model.embed_tokens.weight (embeddings_tied_head)); lr_scheduler_type=linear"
    ]
    scalars = visualdl_scalars(args.logging_dir)
    ratios = {"embeddings_tied_head": decay ** (L + 1), **{f"layer_{i}": decay ** (L - i) for i in range(L)},
              "final_norm": 1.0}
    assert {tag for tag in scalars if tag.startswith("train/learning_rate/")} == {
        f"train/learning_rate/{group}" for group in ratios}
    assert {tag for tag in scalars if tag.startswith("train/grad_norm/")} == {
        f"train/grad_norm/{group}" for group in ratios}
    logged = list(range(1, steps + 1))
    for group, ratio in ratios.items():
        expected = [(step, pytest.approx(lr * schedule_factor("linear", step, warmup, steps) * ratio, rel=1e-6,
                                         abs=1e-12)) for step in logged]
        assert scalars[f"train/learning_rate/{group}"] == expected, group


def test_an_untied_head_trains_at_ratio_one(tmp_path):
    assert llama_ratio("lm_head.weight", 0.5, N_LAYERS) == 1.0
    model = KIT.make_model()
    assert "lm_head.weight" in dict(model.named_parameters())
    _, ratios = check_first_step_moves_each_parameter_by_lr_times_its_ratio(KIT, tmp_path, decay=0.5)
    assert 1.0 in ratios


def test_min_lr_is_the_floor_of_the_cosine(tmp_path):
    check_step_learning_rates(KIT, tmp_path, "cosine", warmup_steps=2, min_lr=4e-4)


def test_min_lr_and_a_floor_in_lr_scheduler_kwargs_are_refused_together(tmp_path):
    with pytest.raises(ValueError, match=r"min_lr=0.0001 and lr_scheduler_kwargs \['min_lr_rate'\]"):
        KIT.args(tmp_path, lr_scheduler_type="cosine_with_min_lr", min_lr=1e-4,
                 lr_scheduler_kwargs={"min_lr_rate": 0.1})


def test_a_yaml_config_sets_every_new_field(tmp_path, monkeypatch):
    config = tmp_path / "config.yaml"
    settings = {"output_dir": str(tmp_path / "out"), "disable_tqdm": True, "per_device_train_batch_size": 8,
                **every_field(KIT)}
    config.write_text(yaml.safe_dump(settings))
    monkeypatch.setattr(sys, "argv", ["finetune.py", str(config)])
    (args,) = PdArgumentParser(LLRDTrainingArguments).parse_yaml_file_and_cmd_lines()
    assert_every_field_reaches_the_trainer(KIT, args)


def test_defaults_let_one_cpu_process_train_and_resume(tmp_path):
    """PaddleFormers' own defaults refuse to run on a CPU (amp_master_grad)
    and cannot resume in one process (flex_checkpoint)."""
    with pytest.raises(ValueError, match="amp_master_grad"):
        PaddleFormersArguments(output_dir=str(tmp_path))
    for args in (LLRDTrainingArguments(output_dir=str(tmp_path)),
                 PdArgumentParser(LLRDTrainingArguments).parse_args_into_dataclasses(["--output_dir", str(tmp_path)])[0]):
        assert args.save_checkpoint_format == args.load_checkpoint_format == "unified_checkpoint"
        assert args.amp_master_grad is False
    chosen = LLRDTrainingArguments(output_dir=str(tmp_path), save_checkpoint_format="sharding_io",
                                   load_checkpoint_format="sharding_io", amp_master_grad=False)
    assert (chosen.save_checkpoint_format, chosen.load_checkpoint_format) == ("sharding_io", "sharding_io")


def test_a_step_that_changes_nothing_leaves_the_ema_and_the_weight_decay_schedule(tmp_path):
    """freeze_training skips every optimizer step (PaddleFormers' debugging switch)."""
    model = KIT.make_model()
    before = parameters_numpy(model)
    args = KIT.args(tmp_path, max_steps=3, ema_decay=0.5, weight_decay=0.0, weight_decay_end=0.1,
                    weight_decay_incr_style="linear", freeze_training=True)
    trainer = LLRDTrainer(model=model, args=args, train_dataset=KIT.make_dataset())
    trainer.train()
    assert trainer.state.global_step == 3
    assert trainer.ema.num_updates == 0
    assert trainer.optimizer.weight_decay_schedule.current_step == 0
    for name, value in parameters_numpy(model).items():
        np.testing.assert_array_equal(value, before[name], err_msg=name)
