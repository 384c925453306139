"""What both integrations' ``LLRDTrainer`` resumes, and what it refuses.

A suite collects these with ``from resume_suite import *`` and a ``kit``
fixture (tests_shared/trainer_checks.py). Every run is the real ``Trainer``;
a resumed run is compared with the uninterrupted one bit for bit, a refusal
by its one line and by what it left unchanged. The kills themselves
(``kill -9`` at chosen moments of a documented run) are in the integration
suites' fault tests.
"""
from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import paddle
import pytest
from trainer_checks import (
    LogLines,
    assert_same_snapshots,
    checkpointed_run,
    file_hashes,
    parameters_numpy,
    snapshot,
)

from paddle_llrd import CheckpointMatchWarning
from paddle_llrd.integrations.checkpoints import MANIFEST_FILE
from paddle_llrd.integrations.resume import CheckpointResumeError
from paddle_llrd.integrations.run_state import STATE_FILE

RESUMED_RUN = dict(learning_rate=4e-3, warmup_steps=2, lr_scheduler_type="warmup_stable_decay",
                   lr_scheduler_kwargs={"num_decay_steps": 2}, weight_decay=0.1, weight_decay_end=0.6,
                   weight_decay_incr_style="linear", layerwise_decay=0.6, ema_decay=0.8)


@pytest.fixture
def whole(kit, tmp_path):
    """The uninterrupted run (six steps, a checkpoint every three): its folder and its snapshot."""
    trainer = checkpointed_run(kit, tmp_path / "whole", **RESUMED_RUN)
    return tmp_path / "whole", snapshot(trainer)


def refused_resume(kit, output_dir: Path, checkpoint: Path, model=None, **fields) -> str:
    """The one line a run of ``fields`` into ``output_dir`` stops with when it resumes ``checkpoint``."""
    with paddle.utils.unique_name.guard():
        trainer = kit.trainer(kit.args(output_dir, **fields), model=model if model is not None else kit.make_model(seed=99))
        with pytest.raises(CheckpointResumeError) as refused:
            trainer.train(resume_from_checkpoint=str(checkpoint))
    return str(refused.value)


def test_a_resumed_run_ends_as_the_uninterrupted_run(kit, tmp_path, whole):
    """Weights, optimizer state, lr schedule, weight-decay schedule and EMA,
    from a checkpoint path and from ``resume_from_checkpoint=True``."""
    folder, uninterrupted = whole
    checkpoint = folder / "checkpoint-3"
    assert (checkpoint / STATE_FILE).is_file()
    resumed = checkpointed_run(kit, tmp_path / "resumed", resume=str(checkpoint), seed=99, **RESUMED_RUN)
    assert_same_snapshots(snapshot(resumed), uninterrupted)
    assert uninterrupted["weight_decay_step"] == uninterrupted["ema_updates"] == 6

    shutil.copytree(checkpoint, tmp_path / "latest" / "checkpoint-3")
    latest = checkpointed_run(kit, tmp_path / "latest", resume=True, seed=99, **RESUMED_RUN)
    assert_same_snapshots(snapshot(latest), uninterrupted)


def test_an_ema_state_of_another_step_is_loaded_with_a_warning_naming_both_counts(kit, tmp_path, whole):
    """checkpoint-6's weights beside checkpoint-3's EMA state (the same size: the manifest cannot tell), as
    a hand-made copy leaves them: the resumed run says by class that the average followed 3 optimizer steps
    and the weights 6."""
    folder, _ = whole
    mixed = tmp_path / "mixed" / "checkpoint-6"
    shutil.copytree(folder / "checkpoint-6", mixed)
    shutil.copyfile(folder / "checkpoint-3" / STATE_FILE, mixed / STATE_FILE)
    with pytest.warns(CheckpointMatchWarning) as caught:  # also: the longer run's weight-decay ramp is another
        with paddle.utils.unique_name.guard():
            trainer = kit.trainer(kit.args(tmp_path / "longer", max_steps=8, **RESUMED_RUN), model=kit.make_model(seed=99))
            trainer.train(resume_from_checkpoint=str(mixed))
    assert any(str(warning.message).startswith("the EMA state followed 3 optimizer steps, the weights it is loaded "
                                               "beside 6") for warning in caught), [str(w.message) for w in caught]
    assert trainer.state.global_step == 8


