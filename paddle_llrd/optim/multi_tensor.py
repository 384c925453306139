"""AdamWDL's multi-tensor step: every parameter group updated over flat buffers.

A :class:`FlatLayout` puts the trained parameters of a step into *banks*:
the parameters of one parameter group that share dtype, place, master
weights and beta powers become views of one flat buffer each of
parameters, moments, master weights and beta powers
(:mod:`~paddle_llrd.optim.buffers`). A bank is cut into *segments*,
contiguous ranges whose parameters share their lr factor, layer ratio,
decay answer and clipping; the update is elementwise, so the bits are those
of one kernel call per parameter. The CPU banks are updated by one call of
the fused operator (:mod:`~paddle_llrd.optim.fused_operator`: clip, decay,
Adam step and beta powers in one pass over memory on all threads), the
others by Paddle's kernels (:mod:`~paddle_llrd.optim.flat_kernels`).

The layout is the one state the step keeps (besides Paddle's accumulators
and the weight-decay schedule's position). What it was made from is its
*description*: per parameter group, the trained parameters themselves,
their lr factors, ratios, decay answers and ``need_clip``, and whether it
runs AMSGrad (the banks hold the maximum moments only then).
:meth:`FlatLayout.serves` is the one check a step makes before it uses the
layout: this step's description is the layout's, every parameter is still
a view of its bank, and each bank's beta powers are still one value.
Everything else the update needs (the gradients, which stay Paddle's own
tensors, the clip and where it writes, the group's betas, epsilon and
weight decay, the lr) is read afresh at every step.

:func:`choose_update_path` decides between this step and the per-parameter
path; :func:`multi_tensor_step` runs both (the choice, then the update) and
says which path the update took. Neither sees the optimizer.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import compress, filterfalse, repeat
from operator import attrgetter, is_, is_not
from typing import Any, NamedTuple

import paddle
from paddle import _C_ops

from .buffers import numel, own_storage, share_flat
from .clipping import (NO_CLIP, NONE, NORM, SCALE, GroupClip, flat_clip_refusal, group_clip, kernel_gradient,
                       squared_norms)
from .flat_kernels import paddle_kernels_update
from .fused_operator import fused_adamw, unavailable_reason, warn_unavailable
from .gradient_clearing import clear_gradients, large_parameters
from .kernels import check_learning_rate_dtype, is_tensor, mismatched_gradient
from .per_parameter import decay_route
from .threads import FlatThreads
from .update_batch import FUSED, MULTI_TENSOR, UpdateBatch, UpdatePath

__all__ = ["MAX_CONSECUTIVE_LAYOUTS", "PER_PARAMETER_ONLY", "Bank", "FlatLayout", "Segment", "choose_update_path",
           "flat_obstacle", "foreign_gradients", "multi_tensor_step"]

# A layout made anew in this many consecutive steps means something replaces
# parameters or changes the trained set at every step: the flat buffers no
# longer pay, and the optimizer keeps the per-parameter path.
MAX_CONSECUTIVE_LAYOUTS = 3

_STOP_GRADIENT = attrgetter("stop_gradient")
_IS_VIEW_OF = paddle.Tensor._is_shared_buffer_with
_IS_CONTIGUOUS = paddle.Tensor.is_contiguous
_GRAD_OF = paddle.Tensor._grad_ivar
#: The path of an optimizer built with ``use_multi_tensor=False``.
PER_PARAMETER_ONLY = UpdatePath("per_parameter", "use_multi_tensor=False")
# Settings that, given as a Tensor, keep a step on Paddle's pass (a Tensor weight decay is read as its value:
# AdamSettings.coeff).
_TENSOR_SETTINGS = ("beta1", "beta2", "epsilon")
_FUSED_DTYPES = (paddle.float32, paddle.float64)
_HALF = (paddle.float16, paddle.bfloat16)
# The fused operator's segment flags (csrc/fused_adamw.cc).
_FUSED_DECAY, _CLIPPED, _WRITES_GRAD, _SEPARATE_DECAY = 1, 2, 4, 8


class Segment(NamedTuple):
    """A contiguous range ``[start, stop)`` of a bank whose parameters are updated alike."""

    start: int
    stop: int
    lr_factor: float
    """:math:`s_p`."""
    update_scale: float
    """:math:`s_p r_p`, the factor of the global lr the Adam step uses."""
    decays: bool
    need_clip: bool
    zero_dim: bool
    """0-D parameters: Paddle's global-norm clip scales their gradients out of place."""


