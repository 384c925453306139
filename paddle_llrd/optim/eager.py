"""Methods that run eagerly under ``paddle.jit.to_static``, by construction.

Paddle 3's default translator (SOT) simulates the bytecode of a function
called from a translated frame and, when a call breaks the graph, runs the
callee for real while still translating the frames the callee calls.
Paddle's own optimizers escape both because SOT skips Paddle's files and
their ``no_grad`` wrapper breaks the graph. A method decorated with
:func:`runs_eagerly_under_sot` escapes them the way SOT offers for code of
its own: its wrapper calls ``paddle.jit.sot.psdb.fallback(recursive=True)``
first, so a translated frame that calls it breaks the graph there, and the
wrapper itself, when SOT meets it, falls back to plain Python with the
translator off for everything it calls. The wrapper holds no ``try`` or
``with`` (a frame with an exception table is never handed to SOT on Python
3.11+, so its callees would be translated one by one).
"""
from __future__ import annotations

import functools
from typing import Callable, TypeVar

try:
    from paddle.jit.sot.psdb import fallback as _sot_fallback
except ImportError:  # pragma: no cover - a Paddle without SOT

    def _sot_fallback(recursive: bool = False) -> None:
        return None


F = TypeVar("F", bound=Callable)

__all__ = ["runs_eagerly_under_sot"]


def runs_eagerly_under_sot(method: F) -> F:
    """``method``, run as plain Python (with everything it calls) under ``paddle.jit.to_static``.

    Outside ``to_static`` the wrapper costs one no-op call.

    Examples:
        >>> import paddle
        >>> @runs_eagerly_under_sot
        ... def count_calls(counter):
        ...     counter.append(1)
        ...     return len(counter)
        >>> count_calls([])
        1
    """

    @functools.wraps(method)
    def run_eagerly(*args, **kwargs):
        _sot_fallback(recursive=True)
        return method(*args, **kwargs)

    return run_eagerly  # type: ignore[return-value]
