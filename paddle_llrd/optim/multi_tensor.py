"""AdamWDL's multi-tensor dygraph step: one ``adamw`` kernel call per group of like parameters.

The parameters that share everything the kernel is given become views of
flat buffers (:mod:`~paddle_llrd.optim.buffers`), a :class:`Bank` per set of
buffers and a :class:`KernelGroup` range of it per kernel call; the kernel
is elementwise, so the bits are those of one call per parameter. Each step
checks the views (:meth:`Bank.check`) and lays the banks out afresh where
they broke. :class:`MultiTensorStep` reads nothing of the optimizer but the
:class:`StepContext` it is handed (:func:`~paddle_llrd.optim.dispatch.multi_tensor_context`);
its :meth:`~MultiTensorStep.step` and :meth:`~MultiTensorStep.clear_grad`
return False where the caller must take the per-parameter path. The story
(what breaks the views, what the path cannot serve) is :ref:`adamwdl-multi-tensor`.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable
from itertools import compress, count, repeat
from operator import attrgetter, itemgetter, ne, truth
from typing import Any, NamedTuple

import paddle
from paddle import _C_ops
from paddle.base import core

from .clipping import clip_gradients
from .buffers import empty_flat, numel, own_storage, share_flat
from .kernels import bound_adamw_kernel, decoupled_decay, is_tensor
from .threads import FlatThreads
from .updates import AdamSettings, UpdatePass

__all__ = ["AskedDecays", "Bank", "BankKey", "KernelGroup", "KernelKey", "LayoutInput", "MultiTensorStep", "StepContext"]

# Rebuilding the groups in this many consecutive steps means something
# replaces parameters or changes the trained set every step: the flat
# buffers no longer pay, and the optimizer keeps the per-parameter path.
MAX_CONSECUTIVE_REBUILDS = 3


class BankKey(NamedTuple):
    """What the parameters sharing flat buffers (a :class:`Bank`) have in common."""

    param_group: int
    dtype: Any
    grad_dtype: Any
    place: str
    master: bool
    fp32_fallback: bool
    need_clip: bool
    beta1_pow: float
    beta2_pow: float


class KernelKey(NamedTuple):
    """What the parameters of one kernel call share beyond their :class:`BankKey`."""

    decays: bool
    base_scale: float
    update_scale: float


_STOP_GRADIENT = attrgetter("stop_gradient")
_IS_VIEW_OF = paddle.Tensor._is_shared_buffer_with
_GRAD_OF = paddle.Tensor._grad_ivar
_GRAD = attrgetter("grad")
_OPTIMIZE_ATTR = attrgetter("optimize_attr")
_LR_FACTOR = itemgetter("learning_rate")


class AskedDecays(NamedTuple):
    """The parameters whose ``apply_decay_param_fun`` (not pure in the name) is
    asked at every step, their names, and its answers the layout was made with."""

    params: list[Any]
    names: list[str]
    answers: list[bool]

    def changed_answers(self, decays: Any) -> dict[int, bool] | None:
        """None if ``decays`` answers as at the layout; else its answers now, by id of the parameter.

        Each name is asked once. No list of the answers is built while they
        agree (see :meth:`Bank.check` on lists in a step).
        """
        asked = map(truth, map(decays, self.names))
        first_changed = next(compress(count(), map(ne, asked, self.answers)), None)
        if first_changed is None:
            return None
        # ``asked`` stopped after the first changed answer: the rest are asked now.
        answers = self.answers[:first_changed] + [not self.answers[first_changed]] + list(asked)
        return {id(param): answer for param, answer in zip(self.params, answers)}


class KernelGroup:
    """A contiguous range of a :class:`Bank` that one kernel call updates, as views of its buffers.

    ``chunks``: per chunk of the range (:meth:`FlatThreads.bounds`; one on
    a GPU or under the crossover) the views ``(param, grad, moments, master)``
    one kernel call of it updates.
    """

    __slots__ = ("key", "params", "start", "stop", "param", "grad", "moment1", "moment2", "moment2_max", "master",
                 "beta1_pow", "beta2_pow", "lr_index", "chunks")

    def __init__(self, key: KernelKey, params: list[Any], bank: Bank, start: int, stop: int) -> None:
        self.key = key
        self.params = params
        self.start, self.stop = start, stop

        def views(a: int, b: int) -> tuple[Any, ...]:
            flats = (bank.param_flat, bank.grad_flat, bank.moment1, bank.moment2, bank.moment2_max, bank.master_flat)
            return tuple(None if flat is None else flat._slice(a, b) for flat in flats)

        self.param, self.grad, self.moment1, self.moment2, self.moment2_max, self.master = own = views(start, stop)
        self.beta1_pow, self.beta2_pow = bank.beta_pow_pair
        bounds = bank.threads.bounds(start, stop, bank.params[0].place)
        self.chunks = [self._kernel_views(own)] if len(bounds) == 1 else [
            self._kernel_views(views(a, b)) for a, b in bounds
        ]
        self.lr_index = 0

    def _kernel_views(self, chunk: tuple[Any, ...]) -> tuple[Any, ...]:
        """``(param, grad, moments, master)`` of a chunk, as :func:`~paddle_llrd.optim.kernels.adamw_kernel` takes them."""
        param, grad, moment1, moment2, moment2_max, master = chunk
        return param, grad, (moment1, moment2, moment2_max, self.beta1_pow, self.beta2_pow), master


class Bank:
    """Parameters of one :class:`BankKey` as views of flat buffers (parameters,
    gradients, moments, master weights, beta powers), in :class:`KernelGroup` ranges."""

    def __init__(self, key: BankKey, members: dict[KernelKey, list[tuple[Any, Any, Any]]], threads: FlatThreads) -> None:
        self.key = key
        self.threads = threads
        ordered = [member for kernel_members in members.values() for member in kernel_members]
        self.params = [param for param, _, _ in ordered]
        plans = [plan for _, _, plan in ordered]
        self.base_scales = [kernel_key.base_scale for kernel_key, ms in members.items() for _ in ms]
        self.param_flat = share_flat(self.params)
        # Each gradient copied into its range and replaced by the view at once,
        # which frees it: no second copy of them all (buffers.share_flat).
        # (the layout holds no gradient: a reference would keep it alive)
        self.grad_flat = empty_flat([param._grad_ivar() for param in self.params])
        self.offsets = []
        offset = 0
        with paddle.no_grad():
            for index, param in enumerate(self.params):
                self.offsets.append(offset)
                view = self._grad_view(index)
                _C_ops.assign_out_(param._grad_ivar(), view)
                param._copy_gradient_from(view)
                offset += numel(param)
        moments = list(zip(*(plan.moments for plan in plans)))
        self.moment1 = share_flat(moments[0])
        self.moment2 = share_flat(moments[1])
        self.moment2_max = None if moments[2][0] is None else share_flat(moments[2])
        self.beta1_pows = share_flat(moments[3])
        self.beta2_pows = share_flat(moments[4])
        # The one pair every kernel call of the bank reads: all of its powers
        # are equal (BankKey), the kernel leaves them alone (update() advances
        # them all), and one pair keeps fewer small tensors out of the cache
        # after a backward.
        self.beta_pow_pair = (moments[3][0], moments[4][0])
        self.master_flat = share_flat([plan.master_weight for plan in plans]) if key.master else None
        self.tensors = list(self.params) + [t for plan in plans for t in plan.moments if t is not None]
        self.tensors += [plan.master_weight for plan in plans if plan.master_weight is not None]
        self.groups = []
        start = 0
        for kernel_key, kernel_members in members.items():
            stop = start + sum(numel(param) for param, _, _ in kernel_members)
            group_params = [param for param, _, _ in kernel_members]
            self.groups.append(KernelGroup(kernel_key, group_params, self, start, stop))
            start = stop
        self.split = any(len(group.chunks) > 1 for group in self.groups)
        self.grad_chunks = [
            self.grad_flat._slice(a, b) for a, b in threads.bounds(0, start, self.params[0].place)
        ]
        self._routes_key: tuple[float, bool, bool] | None = None
        self._routes_cache: list[Any] = []
        self._calls_key: tuple[Any, ...] | None = None
        self._calls_lrs: list[Any] | None = None
        self._calls_cache: list[Any] = []

    def _grad_view(self, index: int) -> Any:
        """A new view of parameter ``index``'s range of the gradient buffer.

        New each time: ``clear_gradient(set_to_zero=False)`` releases the
        storage of the tensor a parameter's gradient shares, views included.
        """
        param, start = self.params[index], self.offsets[index]
        view = self.grad_flat._slice(start, start + numel(param))
        view.get_tensor()._set_dims(list(param.shape))
        return view

    def check(self) -> tuple[bool, list[int]]:
        """``(intact, replaced)``: whether every parameter is still trained, has a
        gradient, its lr factor and is a view of the bank, and the positions
        of gradients that are no longer views (replaced by a backward after
        ``clear_gradient``)."""
        # One pass of C calls per list (map over method descriptors, no Python
        # frame per tensor): this runs at every step for every parameter.
        # Nothing is collected into a list either: right after a backward, the
        # first request of 1 KiB or more (a list of 128 items) has glibc sort
        # every chunk the backward freed into its bins. That work is the
        # backward's and goes to whatever asks next (the next forward, in
        # whole rounds, docs/benchmarks.rst); a step that asks for nothing
        # that large is timed on its own work.
        params, param_flat = self.params, self.param_flat
        if (
            any(map(_STOP_GRADIENT, params))
            or not all(map(_IS_VIEW_OF, params, repeat(param_flat)))
            or any(map(ne, map(_LR_FACTOR, map(_OPTIMIZE_ATTR, params)), self.base_scales))
        ):
            return False, []
        if self._grads_are_views():
            return True, []
        views = self._grad_views()  # something changed: which gradients, one by one
        if any(view is None for view in views):
            return False, []
        return True, [index for index, view in enumerate(views) if not view]

    def _grads_are_views(self) -> bool:
        """Whether every parameter has a gradient that is a view of the bank's buffer."""
        try:
            return all(map(_IS_VIEW_OF, map(_GRAD_OF, self.params), repeat(self.grad_flat)))
        except TypeError:  # a parameter without a gradient (None is no Tensor)
            return False

    def _grad_views(self) -> list[bool | None]:
        """Per parameter: whether its gradient is a view of the bank's buffer (None: no gradient)."""
        grad_flat = self.grad_flat
        return [None if grad is None else grad._is_shared_buffer_with(grad_flat) for grad in map(_GRAD, self.params)]

    def realias_grads(self, replaced: list[int]) -> bool:
        """Copy replaced gradients into their views and hand the views back; False if one cannot be."""
        grads = [self.params[i].grad for i in replaced]
        flat = self.grad_flat
        for index, grad in zip(replaced, grads):
            param = self.params[index]
            if grad.is_selected_rows() or grad.dtype != flat.dtype or list(grad.shape) != list(param.shape):
                return False
        with paddle.no_grad():
            for index, grad in zip(replaced, grads):
                view = self._grad_view(index)
                _C_ops.assign_out_(grad, view)
                if not view._is_shared_buffer_with(flat):
                    return False  # (the layout then starts afresh from the gradients)
                self.params[index]._copy_gradient_from(view)
        return True

    def zero_grads(self, views_checked: bool = False) -> bool:
        """``clear_grad(set_to_zero=True)`` for the whole bank in one op; False (nothing
        done) where a parameter is frozen or a gradient is not a view.

        ``views_checked``: the last step found every gradient a view
        (:meth:`check`) and no backward has run since (the only way a
        gradient comes to be replaced), so they are not looked at again.
        """
        if any(map(_STOP_GRADIENT, self.params)):
            return False
        if not views_checked and not self._grads_are_views():
            return False
        if len(self.grad_chunks) == 1:
            self.grad_flat.zero_()
        else:
            self.threads.run([chunk.zero_ for chunk in self.grad_chunks])
        return True

    def _routes(self, coeff: float, context: StepContext) -> list[Any]:
        """The :func:`~paddle_llrd.optim.dispatch.decay_route` of each kernel group,
        decided again only when the weight decay changes (under a ``WeightDecaySchedule``)."""
        key = (coeff, context.with_ratio, context.force_general)
        if self._routes_key != key:
            self._routes_cache = [
                context.decay_route(
                    group.key.decays, coeff, group.key.base_scale, group.key.update_scale,
                    with_ratio=context.with_ratio, force_general=context.force_general,
                )
                for group in self.groups
            ]
            self._routes_key = key
        return self._routes_cache

    def _kernel_calls(self, lrs: list[Any], settings: AdamSettings, routes: list[Any]) -> list[Any]:
        """The bank's kernel calls (:func:`~paddle_llrd.optim.kernels.bound_adamw_kernel`,
        one per chunk), bound again only when what they are given changes:
        the routes (the weight decay), the group's settings or the lr table."""
        key = (self._routes_key, *(value if type(value) in (float, int, bool) else id(value) for value in (
            settings.beta1_value, settings.beta2_value, settings.epsilon, settings.lazy_mode, settings.amsgrad,
        )))  # (a Tensor by identity: the bound call reads its value when it runs)
        if self._calls_key != key or self._calls_lrs is not lrs:
            fp32_fallback = self.key.fp32_fallback
            self._calls_cache = [
                bound_adamw_kernel(
                    param, grad, lrs[group.lr_index], moments, master, settings.beta1_value, settings.beta2_value,
                    settings.epsilon, route.fused_coeff, settings.lazy_mode, settings.amsgrad, fp32_fallback, True,
                )
                for group, route in zip(self.groups, routes)
                for param, grad, moments, master in group.chunks
            ]
            self._calls_key, self._calls_lrs = key, lrs
        return self._calls_cache

    def update(self, lrs: list[Any], update: UpdatePass, settings: AdamSettings, coeff: float,
               context: StepContext) -> None:
        """One Adam step of the bank: the per-parameter path's ops on its
        :class:`KernelGroup` ranges (the separate decay op where a group's
        route says so, then :func:`~paddle_llrd.optim.kernels.adamw_kernel`),
        then the beta powers advance (one ``scale_`` each)."""
        routes = self._routes(coeff, context)
        for group, route in zip(self.groups, routes):
            if route.separate_decay_scale is not None:  # as the per-parameter path: before the kernel
                factor = update.decay_factor(update.lr(route.separate_decay_scale), coeff, None)
                decoupled_decay(None, group.master if self.key.master else group.param, factor)
        # (each call touches only its own chunk's views, and the decays above
        # other ranges than theirs: any thread may run it, in any order)
        calls = self._kernel_calls(lrs, settings, routes)
        if self.split:  # the chunks of large groups on the pool, small groups beside them
            self.threads.run(calls)
        else:
            for call in calls:
                call()
        # What the kernel does to one parameter's powers (use_global_beta_pow=False), for all.
        _C_ops.scale_(self.beta1_pows, float(settings.beta1_value), 0.0, True)
        _C_ops.scale_(self.beta2_pows, float(settings.beta2_value), 0.0, True)