def framework_checkpoint(source: Path, destination: Path) -> Path:
    """``source`` as the framework's own Trainer would have saved it: no paddle_llrd files."""
    shutil.copytree(source, destination)
    for name in (STATE_FILE, MANIFEST_FILE):
        (destination / name).unlink()
    return destination


def test_a_checkpoint_without_paddle_llrds_record_stops_unless_new_settings_are_accepted(kit, tmp_path, whole):
    """A checkpoint of the framework's own Trainer (no manifest, no EMA state) stops the run in one line;
    with resume_with_new_settings it trains on, and the EMA and the weight-decay schedule, which the
    checkpoint does not hold, restart (the average at step 3, the schedule at the global step), each
    said by class."""
    folder, uninterrupted = whole
    checkpoint = framework_checkpoint(folder / "checkpoint-3", tmp_path / "plain" / "checkpoint-3")
    with pytest.raises(CheckpointResumeError) as refused:
        checkpointed_run(kit, tmp_path / "plain", resume=True, seed=99, **RESUMED_RUN)
    line = str(refused.value)
    assert "\n" not in line and line.startswith(f"cannot resume {checkpoint}: it has no {MANIFEST_FILE}"), line
    assert "fresh output_dir" in line and "resume_with_new_settings=true" in line
    assert sorted(os.listdir(tmp_path / "plain")) == ["checkpoint-3"]  # nothing trained, nothing written

    with pytest.warns(CheckpointMatchWarning) as warned:
        accepted = snapshot(checkpointed_run(kit, tmp_path / "plain", resume=True, seed=99,
                                             resume_with_new_settings=True, **RESUMED_RUN))
    messages = " ".join(str(warning.message) for warning in warned)
    assert "resuming" in messages and "with this run's settings" in messages
    assert "has no EMA" in messages and "resumes at the trainer's global step 3" in messages
    assert accepted["ema_updates"] == 3 and accepted["weight_decay_step"] == 6
    name = next(iter(uninterrupted["ema"]))
    assert not np.allclose(accepted["ema"][name], uninterrupted["ema"][name], rtol=0, atol=1e-7)


OTHER_SETTINGS = {
    "layer decay": ({"layerwise_decay": 0.9}, ["layerwise_decay 0.6 there, 0.9 here"]),
    "layer map": ({"layer_map": "FAMILY"}, ['layer_map "auto" there, "FAMILY" here']),
    "schedule": ({"lr_scheduler_type": "cosine", "lr_scheduler_kwargs": {}},
                 ['lr_scheduler_type "warmup_stable_decay" there, "cosine" here',
                  'lr_scheduler_kwargs {"num_decay_steps": 2} there, {} here']),
    "schedule options": ({"lr_scheduler_kwargs": {"num_decay_steps": 3}},
                         ['lr_scheduler_kwargs {"num_decay_steps": 2} there, {"num_decay_steps": 3} here']),
    "weight-decay schedule": ({"weight_decay_end": 0.9}, ["weight_decay_end 0.6 there, 0.9 here"]),
    "no weight-decay schedule": ({"weight_decay_end": None, "weight_decay_incr_style": "constant"},
                                 ["weight_decay 0.1 there, unset here", "weight_decay_end 0.6 there, unset here",
                                  'weight_decay_incr_style "linear" there, unset here']),
    "EMA off": ({"ema_decay": 0.0}, ["ema_decay 0.8 there, 0.0 here", "ema_warmup false there, unset here"]),
    "EMA decay": ({"ema_decay": 0.7}, ["ema_decay 0.8 there, 0.7 here"]),
}