def _bank_key(group: int, param: Any, state: Any) -> tuple[Any, ...]:
    """What the parameters of one bank share (their beta powers too: a bank reads one pair)."""
    return (group, param.dtype, str(param.place), state.master_weight is not None, state.fp32_fallback,
            float(state.moments[3].item()), float(state.moments[4].item()))


class Bank:
    """Parameters of one parameter group sharing dtype, place, master weights and beta powers,
    as views of flat buffers (parameters, moments, master weights, beta powers), cut into
    :class:`Segment` ranges. The gradients stay Paddle's own tensors: a step reads each where
    the backward left it.

    ``members``: per segment key ``(lr factor, update scale, decays, need_clip, 0-D)``,
    the ``(param, state)`` pairs in the optimizer's order.
    """

    def __init__(self, group: int, members: dict[tuple[Any, ...], list[tuple[Any, Any]]]) -> None:
        self.group = group
        ordered = [member for segment_members in members.values() for member in segment_members]
        self.params = [param for param, _ in ordered]
        states = [state for _, state in ordered]
        self.master = states[0].master_weight is not None
        self.fp32_fallback = states[0].fp32_fallback
        self.param_flat = share_flat(self.params)
        moments = list(zip(*(state.moments for state in states)))
        self.moment1 = share_flat(moments[0])
        self.moment2 = share_flat(moments[1])
        self.moment2_max = None if moments[2][0] is None else share_flat(moments[2])
        self.beta1_pows = share_flat(moments[3])
        self.beta2_pows = share_flat(moments[4])
        self.master_flat = share_flat([state.master_weight for state in states]) if self.master else None
        self.tensors = list(self.params) + [t for state in states for t in state.moments if t is not None]
        self.tensors += [state.master_weight for state in states if state.master_weight is not None]
        self.segments, self.offsets, self.segment_params = [], [], []
        start = 0
        for (lr_factor, update_scale, decays, need_clip, zero_dim), segment_members in members.items():
            stop = start
            self.segment_params.append(slice(len(self.offsets), len(self.offsets) + len(segment_members)))
            for param, _ in segment_members:
                self.offsets.append(stop)
                stop += numel(param)
            self.segments.append(Segment(start, stop, lr_factor, update_scale, decays, need_clip, zero_dim))
            start = stop
        self.numel = start
        self.param_starts = paddle.to_tensor(self.offsets + [start], dtype="int64")
        self.batch_indices: list[int] = []  # each parameter's place in its group's batch (lay_out sets them)
        # kept with the bank (the layout's): the decay routes by weight decay, the chunks' views
        self.routes_key: tuple[Any, ...] | None = None
        self.routes: list[Any] = []
        self.chunks: list[Any] | None = None

    def params_are_views(self) -> bool:
        return all(map(_IS_VIEW_OF, self.params, repeat(self.param_flat)))

    def beta_pows_equal(self) -> bool:
        """Whether the bank's beta powers are still one value each (its update reads one pair)."""
        for pows in (self.beta1_pows, self.beta2_pows):
            values = pows.numpy()
            if not (values == values[0]).all():
                return False
        return True

    def gradients(self, batch: UpdateBatch) -> list[Any]:
        """Each parameter's gradient at this step (read by ``batch``), in the bank's order."""
        return list(map(batch.grads.__getitem__, self.batch_indices))


def flat_obstacle(param: Any, state: Any) -> str | None:
    """Why ``param`` (with its :class:`~paddle_llrd.optim.param_state.ParamState`) cannot
    be laid out, or None: its gradient must be dense and like it, its lr factor a
    number, and it needs no regularizer, no distributed tensor, and a kernel for its dtype."""
    grad = param._grad_ivar()
    reason = None
    if grad.is_selected_rows():
        reason = "a sparse gradient"
    elif not param._is_initialized() or numel(param) == 0:
        reason = "no elements"
    elif getattr(param, "regularizer", None) is not None:
        reason = "a regularizer of its own"
    elif param.is_dist():
        reason = "a distributed tensor"
    elif grad.dtype != param.dtype or list(grad.shape) != list(param.shape):
        reason = "a gradient of another dtype or shape"
    else:
        attr = getattr(param, "optimize_attr", None)
        if attr is None or "learning_rate" not in attr or is_tensor(attr["learning_rate"]):
            reason = "no number as its lr factor"
        elif (state.master_weight is None and param.place.is_cpu_place()
              and param.dtype not in (paddle.float32, paddle.float64)):
            reason = "no half-precision kernel on CPU"  # (the per-parameter path raises as AdamW does)
    return None if reason is None else f"parameter {param.name!r} cannot share a kernel call ({reason})"