class LayoutInput(NamedTuple):
    """What the layout needs of the optimizer's state for one trained parameter
    (its ``prepare``, see :class:`StepContext`)."""

    plan: Any
    """Its :class:`~paddle_llrd.optim.updates.UpdatePlan` (accumulators and master weight made)."""
    ratio: float
    """Its cached layer ratio :math:`r_p` (1 without ``set_param_lr_fun``)."""
    decays: bool
    """Whether it decays at this step."""


class StepContext(NamedTuple):
    """Everything a multi-tensor step reads of its optimizer, built by the optimizer per step.

    ``groups``: ``(group dict or None, listed parameters)`` per parameter group;
    ``settings``/``coeffs``: each group's :class:`~paddle_llrd.optim.updates.AdamSettings`
    and weight decay; ``decay_rule``: ``apply_decay_param_fun`` (asked again
    at every step for the parameters whose answer is not kept);
    ``decay_route``: :func:`~paddle_llrd.optim.dispatch.decay_route`, the one
    fused-or-separate rule, with ``with_ratio``/``force_general`` (the decay's
    lr rule and the tests' switch to the separate decay op);
    ``prepare(trained, decay_answers)``: at a layout, per group the
    :class:`LayoutInput` of each trained parameter (the ratio function asked
    first, the accumulators and plans made; ``decay_answers`` this step's
    answers by id of the parameter, where already asked).
    """

    groups: list[tuple[dict[str, Any] | None, list[Any]]]
    settings: list[AdamSettings]
    coeffs: list[float]
    global_lr: Any
    decay_rule: Callable[[str], Any] | None
    decay_route: Callable[..., Any]
    with_ratio: bool
    force_general: bool
    prepare: Callable[[list[tuple[dict[str, Any] | None, list[Any]]], dict[int, bool]], list[list[LayoutInput]]]
    grad_clip: Any = None
    """The gradient clipping of every group (:func:`~paddle_llrd.optim.clipping.clip_gradients`), or None."""
    only: frozenset[int] | None = None
    """The ids of the parameters to update (fleet's sharding optimizer: one rank's); None: all with a gradient."""


