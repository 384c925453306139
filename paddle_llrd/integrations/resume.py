"""Whether a Trainer run may resume a checkpoint, decided before it trains.

A checkpoint :class:`~paddle_llrd.integrations.paddleformers.LLRDTrainer`
saves is complete or absent (:mod:`~paddle_llrd.integrations.checkpoints`),
and its manifest records the run's paddle_llrd settings
(:func:`run_settings`). A resume (:func:`check_resumable`) is refused, in one
line naming the checkpoint, what is wrong and what to do
(:class:`CheckpointResumeError`), when the checkpoint is incomplete, when it
lacks paddle_llrd's record (a framework ``Trainer``'s, another package's) or
when its settings differ from the run's, unless the run's arguments say
``resume_with_new_settings``; then each difference is warned about
(:class:`~paddle_llrd.CheckpointMatchWarning`) and the run goes on with its
own settings. :func:`resolved_checkpoint` turns ``resume_from_checkpoint=True``
into the newest complete checkpoint.
"""
from __future__ import annotations

import json
import os
import warnings
from typing import Any, Callable, Dict, List, Optional

from paddle_llrd.integrations.checkpoints import (
    MANIFEST_FILE,
    checkpoint_step,
    incompleteness,
    newest_complete_checkpoint,
    read_manifest,
)
from paddle_llrd.integrations.training_arguments import plain_name
from paddle_llrd.warning_classes import CheckpointMatchWarning, stacklevel_outside_package

__all__ = [
    "ACCEPT_FIELD",
    "CheckpointResumeError",
    "check_resumable",
    "resolved_checkpoint",
    "run_settings",
    "settings_differences",
]

#: The ``TrainingArguments`` field that lets a run resume a checkpoint of other (or unknown) settings.
ACCEPT_FIELD = "resume_with_new_settings"


class CheckpointResumeError(SystemExit):
    """A resume that cannot be served, said in one line: which checkpoint,
    what is wrong with it and what to do.

    A ``SystemExit``, so that a training script stops with that line (exit
    status 1) and no traceback, as a command line's usage error does; catch
    it by class to handle it (``except CheckpointResumeError``). Its text is
    ``str(error)``.

    Examples:
        >>> error = CheckpointResumeError("out/checkpoint-4 is incomplete: remove it")
        >>> str(error), error.code, isinstance(error, SystemExit)
        ('out/checkpoint-4 is incomplete: remove it', 'out/checkpoint-4 is incomplete: remove it', True)
    """


def _ratio_rule(args: Any, settings: Any) -> str:
    """How the ratios are given: the ``layer_map`` field, or the caller's ``set_param_lr_fun``."""
    function = settings.set_param_lr_fun
    if function is settings.layer_map:
        return str(getattr(args, "layer_map", "auto"))
    return f"set_param_lr_fun {getattr(function, '__module__', '?')}.{getattr(function, '__qualname__', function)}"


def run_settings(args: Any, settings: Any) -> Dict[str, Any]:
    """The paddle_llrd settings of a Trainer run that a resume must keep, by field name: the layer ratios
    (``layerwise_decay``, ``layer_map`` or a ``set_param_lr_fun``, ``n_layers``), the schedule
    (``lr_scheduler_type``, ``lr_scheduler_kwargs``), a weight-decay schedule (``weight_decay`` to
    ``weight_decay_end`` in its style) and the EMA (``ema_decay``, 0 when off, and its warm-up), as JSON
    gives them back.

    Examples:
        >>> from types import SimpleNamespace
        >>> rule = object()
        >>> args = SimpleNamespace(layer_map="llama", lr_scheduler_type="cosine", ema_decay=0.9, ema_warmup=False)
        >>> run_settings(args, SimpleNamespace(layerwise_decay=0.8, n_layers=2, layer_map=rule,
        ...                                    set_param_lr_fun=rule))
        {'layerwise_decay': 0.8, 'layer_map': 'llama', 'n_layers': 2, 'lr_scheduler_type': 'cosine', 'lr_scheduler_kwargs': {}, 'ema_decay': 0.9, 'ema_warmup': False}
    """
    record: Dict[str, Any] = {
        "layerwise_decay": float(settings.layerwise_decay),
        "layer_map": _ratio_rule(args, settings),
        "n_layers": int(settings.n_layers),
        "lr_scheduler_type": plain_name(args.lr_scheduler_type),
        "lr_scheduler_kwargs": dict(getattr(args, "lr_scheduler_kwargs", None) or {}),
    }
    if getattr(args, "weight_decay_end", None) is not None:
        record.update(weight_decay=float(args.weight_decay), weight_decay_end=float(args.weight_decay_end),
                      weight_decay_incr_style=str(args.weight_decay_incr_style))
    record["ema_decay"] = float(getattr(args, "ema_decay", 0.0) or 0.0)
    if record["ema_decay"]:
        record["ema_warmup"] = bool(getattr(args, "ema_warmup", False))
        if record["ema_warmup"]:
            record["ema_warmup_power"] = float(args.ema_warmup_power)
    return json.loads(json.dumps(record))