class FlatLayout:
    """One optimizer's multi-tensor layout: its banks, the description they were made from,
    its thread count, and why the optimizer keeps the per-parameter path for good (``disabled``).

    Args:
        num_threads: the threads of a CPU update (:func:`~paddle_llrd.optim.threads.resolve_num_threads`).
    """

    def __init__(self, num_threads: int | None = None) -> None:
        self.threads = FlatThreads(num_threads, owner="AdamWDL: `num_threads`")
        self.banks: list[Bank] = []
        self.disabled: str | None = None
        self._description: list[tuple[list[Any], ...]] = []
        self._layouts_in_a_row = 0
        self.needs_layout = True  # (what choose_update_path found at this step)
        self.operator_reason: str | None = None  # why the fused operator cannot run (lay_out asks)
        self.lr_tables: dict[int, Any] = {}  # flat_update's, per group, made once per layout
        #: The laid-out CPU parameters of at least the crossover, largest first (None: no layout):
        #: those whose gradients clear_grad zeroes by the operators
        #: (:func:`~paddle_llrd.optim.gradient_clearing.clear_gradients`).
        self.large_params: list[Any] | None = None

    def drop(self) -> None:
        """Forget the banks (their tensors stay views until the next layout): the optimizer's
        state was replaced (``set_state_dict``)."""
        self.banks, self._description, self.lr_tables, self.large_params = [], [], {}, None

    # ---------------------------------------------------------------- the check
    def serves(self, batches: Sequence[Any]) -> bool:
        """Whether the banks serve this step's ``batches`` (:class:`~paddle_llrd.optim.update_batch.UpdateBatch`
        per group): the same description, every parameter still a view of its bank, each
        bank's beta powers one value."""
        if not self.banks or not self._described(batches):
            return False
        return all(bank.params_are_views() and bank.beta_pows_equal() for bank in self.banks)

    def _described(self, batches: Sequence[Any]) -> bool:
        """Whether ``batches`` hold what the layout was made from (by C-level passes)."""
        if len(batches) != len(self._description):
            return False
        for batch, (params, lr_factors, ratios, decays, need_clip, amsgrad) in zip(batches, self._description):
            if (len(batch.params) != len(params) or not all(map(is_, batch.params, params))
                    or batch.settings.amsgrad != amsgrad):
                return False
            try:
                if (batch.lr_factors != lr_factors or batch.ratios != ratios or batch.decays != decays
                        or batch.need_clip != need_clip):
                    return False
            except (TypeError, ValueError, RuntimeError):  # a Tensor set as an lr factor since
                return False
        return True

    # --------------------------------------------------------------- the layout
    def refusal(self, batches: Sequence[Any], state_of: Callable[[Any], Any]) -> str | None:
        """Why ``batches`` cannot be laid out (a parameter's obstacle, or layouts at every step),
        or None; ``state_of(param)`` gives a parameter's
        :class:`~paddle_llrd.optim.param_state.ParamState`. Counts the layouts in a row."""
        if self.disabled is not None:
            return self.disabled
        for batch in batches:
            for param in batch.params:
                reason = flat_obstacle(param, state_of(param))
                if reason is not None:
                    return reason
        if self.banks or self._layouts_in_a_row:
            self._layouts_in_a_row += 1
        if self._layouts_in_a_row >= MAX_CONSECUTIVE_LAYOUTS:
            self.disabled = f"the trained parameters changed in {MAX_CONSECUTIVE_LAYOUTS} consecutive steps"
            return self.disabled
        return None

    def lay_out(self, batches: Sequence[Any], state_of: Callable[[Any], Any]) -> None:
        """Put the parameters of ``batches`` into banks (:meth:`refusal` found no obstacle)."""
        members: dict[tuple[Any, ...], dict[tuple[Any, ...], list[tuple[Any, Any]]]] = {}
        for group, batch in enumerate(batches):
            for param, lr_factor, ratio, decays, need_clip in zip(batch.params, batch.lr_factors, batch.ratios,
                                                                  batch.decays, batch.need_clip):
                state = state_of(param)
                segment = (float(lr_factor), float(lr_factor) * ratio, bool(decays), need_clip, len(param.shape) == 0)
                members.setdefault(_bank_key(group, param, state), {}).setdefault(segment, []).append((param, state))
        previous = {id(t): t for bank in self.banks for t in bank.tensors}
        self.banks = [Bank(key[0], by_segment) for key, by_segment in members.items()]
        for bank in self.banks:
            place = {id(param): index for index, param in enumerate(batches[bank.group].params)}
            bank.batch_indices = [place[id(param)] for param in bank.params]
        now = {id(t) for bank in self.banks for t in bank.tensors}
        for tensor_id, tensor in previous.items():
            if tensor_id not in now:
                own_storage(tensor)
        self._description = [(list(b.params), list(b.lr_factors), None if b.ratios is None else list(b.ratios),
                              list(b.decays), list(b.need_clip), bool(b.settings.amsgrad)) for b in batches]
        self.lr_tables = {}
        params = [param for bank in self.banks for param in bank.params]
        sizes = [stop - start for bank in self.banks
                 for start, stop in zip(bank.offsets, bank.offsets[1:] + [bank.numel])]
        self.large_params = large_parameters(params, sizes, self.threads.min_chunk_numel)
        # (once loaded or refused, the operator's availability holds for the whole process)
        self.operator_reason = unavailable_reason()

    def clear_gradients(self, params: Sequence[Any], set_to_zero: bool) -> None:
        """:func:`~paddle_llrd.optim.gradient_clearing.clear_gradients` of ``params`` on the layout's threads,
        with the large parameters the layout knows (no pass over the shapes)."""
        clear_gradients(params, set_to_zero, self.threads, self.large_params)

    def laid_out(self) -> None:
        """The step used a layout it did not have to make: the run of layouts ends."""
        self._layouts_in_a_row = 0

    def banks_of(self, group: int) -> list[Bank]:
        return [bank for bank in self.banks if bank.group == group]