def _listed_count(groups: list[tuple[Any, list[Any]]]) -> int:
    return sum(len(params) for _, params in groups)


def _updated(param: Any, only: frozenset[int] | None) -> bool:
    """Whether the step updates ``param``: trained, with a gradient, and among ``only`` where given."""
    return not param.stop_gradient and param._grad_ivar() is not None and (only is None or id(param) in only)


def _clip_inputs(trained: list[tuple[Any, list[Any]]], banks: list[Bank]) -> dict[int, tuple[list[Any], list[bool], list[Any]]]:
    """Per parameter group, what :func:`~paddle_llrd.optim.clipping.clip_gradients` is given:
    its parameters in the optimizer's order (the order Paddle sums the norms in), their
    ``need_clip``, and the gradient chunks of its banks that are clipped."""
    inputs = {}
    for index, (_, params) in enumerate(trained):
        need_clip = [getattr(param, "need_clip", True) is not False for param in params]
        flats = [chunk for bank in banks if bank.key.param_group == index and bank.key.need_clip
                 for chunk in bank.grad_chunks]
        inputs[index] = (params, need_clip, flats)
    return inputs


class _LrTable:
    """The kernel lrs of one parameter group: ``global lr * update scale`` for each
    distinct scale, computed by one in-place multiply into a buffer whose
    ``[1]`` slices the kernels read (bit-identical to ``global_lr * scale``)."""

    def __init__(self, scales: list[float], global_lr: Any) -> None:
        self.scales = paddle.to_tensor(scales, dtype=global_lr.dtype, place=global_lr.place)
        self.values = _C_ops.assign(self.scales)
        self.slices = [self.values._slice(i, i + 1) for i in range(len(scales))]

    def refresh(self, global_lr: Any) -> list[Any]:
        _C_ops.assign_out_(self.scales, self.values)
        _C_ops.multiply_(self.values, global_lr)
        return self.slices