@pytest.mark.parametrize("change", sorted(OTHER_SETTINGS))
def test_a_checkpoint_of_other_settings_stops_before_training_naming_each_difference(kit, tmp_path, whole, change):
    folder, _ = whole
    fields, differences = OTHER_SETTINGS[change]
    fields = {name: kit.family if value == "FAMILY" else value for name, value in fields.items()}
    differences = [text.replace("FAMILY", kit.family) for text in differences]
    output_dir = tmp_path / "other"
    model = kit.make_model(seed=99)
    before = parameters_numpy(model)
    line = refused_resume(kit, output_dir, folder / "checkpoint-3", model=model, max_steps=6, save_strategy="steps",
                          save_steps=3, **{**RESUMED_RUN, **fields})
    assert "\n" not in line and line.startswith(f"cannot resume {folder / 'checkpoint-3'}: its run had other "
                                                "paddle_llrd settings: "), line
    assert line.count(" there, ") == len(differences), line
    for difference in differences:
        assert difference in line, (difference, line)
    assert "fresh output_dir" in line and "resume_with_new_settings=true" in line
    after = parameters_numpy(model)
    for name, value in before.items():
        np.testing.assert_array_equal(after[name], value, err_msg=name)  # nothing loaded, nothing trained
    assert not output_dir.exists() or not any(output_dir.glob("*checkpoint-*"))


def test_other_settings_accepted_train_on_with_this_runs_settings_and_say_so(kit, tmp_path, whole):
    folder, _ = whole
    with pytest.warns(CheckpointMatchWarning) as caught:
        trainer = checkpointed_run(kit, tmp_path / "accepted", resume=str(folder / "checkpoint-3"), seed=99,
                                   **{**RESUMED_RUN, "layerwise_decay": 0.9, "resume_with_new_settings": True})
    assert [str(warning.message) for warning in caught] == [
        f"resuming {folder / 'checkpoint-3'} with this run's settings although its run had other paddle_llrd "
        "settings: layerwise_decay 0.6 there, 0.9 here"]
    assert trainer.state.global_step == 6 and trainer.optimizer.layerwise_decay == 0.9


def test_a_finished_run_resumed_trains_nothing_and_changes_nothing(kit, tmp_path, whole):
    """resume_from_checkpoint=True on a folder whose newest checkpoint is at max_steps: the trainer holds
    that checkpoint's weights, optimizer, schedule, weight-decay schedule and EMA (the uninterrupted run's),
    no step is taken, no file of the run changes (the framework's VisualDL folder, runs/, gets a log of
    this session as any session's), and one line says so."""
    folder, uninterrupted = whole
    before = file_hashes(folder, leave_out=("runs",))
    with LogLines(kit) as lines:
        trainer = checkpointed_run(kit, folder, resume=True, seed=99, **RESUMED_RUN)
    assert trainer.state.global_step == 6
    # the coefficient the last step used is the optimizer's working value, set anew before each step; the
    # schedule's position (weight_decay_step), which decides it, is compared
    assert_same_snapshots(snapshot(trainer), uninterrupted, leave_out=("weight_decay",))
    assert file_hashes(folder, leave_out=("runs",)) == before
    said = [line for line in lines if "the run is finished" in line]
    assert said == [f"{folder / 'checkpoint-6'} is at max_steps 6: the run is finished and trains no further "
                    "(weights, optimizer, schedule and EMA as saved there)"], lines[-5:]


def test_a_checkpoint_past_max_steps_stops_in_one_line(kit, tmp_path, whole):
    folder, _ = whole
    assert refused_resume(kit, tmp_path / "shorter", folder / "checkpoint-6", max_steps=4, **RESUMED_RUN) == (
        f"cannot resume {folder / 'checkpoint-6'}: it is at step 6, past this run's max_steps 4; set max_steps to "
        "6 or more, resume from a checkpoint at step 4 or before, or write to a fresh output_dir")


