"""How ``LLRDTrainer`` saves so that a kill leaves a whole save or none.

:func:`save_checkpoint_staged` runs the framework's ``_save_checkpoint`` with
``output_dir`` pointing at a staging folder (``tmp-checkpoint-N``), adds the
manifest, and gives the folder its name ``checkpoint-N`` only then
(:mod:`~paddle_llrd.integrations.checkpoints`); :func:`save_final_staged`
does the same for the final model and its ``ema/``, moving them into the
output folder file by file with the manifest last (the output folder holds
other things, so it cannot be renamed whole). With several ranks every rank
writes its part into the staging folder, and the rank that saves (the
framework's ``should_save``) publishes it between two barriers.
"""
from __future__ import annotations

import contextlib
import os
import shutil
from typing import Any, Callable, Dict, Iterator

import paddle

from paddle_llrd.integrations.checkpoints import (
    MANIFEST_FILE,
    empty_staging_directory,
    publish,
    staging_directory,
    write_manifest,
)
from paddle_llrd.integrations.run_state import checkpoint_directory

__all__ = ["FINAL_STAGING_NAME", "save_checkpoint_staged", "save_final_staged"]

#: The final save's folder in the output folder until it is complete.
FINAL_STAGING_NAME = "tmp-final-model"
# The trainer state file each framework writes into a checkpoint, and the TrainerState method that writes it.
_TRAINER_STATE_WRITERS = (("trainer_state.bin", "save"), ("trainer_state.json", "save_to_json"))
# The arguments both frameworks record in a checkpoint, with paddle.save.
_TRAINING_ARGS_FILE = "training_args.bin"


def _barrier() -> None:
    """All ranks here before any goes on (nothing to wait for in one process)."""
    if paddle.distributed.get_world_size() > 1:
        paddle.distributed.barrier()


@contextlib.contextmanager
def _writing_into(args: Any, directory: str) -> Iterator[None]:
    """The framework's checkpoint code writing into ``directory``: ``output_dir`` (and ``output_signal_dir``,
    PaddleFormers' folder of save signals, where it is ``output_dir``) set to it, and ``save_total_limit``
    off (the rotation runs once the checkpoint is in place); all restored afterwards, whatever happens."""
    saved = {name: getattr(args, name) for name in ("output_dir", "output_signal_dir", "save_total_limit")
             if hasattr(args, name)}
    try:
        if saved.get("output_signal_dir") == saved["output_dir"]:
            args.output_signal_dir = directory
        args.output_dir = directory
        if "save_total_limit" in saved:
            args.save_total_limit = None
        yield
    finally:
        for name, value in saved.items():
            setattr(args, name, value)


def _point_best_checkpoint_at(state: Any, staged: str, target: str) -> None:
    """A best model found at this save names the checkpoint's own place, in the state and in its file."""
    if state.best_model_checkpoint is None or os.path.normpath(state.best_model_checkpoint) != os.path.normpath(staged):
        return
    state.best_model_checkpoint = target
    for name, method in _TRAINER_STATE_WRITERS:
        if os.path.isfile(os.path.join(staged, name)):
            getattr(state, method)(os.path.join(staged, name))


def _record_the_real_arguments(args: Any, staged: str) -> None:
    """The checkpoint's record of the arguments as they are, not as they were while it was written."""
    path = os.path.join(staged, _TRAINING_ARGS_FILE)
    if os.path.isfile(path):
        paddle.save(args, path)


def save_checkpoint_staged(trainer: Any, save: Callable[[], Any], record: Dict[str, Any]) -> Any:
    """``save()`` (the framework's ``_save_checkpoint`` and paddle_llrd's files) writing into
    ``tmp-checkpoint-N/checkpoint-N``; then :func:`_publish_checkpoint`. ``save()``'s result."""
    args = trainer.args
    target = checkpoint_directory(args.output_dir, trainer.state.global_step)
    root = staging_directory(target)
    if args.should_save:
        empty_staging_directory(root)
    _barrier()
    with _writing_into(args, root):
        result = save()
    _barrier()
    if args.should_save:
        _publish_checkpoint(trainer, root, target, record)
    _barrier()
    return result


def _publish_checkpoint(trainer: Any, root: str, target: str, record: Dict[str, Any]) -> None:
    """The checkpoint staged under ``root`` finished: its records pointed at ``target``, the manifest with
    ``record`` written, the folder renamed to ``target`` (one it replaces kept aside, said in one line) and
    the framework's rotation (``save_total_limit``) run."""
    staged = os.path.join(root, os.path.basename(target))
    if not (os.path.isdir(staged) and os.listdir(staged)):  # the framework saved nothing (zero-cost checkpoints)
        shutil.rmtree(root)
        return
    _point_best_checkpoint_at(trainer.state, staged, target)
    _record_the_real_arguments(trainer.args, staged)
    write_manifest(staged, record)
    replaced = publish(staged, target)
    os.rmdir(root)
    if replaced is not None:
        trainer.logger.warning(f"{target} held a checkpoint of an earlier run, kept as {replaced}")
    trainer._rotate_checkpoints(use_mtime=True, output_dir=trainer.args.output_dir)


def _move_into(staged: str, target: str) -> None:
    """Every file and folder of the complete save ``staged`` into ``target``, its manifest last (the old one
    removed first: in between, ``target`` holds no manifest, an incomplete final save)."""
    old_manifest = os.path.join(target, MANIFEST_FILE)
    if os.path.exists(old_manifest):
        os.remove(old_manifest)
    for name in sorted(os.listdir(staged)):
        if name == MANIFEST_FILE:
            continue
        source, destination = os.path.join(staged, name), os.path.join(target, name)
        if os.path.isdir(source):
            publish(source, destination, keep_replaced=False)
        else:
            os.replace(source, destination)
    os.replace(os.path.join(staged, MANIFEST_FILE), old_manifest)


def save_final_staged(args: Any, target: str, save: Callable[[str], Any], record: Dict[str, Any]) -> Any:
    """``save(folder)`` (the model and its ``ema/``) writing into ``target/tmp-final-model``; then the
    manifest with ``record``, and everything moved into ``target``. ``save``'s result."""
    staged = os.path.join(target, FINAL_STAGING_NAME)
    if args.should_save:
        empty_staging_directory(staged)
    _barrier()
    result = save(staged)
    _barrier()
    if args.should_save:
        write_manifest(staged, record)
        _move_into(staged, target)
        os.rmdir(staged)
    _barrier()
    return result