class MultiTensorStep:
    """The multi-tensor path's state in one optimizer: its banks and why it may be off.

    ``fused_steps`` counts the steps it took; ``rebuilds`` how often the
    banks were laid out; ``disabled`` says why the optimizer keeps the
    per-parameter path for good (None while it does not); ``last_reason``
    why the last step did not take it (None if it did).
    """

    def __init__(self, num_threads: int | None = None) -> None:
        # How many threads share a CPU bank's kernel calls (threads.py).
        self.threads = FlatThreads(num_threads, owner="AdamWDL: `num_threads`")
        self.banks: list[Bank] = []
        self.outside: list[Any] = []  # listed parameters in no bank (frozen, no gradient)
        self._lr_tables: dict[int, _LrTable] = {}
        # An apply_decay_param_fun not pure in the name: its answers at the layout, asked again every step
        self._asked_decays = AskedDecays([], [], [])
        self.fused_steps = 0
        self.rebuilds = 0
        self._consecutive_rebuilds = 0
        self._listed = 0
        self._only: frozenset[int] | None = None
        self._clip_inputs: dict[int, tuple[list[Any], list[bool], list[Any]]] = {}
        self.disabled: str | None = None
        self.last_reason: str | None = None
        # The last step found the gradients views, and no backward has run since.
        self._views_checked = False

    @property
    def kernel_groups(self) -> int:
        """The number of kernel calls a step makes."""
        return sum(len(bank.groups) for bank in self.banks)

    def invalidate(self) -> None:
        """Drop the banks (the tensors stay views of their buffers until the next layout)."""
        self.banks = []
        self.outside = []
        self._lr_tables = {}
        self._asked_decays = AskedDecays([], [], [])
        self._views_checked = False
        self._only = None
        self._clip_inputs = {}

    def refuse(self, reason: str) -> None:
        """Note that this step takes the per-parameter path, for ``reason``
        (:func:`~paddle_llrd.optim.dispatch.multi_tensor_refusal`)."""
        self.last_reason = reason

    # ------------------------------------------------------------------ step
    def step(self, context: StepContext) -> bool:
        """One multi-tensor step over ``context``; False where the caller must
        take the per-parameter path (nothing has changed then)."""
        self.last_reason = None
        intact, decay_answers = (False, {}) if not self.banks else self._intact(context)
        if not intact:
            if self.banks or self.rebuilds:
                self._consecutive_rebuilds += 1
            if self._consecutive_rebuilds >= MAX_CONSECUTIVE_REBUILDS:
                self.disabled = self.last_reason = (
                    f"the trained parameters changed in {MAX_CONSECUTIVE_REBUILDS} consecutive steps"
                )
                return False
            if not self._layout(context, decay_answers):
                return False
        else:
            self._consecutive_rebuilds = 0
        self.run_kernels(context)
        self.fused_steps += 1
        if not self._views_checked:
            self._views_checked = True
            _on_next_backward(weakref.ref(self))
        return True

    def _intact(self, context: StepContext) -> tuple[bool, dict[int, bool]]:
        """Whether the banks still hold (realiasing replaced gradients on the way),
        and the decay rule's answers where they changed (by id of the parameter)."""
        if _listed_count(context.groups) != self._listed or context.only != self._only:
            return False, {}  # a parameter group was added, or another set of parameters handed over
        for param in self.outside:
            if _updated(param, context.only):
                return False, {}
        for bank in self.banks:
            intact, replaced = bank.check()
            if not intact or (replaced and not bank.realias_grads(replaced)):
                return False, {}
        # A decay rule that is not pure in the name may answer otherwise now
        # (no decay during warmup): the kernel groups are laid out by its
        # answers. Asked once per parameter and step, as AdamW asks; a new
        # layout takes these answers.
        if not self._asked_decays.params:
            return True, {}
        changed = self._asked_decays.changed_answers(context.decay_rule)
        return changed is None, changed or {}

    def _layout(self, context: StepContext, decay_answers: dict[int, bool]) -> bool:
        """Put the parameters that have a gradient now into banks; False (nothing
        changed) if one of them cannot share a kernel call."""
        trained = [(group, [p for p in params if _updated(p, context.only)]) for group, params in context.groups]
        for _, params in trained:
            for param in params:
                if not _shareable(param):
                    self.last_reason = f"parameter {param.name!r} cannot share a kernel call"
                    return False
        inputs = context.prepare(trained, decay_answers)
        members: dict[BankKey, dict[KernelKey, list[tuple[Any, Any, Any]]]] = {}
        asked = []
        for group_index, ((_, params), group_inputs) in enumerate(zip(trained, inputs)):
            for param, layout_input in zip(params, group_inputs):
                keys = _keys(group_index, param, layout_input)
                if keys is None:
                    self.last_reason = f"parameter {param.name!r} cannot share a kernel call"
                    return False
                members.setdefault(keys[0], {}).setdefault(keys[1], []).append((param, None, layout_input.plan))
                if layout_input.plan.decays is None:
                    asked.append((param, layout_input.decays))
        self._asked_decays = AskedDecays(
            [param for param, _ in asked], [param.name for param, _ in asked], [decays for _, decays in asked]
        )
        previous = {id(t): t for bank in self.banks for t in bank.tensors}
        self.banks = [Bank(key, by_kernel, self.threads) for key, by_kernel in members.items()]
        self.outside = [p for _, params in context.groups for p in params if not _updated(p, context.only)]
        self._listed = _listed_count(context.groups)
        self._only = context.only
        self._clip_inputs = _clip_inputs(trained, self.banks)
        now = {id(t) for bank in self.banks for t in bank.tensors}
        for tensor_id, tensor in previous.items():
            if tensor_id not in now:
                own_storage(tensor)
        self._lr_tables = {}
        for group_index in {bank.key.param_group for bank in self.banks}:
            groups = [g for bank in self.banks if bank.key.param_group == group_index for g in bank.groups]
            scales = sorted({g.key.update_scale for g in groups})
            for group in groups:
                group.lr_index = scales.index(group.key.update_scale)
            self._lr_tables[group_index] = _LrTable(scales, context.global_lr)
        self.rebuilds += 1
        return True

    def run_kernels(self, context: StepContext) -> None:
        """The update of a step alone, on the banks as they are (no check of the
        views, no layout): the kernel calls, lr and beta-power ops. The floor a
        benchmark compares the step with; it advances the optimizer state as a step does."""
        global_lr = context.global_lr
        current, lrs, update = None, None, None
        for bank in self.banks:
            index = bank.key.param_group
            if index != current:
                # One pass per parameter group, as the per-parameter step,
                # clipped per group as Paddle clips (each group its own norm).
                if context.grad_clip is not None:
                    params, need_clip, flats = self._clip_inputs[index]
                    clip_gradients(context.grad_clip, list(map(_GRAD_OF, params)), need_clip, flat_grads=flats,
                                   run=self.threads.run)
                update = UpdatePass(lambda: global_lr)
                lrs = self._lr_tables[index].refresh(global_lr)
                current = index
            bank.update(lrs, update, context.settings[index], context.coeffs[index], context)

    # ------------------------------------------------------------ clear_grad
    def clear_grad(self, groups: list[tuple[dict[str, Any] | None, list[Any]]], set_to_zero: bool) -> bool:
        """``clear_grad(set_to_zero=True)`` of the parameters listed in ``groups``:
        one zeroing op per intact bank and Paddle's per-parameter clearing for
        every other parameter. False (the caller clears as Paddle does) with
        ``set_to_zero=False`` or no banks."""
        if not set_to_zero or not self.banks or self.disabled is not None:
            return False
        rest = list(self.outside)
        for bank in self.banks:
            if not bank.zero_grads(self._views_checked):
                rest.extend(bank.params)
        if _listed_count(groups) != self._listed:  # a parameter group added since the layout
            banked = {id(p) for bank in self.banks for p in bank.params}
            rest = [p for _, params in groups for p in params if id(p) not in banked]
        for param in rest:
            if not param.stop_gradient:
                param.clear_gradient(True)
        return True


