"""Saves that are complete or absent, and the newest complete checkpoint.

PaddleNLP and PaddleFormers write ``checkpoint-N`` in place, file by file,
and find the last checkpoint by its number alone, so a run killed while it
saves leaves a folder that every resume then fails on. Here, as in Hugging
Face's ``Trainer``, a save goes to a folder of its own first
(:func:`staging_directory`: ``tmp-checkpoint-N`` in ``output_dir``),
:data:`MANIFEST_FILE` is written last, listing every file with its size
(:func:`write_manifest`), and only then does the folder take its name
(:func:`publish`). A kill at any moment leaves the earlier checkpoints and
either the complete new one or a ``tmp-`` folder that no finder takes; a
file truncated or deleted later is found by its size
(:func:`incompleteness`). :func:`newest_complete_checkpoint` skips what is
incomplete, with one line each saying which folder and why.

Nothing here deletes a user's data: a ``tmp-`` folder is an unfinished save
of this module and is emptied when the same save runs again; a
``checkpoint-N`` that a new save of step ``N`` replaces (a run resumed from
an older checkpoint) is kept beside it as ``replaced-checkpoint-N``.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from typing import Any, Dict, List, Optional, Tuple

__all__ = [
    "MANIFEST_FILE",
    "atomic_write",
    "checkpoint_step",
    "incompleteness",
    "newest_complete_checkpoint",
    "publish",
    "read_manifest",
    "staging_directory",
    "write_manifest",
]

#: The file a complete save holds, written last: its files with their sizes, its step and its run's settings.
MANIFEST_FILE = "paddle_llrd_manifest.json"
# A save's folder until it is complete (Hugging Face's name for a checkpoint's).
_STAGING_PREFIX = "tmp-"
_REPLACED_PREFIX = "replaced-"
# Both frameworks name checkpoints f"{PREFIX_CHECKPOINT_DIR}-{global_step}" and find them by this pattern.
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
_STAGED_CHECKPOINT = re.compile(r"^" + _STAGING_PREFIX + r"checkpoint-(\d+)$")


def staging_directory(target: str) -> str:
    """Where a save meant for ``target`` is written until it is complete: ``tmp-<name>`` beside it.

    Examples:
        >>> staging_directory("out/checkpoint-3")
        'out/tmp-checkpoint-3'
    """
    parent, name = os.path.split(os.path.normpath(target))
    return os.path.join(parent, _STAGING_PREFIX + name)


def empty_staging_directory(path: str) -> None:
    """``path`` (a :func:`staging_directory`) as an empty folder: what a save stopped there left is removed
    first; a folder of that name is only ever an unfinished save."""
    if not os.path.basename(os.path.normpath(path)).startswith(_STAGING_PREFIX):
        raise ValueError(f"{path} is not a staging directory (its name starts with {_STAGING_PREFIX!r})")
    if os.path.isdir(path):
        shutil.rmtree(path)
    os.makedirs(path)


def atomic_write(path: str, write: Any) -> None:
    """``write(temporary_path)``, then the file renamed to ``path``: a kill leaves the old file or the new one.

    Examples:
        >>> import tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "note.txt")
        >>> atomic_write(path, lambda temporary: open(temporary, "w").write("done"))
        >>> open(path).read(), os.listdir(os.path.dirname(path))
        ('done', ['note.txt'])
    """
    temporary = f"{path}.{_STAGING_PREFIX}{os.getpid()}"
    write(temporary)
    os.replace(temporary, path)


def _files(directory: str) -> Dict[str, int]:
    """Every file under ``directory`` but the manifest: ``{relative path: size in bytes}``."""
    sizes = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            relative = os.path.relpath(path, directory)
            if relative != MANIFEST_FILE:
                sizes[relative.replace(os.sep, "/")] = os.path.getsize(path)
    return sizes


def write_manifest(directory: str, record: Dict[str, Any]) -> None:
    """:data:`MANIFEST_FILE` in ``directory``: ``record`` (its step, its run's settings) and ``"files"``, the
    size of every file the folder holds now. Written last: a folder with a manifest was saved in full."""
    manifest = {**record, "files": _files(directory)}

    def write(path: str) -> None:
        with open(path, "w", encoding="utf-8") as file:
            json.dump(manifest, file, indent=1, sort_keys=True)
            file.flush()
            os.fsync(file.fileno())

    atomic_write(os.path.join(directory, MANIFEST_FILE), write)


def read_manifest(directory: str) -> Optional[Dict[str, Any]]:
    """The manifest of ``directory``; ``None`` when it has none.

    Raises:
        ValueError: the manifest does not parse (the file was damaged after the save).
    """
    path = os.path.join(directory, MANIFEST_FILE)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as file:
            manifest = json.load(file)
    except (OSError, ValueError) as exc:
        raise ValueError(f"its {MANIFEST_FILE} does not parse ({exc})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise ValueError(f"its {MANIFEST_FILE} lists no files")
    return manifest


def incompleteness(directory: str) -> Optional[str]:
    """Why the save in ``directory`` is not complete (a file its manifest lists is missing or has another
    size, the manifest is damaged, the folder is empty); ``None`` when it is complete or has no manifest
    (a checkpoint of a framework's own ``Trainer``, which nothing here can check).

    Examples:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> _ = open(os.path.join(folder, "model.pdparams"), "wb").write(b"1234")
        >>> write_manifest(folder, {"global_step": 3})
        >>> incompleteness(folder) is None
        True
        >>> _ = open(os.path.join(folder, "model.pdparams"), "wb").write(b"12")
        >>> incompleteness(folder)
        'model.pdparams has 2 bytes where the save wrote 4'
    """
    if not os.listdir(directory):
        return "it is empty"
    try:
        manifest = read_manifest(directory)
    except ValueError as exc:
        return str(exc)
    if manifest is None:
        return None
    for name, size in sorted(manifest["files"].items()):
        path = os.path.join(directory, *name.split("/"))
        if not os.path.isfile(path):
            return f"{name} is missing"
        found = os.path.getsize(path)
        if found != size:
            return f"{name} has {found} bytes where the save wrote {size}"
    return None


def checkpoint_step(directory: str) -> Optional[int]:
    """The step in a checkpoint folder's name (``checkpoint-12`` -> 12), else ``None``."""
    found = _CHECKPOINT.match(os.path.basename(os.path.normpath(directory)))
    return int(found.group(1)) if found else None


def _kept_name(target: str) -> str:
    """A free name beside ``target`` for the folder a new save replaces: ``replaced-<name>``, then ``-2``, ..."""
    parent, name = os.path.split(os.path.normpath(target))
    candidate, number = os.path.join(parent, _REPLACED_PREFIX + name), 1
    while os.path.exists(candidate):
        number += 1
        candidate = os.path.join(parent, f"{_REPLACED_PREFIX}{name}-{number}")
    return candidate


def publish(staged: str, target: str, *, keep_replaced: bool = True) -> Optional[str]:
    """Give the complete save ``staged`` its name ``target`` (a rename: a kill leaves one of the two).

    A ``target`` already there is moved aside first, to a ``replaced-`` name (returned) with
    ``keep_replaced``, else removed once the new save has its place (the final EMA, which a new final
    save supersedes as it does the model's files).
    """
    if not os.path.exists(target):
        os.replace(staged, target)
        return None
    aside = _kept_name(target) if keep_replaced else staging_directory(target) + "-replaced"
    os.replace(target, aside)
    os.replace(staged, target)
    if keep_replaced:
        return aside
    shutil.rmtree(aside)
    return None


def _numbered_folders(output_dir: str) -> List[Tuple[int, bool, str]]:
    """``(step, staged, path)`` of every ``checkpoint-N`` and ``tmp-checkpoint-N`` folder, newest first."""
    found = []
    for name in os.listdir(output_dir):
        path = os.path.join(output_dir, name)
        for pattern, staged in ((_CHECKPOINT, False), (_STAGED_CHECKPOINT, True)):
            matched = pattern.match(name)
            if matched and os.path.isdir(path):
                found.append((int(matched.group(1)), staged, path))
    return sorted(found, key=lambda item: (item[0], not item[1]), reverse=True)


def newest_complete_checkpoint(output_dir: str) -> Tuple[Optional[str], List[str]]:
    """The newest checkpoint of ``output_dir`` whose save is complete (or that has no manifest to check:
    a framework ``Trainer``'s, for the resume's own checks to judge), and one line for each newer folder
    skipped, saying which and why. ``(None, lines)`` without one.

    Examples:
        >>> import tempfile
        >>> out = tempfile.mkdtemp()
        >>> for name in ("checkpoint-2", "checkpoint-4"):
        ...     os.makedirs(os.path.join(out, name))
        ...     _ = open(os.path.join(out, name, "model.pdparams"), "wb").write(b"1234")
        ...     write_manifest(os.path.join(out, name), {"global_step": int(name[-1])})
        >>> os.makedirs(os.path.join(out, "tmp-checkpoint-6"))
        >>> _ = open(os.path.join(out, "checkpoint-4", "model.pdparams"), "wb").write(b"1")
        >>> checkpoint, skipped = newest_complete_checkpoint(out)
        >>> os.path.basename(checkpoint)
        'checkpoint-2'
        >>> print("\\n".join(line.replace(out, "out") for line in skipped))
        skipped out/tmp-checkpoint-6: a save that did not finish (the run stopped while it wrote this checkpoint)
        skipped out/checkpoint-4: incomplete, model.pdparams has 1 bytes where the save wrote 4
    """
    skipped = []
    if not os.path.isdir(output_dir):
        return None, skipped
    for _, staged, path in _numbered_folders(output_dir):
        if staged:
            skipped.append(f"skipped {path}: a save that did not finish (the run stopped while it wrote this "
                           "checkpoint)")
            continue
        problem = incompleteness(path)
        if problem is None:
            return path, skipped
        skipped.append(f"skipped {path}: incomplete, {problem}")
    return None, skipped
