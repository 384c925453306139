"""What ``output_dir`` holds before ``python -m paddle_llrd train`` runs, and what the run does with it.

PaddleFormers' workflow resumes from ``resume_from_checkpoint`` or from the
highest-numbered ``checkpoint-N`` in ``output_dir`` (complete or not),
trains from step 0 over a finished model when there is no checkpoint, and
saves the final model and ``ema/`` last. The command decides first, before
the model loads, from the manifests that ``LLRDTrainer``'s saves end with
(:mod:`paddle_llrd.integrations.checkpoints`):

- :func:`finished_step`: the run is finished (its final model and ``ema/``
  complete at the final step): nothing to do, no file changes;
- :func:`resume_plan`: the checkpoint the run resumes from, the newest
  complete one (the command passes it as ``resume_from_checkpoint``, with one
  line for each newer folder it skips), a refusal where only incomplete ones
  are there or the named one is incomplete, and a line when the checkpoint is
  at the final step (the run then writes the final model and ``ema/`` from
  it, training nothing);
- :func:`check_nothing_is_overwritten`: a run from step 0 over a finished model is refused.

Nothing here needs PaddleFormers.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from paddle_llrd.integrations.checkpoints import (
    MANIFEST_FILE,
    checkpoint_step,
    incompleteness,
    newest_complete_checkpoint,
    read_manifest,
)

__all__ = ["ResumePlan", "check_nothing_is_overwritten", "final_save", "finished_step", "resume_plan"]

# Files directly in output_dir that the workflow writes when it saves the final model.
_FINAL_MODEL_FILES = ("trainer_state.json", "*.safetensors", "*.safetensors.index.json", "*.pdparams")
_TRAINS_AGAIN = ("write to a new output_dir (output_dir=PATH) or start over here (overwrite_output_dir=true)")


def _trains(config: Dict[str, Any]) -> bool:
    """Whether the run trains into ``output_dir`` from what is there (not ``overwrite_output_dir``)."""
    return bool(config.get("do_train")) and not config.get("overwrite_output_dir") and "output_dir" in config


def final_save(output_dir: Path) -> Optional[Dict[str, Any]]:
    """The manifest of the final model and ``ema/`` in ``output_dir`` when that save is complete, else ``None``."""
    if not output_dir.is_dir() or incompleteness(str(output_dir)) is not None:
        return None
    try:
        return read_manifest(str(output_dir))
    except ValueError:
        return None


def _final_step(max_steps: int, manifest: Dict[str, Any]) -> int:
    """The run's last step: ``max_steps`` when positive, else the one its save recorded."""
    return max_steps if max_steps > 0 else int(manifest.get("max_steps", 0))


def _step(checkpoint: str) -> Optional[int]:
    manifest = read_manifest(checkpoint)
    return int(manifest["global_step"]) if manifest is not None else checkpoint_step(checkpoint)


def finished_step(config: Dict[str, Any], max_steps: int) -> Optional[int]:
    """The final step, when ``output_dir`` holds the complete final save of a run at that step (and
    ``resume_from_checkpoint``, if set, names no earlier checkpoint); else ``None``.

    ``max_steps`` is the config's (the run's length when positive, else the one the save recorded). A
    larger one than the run reached is a run to go on with: ``None``.
    """
    if not _trains(config):
        return None
    manifest = final_save(Path(str(config["output_dir"])))
    if manifest is None:
        return None
    step, final = int(manifest.get("global_step", 0)), _final_step(max_steps, manifest)
    if final <= 0 or step < final:
        return None
    named = config.get("resume_from_checkpoint")
    if named and Path(str(named)).is_dir() and (_step(str(named)) or 0) < final:
        return None
    return step


@dataclass
class ResumePlan:
    """What a run does with ``output_dir``'s checkpoints (:func:`resume_plan`)."""

    #: The checkpoint the run resumes from (``None``: step 0).
    checkpoint: Optional[str] = None
    #: One line for each folder skipped on the way to it.
    notices: List[str] = field(default_factory=list)
    #: Whether the checkpoint is at the final step: the run writes the final model from it, training nothing.
    completes: bool = False
    #: What the final save in ``output_dir`` lacks, when the run completes it.
    final_problem: str = ""


def _only_incomplete(output_dir: Path, skipped: List[str]) -> ValueError:
    reasons = "; ".join(line[len("skipped "):] for line in skipped)
    return ValueError(
        f"output_dir {str(output_dir)!r} holds no complete checkpoint to resume from ({reasons}), and PaddleFormers "
        "would resume the incomplete one: move it out of the way to train from step 0, resume from a checkpoint "
        f"elsewhere (resume_from_checkpoint=PATH), or {_TRAINS_AGAIN}"
    )


