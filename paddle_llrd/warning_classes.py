"""The warnings ``paddle_llrd`` gives, as classes under one base, :class:`LLRDWarning`.

Every warning the package gives is an instance of one of these classes, so
that a user (and the package itself) filters them by class, never by the
text of the message::

    import warnings
    import paddle_llrd

    warnings.filterwarnings("ignore", category=paddle_llrd.LongWarmupWarning)
    warnings.filterwarnings("error", category=paddle_llrd.LLRDWarning)

All derive from :class:`UserWarning`, so ``pytest.warns(UserWarning)`` and
``-W error::UserWarning`` see them as before.

Examples:
    >>> import warnings
    >>> from paddle_llrd import LLRDWarning, LongWarmupWarning
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warnings.warn("a warmup longer than training", LongWarmupWarning)
    >>> issubclass(caught[0].category, LLRDWarning), issubclass(LLRDWarning, UserWarning)
    (True, True)

:func:`stacklevel_outside_package` points a warning at the user's line,
however deep in the package it is given.
"""
from __future__ import annotations

import contextlib
import os
import sys

import paddle

__all__ = [
    "AdamWDifferenceWarning",
    "CheckpointMatchWarning",
    "DecayAboveOneWarning",
    "DetachedSchedulerWarning",
    "EMAHorizonWarning",
    "FusedOperatorWarning",
    "LLRDWarning",
    "LayerMapWarning",
    "LongWarmupWarning",
    "TrainerSettingWarning",
    "stacklevel_outside_package",
]

_PACKAGE_DIRECTORY = os.path.dirname(os.path.abspath(__file__)) + os.sep
# Frames a warning passes through on its way to the user's line: the package's own, Paddle's
# (its optimizer's pass calls into the package) and contextlib's (Paddle's no_grad decorator on
# the optimizer's step runs there).
_PASSED_THROUGH = (_PACKAGE_DIRECTORY, os.path.dirname(os.path.abspath(paddle.__file__)) + os.sep,
                   contextlib.__file__)


class LLRDWarning(UserWarning):
    """The base of every warning of ``paddle_llrd``."""


class LongWarmupWarning(LLRDWarning):
    """A warmup longer than the training it is part of: the lr is still climbing when training ends."""


class DetachedSchedulerWarning(LLRDWarning):
    """A scheduler stepped that no optimizer follows: its lr changes, the optimizer's does not (it was given a
    float ``learning_rate``)."""


class DecayAboveOneWarning(LLRDWarning):
    """A ``layerwise_decay`` above 1: lower layers train faster than the head."""


class LayerMapWarning(LLRDWarning):
    """Layer ratios that probably do not fit the model: no layer found in its names, or ``n_layers``
    deeper than the deepest block the ratios read."""


class CheckpointMatchWarning(LLRDWarning):
    """A resumed state that could not be matched in full: checkpoint entries left unused, a parameter
    or a piece of state (a schedule's position, an EMA) the checkpoint does not hold."""


class EMAHorizonWarning(LLRDWarning):
    """A moving average whose horizon, ``1 / (1 - decay)`` updates, is longer than the planned run."""


class AdamWDifferenceWarning(LLRDWarning):
    """An update whose numbers differ from ``paddle.optimizer.AdamW``'s by design (without layer ratios):
    a Tensor lr factor, which AdamWDL multiplies with the global learning rate, and Tensor betas, whose
    bias correction AdamWDL starts at their values (docs: adamwdl, "Everything else AdamW does")."""


class FusedOperatorWarning(LLRDWarning):
    """The fused CPU operator cannot run here (not built, or its numbers differ from Paddle's
    kernels on this machine): the multi-tensor step runs Paddle's kernels instead, with the same numbers."""


class TrainerSettingWarning(LLRDWarning):
    """A Trainer or ``python -m paddle_llrd train`` setting that will not do what it says
    (a warmup for a schedule that has none, a default the command changes)."""


def stacklevel_outside_package() -> int:
    """The ``stacklevel`` for :func:`warnings.warn` that points at the first caller outside ``paddle_llrd``
    (past Paddle's frames, whose optimizer pass calls into the package, and ``contextlib``'s, where
    Paddle's ``no_grad`` decorator runs the optimizer's step).

    Call it in the argument list of ``warnings.warn``: the warning then names
    the user's line however deep in the package it was given (a registry
    function building a scheduler class, a Trainer building the optimizer).
    """
    level = 1
    frame = sys._getframe(1)  # the function that warns
    while frame is not None and frame.f_code.co_filename.startswith(_PASSED_THROUGH):
        frame = frame.f_back
        level += 1
    return level
