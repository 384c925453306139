"""What one AdamWDL step updates, as plain data: the vocabulary of the step.

Glossary (the vocabulary of a step; :doc:`/adamwdl`, "One step"):

- :class:`~paddle_llrd.optim.param_state.ParamState`: one parameter's state
  tensors as the kernel takes them (moments, beta powers, master weight).
- :class:`AdamSettings`: one parameter group's scalars (betas, epsilon, weight decay, lazy mode, AMSGrad).
- :class:`UpdateBatch`: one parameter group's update: its settings and
  clipping, and per trained parameter its name, state, lr factor :math:`s_p`,
  layer ratio :math:`r_p` and whether it decays.
- :class:`UpdatePath`: which implementation a step ran, and why not the
  multi-tensor one.

``AdamWDL.step`` collects an :class:`UpdateBatch` per parameter group,
:func:`~paddle_llrd.optim.adamwdl.choose_update_path` picks the implementation,
and it runs:
:func:`~paddle_llrd.optim.multi_tensor.multi_tensor_update` (one kernel call
per group of like parameters) or Paddle's pass over
:func:`~paddle_llrd.optim.per_parameter.update_parameter` (one call per
parameter; sparse gradients take the ``adam`` kernel there). A new update
path is a module of functions over the batches beside them, and a reason in
``choose_update_path``.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from .param_state import ParamState

__all__ = ["MULTI_TENSOR", "AdamSettings", "UpdateBatch", "UpdatePath"]


class AdamSettings(NamedTuple):
    """The kernel settings of a parameter group, read once per pass and group."""

    beta1: Any
    """As given: a float or a Tensor (a legacy program feeds a Tensor to the op)."""
    beta2: Any
    beta1_value: Any
    """``beta1`` as the eager and PIR kernels take it (a Tensor's value read once, not per parameter)."""
    beta2_value: Any
    epsilon: Any
    lazy_mode: bool
    amsgrad: bool
    found_inf: Any
    """The AMP overflow flag of a static program (None in dygraph, which skips the whole pass)."""
    dygraph: bool
    coeff: Any
    """The group's weight decay :math:`\\lambda`."""


class UpdateBatch(NamedTuple):
    """One parameter group's update at this step, in the optimizer's parameter order."""

    settings: AdamSettings
    grad_clip: Any
    """The group's gradient clipping (None: none)."""
    own_clip: bool
    """Whether the group's dict gives a ``grad_clip`` other than the optimizer's."""
    params: list[Any]
    """The trained parameters with a gradient."""
    states: list[ParamState]
    lr_factors: list[Any]
    """:math:`s_p`, each parameter's ``optimize_attr['learning_rate']`` (None without one)."""
    ratios: list[float] | None
    """:math:`r_p`, the cached layer ratios (1.0 without ``set_param_lr_fun``); None where
    the function is asked at every update (not pure in the name)."""
    decays: list[bool]
    """``apply_decay_param_fun``'s answers (all True without one)."""
    names: list[str]
    """The parameters' names, kept: Paddle makes a new string at each read of ``param.name``."""


class UpdatePath(NamedTuple):
    """Which implementation an AdamWDL update ran (``AdamWDL.last_update_path``).

    ``path``: ``"multi_tensor"`` (one kernel call per group of like parameters
    over flat buffers) or ``"per_parameter"`` (one kernel call per
    parameter); ``reason``: why the update was not the multi-tensor one (None
    when it was).
    """

    path: str
    reason: str | None = None


MULTI_TENSOR = UpdatePath("multi_tensor")

