"""What one AdamWDL step updates, as plain data, and the one choice of how.

Glossary (the vocabulary of a step; :doc:`/adamwdl`, "One step"):

- :class:`~paddle_llrd.optim.param_state.ParamState`: one parameter's state
  tensors as the kernel takes them (moments, beta powers, master weight).
- :class:`~paddle_llrd.optim.per_parameter.AdamSettings`: one parameter
  group's scalars (betas, epsilon, weight decay, lazy mode, AMSGrad).
- :class:`UpdateBatch`: one parameter group's update: its settings and
  clipping, and per trained parameter its state, lr factor :math:`s_p`,
  layer ratio :math:`r_p` and whether it decays.
- :class:`UpdatePath`: which implementation a step ran, and why not the
  multi-tensor one.

``AdamWDL.step`` collects an :class:`UpdateBatch` per parameter group,
:func:`choose_update_path` picks the implementation, and it runs:
:func:`~paddle_llrd.optim.multi_tensor.multi_tensor_update` (one kernel call
per group of like parameters) or Paddle's pass over
:func:`~paddle_llrd.optim.per_parameter.update_parameter` (one call per
parameter; sparse gradients take the ``adam`` kernel there). A new update
path is a function over the batches beside them, and a reason here.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from .clipping import flat_clip_refusal
from .kernels import is_tensor
from .param_state import ParamState
from .per_parameter import AdamSettings

if TYPE_CHECKING:
    from .multi_tensor import FlatState

__all__ = ["MULTI_TENSOR", "UpdateBatch", "UpdatePath", "choose_update_path"]


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

_SETTINGS_FIELDS = (("beta1", "beta1"), ("beta2", "beta2"), ("epsilon", "epsilon"), ("coeff", "weight_decay"))


def choose_update_path(batches: Sequence[UpdateBatch], flat: FlatState | None, *, dygraph: bool,
                       overflow: bool, given_gradients: str | None = None) -> UpdatePath:
    """The implementation for ``batches``: the multi-tensor step where it serves them
    all, else the per-parameter path with the reason. The one place a path is chosen.

    Args:
        batches: this step's :class:`UpdateBatch` per parameter group.
        flat: the optimizer's :class:`~paddle_llrd.optim.multi_tensor.FlatState`
            (None: ``use_multi_tensor=False``); asked last, whether its banks
            hold the batches' parameters or can.
        dygraph: an eager step outside ``to_static`` translation.
        overflow: a dygraph AMP overflow step (``found_inf`` set), which
            changes no number; the per-parameter pass also creates the
            accumulators of new parameters then.
        given_gradients: why gradients handed to ``_apply_optimize`` are not
            the parameters' own (fleet's sharding optimizer, a ``main_grad``), or None.

    Examples:
        >>> choose_update_path([], None, dygraph=True, overflow=False)
        UpdatePath(path='per_parameter', reason='use_multi_tensor=False')
    """
    reason = _refusal(batches, flat, dygraph=dygraph, overflow=overflow, given_gradients=given_gradients)
    return MULTI_TENSOR if reason is None else UpdatePath("per_parameter", reason)


def _refusal(batches: Sequence[UpdateBatch], flat: FlatState | None, *, dygraph: bool, overflow: bool,
             given_gradients: str | None) -> str | None:
    if flat is None:
        return "use_multi_tensor=False"
    if flat.disabled is not None:
        return flat.disabled
    if not dygraph:
        return "not a dygraph step"
    if given_gradients is not None:
        return given_gradients
    for batch in batches:
        if batch.ratios is None:
            return "set_param_lr_fun is not pure in the parameter name (its ratios are asked every step)"
        if batch.own_clip:
            return "a parameter group with its own grad_clip"
        clip_reason = flat_clip_refusal(batch.grad_clip)
        if clip_reason is not None:
            return clip_reason
        for field, name in _SETTINGS_FIELDS:
            if is_tensor(getattr(batch.settings, field)):
                return f"a Tensor {name}"
    if overflow:
        return "an AMP overflow step"
    if not any(batch.params for batch in batches):
        return "no parameter has a gradient"
    return flat.refusal(batches)