# ------------------------------------------------------------------ the choice
def choose_update_path(batches: Sequence[UpdateBatch], layout: FlatLayout | None, *, overflow: bool,
                       state_of: Callable[[Any], Any], given_gradients: str | None = None) -> UpdatePath:
    """The implementation for this dygraph step's ``batches``, the one place it is decided:
    :data:`~paddle_llrd.optim.update_batch.FUSED` for the multi-tensor step (whose banks then
    run the fused operator where it serves them and Paddle's kernels elsewhere:
    :func:`multi_tensor_step` says which), else the per-parameter path with the reason.

    Args:
        batches: this step's :class:`UpdateBatch` per parameter group.
        layout: the optimizer's :class:`FlatLayout` (None: ``use_multi_tensor=False``);
            asked last, whether it serves the batches or can lay them out (it notes which).
        overflow: an AMP overflow step (``found_inf`` set), which changes no number.
        state_of: a parameter's :class:`~paddle_llrd.optim.param_state.ParamState`.
        given_gradients: why gradients handed to ``_apply_optimize`` are not
            the parameters' own (fleet's sharding optimizer, :func:`foreign_gradients`), or None.

    Examples:
        >>> choose_update_path([], None, overflow=False, state_of=None)
        UpdatePath(path='per_parameter', reason='use_multi_tensor=False')
    """
    reason = _refusal(batches, layout, overflow=overflow, state_of=state_of, given_gradients=given_gradients)
    return FUSED if reason is None else UpdatePath("per_parameter", reason)