def _on_next_backward(step: weakref.ref[MultiTensorStep]) -> None:
    """Have the next backward (Paddle runs a final hook once, then drops it)
    mark ``step``'s gradients as to be checked again: that backward may
    replace a gradient (one cleared with ``clear_gradient``) by a new tensor."""

    def backward_ran() -> None:
        alive = step()
        if alive is not None:
            alive._views_checked = False

    core.eager._add_backward_final_hook(backward_ran)


def _shareable(param: Any) -> bool:
    """Whether ``param`` and its gradient can be views of flat buffers, before any state is made for it."""
    grad = param._grad_ivar()
    if grad.is_selected_rows() or not param._is_initialized() or numel(param) == 0:
        return False
    if getattr(param, "regularizer", None) is not None or param.is_dist():
        return False
    attr = getattr(param, "optimize_attr", None)
    if attr is None or "learning_rate" not in attr or is_tensor(attr["learning_rate"]):
        return False
    return grad.dtype == param.dtype and list(grad.shape) == list(param.shape)


def _keys(group_index: int, param: Any, layout_input: LayoutInput) -> tuple[BankKey, KernelKey] | None:
    """The param's bank and kernel keys; None where its update cannot share a kernel call."""
    plan = layout_input.plan
    master = plan.master_weight is not None
    if not master and param.place.is_cpu_place() and param.dtype not in (paddle.float32, paddle.float64):
        return None  # no half-precision kernel on CPU: the per-parameter path raises as AdamW does
    base_scale = param.optimize_attr["learning_rate"]
    update_scale = base_scale * layout_input.ratio
    beta1_pow, beta2_pow = plan.moments[3], plan.moments[4]
    bank = BankKey(
        group_index, param.dtype, param._grad_ivar().dtype, str(param.place), master, plan.fp32_fallback,
        getattr(param, "need_clip", True) is not False, float(beta1_pow.item()), float(beta2_pow.item()),
    )
    return bank, KernelKey(layout_input.decays, float(base_scale), float(update_scale))
