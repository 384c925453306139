r"""What a structured parameter name says about its block, and the rules of the arguments that name blocks.

Each Transformer family names its blocks its own way (:data:`FAMILY_PATTERNS`:
``encoder.layers.N``, ``h.N``, ``model.layers.N``, ``blocks.N``) and its
embeddings too (:data:`EMBEDDING_NAME`); a user names other models' blocks
with a regular expression whose one group is the block index
(:func:`checked_block_regex`, :func:`block_regex_problem`), and their number
with ``n_layers`` (:func:`checked_n_layers`). :class:`~paddle_llrd.LayerMap`
reads names by these rules; the Trainers' ``layer_map`` field, ``lr-table
--pattern`` and :class:`~paddle_llrd.AdamWDL`'s ``n_layers`` check by them.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ..checks import checked_count

__all__ = [
    "EMBEDDING_NAME",
    "FAMILY_PATTERNS",
    "block_regex_problem",
    "checked_block_regex",
    "checked_n_layers",
]

#: Each family's block names: regular expressions whose one group is the block index.
FAMILY_PATTERNS: dict[str, tuple[str, ...]] = {
    "bert": (r"(?:^|\.)encoder\.layers?\.(\d+)\.",),
    "gpt": (r"(?:^|\.)decoder\.layers\.(\d+)\.", r"(?:^|\.)h\.(\d+)\."),
    "llama": (r"(?:^|\.)model\.layers\.(\d+)\.", r"(?:^|\.)layers\.(\d+)\."),
    "vit": (r"(?:^|\.)blocks\.(\d+)\.",),
}
#: An embedding's structured name: any name containing ``embed``, GPT-2's ``wte``/``wpe``, ViT's
#: ``cls_token``, DeiT's ``dist_token``, BEiT's ``mask_token``.
EMBEDDING_NAME = re.compile(r"embed|(?:^|\.)(?:wte|wpe|cls_token|dist_token|mask_token)(?:\.|$)")
_BLOCK_REGEX_EXAMPLE = r"'^stages\.(\d+)\.'"


def checked_n_layers(value: Any, *, owner: str) -> int:
    """``n_layers``, the number of blocks, as an int ``>= 0`` (0: a model without blocks).

    The one rule of ``n_layers`` wherever it is given: :class:`~paddle_llrd.LayerMap`,
    :func:`~paddle_llrd.resolve_layer_map` (so :func:`~paddle_llrd.layer_decay_param_groups`
    and the Trainer's ``n_layers`` keyword), :class:`~paddle_llrd.AdamWDL`.

    Raises:
        TypeError: not an int (a bool and a float are refused).
        ValueError: negative.

    Examples:
        >>> checked_n_layers(12, owner="AdamWDL")
        12
        >>> checked_n_layers(-1, owner="LayerMap")
        Traceback (most recent call last):
        ...
        ValueError: LayerMap: `n_layers` must be an int >= 0 (the model's number of blocks), got -1.
    """
    return checked_count(value, "n_layers", owner=owner, minimum=0, meaning="the model's number of blocks")


def block_regex_problem(text: str) -> str | None:
    r"""Why ``text`` is no block regex, or ``None`` when it is one.

    A block regex (``layer_map``, ``LayerMap(pattern=...)``, ``lr-table
    --pattern``) is a regular expression with exactly one group, which
    captures the block index.

    Examples:
        >>> block_regex_problem(r"^stages\.(\d+)\.") is None
        True
        >>> print(block_regex_problem(r"(a)(\d+)"))
        has 2 groups; it needs exactly one, capturing the block index, e.g. '^stages\.(\d+)\.'
    """
    try:
        groups = re.compile(text).groups
    except re.error as exc:
        return f"is no regular expression: {exc}"
    if groups != 1:
        return f"has {groups} groups; it needs exactly one, capturing the block index, e.g. {_BLOCK_REGEX_EXAMPLE}"
    return None


def checked_block_regex(value: Any, argument: str, *, families: Iterable[str] = ()) -> str:
    r"""``value`` when it is a block regex (see :func:`block_regex_problem`),
    ``"auto"`` or one of ``families``; else an error naming ``argument``.

    Raises:
        TypeError: ``value`` is not a str.
        ValueError: ``value`` is no family and no regular expression with
            exactly one group.

    Examples:
        >>> checked_block_regex(r"^stages\.(\d+)\.", "pattern")
        '^stages\\.(\\d+)\\.'
        >>> checked_block_regex("lama", "layer_map", families=["bert", "llama"])
        Traceback (most recent call last):
        ...
        ValueError: `layer_map` must be 'auto', a family (bert, llama) or a regular expression whose one group captures the block index; 'lama' is no family and has 0 groups; it needs exactly one, capturing the block index, e.g. '^stages\.(\d+)\.'
    """
    names = sorted(families)
    kinds = f"'auto', a family ({', '.join(names)}) or a regular expression" if names else "a regular expression"
    if not isinstance(value, str):
        raise TypeError(f"`{argument}` must be {kinds} (a str), got {type(value).__name__} {value!r}")
    if names and (value == "auto" or value in names):
        return value
    problem = block_regex_problem(value)
    if problem is not None:
        no_family = "is no family and " if names else ""
        raise ValueError(
            f"`{argument}` must be {kinds} whose one group captures the block index; {value!r} {no_family}{problem}"
        )
    return value
