"""Checks of a ``python -m paddle_llrd train`` config, run before anything loads.

PaddleFormers' workflow finds most mistakes late: a missing dataset after the
model has loaded, a missing model folder as ``HFValidationError: Repo id must
use alphanumeric chars``, a misspelt key after the imports, without a
suggestion. :func:`check_config` reads the config dict (the file with its
overrides merged) and refuses each of those with a ``ValueError`` (a
``TypeError`` for a value of the wrong type) that names the key and what was
expected, ending with the closest valid name where one was misspelt; the
command line turns it into one line. Python callers of ``run_workflow`` get
the same exceptions.

Examples:
    >>> check_stage("sft"), check_stage("vl-dpo")
    ('SFT', 'VL-DPO')
    >>> check_stage("SFX")
    Traceback (most recent call last):
    ...
    ValueError: stage must be one of ['SFT', 'PT', 'VL-SFT', 'VL-PT', 'DPO', 'VL-DPO'] for paddle_llrd train, got 'SFX'. Did you mean 'SFT'?
    >>> looks_like_a_path("./my-llama"), looks_like_a_path("Qwen/Qwen3-0.6B")
    (True, False)
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping

from paddleformers.datasets.reader.file_reader import get_hf_dataset_config

from paddle_llrd.checks import did_you_mean
from paddle_llrd.integrations.training_arguments import check_fields

__all__ = [
    "LLRD_STAGES",
    "OTHER_WORKFLOW_STAGES",
    "check_config",
    "field_defaults",
    "check_dataset_paths",
    "check_keys",
    "check_model_paths",
    "check_stage",
    "looks_like_a_path",
]

#: The ``stage`` values whose PaddleFormers workflow trains through a trainer paddle_llrd train replaces.
LLRD_STAGES = ("SFT", "PT", "VL-SFT", "VL-PT", "DPO", "VL-DPO")
#: PaddleFormers' other workflows: they build trainers of their own, so paddle_llrd train refuses them.
OTHER_WORKFLOW_STAGES = ("dsv3_pretrain", "ernie_pretrain", "auto-parallel")
# Keys PaddleFormers' parser takes out of the config before it builds the arguments.
_KEYS_BESIDES_ARGUMENTS = ("custom_register_path",)
# dataset_type values whose data come from input_dir, not from train_dataset_path/eval_dataset_path.
_INPUT_DIR_DATASET_TYPES = ("pretrain", "offline")
_MODEL_ID_EXAMPLE = "'Qwen/Qwen3-0.6B'"


def check_stage(value: Any) -> str:
    """``stage`` as PaddleFormers spells it, matched without case (``sft`` is ``SFT``).

    Raises:
        ValueError: one of :data:`OTHER_WORKFLOW_STAGES` (they would train
            without layer decay), or no stage at all (with the closest one).
        TypeError: not a string.
    """
    if not isinstance(value, str):
        raise TypeError(f"stage must be a string such as 'SFT', got {type(value).__name__} {value!r}")
    by_folded = {stage.lower(): stage for stage in (*LLRD_STAGES, *OTHER_WORKFLOW_STAGES)}
    stage = by_folded.get(value.strip().lower())
    if stage in OTHER_WORKFLOW_STAGES:
        raise ValueError(
            f"stage must be one of {list(LLRD_STAGES)} for paddle_llrd train, got {value!r}: the other "
            "PaddleFormers workflows build trainers of their own, which would train without layer decay; "
            "run them with paddleformers-cli"
        )
    if stage is None:
        raise ValueError(
            f"stage must be one of {list(LLRD_STAGES)} for paddle_llrd train, got {value!r}."
            f"{did_you_mean(value, LLRD_STAGES)}"
        )
    return stage


def check_keys(config: Mapping[str, Any], known: Iterable[str]) -> None:
    """Every key of ``config`` is an argument of ``known`` (the arguments classes' fields).

    Raises:
        ValueError: the first unknown key, with the closest known one (and
            how many more there are).
    """
    known = set(known) | set(_KEYS_BESIDES_ARGUMENTS)
    unknown = [key for key in config if key not in known]
    if not unknown:
        return
    more = f" (and {len(unknown) - 1} more unknown: {', '.join(map(repr, unknown[1:]))})" if len(unknown) > 1 else ""
    raise ValueError(
        f"config key {unknown[0]!r} is neither a paddleformers-cli argument nor a paddle_llrd field"
        f"{more}; python -m paddle_llrd train --help lists paddle_llrd's.{did_you_mean(str(unknown[0]), known)}"
    )


def looks_like_a_path(value: str) -> bool:
    """Whether a model name that is no folder here was meant as one: it
    starts with ``.``, ``/`` or ``~``, has a backslash, ends with ``/``, has
    more than one ``/``, or its first part is a folder here
    (``checkpoints/llama`` beside a ``checkpoints`` folder). A hub id is
    ``name`` or ``org/name``."""
    first, _, rest = value.partition("/")
    return (
        value.startswith((".", "/", "~"))
        or "\\" in value
        or value.endswith("/")
        or "/" in rest
        or (bool(rest) and os.path.isdir(first))
    )


def _check_model_path(key: str, value: Any, *, required: bool) -> None:
    if value is None:
        if required:
            raise ValueError(f"{key} must be set: a local model folder or a hub id such as {_MODEL_ID_EXAMPLE}")
        return
    if not isinstance(value, str) or not value.strip():
        raise TypeError(f"{key} must be a model folder or a hub id such as {_MODEL_ID_EXAMPLE}, got {value!r}")
    path = Path(value).expanduser()
    if path.is_dir():
        return
    if path.exists():
        raise ValueError(f"{key} {value!r} is a file; expected a model folder or a hub id such as {_MODEL_ID_EXAMPLE}")
    if looks_like_a_path(value):
        raise ValueError(
            f"{key} {value!r} is no folder ({path.resolve()} does not exist) and not a hub id such as "
            f"{_MODEL_ID_EXAMPLE}"
        )


def check_model_paths(settings: Mapping[str, Any]) -> None:
    """``model_name_or_path`` (required) and ``tokenizer_name_or_path`` (when
    set) are folders here or plausible hub ids (see :func:`looks_like_a_path`).

    Raises:
        ValueError: a path that does not exist, a file, or no model at all.
        TypeError: not a string.
    """
    _check_model_path("model_name_or_path", settings.get("model_name_or_path"), required=True)
    _check_model_path("tokenizer_name_or_path", settings.get("tokenizer_name_or_path"), required=False)


def _dataset_sources(key: str, value: Any) -> List[str]:
    """The paths of a ``*_dataset_path`` (several joined by commas, each may end in ``#<samples>``)."""
    if not isinstance(value, str):
        raise TypeError(f"{key} must be a string (paths joined by commas), got {type(value).__name__} {value!r}")
    return [part.strip().split("#")[0] for part in value.split(",") if part.strip()]


def _evaluates(settings: Mapping[str, Any]) -> bool:
    # TrainingArguments turns do_eval on for any evaluation_strategy but "no"
    strategy = str(getattr(settings.get("evaluation_strategy"), "value", settings.get("evaluation_strategy")))
    return bool(settings.get("do_eval")) or strategy not in ("no", "None")


def check_dataset_paths(settings: Mapping[str, Any]) -> None:
    """``train_dataset_path`` and (when the run evaluates) ``eval_dataset_path``:
    each of their paths exists here or is a dataset PaddleFormers downloads by
    name. Skipped where PaddleFormers reads no such path: the ``VL-*`` and
    ``dsv3_pretrain`` stages and ``dataset_type`` ``pretrain``/``offline``
    (whose data come from ``input_dir``).

    Raises:
        ValueError: a path that does not exist, or no path (PaddleFormers
            refuses ``null`` for both, even without evaluation).
        TypeError: not a string.
    """
    stage = str(settings.get("stage", ""))
    if "VL" in stage or stage == "dsv3_pretrain" or settings.get("dataset_type") in _INPUT_DIR_DATASET_TYPES:
        return
    for key, read in (("train_dataset_path", True), ("eval_dataset_path", _evaluates(settings))):
        value = settings.get(key)
        if value is None:
            raise ValueError(
                f"{key} must be set: PaddleFormers' {stage} workflow reads its data from it (a .jsonl file, a "
                "folder of them, or several joined by commas)"
            )
        if not read:
            continue
        for source in _dataset_sources(key, value):
            if not os.path.exists(source) and get_hf_dataset_config(source) is None:
                raise ValueError(
                    f"{key}: {source!r} does not exist ({Path(source).resolve()}) and is no dataset PaddleFormers "
                    "downloads by name"
                )


def field_defaults(classes: Iterable[type]) -> Dict[str, Any]:
    """Each field's default over ``classes``, the first class that has the field winning (as
    PaddleFormers' parser fills them); a ``default_factory`` is called, a field without a default left out."""
    defaults: Dict[str, Any] = {}
    for cls in classes:
        for spec in dataclasses.fields(cls):
            if spec.default is not dataclasses.MISSING:
                defaults.setdefault(spec.name, spec.default)
            elif spec.default_factory is not dataclasses.MISSING:
                defaults.setdefault(spec.name, spec.default_factory())
    return defaults


def check_config(config: Mapping[str, Any], arguments_classes: Iterable[type]) -> Dict[str, Any]:
    """``config`` checked, in this order, before any arguments class is built:
    its keys against the fields of ``arguments_classes`` (the classes
    PaddleFormers' parser builds), ``stage``, paddle_llrd's fields (the checks
    of ``LLRDTrainingArguments``, :func:`check_fields`), the model folder, the
    dataset paths. Returns a copy with ``stage`` spelled as PaddleFormers
    matches it.

    Raises:
        ValueError, TypeError: the first mistake, naming its key.
    """
    classes = list(arguments_classes)
    check_keys(config, (spec.name for cls in classes for spec in dataclasses.fields(cls)))
    settings = {**field_defaults(classes), **config}
    checked = dict(config)
    checked["stage"] = settings["stage"] = check_stage(settings["stage"])
    check_fields(settings)
    check_model_paths(settings)
    check_dataset_paths(settings)
    return checked
