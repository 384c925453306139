"""Where AdamWDL deliberately computes other numbers than ``paddle.optimizer.AdamW``
(without layer ratios), each said when it arises with an
:class:`~paddle_llrd.AdamWDifferenceWarning` naming what differs (docs: adamwdl,
"Everything else AdamW does"):

- a Tensor ``optimize_attr['learning_rate']``: AdamWDL takes it as the factor
  :math:`s_p` of the global learning rate, as it takes a float; Paddle's
  ``_create_param_lr`` takes a Tensor there as the parameter's whole learning rate;
- Tensor betas: AdamWDL starts the beta powers of the bias correction at the
  Tensors' values (Adam's formula); Paddle 3.3.1 starts them at 0.9 and 0.999
  whatever the Tensors hold.
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..checks import optimizer_name
from ..warning_classes import AdamWDifferenceWarning, stacklevel_outside_package
from .kernels import is_tensor
from .param_state import UNSET_BETA_POW

__all__ = ["PADDLE_TENSOR_BETA_POWS", "warn_if_beta_pows_differ", "warn_if_tensor_lr_factor"]

#: Where Paddle 3.3.1's AdamW starts the beta powers of a Tensor ``beta1`` and ``beta2``
#: (its ``_add_moments_pows``), whatever the Tensor holds.
PADDLE_TENSOR_BETA_POWS = (0.9, 0.999)


def warn_if_tensor_lr_factor(param: Any, factor: Any) -> None:
    """Warn if ``factor``, ``param``'s ``optimize_attr['learning_rate']``, is a Tensor (the caller
    tests ``type(factor) is float`` first, which saves a call per parameter).

    Examples:
        >>> warn_if_tensor_lr_factor(None, 0.5)  # a float factor: both optimizers read it alike
    """
    if type(factor) is float or not is_tensor(factor):
        return
    warnings.warn(
        f"{optimizer_name()}: parameter {param.name!r} has a Tensor optimize_attr['learning_rate'], which "
        f"paddle_llrd.{optimizer_name()} takes as a factor of the global learning rate (as a float) and "
        "paddle.optimizer.AdamW as the parameter's whole learning rate; a float factor gives both the same "
        "learning rate",
        AdamWDifferenceWarning, stacklevel=stacklevel_outside_package(),
    )


def warn_if_beta_pows_differ(beta1: Any, beta2: Any, started: tuple[Any, Any]) -> None:
    """Warn if Tensor betas start the beta powers (at ``started``: the Tensors' values, or
    :data:`~paddle_llrd.optim.param_state.UNSET_BETA_POW` in a program, which sets them at its
    first run) elsewhere than Paddle's AdamW starts them (:data:`PADDLE_TENSOR_BETA_POWS`), in float32.

    Examples:
        >>> warn_if_beta_pows_differ(0.8, 0.99, (0.8, 0.99))  # float betas: both start at them
    """
    for name, beta, value, paddles in zip(("beta1", "beta2"), (beta1, beta2), started, PADDLE_TENSOR_BETA_POWS):
        if not is_tensor(beta) or np.float32(value) == np.float32(paddles):
            continue
        value = "its value at the program's first run" if value == UNSET_BETA_POW else f"{value:g}"
        warnings.warn(
            f"{optimizer_name()}: {name} is a Tensor: the bias correction starts from {name}^1 = {value} "
            f"(Adam's formula), where paddle.optimizer.AdamW starts it at {paddles} whatever the Tensor holds",
            AdamWDifferenceWarning, stacklevel=stacklevel_outside_package(),
        )