def resume_plan(config: Dict[str, Any], max_steps: int) -> ResumePlan:
    """The checkpoint the run resumes from: ``resume_from_checkpoint`` when set (it must be complete),
    else the newest complete one in ``output_dir``, each newer folder skipped said in a line.

    Raises:
        ValueError: the named checkpoint is no folder or is incomplete, or ``output_dir`` holds only
            incomplete checkpoints (which PaddleFormers would resume); the message says which, why and
            what to do.
    """
    if not _trains(config):
        return ResumePlan()
    named = config.get("resume_from_checkpoint")
    if named:
        named = str(named)
        problem = "it is no folder" if not Path(named).is_dir() else incompleteness(named)
        if problem is not None:
            raise ValueError(f"resume_from_checkpoint {named!r} cannot be resumed: {problem}; name a complete "
                             "checkpoint-N folder, or leave resume_from_checkpoint out to resume the newest one")
        plan = ResumePlan(named)
    else:
        output_dir = Path(str(config["output_dir"]))
        checkpoint, skipped = newest_complete_checkpoint(str(output_dir))
        if checkpoint is None and output_dir.is_dir() and any(
                checkpoint_step(str(path)) is not None for path in output_dir.iterdir() if path.is_dir()):
            raise _only_incomplete(output_dir, skipped)
        plan = ResumePlan(checkpoint, skipped)
    manifest = read_manifest(plan.checkpoint) if plan.checkpoint is not None else None
    if manifest is not None:
        final = _final_step(max_steps, manifest)
        plan.completes = final > 0 and int(manifest["global_step"]) == final
        plan.final_problem = _final_save_problem(Path(str(config["output_dir"]))) if plan.completes else ""
    return plan


def _final_save_problem(output_dir: Path) -> str:
    """What the final save in ``output_dir`` lacks (it has no manifest: it did not finish, or never began)."""
    try:
        manifest = read_manifest(str(output_dir))
    except ValueError as exc:
        return str(exc)
    if manifest is None:
        return f"its {MANIFEST_FILE}, which the final save writes last, is missing"
    return incompleteness(str(output_dir)) or ""


def _final_model(output_dir: Path) -> List[str]:
    """What of a finished run ``output_dir`` holds: the final model's files and its ``ema/``."""
    found = sorted({path.name for pattern in _FINAL_MODEL_FILES for path in output_dir.glob(pattern) if path.is_file()})
    if (output_dir / "ema").is_dir():
        found.append("ema/")
    return found


def _trained_steps(output_dir: Path) -> Optional[int]:
    """The step of the final model in ``output_dir``: its manifest's, else the ``trainer_state.json`` beside it."""
    manifest = final_save(output_dir)
    if manifest is not None:
        return int(manifest.get("global_step", 0))
    state = output_dir / "trainer_state.json"
    if state.is_file():
        return int(json.loads(state.read_text()).get("global_step", 0))
    return None


def check_nothing_is_overwritten(config: Dict[str, Any]) -> None:
    """Refuse a run that would train from step 0 over a finished model.

    PaddleFormers' workflow trains from scratch when ``output_dir`` holds no
    checkpoint to resume from, and then overwrites whatever final model and
    EMA are there: a longer re-run of a config that saved no checkpoint
    (``save_steps`` beyond ``max_steps``) would lose them. Such a run stops
    here unless the config says where to go: ``resume_from_checkpoint``, a
    new ``output_dir`` or ``overwrite_output_dir``. (A re-run that would
    change nothing is :func:`finished_step`'s.)

    Raises:
        ValueError: ``output_dir`` holds a final model (or an EMA) and no
            complete ``checkpoint-N``, and neither ``resume_from_checkpoint``
            nor ``overwrite_output_dir`` is set; the message says what is
            there and the three ways on.
    """
    if not _trains(config) or config.get("resume_from_checkpoint"):
        return
    output_dir = Path(str(config["output_dir"]))
    if not output_dir.is_dir() or newest_complete_checkpoint(str(output_dir))[0] is not None:
        return
    found = _final_model(output_dir)
    if not found:
        return
    steps = _trained_steps(output_dir)
    trained = f" trained for {steps} steps" if steps is not None else ""
    raise ValueError(
        f"output_dir {str(config['output_dir'])!r} holds a finished model{trained} ({', '.join(found)}) and no "
        "checkpoint-N to resume from, so this run would train again from step 0 and overwrite it: resume from a "
        "checkpoint (resume_from_checkpoint=PATH), write to a new output_dir (output_dir=PATH), or start over "
        "here (overwrite_output_dir=true)"
    )
