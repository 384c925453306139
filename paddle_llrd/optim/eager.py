"""Methods that run eagerly under ``paddle.jit.to_static``, by construction.

Paddle 3's default translator (SOT) simulates the bytecode of a function
called from a translated frame and, when a call breaks the graph, runs the
callee for real while still translating the frames the callee calls.
Paddle's own optimizers escape both because SOT skips Paddle's files and
their ``no_grad`` wrapper breaks the graph. A method decorated with
:func:`runs_eagerly_under_sot` escapes them by the two means SOT offers:
its wrapper first calls ``paddle.jit.sot.psdb.fallback()``, SOT's marker for
code it must not simulate, so a translated frame that calls the method
breaks the graph there; then it runs the method with SOT's frame hook off
(``paddle.framework.core.set_eval_frame(None)``, as SOT's own
``no_eval_frame`` and ``psdb.breakpoint`` do), so nothing the method calls is
translated either.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

try:
    from paddle.base.core import set_eval_frame as _set_eval_frame
    from paddle.jit.sot.psdb import fallback as _sot_fallback
except ImportError:  # pragma: no cover - a Paddle without SOT

    def _sot_fallback() -> None:
        return None

    def _set_eval_frame(callback: Any) -> Any:
        return None


F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["runs_eagerly_under_sot"]


def runs_eagerly_under_sot(method: F) -> F:
    """``method``, run as plain Python (with everything it calls) under ``paddle.jit.to_static``.

    Outside ``to_static`` the wrapper costs three calls that do nothing.

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
    def run_eagerly(*args: Any, **kwargs: Any) -> Any:
        _sot_fallback()  # SOT simulating the caller breaks the graph at this call
        translator = _set_eval_frame(None)  # and nothing below is translated
        try:
            return method(*args, **kwargs)
        finally:
            _set_eval_frame(translator)

    return run_eagerly  # type: ignore[return-value]
