"""Which registered schedule an unknown name meant: the "Did you mean" of :func:`~paddle_llrd.get_scheduler`.

Users of Hugging Face and PaddleNLP name a schedule by its function or class
(``"get_cosine_schedule_with_warmup"``, ``"CosineDecayWithWarmup"``) or by its
words in another order (``"cosine_warmup"``, ``"warmup_linear"``). Such a name
has the words of a registered name, or of its function's name, once the words
that say nothing of the curve are left out (:data:`FILLER_WORDS`): that
schedule is the suggestion, the first in the registry's order (PaddleNLP's
five names first). Otherwise the closest spelling is
(:func:`~paddle_llrd.checks.did_you_mean`): ``"cosin"`` is ``"cosine"``.

Examples:
    >>> from paddle_llrd.schedules.registry import TYPE_TO_SCHEDULER_FUNCTION
    >>> closest_schedule("cosine_warmup", TYPE_TO_SCHEDULER_FUNCTION)
    " Did you mean 'cosine'?"
"""
from __future__ import annotations

import re
from typing import Any, Callable, FrozenSet, Mapping

from ..checks import did_you_mean

__all__ = ["FILLER_WORDS", "closest_schedule", "schedule_words"]

#: Words of schedule and function names that say nothing of the curve: every function is ``get_*_schedule``,
#: every warmup schedule's ``*_with_warmup``, and the classes' ``*DecayWithWarmup``.
FILLER_WORDS = frozenset({"get", "schedule", "scheduler", "with", "decay", "lr"})
# The short words of PaddleNLP's class names.
_SYNONYMS = {"poly": "polynomial", "const": "constant"}
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def schedule_words(name: str) -> FrozenSet[str]:
    """The words of ``name`` that say something of the curve, lower case, in any order.

    Examples:
        >>> sorted(schedule_words("CosineDecayWithWarmup")), sorted(schedule_words("get_wsd_schedule"))
        (['cosine', 'warmup'], ['wsd'])
    """
    words = (_SYNONYMS.get(word.lower(), word.lower()) for word in _WORD.findall(name))
    return frozenset(word for word in words if word not in FILLER_WORDS)


def closest_schedule(name: Any, table: Mapping[Any, Callable[..., Any]]) -> str:
    """``" Did you mean '<registered name>'?"`` for the schedule ``name`` meant, or ``""`` when none is close.

    ``table`` is the registry's name -> schedule function; a name and its function both count.
    """
    words = schedule_words(str(name))
    for registered, function in table.items():
        if words and words in (schedule_words(str(registered)), schedule_words(getattr(function, "__name__", ""))):
            return f" Did you mean {str(registered)!r}?"
    return did_you_mean(str(name), [str(registered) for registered in table])