def _refusal(batches: Sequence[UpdateBatch], layout: FlatLayout | None, *, overflow: bool,
             state_of: Callable[[Any], Any], given_gradients: str | None) -> str | None:
    if layout is None:
        return PER_PARAMETER_ONLY.reason
    if layout.disabled is not None:
        return layout.disabled
    if given_gradients is not None:
        return given_gradients
    for batch in batches:
        if any(map(hasattr, batch.params, repeat("main_grad"))):
            with_main_grad = [p for p in batch.params if getattr(p, "main_grad", None) is not None]
            if with_main_grad:  # (Paddle's step takes it instead of .grad)
                return f"parameter {with_main_grad[0].name!r} has a main_grad"
        if batch.ratios is None:
            return "set_param_lr_fun is not pure in the parameter name (its ratios are asked every step)"
        clip_reason = None if batch.grad_clip is None else flat_clip_refusal(batch.grad_clip, batch.grads)
        if clip_reason is not None:
            return clip_reason
        for name in _TENSOR_SETTINGS:
            value = getattr(batch.settings, name)
            if type(value) is not float and is_tensor(value):
                return f"a Tensor {name}"
        if any(map(is_not, batch.regularizers, repeat(None))):
            regularized = next(p for p, r in zip(batch.params, batch.regularizers) if r is not None)
            return f"parameter {regularized.name!r} cannot share a kernel call (a regularizer of its own)"
    if overflow:
        return "an AMP overflow step"
    if not any(batch.params for batch in batches):
        return "no parameter has a gradient"
    if layout.serves(batches):
        layout.needs_layout = False
        return None
    layout.needs_layout = True
    return layout.refusal(batches, state_of)


def foreign_gradients(params_grads: list[tuple[Any, Any]]) -> str | None:
    """Why gradients handed to ``_apply_optimize`` (fleet's sharding optimizer,
    ``apply_gradients``) cannot be updated from the flat buffers, or None: each must be
    its parameter's own gradient (not a ``main_grad``, nor a copy clipped elsewhere)."""
    for param, grad in params_grads:
        if grad is None:
            continue
        own = param._grad_ivar()  # (a new Python object at each call: compared by storage)
        if own is None or not grad._is_shared_buffer_with(own) or grad._offset() != own._offset():
            return f"the gradient given for {param.name!r} is not the parameter's own"
    return None


# --------------------------------------------------------------- the update
def multi_tensor_step(layout: FlatLayout | None, batches: Sequence[UpdateBatch], global_lr: Any, *, overflow: bool,
                      state_of: Callable[[Any], Any], given_gradients: str | None, with_ratio: bool) -> UpdatePath:
    """One dygraph step of ``batches`` on the multi-tensor path where :func:`choose_update_path`
    chooses it (laying the banks out first where they do not serve): the path it took, or the
    per-parameter path (nothing done) with the reason.

    ``global_lr``: the step's global lr tensor; ``with_ratio``: the decay's lr rule
    (:func:`~paddle_llrd.optim.per_parameter.decay_scale`).
    """
    path = choose_update_path(batches, layout, overflow=overflow, state_of=state_of, given_gradients=given_gradients)
    if path.path == "per_parameter":
        return path
    if layout.needs_layout:  # (the layout's description holds the dtypes: checked once, where they change)
        check_learning_rate_dtype((p for batch in batches for p in batch.params), global_lr.dtype)
        layout.lay_out(batches, state_of)
    else:
        layout.laid_out()
    clips = [NONE if batch.grad_clip is None else group_clip(
        batch.grad_clip, list(compress(batch.grads, batch.need_clip)), _cpu_threads(layout, group))
        for group, batch in enumerate(batches)]
    fused, other, reason = [], [], None
    for bank in layout.banks:
        why = layout.operator_reason or fused_refusal(bank)
        if why is None:
            fused.append(bank)
        else:
            other.append(bank)
            reason = reason or why
    other_grads = [bank.gradients(batches[bank.group]) for bank in other]
    for bank, grads in zip(other, other_grads):  # (before any update: Paddle's kernels check one at a time)
        mismatch = mismatched_gradient(bank.params, grads)
        if mismatch is not None:
            raise mismatch
    if fused:
        _fused_call(layout, fused, batches, clips, global_lr, with_ratio)
    for bank, grads in zip(other, other_grads):
        batch = batches[bank.group]
        paddle_kernels_update(layout, bank, grads, batch.settings, clips[bank.group], global_lr,
                              _routes(bank, batch.settings.coeff, with_ratio))
    if other and layout.operator_reason is not None:
        warn_unavailable(layout.operator_reason)
    return FUSED if reason is None else UpdatePath(MULTI_TENSOR, reason)


def fused_refusal(bank: Bank) -> str | None:
    """Why the fused operator cannot update ``bank``, or None."""
    if not bank.param_flat.place.is_cpu_place():
        return "parameters on a GPU (Paddle's GPU kernels update them)"
    dtype = bank.param_flat.dtype
    if dtype in _HALF:
        if not bank.fp32_fallback:
            return f"{dtype} parameters without float32 master weights"
    elif dtype not in _FUSED_DTYPES:
        return f"{dtype} parameters"
    return None