def truncate_largest_file(checkpoint: Path) -> tuple:
    """The checkpoint's largest file cut to half its size, as a full disk or a killed copy leaves it."""
    largest = max((path for path in checkpoint.iterdir() if path.is_file()), key=lambda path: path.stat().st_size)
    size = largest.stat().st_size
    with open(largest, "r+b") as file:
        file.truncate(size // 2)
    return largest.name, size


def test_an_unfinished_save_and_a_truncated_checkpoint_are_skipped_saying_which_and_why(kit, tmp_path, whole):
    """In a folder holding checkpoint-3, checkpoint-6 with one file truncated and an unfinished save
    (tmp-checkpoint-9), the integration's get_last_checkpoint and resume_from_checkpoint=True take
    checkpoint-3, saying in one line each what they skipped; the run ends bit for bit as the uninterrupted
    one, and the truncated checkpoint-6 is kept aside, not deleted. Named explicitly, the truncated
    checkpoint stops the run in one line naming the newest complete one."""
    folder, uninterrupted = whole
    damaged = tmp_path / "damaged"
    shutil.copytree(folder, damaged, ignore=shutil.ignore_patterns("runs"))
    name, size = truncate_largest_file(damaged / "checkpoint-6")
    (damaged / "tmp-checkpoint-9" / "checkpoint-9").mkdir(parents=True)
    skipped = [f"skipped {damaged / 'tmp-checkpoint-9'}: a save that did not finish (the run stopped while it "
               "wrote this checkpoint)",
               f"skipped {damaged / 'checkpoint-6'}: incomplete, {name} has {size // 2} bytes where the save "
               f"wrote {size}"]

    assert refused_resume(kit, tmp_path / "explicit", damaged / "checkpoint-6", max_steps=6, **RESUMED_RUN) == (
        f"cannot resume {damaged / 'checkpoint-6'}: its save is incomplete ({name} has {size // 2} bytes where the "
        f"save wrote {size}); resume from {damaged / 'checkpoint-3'} (the newest complete one), or move it out "
        "of the way and run again")

    with LogLines(kit) as lines:
        assert kit.last_checkpoint(str(damaged)) == str(damaged / "checkpoint-3")
    assert lines == skipped
    with LogLines(kit) as lines:
        resumed = checkpointed_run(kit, damaged, resume=True, seed=99, **RESUMED_RUN)
    assert [line for line in lines if line.startswith("skipped ")] == skipped
    assert_same_snapshots(snapshot(resumed), uninterrupted)
    kept = damaged / "replaced-checkpoint-6"
    assert (kept / name).stat().st_size == size // 2  # the damaged one, kept aside
    assert f"{damaged / 'checkpoint-6'} held a checkpoint of an earlier run, kept as {kept}" in lines
    assert kit.last_checkpoint(str(damaged)) == str(damaged / "checkpoint-6")


def test_rotated_checkpoints_keep_the_best_one_under_its_own_name(kit, tmp_path):
    """save_total_limit and load_best_model_at_end as in the frameworks: the newest checkpoint and the best
    one (the lowest evaluation loss) stay, the best is named by its place in output_dir (not by the folder
    it was written in), and the model at the end is the best checkpoint's."""
    output_dir = tmp_path / "rotated"
    losses = {}

    class Evaluations(kit.callback_class):
        def on_evaluate(self, args, state, control, metrics=None, **kwargs):
            losses[state.global_step] = metrics["eval_loss"]

    with paddle.utils.unique_name.guard():
        args = kit.args(output_dir, max_steps=6, save_strategy="steps", save_steps=2, evaluation_strategy="steps",
                        eval_steps=2, save_total_limit=1, load_best_model_at_end=True, metric_for_best_model="loss",
                        greater_is_better=False, **RESUMED_RUN)
        trainer = kit.trainer(args, eval_dataset=kit.make_dataset(), callbacks=[Evaluations()])
        trainer.train()
    assert trainer.args.output_dir == str(output_dir)
    assert sorted(losses) == [2, 4, 6]
    best = output_dir / f"checkpoint-{min(losses, key=losses.get)}"
    assert trainer.state.best_model_checkpoint == str(best)
    kept = sorted(path.name for path in output_dir.iterdir() if "checkpoint" in path.name)
    assert kept == sorted({best.name, "checkpoint-6"}), kept
    loaded = parameters_numpy(kit.load_model(str(best)))
    for name, value in parameters_numpy(trainer.model).items():
        np.testing.assert_array_equal(value, loaded[name], err_msg=name)


def test_a_run_saves_no_file_outside_its_checkpoints_and_final_model(kit, tmp_path):
    """After a run and its final save, output_dir holds the checkpoints, the final model and ema/ and the
    framework's VisualDL folder: no staging folder, no stray file."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", CheckpointMatchWarning)
        trainer = checkpointed_run(kit, tmp_path / "run", **RESUMED_RUN)
    trainer.save_model()
    left = sorted(path.name for path in (tmp_path / "run").iterdir() if path.is_dir())
    assert left == ["checkpoint-3", "checkpoint-6", "ema", "runs"], left


__all__ = ["whole"] + [name for name in dir() if name.startswith("test_")]
