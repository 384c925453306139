"""Saves that are complete or absent (paddle_llrd.integrations.checkpoints), without a framework: a
checkpoint counts once its manifest is written and it has its name; a file cut or deleted since makes it
incomplete; the newest complete one is found, each newer folder skipped said in a line; nothing the
user had is deleted."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from paddle_llrd.integrations.checkpoints import (
    MANIFEST_FILE,
    empty_staging_directory,
    incompleteness,
    newest_complete_checkpoint,
    publish,
    staging_directory,
    write_manifest,
)

FILES = {"model.safetensors": b"m" * 64, "optimizer.safetensors": b"o" * 128, "sub/state.pdparams": b"s" * 16}


def saved(output_dir: Path, step: int) -> Path:
    """checkpoint-<step> saved the way LLRDTrainer saves it: staged, listed, renamed (the one it replaces
    moved aside)."""
    target = output_dir / f"checkpoint-{step}"
    staged = Path(staging_directory(str(target)))
    empty_staging_directory(str(staged))
    for name, data in FILES.items():
        (staged / name).parent.mkdir(parents=True, exist_ok=True)
        (staged / name).write_bytes(data)
    write_manifest(str(staged), {"global_step": step})
    existed = target.exists()
    assert (publish(str(staged), str(target)) is not None) == existed
    return target


def test_a_save_counts_only_once_it_is_listed_and_named(tmp_path):
    saved(tmp_path, 2)
    staged = tmp_path / "tmp-checkpoint-4"
    staged.mkdir()
    (staged / "model.safetensors").write_bytes(FILES["model.safetensors"])  # killed mid-save
    checkpoint, skipped = newest_complete_checkpoint(str(tmp_path))
    assert checkpoint == str(tmp_path / "checkpoint-2")
    assert skipped == [f"skipped {staged}: a save that did not finish (the run stopped while it wrote this checkpoint)"]
    manifest = json.loads((tmp_path / "checkpoint-2" / MANIFEST_FILE).read_text())
    assert manifest == {"global_step": 2, "files": {name: len(data) for name, data in FILES.items()}}


@pytest.mark.parametrize("damage, reason", [
    ("cut", "optimizer.safetensors has 64 bytes where the save wrote 128"),
    ("delete", "sub/state.pdparams is missing"),
    ("manifest", f"its {MANIFEST_FILE} does not parse"),
    ("empty", "it is empty"),
])
def test_a_damaged_checkpoint_is_incomplete_and_skipped_saying_why(tmp_path, damage, reason):
    saved(tmp_path, 2)
    newest = saved(tmp_path, 4)
    if damage == "cut":
        (newest / "optimizer.safetensors").write_bytes(FILES["optimizer.safetensors"][:64])
    elif damage == "delete":
        (newest / "sub" / "state.pdparams").unlink()
    elif damage == "manifest":
        (newest / MANIFEST_FILE).write_text('{"files": {"model.safe')
    else:
        for path in sorted(newest.rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
    assert incompleteness(str(newest)).startswith(reason)
    checkpoint, (line,) = newest_complete_checkpoint(str(tmp_path))
    assert checkpoint == str(tmp_path / "checkpoint-2")
    assert line.startswith(f"skipped {newest}: incomplete, {reason}"), line


def test_a_checkpoint_without_a_manifest_is_left_to_the_resume_checks(tmp_path):
    """A framework Trainer's checkpoint cannot be checked here: it is the newest, for the resume to judge."""
    saved(tmp_path, 2)
    plain = tmp_path / "checkpoint-4"
    plain.mkdir()
    (plain / "model.safetensors").write_bytes(b"x")
    assert incompleteness(str(plain)) is None
    assert newest_complete_checkpoint(str(tmp_path)) == (str(plain), [])


def test_a_checkpoint_a_new_save_replaces_is_kept_aside_not_deleted(tmp_path):
    first = saved(tmp_path, 4)
    (first / "note").write_text("the first run's")
    saved(tmp_path, 4)
    saved(tmp_path, 4)
    assert sorted(os.listdir(tmp_path)) == ["checkpoint-4", "replaced-checkpoint-4", "replaced-checkpoint-4-2"]
    assert (tmp_path / "replaced-checkpoint-4" / "note").read_text() == "the first run's"
    assert newest_complete_checkpoint(str(tmp_path)) == (str(tmp_path / "checkpoint-4"), [])


def test_only_a_staging_folder_is_emptied(tmp_path):
    (tmp_path / "tmp-checkpoint-4").mkdir()
    (tmp_path / "tmp-checkpoint-4" / "half").write_bytes(b"1")
    empty_staging_directory(str(tmp_path / "tmp-checkpoint-4"))
    assert os.listdir(tmp_path / "tmp-checkpoint-4") == []
    (tmp_path / "checkpoint-4").mkdir()
    with pytest.raises(ValueError, match="is not a staging directory"):
        empty_staging_directory(str(tmp_path / "checkpoint-4"))