def _shown(settings: Dict[str, Any], name: str) -> str:
    return json.dumps(settings[name]) if name in settings else "unset"


def settings_differences(saved: Dict[str, Any], current: Dict[str, Any]) -> List[str]:
    """Each setting that differs, as ``"<name> <saved> there, <current> here"``.

    Examples:
        >>> settings_differences({"layerwise_decay": 0.5, "ema_decay": 0.0},
        ...                      {"layerwise_decay": 0.85, "ema_decay": 0.999, "ema_warmup": True})
        ['layerwise_decay 0.5 there, 0.85 here', 'ema_decay 0.0 there, 0.999 here', 'ema_warmup unset there, true here']
    """
    names = list(saved) + [name for name in current if name not in saved]
    return [f"{name} {_shown(saved, name)} there, {_shown(current, name)} here"
            for name in names if name not in saved or name not in current or saved[name] != current[name]]


def resolved_checkpoint(resume_from_checkpoint: Any, output_dir: str, say: Callable[[str], None]) -> Any:
    """``train``'s ``resume_from_checkpoint``: ``True`` is the newest complete checkpoint in ``output_dir``
    (each newer folder skipped said in one line through ``say``), ``False`` none, anything else as given.

    Raises:
        CheckpointResumeError: ``True`` but ``output_dir`` has no complete checkpoint.
    """
    if not isinstance(resume_from_checkpoint, bool):
        return resume_from_checkpoint
    if not resume_from_checkpoint:
        return None
    checkpoint, skipped = newest_complete_checkpoint(output_dir)
    for line in skipped:
        say(line)
    if checkpoint is None:
        raise CheckpointResumeError(
            f"resume_from_checkpoint=True but {output_dir} holds no complete checkpoint to resume from: "
            "train without resume_from_checkpoint to start at step 0"
        )
    return checkpoint


def _refusal_for_incomplete(checkpoint: str, problem: str) -> CheckpointResumeError:
    parent = os.path.dirname(os.path.normpath(checkpoint))
    newest, _ = newest_complete_checkpoint(parent)
    older = f"resume from {newest} (the newest complete one)" if newest is not None else "train from step 0"
    return CheckpointResumeError(
        f"cannot resume {checkpoint}: its save is incomplete ({problem}); {older}, or move it out of the way "
        "and run again"
    )


def _go_on_or_refuse(checkpoint: str, problem: str, accept: bool) -> None:
    """A checkpoint of other (or unknown) settings: a warning with ``accept``, else the refusal."""
    if accept:
        warnings.warn(f"resuming {checkpoint} with this run's settings although {problem}",
                      CheckpointMatchWarning, stacklevel=stacklevel_outside_package())
        return
    raise CheckpointResumeError(
        f"cannot resume {checkpoint}: {problem}. Write to a fresh output_dir to start a new run, resume it "
        f"with its own settings, or set {ACCEPT_FIELD}=true to go on from it with this run's"
    )


def check_resumable(checkpoint: str, current: Dict[str, Any], *, accept: bool, say: Callable[[str], None]) -> None:
    """Refuse, before anything loads, a resume of ``checkpoint`` by a run of settings ``current``
    (:func:`run_settings`): one that is no folder, is incomplete, lacks paddle_llrd's manifest or was saved
    with other settings (the last two go on, each with a warning, when ``accept``). A newer complete
    checkpoint beside it is said in one line through ``say``.

    Raises:
        CheckpointResumeError: the one line that says which checkpoint, what is wrong and what to do.
    """
    if not os.path.isdir(checkpoint):
        raise CheckpointResumeError(f"resume_from_checkpoint {checkpoint} is no folder: name a checkpoint-N "
                                    "folder of an earlier run")
    problem = incompleteness(checkpoint)
    if problem is not None:
        raise _refusal_for_incomplete(checkpoint, problem)
    manifest = read_manifest(checkpoint)
    if manifest is None:
        _go_on_or_refuse(checkpoint, f"it has no {MANIFEST_FILE}, so it was not saved by LLRDTrainer (a "
                                     "framework Trainer's, or an older paddle_llrd's) and its layer decay, "
                                     "schedule and EMA settings are unknown", accept)
        return
    differences = settings_differences(manifest.get("settings", {}), current)
    if differences:
        _go_on_or_refuse(checkpoint, "its run had other paddle_llrd settings: " + "; ".join(differences), accept)
    _say_if_newer(checkpoint, say)


def _say_if_newer(checkpoint: str, say: Callable[[str], None]) -> None:
    newest, _ = newest_complete_checkpoint(os.path.dirname(os.path.normpath(checkpoint)))
    step, newest_step = checkpoint_step(checkpoint), checkpoint_step(newest) if newest else None
    if step is not None and newest_step is not None and newest_step > step:
        say(f"resuming {checkpoint} though {newest} beside it is newer: this run's checkpoints from step "
            f"{step + 1} on take the place of that run's (kept as replaced-checkpoint-N)")
