"""What one AdamWDL step updates, as plain data: the vocabulary of the step.

Glossary: the concepts on a dygraph step's path (:doc:`/adamwdl`, "One step").

- :class:`~paddle_llrd.optim.adamwdl.AdamWDL`: owns the parameters, Paddle's
  optimizer state and the public API; its ``step`` reads everything below
  afresh at every step.
- :class:`AdamSettings`: one parameter group's scalars (betas, epsilon,
  weight decay, lazy mode, AMSGrad).
- :class:`UpdateBatch`: one parameter group's update at this step: its
  settings and clip, and per trained parameter its gradient, name, lr factor
  :math:`s_p`, layer ratio :math:`r_p`, decay answer, ``need_clip`` and
  regularizer.
- :class:`~paddle_llrd.optim.ratios.LayerRatios`: the ratio function the
  updates ask, with its cached ratios where it is pure in the name.
- :class:`~paddle_llrd.optim.scheduled_decay.ScheduledDecay`: the
  weight-decay schedule, read before a step and advanced after it.
- :class:`UpdatePath`: which implementation a step ran, and why not a faster one.
- :class:`~paddle_llrd.optim.multi_tensor.FlatLayout`: the parameters and
  their moments (and master weights) as views of flat buffers, banks of
  segments, with the description they were laid out from; the gradients
  stay Paddle's own tensors.
- the fused operator (:mod:`~paddle_llrd.optim.fused_operator`): the
  compiled CPU update of a whole layout in one call.
- :class:`~paddle_llrd.optim.per_parameter.ParameterPass`: what the
  per-parameter updates of one of Paddle's passes share.
- :class:`~paddle_llrd.optim.param_state.ParamState`: one parameter's state
  tensors as a kernel takes them, read from Paddle's accumulators.

What a step keeps for the next one (nothing else; everything else is read
afresh): Paddle's accumulators (moments, beta powers, master weights), the
weight-decay schedule's position, and the flat layout, which serves a step
only where :meth:`FlatLayout.serves <paddle_llrd.optim.multi_tensor.FlatLayout.serves>`
finds this step's description equal to its own, every parameter still its
view and the beta powers one value.

``AdamWDL.step`` collects an :class:`UpdateBatch` per parameter group,
:func:`~paddle_llrd.optim.multi_tensor.choose_update_path` picks the
implementation, and it runs: the fused operator over the flat layout, or
Paddle's kernels over it (:mod:`~paddle_llrd.optim.flat_kernels`), or
Paddle's pass over :func:`~paddle_llrd.optim.per_parameter.update_parameter`
(one call per parameter).
"""
from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["FUSED", "MULTI_TENSOR", "AdamSettings", "UpdateBatch", "UpdatePath"]


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
    """The group's weight decay :math:`\\lambda` (a dygraph Tensor's value, as Paddle's AdamW reads it)."""


class UpdateBatch(NamedTuple):
    """One parameter group's update at this step, in the optimizer's parameter order, read afresh."""

    settings: AdamSettings
    grad_clip: Any
    """The clip Paddle applies to the group (the optimizer's ``_grad_clip``, or a group's
    ``grad_clip`` entry); None: none."""
    params: list[Any]
    """The trained parameters with a gradient."""
    grads: list[Any]
    """Their gradients (Paddle's own tensors, as the backward left them)."""
    names: list[str]
    lr_factors: list[Any]
    """:math:`s_p`, each parameter's ``optimize_attr['learning_rate']`` (None without one)."""
    ratios: list[float] | None
    """:math:`r_p` (1.0 without ``set_param_lr_fun``); None where the function is asked at
    every update (not pure in the name)."""
    decays: list[bool]
    """``apply_decay_param_fun``'s answers (all True without one)."""
    need_clip: list[bool]
    """Whether Paddle's clip takes each parameter: its ``need_clip`` is not ``False`` (Paddle
    tests ``is False``: a ``0`` or ``numpy.False_`` is clipped)."""
    regularizers: list[Any]
    """Each parameter's ``regularizer`` (None: none)."""


class UpdatePath(NamedTuple):
    """Which implementation an AdamWDL update ran (``AdamWDL.last_update_path``).

    ``path``: ``"fused"`` (the compiled operator, one call over flat buffers),
    ``"multi_tensor"`` (Paddle's kernels over the same flat buffers, one call
    per group of like parameters) or ``"per_parameter"`` (one kernel call per
    parameter); ``reason``: why the update was not the fused one (None when it was).
    """

    path: str
    reason: str | None = None


FUSED = UpdatePath("fused")
MULTI_TENSOR = "multi_tensor"
