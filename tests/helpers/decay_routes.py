"""Every decoupled decay of an optimizer as the separate op, for the tests that pin both
routes of docs/adamwdl.rst ("The decay: fused into the kernel or a separate op").

The kernel takes the decay where :func:`paddle_llrd.optim.per_parameter.fused_decay_coeff`
can express it. :func:`separate_decay` has an optimizer's ``step`` and ``minimize`` run
with that rule answering None (its answer for a ratio of 0), so that every decay of that
optimizer takes the separate op, whichever path it is on, and no other optimizer's does.
"""
from __future__ import annotations

import functools
from typing import Any
from unittest import mock

from paddle_llrd.optim import per_parameter


def _not_fused(*args: Any) -> None:
    return None


def separate_decay(optimizer: Any, enabled: bool = True) -> Any:
    """``optimizer``, whose every decay takes the separate op if ``enabled``."""
    if not enabled:
        return optimizer
    for name in ("step", "minimize"):
        method = getattr(optimizer, name)

        @functools.wraps(method)
        def under_the_rule(*args: Any, _method: Any = method, **kwargs: Any) -> Any:
            with mock.patch.object(per_parameter, "fused_decay_coeff", _not_fused):
                return _method(*args, **kwargs)

        setattr(optimizer, name, under_the_rule)
    return optimizer