def _cpu_threads(layout: FlatLayout, group: int) -> int | None:
    """The layout's threads where every bank of ``group`` is on the CPU (the clip's squared norms
    may then be taken there by the fused operators), else None."""
    banks = layout.banks_of(group)
    return layout.threads.count if banks and all(bank.param_flat.place.is_cpu_place() for bank in banks) else None


def _routes(bank: Bank, coeff: Any, with_ratio: bool) -> list[Any]:
    """The :func:`~paddle_llrd.optim.per_parameter.decay_route` of each segment, kept with the
    bank and decided again when the weight decay (a schedule's) changes."""
    key = (coeff, with_ratio)
    if bank.routes_key != key:
        bank.routes = [decay_route(segment.decays, coeff, segment.lr_factor, segment.update_scale,
                                   with_ratio=with_ratio) for segment in bank.segments]
        bank.routes_key = key
    return bank.routes


def _fused_call(layout: FlatLayout, banks: list[Bank], batches: Sequence[Any], clips: list[GroupClip],
                global_lr: Any, with_ratio: bool) -> None:
    """All of ``banks`` in one call of the fused operator."""
    amsgrad = batches[0].settings.amsgrad
    ints = [len(banks), sum(len(bank.segments) for bank in banks), int(amsgrad), 0, layout.threads.count]
    segment_ints: list[int] = []
    scalars: list[float] = []
    segment_scalars: list[float] = []
    clip_values, param_starts, grads = [], [], []
    written: list[tuple[GroupClip, list[Any]]] = []  # the gradients the operator scales in place, by clip
    for index, bank in enumerate(banks):
        settings, clip = batches[bank.group].settings, clips[bank.group]
        ints += [clip.mode, int(bank.master), len(bank.params), len(grads)]
        bank_grads = bank.gradients(batches[bank.group])
        grads += bank_grads
        low = clip.max_norm if clip.mode == NORM else clip.low
        scalars += [settings.beta1_value, settings.beta2_value, settings.epsilon, low, clip.high, settings.coeff]
        if clip.mode == SCALE:
            clip_values.append(clip.scale)
        elif clip.mode == NORM:
            clip_values.append(squared_norms(grads[-len(bank.params):], layout.threads.count))
        else:
            clip_values.append(bank.param_starts)
        param_starts.append(bank.param_starts)
        for segment, members, route in zip(bank.segments, bank.segment_params,
                                           _routes(bank, settings.coeff, with_ratio)):
            flags = (_FUSED_DECAY if route.fused_coeff is not None else 0) | (
                _SEPARATE_DECAY if route.separate_decay_scale is not None else 0)
            if segment.need_clip and clip.mode != NO_CLIP:
                flags |= _CLIPPED
                if clip.mode == SCALE and not segment.zero_dim:
                    flags |= _WRITES_GRAD
                    written.append((clip, bank_grads[members]))
            segment_ints += [index, segment.start, segment.stop, flags]
            segment_scalars += [segment.update_scale, route.fused_coeff or 0.0,
                                1.0 if route.separate_decay_scale is None else route.separate_decay_scale]
    try:
        fused_adamw(
            [bank.param_flat for bank in banks], grads, [bank.moment1 for bank in banks],
            [bank.moment2 for bank in banks],
            [bank.moment2_max if amsgrad else bank.moment2 for bank in banks],
            [bank.master_flat if bank.master else bank.param_flat for bank in banks],
            [bank.beta1_pows for bank in banks], [bank.beta2_pows for bank in banks], clip_values, param_starts,
            global_lr, ints + segment_ints, scalars + segment_scalars,
        )
    except OSError as error:  # (it checks each gradient before it writes; which one, it cannot say)
        mismatch = mismatched_gradient([param for bank in banks for param in bank.params], grads)
        if mismatch is None:
            raise
        raise mismatch from error
    # Paddle's custom-operator call hands the operator a contiguous copy of a strided gradient
    # (that of a weight read as W.T): the operator scaled the copy, and Paddle's clip scales p.grad.
    for clip, clipped in written:
        for grad in filterfalse(_IS_CONTIGUOUS, clipped):
            kernel_gradient(clip, grad, writes=True)
